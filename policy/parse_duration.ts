/**
 * Durations as people write them in settings: `"5s"`, `"2m"`,
 * `"1m30.5s"`, `"250ms"`, or plain milliseconds.
 *
 * @module
 */

import { show } from "./_show.ts";

const UNITS: Record<string, bigint> = {
  ms: 1n,
  s: 1000n,
  m: 60_000n,
  h: 3_600_000n,
};

const MAX_MS = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Parses a duration into whole milliseconds: Go-style units (`h`, `m`,
 * `s`, `ms`, combined as {@linkcode formatDuration} prints them, each with
 * an optional decimal fraction) or a plain number of milliseconds (at most
 * 15 digits). Every duration is a whole number of milliseconds, so a
 * fraction of one (`"0.4ms"`, `"1.0005s"`) is refused, not rounded.
 *
 * @param text The duration, such as `"2m"` or `"90500"`.
 * @returns The duration in milliseconds, a safe integer >= 0.
 * @throws {SyntaxError} If `text` is not a duration, holds a fraction of a
 * millisecond, or is longer than `Number.MAX_SAFE_INTEGER` milliseconds.
 * @throws {TypeError} If `text` is not a string.
 *
 * @example Read a setting
 * ```ts
 * import { parseDuration } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseDuration("5s"), 5000);
 * assert.equal(parseDuration("1m30.5s"), 90_500);
 * assert.equal(parseDuration("1.5h"), 5_400_000);
 * assert.equal(parseDuration("120000"), 120_000);
 * assert.throws(() => parseDuration("soon"), SyntaxError);
 * assert.throws(() => parseDuration("0.4ms"), /whole number of milliseconds/);
 * ```
 */
export function parseDuration(text: string): number {
  if (typeof text !== "string") {
    throw new TypeError(
      `Cannot parse duration as 'text' must be a string: current value is ${
        show(text)
      }`,
    );
  }
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) {
    // Fifteen digits are always a safe integer: a plain number is taken as
    // it is written, never rounded by the conversion. Leading zeros add
    // nothing.
    const digits = trimmed.replace(/^0+(?=\d)/, "");
    if (digits.length <= 15) return Number(digits);
    throw new SyntaxError(
      `Cannot parse duration as it is too long: a plain number of milliseconds has at most 15 digits, so that it stays exact (write a longer one with units, such as "300000000h"): current value is ${
        show(text)
      }`,
    );
  }
  const parts = [...trimmed.matchAll(/(\d+)(?:\.(\d+))?(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== trimmed) {
    throw new SyntaxError(
      `Cannot parse duration as it must be milliseconds or Go-style units such as "5s", "2m" or "1m30.5s": current value is ${
        show(text)
      }`,
    );
  }
  // Exact arithmetic: "1.001s" is 1001 ms, not 1000.9999999999999.
  let ms = 0n;
  for (const [, whole, fraction = "", unit] of parts) {
    const unitMs = UNITS[unit!]!;
    const scale = 10n ** BigInt(fraction.length);
    const part = BigInt(fraction === "" ? 0 : fraction) * unitMs;
    if (part % scale !== 0n) {
      throw new SyntaxError(
        `Cannot parse duration as it must be a whole number of milliseconds (at most 3 decimals on "s", none on "ms"): current value is ${
          show(text)
        }`,
      );
    }
    ms += BigInt(whole!) * unitMs + part / scale;
  }
  if (ms > MAX_MS) {
    throw new SyntaxError(
      `Cannot parse duration as it is too long: at most ${Number.MAX_SAFE_INTEGER} milliseconds: current value is ${
        show(text)
      }`,
    );
  }
  return Number(ms);
}
