/**
 * The boundary to the chain: the user implements it for theirs.
 *
 * @module
 */

import type { Intent } from "../store/store.ts";

/**
 * What a transaction's receipt says: `confirmed` only for a tx mined **and
 * successful** and **final** (deep enough that no reorg can undo it; the
 * relayer then captures the hold and settles, and never reads that receipt
 * again), `pending` while it may still be mined or is mined but not final
 * yet, `dropped` when the node no longer knows it (the relayer re-sends
 * with the same nonce; a tx the node does not know is `dropped`, not an
 * error: an error is retried, never rescued). `dropped` is "not seen now",
 * not "can never land": a tx gone from a mempool stays valid while its
 * nonce is unused, and whoever holds it may broadcast it again. The
 * relayer never fails a payment on it: it rescues at once (on each
 * delivery that reads it, so a tx your node has not seen yet is rescued
 * too, at a higher fee), and the resolve route fails one only with its
 * nonce checked (or a tx of it reverted). So keep the intent's nonce when
 * its tx drops: forgotten, the rescue signs a fresh one, and the dropped
 * tx and the rescue can both land. A tx mined but reverted,
 * once final, is none of these: the payment did not happen and its nonce
 * is spent, so `receipt` throws, marked `poison()`, and the intent goes to
 * review. Mark nothing else so, and no revert before it is final (a reorg
 * may replay it, or a replacement of the same nonce, successfully):
 * failing a review, the webhook's resolve route reads a receipt's
 * `poison()` as the intent's nonce spent, and asks for no nonce check.
 *
 * A reorg after `confirmed` is outside the relayer: the intent is settled
 * and its hold captured. Choose the depth so that cannot happen, and so
 * that a tx reaches it well within the policy's rescue window (a payment
 * still `pending` when the deliveries run out goes to review, paid or not).
 *
 * @example Map a node's answer
 * ```ts
 * import { poison, type ReceiptStatus } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Blocks on top of a tx's block before a reorg cannot undo it: your chain's.
 * const FINAL_DEPTH = 12;
 *
 * // A node knows a mined receipt (with its status) or a mempool entry.
 * function statusOf(
 *   receipt: { blockNumber: number; status: "success" | "reverted" } | null,
 *   head: number,
 *   inMempool: boolean,
 * ): ReceiptStatus {
 *   if (receipt === null) return inMempool ? "pending" : "dropped";
 *   // Mined, but a reorg may still undo it (or replay it otherwise).
 *   if (head - receipt.blockNumber < FINAL_DEPTH) return "pending";
 *   if (receipt.status === "reverted") {
 *     // Never "confirmed": that would settle a payment that did not happen.
 *     throw poison(new Error(`reverted in block ${receipt.blockNumber}`));
 *   }
 *   return "confirmed";
 * }
 * const mined = { blockNumber: 42, status: "success" } as const;
 * assert.equal(statusOf(mined, 43, false), "pending");
 * assert.equal(statusOf(mined, 54, false), "confirmed");
 * assert.equal(statusOf(null, 54, false), "dropped");
 * assert.throws(() => statusOf({ blockNumber: 30, status: "reverted" }, 54, false), /reverted/);
 * ```
 */
export type ReceiptStatus = "confirmed" | "pending" | "dropped";

