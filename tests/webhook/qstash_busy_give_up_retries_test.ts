/**
 * QStash retries a failure callback as many times as the message
 * (`QSTASH_RETRIES`), on its own backoff (12 s, then 2 min 28 s, …): the
 * give-up route sends no `Retry-After` when it answers busy. A give-up
 * that meets another delivery's lease (one killed mid-send, say) is busy
 * until the lease lapses, `LEASE` + 2 × `CLOCK_SKEW` at most, and only a
 * callback after that resolves the intent. The start-up check used to
 * take a policy of 2 deliveries with QStash's 1 retry (the default,
 * `MAX_DELIVERIES − 1`): the callback's one retry came 12 s after it, well
 * within a 30 s lease, and the intent was left settling with no job and
 * no dead letter, its callback in QStash's DLQ.
 *
 * QStash is modelled as its docs describe it: it honours `Retry-After` up
 * to a day, and otherwise waits min(1 day, e^(2.5 n)) s before its n-th
 * retry; a failure callback is called once the message's retries ran out.
 *
 * @module
 */

import assert from "node:assert/strict";
import { loadConfig } from "../../webhook/config.ts";
import { failedRequest, QSTASH, signQStash } from "./_signing.ts";
import {
  assertNotStranded,
  killedMidSend,
  settlingService,
} from "./_stranded.ts";

const job = { intentId: "pi_0005", kind: "settle" } as const;
const DAY_S = 86_400;

/** QStash's wait before its retry number `n` (from 1), in milliseconds. */
function backoffMs(n: number, retryAfter: string | null): number {
  const s = retryAfter === null ? Infinity : Number(retryAfter);
  return Math.ceil(
    (s <= DAY_S ? s : Math.min(DAY_S, Math.exp(2.5 * n))) * 1000,
  );
}

/** The smallest `QSTASH_RETRIES` `loadConfig` takes with `env`. */
function smallestRetries(env: Record<string, string>): number {
  for (let retries = 0; retries <= 100; retries++) {
    try {
      loadConfig({ ...env, QSTASH_RETRIES: String(retries) });
      return retries;
    } catch {
      // refused: one more
    }
  }
  throw new Error("no QSTASH_RETRIES taken");
}

Deno.test("a QStash configuration the start-up check takes retries a busy give-up past another delivery's lease: 2 deliveries, its intent resolved, never stranded", async () => {
  const env = {
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
    PUBLIC_URL: "https://relayer.example.test",
    MAX_DELIVERIES: "2",
    BASE: "2m",
    CAP: "24h",
    JITTER: "none",
    STUCK_AFTER: "1m",
  };
  const retries = smallestRetries(env);
  // QStash's one retry (MAX_DELIVERIES − 1) is refused, naming the least.
  assert.equal(retries, 2);
  assert.throws(
    () => loadConfig({ ...env, QSTASH_RETRIES: "1" }),
    /^ConfigError: QSTASH_RETRIES is 1, so QStash gives up after 2 deliveries, at or past MAX_DELIVERIES \(2\), and retries its failure callback 1 time, within 12s of its first call on its own backoff .* up to LEASE \+ 2 × CLOCK_SKEW \(40s\): the callback would end in QStash's DLQ, and its intent stranded\. Set QSTASH_RETRIES to at least 2 /,
  );
  const config = loadConfig({ ...env, QSTASH_RETRIES: String(retries) });
  const { policy, leaseMs, clockSkewMs } = config;

  const { app, clock, store } = await settlingService(job.intentId, {
    log: () => {},
    policy,
    leaseMs,
    clockSkewMs,
    qstash: QSTASH,
  });
  const body = JSON.stringify(job);

  const answers: string[] = [];
  let retryAfter: string | null = null;
  for (let retried = 0; retried <= retries; retried++) {
    if (retried > 0) clock.now += backoffMs(retried, retryAfter);
    if (retried === policy.maxDeliveries - 1) {
      // A copy of the job (published again) on another instance found the
      // payment stuck a second ago, wrote ahead of its rescue and was
      // killed: its lease stands.
      await killedMidSend(store, job.intentId, clock.now - 1000, leaseMs);
    }
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "upstash-signature": await signQStash(body),
        "upstash-message-id": "msg_5",
        "upstash-retried": String(retried),
      },
    });
    retryAfter = res.headers.get("retry-after");
    answers.push(`${retried + 1}: ${res.status}`);
    await res.body?.cancel();
    if (res.status < 300) break;
  }

  // The message's retries ran out: QStash calls the failure callback, and
  // retries it as many times, on its own backoff or our Retry-After.
  if (!answers.at(-1)!.endsWith(": 200")) {
    retryAfter = null;
    for (let retried = 0; retried <= retries; retried++) {
      if (retried > 0) clock.now += backoffMs(retried, retryAfter);
      const failed = JSON.stringify({
        status: 503,
        retried: retries,
        maxRetries: retries,
        dlqId: "dlq_msg_5",
        sourceMessageId: "msg_5",
        url: QSTASH.url,
        method: "POST",
        sourceBody: btoa(body),
      });
      const res = await app.request(
        "/v1/qstash/failed",
        await failedRequest(failed),
      );
      retryAfter = res.headers.get("retry-after");
      answers.push(`give-up ${retried + 1}: ${res.status}`);
      await res.body?.cancel();
      if (res.status < 300) break;
    }
  }

  await assertNotStranded(
    store,
    job.intentId,
    `QSTASH_RETRIES ${retries}`,
    answers,
  );
});
