/**
 * What a relayer knows of its own sends, for the webhook's resolve route:
 * which intents it is sending right now, and the txs its sends returned
 * that no store holds. A queue's give-up waits only a bounded time for a
 * send of this process before it puts the payment in review (see
 * `giveUp`), and a send that outlived its lease (the wall clock stepped
 * forward mid-send, a Sender slower than the lease) may still leave after
 * it. Failing that payment then voids its hold while its tx is about to
 * leave, whatever the nonce showed a moment before; and once that send
 * ended, its record refused (the intent left settling), its tx is on no
 * record the route could read, though the operator looked the nonce up
 * before it left. Kept out of the relayer's public interface: only this
 * process can know, and only its routes ask.
 *
 * @module
 */

/**
 * How a relayer answers for its own sends.
 *
 * @example A relayer sending nothing, with one tx on no record
 * ```ts
 * import type { OwnSends } from "./_sends.ts";
 *
 * const sends: OwnSends = {
 *   inFlight: () => false,
 *   unrecorded: (id) => id === "pi_0001" ? ["0xabc"] : [],
 *   endedUnrecorded: () => false,
 * };
 * ```
 */
export interface OwnSends {
  /** Whether a send of the intent is in flight (between its write ahead and its record). */
  inFlight(intentId: string): boolean;
  /** The txs its sends of the intent returned whose record failed, oldest first. */
  unrecorded(intentId: string): readonly string[];
  /**
   * Whether a send of the intent whose outcome may have left (a tx, or an
   * error that does not say it stayed home) ended with that outcome on no
   * record since this was last answered `true`.
   */
  endedUnrecorded(intentId: string): boolean;
}

const SENDS = new WeakMap<object, OwnSends>();

/**
 * Registers how `relayer` answers for its own sends of an intent.
 *
 * @example Register and ask
 * ```ts
 * import { registerSends, sendInFlight, unrecordedTxHashes } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * const relayer = {};
 * registerSends(relayer, {
 *   inFlight: (id) => id === "pi_0001",
 *   unrecorded: (id) => id === "pi_0002" ? ["0xabc"] : [],
 *   endedUnrecorded: (id) => id === "pi_0002",
 * });
 * assert.equal(sendInFlight(relayer, "pi_0001"), true);
 * assert.equal(sendInFlight(relayer, "pi_0002"), false);
 * assert.deepEqual(unrecordedTxHashes(relayer, "pi_0002"), ["0xabc"]);
 * ```
 */
export function registerSends(relayer: object, sends: OwnSends): void {
  SENDS.set(relayer, sends);
}

/**
 * Whether `relayer` has a send of `intentId` in flight; `false` for a
 * relayer that registered nothing (one built elsewhere).
 *
 * @example A relayer that registered nothing
 * ```ts
 * import { sendInFlight } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(sendInFlight({}, "pi_0001"), false);
 * ```
 */
export function sendInFlight(relayer: object, intentId: string): boolean {
  return SENDS.get(relayer)?.inFlight(intentId) ?? false;
}

/**
 * The txs `relayer`'s sends of `intentId` returned whose record failed
 * (refused once the intent left settling, or the store down): sent, and
 * on no record. None for a relayer that registered nothing.
 *
 * @example A relayer that registered nothing
 * ```ts
 * import { unrecordedTxHashes } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(unrecordedTxHashes({}, "pi_0001"), []);
 * ```
 */
export function unrecordedTxHashes(
  relayer: object,
  intentId: string,
): readonly string[] {
  return SENDS.get(relayer)?.unrecorded(intentId) ?? [];
}

/**
 * Whether a send of `intentId` by `relayer` ended with an outcome that may
 * have left (a tx, or an error that does not say it stayed home) on no
 * record since this last answered `true` (which it answers once per such
 * end); `false` for a relayer that registered nothing.
 *
 * @example A relayer that registered nothing
 * ```ts
 * import { sendEndedUnrecorded } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(sendEndedUnrecorded({}, "pi_0001"), false);
 * ```
 */
export function sendEndedUnrecorded(
  relayer: object,
  intentId: string,
): boolean {
  return SENDS.get(relayer)?.endedUnrecorded(intentId) ?? false;
}
