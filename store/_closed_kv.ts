/**
 * A Deno KV handle closed under the store: the service's stop closes it,
 * and a delivery the drain cut short may still call the store after.
 * Deno answers a call on the closed handle `BadResource: Bad resource ID`
 * before it reaches SQLite, and a commit still in flight as the handle
 * closed `TypeError: Database is closed.`; `@deno/kv` on Node answers the
 * first `Error: Cannot call '.getMany' after '.close' is called` (its own
 * check, before the call leaves JavaScript; `.list`'s is thrown by the
 * call itself) or, for a call that left JavaScript as the handle closed,
 * its addon's `Error: db not found` (its look-up of the database, before
 * SQLite), and the second its addon's `Error: Database is closed.` (both
 * with `code` `"GenericFailure"`, and Rust's backtrace after the words
 * when `RUST_BACKTRACE` is set). This words each for an operator, quoting
 * the words without a backtrace. Only the first kind is nothing written:
 * the second's commit may have reached SQLite before the close. A read
 * met by either read nothing and wrote nothing, and is worded as one on a
 * closed handle.
 *
 * @module
 */

import { notRead, notWritten } from "./_not_written.ts";

/** The errors {@linkcode closedKv} made of reads on a closed handle. */
const CLOSED_READS = new WeakSet<Error>();

/**
 * `error` worded for an operator if the Deno KV handle was closed under
 * the call; `undefined` for any other error.
 *
 * @param error What a Deno KV call threw.
 * @param call Whether it was a read or a write (a commit).
 * @returns The operator's error, its `cause` the original (a write on a
 * closed handle marked as nothing written), or `undefined`.
 *
 * @example
 * ```ts
 * import { closedKv } from "./_closed_kv.ts";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * kv.close();
 * const error = await kv.get(["a"]).then(() => null, (e) => closedKv(e, "read"));
 * assert.match(error!.message, /^Cannot read Deno KV as its handle is closed/);
 * assert.equal(closedKv(new Error("database is locked"), "read"), undefined);
 * ```
 */
export function closedKv(
  error: unknown,
  call: "read" | "write",
): Error | undefined {
  if (!(error instanceof Error)) return undefined;
  const under = closedUnder(error);
  // A read the database's close cut short read nothing, and wrote nothing,
  // as one the closed handle refused.
  const before = closedBefore(error) ?? (call === "read" ? under : undefined);
  if (before !== undefined) return closedCall(error, before, call);
  if (call === "write" && under !== undefined) {
    return new Error(
      `Cannot finish the write as Deno KV was closed under it (${under}): it may have landed or not. The service closes it as it stops; a running instance takes the queue's next delivery, which reads the record again.`,
      { cause: error },
    );
  }
  return undefined;
}

/**
 * The operator's error of a call on a closed handle that read or wrote
 * nothing, quoting `words` (`Deno: "Bad resource ID"`): a write's marked
 * as nothing written, a read's kept for {@linkcode closedRead}.
 */
function closedCall(
  error: Error,
  words: string,
  call: "read" | "write",
): Error {
  const refused = new Error(
    `Cannot ${
      call === "read" ? "read" : "write to"
    } Deno KV as its handle is closed (${words}): ${
      call === "read" ? "nothing was read" : "nothing was written"
    }. The service closes it as it stops; a running instance takes the queue's next delivery.`,
    { cause: error },
  );
  if (call === "write") return notWritten(refused);
  CLOSED_READS.add(refused);
  return refused;
}

/** `@deno/kv`'s words for a call on a closed handle, before it sends anything. */
const CLOSED_CALL =
  /^Cannot call '\.(?:get|getMany|list|commit|enqueue|set|delete)' after '\.close' is called$/;

/**
 * Who refused a call on a closed handle before it reached the database,
 * and in which words (`Deno: "Bad resource ID"`); `undefined` for any
 * other error.
 */
