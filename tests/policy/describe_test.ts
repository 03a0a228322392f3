import assert from "node:assert/strict";
import fc from "fast-check";
import {
  backoff,
  decide,
  DEFAULT_POLICY,
  definePolicy,
  describePolicy,
  formatDuration,
  jitter,
  parseDuration,
  type Policy,
  rescueWindow,
} from "../../mod.ts";
import { catches } from "../_fc.ts";

Deno.test("formatDuration() prints like Go's time.Duration.String() for whole milliseconds", () => {
  const cases: [number, string][] = [
    [0, "0s"],
    [1, "1ms"],
    [250, "250ms"],
    [999, "999ms"],
    [1000, "1s"],
    [1001, "1.001s"],
    [1500, "1.5s"],
    [5000, "5s"],
    [59_999, "59.999s"],
    [60_000, "1m0s"],
    [90_500, "1m30.5s"],
    [120_000, "2m0s"],
    [3_600_000, "1h0m0s"],
    [3_723_450, "1h2m3.45s"],
    [100 * 3_600_000, "100h0m0s"],
    [-5000, "-5s"],
    [-250, "-250ms"],
    [2.4, "2ms"],
  ];
  for (const [ms, text] of cases) {
    assert.equal(formatDuration(ms), text, `${ms}`);
  }
  assert.throws(() => formatDuration(Number.NaN), RangeError);
  assert.throws(() => formatDuration(Infinity), /'ms' must be a finite number/);
});

Deno.test("formatDuration() round-trips: the text parses back to the same milliseconds", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 1e12 }),
      (ms) => parseDuration(formatDuration(ms)) === ms,
    ),
  );
});

Deno.test("describePolicy() prints the policy in one line", () => {
  assert.equal(
    describePolicy(definePolicy({ maxDeliveries: 3, jitter: "none" })),
    "at most 3 deliveries; back off 5s doubling, capped at 2m0s",
  );
  assert.equal(
    describePolicy(DEFAULT_POLICY),
    "at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter",
  );
  assert.equal(
    describePolicy(
      definePolicy({
        maxDeliveries: 1,
        baseMs: 250,
        capMs: 90_500,
        jitter: "full",
      }),
    ),
    "at most 1 delivery; back off 250ms doubling, capped at 1m30.5s, full jitter",
  );
});

Deno.test("definePolicy() and decide() check again a policy that only inherits from a checked one", () => {
  // Its own fields are bad; its prototype was checked, it was not.
  const inherits = Object.create(DEFAULT_POLICY, {
    maxDeliveries: { value: Number.NaN, enumerable: true },
    baseMs: { value: 0, enumerable: true },
  }) as Policy;
  assert.throws(() => definePolicy(inherits), RangeError);
  assert.throws(() => decide(new Error("e"), 1e6, inherits), RangeError);
  // A checked policy itself still passes as it is.
  const checked = definePolicy({ maxDeliveries: 3 });
  assert.equal(definePolicy(checked), checked);
});

Deno.test("definePolicy() completes, checks and freezes a policy", () => {
  // JavaScript callers may pass undefined for "not set".
  const policy = definePolicy(
    { maxDeliveries: 3, baseMs: undefined } as unknown as Partial<Policy>,
  );
  assert.deepEqual(policy, { ...DEFAULT_POLICY, maxDeliveries: 3 });
  assert.ok(Object.isFrozen(policy));
  assert.equal(definePolicy(policy), policy);
  assert.throws(
    () => definePolicy({ capMs: 0 }),
    /'capMs' must be an integer number of milliseconds >= 1: current value is 0/,
  );
  assert.throws(() => definePolicy({ stuckAfterMs: -1 }), RangeError);
  assert.throws(
    () => definePolicy({ maxDeliveries: 2.5 }),
    /'maxDeliveries' must be an integer >= 1: current value is 2.5/,
  );
  assert.throws(
    () => definePolicy({ jitter: "decorrelated" as "equal" }),
    TypeError,
  );
});

Deno.test("definePolicy() and decide() refuse a base of 0 ms, which would make every delay 0", () => {
  assert.throws(
    () => definePolicy({ baseMs: 0 }),
    /'baseMs' must be an integer number of milliseconds >= 1: current value is 0/,
  );
  // decide() reads a plain partial policy itself, and asks definePolicy()
  // for the error: a base of 0 must not come back as a retry after 0 ms.
  assert.throws(() => decide(new Error("e"), 1, { baseMs: 0 }), RangeError);
});

Deno.test("rescueWindow() of the default policy is 317.5s, above its 5m stuckAfter; full jitter guarantees 0", () => {
  assert.equal(rescueWindow(DEFAULT_POLICY), 317_500);
  assert.ok(rescueWindow(DEFAULT_POLICY) >= DEFAULT_POLICY.stuckAfterMs);
  assert.equal(rescueWindow(definePolicy({ jitter: "none" })), 635_000);
  assert.equal(rescueWindow(definePolicy({ jitter: "full" })), 0);
  assert.equal(rescueWindow(definePolicy({ maxDeliveries: 1 })), 0);
  assert.equal(
    rescueWindow(definePolicy({ maxDeliveries: 3, jitter: "none" })),
    15_000,
  );
});

const anyPolicy: fc.Arbitrary<Policy> = fc.record({
  maxDeliveries: fc.integer({ min: 1, max: 60 }),
  baseMs: fc.integer({ min: 1, max: 60_000 }),
  capMs: fc.integer({ min: 1, max: 3_600_000 }),
  jitter: fc.constantFrom("equal", "full", "none"),
  stuckAfterMs: fc.constant(0),
}).map(definePolicy);

/** The window is what the slowest-floor schedule actually waits: sum of the jitter's lower bounds. */
function windowProperty(impl: typeof rescueWindow) {
  return fc.property(anyPolicy, (policy) => {
    let floor = 0;
    for (let delivery = 1; delivery < policy.maxDeliveries; delivery++) {
      floor += jitter(backoff(delivery, policy), policy.jitter, () => 0);
    }
    return impl(policy) === floor;
  });
}

Deno.test("rescueWindow() equals the sum of the jitter's lower bounds over every gap", () => {
  fc.assert(windowProperty(rescueWindow));
});

Deno.test("rescueWindow() costs the same for a billion deliveries and equals the closed form", () => {
  const policy = definePolicy({ maxDeliveries: 1e9 });
  assert.equal(rescueWindow(policy), 77_500 + (1e9 - 1 - 5) * 60_000);
});

Deno.test("rescueWindow() stops counting gap by gap at the cap: 10^8 deliveries take no longer than 10", () => {
  // The value alone cannot tell a loop that stops at the cap from one that
  // adds the capped gaps one by one (same sum, 10^8 iterations).
  const policy = definePolicy({ maxDeliveries: 1e8 });
  const started = performance.now();
  assert.equal(rescueWindow(policy), 77_500 + (1e8 - 1 - 5) * 60_000);
  const elapsedMs = performance.now() - started;
  // Microseconds when bounded by log2(cap / base); seconds when not.
  assert.ok(elapsedMs < 500, `${elapsedMs.toFixed(0)} ms`);
});

Deno.test("rescueWindow() property catches a window counted with the un-jittered delays", () => {
  const ceiling: typeof rescueWindow = (p) =>
    Array.from({ length: p.maxDeliveries - 1 }, (_, i) => backoff(i + 1, p))
      .reduce((a, b) => a + b, 0);
  assert.equal(catches(windowProperty(ceiling)), true);
});
