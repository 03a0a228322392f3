/**
 * The error a delivery's write meets when its signature was already used.
 *
 * @module
 */

import { brand, isBranded } from "./_brand.ts";

const BRAND = Symbol.for("@relayer/poison.ReplayError");

/**
 * A replay record was already claimed: the signed request was delivered
 * before. The webhook answers 401 and nothing else is written (the claim
 * rides in the delivery's first commit).
 *
 * @example A signature used twice
 * ```ts
 * import { MemoryStore, ReplayError } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const claim = { key: "jti-1", now: 0, expiresAt: 60_000 };
 * await store.admit({ claim, now: 0 });
 * await assert.rejects(store.admit({ claim, now: 1 }), ReplayError);
 * ```
 */
export class ReplayError extends Error {
  /**
   * Whether `value` is a ReplayError, thrown by this copy of the package or by
   * another (a store of one's own built against another version).
   *
   * @param value What to test.
   * @returns `true` for a ReplayError of any copy of the package.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isBranded(ReplayError, this, BRAND, value);
  }

  /**
   * Constructs a new instance.
   *
   * @param message Which record was already claimed.
   * @param options The underlying cause, if any.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ReplayError";
    brand(this, BRAND);
  }
}
