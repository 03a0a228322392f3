/**
 * `checkQueue` counts the clock skew as the service's start and
 * `deno task schedule --queue` do: the rescue window must outlast
 * `stuckAfterMs` and the queue's `clockSkewMs` (5 s when absent, the
 * service's `CLOCK_SKEW` default) together. Where it compared the window
 * with `stuckAfterMs` alone, the same settings got `null` from the library
 * and a refusal from the service and the tool.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  checkQueue,
  DEFAULT_POLICY,
  definePolicy,
  type QueueLimits,
} from "../../mod.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { schedule } from "../../tools/schedule.ts";
import { runs } from "../_fc.ts";
import { PUBSUB_ENV, QSTASH_ENV } from "../webhook/_config.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};
const qstash = QSTASH_ENV;
const pubsub = PUBSUB_ENV;

/** The setting loadConfig refuses `env` for, or null where it starts. */
function refusedFor(env: Record<string, string>): string | null {
  try {
    loadConfig(env);
    return null;
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.setting;
  }
}

Deno.test("checkQueue() refuses STUCK_AFTER 315s on QStash (a 317.5s window) as the service and deno task schedule do: 5s of clock skew is counted unless the queue gives its own", () => {
  const policy = definePolicy({ stuckAfterMs: 315_000 });
  const queue = { kind: "qstash", retries: 9 } as const;
  const env = { ...base, ...qstash, STUCK_AFTER: "315s" };
  assert.equal(checkQueue(policy, queue).problem, "window_short");
  assert.equal(refusedFor(env), "STUCK_AFTER");
  assert.equal(schedule(policy, queue).outlasts, false);
  // CLOCK_SKEW 2.5s: 315 s and 2.5 s fit in 317.5 s, for all three.
  const skewed = { ...queue, clockSkewMs: 2500 };
  assert.equal(checkQueue(policy, skewed).problem, null);
  assert.equal(refusedFor({ ...env, CLOCK_SKEW: "2500ms" }), null);
  assert.equal(schedule(policy, skewed, { clockSkewMs: 2500 }).outlasts, true);
});

Deno.test("checkQueue() refuses Pub/Sub's 33.5s minimum backoff under the default policy (a 301.5s window) as the service does, where the policy's own window passes", () => {
  const queue = {
    kind: "pubsub",
    minBackoffMs: 33_500,
    maxBackoffMs: 600_000,
  } as const;
  const env = { ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "33.5s" };
  const check = checkQueue(DEFAULT_POLICY, queue);
  assert.deepEqual([check.problem, check.windowMs], ["window_short", 301_500]);
  assert.equal(refusedFor(env), "PUBSUB_MIN_BACKOFF");
  assert.equal(
    checkQueue(DEFAULT_POLICY, { ...queue, clockSkewMs: 0 }).problem,
    null,
  );
  assert.equal(refusedFor({ ...env, CLOCK_SKEW: "0s" }), null);
});

Deno.test("loadConfig()'s queues each carry CLOCK_SKEW, so checkQueue(config.policy, config.queues.X) gives the start check's verdict", () => {
  const env = {
    ...base,
    CLOCK_SKEW: "1500ms",
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
    CLOUDFLARE_MAX_RETRIES: "9",
  };
  const { queues } = loadConfig(env);
  assert.deepEqual(
    [
      queues.qstash.clockSkewMs,
      queues.pubsub.clockSkewMs,
      queues.cloudflare?.clockSkewMs,
    ],
    [1500, 1500, 1500],
  );
});

Deno.test("checkQueue() says window_short exactly where deno task schedule says the window is short, for a queue that does not stop early, with the same clock skew", () => {
  const queue: fc.Arbitrary<QueueLimits> = fc.oneof(
    fc.record({
      kind: fc.constant("qstash" as const),
      retries: fc.integer({ min: 0, max: 100 }),
    }),
    fc.record({
      kind: fc.constant("cloudflare" as const),
      maxRetries: fc.integer({ min: 0, max: 100 }),
    }),
    fc.constant({ kind: "kv" as const }),
    fc.integer({ min: 0, max: 600_000 }).chain((minBackoffMs) =>
      fc.record({
        kind: fc.constant("pubsub" as const),
        minBackoffMs: fc.constant(minBackoffMs),
        maxBackoffMs: fc.integer({ min: minBackoffMs, max: 600_000 }),
      })
    ),
  );
  const policy = fc.record({
    maxDeliveries: fc.integer({ min: 1, max: 20 }),
    baseMs: fc.integer({ min: 1, max: 60_000 }),
    stuckAfterMs: fc.integer({ min: 0, max: 1_200_000 }),
  }).map((p) => definePolicy({ ...p, capMs: 120_000 }));
  const skew = fc.integer({ min: 0, max: 600_000 });
  fc.assert(
    fc.property(policy, queue, skew, (p, q, clockSkewMs) => {
      const check = checkQueue(p, { ...q, clockSkewMs });
      if (check.problem === "stops_early") return;
      const s = schedule(p, { ...q, clockSkewMs }, { clockSkewMs });
      assert.equal(check.problem === "window_short", !s.outlasts);
    }),
    { numRuns: runs(500) },
  );
});

Deno.test("checkQueue() refuses a clockSkewMs that is no number of milliseconds on every kind, where a NaN would have passed any window", () => {
  const queues: QueueLimits[] = [
    { kind: "qstash", retries: 9 },
    { kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000 },
    { kind: "cloudflare", maxRetries: 9 },
    { kind: "kv" },
  ];
  for (const queue of queues) {
    for (const clockSkewMs of [Number.NaN, -1, 1.5, "5s"]) {
      assert.throws(
        () =>
          checkQueue(DEFAULT_POLICY, {
            ...queue,
            clockSkewMs,
          } as unknown as QueueLimits),
        (error: unknown) =>
          error instanceof RangeError &&
          /^Cannot read queue limits as 'clockSkewMs' must be an integer number of milliseconds >= 0: current value is /
            .test(error.message),
        `${queue.kind} ${String(clockSkewMs)}`,
      );
    }
  }
});
