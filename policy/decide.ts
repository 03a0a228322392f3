/**
 * The decision after a failed delivery: another delivery, or poison.
 *
 * @module
 */

import { messageOf } from "./_walk.ts";
import {
  assertDelivery,
  assertOptionNames,
  assertRandom,
} from "./_validate.ts";
import { doubled } from "./_doubled.ts";
import { jittered } from "./_jittered.ts";
import type { Jitter } from "./jitter.ts";
import { DEFAULT_POLICY, definePolicy, type Policy } from "./policy.ts";
import { isChecked } from "./_checked.ts";
import { isPoison } from "./sentinels.ts";

/**
 * What to do with a job whose delivery failed. Plain data: the caller acts
 * on it (answer the queue, resolve the intent). A poison decision is frozen
 * and shared between calls (it is the same for every call with that cause
 * and delivery number); a retry is a fresh object.
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
 * (none: {@linkcode DEFAULT_POLICY}), read as {@linkcode definePolicy}
 * reads them: own fields only (an enumerable inherited one sends the
 * policy to `definePolicy`), each once. One case differs: a plain object
 * whose prototype (not `Object.prototype`) holds a non-enumerable policy
 * field, or a Proxy, is read through; `definePolicy` ignores such a field.
 * @param options The source of randomness for the jitter (`Math.random`).
 * @returns A {@linkcode Decision}.
 * @throws {RangeError} If `delivery` is not an integer >= 1, or a number
 * in the policy is out of range.
 * @throws {TypeError} If the policy is neither an object nor `undefined`,
 * has a field that is not a policy field, or an unknown `jitter`; or if a
 * retry's `options` is not an object or names an option other than
 * `random`, or its `options.random` is not a function.
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
  if (!Number.isInteger(delivery) || delivery < 1) {
    assertDelivery("decide", delivery);
  }
  // The fields are read straight from the object the caller passed: no
  // spread, no freeze, no allocation. A policy `definePolicy` made is
  // trusted as it is; a plain object whose keys are its own policy fields
  // (`hasPlainKeys`) has each field read once and checked as read
  // (`checkRead`); anything else (not an object, a class instance, an
  // unknown or enumerable inherited field) goes to `definePolicy`, which
  // throws the error naming it or completes the policy.
  // Only numbers and a string leave these branches, never the policy
  // object: a literal written in the call can then stay unallocated.
  let maxDeliveries: number;
  let baseMs: number;
  let capMs: number;
  let strategy: Jitter;
  if (policy === undefined) {
    ({ maxDeliveries, baseMs, capMs, jitter: strategy } = DEFAULT_POLICY);
  } else if (isChecked(policy)) {
    ({ maxDeliveries, baseMs, capMs, jitter: strategy } = policy as Policy);
  } else if (hasPlainKeys(policy)) {
    // Each field read once, and what is read is what is checked and used:
    // a getter cannot pass the check with one value and be used with
    // another.
    const max = policy.maxDeliveries;
    const base = policy.baseMs;
    const cap = policy.capMs;
    const jitter = policy.jitter;
    checkRead(max, base, cap, jitter, policy.stuckAfterMs);
    maxDeliveries = max ?? DEFAULT_POLICY.maxDeliveries;
    baseMs = base ?? DEFAULT_POLICY.baseMs;
    capMs = cap ?? DEFAULT_POLICY.capMs;
    strategy = jitter ?? DEFAULT_POLICY.jitter;
  } else {
    ({ maxDeliveries, baseMs, capMs, jitter: strategy } = definePolicy(
      policy,
    ));
  }
  if (isPoison(error)) return DECLARED;
  if (delivery >= maxDeliveries) return exhausted(delivery);
  const delayMs = doubled(delivery, baseMs, capMs);
  const given = options?.random;
  // Only options without `random` can hold a misspelt one (`rand`), which
  // would draw from `Math.random` in silence: checked there, off the
  // usual path.
  if (given === undefined && options !== undefined) {
    assertOptionNames("decide", options, NAMES, { example: "{ random }" });
  }
  const random = given === undefined ? Math.random : given;
  if (typeof random !== "function") assertRandom("decide", random);
  return {
    action: "retry",
    delayMs: jittered(delayMs, strategy, random),
    reason: messageOf(error),
  };
}

// The poison answers live apart from `decide`, which stays small enough for
// the engine to inline into its caller on the retry path. They are the same
// for every call (per delivery number), so they are made once and frozen:
// a poison decision costs no allocation and no string building.
const DECLARED: Decision = Object.freeze({
  action: "poison",
  cause: "declared",
  reason: "retrying will not help",
});

/** Exhausted decisions by delivery number, made on first use. */
const EXHAUSTED: Decision[] = [];
/** Delivery numbers below this have their exhausted decision kept. */
const KEPT = 256;

function exhausted(delivery: number): Decision {
  if (delivery < KEPT) return EXHAUSTED[delivery] ??= exhaustedAt(delivery);
  return exhaustedAt(delivery);
}

function exhaustedAt(delivery: number): Decision {
  const deliveries = delivery === 1 ? "1 delivery" : `${delivery} deliveries`;
  return Object.freeze({
    action: "poison",
    cause: "exhausted",
    reason: `no luck after ${deliveries}`,
  });
}

/**
 * Whether `policy` is a plain object whose enumerable fields are all its
 * own policy fields, reading no value (`for…in` walks the engine's cached
 * keys of the object's shape, allocating nothing). Anything else (not an
 * object, a class instance or a prototype-less object, an unknown or
 * enumerable inherited field) goes to `definePolicy`, which throws the
 * error naming it or completes the policy. A non-enumerable field on a
 * custom prototype is not seen here (checking for one would cost as much
 * as `decide`): `decide` reads it, `definePolicy` does not.
 */
function hasPlainKeys(policy: Partial<Policy>): boolean {
  // One cached load; `Object.getPrototypeOf` cost as much as the rest of
  // `decide`.
  if (
    typeof policy !== "object" || policy === null ||
    policy.constructor !== Object
  ) return false;
  for (const key in policy) {
    // Inside a for…in over the same object the engine answers this from
    // the object's shape.
    if (
      !Object.prototype.hasOwnProperty.call(policy, key) ||
      (key !== "maxDeliveries" && key !== "baseMs" && key !== "capMs" &&
        key !== "jitter" && key !== "stuckAfterMs")
    ) return false;
  }
  return true;
}

/** Throws what `definePolicy` throws if these fields, read once, are not a valid partial policy. */
function checkRead(
  max: unknown,
  base: unknown,
  cap: unknown,
  jitter: unknown,
  stuckAfter: unknown,
): void {
  if (
    (max === undefined || isWhole(max, 1)) &&
    (base === undefined || isWhole(base, 1)) &&
    (cap === undefined || isWhole(cap, 1)) &&
    (stuckAfter === undefined || isWhole(stuckAfter, 0)) &&
    (jitter === undefined || jitter === "equal" || jitter === "full" ||
      jitter === "none")
  ) return;
  definePolicy({
    maxDeliveries: max,
    baseMs: base,
    capMs: cap,
    jitter,
    stuckAfterMs: stuckAfter,
  } as Partial<Policy>);
}

function isWhole(value: unknown, min: number): value is number {
  return Number.isSafeInteger(value) && (value as number) >= min;
}

/** The options `decide` reads. */
const NAMES = ["random"] as const;
