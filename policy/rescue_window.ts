/**
 * The rescue window: how long a job is guaranteed to keep coming back.
 *
 * @module
 */

import { backoff } from "./backoff.ts";
import type { Policy } from "./policy.ts";

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
 * The cost is bounded by log2(cap / base), however large `maxDeliveries`.
 *
 * @param policy The policy to measure.
 * @returns The guaranteed window in milliseconds.
 *
 * @example The default policy outlasts its rescue threshold
 * ```ts
 * import { DEFAULT_POLICY, definePolicy, rescueWindow } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(rescueWindow(DEFAULT_POLICY), 317_500);
 * assert.ok(rescueWindow(DEFAULT_POLICY) >= DEFAULT_POLICY.stuckAfterMs);
 * assert.equal(rescueWindow(definePolicy({ jitter: "full" })), 0);
 * ```
 */
export function rescueWindow(policy: Policy): number {
  const floor = (delayMs: number): number =>
    policy.jitter === "equal"
      ? Math.floor(delayMs / 2)
      : policy.jitter === "full"
      ? 0
      : delayMs;
  // Delays follow deliveries 1 … maxDeliveries − 1; the last one is poisoned.
  const gaps = policy.maxDeliveries - 1;
  let windowMs = 0;
  let delivery = 1;
  for (; delivery <= gaps; delivery++) {
    const delayMs = backoff(delivery, policy);
    if (delayMs >= policy.capMs) break;
    windowMs += floor(delayMs);
  }
  // Every remaining gap sits at the cap.
  return windowMs + Math.max(0, gaps - delivery + 1) * floor(policy.capMs);
}
