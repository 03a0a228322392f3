/**
 * `deno task qstash-local`: publishes taken by the stand-in reach the
 * service as QStash delivers them, signed for their URL, and a message
 * whose retries run out reaches its failure callback.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type LocalDelivery,
  type LocalQStash,
  startLocalQStash,
} from "../../tools/qstash_local.ts";
import { openService, type Service } from "../../main.ts";
import { loadConfig } from "../../webhook/config.ts";
import { signer } from "../../examples/signer_stub.ts";

const TOKEN = "local-qstash-token-0123456789";
const KEY = "sig_local_current_0123456789";
const OPS = "local-ops-token-0123456789";

/**
 * The local QStash with the test's token and signing key, its backoff of
 * its own capped at `ownBackoffCapMs` (the stand-in's cap unless given),
 * and the deliveries it reports, in order.
 */
function localQStash(
  ownBackoffCapMs?: number,
): { qstash: LocalQStash; reports: LocalDelivery[] } {
  const reports: LocalDelivery[] = [];
  const qstash = startLocalQStash({
    token: TOKEN,
    signingKey: KEY,
    ...(ownBackoffCapMs === undefined ? {} : { ownBackoffCapMs }),
    report: (d) => reports.push(d),
  });
  return { qstash, reports };
}

/** Resolves once `done` holds, polling every 20 ms for up to 15 s. */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!done()) {
    assert.ok(Date.now() < deadline, "timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * main.ts behind a loopback server, which the stand-in's deliveries reach
 * (its PUBLIC_URL), publishing to the stand-in at `qstashUrl`, its signer
 * at `signerPort`: `open(policy)` starts it with the policy's settings;
 * `close()` stops the server, then the service.
 */
function behindLoopback(qstashUrl: string, signerPort: number): {
  open(policy: Record<string, string>): Promise<Service>;
  close(): Promise<void>;
} {
  let service: Service | undefined;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request, info) =>
      service
        ? service.fetch(request, info)
        : new Response(null, { status: 503 }),
  );
  return {
    async open(policy) {
      service = await openService(
        loadConfig({
          SENDER_URL: `http://127.0.0.1:${signerPort}`,
          OPS_TOKEN: OPS,
          KV_PATH: ":memory:",
          QSTASH_URL: qstashUrl,
          QSTASH_TOKEN: TOKEN,
          QSTASH_CURRENT_SIGNING_KEY: KEY,
          QSTASH_NEXT_SIGNING_KEY: "sig_local_next_0123456789",
          PUBLIC_URL: `http://127.0.0.1:${server.addr.port}`,
          ...policy,
          CLOCK_SKEW: "0", // one process, one clock
        }),
        { log: () => {} },
      );
      return service;
    },
    async close() {
      await server.shutdown();
      await service?.close();
    },
  };
}

/** Creates pi_0001, authorized, by the ops route, then publishes its job `times` times by `POST /v1/jobs`. */
async function publishJob(service: Service, times = 1): Promise<void> {
  const ops = { authorization: `Bearer ${OPS}` };
  const created = await service.app.request("/v1/intents", {
    method: "POST",
    headers: ops,
    body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
  });
  assert.equal(created.status, 201);
  for (let i = 0; i < times; i++) {
    const queued = await service.app.request("/v1/jobs", {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
    });
    assert.equal(queued.status, 202);
  }
}

Deno.test("startLocalQStash() delivers a job main.ts published, signed for its URL and counted from 0, until the service settles it", async () => {
  const { qstash, reports } = localQStash();
  const stub = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    signer,
  );
  const local = behindLoopback(qstash.url, stub.addr.port);
  try {
    const service = await local.open({
      MAX_DELIVERIES: "4",
      BASE: "250ms",
      CAP: "1s",
      STUCK_AFTER: "0",
    });
    await publishJob(service);
    await until(() => reports.some((d) => d.status === 200));
    // Every delivery verified (a 401 would be refused, not retried to 200),
    // each one's Upstash-Retried one more than the last.
    assert.deepEqual(reports.map((d) => d.retried), reports.map((_, i) => i));
    assert.ok(reports.every((d) => d.kind === "delivery"));
    assert.ok(reports.slice(0, -1).every((d) => d.status === 503));
    assert.equal((await service.store.getIntent("pi_0001"))?.state, "settled");
  } finally {
    await qstash.stop();
    await local.close();
    await stub.shutdown();
  }
});

