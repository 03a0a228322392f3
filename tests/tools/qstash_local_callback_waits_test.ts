/**
 * The local QStash waits before a failure callback's retry as before a
 * message's: the answer's `Retry-After` when it gives one (0 too), else
 * QStash's own backoff, e^(2.5 n) seconds before the n-th retry.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type LocalDelivery,
  startLocalQStash,
} from "../../tools/qstash_local.ts";

const TOKEN = "local-qstash-token-0123456789";
const KEY = "sig_local_current_0123456789";

/** Resolves once `done` holds, polling every 20 ms for up to 15 s. */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!done()) {
    assert.ok(Date.now() < deadline, "timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

Deno.test("startLocalQStash() retries a failure callback after its answer's Retry-After (0 too), else after QStash's own e^(2.5 n) s", async () => {
  const reports: LocalDelivery[] = [];
  // A cap over a day, so that the wait is QStash's own; the test stops
  // once the second call is answered, before its retry is due.
  const qstash = startLocalQStash({
    token: TOKEN,
    signingKey: KEY,
    ownBackoffCapMs: 2 * 86_400_000,
    report: (d) => reports.push(d),
  });
  let calls = 0;
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      await request.body?.cancel();
      if (new URL(request.url).pathname !== "/v1/qstash/failed") {
        return new Response("down", { status: 503 });
      }
      // The first call asks for its retry at once; the second says nothing.
      return ++calls === 1
        ? new Response("busy", { status: 503, headers: { "retry-after": "0" } })
        : new Response("busy", { status: 503 });
    },
  );
  const base = `http://127.0.0.1:${receiver.addr.port}`;
  try {
    const published = await fetch(
      `${qstash.url}/v2/publish/${encodeURIComponent(`${base}/v1/qstash`)}`,
      {
        method: "POST",
        body: JSON.stringify({ intentId: "pi_0007", kind: "settle" }),
        headers: {
          authorization: `Bearer ${TOKEN}`,
          "upstash-retries": "0",
          "upstash-failure-callback": `${base}/v1/qstash/failed`,
          "upstash-failure-callback-retries": "3",
        },
      },
    );
    assert.equal(published.status, 201);
    await published.body?.cancel();
    const callbacks = () =>
      reports.filter((d) => d.kind === "failure-callback");
    await until(() => callbacks().length === 2);
    assert.deepEqual(
      callbacks().map((d) => [d.status, d.nextInMs]),
      [[503, 0], [503, Math.round(Math.exp(5) * 1000)]],
    );
  } finally {
    await qstash.stop();
    await receiver.shutdown();
  }
});
