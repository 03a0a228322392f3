/**
 * The boundary to the chain: the user implements it for theirs.
 *
 * @module
 */

import type { Intent } from "../store/store.ts";

/**
 * What a transaction's receipt says: `confirmed` only for a tx mined **and
 * successful** (the relayer then captures the hold and settles), `pending`
 * while it may still be mined, `dropped` when the node no longer knows it
 * (the relayer re-sends with the same nonce). A tx mined but reverted is
 * none of these: the payment did not happen and its nonce is spent, so
 * `receipt` throws, marked `poison()`, and the intent goes to review. Mark
 * nothing else so: failing a review, the webhook's resolve route reads a
 * receipt's `poison()` as the intent's nonce spent, and asks for no nonce
 * check.
 *
 * @example Map a node's answer
 * ```ts
 * import { poison, type ReceiptStatus } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A node knows a mined receipt (with its status) or a mempool entry.
 * function statusOf(
 *   receipt: { blockNumber: number; status: "success" | "reverted" } | null,
 *   inMempool: boolean,
 * ): ReceiptStatus {
 *   if (receipt?.status === "reverted") {
 *     // Never "confirmed": that would settle a payment that did not happen.
 *     throw poison(new Error(`reverted in block ${receipt.blockNumber}`));
 *   }
 *   if (receipt !== null) return "confirmed";
 *   return inMempool ? "pending" : "dropped";
 * }
 * assert.equal(statusOf({ blockNumber: 42, status: "success" }, false), "confirmed");
 * assert.equal(statusOf(null, false), "dropped");
 * assert.throws(() => statusOf({ blockNumber: 43, status: "reverted" }, false), /reverted/);
 * ```
 */
export type ReceiptStatus = "confirmed" | "pending" | "dropped";

/**
 * The chain client the settle job calls.
 *
 * `send` throws on failure and marks what it knows: wrap the error with
 * `notSent()` only when nothing left the process (the chain is clean), and
 * with `poison()` when no retry can help. Any other error is taken as
 * "maybe sent".
 *
 * The nonce is the Sender's to keep, one per intent:
 * - `replace: false` comes only while nothing of the intent may have left:
 *   sign with a fresh nonce and keep it with the intent's id;
 * - `replace: true` is a rescue (a tx stuck or dropped, a send whose
 *   outcome is unknown, a send after one declared not sent when an earlier
 *   one may have left, or an intent imported with a send on record): sign
 *   again with the nonce kept for the intent, at
 *   a higher fee, so at most one of its txs can land. If none is kept (its
 *   first send never reached the signer), nothing of it can be on the
 *   chain, and a fresh nonce is safe; a signer that cannot tell must throw
 *   (not `notSent`), and the intent ends in review, never paid twice.
 *
 * @example A Sender that marks what it knows
 * ```ts
 * import { createRelayer, MemoryStore, notSent, poison, type Sender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const sender: Sender = {
 *   send(intent) {
 *     // Refused before signing: nothing left the process, and no retry can help.
 *     if (intent.id.startsWith("test_")) return Promise.reject(poison(notSent(new Error("wrong network"))));
 *     return Promise.resolve({ txHash: "0xabc" });
 *   },
 *   receipt: () => Promise.resolve("confirmed"),
 * };
 * const store = new MemoryStore();
 * await store.createIntent({ id: "test_0001", state: "authorized", hold: "pending" });
 * const outcome = await createRelayer({ store, sender }).deliver({ intentId: "test_0001", kind: "settle" }, 1);
 * assert.equal(outcome.action, "poison");
 * assert.equal((await store.getIntent("test_0001"))?.state, "failed");
 * ```
 */
export interface Sender {
  /**
   * Broadcasts the settlement of `intent`. With `replace: true`, re-sends
   * with the same nonce (a rescue of a stuck transaction).
   *
   * @returns The transaction hash the node accepted.
   */
  send(
    intent: Intent,
    options: { replace: boolean },
  ): Promise<{ txHash: string }>;

  /** Reads the receipt of a transaction. */
  receipt(txHash: string): Promise<ReceiptStatus>;
}
