import assert from "node:assert/strict";
import fc from "fast-check";
import { formatDuration, parseDuration } from "../../mod.ts";
import { catches, runs } from "../_fc.ts";

Deno.test("parseDuration() reads Go-style units and plain milliseconds", () => {
  const cases: [string, number][] = [
    ["0", 0],
    ["0s", 0],
    ["250ms", 250],
    ["5s", 5000],
    ["2m", 120_000],
    ["1h", 3_600_000],
    ["1m30.5s", 90_500],
    ["1h2m3.45s", 3_723_450],
    ["1h0m0s", 3_600_000],
    ["1.001s", 1001],
    ["33.334s", 33_334],
    ["1.0ms", 1],
    ["1.5000s", 1500],
    ["0.5m", 30_000],
    ["1.5h", 5_400_000],
    ["1m1m", 120_000], // as Go: units may repeat
    ["120000", 120_000],
    [" 5s\n", 5000], // a setting's stray whitespace
    ["007", 7],
    ["999999999999999", 999_999_999_999_999], // 15 digits
    ["9007199254740991ms", Number.MAX_SAFE_INTEGER],
  ];
  for (const [text, ms] of cases) {
    assert.equal(parseDuration(text), ms, JSON.stringify(text));
  }
});

Deno.test("parseDuration() refuses what is not a duration, and says what it must be", () => {
  for (
    const text of [
      "",
      " ",
      "soon",
      "-5s",
      "+5s",
      "5 s",
      "5S",
      "5sec",
      "5d",
      "1e3",
      ".5s",
      "1.s",
      "5s!",
      "s",
      "1,5s",
    ]
  ) {
    assert.throws(
      () => parseDuration(text),
      (error: unknown) =>
        error instanceof SyntaxError &&
        error.message ===
          `Cannot parse duration as it must be milliseconds or Go-style units such as "5s", "2m" or "1m30.5s": current value is ${
            JSON.stringify(text)
          }`,
      JSON.stringify(text),
    );
  }
  assert.throws(
    () => parseDuration(5000 as unknown as string),
    /Cannot parse duration as 'text' must be a string: current value is 5000/,
  );
});

Deno.test("parseDuration() refuses a fraction of a millisecond instead of rounding it", () => {
  for (const text of ["0.4ms", "1.5ms", "1.0005s", "0.00001m", "1.0000001h"]) {
    assert.throws(
      () => parseDuration(text),
      (error: unknown) =>
        error instanceof SyntaxError &&
        error.message ===
          `Cannot parse duration as it must be a whole number of milliseconds (at most 3 decimals on "s", none on "ms"): current value is ${
            JSON.stringify(text)
          }`,
      text,
    );
  }
  // Any fourth decimal of a second that is not 0.
  fc.assert(
    fc.property(
      fc.nat({ max: 1e9 }),
      fc.integer({ min: 1, max: 9999 }).filter((n) => n % 10 !== 0),
      (seconds, fraction) => {
        const text = `${seconds}.${String(fraction).padStart(4, "0")}s`;
        assert.throws(
          () => parseDuration(text),
          /whole number of milliseconds/,
        );
      },
    ),
  );
});

Deno.test("parseDuration() refuses a duration too long to be exact, and says why", () => {
  assert.throws(
    () => parseDuration("1234567890123456"),
    (error: unknown) =>
      error instanceof SyntaxError &&
      error.message ===
        'Cannot parse duration as it is too long: a plain number of milliseconds has at most 15 digits, so that it stays exact (write a longer one with units, such as "300000000h"): current value is "1234567890123456"',
  );
  assert.equal(parseDuration("300000000h"), 1_080_000_000_000_000);
  for (
    const text of ["9007199254740992ms", "2501999793h", "1".repeat(40) + "s"]
  ) {
    assert.throws(
      () => parseDuration(text),
      new RegExp(
        `^SyntaxError: Cannot parse duration as it is too long: at most 9007199254740991 milliseconds: current value is "${text}"$`,
      ),
    );
  }
});

/** Whole milliseconds: small ones often, and up to the largest safe integer. */
const anyMs: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: 0, max: 10_000_000 }),
  fc.maxSafeNat(),
);

function roundTripProperty(parse: typeof parseDuration) {
  return fc.property(anyMs, (ms) => {
    assert.equal(parse(formatDuration(ms)), ms, formatDuration(ms));
  });
}

// A slip the property must catch: the digits after the point taken as
// milliseconds, unscaled ("1.5s" read as 1005 ms, right only for three
// digits, as in "1.001s").
const unscaled: typeof parseDuration = (text) => {
  const units: Record<string, number> = {
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  let ms = 0;
  for (
    const [, whole, fraction, unit] of text.matchAll(
      /(\d+)(?:\.(\d+))?(ms|h|m|s)/g,
    )
  ) {
    ms += Number(whole) * units[unit!]! + Number(fraction ?? 0);
  }
  return ms;
};

Deno.test("parseDuration() reads back what formatDuration() prints, for any whole milliseconds", () => {
  fc.assert(roundTripProperty(parseDuration), { numRuns: runs(1000) });
});

Deno.test("parseDuration() round-trip property catches a fraction read unscaled", () => {
  assert.equal(catches(roundTripProperty(unscaled)), true);
});
