/**
 * The waits a QStash 429 asks for, read from its headers in whole
 * milliseconds, never less than it asked.
 *
 * @module
 */

/**
 * `Retry-After` (RFC 9110: seconds, or an HTTP date) in milliseconds from
 * `now`; fractional seconds are taken as seconds. Anything else is not
 * read (`undefined`): `Date.parse` would take "1.5" or "2-3" for dates
 * long past, a wait of 0 s.
 */
export function retryAfterMs(
  value: string | null,
  now: number,
): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  const seconds = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (seconds) {
    const [, whole, fraction = ""] = seconds;
    return wholeMs(whole!, fraction, 3);
  }
  // An HTTP date names its day and month in letters (IMF-fixdate and the
  // two obsolete forms RFC 9110 still reads).
  if (!/[A-Za-z]{3}/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/**
 * A limit's reset, a unix timestamp, in milliseconds from `now`. QStash
 * documents no unit: a value past 10^12 is read as milliseconds (that is
 * 2001 in them, and the year 33658 in seconds), any other as seconds.
 * QStash sends whole ones; a fraction is waited for whole, as
 * `Retry-After`'s is.
 */
export function resetInMs(
  value: string | null,
  now: number,
): number | undefined {
  const stamp = value === null
    ? null
    : /^(\d+)(?:\.(\d+))?$/.exec(value.trim());
  if (!stamp) return undefined;
  const [text, whole, fraction = ""] = stamp;
  const at = wholeMs(whole!, fraction, Number(text) > 1e12 ? 0 : 3);
  return Math.max(0, at - now);
}

/**
 * `whole.fraction` in a unit `10 ** shift` milliseconds long (3: seconds,
 * 0: milliseconds), as whole milliseconds rounded up. Read as decimals, not
 * as Number(text) * 1000: 16.1 × 1000 is 16,100.000000000002 in floating
 * point, which rounded up asked a millisecond more, and a stamp's fraction
 * past a double's digits would be rounded away, a wait shorter than asked.
 */
function wholeMs(whole: string, fraction: string, shift: 0 | 3): number {
  const ms = Number(whole) * 10 ** shift +
    Number(fraction.slice(0, shift).padEnd(shift, "0") || "0");
  return /[1-9]/.test(fraction.slice(shift)) ? ms + 1 : ms;
}
