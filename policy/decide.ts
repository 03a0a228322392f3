/**
 * The decision after a failed delivery: another delivery, or poison.
 *
 * @module
 */

import { messageOf } from "./_walk.ts";
import { assertDelivery } from "./_validate.ts";
import { doubled } from "./_doubled.ts";
import { jitter } from "./jitter.ts";
import { definePolicy, type Policy } from "./policy.ts";
import { isPoison } from "./sentinels.ts";

/**
 * What to do with a job whose delivery failed. Plain data: the caller acts
 * on it (answer the queue, resolve the intent).
 *
 * @example Narrow on the action
 * ```ts
 * import { decide, type Decision } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * function describe(decision: Decision): string {
 *   // `delayMs` exists only on a retry, `cause` only on a poison.
 *   return decision.action === "retry"
 *     ? `retry in ${decision.delayMs} ms`
 *     : `poison (${decision.cause})`;
 * }
 * const timeout = new Error("rpc timeout");
 * assert.equal(describe(decide(timeout, 1, { jitter: "none" })), "retry in 5000 ms");
 * assert.equal(describe(decide(timeout, 10)), "poison (exhausted)");
 * ```
 */
export type Decision =
  | {
    /** Deliver the job again after `delayMs`. */
    readonly action: "retry";
    /** How long to wait before the next delivery, in milliseconds. */
    readonly delayMs: number;
    /** The failed delivery's error message. */
    readonly reason: string;
  }
  | {
    /** Stop delivering the job; resolve its intent instead. */
    readonly action: "poison";
    /** `"declared"`: the error said so; `"exhausted"`: no deliveries left. */
    readonly cause: "declared" | "exhausted";
    /** Why, in words: `"retrying will not help"` or `"no luck after N deliveries"`. */
    readonly reason: string;
  };

/**
 * Options for {@linkcode decide}.
 *
 * @example Replayable jitter
 * ```ts
 * import { decide, type DecideOptions } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A fixed source makes the delay exact: 0 picks the floor of equal jitter.
 * const options: DecideOptions = { random: () => 0 };
 * const decision = decide(new Error("rpc timeout"), 2, {}, options);
 * assert.deepEqual(decision, { action: "retry", delayMs: 5000, reason: "rpc timeout" });
 * ```
 */
export interface DecideOptions {
  /**
   * A source of numbers in `[0, 1)` for the jitter.
   *
   * @default {Math.random}
   */
  random?: () => number;
}

/**
 * Decides, after delivery number `delivery` failed with `error`, whether
 * the job deserves another delivery and after how long. In this order:
 *
 * 1. a declared poison anywhere in the error (`isPoison`) stops at once:
 *    the caller knows why, so no delivery is spent confirming it;
 * 2. the last allowed delivery (`delivery >= maxDeliveries`) stops;
 * 3. otherwise retry after `jitter(backoff(delivery))`.
 *
 * An undeclared error means "retrying will help": a wrong guess costs a few
 * deliveries, bounded by `maxDeliveries`.
 *
 * @param error What the failed delivery threw; any value.
 * @param delivery The delivery that failed, 1-based, counting the first try.
 * @param policy The policy, or the fields that differ from the default
 * (none: {@linkcode DEFAULT_POLICY}).
 * @param options The source of randomness for the jitter (`Math.random`).
 * @returns A {@linkcode Decision}.
 * @throws {RangeError} If `delivery` is not an integer >= 1, or the policy
 * is invalid.
 *
 * @example Three deliveries, then poison
 * ```ts
 * import { decide } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const policy = { maxDeliveries: 3, jitter: "none" } as const;
 * const timeout = new Error("rpc timeout");
 * assert.deepEqual(decide(timeout, 1, policy), {
 *   action: "retry",
 *   delayMs: 5000,
 *   reason: "rpc timeout",
 * });
 * assert.deepEqual(decide(timeout, 3, policy), {
 *   action: "poison",
 *   cause: "exhausted",
 *   reason: "no luck after 3 deliveries",
 * });
 * ```
 */
export function decide(
  error: unknown,
  delivery: number,
  policy?: Partial<Policy>,
  options?: DecideOptions,
): Decision {
  const { random = Math.random } = options ?? {};
  assertDelivery("decide", delivery);
  const { maxDeliveries, baseMs, capMs, jitter: strategy } = definePolicy(
    policy,
  );
  if (isPoison(error)) {
    return {
      action: "poison",
      cause: "declared",
      reason: "retrying will not help",
    };
  }
  if (delivery >= maxDeliveries) {
    const deliveries = delivery === 1 ? "1 delivery" : `${delivery} deliveries`;
    return {
      action: "poison",
      cause: "exhausted",
      reason: `no luck after ${deliveries}`,
    };
  }
  return {
    action: "retry",
    delayMs: jitter(doubled(delivery, baseMs, capMs), strategy, random),
    reason: messageOf(error),
  };
}
