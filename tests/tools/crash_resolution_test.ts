/**
 * The crash test's checks of the resolution path (the give-up's void then
 * fail, the operator's resolve route): an intent read at any moment, on a
 * store that voids or captures a hold in the commit of the move it rides
 * in, never shows a hold its state contradicts; and which resolutions
 * were sent while a `cancel` fault was under way.
 *
 * @module
 */

import assert from "node:assert/strict";
import { duringCancel, holdAgainstState } from "../../tools/crash.ts";

Deno.test("holdAgainstState() names a hold half a resolution left: failed with the hold live, a review or a settling intent with its hold voided", () => {
  // What a whole commit leaves.
  for (
    const [state, hold] of [
      ["created", null],
      ["created", "pending"],
      ["authorized", "pending"],
      ["settling", "pending"],
      ["needs_review", "pending"],
      ["failed", "voided"],
      ["failed", null],
      ["settled", "captured"],
    ] as const
  ) {
    assert.equal(holdAgainstState(state, hold), null, `${state} ${hold}`);
  }
  assert.equal(
    holdAgainstState("failed", "pending"),
    "failed with a pending hold",
  );
  assert.equal(
    holdAgainstState("failed", "captured"),
    "failed with a captured hold",
  );
  assert.equal(
    holdAgainstState("needs_review", "voided"),
    "needs_review with a voided hold",
  );
  assert.equal(
    holdAgainstState("settling", "voided"),
    "settling with a voided hold",
  );
  assert.equal(
    holdAgainstState("settled", "pending"),
    "settled with a pending hold",
  );
});

Deno.test("duringCancel() takes a request sent while a cancel fault was under way, and no other fault's or time", () => {
  const faults = [
    { kind: "terminate", from: 100, up: 200 },
    { kind: "cancel", from: 1000, up: 4000 },
    { kind: "cancel", from: 6000, up: null },
  ] as const;
  assert.equal(duringCancel(faults, 150), false);
  assert.equal(duringCancel(faults, 999), false);
  assert.equal(duringCancel(faults, 1000), true);
  assert.equal(duringCancel(faults, 4000), true);
  assert.equal(duringCancel(faults, 4001), false);
  assert.equal(duringCancel(faults, 7000), true);
});
