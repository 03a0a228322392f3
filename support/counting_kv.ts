/**
 * A Deno KV handle that counts what it is asked to do, so a test can pin
 * how many round trips a delivery costs. Wrap the handle and hand the
 * wrapper to `KvStore`:
 *
 * ```ts ignore
 * const kv = await Deno.openKv(":memory:");
 * const counting = new CountingKv(kv);
 * const store = new KvStore(counting);
 * counting.reset();
 * await store.getIntent("pi_0001");
 * counting.counts; // { reads: 1, commits: 0 }
 * kv.close();
 * ```
 *
 * @module
 */

import type { KvAtomic, KvEntryMaybe, KvKey, KvLike } from "../store/kv.ts";

/** How many operations a {@linkcode CountingKv} has passed through. */
export interface KvCounts {
  /** `getMany` and `list` calls: one round trip each. */
  readonly reads: number;
  /** `atomic().commit()` calls: one write each. */
  readonly commits: number;
}

/**
 * A {@linkcode KvLike} that forwards every call to the handle it wraps
 * and counts reads and commits. A commit counts when it is attempted,
 * whether or not its checks pass: a lost race costs a round trip too.
 *
 * It never opens or closes the handle: the caller does both.
 */
export class CountingKv implements KvLike {
  #kv: KvLike;
  #reads = 0;
  #commits = 0;

  /**
   * Constructs a new instance.
   *
   * @param kv The open handle to forward to.
   */
  constructor(kv: KvLike) {
    this.#kv = kv;
  }

  /** The operations counted since construction or the last `reset()`. */
  get counts(): KvCounts {
    return { reads: this.#reads, commits: this.#commits };
  }

  /** Sets both counts back to zero. */
  reset(): void {
    this.#reads = 0;
    this.#commits = 0;
  }

  /** {@inheritDoc KvLike.getMany} */
  getMany(keys: readonly KvKey[]): Promise<KvEntryMaybe<unknown>[]> {
    this.#reads++;
    return this.#kv.getMany(keys);
  }

  /** {@inheritDoc KvLike.list} */
  list(
    selector: { prefix: KvKey; start?: KvKey },
    options?: { limit?: number },
  ): AsyncIterable<KvEntryMaybe<unknown>> {
    this.#reads++;
    return this.#kv.list(selector, options);
  }

  /** {@inheritDoc KvLike.atomic} */
  atomic(): KvAtomic {
    return new CountingAtomic(this.#kv.atomic(), () => this.#commits++);
  }
}

class CountingAtomic implements KvAtomic {
  #atomic: KvAtomic;
  #onCommit: () => void;

  constructor(atomic: KvAtomic, onCommit: () => void) {
    this.#atomic = atomic;
    this.#onCommit = onCommit;
  }

  check(...checks: { key: KvKey; versionstamp: string | null }[]): this {
    this.#atomic.check(...checks);
    return this;
  }

  set(key: KvKey, value: unknown, options?: { expireIn?: number }): this {
    this.#atomic.set(key, value, options);
    return this;
  }

  delete(key: KvKey): this {
    this.#atomic.delete(key);
    return this;
  }

  enqueue(value: unknown, options?: { delay?: number }): this {
    this.#atomic.enqueue!(value, options);
    return this;
  }

  commit(): ReturnType<KvAtomic["commit"]> {
    this.#onCommit();
    // The result goes back untouched: KvStore keeps the versionstamp of a
    // lease it took so its release needs no read.
    return this.#atomic.commit();
  }
}
