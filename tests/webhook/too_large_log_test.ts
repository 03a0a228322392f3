/**
 * A request refused for its size (413) is said in the log, as a 401 is: at
 * most once a minute per route, with the count since the last line. A
 * queue that keeps sending bodies over the limit (a publisher that pads
 * its jobs, a route a proxy sends another queue's traffic to) strands its
 * jobs, and the operator must see it; a flood must not flood the log.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, NOW, OPS } from "./_app.ts";

Deno.test("a 413 refusal is logged on any route, at most once a minute per route, with the count since the last line", async () => {
  const lines: string[] = [];
  let clock = NOW;
  const { app } = await makeApp({
    deps: {
      log: (line: string) => lines.push(line),
      now: () => clock,
      maxBodyBytes: 1024,
    },
  });
  const refused = async (path: string, framing: "length" | "chunked") => {
    const body = "x".repeat(2048);
    const res = await app.request(path, {
      method: "POST",
      body: framing === "length" ? body : new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(body));
          controller.close();
        },
      }),
      headers: {
        "x-signature": `t=${NOW / 1000},v1=${"0".repeat(64)}`,
        authorization: `Bearer ${OPS}`,
        ...(framing === "length"
          ? { "content-length": String(body.length) }
          : { "transfer-encoding": "chunked" }),
      },
    });
    assert.equal(res.status, 413, `${path} ${framing}`);
    await res.body?.cancel();
  };
  await refused("/v1/deliveries", "length");
  await refused("/v1/deliveries", "chunked");
  await refused("/v1/deliveries", "length");
  const first = lines.filter((l) => / refused 413/.test(l));
  assert.equal(first.length, 1, lines.join(" | "));
  assert.match(
    first[0]!,
    /^relayer POST \/v1\/deliveries refused 413: A request body may be at most 1024 bytes/,
  );
  clock += 60_000;
  await refused("/v1/deliveries", "length");
  const second = lines.filter((l) => / refused 413/.test(l));
  assert.equal(second.length, 2, lines.join(" | "));
  assert.match(second[1]!, /\(3 refused since the last line\)/);
  // Another route has a line of its own.
  await refused("/v1/jobs", "length");
  const third = lines.filter((l) => / refused 413/.test(l));
  assert.equal(third.length, 3, lines.join(" | "));
  assert.match(third[2]!, /^relayer POST \/v1\/jobs refused 413/);
});

Deno.test("a body over the limit sent with a made-up method is answered 405, never 413, and logs nothing: a flood of such methods holds no log line or record per method", async () => {
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { log: (line: string) => lines.push(line), maxBodyBytes: 1024 },
  });
  // HTTP takes any token as a method (Deno.serve took one of 60,000
  // characters): none is a route's, so each is a 405.
  for (let i = 0; i < 50; i++) {
    const res = await app.request("/v1/jobs", {
      method: `M${i}${"X".repeat(1000)}`,
      body: "x".repeat(2048),
      headers: { "content-length": "2048", authorization: `Bearer ${OPS}` },
    });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get("allow"), "POST");
    await res.body?.cancel();
  }
  assert.deepEqual(lines, []);
  // The route's own method is refused for its size, and logged once.
  for (const [method, status] of [["POST", 413], ["PUT", 405], ["POST", 413]]) {
    const res = await app.request("/v1/jobs", {
      method: method as string,
      body: "x".repeat(2048),
      headers: { "content-length": "2048", authorization: `Bearer ${OPS}` },
    });
    assert.equal(res.status, status, `${method}`);
    await res.body?.cancel();
  }
  assert.equal(lines.filter((l) => / refused 413/.test(l)).length, 1);
});

Deno.test("a 413 refused by its Content-Length is logged under the route that would have answered it, not a later pattern the path also fits", async () => {
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { log: (line: string) => lines.push(line), maxBodyBytes: 1024 },
  });
  // The resolve route's 405 pattern, registered after it, fits its path too.
  const res = await app.request("/v1/intents/pi_1/resolve", {
    method: "POST",
    body: "x".repeat(2048),
    headers: { "content-length": "2048", authorization: `Bearer ${OPS}` },
  });
  assert.equal(res.status, 413);
  await res.body?.cancel();
  assert.match(
    lines.join("\n"),
    /^relayer POST \/v1\/intents\/:id\/resolve refused 413/m,
  );
  // A job id holds a '/', so its redrive path, escaped, fits the discard
  // route's 405 pattern too, registered after the redrive route's: a PUT
  // there is the redrive route's 405, not the discard's, nor a 413.
  const put = await app.request("/v1/dead-letters/pi_1%2Fsettle/redrive", {
    method: "PUT",
    body: "x".repeat(2048),
    headers: { "content-length": "2048" },
  });
  assert.equal(put.status, 405);
  assert.equal(put.headers.get("allow"), "POST");
  await put.body?.cancel();
});
