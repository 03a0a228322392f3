/**
 * The boundary to the chain: the user implements it for theirs.
 *
 * @module
 */

import type { Intent } from "../store/store.ts";

/**
 * What a transaction's receipt says.
 *
 * @example Map a node's answer
 * ```ts
 * import type { ReceiptStatus } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A node knows a mined receipt or a mempool entry; the relayer knows three words.
 * function statusOf(receipt: { blockNumber: number } | null, inMempool: boolean): ReceiptStatus {
 *   if (receipt !== null) return "confirmed";
 *   return inMempool ? "pending" : "dropped";
 * }
 * assert.equal(statusOf({ blockNumber: 42 }, false), "confirmed");
 * assert.equal(statusOf(null, false), "dropped");
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
