import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import type { Store } from "../../store/store.ts";
import { storeContract } from "./_contract.ts";

storeContract("KvStore", async () => {
  const kv = await Deno.openKv(":memory:");
  // A hook run once before the next commit, through a wrapped handle.
  let pending: ((other: Store) => Promise<unknown>) | undefined;
  // Another instance on the same database: its commits bypass the hook.
  const other = new KvStore(kv);
  const hooked: KvLike = {
    getMany: (keys) => kv.getMany(keys as Deno.KvKey[]),
    list: (selector, options) =>
      kv.list(selector as { prefix: Deno.KvKey }, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic() as unknown as KvAtomic;
      const commit = atomic.commit.bind(atomic);
      atomic.commit = async () => {
        const write = pending;
        pending = undefined;
        await write?.(other);
        return await commit();
      };
      return atomic;
    },
  };
  return {
    store: new KvStore(hooked),
    close: () => kv.close(),
    beforeNextCommit: (write) => {
      pending = write;
    },
  };
});
