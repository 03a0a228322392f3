/**
 * A policy in one line, for logs and start-up banners.
 *
 * @module
 */

import { formatDuration } from "./format_duration.ts";
import type { Policy } from "./policy.ts";

/**
 * Describes a policy in one line: `"at most 3 deliveries; back off 5s
 * doubling, capped at 2m0s"`, followed by `", equal jitter"` or
 * `", full jitter"` when jitter is on.
 *
 * @param policy The policy to describe.
 * @returns One line of text.
 *
 * @example The default policy
 * ```ts
 * import { DEFAULT_POLICY, describePolicy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   describePolicy(DEFAULT_POLICY),
 *   "at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter",
 * );
 * ```
 */
export function describePolicy(policy: Policy): string {
  const deliveries = policy.maxDeliveries === 1
    ? "1 delivery"
    : `${policy.maxDeliveries} deliveries`;
  const jitter = policy.jitter === "none" ? "" : `, ${policy.jitter} jitter`;
  return `at most ${deliveries}; back off ${
    formatDuration(policy.baseMs)
  } doubling, capped at ${formatDuration(policy.capMs)}${jitter}`;
}
