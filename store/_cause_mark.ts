/**
 * A mark on a store's error that names why the database refused a call
 * (a schema not migrated, a read-only database), so that a route can say
 * that cause and what to do, not "try again" or "it may have landed".
 * Found on the error, or an error it wraps (its `cause`, three deep at
 * most), made by any copy of the package (a `Symbol.for` key).
 *
 * @module
 */

/** Marks an error with one cause, and finds that mark. */
export interface CauseMark {
  /** Marks `error`, and returns it. */
  mark<E extends Error>(error: E): E;
  /** Whether `error`, or an error it wraps, three deep at most, carries the mark. */
  is(error: unknown): boolean;
}

/**
 * The mark named `key`.
 *
 * @param key The mark's `Symbol.for` key, the same in every copy of the package.
 * @returns How to mark an error with it, and find it.
 *
 * @example
 * ```ts
 * import { causeMark } from "./_cause_mark.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = causeMark("@relayer/poison.example");
 * const marked = refused.mark(new Error("refused"));
 * assert.equal(refused.is(new Error("wrapped", { cause: marked })), true);
 * assert.equal(refused.is(new Error("lost")), false);
 * ```
 */
export function causeMark(key: string): CauseMark {
  const symbol = Symbol.for(key);
  return {
    mark<E extends Error>(error: E): E {
      Object.defineProperty(error, symbol, { value: true });
      return error;
    },
    is(error: unknown): boolean {
      for (let e = error, depth = 0; depth < 4; depth++) {
        if (typeof e !== "object" || e === null) return false;
        if ((e as Record<symbol, unknown>)[symbol] === true) return true;
        e = (e as { cause?: unknown }).cause;
      }
      return false;
    },
  };
}
