/**
 * Durations as people read them in logs: Go's `time.Duration.String()` for
 * whole milliseconds.
 *
 * @module
 */

import { show } from "./_validate.ts";

/**
 * Formats a duration in milliseconds the way Go's `time.Duration.String()`
 * prints a whole number of milliseconds: `"250ms"` below a second, then
 * hours, minutes and seconds with the fraction of a second trimmed of
 * trailing zeros. A fractional input is rounded to the nearest millisecond.
 *
 * @param ms The duration in milliseconds.
 * @returns The duration as text, such as `"1m30.5s"`.
 * @throws {RangeError} If `ms` is not a finite number, or its size is above
 * `Number.MAX_SAFE_INTEGER`.
 *
 * @example Print the policy's delays
 * ```ts
 * import { formatDuration } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(formatDuration(5000), "5s");
 * assert.equal(formatDuration(120000), "2m0s");
 * assert.equal(formatDuration(90500), "1m30.5s");
 * assert.equal(formatDuration(250), "250ms");
 * assert.equal(formatDuration(3600000), "1h0m0s");
 * assert.equal(formatDuration(0), "0s");
 * ```
 */
export function formatDuration(ms: number): string {
  if (
    typeof ms !== "number" || !Number.isFinite(ms) ||
    Math.abs(ms) > Number.MAX_SAFE_INTEGER
  ) {
    // Beyond 2^53 − 1 ms (285,616 years) the hours would print in
    // exponent notation, which nothing parses.
    throw new RangeError(
      `Cannot format duration as 'ms' must be a finite number of at most ${Number.MAX_SAFE_INTEGER} milliseconds either way: current value is ${
        show(ms)
      }`,
    );
  }
  const whole = Math.round(Math.abs(ms));
  const sign = ms < 0 && whole > 0 ? "-" : "";
  if (whole === 0) return "0s";
  if (whole < 1000) return `${sign}${whole}ms`;

  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const millis = whole % 60_000;
  const seconds = Math.floor(millis / 1000);
  const fraction = String(millis % 1000).padStart(3, "0").replace(/0+$/, "");
  const secondsText = fraction === ""
    ? `${seconds}s`
    : `${seconds}.${fraction}s`;

  if (hours > 0) return `${sign}${hours}h${minutes}m${secondsText}`;
  if (minutes > 0) return `${sign}${minutes}m${secondsText}`;
  return `${sign}${secondsText}`;
}
