/**
 * A `KvStore` whose next commit can be preceded by another writer's: the
 * store contract's `beforeNextCommit`, for any Deno KV handle (Deno's own,
 * or `@deno/kv` on Node).
 *
 * @module
 */

import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import type { Store } from "../../store/store.ts";
import type { OpenStore } from "./_contract.ts";

/** `kv`, each atomic operation's commit sent once `before()` has run. */
export function beforeEachCommit(
  kv: KvLike,
  before: () => Promise<unknown>,
): KvLike {
  return {
    getMany: (keys) => kv.getMany(keys),
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      const commit = atomic.commit.bind(atomic);
      atomic.commit = async () => {
        await before();
        return await commit();
      };
      return atomic;
    },
  };
}

/**
 * A store over `kv` whose atomics run, right before their commit, the
 * write last given to `beforeNextCommit`, once, on another `KvStore` over
 * the same database (its commits bypass the hook).
 */
export function hookedKvStore(
  kv: KvLike,
): Pick<OpenStore, "store" | "beforeNextCommit"> {
  let pending: ((other: Store) => Promise<unknown>) | undefined;
  const other = new KvStore(kv);
  const hooked = beforeEachCommit(kv, async () => {
    const write = pending;
    pending = undefined;
    await write?.(other);
  });
  return {
    store: new KvStore(hooked),
    beforeNextCommit: (write) => {
      pending = write;
    },
  };
}

/** `kv`, recording each set's key and `expireIn` as `seen`, in order. */
export function recordingSets(kv: KvLike) {
  const seen: [Deno.KvKey, number | undefined][] = [];
  const recording: KvLike = {
    getMany: (keys) => kv.getMany(keys),
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      const set = atomic.set.bind(atomic);
      atomic.set = (key, value, options) => {
        seen.push([key, options?.expireIn]);
        return set(key, value, options);
      };
      return atomic;
    },
  };
  return { kv: recording, seen };
}
