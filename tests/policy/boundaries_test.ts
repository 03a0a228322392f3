/**
 * Exact delays at and past the cap's saturation, with a fixed `random`:
 * the bounds properties elsewhere accept any value inside [floor, cap], so
 * a jitter that drifts inside them (a floor off by one, a span one short,
 * a cap applied after the jitter instead of before) needs exact values.
 */
import assert from "node:assert/strict";
import { backoff, decide, jitter } from "../../mod.ts";

const error = new Error("rpc timeout");

/** The retry delay decide() gives after `delivery` with `random` fixed. */
function delay(
  delivery: number,
  random: number,
  policy: Parameters<typeof decide>[2] = {},
): number {
  const decision = decide(error, delivery, {
    maxDeliveries: Number.MAX_SAFE_INTEGER,
    ...policy,
  }, {
    random: () => random,
  });
  assert.equal(decision.action, "retry");
  return (decision as { delayMs: number }).delayMs;
}

// The default policy: base 5 s, cap 2 min, equal jitter. Un-jittered:
// 5, 10, 20, 40, 80 s, then 120 s from delivery 6 on (5 s × 2^5 = 160 s > cap).
const PAST_SATURATION = [6, 7, 10, 31, 32, 33, 64, 1e9, 2 ** 53 - 2];

Deno.test("backoff() is exactly 80s at delivery 5 and exactly the cap from delivery 6 to 2^53 − 2", () => {
  assert.equal(backoff(5, { baseMs: 5000, capMs: 120_000 }), 80_000);
  for (const n of PAST_SATURATION) {
    assert.equal(
      backoff(n, { baseMs: 5000, capMs: 120_000 }),
      120_000,
      `#${n}`,
    );
  }
});

Deno.test("decide() with equal jitter past saturation: random 0 → 60000, 0.5 → 90000, just under 1 → 120000", () => {
  for (const n of PAST_SATURATION) {
    assert.equal(delay(n, 0), 60_000, `#${n} random 0`);
    assert.equal(delay(n, 0.5), 90_000, `#${n} random 0.5`);
    assert.equal(delay(n, 0.25), 75_000, `#${n} random 0.25`);
    assert.equal(delay(n, 1 - 2 ** -53), 120_000, `#${n} random → 1`);
    // A misbehaving random is held to the bounds, at their exact edges.
    assert.equal(delay(n, 1), 120_000, `#${n} random 1`);
    assert.equal(delay(n, -0.1), 60_000, `#${n} random −0.1`);
    assert.equal(delay(n, NaN), 60_000, `#${n} random NaN`);
  }
});

Deno.test("decide() with equal jitter just before saturation: delivery 5 gives 40000 … 80000 exactly", () => {
  assert.equal(delay(5, 0), 40_000);
  assert.equal(delay(5, 0.5), 60_000);
  assert.equal(delay(5, 1 - 2 ** -53), 80_000);
});

Deno.test("decide() with full and no jitter past saturation: 0, 60000, 120000 and 120000", () => {
  for (const n of PAST_SATURATION) {
    assert.equal(delay(n, 0, { jitter: "full" }), 0);
    assert.equal(delay(n, 0.5, { jitter: "full" }), 60_000);
    assert.equal(delay(n, 1 - 2 ** -53, { jitter: "full" }), 120_000);
    assert.equal(delay(n, 0.5, { jitter: "none" }), 120_000);
  }
});

Deno.test("decide() saturates at a cap that is not a power-of-two multiple of the base: exactly 100000, floor 50000", () => {
  const policy = { baseMs: 5000, capMs: 100_000 };
  assert.equal(backoff(5, policy), 80_000);
  for (const n of [6, 7, 1e9]) {
    assert.equal(backoff(n, policy), 100_000);
    assert.equal(delay(n, 0, policy), 50_000);
    assert.equal(delay(n, 1 - 2 ** -53, policy), 100_000);
  }
});

Deno.test("jitter() at an odd delay: equal keeps floor(d/2) … d inclusive", () => {
  assert.equal(jitter(120_001, "equal", () => 0), 60_000);
  assert.equal(jitter(120_001, "equal", () => 1 - 2 ** -53), 120_001);
  assert.equal(jitter(1, "equal", () => 0), 0);
  assert.equal(jitter(1, "equal", () => 0.99), 1);
});
