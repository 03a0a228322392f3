/**
 * The retry policy: how many deliveries a job gets and how far apart.
 *
 * @module
 */

import { isChecked, markChecked } from "./_checked.ts";
import { assertMs, show } from "./_validate.ts";
import { type Jitter, JITTERS } from "./jitter.ts";

/**
 * How many deliveries a job gets, how far apart, and how long a payment may settle before it is rescued.
 *
 * @example A complete policy from a few overrides
 * ```ts
 * import { definePolicy, describePolicy, type Policy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const policy: Policy = definePolicy({ maxDeliveries: 5, capMs: 60_000 });
 * assert.equal(policy.jitter, "equal");
 * assert.equal(
 *   describePolicy(policy),
 *   "at most 5 deliveries; back off 5s doubling, capped at 1m0s, equal jitter",
 * );
 * ```
 */
export interface Policy {
  /**
   * Deliveries a job gets, counting the first try (SQS `maxReceiveCount`).
   *
   * @default {10}
   */
  readonly maxDeliveries: number;
  /**
   * The delay after the first delivery fails, in milliseconds; it doubles
   * after each later one.
   *
   * @default {5000}
   */
  readonly baseMs: number;
  /**
   * The longest delay between two deliveries, in milliseconds.
   *
   * @default {120000}
   */
  readonly capMs: number;
  /**
   * How delays are randomised.
   *
   * @default {"equal"}
   */
  readonly jitter: Jitter;
  /**
   * How long an intent may sit in `settling` without a confirmed tx before
   * the relayer rescues it (re-broadcast with the same nonce), in
   * milliseconds.
   *
   * @default {300000}
   */
  readonly stuckAfterMs: number;
}

/**
 * The default policy: 10 deliveries, 5 s doubling to a 2 min cap, equal
 * jitter, rescue after 5 min. Its guaranteed rescue window (317.5 s)
 * outlasts `stuckAfterMs` (300 s), so a settling payment is rescued before
 * its job can be poisoned.
 *
 * @example Read the defaults
 * ```ts
 * import { DEFAULT_POLICY } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(DEFAULT_POLICY.maxDeliveries, 10);
 * assert.equal(DEFAULT_POLICY.jitter, "equal");
 * ```
 */
export const DEFAULT_POLICY: Policy = checkedAndFrozen({
  maxDeliveries: 10,
  baseMs: 5000,
  capMs: 120_000,
  jitter: "equal",
  stuckAfterMs: 300_000,
});

// Marked, so the hot path (`decide` on every failed delivery) trusts a
// policy checked here instead of checking it on every call. Every checked
// policy is built by this one literal, so all share one shape and `decide`'s
// property reads stay monomorphic whichever of them it is handed.
function checkedAndFrozen(fields: Policy): Policy {
  const policy: Policy = {
    maxDeliveries: fields.maxDeliveries,
    baseMs: fields.baseMs,
    capMs: fields.capMs,
    jitter: fields.jitter,
    stuckAfterMs: fields.stuckAfterMs,
  };
  markChecked(policy);
  return Object.freeze(policy);
}

/**
 * Completes a partial policy with {@linkcode DEFAULT_POLICY} and checks
 * every field, so a bad setting fails where it is made, not at the tenth
 * delivery.
 *
 * Only the object's own fields are settings, each read once; an inherited
 * one is not. Every field `Object.keys` lists must be a policy field.
 *
 * @param overrides The fields to change (`undefined`: the defaults).
 * @returns A frozen, valid policy.
 * @throws {RangeError} If a number is out of range (each must be a whole
 * number: `maxDeliveries` >= 1, `baseMs` and `capMs` >= 1, `stuckAfterMs`
 * >= 0).
 * @throws {TypeError} If `overrides` is neither an object nor `undefined`
 * (an array is not one),
 * a field is not a policy field, or `jitter` is not `"equal"`, `"full"` or
 * `"none"`.
 *
 * @example Three deliveries, no jitter
 * ```ts
 * import { definePolicy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const policy = definePolicy({ maxDeliveries: 3, jitter: "none" });
 * assert.equal(policy.baseMs, 5000);
 * assert.throws(() => definePolicy({ maxDeliveries: 0 }), RangeError);
 * // A name every object inherits is still not a policy field.
 * assert.throws(() => definePolicy({ toString: 1 } as object), TypeError);
 * ```
 */
export function definePolicy(overrides?: Partial<Policy>): Policy {
  if (overrides === undefined) return DEFAULT_POLICY;
  if (isChecked(overrides)) return overrides as Policy;
  // An array has no policy field, so `[]` read as the defaults: from
  // JavaScript, a caller who passed one meant something else.
  if (
    typeof overrides !== "object" || overrides === null ||
    Array.isArray(overrides)
  ) {
    throw new TypeError(
      `Cannot define policy as its fields must come in an object, such as { maxDeliveries: 5 }, or undefined for the defaults: current value is ${
        Array.isArray(overrides) ? "an array" : show(overrides)
      }`,
    );
  }
  const keys = Object.keys(overrides);
  for (const key of keys) {
    // Own fields only: `in` would take `constructor`, `toString` or
    // `__proto__` (which `JSON.parse` makes an own field) for settings.
    if (!Object.hasOwn(DEFAULT_POLICY, key)) {
      throw new TypeError(
        `Cannot define policy as '${key}' is not a policy field: use ${
          FIELDS.join(", ")
        }`,
      );
    }
  }
  // Each field read once, in the order of `FIELDS`, as `decide` reads a
  // partial policy: a getter is asked the same questions by both.
  const fields: Partial<Record<keyof Policy, unknown>> = {};
  for (const field of FIELDS) {
    if (!Object.hasOwn(overrides, field)) continue;
    const value = overrides[field];
    if (value !== undefined) fields[field] = value;
  }
  // Typed as a policy, but any value may be there: each is checked below.
  const policy = { ...DEFAULT_POLICY, ...fields } as Policy;
  if (!Number.isSafeInteger(policy.maxDeliveries) || policy.maxDeliveries < 1) {
    throw new RangeError(
      `Cannot define policy as 'maxDeliveries' must be an integer >= 1: current value is ${
        show(policy.maxDeliveries)
      }`,
    );
  }
  assertMs("define policy", "baseMs", policy.baseMs, 1);
  assertMs("define policy", "capMs", policy.capMs, 1);
  assertMs("define policy", "stuckAfterMs", policy.stuckAfterMs, 0);
  if (!JITTERS.includes(policy.jitter)) {
    throw new TypeError(
      `Cannot define policy as 'jitter' must be "equal", "full" or "none": current value is ${
        show(policy.jitter)
      }`,
    );
  }
  return checkedAndFrozen(policy);
}

/** The policy's fields, in the order they are read and listed. */
const FIELDS = Object.keys(DEFAULT_POLICY) as readonly (keyof Policy)[];
