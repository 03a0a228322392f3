/**
 * The rescue window: how long a job is guaranteed to keep coming back.
 *
 * @module
 */

import { backoff } from "./backoff.ts";
import { definePolicy, type Policy } from "./policy.ts";
import { queueGap, queueLimit, type QueueLimits } from "./queue.ts";

/**
 * The time from a job's first delivery to its last that the policy
 * *guarantees*, counting each delay at the jitter's lower bound: half the
 * delay for equal jitter, nothing for full jitter, the whole delay for none.
 *
 * A settling payment is rescued (re-broadcast with the same nonce) once it
 * has been stuck for `stuckAfterMs`; if the window is shorter than that, its
 * job can be poisoned before the rescue runs. The default policy guarantees
 * 317.5 s (635 s un-jittered) against a `stuckAfterMs` of 300 s.
 *
 * With a queue, the window is the one that queue really gives: at most
 * `min(maxDeliveries, queueLimit(queue))` deliveries, separated by the gaps
 * it guarantees ({@linkcode queueGap}): our delays capped at 1 day on
 * QStash and 12 h on Cloudflare Queues, and on Pub/Sub its own
 * `minBackoffMs` per gap, with no growth.
 *
 * The cost is bounded by log2(cap / base), however large `maxDeliveries`.
 *
 * @param policy The policy to measure.
 * @param queue The queue that delivers the job; absent, the policy's own
 * delays with no limit (the local KV queue).
 * @returns The guaranteed window in milliseconds.
 * @throws {RangeError} If a queue limit is out of its range, or a number
 * in the policy is (as {@linkcode definePolicy} checks it).
 * @throws {TypeError} If the policy is not one (as {@linkcode definePolicy} checks it),
 * or the queue is `null` or not one.
 *
 * @example The default policy outlasts its rescue threshold, but not on every queue
 * ```ts
 * import { DEFAULT_POLICY, definePolicy, rescueWindow } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(rescueWindow(DEFAULT_POLICY), 317_500);
 * assert.ok(rescueWindow(DEFAULT_POLICY) >= DEFAULT_POLICY.stuckAfterMs);
 * assert.equal(rescueWindow(definePolicy({ jitter: "full" })), 0);
 * // QStash with 4 retries stops at delivery 5: 2.5 + 5 + 10 + 20 s.
 * assert.equal(rescueWindow(DEFAULT_POLICY, { kind: "qstash", retries: 4 }), 37_500);
 * // Pub/Sub guarantees its minimum backoff per gap: 9 × 10 s.
 * const pubsub = { kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000 } as const;
 * assert.equal(rescueWindow(DEFAULT_POLICY, pubsub), 90_000);
 * ```
 */
export function rescueWindow(
  policy: Policy,
  queue?: QueueLimits,
): number {
  policy = definePolicy(policy); // what decide would use, or its error
  // `null` is not "no queue": from JavaScript, a caller who passed it most
  // likely meant a queue and lost it.
  if (queue === null) {
    throw new TypeError(
      'Cannot compute rescue window as the queue must be its limits, such as { kind: "qstash", retries: 3 }, or undefined for the local KV queue: current value is null',
    );
  }
  queue ??= { kind: "kv" };
  // Delays follow deliveries 1 … n − 1; the last one is poisoned, or the
  // queue gives up after it.
  const gaps = Math.min(policy.maxDeliveries, queueLimit(queue)) - 1;
  let windowMs = 0;
  let delivery = 1;
  for (; delivery <= gaps; delivery++) {
    // Pub/Sub's gaps never grow; ours stop growing at the cap.
    if (queue.kind === "pubsub" || backoff(delivery, policy) >= policy.capMs) {
      break;
    }
    windowMs += queueGap(policy, queue, delivery).minMs;
  }
  // Every remaining gap is the same.
  return delivery > gaps ? windowMs : windowMs +
    (gaps - delivery + 1) * queueGap(policy, queue, delivery).minMs;
}
