/**
 * A call the database refused as the store's schema is not there, or
 * lacks what this version reads: never migrated, or migrated by an older
 * version. No retry mends it until `migrate()` runs, and nothing of the
 * call was read or written: the routes say so, and what to run, in place
 * of "try again" or "it may have landed".
 *
 * @module
 */

import { causeMark } from "./_cause_mark.ts";

const SCHEMA_BEHIND = causeMark("@relayer/poison.schemaBehind");

/**
 * Marks `error` as a call refused by a schema never migrated, or migrated
 * by an older version.
 *
 * @param error The store's error for the refused call.
 * @returns `error`, marked.
 *
 * @example
 * ```ts
 * import { isSchemaBehind, schemaBehind } from "./_schema_behind.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isSchemaBehind(schemaBehind(new Error("no table"))), true);
 * assert.equal(isSchemaBehind(new Error("lost")), false);
 * ```
 */
export function schemaBehind<E extends Error>(error: E): E {
  return SCHEMA_BEHIND.mark(error);
}

/**
 * Whether `error`, or an error it wraps (its `cause`, three deep at
 * most), came from {@linkcode schemaBehind}, in any copy of the package.
 *
 * @param error What a store call, or a call that made one, threw.
 * @returns `true` for a call refused by a schema not migrated.
 *
 * @example
 * ```ts
 * import { isSchemaBehind, schemaBehind } from "./_schema_behind.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = schemaBehind(new Error("no table"));
 * assert.equal(isSchemaBehind(new Error("wrapped", { cause: refused })), true);
 * assert.equal(isSchemaBehind(null), false);
 * ```
 */
export function isSchemaBehind(error: unknown): boolean {
  return SCHEMA_BEHIND.is(error);
}
