/**
 * The one store error callers catch: the write lost a race or broke a rule.
 *
 * @module
 */

/**
 * A store write was refused: the record changed since the writer read it
 * (a compare-and-set lost), or the write breaks a rule of the intent state
 * machine or the hold ledger. Re-read and decide again; never retry the
 * same write blindly.
 *
 * @example Catch a lost compare-and-set
 * ```ts
 * import { ConflictError, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "created" });
 * await assert.rejects(
 *   store.transition("pi_0001", { from: "created", to: "settling", version: "0", at: 0 }),
 *   ConflictError,
 * );
 * ```
 */
export class ConflictError extends Error {
  /**
   * Constructs a new instance.
   *
   * @param message What was refused and why.
   * @param options The underlying cause, if any.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ConflictError";
  }
}
