/**
 * A route that reads no body (a redrive, a discard, the ops routes' reads)
 * answers the same whatever body comes and however it is framed: a body
 * over the limit with a Content-Length is not refused 413 while the same
 * body sent chunked is ignored. A route that reads its body (a
 * resolution) refuses one over the limit in both framings. Over a real
 * Deno.serve and raw sockets, as a client frames them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { type Job, MemoryStore, ScriptedSender } from "../../mod.ts";

const OPS = "ops-token-for-unread-body-tests";
/** Over the 64 KiB limit. */
const BIG = "x".repeat(70 * 1024);

/** The status line of the answer to `head` and `body`, framed as said, on a connection of its own. */
async function statusOf(
  port: number,
  head: string,
  body: string,
  framing: "length" | "chunked",
): Promise<string> {
  const bytes = new TextEncoder().encode(body);
  const text = framing === "length"
    ? `${head}Content-Length: ${bytes.length}\r\n\r\n${body}`
    : `${head}Transfer-Encoding: chunked\r\n\r\n${
      bytes.length.toString(16)
    }\r\n${body}\r\n0\r\n\r\n`;
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let read = "";
  try {
    // A server that answers before it read the body may close on the
    // rest: what it sent is still read.
    await conn.write(new TextEncoder().encode(text)).catch(() => {});
    const buffer = new Uint8Array(16_384);
    const decoder = new TextDecoder();
    for (;;) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) break;
      read += decoder.decode(buffer.subarray(0, n), { stream: true });
    }
  } finally {
    conn.close();
  }
  return /^HTTP\/1\.1 (\d{3})/.exec(read)?.[1] ?? `no answer: ${read}`;
}

const headOf = (method: string, path: string) =>
  `${method} ${path} HTTP/1.1\r\nHost: relayer\r\nConnection: close\r\nAuthorization: Bearer ${OPS}\r\n`;

Deno.test("on a real Deno.serve, a route that reads no body answers alike whether a body over the limit comes with a Content-Length or chunked; one that reads it refuses it 413 both ways", async () => {
  const store = new MemoryStore();
  const published: Job[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    insecureDev: true, // an unsigned delivery makes the dead letters
    opsToken: OPS,
    log: () => {},
    redriveTo: {
      publish: (job: Job) => Promise.resolve(void published.push(job)),
    },
  });
  for (const id of ["pi_0001", "pi_0002"]) {
    await store.createIntent({ id, state: "created" });
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body: JSON.stringify({ job: { intentId: id, kind: "settle" } }),
    });
    assert.equal((await res.json()).outcome, "poison");
  }
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  try {
    const port = server.addr.port;
    const answers: Record<string, string> = {};
    for (const framing of ["length", "chunked"] as const) {
      const id = framing === "length" ? "pi_0001" : "pi_0002";
      answers[`redrive ${framing}`] = await statusOf(
        port,
        headOf("POST", `/v1/dead-letters/${id}/settle/redrive`),
        BIG,
        framing,
      );
      answers[`read ${framing}`] = await statusOf(
        port,
        headOf("GET", `/v1/intents/${id}`),
        BIG,
        framing,
      );
      answers[`list ${framing}`] = await statusOf(
        port,
        headOf("GET", "/v1/dead-letters"),
        BIG,
        framing,
      );
      answers[`discard ${framing}`] = await statusOf(
        port,
        headOf("DELETE", "/v1/dead-letters/pi_0404/settle"),
        BIG,
        framing,
      );
      answers[`resolve ${framing}`] = await statusOf(
        port,
        headOf("POST", `/v1/intents/${id}/resolve`),
        BIG,
        framing,
      );
    }
    assert.deepEqual(answers, {
      "redrive length": "202",
      "read length": "200",
      "list length": "200",
      "discard length": "404",
      "resolve length": "413",
      "redrive chunked": "202",
      "read chunked": "200",
      "list chunked": "200",
      "discard chunked": "404",
      "resolve chunked": "413",
    });
    assert.deepEqual(published.map((job) => job.intentId), [
      "pi_0001",
      "pi_0002",
    ]);
  } finally {
    await server.shutdown();
  }
});

Deno.test("on a real Deno.serve, every route that reads no body, by each of its path forms, answers a body over the limit with a Content-Length as it answers it chunked, never 413", async () => {
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
    redriveTo: { publish: () => Promise.resolve() },
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  try {
    const port = server.addr.port;
    const routes: [string, string][] = [
      ["GET", "/v1/intents/pi_0404"],
      ["GET", "/v1/dead-letters"],
      ["POST", "/v1/dead-letters/pi_0404%2Fsettle/redrive"],
      ["POST", "/v1/dead-letters/pi_0404/settle/redrive"],
      ["POST", "/v1/dead-letters/jobs/m-1/unreadable/redrive"],
      ["DELETE", "/v1/dead-letters/pi_0404%2Fsettle"],
      ["DELETE", "/v1/dead-letters/pi_0404/settle"],
      ["DELETE", "/v1/dead-letters/jobs/m-1/unreadable"],
    ];
    for (const [method, path] of routes) {
      const length = await statusOf(port, headOf(method, path), BIG, "length");
      const chunked = await statusOf(
        port,
        headOf(method, path),
        BIG,
        "chunked",
      );
      assert.notEqual(length, "413", `${method} ${path}`);
      assert.equal(length, chunked, `${method} ${path}`);
    }
  } finally {
    await server.shutdown();
  }
});
