/**
 * The boundary to the chain: the user implements it for theirs.
 *
 * @module
 */

import type { Intent } from "../store/store.ts";

/** What a transaction's receipt says. */
export type ReceiptStatus = "confirmed" | "pending" | "dropped";

/**
 * The chain client the settle job calls.
 *
 * `send` throws on failure and marks what it knows: wrap the error with
 * `notSent()` only when nothing left the process (the chain is clean), and
 * with `poison()` when no retry can help. Any other error is taken as
 * "maybe sent".
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
