/**
 * A body over the limit does not hide what else is wrong with a request:
 * a path no route answers is a 404 and a known path's wrong method a 405,
 * whatever its Content-Length says, and a route checks its headers (an
 * ops route its token, a delivery route its signature's form, any route
 * that it is on) before its body's size, by Content-Length as when the
 * body is chunked.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { makeApp, NOW, OPS } from "./_app.ts";

const BIG = "x".repeat(2048);

/** A body of `text` ({@linkcode BIG}), framed by its Content-Length or chunked. */
function bodyOf(framing: "length" | "chunked", text = BIG) {
  return framing === "length"
    ? { body: text, headers: { "content-length": String(text.length) } }
    : {
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(text));
          controller.close();
        },
      }),
      headers: { "transfer-encoding": "chunked" },
    };
}

Deno.test("createApp() answers a body over the limit on a path no route answers 404, and on a known path's wrong method 405 with Allow, not 413", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    deps: { log: (line: string) => lines.push(line), maxBodyBytes: 1024 },
  });
  const cases = [
    ["POST", "/v1/delivery", 404, null],
    ["POST", "/v1/dead-letters/a/b/c/d/e", 404, null],
    ["POST", "/v1/intents/pi_0001/resolved", 404, null],
    ["PUT", "/v1/deliveries", 405, "POST"],
    ["PATCH", "/v1/intents/pi_0001", 405, "GET, HEAD"],
    ["PUT", "/v1/intents/pi_0001/resolve", 405, "POST"],
    ["PUT", "/v1/jobs", 405, "POST"],
  ] as const;
  for (const [method, path, status, allow] of cases) {
    const { body, headers } = bodyOf("length");
    const res = await app.request(path, {
      method,
      body,
      headers: { ...headers, authorization: `Bearer ${OPS}` },
    });
    const problem = await res.json();
    assert.equal(res.status, status, `${method} ${path}: ${problem.detail}`);
    assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
  }
  assert.equal(writes.length, 0);
  assert.deepEqual(lines.filter((l) => / refused /.test(l)), []);
});

Deno.test("createApp() checks an ops route's token before its body's size: 401 for a body over the limit by its Content-Length as when chunked, 413 both ways once the token passes", async () => {
  const { app, writes } = await makeApp({
    deps: { log: () => {}, maxBodyBytes: 1024 },
  });
  for (
    const path of ["/v1/intents/pi_0001/resolve", "/v1/intents", "/v1/jobs"]
  ) {
    for (const framing of ["length", "chunked"] as const) {
      for (
        const [token, status] of [[undefined, 401], [
          "wrong-token-0000000",
          401,
        ], [OPS, 413]] as const
      ) {
        const { body, headers } = bodyOf(framing);
        const res = await app.request(path, {
          method: "POST",
          body,
          headers: token === undefined
            ? headers
            : { ...headers, authorization: `Bearer ${token}` },
        });
        const problem = await res.json();
        assert.equal(
          res.status,
          status,
          `${path} ${framing} ${token ?? "no token"}: ${problem.detail}`,
        );
        if (status === 401) {
          assert.equal(
            problem.detail,
            "Send the ops token as 'Authorization: Bearer <OPS_TOKEN>'.",
          );
        }
      }
    }
  }
  assert.equal(writes.length, 0);
});

Deno.test("createApp() checks a delivery route's headers before its body's size: a missing signature is a 401 and a route that is off a 503, by Content-Length as when chunked", async () => {
  const { app } = await makeApp({
    deps: { log: () => {}, maxBodyBytes: 1024 },
  });
  const signed = { "x-signature": `t=${NOW / 1000},v1=${"0".repeat(64)}` };
  for (const framing of ["length", "chunked"] as const) {
    for (
      const [headers, status] of [
        [{}, 401],
        [{ "x-signature": "v1=00" }, 401],
        [signed, 413],
      ] as const
    ) {
      const body = bodyOf(framing);
      const res = await app.request("/v1/deliveries", {
        method: "POST",
        body: body.body,
        headers: { ...body.headers, ...headers },
      });
      const problem = await res.json();
      assert.equal(
        res.status,
        status,
        `${framing} ${JSON.stringify(headers)}: ${problem.detail}`,
      );
    }
  }
  // A service with no delivery route's keys: each route is off (503),
  // however long the body: over even an envelope route's larger limit
  // (the failure callback's, 16 KiB beyond the job's base64).
  const off = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    log: () => {},
    maxBodyBytes: 1024,
    opsToken: OPS,
  });
  for (const path of ["/v1/deliveries", "/v1/qstash", "/v1/qstash/failed"]) {
    for (const framing of ["length", "chunked"] as const) {
      const body = bodyOf(framing, "x".repeat(32 * 1024));
      const res = await off.request(path, {
        method: "POST",
        body: body.body,
        headers: { ...body.headers, ...signed },
      });
      const problem = await res.json();
      assert.equal(res.status, 503, `${path} ${framing}: ${problem.detail}`);
      assert.equal(problem.type, "urn:relayer:problem:not-configured");
    }
  }
});
