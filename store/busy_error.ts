/**
 * The error a delivery's write meets when another delivery holds the
 * intent's lease.
 *
 * @module
 */

import { brand, isBranded } from "./_brand.ts";

const BRAND = Symbol.for("@relayer/poison.BusyError");

/**
 * A write was refused because another delivery holds the intent's lease
 * (it is acting on the intent right now), or, in a store on a database,
 * another session held a lock the write needed past the store's bound
 * (PostgresStore's `lock_timeout`, or a statement `statement_timeout`
 * cancelled), or the server ended the write in a deadlock with that
 * session: nothing of the write landed. Not a failure of the job: the
 * relayer answers retry, never poison; the lease's TTL bounds the wait for
 * a delivery, the other session's transaction the wait for a lock.
 *
 * @example Another delivery is acting
 * ```ts
 * import { BusyError, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent = await store.createIntent({ id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0 });
 * await store.beginBroadcast(intent.id, intent.version, 0, { lease: { owner: "a", ttlMs: 30_000, now: 0, keep: true } });
 * const again = await store.getIntent("pi_0001");
 * await assert.rejects(
 *   store.beginBroadcast(intent.id, again!.version, 1, { lease: { owner: "b", ttlMs: 30_000, now: 1 } }),
 *   (error: BusyError) => error.leaseExpiresAt === 30_000, // a's lease lapses then
 * );
 * ```
 */
export class BusyError extends Error {
  /**
   * Whether `value` is a BusyError, thrown by this copy of the package or by
   * another (a store of one's own built against another version).
   *
   * @param value What to test.
   * @returns `true` for a BusyError of any copy of the package.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isBranded(BusyError, this, BRAND, value);
  }

  /**
   * When the lease that refused the write lapses, in milliseconds of the
   * clock the writes carry (`lease.now`), where the store knows it (every
   * store of this package does, for a lease; not for another session's
   * lock). The relayer asks its queue back no sooner than that.
   */
  readonly leaseExpiresAt?: number;

  /**
   * Constructs a new instance.
   *
   * @param message Which intent is busy.
   * @param options The underlying cause, if any, and when the lease that
   * refused the write lapses (`leaseExpiresAt`), if known.
   */
  constructor(
    message: string,
    options?: ErrorOptions & { readonly leaseExpiresAt?: number },
  ) {
    super(message, options);
    this.name = "BusyError";
    if (options?.leaseExpiresAt !== undefined) {
      this.leaseExpiresAt = options.leaseExpiresAt;
    }
    brand(this, BRAND);
  }
}
