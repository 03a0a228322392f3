/**
 * The one store error callers catch: the write lost a race or broke a rule.
 *
 * @module
 */

import { brand, isBranded } from "./_brand.ts";

const BRAND = Symbol.for("@relayer/poison.ConflictError");

/**
 * A store write was refused: the record changed since the writer read it
 * (a compare-and-set lost), or the write breaks a rule of the intent state
 * machine or the hold ledger (`refused`). Re-read and decide again; never
 * retry the same write blindly.
 *
 * @example Catch a lost compare-and-set
 * ```ts
 * import { ConflictError, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "created" });
 * await assert.rejects(
 *   store.transition("pi_0001", { from: "created", to: "authorized", version: "0", at: 0 }),
 *   (error) => error instanceof ConflictError && !error.refused, // a stale version
 * );
 * // On the version read, a move the table has not is refused by rule.
 * const { version } = (await store.getIntent("pi_0001"))!;
 * await assert.rejects(
 *   store.transition("pi_0001", { from: "created", to: "settling", version, at: 0 }),
 *   (error) => error instanceof ConflictError && error.refused,
 * );
 * ```
 */
export class ConflictError extends Error {
  /**
   * Whether `value` is a ConflictError, thrown by this copy of the package or by
   * another (a store of one's own built against another version).
   *
   * @param value What to test.
   * @returns `true` for a ConflictError of any copy of the package.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isBranded(ConflictError, this, BRAND, value);
  }

  /**
   * `true` when the write breaks a rule (a fresh read meets the same
   * refusal, so the relayer does not count it as a race); `false` when it
   * lost a compare-and-set to another writer.
   */
  readonly refused: boolean;

  /**
   * Constructs a new instance.
   *
   * @param message What was refused and why.
   * @param options The underlying cause, if any, and `refused` (default
   * `false`: a lost race).
   */
  constructor(
    message: string,
    options?: ErrorOptions & { readonly refused?: boolean },
  ) {
    super(message, options);
    this.name = "ConflictError";
    brand(this, BRAND);
    this.refused = options?.refused ?? false;
  }
}