Deno.test("startLocalQStash() calls a message's failure callback, signed for its URL, once its retries are spent", async () => {
  const { qstash, reports } = localQStash(10);
  const seen: {
    path: string;
    retried: string | null;
    token: string;
    body: string;
  }[] = [];
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      seen.push({
        path: new URL(request.url).pathname,
        retried: request.headers.get("upstash-retried"),
        token: request.headers.get("upstash-signature") ?? "",
        body: await request.text(),
      });
      // The callback is taken: it is not retried.
      return new URL(request.url).pathname === "/v1/qstash/failed"
        ? new Response(null, { status: 200 })
        : new Response("down", { status: 503 });
    },
  );
  const base = `http://127.0.0.1:${receiver.addr.port}`;
  try {
    const job = JSON.stringify({ intentId: "pi_0002", kind: "settle" });
    const published = await fetch(
      `${qstash.url}/v2/publish/${encodeURIComponent(`${base}/v1/qstash`)}`,
      {
        method: "POST",
        body: job,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          "upstash-retries": "1",
          "upstash-failure-callback": `${base}/v1/qstash/failed`,
        },
      },
    );
    assert.equal(published.status, 201);
    await published.body?.cancel();
    await until(() => reports.some((d) => d.kind === "failure-callback"));
    assert.deepEqual(
      seen.map((s) => [s.path, s.retried]),
      [["/v1/qstash", "0"], ["/v1/qstash", "1"], ["/v1/qstash/failed", null]],
    );
    const callback = JSON.parse(seen[2]!.body);
    assert.equal(atob(callback.sourceBody), job);
    assert.equal(callback.retried, 1);
    assert.equal(callback.sourceMessageId, reports[0]!.messageId);
    // Signed with the key, for the callback's URL.
    const [header, claims, mac] = seen[2]!.token.split(".");
    const key = await crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(KEY),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const expected = btoa(String.fromCharCode(
      ...new Uint8Array(
        await crypto.subtle.sign(
          "HMAC",
          key,
          new TextEncoder().encode(`${header}.${claims}`),
        ),
      ),
    )).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    assert.equal(mac, expected);
    const sub = JSON.parse(
      atob(claims!.replaceAll("-", "+").replaceAll("_", "/")),
    ).sub;
    assert.equal(sub, `${base}/v1/qstash/failed`);
  } finally {
    await qstash.stop();
    await receiver.shutdown();
  }
});

/**
 * A receiver whose `/v1/qstash` answers 503 and whose failure callback
 * answers `callback(n)` at its n-th call, and a job published to it
 * through `qstash` with `retries` and `headers` (and the failure callback
 * set): `calls()` counts the callback's calls; `shutdown()` stops it.
 * Should the publish fail, it stops the receiver and `qstash`.
 */
async function failingToCallback(
  qstash: { url: string; stop(): Promise<void> },
  intentId: string,
  retries: number,
  headers: Record<string, string>,
  callback: (n: number) => Response,
): Promise<{ calls(): number; shutdown(): Promise<void> }> {
  let calls = 0;
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      await request.body?.cancel();
      if (new URL(request.url).pathname !== "/v1/qstash/failed") {
        return new Response("down", { status: 503 });
      }
      return callback(++calls);
    },
  );
  const base = `http://127.0.0.1:${receiver.addr.port}`;
  try {
    const published = await fetch(
      `${qstash.url}/v2/publish/${encodeURIComponent(`${base}/v1/qstash`)}`,
      {
        method: "POST",
        body: JSON.stringify({ intentId, kind: "settle" }),
        headers: {
          authorization: `Bearer ${TOKEN}`,
          "upstash-retries": String(retries),
          "upstash-failure-callback": `${base}/v1/qstash/failed`,
          ...headers,
        },
      },
    );
    assert.equal(published.status, 201);
    await published.body?.cancel();
  } catch (error) {
    await receiver.shutdown();
    await qstash.stop();
    throw error;
  }
  return { calls: () => calls, shutdown: () => receiver.shutdown() };
}

Deno.test("startLocalQStash() retries a failure callback not answered 2xx on QStash's own backoff, Upstash-Failure-Callback-Retries times, else as often as the message", async () => {
  for (
    const [headers, takenAt, calls] of [
      // Answered 503 twice, then taken.
      [{ "upstash-failure-callback-retries": "5" }, 3, 3],
      // Never taken: one call and its two retries.
      [{ "upstash-failure-callback-retries": "2" }, Infinity, 3],
      // None given: the message's retries (1), so one call and one retry.
      [{}, Infinity, 2],
    ] as const
  ) {
    const { qstash, reports } = localQStash(10);
    const receiver = await failingToCallback(
      qstash,
      "pi_0006",
      1,
      headers,
      (n) =>
        n === takenAt
          ? new Response(null, { status: 200 })
          : new Response("busy", { status: 503 }),
    );
    try {
      const callbacks = () =>
        reports.filter((d) => d.kind === "failure-callback");
      await until(() => callbacks().at(-1)?.nextInMs === null);
      // Nothing more comes after the last.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.calls(), calls, JSON.stringify(headers));
      assert.deepEqual(
        callbacks().map((d) => [d.status, d.nextInMs === null]),
        Array.from(
          { length: calls },
          (_, i) => [
            i === calls - 1 && takenAt === calls ? 200 : 503,
            i === calls - 1,
          ],
        ),
      );
    } finally {
      await qstash.stop();
      await receiver.shutdown();
    }
  }
});

