import assert from "node:assert/strict";
import { planResolution } from "../../mod.ts";

// planResolution is pure and public: an adopter maps its own records onto
// it. A state outside the machine ("SETTLED", "done", a field left out)
// was planned as a drop, "job dropped, intent already done", so the job
// was acked and the payment kept no job; and `undefined` for a missing
// intent threw "Cannot read properties of undefined (reading 'state')".

Deno.test("planResolution() refuses a state the machine does not have, naming it", () => {
  for (const state of ["done", "SETTLED", undefined]) {
    assert.throws(
      () =>
        planResolution({
          state,
          lastBroadcast: null,
          broadcasting: null,
          mayHaveSent: true,
        } as never),
      new TypeError(
        `Cannot plan a resolution as 'state' must be an intent state (created, authorized, settling, settled, failed, needs_review): current value is ${
          state === undefined ? "undefined" : JSON.stringify(state)
        }`,
      ),
    );
  }
});

Deno.test("planResolution() refuses an intent that is neither an object nor null", () => {
  for (const intent of [undefined, "pi_0001", 0]) {
    assert.throws(
      () => planResolution(intent as never),
      (error) =>
        error instanceof TypeError &&
        /'intent' must be the intent as read from the store, or null when it is missing/
          .test(error.message),
    );
  }
});

Deno.test("planResolution() still drops the job of a terminal or reviewed intent", () => {
  for (const state of ["settled", "failed", "needs_review"] as const) {
    assert.deepEqual(
      planResolution({
        state,
        lastBroadcast: null,
        broadcasting: null,
        mayHaveSent: true,
      }),
      { action: "drop", text: `job dropped, intent already ${state}` },
    );
  }
});
