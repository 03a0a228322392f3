/**
 * The un-jittered delay after a failed delivery: exponential, capped.
 *
 * @module
 */

import type { Policy } from "./policy.ts";
import { doubled } from "./_doubled.ts";
import { assertDelivery, assertMs, assertOptionNames } from "./_validate.ts";

/**
 * Options for {@linkcode backoff}.
 *
 * @example A faster schedule for tests
 * ```ts
 * import { backoff, type BackoffOptions } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const fast: BackoffOptions = { baseMs: 100, capMs: 1000 };
 * assert.deepEqual([1, 2, 3, 4, 5].map((n) => backoff(n, fast)), [100, 200, 400, 800, 1000]);
 * ```
 */
export interface BackoffOptions {
  /**
   * The delay after the first delivery fails, in milliseconds.
   *
   * @default {5000}
   */
  baseMs?: number;
  /**
   * The longest delay, in milliseconds.
   *
   * @default {120000}
   */
  capMs?: number;
}

/**
 * The delay after delivery number `delivery` failed, before jitter:
 * `min(cap, base × 2^(delivery − 1))`. With the defaults: 5 s, 10 s, 20 s,
 * 40 s, 80 s, then 120 s for every later delivery.
 *
 * The delay doubles in a loop that stops at the cap, so the cost is bounded
 * by log2(cap / base) whatever the delivery number, and no shift (`1 << n`
 * wraps at 32) or power (`2 ** n` reaches `Infinity`) can turn a huge
 * delivery count into a tiny, infinite or `NaN` delay.
 *
 * @param delivery The delivery that failed, 1-based and counting the first
 * try; any integer >= 1 (10^9, 2^53 and 1e300 all give the cap).
 * @param options The base and cap (5 s and 2 min), or a whole `Policy`
 * (`definePolicy`'s), of which it reads these two alone: no jitter, and no
 * `maxDeliveries` (a delivery past it still gets a delay, the cap's). A part
 * of a policy (`{ jitter: "full" }`), which `decide` takes, is refused.
 * @returns The delay in milliseconds, in `[min(base, cap), cap]`.
 * @throws {RangeError} If `delivery` is not an integer >= 1, or `baseMs` /
 * `capMs` is not an integer >= 1.
 * @throws {TypeError} If `options` is neither an object nor `undefined`, or
 * names an option it does not read (a misspelt `baseMs` would otherwise
 * fall back to its default; a part of a policy's `jitter`, be ignored).
 *
 * @example The default schedule
 * ```ts
 * import { backoff } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => backoff(n)), [
 *   5000, 10000, 20000, 40000, 80000, 120000, 120000,
 * ]);
 * assert.equal(backoff(1e300), 120000);
 * assert.throws(() => backoff(0), RangeError);
 * ```
 *
 * @example A policy's delay, and the one decide waits
 * ```ts
 * import { backoff, decide, definePolicy, jitter } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const policy = definePolicy({ baseMs: 1000, jitter: "full" });
 * assert.equal(backoff(3, policy), 4000); // before jitter
 * const random = () => 0.25;
 * const waited = decide(new Error("rpc timeout"), 3, policy, { random });
 * assert.deepEqual(waited, {
 *   action: "retry",
 *   delayMs: jitter(backoff(3, policy), policy.jitter, random), // 1000
 *   reason: "rpc timeout",
 * });
 * assert.throws(() => backoff(3, { jitter: "full" } as never), TypeError);
 * ```
 */
export function backoff(
  delivery: number,
  options?: BackoffOptions,
): number {
  // A stray name matters only where a default stands in for a misspelt
  // one: with both given (a whole Policy, as rescueWindow passes), no scan,
  // but for a part of a policy that holds them (`{ baseMs, capMs, jitter }`),
  // whose jitter would otherwise be ignored in silence.
  if (
    options !== undefined &&
    (options?.baseMs === undefined || options?.capMs === undefined ||
      partOfPolicy(options))
  ) checkNames(options);
  const { baseMs = 5000, capMs = 120_000 } = options ?? {};
  assertDelivery("compute backoff", delivery);
  assertMs("compute backoff", "baseMs", baseMs, 1);
  assertMs("compute backoff", "capMs", capMs, 1);
  return doubled(delivery, baseMs, capMs);
}

/** What a `Policy` holds besides `baseMs` and `capMs`: not read here. */
const POLICY_FIELDS = ["maxDeliveries", "jitter", "stuckAfterMs"];

/**
 * Whether options that hold `baseMs` and `capMs` hold some of a `Policy`'s
 * other fields but not all: a part of a policy, not a whole one. Three
 * property reads, no allocation.
 */
function partOfPolicy(options: BackoffOptions): boolean {
  const { maxDeliveries, jitter, stuckAfterMs } = options as Partial<Policy>;
  const held = (maxDeliveries === undefined ? 0 : 1) +
    (jitter === undefined ? 0 : 1) + (stuckAfterMs === undefined ? 0 : 1);
  return held !== 0 && held !== 3;
}

/**
 * Refuses options that are not an object, or name an option `backoff` does
 * not read: `{ base: 100 }` would otherwise give the default base's delay,
 * and `{ jitter: "full" }` (a part of a policy, which `decide` takes) an
 * un-jittered delay its caller took for jittered, as would
 * `{ baseMs, capMs, jitter: "full" }`. A whole `Policy` never comes here.
 * A `for…in` finds a stray name without allocating on the usual path.
 */
function checkNames(options: BackoffOptions): void {
  if (typeof options === "object" && options !== null) {
    let stray: string | undefined;
    for (const name in options) {
      if (name !== "baseMs" && name !== "capMs") stray ??= name;
    }
    if (stray === undefined) return;
    if (POLICY_FIELDS.includes(stray)) {
      throw new TypeError(
        `Cannot compute backoff as ${
          JSON.stringify(stray)
        } is a Policy's field, not one of its options (baseMs, capMs): backoff reads baseMs and capMs alone and applies no jitter: pass { baseMs, capMs }, or a whole Policy (definePolicy(…)), and jitter(backoff(n, policy), policy.jitter) for the delay decide waits`,
      );
    }
  }
  assertOptionNames("compute backoff", options, ["baseMs", "capMs"], {
    example: "{ baseMs, capMs } or a Policy",
  });
}
