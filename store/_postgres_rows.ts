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
