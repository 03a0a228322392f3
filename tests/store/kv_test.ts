import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import assert from "node:assert/strict";
import { BusyError } from "../../store/busy_error.ts";
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

Deno.test("KvStore: a look reads two keys, the intent and its hold, in one getMany; a write on it then needs no read", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const asked: number[] = [];
    const counted: KvLike = {
      getMany: (keys) => {
        asked.push(keys.length);
        return kv.getMany(keys as Deno.KvKey[]);
      },
      list: (selector, options) =>
        kv.list(selector as { prefix: Deno.KvKey }, options),
      atomic: () => kv.atomic() as unknown as KvAtomic,
    };
    const store = new KvStore(counted);
    await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    asked.length = 0;
    const seen = (await store.getIntent("pi_1"))!;
    assert.deepEqual(asked, [2]);
    // The write commits on what the look saw, the lease taken as absent.
    await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: seen.version,
      at: 1,
    }, { lease: { owner: "a", ttlMs: 60_000, now: 1, keep: true } });
    assert.deepEqual(asked, [2]);
  } finally {
    kv.close();
  }
});

Deno.test("KvStore: a delivery of another instance holding the lease refuses a write on what this instance looked at", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // Two processes on one database: each its own KvStore, its own cache.
    const a = new KvStore(kv);
    const b = new KvStore(kv);
    const created = await a.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    // a writes ahead and keeps the lease for its send.
    await a.beginBroadcast("pi_1", created.version, 1, {
      lease: { owner: "a", ttlMs: 60_000, now: 1, keep: true },
    });
    // b looks (the look does not read the lease), then tries the same.
    const seen = (await b.getIntent("pi_1"))!;
    await assert.rejects(
      b.beginBroadcast("pi_1", seen.version, 2, {
        lease: { owner: "b", ttlMs: 60_000, now: 2, keep: true },
      }),
      BusyError,
    );
    // Once a's lease has lapsed, b may.
    const later = (await b.getIntent("pi_1"))!;
    await b.beginBroadcast("pi_1", later.version, 60_002, {
      lease: { owner: "b", ttlMs: 60_000, now: 60_002, keep: true },
    });
  } finally {
    kv.close();
  }
});
