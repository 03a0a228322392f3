/**
 * The transition table against the specification (DESIGN §2), written out
 * here by hand and not derived from `TRANSITIONS`: the store contract runs
 * every pair through each store *using* `TRANSITIONS`, so an edge added to
 * or dropped from the table would pass it. This test pins the table itself.
 */
import assert from "node:assert/strict";
import {
  canTransition,
  INTENT_STATES,
  type IntentState,
  TRANSITIONS,
} from "../../store/transitions.ts";

/**
 * DESIGN §2, row by row:
 *
 * | from | to |
 * |---|---|
 * | created | authorized |
 * | authorized | settling |
 * | settling | settled |
 * | settling | failed |
 * | settling | needs_review |
 * | needs_review | settled / failed |
 *
 * "`settled` and `failed` are terminal. No other transition exists."
 */
const SPEC: readonly (readonly [IntentState, IntentState])[] = [
  ["created", "authorized"],
  ["authorized", "settling"],
  ["settling", "settled"],
  ["settling", "failed"],
  ["settling", "needs_review"],
  ["needs_review", "settled"],
  ["needs_review", "failed"],
];

const STATES: readonly IntentState[] = [
  "created",
  "authorized",
  "settling",
  "settled",
  "failed",
  "needs_review",
];

Deno.test("INTENT_STATES are exactly the six states of DESIGN §2", () => {
  assert.deepEqual([...INTENT_STATES].sort(), [...STATES].sort());
});

Deno.test("canTransition() allows exactly the moves of DESIGN §2, for every one of the 36 state pairs", () => {
  const wrong: string[] = [];
  for (const from of STATES) {
    for (const to of STATES) {
      const spec = SPEC.some(([f, t]) => f === from && t === to);
      if (canTransition(from, to) !== spec) {
        wrong.push(`${from} → ${to}: spec ${spec ? "allows" : "forbids"} it`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

Deno.test("TRANSITIONS lists each allowed move once and no state moves to itself", () => {
  for (const from of STATES) {
    const targets = TRANSITIONS[from];
    assert.equal(new Set(targets).size, targets.length, from);
    assert.ok(!targets.includes(from), `${from} → ${from}`);
  }
  const count = STATES.reduce((n, from) => n + TRANSITIONS[from].length, 0);
  assert.equal(count, SPEC.length);
});

Deno.test("settled and failed are terminal, and nothing moves back to created or authorized except created → authorized", () => {
  for (const terminal of ["settled", "failed"] as const) {
    for (const to of STATES) assert.equal(canTransition(terminal, to), false);
  }
  for (const from of STATES) {
    assert.equal(canTransition(from, "created"), false, `${from} → created`);
    assert.equal(
      canTransition(from, "authorized"),
      from === "created",
      `${from} → authorized`,
    );
  }
});

Deno.test("canTransition() refuses states that do not exist", () => {
  assert.equal(
    canTransition("created" as IntentState, "paid" as IntentState),
    false,
  );
  assert.equal(canTransition("paid" as IntentState, "settled"), false);
});

Deno.test("canTransition() answers false for a name that is no state, even one Object.prototype has", () => {
  for (const name of ["toString", "constructor", "__proto__", "paid"]) {
    assert.equal(canTransition(name as IntentState, "settled"), false, name);
    assert.equal(canTransition("settling", name as IntentState), false, name);
  }
});

Deno.test("TRANSITIONS and INTENT_STATES cannot be changed at run time: no caller adds a move or a state every store obeys", () => {
  assert.ok(Object.isFrozen(TRANSITIONS));
  for (const state of INTENT_STATES) {
    assert.throws(
      () => (TRANSITIONS[state] as IntentState[]).push("settling"),
      TypeError,
      state,
    );
  }
  assert.throws(
    () => (INTENT_STATES as IntentState[]).push("created"),
    TypeError,
  );
  assert.equal(canTransition("failed", "settling"), false);
  assert.equal(INTENT_STATES.length, 6);
});
