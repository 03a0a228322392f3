/**
 * The refusals of a redrive because another of the same letter is under
 * way in this process: the one 409 of a redrive that a retry can change
 * (once that one has answered), which the webhook answers with a
 * `Retry-After`. A mark, not a class: callers still catch a
 * `ConflictError`.
 *
 * @module
 */

const UNDER_WAY = new WeakSet<Error>();

/** Marks `error` as a refusal of a redrive another redrive here runs ahead of. */
export function markUnderWay<E extends Error>(error: E): E {
  UNDER_WAY.add(error);
  return error;
}

/** Whether `error` refused a redrive as another of the same letter runs here. */
export function isUnderWay(error: unknown): boolean {
  return error instanceof Error && UNDER_WAY.has(error);
}
