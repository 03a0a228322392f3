/**
 * The start-up check of a queue against a policy: nothing stranded.
 *
 * @module
 */

import { definePolicy, type Policy } from "./policy.ts";
import { queueLimit, type QueueLimits } from "./queue.ts";
import { rescueWindow } from "./rescue_window.ts";

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
   * `"stops_early"`: the queue gives up before the policy's last delivery;
   * `"window_short"`: the window under the queue's own delays is shorter
   * than `stuckAfterMs`; `null`: neither.
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
 * poisoned before it is rescued). The service refuses to start on a
 * problem; `deno task schedule --queue` prints the same verdict.
 *
 * @param policy The policy.
 * @param queue The queue's limits.
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
 */
export function checkQueue(policy: Policy, queue: QueueLimits): QueueCheck {
  policy = definePolicy(policy); // what decide would use, or its error
  const limit = queueLimit(queue);
  const deliveries = Math.min(policy.maxDeliveries, limit);
  const windowMs = rescueWindow(policy, queue);
  const problem = limit < policy.maxDeliveries
    ? "stops_early"
    : windowMs < policy.stuckAfterMs
    ? "window_short"
    : null;
  return { problem, limit, deliveries, windowMs };
}
