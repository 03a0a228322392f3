/**
 * Which intents a relayer is sending right now, for the webhook's resolve
 * route: a queue's give-up waits only a bounded time for a send of this
 * process before it puts the payment in review (see `giveUp`), and a send
 * that outlived its lease (the wall clock stepped forward mid-send, a
 * Sender slower than the lease) may still leave after it. Failing that
 * payment then voids its hold while its tx is about to leave, whatever
 * the nonce showed a moment before. Kept out of the relayer's public
 * interface: only this process can know, and only its routes ask.
 *
 * @module
 */

const SENDS = new WeakMap<object, (intentId: string) => boolean>();

/**
 * Registers how `relayer` tells whether it has a send of an intent in
 * flight (between its write ahead and its record).
 *
 * @example Register and ask
 * ```ts
 * import { registerSends, sendInFlight } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * const relayer = {};
 * registerSends(relayer, (id) => id === "pi_0001");
 * assert.equal(sendInFlight(relayer, "pi_0001"), true);
 * assert.equal(sendInFlight(relayer, "pi_0002"), false);
 * ```
 */
export function registerSends(
  relayer: object,
  inFlight: (intentId: string) => boolean,
): void {
  SENDS.set(relayer, inFlight);
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
  return SENDS.get(relayer)?.(intentId) ?? false;
}
