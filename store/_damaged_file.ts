/**
 * A Deno KV SQLite file found damaged while the store runs: its pages
 * overwritten (SQLite's "database disk image is malformed",
 * SQLITE_CORRUPT) or its header ("file is not a database", SQLITE_NOTADB).
 * Deno KV answers every read and write that meets the damage with that
 * `TypeError`; this words it for an operator, as the start's refusal of
 * such a file does.
 *
 * A commit that met it is NOT marked as nothing written: its outcome is
 * unknown, even in part. SQLite rolls back only the statement that found
 * the damage (SQLITE_CORRUPT is not among the errors that roll back the
 * transaction), and Deno KV (denokv's `atomic_write_batched`) runs each
 * commit's checks and mutations as statements of one transaction, which
 * it commits even when one commit of it failed: the mutations of that
 * commit before the damaged page may land, and with them the other
 * commits of the transaction. Nor can what a damaged page held be vouched
 * for. So the store's records are read again only on a restored (or
 * recovered) file.
 *
 * @module
 */

/** SQLite's words for a damaged file, or one that is not SQLite. */
const DAMAGED =
  /^(?:database disk image is malformed|file is not a database)\b/;

/**
 * `error` worded for an operator if Deno KV met a damaged SQLite file;
 * `undefined` for any other error.
 *
 * @param error What a Deno KV call threw.
 * @param call Whether it was a read or a write (a commit).
 * @returns The operator's error, its `cause` the original, or `undefined`.
 *
 * @example
 * ```ts
 * import { damagedFile } from "./_damaged_file.ts";
 * import assert from "node:assert/strict";
 *
 * const error = damagedFile(
 *   new TypeError("database disk image is malformed"),
 *   "write",
 * );
 * assert.match(error!.message, /SQLite file is damaged/);
 * assert.equal(damagedFile(new Error("database is locked"), "read"), undefined);
 * ```
 */
export function damagedFile(
  error: unknown,
  call: "read" | "write",
): Error | undefined {
  const message = error instanceof Error ? error.message : "";
  const damaged = DAMAGED.exec(message);
  if (!damaged) return undefined;
  const what = call === "read"
    ? `Cannot read Deno KV as its SQLite file is damaged (SQLite: "${
      damaged[0]
    }"):`
    : `Cannot write to Deno KV as its SQLite file is damaged (SQLite: "${
      damaged[0]
    }"): the write may have landed, in whole or in part.`;
  // Short enough to be logged whole (a log line keeps 300 characters of
  // an error): what to do is its end.
  return new Error(
    `${what} Stop the service, keep the file and its -wal as they are, and restore the store from a backup or recover its rows (sqlite3 <the file> .recover).`,
    { cause: error },
  );
}
