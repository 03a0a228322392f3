/**
 * Durations as people write them in settings: `"5s"`, `"2m"`,
 * `"1m30.5s"`, `"250ms"`, or plain milliseconds.
 *
 * @module
 */

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a duration into whole milliseconds: Go-style units (`h`, `m`,
 * `s`, `ms`, combined as {@linkcode formatDuration} prints them) or a plain
 * number of milliseconds.
 *
 * @param text The duration, such as `"2m"` or `"90500"`.
 * @returns The duration in milliseconds, rounded to a whole millisecond.
 * @throws {SyntaxError} If `text` is not a duration.
 *
 * @example Read a setting
 * ```ts
 * import { parseDuration } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseDuration("5s"), 5000);
 * assert.equal(parseDuration("1m30.5s"), 90_500);
 * assert.equal(parseDuration("120000"), 120_000);
 * assert.throws(() => parseDuration("soon"), SyntaxError);
 * ```
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (/^\d{1,15}$/.test(trimmed)) return Number(trimmed);
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== trimmed) {
    throw new SyntaxError(
      `Cannot parse duration as it must be milliseconds or Go-style units such as "5s", "2m" or "1m30.5s": current value is ${
        JSON.stringify(text)
      }`,
    );
  }
  const ms = parts.reduce(
    (sum, [, value, unit]) => sum + Number(value) * UNITS[unit!]!,
    0,
  );
  if (!Number.isSafeInteger(Math.round(ms))) {
    throw new SyntaxError(
      `Cannot parse duration as it is too long: current value is ${
        JSON.stringify(text)
      }`,
    );
  }
  return Math.round(ms);
}
