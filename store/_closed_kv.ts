/**
 * A Deno KV handle closed under the store: the service's stop closes it,
 * and a delivery the drain cut short may still call the store after.
 * Deno answers a call on the closed handle `BadResource: Bad resource ID`
 * before it reaches SQLite, and a commit still in flight as the handle
 * closed `TypeError: Database is closed.`; this words both for an
 * operator. Only the first is nothing written: the second's commit may
 * have reached SQLite before the close.
 *
 * @module
 */

import { notWritten } from "./_not_written.ts";

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
  if (error.name === "BadResource" && error.message === "Bad resource ID") {
    const refused = new Error(
      `Cannot ${
        call === "read" ? "read" : "write to"
      } Deno KV as its handle is closed (Deno: "Bad resource ID"): ${
        call === "read" ? "nothing was read" : "nothing was written"
      }. The service closes it as it stops; a running instance takes the queue's next delivery.`,
      { cause: error },
    );
    return call === "write" ? notWritten(refused) : refused;
  }
  if (call === "write" && error.message === "Database is closed.") {
    return new Error(
      `Cannot finish the write as Deno KV was closed under it (Deno: "Database is closed."): it may have landed or not. The service closes it as it stops; a running instance takes the queue's next delivery, which reads the record again.`,
      { cause: error },
    );
  }
  return undefined;
}