Deno.test("startLocalQStash() waits QStash's own backoff before a retry an answer without Retry-After asks for: e^(2.5 n) seconds before retry n, shortened to its cap", async () => {
  // A cap over a day, so that the wait is QStash's own; the test stops
  // once the first delivery is answered, before its retry is due.
  const { qstash, reports } = localQStash(2 * 86_400_000);
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      await request.body?.cancel();
      return new Response("down", { status: 503 });
    },
  );
  const base = `http://127.0.0.1:${receiver.addr.port}`;
  try {
    const published = await fetch(
      `${qstash.url}/v2/publish/${encodeURIComponent(`${base}/v1/qstash`)}`,
      {
        method: "POST",
        body: JSON.stringify({ intentId: "pi_0003", kind: "settle" }),
        headers: { authorization: `Bearer ${TOKEN}`, "upstash-retries": "3" },
      },
    );
    assert.equal(published.status, 201);
    await published.body?.cancel();
    await until(() => reports.length > 0);
    // QStash's first retry comes 12 s after the first delivery (e^2.5 s,
    // then 2m28s, 30m…), not 1 s (e^0).
    assert.deepEqual(
      reports.map((d) => [d.retried, d.status, d.nextInMs]),
      [[0, 503, Math.round(Math.exp(2.5) * 1000)]],
    );
  } finally {
    await qstash.stop();
    await receiver.shutdown();
  }
});

Deno.test("startLocalQStash(): a job POST /v1/jobs published twice goes on as two messages, each counted from 0, and gives up no sooner than the policy's window, after the rescue", async () => {
  const reports: (LocalDelivery & { at: number })[] = [];
  const t0 = performance.now();
  const qstash = startLocalQStash({
    token: TOKEN,
    signingKey: KEY,
    report: (d) => reports.push({ ...d, at: performance.now() - t0 }),
  });
  // Every send may have left: a 502 without flags.
  const sends: { at: number; replace: boolean }[] = [];
  const stub = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      if (new URL(request.url).pathname !== "/send") {
        return Response.json({ status: "pending" });
      }
      const { replace } = await request.json();
      sends.push({ at: performance.now() - t0, replace });
      return Response.json({ error: "rpc: connection refused" }, {
        status: 502,
      });
    },
  );
  const local = behindLoopback(qstash.url, stub.addr.port);
  try {
    const service = await local.open({
      // A window of 5 × 1 s per message, STUCK_AFTER 4 s within it.
      MAX_DELIVERIES: "6",
      BASE: "1s",
      CAP: "1s",
      JITTER: "none",
      STUCK_AFTER: "4s",
    });
    // Sent again, as after a lost answer: QStash takes two messages.
    await publishJob(service, 2);
    // The first message to end: the other may be busy behind the
    // rescue's lease then, and comes back to find the intent in review.
    await until(() => reports.some((d) => d.status === 200));
    const ids = [...new Set(reports.map((d) => d.messageId))];
    assert.equal(ids.length, 2);
    for (const id of ids) {
      const mine = reports.filter((d) => d.messageId === id);
      assert.deepEqual(mine.map((d) => d.retried), mine.map((_, i) => i));
    }
    const intent = await service.store.getIntent("pi_0001");
    assert.equal(intent?.state, "needs_review");
    // The first answer that ended a message with the intent in review.
    const first = reports.find((d) => d.status === 200)!;
    assert.ok(
      first.at >= 5_000 - 100,
      `gave up ${
        Math.round(first.at)
      } ms after publishing, before the policy's window of 5000 ms: ${
        JSON.stringify(reports)
      }`,
    );
    assert.deepEqual(
      sends.map((s) => s.replace),
      [false, true],
      `sends: ${JSON.stringify(sends)}`,
    );
  } finally {
    await qstash.stop();
    await local.close();
    await stub.shutdown();
  }
});

Deno.test("startLocalQStash() retries a failure callback after its answer's Retry-After (0 too), else after QStash's own e^(2.5 n) s", async () => {
  // A cap over a day, so that the wait is QStash's own; the test stops
  // once the second call is answered, before its retry is due.
  const { qstash, reports } = localQStash(2 * 86_400_000);
  // The first call asks for its retry at once; the second says nothing.
  const receiver = await failingToCallback(
    qstash,
    "pi_0007",
    0,
    { "upstash-failure-callback-retries": "3" },
    (n) =>
      n === 1
        ? new Response("busy", { status: 503, headers: { "retry-after": "0" } })
        : new Response("busy", { status: 503 }),
  );
  try {
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

Deno.test("startLocalQStash() waits a failure callback's Retry-After in seconds, each retry's report naming the message's last delivery", async () => {
  const { qstash, reports } = localQStash(10);
  // The first call asks for its retry a second on; the second takes it.
  const receiver = await failingToCallback(
    qstash,
    "pi_0008",
    0,
    { "upstash-failure-callback-retries": "2" },
    (n) =>
      n === 1
        ? new Response("busy", { status: 503, headers: { "retry-after": "1" } })
        : new Response(null, { status: 200 }),
  );
  try {
    const callbacks = () =>
      reports.filter((d) => d.kind === "failure-callback");
    const first = performance.now();
    await until(() => callbacks().length === 2);
    assert.ok(performance.now() - first >= 900, "retried before its second");
    assert.deepEqual(
      callbacks().map((d) => [d.status, d.nextInMs, d.retried]),
      [[503, 1_000, 0], [200, null, 0]],
    );
  } finally {
    await qstash.stop();
    await receiver.shutdown();
  }
});
