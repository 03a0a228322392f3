/**
 * A write the database refused outright, before anything of it could
 * land: the ops routes then say "nothing changed", not "it may have
 * landed", and an operator need not read the record before trying again.
 *
 * @module
 */

const NOT_WRITTEN = Symbol.for("@relayer/poison.notWritten");

/**
 * Marks `error` as a write's refusal with nothing of it written.
 *
 * @param error The store's error for the refused write.
 * @returns `error`, marked.
 *
 * @example
 * ```ts
 * import { isNotWritten, notWritten } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isNotWritten(notWritten(new Error("refused"))), true);
 * assert.equal(isNotWritten(new Error("lost")), false);
 * ```
 */
export function notWritten<E extends Error>(error: E): E {
  Object.defineProperty(error, NOT_WRITTEN, { value: true });
  return error;
}

/**
 * Whether `error` came from {@linkcode notWritten}, in any copy of the
 * package.
 *
 * @param error What a store call threw.
 * @returns `true` for a write refused with nothing written.
 *
 * @example
 * ```ts
 * import { isNotWritten } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isNotWritten(null), false);
 * ```
 */
export function isNotWritten(error: unknown): boolean {
  return typeof error === "object" && error !== null &&
    (error as Record<symbol, unknown>)[NOT_WRITTEN] === true;
}
