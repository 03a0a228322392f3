/**
 * A busy answer whose holder is another database session (a lock the
 * write waited for past its bound), not another delivery: the relayer's
 * answer then says what the store said, so that an operator looks at
 * the database's sessions, not at the queue.
 *
 * @module
 */

import { BusyError } from "./busy_error.ts";

const HELD = Symbol.for("@relayer/poison.BusyError.heldBySession");

/**
 * A `BusyError` for a write that another database session held up (a
 * lock past `lock_timeout`, a statement cancelled): nothing of the write
 * landed, and it is not the job's failure.
 */
export function heldBySession(message: string, cause: unknown): BusyError {
  const error = new BusyError(message, { cause });
  Object.defineProperty(error, HELD, { value: true });
  return error;
}

/** Whether `error` (or the `BusyError` it wraps) came from {@linkcode heldBySession}, in any copy of the package. */
export function isHeldBySession(error: unknown): boolean {
  for (let e = error, depth = 0; depth < 2; depth++) {
    if (!(e instanceof BusyError)) return false;
    if ((e as unknown as Record<symbol, unknown>)[HELD] === true) return true;
    e = e.cause;
  }
  return false;
}
