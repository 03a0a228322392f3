/**
 * How `PostgresStore` keeps an intent and a dead letter as rows: one
 * mapping, shared by the store's writes and by the move from Deno KV
 * (`store/kv_to_postgres.ts`), so a row the move writes is one the store
 * would have written.
 *
 * @module
 */

import type { IntentRecord } from "./_rules.ts";
import type { Broadcast, DeadLetter } from "./store.ts";

/** The columns of an intent's row besides its id and version. */
export const INTENT_COLUMNS = [
  "state",
  "settling_since",
  "broadcasting",
  "may_have_sent",
  "last_outcome",
  "last_tx_hash",
  "last_at",
  "last_error",
  "tx_hashes",
] as const;

/** An intent's row, without its id and version. */
export function intentColumns(record: IntentRecord): Record<
  typeof INTENT_COLUMNS[number],
  string | number | boolean | null
> {
  const last = record.lastBroadcast;
  return {
    state: record.state,
    settling_since: record.settlingSince,
    broadcasting: record.broadcasting,
    may_have_sent: record.mayHaveSent,
    last_outcome: last?.outcome ?? null,
    last_tx_hash: last?.txHash ?? null,
    last_at: last?.at ?? null,
    last_error: last?.error ?? null,
    tx_hashes: JSON.stringify(record.txHashes),
  };
}

/** A dead letter's row, without its version (the sequence gives it). */
export function deadLetterRow(letter: DeadLetter): {
  job_id: string;
  intent_id: string;
  deliveries: number;
  cause: DeadLetter["cause"];
  reason: string;
  resolution: string;
  last_error: string;
  poisoned_at: number;
  queue: string | null;
  queue_message_id: string | null;
  queue_dlq_id: string | null;
} {
  return {
    job_id: letter.jobId,
    intent_id: letter.intentId,
    deliveries: letter.deliveries,
    cause: letter.cause,
    reason: mended(letter.reason),
    resolution: mended(letter.resolution),
    last_error: mended(letter.lastError),
    poisoned_at: letter.poisonedAt,
    queue: letter.queue?.queue ?? null,
    queue_message_id: letter.queue?.messageId ?? null,
    queue_dlq_id: letter.queue?.dlqId ?? null,
  };
}

/** Whether `text` holds U+0000, which PostgreSQL text cannot. */
export function hasNul(text: unknown): boolean {
  return typeof text === "string" && text.includes("\0");
}

/**
 * Free text as PostgreSQL can keep it: each U+0000 (which text cannot
 * hold) becomes U+FFFD. An error message from a Sender may carry one, and
 * refusing it would lose the write it rides in (a declared poison, say).
 */
export function mended(text: string): string {
  return hasNul(text) ? text.replaceAll("\0", "\uFFFD") : text;
}

/** A broadcast whose error text PostgreSQL can keep. */
export function mendedBroadcast(broadcast: Broadcast): Broadcast {
  return typeof broadcast?.error === "string" && hasNul(broadcast.error)
    ? { ...broadcast, error: mended(broadcast.error) }
    : broadcast;
}

/**
 * `answer`'s rows from its first index, in place: postgres.js 3.4.9 counts
 * a statement's rows per connection and resets the count only at a
 * `CommandComplete`, so after a statement that failed while its rows
 * streamed (cancelled, as a read past `connectionWaitMs` is, or an error
 * on a row) the next statement on the connection resolves with its own
 * rows after as many holes as the failed one had streamed
 * (porsager/postgres#1119, #1181). Read as they came, `[row]` was a hole:
 * an intent that exists read as none, and a page of dead letters listed
 * `null`s. The rows themselves are the statement's, all of them, in order
 * (its result is new); only their place is wrong. Any other answer is
 * returned as it is.
 */
export function ownRows<T>(answer: T): T {
  if (!Array.isArray(answer) || answer.length === 0 || 0 in answer) {
    return answer;
  }
  let first = 1;
  while (first < answer.length && !(first in answer)) first++;
  // Not splice(): it would build a second result through the class.
  answer.copyWithin(0, first);
  answer.length -= first;
  return answer;
}
