/**
 * Spreading retries in time, with a floor: equal jitter keeps at least half
 * of every delay.
 *
 * @module
 */

import { jittered } from "./_jittered.ts";
import { assertRandom, show } from "./_validate.ts";

/**
 * How a delay is randomised:
 * - `"equal"`: in `[floor(d/2), d]`. The default: the floor matters more
 *   than the ceiling, because each redelivery costs a lease and a worker's
 *   turn, and a delay near zero is a wasted turn.
 * - `"full"`: in `[0, d]` (AWS's pick; no floor).
 * - `"none"`: exactly `d`.
 *
 * @example The shortest wait of each strategy
 * ```ts
 * import { jitter, type Jitter } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const strategies: Jitter[] = ["equal", "full", "none"];
 * // With the lowest random number: equal keeps half, full keeps nothing.
 * const shortest = strategies.map((strategy) => jitter(8000, strategy, () => 0));
 * assert.deepEqual(shortest, [4000, 0, 8000]);
 * ```
 */
export type Jitter = "equal" | "full" | "none";

/**
 * Every {@linkcode Jitter} strategy, for validation and generators.
 *
 * @example Check a jitter setting
 * ```ts
 * import { type Jitter, JITTERS } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * function parseJitter(text: string): Jitter {
 *   const strategy = JITTERS.find((known) => known === text);
 *   if (strategy === undefined) throw new TypeError(`Unknown jitter: ${text}`);
 *   return strategy;
 * }
 * assert.equal(parseJitter("full"), "full");
 * assert.throws(() => parseJitter("half"), TypeError);
 * ```
 */
// Frozen: `definePolicy` checks a jitter against it, so a caller's push must
// not make it accept a strategy `jittered` does not know.
export const JITTERS: readonly Jitter[] = Object.freeze([
  "equal",
  "full",
  "none",
]);

/**
 * Randomises a delay within the bounds of `strategy`, using `random` (a
 * source of numbers in `[0, 1)`, injected so tests and replays are exact).
 * The result is a whole number of milliseconds for a whole `delayMs`.
 *
 * @param delayMs The un-jittered delay (see `backoff`).
 * @param strategy `"equal"`: `[floor(d/2), d]`; `"full"`: `[0, d]`;
 * `"none"`: `d`.
 * @param random A source of numbers in `[0, 1)`; outputs outside it (1,
 * `NaN`, −0.1) are clamped, so the result always stays in bounds.
 * Defaults to `Math.random`.
 * @returns The delay to wait, in milliseconds.
 * @throws {RangeError} If `delayMs` is not a finite number >= 0.
 * @throws {TypeError} If `strategy` is not one of the three, or `random`
 * is not a function.
 *
 * @example Equal jitter never goes below half
 * ```ts
 * import { jitter } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(jitter(5000, "equal", () => 0), 2500);
 * assert.equal(jitter(5000, "equal", () => 0.9999999), 5000);
 * assert.equal(jitter(5000, "equal", () => Number.NaN), 2500);
 * assert.equal(jitter(5000, "full", () => 0), 0);
 * assert.equal(jitter(5000, "none"), 5000);
 * ```
 */
export function jitter(
  delayMs: number,
  strategy: Jitter,
  random?: () => number,
): number {
  random ??= Math.random;
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new RangeError(
      `Cannot apply jitter as 'delayMs' must be a finite number >= 0: current value is ${
        show(delayMs)
      }`,
    );
  }
  if (strategy !== "equal" && strategy !== "full" && strategy !== "none") {
    throw new TypeError(
      `Cannot apply jitter as 'strategy' must be "equal", "full" or "none": current value is ${
        show(strategy)
      }`,
    );
  }
  assertRandom("apply jitter", random);
  return jittered(delayMs, strategy, random);
}
