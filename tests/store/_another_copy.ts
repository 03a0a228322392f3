/**
 * The stores' errors from another copy of their modules, as a second
 * version of the package would throw them.
 *
 * @module
 */

import type { BusyError, ConflictError, ReplayError } from "../../mod.ts";

/** `BusyError`, `ConflictError` and `ReplayError`, each from its module imported again under another URL. */
export const anotherCopy: {
  BusyError: typeof BusyError;
  ConflictError: typeof ConflictError;
  ReplayError: typeof ReplayError;
} = {
  BusyError: (await import("../../store/busy_error.ts?another-copy"))
    .BusyError,
  ConflictError: (await import("../../store/conflict_error.ts?another-copy"))
    .ConflictError,
  ReplayError: (await import("../../store/replay_error.ts?another-copy"))
    .ReplayError,
};
