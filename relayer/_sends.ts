/**
 * What a relayer knows of its own sends, for the webhook's resolve route:
 * which intents it is sending right now, and the txs its sends returned
 * that no store holds. A queue's give-up waits only a bounded time for a
 * send of this process before it puts the payment in review (see
 * `giveUp`), and a send that outlived its lease (the wall clock stepped
 * forward mid-send, a Sender slower than the lease) may still leave after
 * it. Failing that payment then voids its hold while its tx is about to
 * leave, whatever the nonce showed a moment before; and once that send
 * ended, its record failed (the store takes the record of a send that
 * outlived its settling on the intent in review, so a store error, say),
 * its tx is on no record the route could read, though the operator
 * looked the nonce up before it left. Kept out of the relayer's public interface: only this
 * process can know, and only its routes ask.
 *
 * @module
 */

import { DEFAULT_QUEUE_LEASE_MS } from "../policy/_retention.ts";

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
 *   ended: () => false,
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
   * record, and the resolve request that asks (its number from
   * {@linkcode resolveArrived}, `arrival`) can not have been told so: the
   * first ask since such an end, and every request that arrived by then.
   */
  endedUnrecorded(intentId: string, arrival: number): boolean;
  /**
   * Whether a send of the intent by this process, written ahead at
   * `broadcasting` (the intent's `broadcasting` then), has ended with no
   * record landed (one that landed cleared that write-ahead: a
   * `broadcasting` of the same time read since is another send's).
   */
  ended(intentId: string, broadcasting: number): boolean;
}

/**
 * The lease a relayer takes when it is given none, in milliseconds: the
 * longest a send of it can run, which the resolve route's wait for a send
 * that may still run counts on, so both read this one value.
 *
 * @example A default of 30 s
 * ```ts
 * import { DEFAULT_LEASE_MS } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(DEFAULT_LEASE_MS, 30_000);
 * ```
 */
export const DEFAULT_LEASE_MS = DEFAULT_QUEUE_LEASE_MS;

/** How many resolve requests arrived in this process: their order. */
let arrived = 0;

/**
 * Numbers a resolve request as it arrives, in the order requests arrive
 * in this process: a warning said to one request reaches no request that
 * arrived before it was said (a second operator's, a script's retry sent
 * while its first try ran), so those are warned as well.
 *
 * @example Numbers go up
 * ```ts
 * import { resolveArrived } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * const first = resolveArrived();
 * assert.ok(resolveArrived() > first);
 * ```
 */
export function resolveArrived(): number {
  return ++arrived;
}

/**
 * The number of the last resolve request that arrived, for a relayer
 * that says a warning now: every request numbered up to it was under way.
 *
 * @example After an arrival
 * ```ts
 * import { resolveArrived, resolveArrivals } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * const n = resolveArrived();
 * assert.equal(resolveArrivals(), n);
 * ```
 */
export function resolveArrivals(): number {
  return arrived;
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
 *   ended: () => false,
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
 * record, and the resolve request numbered `arrival` (by
 * {@linkcode resolveArrived}) cannot have been told: `true` to the first
 * request that asks after such an end, and to every request that arrived
 * before that answer; `false` for a relayer that registered nothing.
 *
 * @example A relayer that registered nothing
 * ```ts
 * import { resolveArrived, sendEndedUnrecorded } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(sendEndedUnrecorded({}, "pi_0001", resolveArrived()), false);
 * ```
 */
export function sendEndedUnrecorded(
  relayer: object,
  intentId: string,
  arrival: number,
): boolean {
  return SENDS.get(relayer)?.endedUnrecorded(intentId, arrival) ?? false;
}

/**
 * Whether the send of `intentId` written ahead at `broadcasting` was
 * `relayer`'s, and has ended: a review still carrying that write-ahead
 * waits for no send. `false` for a write-ahead of another process (or of
 * this one before a restart), and for a relayer that registered nothing:
 * that send may still be running.
 *
 * @example A relayer that registered nothing
 * ```ts
 * import { ownSendEnded } from "./_sends.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(ownSendEnded({}, "pi_0001", 1_000), false);
 * ```
 */
export function ownSendEnded(
  relayer: object,
  intentId: string,
  broadcasting: number,
): boolean {
  return SENDS.get(relayer)?.ended(intentId, broadcasting) ?? false;
}
