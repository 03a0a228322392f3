/**
 * A write the database refused as read-only (25006): a hot standby, a
 * primary a failover demoted (or one not promoted yet), or
 * `default_transaction_read_only = on` for the store's role or database.
 * Nothing of the write landed, and no retry mends it until the database
 * takes writes: the routes say so, and what to do, in place of "try
 * again" alone.
 *
 * @module
 */

import { causeMark } from "./_cause_mark.ts";

const READ_ONLY = causeMark("@relayer/poison.readOnly");

/**
 * Marks `error` as a write the database refused as read-only.
 *
 * @param error The store's error for the refused write.
 * @returns `error`, marked.
 *
 * @example
 * ```ts
 * import { isReadOnly, readOnly } from "./_read_only.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isReadOnly(readOnly(new Error("read-only"))), true);
 * assert.equal(isReadOnly(new Error("lost")), false);
 * ```
 */
export function readOnly<E extends Error>(error: E): E {
  return READ_ONLY.mark(error);
}

/**
 * Whether `error`, or an error it wraps (its `cause`, three deep at
 * most), came from {@linkcode readOnly}, in any copy of the package.
 *
 * @param error What a store call, or a call that made one, threw.
 * @returns `true` for a write refused as read-only.
 *
 * @example
 * ```ts
 * import { isReadOnly, readOnly } from "./_read_only.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = readOnly(new Error("read-only"));
 * assert.equal(isReadOnly(new Error("wrapped", { cause: refused })), true);
 * assert.equal(isReadOnly(null), false);
 * ```
 */
export function isReadOnly(error: unknown): boolean {
  return READ_ONLY.is(error);
}
