/**
 * Pacing for what a clock stepped back allows at once.
 *
 * @module
 */

/**
 * A pace for waits counted by a clock that may step back. A time read
 * before the start of a wait (NTP correcting a clock that ran fast) says
 * nothing of how long ago that start was, so the wait may end at once;
 * but a clock that flaps back and forth (time sources fighting) would
 * then end it at every read. So a step back ends a wait of `ms` at most
 * once per `ms` of the monotonic clock (`performance.now()`, which no step
 * moves), whatever the wall clock reads.
 *
 * @param mono The monotonic clock, in milliseconds (for tests).
 * @returns `allow(ms)`: whether a step back may end a wait of `ms` now;
 *   `true` is counted as such an end.
 *
 * @example A clock that flaps ends a minute's wait once a minute
 * ```ts
 * import { stepBackPace } from "./_step_back.ts";
 * import assert from "node:assert/strict";
 *
 * let mono = 0;
 * const allow = stepBackPace(() => mono);
 * assert.equal(allow(60_000), true); // the first step back ends the wait
 * mono += 1_000;
 * assert.equal(allow(60_000), false); // a second within the minute does not
 * mono += 60_000;
 * assert.equal(allow(60_000), true);
 * ```
 */
export function stepBackPace(
  mono: () => number = () => performance.now(),
): (ms: number) => boolean {
  let allowedAt: number | undefined;
  return (ms) => {
    const at = mono();
    if (allowedAt !== undefined && at >= allowedAt && at - allowedAt < ms) {
      return false;
    }
    allowedAt = at;
    return true;
  };
}
