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
import { makeApp, NOW } from "./_app.ts";

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
  // Another route has a line of its own; a path no route answers is
  // named by the pattern it matched, never as sent.
  await refused("/v1/jobs", "length");
  await refused("/v1/x%0Aforged%20line", "length");
  const third = lines.filter((l) => / refused 413/.test(l));
  assert.equal(third.length, 4, lines.join(" | "));
  assert.match(third[2]!, /^relayer POST \/v1\/jobs refused 413/);
  assert.match(third[3]!, /^relayer POST \/v1\/\* refused 413/);
  assert.ok(lines.every((l) => !l.includes("forged")), lines.join(" | "));
});

Deno.test("a 413 refusal's log line is at most once a minute per route whatever method the request names: a flood of made-up methods is one line, not one line (and one record held for good) per method", async () => {
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { log: (line: string) => lines.push(line), maxBodyBytes: 1024 },
  });
  // HTTP takes any token as a method (Deno.serve took one of 60,000
  // characters): each was a key of its own in the log's limit.
  for (let i = 0; i < 50; i++) {
    const res = await app.request("/v1/jobs", {
      method: `M${i}${"X".repeat(1000)}`,
      body: "x".repeat(2048),
      headers: { "content-length": "2048" },
    });
    assert.equal(res.status, 413);
    await res.body?.cancel();
  }
  const refused = lines.filter((l) => / refused 413/.test(l));
  assert.equal(refused.length, 1, `${refused.length} lines`);
  assert.ok(refused[0]!.length < 300, `a line of ${refused[0]!.length}`);
  // The methods the routes answer keep their own line.
  for (const method of ["POST", "PUT", "POST"]) {
    const res = await app.request("/v1/jobs", {
      method,
      body: "x".repeat(2048),
      headers: { "content-length": "2048" },
    });
    await res.body?.cancel();
  }
  assert.equal(lines.filter((l) => / refused 413/.test(l)).length, 3);
});

Deno.test("a 413 refused by its Content-Length is logged under the route that would have answered it, not a later pattern the path also fits", async () => {
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { log: (line: string) => lines.push(line), maxBodyBytes: 1024 },
  });
  // A job id holds a '/', so its redrive path, escaped, fits the discard
  // route's 405 pattern too, registered after the redrive route's. (A
  // POST there, the redrive, reads no body and is not refused for one.)
  const res = await app.request("/v1/dead-letters/pi_1%2Fsettle/redrive", {
    method: "PUT",
    body: "x".repeat(2048),
    headers: { "content-length": "2048" },
  });
  assert.equal(res.status, 413);
  await res.body?.cancel();
  assert.match(
    lines.join("\n"),
    /^relayer PUT \/v1\/dead-letters\/:jobId\/redrive refused 413/m,
  );
});
