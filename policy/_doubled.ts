/**
 * The doubling loop behind `backoff`, shared with `decide` (which has
 * already checked its inputs).
 *
 * @module
 */

/**
 * `min(cap, base × 2^(delivery − 1))` for checked inputs. The delay doubles
 * in a loop that stops at the cap, so the cost is bounded by log2(cap /
 * base) whatever the delivery number, and no shift (`1 << n` wraps at 32)
 * or power (`2 ** n` reaches `Infinity`) is involved.
 */
export function doubled(
  delivery: number,
  baseMs: number,
  capMs: number,
): number {
  let delayMs = baseMs;
  for (let n = 1; n < delivery && delayMs < capMs; n++) delayMs *= 2;
  return Math.min(delayMs, capMs);
}

/**
 * The wait after the `count`-th delivery in a row that failed unexpectedly
 * (the store was down): `baseMs` doubled with each, up to `capMs` (never
 * below `baseMs`). Not jittered: the messages of one outage come back
 * spread as they failed. A `count` that is not a whole number from 1 (a
 * queue's field gone wrong) waits `baseMs`.
 */
export function outageDelayMs(
  count: number,
  baseMs: number,
  capMs: number,
): number {
  const n = Number.isSafeInteger(count) && count >= 1 ? count : 1;
  return doubled(n, baseMs, Math.max(capMs, baseMs));
}
