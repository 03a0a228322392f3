/**
 * The memory of write-aheads seen unrecorded that the resolve route's
 * send-in-flight wait is counted on.
 *
 * @module
 */

import assert from "node:assert/strict";
import { writeAheadsSeen } from "../../webhook/_write_aheads.ts";

Deno.test("writeAheadsSeen counts a wait from the first sight of each write-ahead, never lengthened by a clock that steps back, never below 0", () => {
  let mono = 1_000;
  const left = writeAheadsSeen(() => mono);
  assert.equal(left("pi_1", 5, 30_000), 30_000);
  mono += 10_000;
  assert.equal(left("pi_1", 5, 30_000), 20_000);
  // Another write-ahead of the same intent, or another intent's: a wait of
  // its own, from now.
  assert.equal(left("pi_1", 6, 30_000), 30_000);
  assert.equal(left("pi_2", 5, 30_000), 30_000);
  // The clock steps back (workerd's steps with the wall clock): no wait
  // grows.
  mono -= 8_000;
  assert.equal(left("pi_1", 5, 30_000), 20_000);
  // A write-ahead first seen while the clock reads behind is counted from
  // its furthest reading.
  assert.equal(left("pi_3", 5, 30_000), 30_000);
  mono += 8_000 + 25_000;
  assert.equal(left("pi_3", 5, 30_000), 5_000);
  // Long past: 0, not less.
  mono += 1_000_000;
  assert.equal(left("pi_1", 5, 30_000), 0);
  // Part of a millisecond left is a millisecond.
  const fine = writeAheadsSeen(() => mono);
  assert.equal(fine("pi_1", 5, 30_000), 30_000);
  mono += 29_999.5;
  assert.equal(fine("pi_1", 5, 30_000), 1);
});

Deno.test("writeAheadsSeen's first sight of a write-ahead waits the whole bound at any reading of the clock, not a millisecond more by rounding", () => {
  // performance.now() has fractions of a millisecond: (3379.35… + 30,000)
  // − 3379.35… is 30,000.000000000004 in floating point, which rounded up
  // to 30,001 ms and answered Retry-After: 31 one time in thirty.
  for (
    const at of [3379.3526472374324, 39933.32769698643, 110998.90108010957]
  ) {
    const left = writeAheadsSeen(() => at);
    assert.equal(left("pi_1", 5, 30_000), 30_000, `at ${at}`);
  }
});

Deno.test("writeAheadsSeen keeps the 10,000 write-aheads seen last: the oldest forgotten is waited for again, the others are not", () => {
  let mono = 0;
  const left = writeAheadsSeen(() => mono);
  for (let i = 0; i <= 10_000; i++) left(`pi_${i}`, 1, 30_000);
  mono += 30_000;
  // pi_0 was forgotten when the 10,001st was seen: a wait from now.
  assert.equal(left("pi_0", 1, 30_000), 30_000);
  // The rest are remembered: their waits have passed.
  assert.equal(left("pi_2", 1, 30_000), 0);
  assert.equal(left("pi_10000", 1, 30_000), 0);
});
