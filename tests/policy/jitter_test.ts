import assert from "node:assert/strict";
import fc from "fast-check";
import { definePolicy, type Jitter, jitter, JITTERS } from "../../mod.ts";
import { anyRandomOutput, catches } from "../_fc.ts";

const anyDelay = fc.oneof(
  fc.integer({ min: 0, max: 24 * 3_600_000 }),
  fc.constantFrom(0, 1, 2, 3, 5000, 120_000, Number.MAX_SAFE_INTEGER),
  fc.double({ min: 0, max: 1e15, noNaN: true }),
);

function equalProperty(impl: typeof jitter) {
  return fc.property(anyDelay, anyRandomOutput, (delayMs, r) => {
    const out = impl(delayMs, "equal", () => r);
    return out >= Math.floor(delayMs / 2) && out <= delayMs;
  });
}

function fullProperty(impl: typeof jitter) {
  return fc.property(anyDelay, anyRandomOutput, (delayMs, r) => {
    const out = impl(delayMs, "full", () => r);
    return out >= 0 && out <= delayMs;
  });
}

// Typical slips: a floor that is not one, and a random taken on trust.
const noFloor: typeof jitter = (d, _s, random = Math.random) =>
  Math.floor(random() * d);
const trusting: typeof jitter = (d, s, random = Math.random) => {
  const half = s === "full" ? 0 : Math.floor(d / 2);
  return half + Math.floor(random() * (d - half + 1));
};

Deno.test("jitter() keeps equal jitter in [floor(d/2), d] for any delay and any random output", () => {
  fc.assert(equalProperty(jitter));
});

Deno.test("jitter() keeps full jitter in [0, d] for any delay and any random output", () => {
  fc.assert(fullProperty(jitter));
});

Deno.test("jitter() with none returns the delay itself", () => {
  fc.assert(
    fc.property(
      anyDelay,
      anyRandomOutput,
      (d, r) => jitter(d, "none", () => r) === d,
    ),
  );
});

Deno.test("jitter() reaches both ends of the equal range for a whole delay", () => {
  assert.equal(jitter(5001, "equal", () => 0), 2500);
  assert.equal(jitter(5001, "equal", () => 1 - Number.EPSILON / 2), 5001);
  assert.equal(jitter(1, "equal", () => 0.99), 1);
  assert.equal(jitter(0, "equal", () => 0.5), 0);
});

Deno.test("jitter() clamps a misbehaving random: 1, NaN, negatives", () => {
  assert.equal(jitter(5000, "equal", () => 1), 5000);
  assert.equal(jitter(5000, "equal", () => Number.NaN), 2500);
  assert.equal(jitter(5000, "equal", () => -0.1), 2500);
  assert.equal(jitter(5000, "full", () => 1), 5000);
  assert.equal(jitter(5000, "full", () => Number.NaN), 0);
});

Deno.test("jitter() spreads equal jitter over the upper half", () => {
  const seen = new Set<number>();
  for (let i = 0; i < 11; i++) seen.add(jitter(10, "equal", () => i / 11));
  assert.deepEqual([...seen].sort((a, b) => a - b), [5, 6, 7, 8, 9, 10]);
});

Deno.test("jitter() draws each whole delay of its range equally often: equal jitter floor(d/2) + randomInt(0 … d − floor(d/2)), full randomInt(0 … d)", () => {
  // Over a grid of evenly spaced random outputs (mid-cell, clear of float
  // rounding at the cells' edges), each delay of the range comes out as
  // often as every other: a rounding draw would give its two ends half the
  // weight of the rest.
  const counts = (delayMs: number, strategy: "equal" | "full", per: number) => {
    const low = strategy === "equal" ? Math.floor(delayMs / 2) : 0;
    const size = (delayMs - low + 1) * per;
    const seen = new Map<number, number>();
    for (let k = 0; k < size; k++) {
      const out = jitter(delayMs, strategy, () => (k + 0.5) / size);
      seen.set(out, (seen.get(out) ?? 0) + 1);
    }
    return { low, seen };
  };
  for (const delayMs of [10, 5001]) {
    for (const strategy of ["equal", "full"] as const) {
      const { low, seen } = counts(delayMs, strategy, 4);
      assert.equal(seen.size, delayMs - low + 1, `${strategy} ${delayMs}`);
      for (const [out, n] of seen) {
        assert.ok(
          out >= low && out <= delayMs,
          `${strategy} ${delayMs}: ${out}`,
        );
        assert.equal(n, 4, `${strategy} ${delayMs}: ${out} came ${n} times`);
      }
    }
  }
});

Deno.test("jitter() draws from Math.random when given no source", () => {
  // 32 draws over a billion values: all alike only if the source is fixed.
  const seen = new Set<number>();
  for (let i = 0; i < 32; i++) seen.add(jitter(1e9, "full"));
  assert.ok(seen.size > 1, `32 draws gave ${[...seen]}`);
});

Deno.test("jitter() rejects a bad delay or strategy", () => {
  assert.throws(() => jitter(-1, "equal"), RangeError);
  assert.throws(
    () => jitter(Number.NaN, "equal"),
    /'delayMs' must be a finite number >= 0: current value is NaN/,
  );
  assert.throws(() => jitter(5, "half" as "equal"), TypeError);
});

Deno.test("jitter() properties catch a floor that is not one and a random taken on trust", () => {
  assert.equal(catches(equalProperty(noFloor)), true);
  assert.equal(catches(equalProperty(trusting)), true);
  assert.equal(catches(fullProperty(trusting)), true);
});

Deno.test("JITTERS cannot be changed at run time: no caller adds a strategy definePolicy accepts", () => {
  assert.throws(() => (JITTERS as string[]).push("half"), TypeError);
  assert.throws(() => definePolicy({ jitter: "half" as Jitter }), TypeError);
});
