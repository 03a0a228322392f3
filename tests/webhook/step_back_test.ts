/**
 * `stepBackPace()` where `performance.now()` is no monotonic clock: on
 * workerd (Cloudflare Workers) `performance.timeOrigin` is 0 and
 * `performance.now()` reads `Date.now()` (seen on workerd 1.20260730.1,
 * miniflare 4.20260730.0), so a step of the wall clock moves it too. A clock that flaps among time
 * sources then reads as the step's length passing at every flap, and the
 * pace must still end a wait at most once per its length of the time the
 * furthest-ahead source has gone on, not at every read.
 *
 * @module
 */
import assert from "node:assert/strict";
import { stepBackPace } from "../../webhook/_step_back.ts";

const STEP_MS = 10 * 60_000;

/** The reading at call `call` of a clock flapping among `sources` a step apart, 100 ms a call. */
function flapped(sources: number, call: number): number {
  return 1_800_000_000_000 - (call % sources) * STEP_MS + call * 100;
}

Deno.test("stepBackPace() over a monotonic clock that is the wall clock (workerd) flapping among two or three sources allows a minute's wait to end once in 4 s, not at every read", () => {
  for (const sources of [2, 3]) {
    let mono = 0;
    const allow = stepBackPace(() => mono);
    let allowed = 0;
    for (let call = 0; call < 40; call++) {
      mono = flapped(sources, call);
      if (allow(60_000)) allowed++;
    }
    assert.equal(
      allowed,
      1,
      `${allowed} of 40 reads allowed (${sources} sources)`,
    );
  }
});

Deno.test("stepBackPace() over a monotonic clock that is the wall clock (workerd) flapping for two minutes allows a minute's wait to end about once a minute", () => {
  let mono = 0;
  const allow = stepBackPace(() => mono);
  let allowed = 0;
  // 1 200 reads, 100 ms apart by the furthest-ahead source: 2 minutes.
  for (let call = 0; call < 1_200; call++) {
    mono = flapped(3, call);
    if (allow(60_000)) allowed++;
  }
  assert.ok(allowed >= 2 && allowed <= 3, `${allowed} allowed in 2 minutes`);
});

Deno.test("stepBackPace() over a true monotonic clock allows once per wait's length as it goes on", () => {
  let mono = 5_000;
  const allow = stepBackPace(() => mono);
  assert.equal(allow(1_000), true);
  mono += 999;
  assert.equal(allow(1_000), false);
  mono += 1;
  assert.equal(allow(1_000), true);
  mono += 10_000;
  assert.equal(allow(1_000), true);
});

Deno.test("stepBackPace() over a monotonic clock that is the wall clock (workerd): a second step back before the clock caught up with the first and went on the wait's length does not end its wait (the documented cost: it looks like a flap)", () => {
  let mono = 1_800_000_000_000;
  const allow = stepBackPace(() => mono);
  assert.equal(allow(60_000), true, "the first step back ends the wait");
  mono -= STEP_MS; // the wall clock, and so this clock, steps 10 min back
  mono += 2 * 60_000; // 2 min later it steps back again
  assert.equal(allow(60_000), false);
  mono += STEP_MS - 2 * 60_000 + 60_000; // caught up, and a minute on
  assert.equal(allow(60_000), true);
});

Deno.test("stepBackPace() over a monotonic clock that is the wall clock (workerd): a correction in two steps, the second over an hour, ends the second's wait at once, not a step later", () => {
  const DAY = 24 * 60 * 60_000;
  let mono = 1_800_000_000_000 + DAY; // a clock a day ahead
  const allow = stepBackPace(() => mono);
  mono -= DAY / 2; // corrected by half: still 12 h ahead
  assert.equal(allow(60_000), true, "the first step back ends the wait");
  mono += 60_000;
  mono -= DAY / 2; // corrected again, to true time
  assert.equal(
    allow(60_000),
    true,
    "a step back of 12 h is a correction, not a flap: its wait ends",
  );
  mono += 1_000;
  assert.equal(allow(60_000), false, "and the pace goes on from there");
  mono += 60_000;
  assert.equal(allow(60_000), true);
});
