/**
 * The intent state machine: the only moves a store accepts.
 *
 * @module
 */

/**
 * Where a payment intent is:
 * `created` → `authorized` → `settling` → `settled` | `failed` |
 * `needs_review`, and an operator takes `needs_review` to `settled` or
 * `failed`. `settled` and `failed` are terminal.
 *
 * @example A label for every state
 * ```ts
 * import { type IntentState, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A Record over IntentState fails to compile if a state is left out.
 * const label: Record<IntentState, string> = {
 *   created: "New", authorized: "Funds held", settling: "On its way",
 *   settled: "Paid", failed: "Failed", needs_review: "Under review",
 * };
 * const intent = await new MemoryStore().createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * assert.equal(label[intent.state], "Funds held");
 * ```
 */
export type IntentState =
  | "created"
  | "authorized"
  | "settling"
  | "settled"
  | "failed"
  | "needs_review";

/**
 * Every {@linkcode IntentState}, in the order a payment moves through them.
 *
 * @example List the terminal states
 * ```ts
 * import { INTENT_STATES, TRANSITIONS } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const terminal = INTENT_STATES.filter((state) => TRANSITIONS[state].length === 0);
 * assert.deepEqual(terminal, ["settled", "failed"]);
 * ```
 */
// Frozen, as TRANSITIONS: the stores check a state against this list, so a
// caller's push must not widen what every store in the process accepts.
export const INTENT_STATES: readonly IntentState[] = Object.freeze([
  "created",
  "authorized",
  "settling",
  "settled",
  "failed",
  "needs_review",
]);

/**
 * The transition table: for each state, the states it may move to. No
 * other move exists; a store rejects it.
 *
 * | from | to | who |
 * |---|---|---|
 * | created | authorized | payments API, hold recorded first |
 * | authorized | settling | relayer (settle job) |
 * | settling | settled | relayer, hold captured first |
 * | settling | failed | relayer after poison, only if nothing was sent; hold voided first |
 * | settling | needs_review | relayer after poison, anything else |
 * | needs_review | settled / failed | operator, hold captured / voided first |
 *
 * @example Ask whether a move is allowed
 * ```ts
 * import { TRANSITIONS } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.ok(TRANSITIONS.settling.includes("failed"));
 * assert.ok(!TRANSITIONS.authorized.includes("failed"));
 * ```
 */
export const TRANSITIONS: Readonly<
  Record<IntentState, readonly IntentState[]>
> = Object.freeze({
  // Each list frozen too: `canTransition` reads them, so a caller's push
  // must not open a move (failed → settling) for every store in the process.
  created: moves("authorized"),
  authorized: moves("settling"),
  settling: moves("settled", "failed", "needs_review"),
  settled: moves(),
  failed: moves(),
  needs_review: moves("settled", "failed"),
});

function moves(...to: IntentState[]): readonly IntentState[] {
  return Object.freeze(to);
}

/**
 * Whether `from` → `to` is in the {@linkcode TRANSITIONS} table.
 *
 * @param from The state the writer read.
 * @param to The state it wants.
 * @returns `true` when the table has the move.
 *
 * @example Terminal states go nowhere
 * ```ts
 * import { canTransition } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(canTransition("created", "authorized"), true);
 * assert.equal(canTransition("failed", "settling"), false);
 * ```
 */
export function canTransition(from: IntentState, to: IntentState): boolean {
  // Own keys only: "toString" is no state, whatever Object.prototype says.
  return Object.hasOwn(TRANSITIONS, from) && TRANSITIONS[from].includes(to);
}