function closedBefore(error: Error): string | undefined {
  if (error.name === "BadResource" && error.message === "Bad resource ID") {
    return `Deno: "Bad resource ID"`;
  }
  if (error.name === "Error" && CLOSED_CALL.test(error.message)) {
    return `@deno/kv: "${error.message}"`;
  }
  // The addon finds no database for the handle: closed before the call
  // looked it up, so the call never reached SQLite.
  if (addonWords(error) === "db not found") return `@deno/kv: "db not found"`;
  return undefined;
}

/**
 * Who answered that the database closed under a call that had reached it,
 * in their words (`Deno: "Database is closed."`); `undefined` for any
 * other error.
 */
function closedUnder(error: Error): string | undefined {
  const words = addonWords(error);
  return words === "Database is closed."
    ? `@deno/kv: "Database is closed."`
    : words === undefined && error.message === "Database is closed."
    ? `Deno: "Database is closed."`
    : undefined;
}

/**
 * The words of an error from `@deno/kv`'s addon on Node, without the
 * backtrace Rust adds after them (`"\n\nStack backtrace:\n…"`) when
 * `RUST_BACKTRACE` is set; `undefined` for any other error.
 */
function addonWords(error: Error): string | undefined {
  if ((error as { code?: unknown }).code !== "GenericFailure") {
    return undefined;
  }
  const at = error.message.indexOf("\n\nStack backtrace:\n");
  return at === -1 ? error.message : error.message.slice(0, at);
}

/**
 * The error of a write whose first read, made before anything of it was
 * sent to commit, failed as the Deno KV handle was closed: the write's
 * own, as {@linkcode closedKv} words it and marked as nothing written;
 * `undefined` for any other error. Made afresh: the read's error may be
 * shared by every read of its group, some of them a write's read back
 * after a commit, whose outcome it does not know.
 *
 * @param error What the read threw.
 * @returns The write's error, or `undefined`.
 *
 * @example
 * ```ts
 * import { closedBeforeWrite, closedKv } from "./_closed_kv.ts";
 * import { isNotWritten } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * kv.close();
 * const read = await kv.get(["a"]).then(() => null, (e) => closedKv(e, "read"));
 * const error = closedBeforeWrite(read);
 * assert.match(error!.message, /^Cannot write to Deno KV as its handle is closed/);
 * assert.equal(isNotWritten(error), true);
 * assert.equal(isNotWritten(read), false);
 * assert.equal(closedBeforeWrite(new Error("database is locked")), undefined);
 * ```
 */
export function closedBeforeWrite(error: unknown): Error | undefined {
  if (!(error instanceof Error && CLOSED_READS.has(error))) return undefined;
  // The read's own words, whether the handle refused it or the close cut
  // it short: either way the write sent nothing to commit.
  const read = error.cause as Error;
  return closedCall(read, closedBefore(read) ?? closedUnder(read)!, "write");
}

/**
 * The error of a store's read (its own, not a write's) that failed as the
 * Deno KV handle was closed: made afresh, as {@linkcode closedKv} words
 * it, and marked as nothing read or written; `error` itself for any other.
 * Made afresh, as in {@linkcode closedBeforeWrite}: the read's error may
 * be shared by every read of its group, some of them a write's read back
 * after a commit, whose outcome it does not know.
 *
 * @param error What the read threw.
 * @returns The read's error.
 *
 * @example
 * ```ts
 * import { closedKv, closedRead } from "./_closed_kv.ts";
 * import { isNotRead } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * kv.close();
 * const read = await kv.get(["a"]).then(() => null, (e) => closedKv(e, "read"));
 * const error = closedRead(read);
 * assert.match((error as Error).message, /^Cannot read Deno KV as its handle is closed/);
 * assert.equal(isNotRead(error), true);
 * assert.equal(isNotRead(read), false);
 * const other = new Error("database is locked");
 * assert.equal(closedRead(other), other);
 * ```
 */
export function closedRead(error: unknown): unknown {
  return error instanceof Error && CLOSED_READS.has(error)
    ? notRead(new Error(error.message, { cause: error.cause }))
    : error;
}
