/**
 * A store outage through QStash, as QStash's docs describe its retries:
 * it honours a `Retry-After` (up to a day) and otherwise waits
 * min(1 day, e^(2.5 n)) seconds before its n-th retry; the failure
 * callback gets the same number of retries as the message. Every attempt
 * is signed afresh, as QStash signs it. However long the outage (within
 * what those retries span), the intent ends resolved or recorded, never
 * stranded.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, type ReceiptStatus, type Store } from "../../mod.ts";
import { genericRequest, makeApp } from "./_app.ts";
import { QSTASH, signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const DAY_S = 86_400;
/** `QSTASH_RETRIES`' default for the default policy: `MAX_DELIVERIES − 1`. */
const RETRIES = 9;

/** QStash's wait before its retry number `n` (from 1), in seconds. */
function defaultBackoffS(n: number): number {
  return Math.min(DAY_S, Math.exp(2.5 * n));
}

/** `Retry-After` as QStash reads it: seconds, honoured up to a day. */
function waitS(retryAfter: string | null, n: number): number {
  if (retryAfter === null) return defaultBackoffS(n);
  const s = Number(retryAfter);
  assert.ok(Number.isFinite(s) && s >= 0, `Retry-After: ${retryAfter}`);
  return s > DAY_S ? defaultBackoffS(n) : s;
}

const READS = new Set(["getIntent", "deliveries", "getDeadLetter"]);

/**
 * A store that fails every call while `down()` says so, as a database
 * that cannot be reached does; with `readsAnswer`, only its writes fail
 * (a full disk, a primary gone read-only).
 */
function outage(
  store: Store,
  down: () => boolean,
  readsAnswer = false,
): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) =>
        !(readsAnswer && READS.has(String(key))) && down()
          ? Promise.reject(new Error("connect ECONNREFUSED 10.0.0.5:5432"))
          : value.apply(target, args);
    },
  });
}

/** A store holding pi_0001 mid-settlement: sent as 0xabc a second ago. */
async function settling(): Promise<MemoryStore> {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: Date.now() - 1000,
    lastBroadcast: { outcome: "sent", txHash: "0xabc", at: Date.now() - 1000 },
  });
  return memory;
}

async function run(
  outageS: number,
  options: {
    readonly readsAnswer?: boolean;
    readonly receipt?: ReceiptStatus;
    readonly from?: number;
  } = {},
) {
  const { readsAnswer = false, receipt = "pending", from = 10 } = options;
  // Mid-settlement: sent, and the receipt stays pending (unless told).
  const memory = await settling();
  let t = 0; // seconds of QStash's time since the first delivery
  const down = () => t >= from && t < from + outageS;
  const { app } = await makeApp({
    deps: {
      // The chain: 0xabc's receipt, on every ask; nothing else is sent.
      sender: {
        send: () => Promise.reject(new Error("nothing to send")),
        receipt: () => Promise.resolve(receipt),
      },
      store: outage(memory, down, readsAnswer),
      now: Date.now,
      policy: { maxDeliveries: RETRIES + 1 },
    },
  });
  const log: string[] = [];
  /** QStash delivering one message: true once it got a 2xx. */
  async function deliver(path: string, body: string): Promise<boolean> {
    for (let retried = 0; retried <= RETRIES; retried++) {
      const res = await app.request(path, {
        method: "POST",
        body,
        headers: {
          "upstash-retried": String(retried),
          "upstash-signature": await signQStash(body, {
            url: `https://relayer.example.test${path}`,
          }),
        },
      });
      const retryAfter = res.headers.get("retry-after");
      log.push(
        `t=${Math.round(t)}s ${path} #${retried} ${
          down() ? "down" : "up"
        } ${res.status} retry-after=${retryAfter}`,
      );
      await res.body?.cancel();
      if (res.status < 300) return true;
      t += waitS(retryAfter, retried + 1);
    }
    return false;
  }
  const delivered = await deliver("/v1/qstash", JSON.stringify(job));
  const resolved = delivered || await deliver(
    "/v1/qstash/failed",
    JSON.stringify({
      sourceBody: btoa(JSON.stringify(job)),
      retried: RETRIES,
      sourceMessageId: "msg_1",
      dlqId: "dlq_1",
    }),
  );
  t = Infinity; // the store is back, to read what is left
  return {
    resolved,
    intent: await memory.getIntent("pi_0001"),
    letter: await memory.getDeadLetter("pi_0001/settle"),
    log,
  };
}

