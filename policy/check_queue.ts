/**
 * The start-up check of a queue against a policy: nothing stranded.
 *
 * @module
 */

import { definePolicy, type Policy } from "./policy.ts";
import { queueLimit, type QueueLimits } from "./queue.ts";
import { rescueWindow } from "./rescue_window.ts";
import { DEFAULT_QUEUE_CLOCK_SKEW_MS, retentionShort } from "./_retention.ts";
import { qstashCallbackShort } from "./_qstash_callback.ts";

/**
 * What {@linkcode checkQueue} found.
 *
 * @example Read a check
 * ```ts
 * import { checkQueue, DEFAULT_POLICY, type QueueCheck } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const check: QueueCheck = checkQueue(DEFAULT_POLICY, { kind: "kv" });
 * assert.deepEqual(check, { problem: null, limit: Infinity, deliveries: 10, windowMs: 317_500 });
 * ```
 */
export interface QueueCheck {
  /**
   * `"stops_early"`: the queue gives up before the policy's last delivery,
   * or (Pub/Sub) its retention may end before the push that follows a busy
   * last delivery and before a dead-letter policy's last attempt failed,
   * or (QStash) its retries of a failure callback may all come while the
   * give-up is answered busy behind another's lease;
   * `"window_short"`: the window under the queue's own delays is shorter
   * than `stuckAfterMs` and the queue's `clockSkewMs` together; `null`:
   * neither.
   */
  readonly problem: "stops_early" | "window_short" | null;
  /** The deliveries the queue makes before it gives up (`Infinity`: no limit). */
  readonly limit: number;
  /** The deliveries a job really gets: `min(maxDeliveries, limit)`. */
  readonly deliveries: number;
  /** The guaranteed rescue window under the queue, in milliseconds. */
  readonly windowMs: number;
}

