/**
 * The jitter arithmetic behind `jitter`, shared with `decide` (which has
 * already checked its inputs).
 *
 * @module
 */

import type { Jitter } from "./jitter.ts";

/**
 * Maps whatever `random` returned into `[0, 1)`: `NaN` and negatives to 0,
 * 1 and above to the largest double below 1. A misbehaving source can skew
 * the spread, never the bounds.
 */
function unit(value: number): number {
  if (!(value > 0)) return 0; // also NaN
  return value < 1 ? value : 1 - Number.EPSILON / 2;
}

/**
 * Randomises a checked delay (a finite number >= 0) within the bounds of a
 * checked strategy: `"none"` → `d`, `"full"` → `[0, d]`, `"equal"` →
 * `[floor(d/2), d]`.
 */
export function jittered(
  delayMs: number,
  strategy: Jitter,
  random: () => number,
): number {
  if (strategy === "none") return delayMs;
  if (strategy === "full") {
    return Math.min(
      delayMs,
      Math.floor(unit(random()) * (Math.floor(delayMs) + 1)),
    );
  }
  const half = Math.floor(delayMs / 2);
  const span = Math.floor(delayMs) - half;
  return Math.min(delayMs, half + Math.floor(unit(random()) * (span + 1)));
}
