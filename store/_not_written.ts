/**
 * A write the database refused outright, before anything of it could
 * land: the ops routes then say "nothing changed", not "it may have
 * landed", and an operator need not read the record before trying again.
 * And a read refused so ({@linkcode notRead}): it read nothing and wrote
 * nothing, which a route that reads before it writes says too.
 *
 * @module
 */

const NOT_WRITTEN = Symbol.for("@relayer/poison.notWritten");
const NOT_READ = Symbol.for("@relayer/poison.notRead");

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

/**
 * Marks `error` as a read's refusal before it reached the store's data (a
 * Deno KV handle closed under the store): it read nothing and wrote
 * nothing. Only a read's own error is so marked, never a write's (a
 * write's read back after a commit whose answer was lost fails the same
 * way, and that write may have landed), and never as not written, which
 * a route words as a write's.
 *
 * @param error The store's error for the refused read, its own.
 * @returns `error`, marked.
 *
 * @example
 * ```ts
 * import { isNotRead, isNotWritten, notRead } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = notRead(new Error("closed"));
 * assert.equal(isNotRead(refused), true);
 * assert.equal(isNotWritten(refused), false);
 * ```
 */
export function notRead<E extends Error>(error: E): E {
  Object.defineProperty(error, NOT_READ, { value: true });
  return error;
}

/**
 * Whether `error` came from {@linkcode notRead}, in any copy of the
 * package.
 *
 * @param error What a store call threw.
 * @returns `true` for a read refused with nothing read or written.
 *
 * @example
 * ```ts
 * import { isNotRead } from "./_not_written.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isNotRead(new Error("lost")), false);
 * ```
 */
export function isNotRead(error: unknown): boolean {
  return typeof error === "object" && error !== null &&
    (error as Record<symbol, unknown>)[NOT_READ] === true;
}
