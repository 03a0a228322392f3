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

/**
 * A dead letter's row, without its version (the sequence gives it), its
 * free text kept as a database of `encoding` can hold it (see
 * {@linkcode mended}).
 */
export function deadLetterRow(letter: DeadLetter, encoding?: string): {
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
    reason: mended(letter.reason, encoding),
    resolution: mended(letter.resolution, encoding),
    last_error: mended(letter.lastError, encoding),
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
 * Free text as PostgreSQL can keep it in a database of `encoding` (its
 * `server_encoding`; unknown, as UTF8): each U+0000 (which text cannot
 * hold) becomes U+FFFD. An error message from a Sender may carry one, and
 * refusing it would lose the write it rides in (a declared poison, say).
 * In a database of another encoding (LATIN1, WIN1252, EUC_JP: PostgreSQL
 * refuses a character it has no code for), each character it may not
 * hold becomes its code point as `\u{…}`: past U+00FF in LATIN1, past
 * U+007F in any other (every server encoding holds ASCII), and U+0000.
 * The relayer cuts a long error with "…" (U+2026), which LATIN1 has not:
 * refused, a Sender's declared not-sent was never recorded.
 */
export function mended(text: string, encoding?: string): string {
  const max = maxCodePoint(encoding);
  if (max === undefined) {
    return hasNul(text) ? text.replaceAll("\0", "\uFFFD") : text;
  }
  let kept = "";
  for (const char of text) {
    const code = char.codePointAt(0)!;
    kept += code === 0 || code > max ? `\\u{${code.toString(16)}}` : char;
  }
  return kept;
}

/**
 * The highest code point a database of `encoding` holds all of below it,
 * or `undefined` where it holds every one (UTF8; SQL_ASCII, which keeps
 * bytes as they come; unknown).
 */
function maxCodePoint(encoding: string | undefined): number | undefined {
  const name = encoding?.toUpperCase();
  if (
    name === undefined || name === "" || name === "UTF8" ||
    name === "UNICODE" || name === "SQL_ASCII"
  ) return undefined;
  return name === "LATIN1" ? 0xff : 0x7f;
}

/** A broadcast whose error text a database of `encoding` can keep (see {@linkcode mended}). */
export function mendedBroadcast(
  broadcast: Broadcast,
  encoding?: string,
): Broadcast {
  if (typeof broadcast?.error !== "string") return broadcast;
  const error = mended(broadcast.error, encoding);
  return error === broadcast.error ? broadcast : { ...broadcast, error };
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
