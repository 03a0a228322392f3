/**
 * QStash retries a failure callback as often as the message, on its own
 * backoff when a busy give-up sends no `Retry-After`: min(1 day, e^(2.5 n))
 * s before the n-th retry (12 s, 2m28s, 30m8s, 6h7m6s, then a day each).
 * `checkQueue` wants those retries to span more than a give-up busy behind
 * another's lease (`leaseMs` + 2 × `clockSkewMs`), at every step of that
 * table, the day's cap included.
 *
 * @module
 */

import assert from "node:assert/strict";
import { checkQueue, definePolicy } from "../../mod.ts";

/** Two deliveries: one retry is enough for the policy itself. */
const policy = definePolicy({
  maxDeliveries: 2,
  baseMs: 120_000,
  jitter: "none",
  stuckAfterMs: 60_000,
});

/** Whether `retries` stop early behind a lease of `leaseMs` (no clock skew). */
function stopsEarly(retries: number, leaseMs: number): boolean {
  return checkQueue(policy, {
    kind: "qstash",
    retries,
    leaseMs,
    clockSkewMs: 0,
  })
    .problem === "stops_early";
}

Deno.test("checkQueue() counts QStash's callback retries at each documented wait: 12s, 2m28s, 30m8s, 6h7m6s, then a day", () => {
  // The retries' span after the first call, in seconds: 12, 160, 1968,
  // 23 994, then a day more each (110 394, 196 794).
  const spansS = [12, 160, 1968, 23_994, 110_394, 196_794];
  for (const [i, spanS] of spansS.entries()) {
    const retries = i + 1;
    // A lease as long as the span: the last retry may still come while the
    // give-up is busy.
    assert.equal(
      stopsEarly(retries, spanS * 1000),
      true,
      `${retries} at the span`,
    );
    // A lease 1 ms shorter: the last retry comes after it.
    assert.equal(
      stopsEarly(retries, spanS * 1000 - 1),
      false,
      `${retries} past the span`,
    );
  }
});

Deno.test("checkQueue() caps QStash's wait before a callback retry at a day, past e^(2.5 n)", () => {
  // A lease of 40 h: four retries span 6h39m54s, the fifth comes a day
  // later (not e^12.5 s, 3 days), 30h39m54s on, and the sixth 54h39m54s on.
  const leaseMs = 40 * 3_600_000;
  assert.equal(stopsEarly(5, leaseMs), true);
  assert.equal(stopsEarly(6, leaseMs), false);
});

Deno.test("checkQueue() refuses a QStash leaseMs or clockSkewMs that is no whole number of milliseconds from 0, naming it: one read as is would give no verdict on the failure callback", () => {
  for (const name of ["leaseMs", "clockSkewMs"]) {
    for (const value of [-1, 1.5, Number.NaN, "30s"]) {
      assert.throws(
        () =>
          checkQueue(policy, {
            kind: "qstash",
            retries: 2,
            [name]: value,
          } as never),
        new RangeError(
          `Cannot read queue limits as '${name}' must be an integer number of milliseconds >= 0: current value is ${
            typeof value === "string"
              ? `"${value}", a text: give a number (parseDuration("${value}") reads a duration's text into milliseconds)`
              : String(value)
          }`,
        ),
      );
    }
  }
  // 0 is taken: no lease to wait out, no clock skew.
  assert.equal(
    checkQueue(policy, {
      kind: "qstash",
      retries: 1,
      leaseMs: 0,
      clockSkewMs: 0,
    })
      .problem,
    null,
  );
});
