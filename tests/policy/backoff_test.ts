import assert from "node:assert/strict";
import fc from "fast-check";
import { backoff } from "../../mod.ts";
import { anyDelivery, catches } from "../_fc.ts";

// Past 2^31 too (a cap of days, or 2^53 − 1): drawn from the ranges alone,
// no cap reached 2^31 in 10,000 samples, where a 32-bit delay wraps.
const hugeMs = fc.constantFrom(
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32,
  Number.MAX_SAFE_INTEGER,
);
const anyBase = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 10 * 60_000 }) },
  hugeMs,
);
const anyCap = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 24 * 3_600_000 }) },
  hugeMs,
);

/** The bounds every backoff must keep, for any delivery, base and cap. */
function boundsProperty(impl: typeof backoff) {
  return fc.property(
    anyDelivery,
    anyBase,
    anyCap,
    (delivery, baseMs, capMs) => {
      const delayMs = impl(delivery, { baseMs, capMs });
      return Number.isSafeInteger(delayMs) && delayMs <= capMs &&
        delayMs >= Math.min(baseMs, capMs);
    },
  );
}

/** Monotone in the delivery number. */
function monotoneProperty(impl: typeof backoff) {
  return fc.property(
    anyDelivery,
    anyDelivery,
    anyBase,
    anyCap,
    (a, b, baseMs, capMs) => {
      const [lo, hi] = a <= b ? [a, b] : [b, a];
      return impl(lo, { baseMs, capMs }) <= impl(hi, { baseMs, capMs });
    },
  );
}

/** From the saturation point on, every delivery gets the cap, up to 1e300. */
function saturationProperty(impl: typeof backoff) {
  return fc.property(anyBase, anyCap, anyDelivery, (baseMs, capMs, extra) => {
    const saturation = Math.max(1, Math.ceil(Math.log2(capMs / baseMs)) + 1);
    return impl(saturation, { baseMs, capMs }) === capMs &&
      impl(Math.min(1e300, saturation + extra), { baseMs, capMs }) === capMs &&
      impl(1e300, { baseMs, capMs }) === capMs;
  });
}

/**
 * The schedule itself, against DESIGN §4's formula: min(cap, base × 2^(n−1))
 * is exact in doubles for every finite n (a power of two scales exactly,
 * and overflows to Infinity, whose min is the cap). Bounds, monotonicity
 * and saturation alone accept a schedule that starts one doubling early.
 */
function formulaProperty(impl: typeof backoff) {
  return fc.property(
    anyDelivery,
    anyBase,
    anyCap,
    (delivery, baseMs, capMs) =>
      impl(delivery, { baseMs, capMs }) ===
        Math.min(capMs, baseMs * 2 ** (delivery - 1)),
  );
}

// The classic bug the loop avoids: a shift wraps at 32 and the delay
// silently becomes tiny (or negative).
const shifted: typeof backoff = (
  delivery,
  { baseMs = 5000, capMs = 120_000 } = {},
) => Math.min(capMs, baseMs * (1 << (delivery - 1)));
// One that doubles from delivery 0: 10 s after the first delivery.
const earlyDoubling: typeof backoff = (
  delivery,
  { baseMs = 5000, capMs = 120_000 } = {},
) => Math.min(capMs, baseMs * 2 ** Math.min(delivery, 1100));
// And one that stops one millisecond short of the cap until delivery 40.
const offByOne: typeof backoff = (
  delivery,
  { baseMs = 5000, capMs = 120_000 } = {},
) => delivery > 40 ? capMs : Math.min(capMs - 1, baseMs * 2 ** (delivery - 1));

Deno.test("backoff() follows the default schedule: 5s, 10s, 20s, 40s, 80s, then 2m", () => {
  assert.deepEqual(
    Array.from({ length: 8 }, (_, i) => backoff(i + 1)),
    [5000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000, 120_000],
  );
});

Deno.test("backoff() gives the cap for huge delivery numbers instead of wrapping", () => {
  for (const delivery of [32, 33, 64, 1e9, 2 ** 53, 1e300]) {
    assert.equal(backoff(delivery), 120_000, `delivery ${delivery}`);
  }
});

Deno.test("backoff() caps at min(base, cap) when the cap is below the base", () => {
  assert.equal(backoff(1, { baseMs: 5000, capMs: 1000 }), 1000);
  assert.equal(backoff(7, { baseMs: 5000, capMs: 1000 }), 1000);
});

Deno.test("backoff() rejects a delivery that is not an integer >= 1 and names it", () => {
  for (const bad of [0, -3, 1.5, Number.NaN, Infinity, -Infinity, 2e308]) {
    assert.throws(() => backoff(bad), RangeError);
  }
  assert.throws(
    () => backoff(-3),
    {
      name: "RangeError",
      message:
        "Cannot compute backoff as 'delivery' must be an integer >= 1: current value is -3",
    },
  );
  assert.throws(
    () => backoff("3" as unknown as number),
    /current value is "3"/,
  );
  assert.throws(
    () => backoff(1, { baseMs: 0 }),
    /'baseMs' must be an integer number of milliseconds >= 1/,
  );
  assert.throws(
    () => backoff(1, { capMs: 0 }),
    /'capMs' must be an integer number of milliseconds >= 1/,
  );
  assert.throws(
    () => backoff(1, { capMs: Number.NaN }),
    /'capMs'.*current value is NaN/,
  );
});

Deno.test("backoff() is min(cap, base × 2^(delivery − 1)) for any delivery, base and cap", () => {
  fc.assert(formulaProperty(backoff));
});

Deno.test("backoff() stays within [min(base, cap), cap] for any delivery", () => {
  fc.assert(boundsProperty(backoff));
});

Deno.test("backoff() is monotone in the delivery number", () => {
  fc.assert(monotoneProperty(backoff));
});

Deno.test("backoff() equals the cap from the saturation point up to 1e300", () => {
  fc.assert(saturationProperty(backoff));
});

Deno.test("backoff() rejects every non-integer or < 1 delivery with a RangeError", () => {
  const invalid = fc.oneof(
    fc.integer({ max: 0 }),
    fc.double({ noInteger: true }),
    fc.constantFrom(Number.NaN, Infinity, -Infinity),
  );
  fc.assert(fc.property(invalid, (delivery) => {
    assert.throws(() => backoff(delivery), RangeError);
  }));
});

Deno.test("backoff() properties catch a shift that wraps at 32 and a cap off by one", () => {
  assert.equal(catches(boundsProperty(shifted)), true);
  assert.equal(catches(saturationProperty(offByOne)), true);
  assert.equal(catches(monotoneProperty(shifted)), true);
});

Deno.test("backoff() formula property catches a schedule that starts one doubling early, which the bounds, monotone and saturation properties miss", () => {
  assert.equal(catches(formulaProperty(earlyDoubling)), true);
  assert.equal(catches(boundsProperty(earlyDoubling)), false);
  assert.equal(catches(monotoneProperty(earlyDoubling)), false);
  assert.equal(catches(saturationProperty(earlyDoubling)), false);
});
