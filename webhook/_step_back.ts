/**
 * Pacing for what a clock stepped back allows at once.
 *
 * @module
 */

/**
 * How far behind the furthest reading of the monotonic clock a reading
 * must be to count as the clock set right rather than a flap: an hour.
 * Only where that clock steps with the wall clock (workerd).
 */
const CORRECTION_MS = 60 * 60_000;

/**
 * A pace for waits counted by a clock that may step back. A time read
 * before the start of a wait (NTP correcting a clock that ran fast) says
 * nothing of how long ago that start was, so the wait may end at once;
 * but a clock that flaps back and forth (time sources fighting) would
 * then end it at every read. So a step back ends a wait of `ms` at most
 * once per `ms` of the monotonic clock (`performance.now()`), whatever the
 * wall clock reads.
 *
 * The monotonic clock is read by its furthest reading yet: on workerd
 * (Cloudflare Workers) `performance.timeOrigin` is 0 and
 * `performance.now()` reads `Date.now()`, so a step moves it too, and a
 * clock flapping among sources a step apart would read as the step passing
 * at every flap (every read a fetch or a log line again). Read so, it goes
 * on as the furthest-ahead source does. The cost, there only: after a step
 * back, a second one that comes before the clock has caught up with the
 * first and gone on `ms` does not end its wait, which then lasts the step
 * (as a flap's must not end at each read; the two look the same), up to
 * an hour: a reading further behind the furthest than that is the
 * clock set right (time sources an hour apart do not flap), and the pace
 * starts over from it.
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
  let furthest = -Infinity;
  return (ms) => {
    const at = mono();
    if (at < furthest - CORRECTION_MS) {
      // Sources an hour apart do not flap: the clock was set right.
      furthest = at;
      allowedAt = undefined;
    } else if (at > furthest) furthest = at;
    if (allowedAt !== undefined && furthest - allowedAt < ms) return false;
    allowedAt = furthest;
    return true;
  };
}

/**
 * A line said at most once per `ms` of `now` (a log line for a condition
 * that may hold at every request). A clock stepped back behind the last
 * line is not "within `ms`" (the line may be said at once), but once per
 * `ms` at most ({@linkcode stepBackPace}), or a clock that flaps back and
 * forth would have it said at every read.
 *
 * @param ms The least time between two lines, in milliseconds.
 * @param now The clock the lines are timed by, in milliseconds.
 * @param mono The monotonic clock {@linkcode stepBackPace} reads (for tests).
 * @returns `due()`: whether the line may be said now; `true` is counted as
 *   said.
 *
 * @example
 * ```ts
 * import { oncePer } from "./_step_back.ts";
 * import assert from "node:assert/strict";
 *
 * let at = 0;
 * const due = oncePer(60_000, () => at);
 * assert.equal(due(), true);
 * at += 1_000;
 * assert.equal(due(), false);
 * at += 60_000;
 * assert.equal(due(), true);
 * ```
 */
export function oncePer(
  ms: number,
  now: () => number,
  mono?: () => number,
): () => boolean {
  let saidAt = -Infinity;
  const stepBack = stepBackPace(mono);
  return () => {
    const at = now();
    if (at < saidAt ? !stepBack(ms) : at - saidAt < ms) return false;
    saidAt = at;
    return true;
  };
}