/**
 * The chain client the settle job calls.
 *
 * `send` throws on failure and marks what it knows. Wrap the error with
 * `notSent()` only when no tx of this call can reach the chain, now or
 * later: refused before signing, or signed but given to no node (or
 * refused by each node it was given to) and discarded, not kept for a
 * retry, an outbox or a broadcast still running. Never on a nonce that
 * carries a tx of the intent that may be out there: a node's refusal of
 * it ("already known", "replacement underpriced") speaks of that tx, which
 * may land, so return its hash or throw unmarked. The relayer fails a
 * payment (voids its hold) whose last send was `notSent` when none of the
 * sends it made may have left; a copy of a call it never knew of (a proxy
 * that retried the request) only that rule catches. Wrap with `poison()`
 * when no retry can help: the payment is resolved at once, failed with
 * `notSent()` (as above), else reviewed. Any other error is taken as
 * "maybe sent". Throw an `Error`: its message is what the broadcast's
 * record, the delivery's reason and a dead letter keep. A value that is
 * not one (`{ code: "ECONNRESET" }`, `null`) counts the same, and is kept
 * only as its kind and a short `name` or `code`
 * (`Object with code "ECONNRESET" (not an Error)`), never its other
 * fields; a thrown string is kept as it is, up to 1,000 characters.
 *
 * The nonce is the Sender's to keep, one per intent:
 * - `replace: false` comes only while nothing of the intent may have left:
 *   sign with a fresh nonce and keep it with the intent's id before the
 *   tx leaves. With a nonce already kept for the intent, it is a first send
 *   that reached the signer late (its process paused past its lease, or a
 *   request run minutes late), after a rescue: sign with the kept nonce,
 *   as a rescue does, never a fresh one, or both txs can land;
 * - `replace: true` is a rescue (a tx stuck or dropped, a send whose
 *   outcome is unknown, a send after one declared not sent when an earlier
 *   one may have left, or an intent imported with a send on record): sign
 *   again with the nonce kept for the intent, at
 *   a higher fee, so at most one of its txs can land. If none is kept (its
 *   first send never reached the signer), nothing of it can be on the
 *   chain, and a fresh nonce is safe; a signer that cannot tell must throw
 *   (not `notSent`), and the intent ends in review, never paid twice. That
 *   holds only if the nonce is kept **durably before the tx leaves**: a
 *   signer that keeps it once the node accepted the tx, and dies between
 *   the two, finds none kept for a tx that is out there, and a fresh nonce
 *   pays twice. An intent imported with a send on record (`createIntent`
 *   with `mayHaveSent`, or a send in flight, `broadcasting`) was sent by
 *   another process, whose send never reached this signer: keep its tx's
 *   nonce for the intent before you import it, or the signer finds none
 *   kept and a fresh nonce pays twice.
 * - a rescue may come for a tx already mined (a receipt `pending` until
 *   final, or a send whose answer was lost): if the kept nonce is used by
 *   a tx of this intent, return that tx's hash rather than throw. The
 *   relayer then reads its receipt and settles. Thrown ("nonce too low",
 *   never marked `notSent`: the nonce carries a tx of the intent, see
 *   above), it finds that tx only if its hash is on record: one whose
 *   answer was lost, it never reads, and the payment ends in review, paid.
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
   * with the same nonce (a rescue of a stuck transaction). Any send signs
   * with the nonce kept for the intent if one is kept (see above).
   *
   * @returns The transaction hash the node accepted.
   */
  send(
    intent: Intent,
    options: { replace: boolean },
  ): Promise<{ txHash: string }>;

  /**
   * Reads the receipt of a transaction.
   *
   * `options.signal`, where the relayer passes one, aborts when it stops
   * waiting for the answer (a queue's give-up past its receipts budget,
   * the resolve route past its 5 s): stop the request then, and reject
   * (with `signal.reason`, as `fetch` does). A Sender that ignores it
   * keeps working: its request runs on to its own timeout, its answer
   * unread.
   */
  receipt(
    txHash: string,
    options?: { readonly signal?: AbortSignal },
  ): Promise<ReceiptStatus>;

  /**
   * How long one call of `send` may take at most, in milliseconds, where
   * the Sender bounds it (a number from 0, finite), as `HttpSender`'s
   * `timeoutMs` does. Declared, `createRelayer` (and `createApp`) refuse a
   * `leaseMs` under twice it: the lease is renewed right before a send and
   * must outlast it, with room for the writes around it, or two deliveries
   * could send at once. Leave it out for a Sender with no timeout of its
   * own; the lease is then yours to keep above its sends.
   *
   * @example A Sender that declares its timeout
   * ```ts
   * import { createRelayer, MemoryStore, type Sender } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const sender: Sender = {
   *   timeoutMs: 5_000, // what its own client gives up after
   *   send: () => Promise.resolve({ txHash: "0xabc" }),
   *   receipt: () => Promise.resolve("pending"),
   * };
   * const store = new MemoryStore();
   * assert.throws(() => createRelayer({ store, sender, leaseMs: 9_000 }), /set leaseMs to at least 10000/);
   * assert.equal(createRelayer({ store, sender, leaseMs: 10_000 }).leaseMs, 10_000);
   * ```
   */
  readonly timeoutMs?: number;
}
