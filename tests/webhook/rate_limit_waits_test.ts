/**
 * The waits a QStash 429 asks for, in whole milliseconds: a fraction of
 * one, in `Retry-After` or in a limit's reset, is waited for whole, and
 * never rounded away (a double holds about 16 digits; a stamp in
 * milliseconds spends 13 of them before its point).
 *
 * @module
 */
import assert from "node:assert/strict";
import { resetInMs, retryAfterMs } from "../../webhook/_rate_limit_waits.ts";

const NOW = 1_765_062_000_000;

Deno.test("resetInMs() reads a reset in unix seconds or milliseconds as whole milliseconds from now, a fraction rounded up, never below the stamp", () => {
  for (
    const [stamp, waitMs] of [
      ["1765062030", 30_000],
      [" 1765062030 ", 30_000],
      ["1765062030.5", 30_500],
      ["1765062030.25", 30_250],
      ["1765062030.001", 30_001],
      // A fraction of a millisecond, in seconds and in milliseconds.
      ["1765062030.0005", 30_001],
      ["1765062030000.5", 30_001],
      // Fractions past a double's digits: Number() rounds them away.
      ["1765062030.0000000001", 30_001],
      ["1765062030000.00001", 30_001],
      ["1765062030.1230000000", 30_123],
      ["1765062030000.000", 30_000],
      // Already past: try again now.
      ["1765061000", 0],
      ["1765061999999.9", 0],
    ] as const
  ) {
    assert.equal(resetInMs(stamp, NOW), waitMs, stamp);
  }
});

Deno.test("resetInMs() reads nothing but digits with one point", () => {
  for (const stamp of [null, "", "1765062030.", ".5", "-5", "1e12", "soon"]) {
    assert.equal(resetInMs(stamp, NOW), undefined, String(stamp));
  }
});

Deno.test("retryAfterMs() reads seconds as decimals, a fraction of a millisecond waited for whole", () => {
  for (
    const [value, waitMs] of [
      ["120", 120_000],
      ["16.1", 16_100],
      ["4.07", 4_070],
      ["2.0005", 2_001],
      ["1.5", 1_500],
    ] as const
  ) {
    assert.equal(retryAfterMs(value, NOW), waitMs, value);
  }
  assert.equal(retryAfterMs("2-3", NOW), undefined);
  assert.equal(
    retryAfterMs(new Date(NOW + 60_000).toUTCString(), NOW),
    60_000,
  );
});