/**
 * Checks that a queue lets the policy finish: that it does not give up
 * before `maxDeliveries` (its give-up route would then resolve a job the
 * policy still meant to retry), and that the rescue window it guarantees
 * under its own delays outlasts `stuckAfterMs` (or a settling payment is
 * poisoned before it is rescued). The window must outlast `stuckAfterMs`
 * and the queue's `clockSkewMs` together (5000 when absent, the relayer's
 * default: an instance whose clock runs behind reads a payment as stuck
 * that much later), as the service's start and `deno task schedule
 * --queue` count them (`STUCK_AFTER` and `CLOCK_SKEW`): the same settings
 * get the same verdict. Pass `clockSkewMs: 0` for one clock. The service
 * refuses to start on a problem.
 *
 * On Pub/Sub with a `retentionMs` whose end may come before a dead-letter
 * policy gives up (none is set, or its last attempt's push may not end
 * within it: `(maxDeliveryAttempts − 1) × (ackDeadlineMs + maxBackoffMs) +
 * ackDeadlineMs` after the first), an expired message is dropped with no
 * dead letter and no give-up route.
 * A delivery answers busy at and past the last while another's lease
 * stands, and only a push after that resolves the intent; so the retention
 * must be more than `maxDeliveries × (ackDeadlineMs + maxBackoffMs) +
 * leaseMs + 2 × clockSkewMs` (`leaseMs` 30000 and `clockSkewMs` 5000 when
 * absent, the relayer's defaults; `ackDeadlineMs` 10000, Pub/Sub's default
 * and least), or the queue stops early. `limit`
 * still counts the deliveries that surely come before it ends
 * ({@linkcode queueLimit}), so it can be `maxDeliveries` or more here: a
 * push that comes while the lease stands is busy too.
 *
 * On QStash, the failure callback is retried as many times as the message
 * (`retries`), on QStash's own backoff (12 s, 2 min 28 s, 30 min 8 s, …),
 * as a busy give-up sends no `Retry-After`; a give-up busy behind
 * another's lease waits up to `leaseMs` + 2 × `clockSkewMs`, so the
 * retries must span more than that, or the queue stops early (a policy of
 * 2 deliveries and QStash's 1 retry, with the default lease).
 *
 * @param policy The policy.
 * @param queue The queue's limits, with the clock skew to count
 * (`clockSkewMs`, 5000 when absent).
 * @returns The problem, if any, with the figures behind it.
 * @throws {RangeError} If a queue limit is out of its range, or a number
 * in the policy is (as {@linkcode definePolicy} checks it).
 * @throws {TypeError} If the policy is not one (as {@linkcode definePolicy} checks it).
 *
 * @example QStash on a plan with 5 retries stops the default policy early
 * ```ts
 * import { checkQueue, DEFAULT_POLICY } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const check = checkQueue(DEFAULT_POLICY, { kind: "qstash", retries: 5 });
 * assert.equal(check.problem, "stops_early");
 * assert.equal(check.deliveries, 6);
 * assert.equal(checkQueue(DEFAULT_POLICY, { kind: "qstash", retries: 9 }).problem, null);
 * ```
 *
 * @example The service's verdict: the clock skew counted
 * ```ts
 * import { checkQueue, definePolicy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A window of 317.5 s outlasts 315 s, but not 315 s and the default
 * // 5 s of clock skew: the service refuses to start with STUCK_AFTER=315s.
 * const policy = definePolicy({ stuckAfterMs: 315_000 });
 * const qstash = { kind: "qstash", retries: 9 } as const;
 * assert.equal(checkQueue(policy, qstash).problem, "window_short");
 * // With CLOCK_SKEW=2500ms (or one clock, 0), it outlasts them.
 * assert.equal(checkQueue(policy, { ...qstash, clockSkewMs: 2500 }).problem, null);
 * ```
 *
 * @example QStash's failure callback must outlast a busy give-up
 * ```ts
 * import { checkQueue, definePolicy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Two deliveries, 2 min apart: one retry is enough for the policy, but
 * // the failure callback's one retry comes 12 s after it, within a 30 s
 * // lease (and 2 × 5 s of clock skew); a second comes 2 min 28 s later.
 * const policy = definePolicy({ maxDeliveries: 2, baseMs: 120_000, jitter: "none", stuckAfterMs: 60_000 });
 * assert.equal(checkQueue(policy, { kind: "qstash", retries: 1 }).problem, "stops_early");
 * assert.equal(checkQueue(policy, { kind: "qstash", retries: 2 }).problem, null);
 * ```
 *
 * @example A Pub/Sub retention must outlast a busy last delivery and one more push
 * ```ts
 * import { checkQueue, DEFAULT_POLICY } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Pushes of up to 25 s, 10 min apart, with no dead-letter policy:
 * // 10 × 10m25s + 30 s + 2 × 5 s = 1h44m50s is not enough, a ms more is.
 * const pubsub = {
 *   kind: "pubsub", minBackoffMs: 40_000, maxBackoffMs: 600_000, ackDeadlineMs: 25_000,
 * } as const;
 * assert.equal(checkQueue(DEFAULT_POLICY, { ...pubsub, retentionMs: 6_290_000 }).problem, "stops_early");
 * assert.equal(checkQueue(DEFAULT_POLICY, { ...pubsub, retentionMs: 6_290_001 }).problem, null);
 * // A longer lease (LEASE) or clock skew (CLOCK_SKEW) needs more.
 * const longLease = { ...pubsub, retentionMs: 6_290_001, leaseMs: 60_000 };
 * assert.equal(checkQueue(DEFAULT_POLICY, longLease).problem, "stops_early");
 * ```
 */
export function checkQueue(policy: Policy, queue: QueueLimits): QueueCheck {
  policy = definePolicy(policy); // what decide would use, or its error
  const limit = queueLimit(queue);
  const deliveries = Math.min(policy.maxDeliveries, limit);
  const windowMs = rescueWindow(policy, queue);
  const problem = limit < policy.maxDeliveries ||
      (queue.kind === "pubsub" &&
        retentionShort(queue, policy.maxDeliveries)) ||
      (queue.kind === "qstash" && qstashCallbackShort(queue))
    ? "stops_early"
    : windowMs <
        policy.stuckAfterMs + (queue.clockSkewMs ?? DEFAULT_QUEUE_CLOCK_SKEW_MS)
    ? "window_short"
    : null;
  return { problem, limit, deliveries, windowMs };
}