for (
  const [name, outageS] of [
    ["two minutes", 120],
    ["an hour", 3600],
    ["three days", 3 * DAY_S],
    ["seven days", 7 * DAY_S],
  ] as const
) {
  Deno.test(`QStash through a store outage of ${name}: the failure callback outlasts it, and the intent goes to review with its dead letter`, async () => {
    const { resolved, intent, letter, log } = await run(outageS);
    const trace = `\n${log.join("\n")}`;
    assert.ok(resolved, `QStash gave up on its failure callback:${trace}`);
    assert.equal(intent?.state, "needs_review", trace);
    assert.ok(letter !== null, `no dead letter:${trace}`);
  });
}

Deno.test("QStash through an hour when the store answers reads but refuses writes (a primary gone read-only): an outage, not a blip, so QStash's own backoff, and the payment settles once the store is back", async () => {
  // The receipt is confirmed: each delivery during the outage fails to
  // write the settle, and one after it must settle the payment.
  const { resolved, intent, log } = await run(3600, {
    readsAnswer: true,
    receipt: "confirmed",
    from: 0,
  });
  const trace = `\n${log.join("\n")}`;
  assert.ok(resolved, trace);
  assert.equal(intent?.state, "settled", trace);
  const down = log.filter((line) => / down 503 /.test(line));
  assert.ok(down.length > 0, trace);
  assert.ok(down.every((line) => line.endsWith("retry-after=null")), trace);
});

Deno.test("a store that fails one request (a blip) late in a QStash job's schedule: asked back after the policy's delay, not QStash's day", async () => {
  let failing = 0;
  const memory = await settling();
  const { app } = await makeApp({
    deps: {
      store: outage(memory, () => failing-- > 0, true),
      now: Date.now,
      policy: { maxDeliveries: RETRIES + 1 },
    },
  });
  const body = JSON.stringify(job);
  const signature = await signQStash(body);
  // The delivery's write fails (its replay record, before the receipt is
  // read: nothing decided); the store takes the next one, the probe's.
  failing = 1;
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-retried": "5", "upstash-signature": signature },
  });
  assert.equal(res.status, 503);
  // Delivery 6: 5 s doubling five times is 160 s, capped at 2 min; equal
  // jitter with the app's random of 0 halves it.
  assert.equal(res.headers.get("retry-after"), "60");
  assert.equal((await res.json()).type, "urn:relayer:problem:delivery-failed");
});

Deno.test("a generic delivery counted in the store gets no Retry-After when the store fails it, blip or not: its count cannot grow meanwhile", async () => {
  let failing = 0;
  const { app } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
    deps: {
      store: outage(new MemoryStore(), () => failing-- > 0, true),
    },
  });
  for (const writes of [2, 1_000]) {
    failing = writes; // the admit fails; the probe's write takes, or not
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify({ job, nonce: writes })),
    );
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), null, String(writes));
    assert.equal(
      (await res.json()).type,
      "urn:relayer:problem:delivery-failed",
    );
  }
});

Deno.test("an unexpected failure on a QStash route answers 503 without Retry-After while the store is down, so QStash waits as its own backoff says", async () => {
  let down = true;
  const memory = new MemoryStore();
  const { app } = await makeApp({
    deps: { store: outage(memory, () => down) },
  });
  for (const path of ["/v1/qstash", "/v1/qstash/failed"]) {
    const body = path === "/v1/qstash" ? JSON.stringify(job) : JSON.stringify({
      sourceBody: btoa(JSON.stringify(job)),
      retried: 2,
      sourceMessageId: "msg_1",
    });
    const res = await app.request(path, {
      method: "POST",
      body,
      headers: {
        "upstash-retried": "0",
        "upstash-signature": await signQStash(body, {
          url: path === "/v1/qstash" ? QSTASH.url : `${QSTASH.url}/failed`,
        }),
      },
    });
    assert.equal(res.status, 503, path);
    assert.equal(res.headers.get("retry-after"), null, path);
    assert.match((await res.json()).detail, /the queue will/);
  }
  down = false;
});
