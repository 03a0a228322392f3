/**
 * What the production-size benches share (`bench/kv_scale.ts`,
 * `bench/postgres_scale.ts`): the store calls they time, timed on a loaded
 * store and an empty one alternated, median of 3 rounds (each the mean of
 * its calls), and every page of dead letters, newest first.
 *
 * @module
 */

// deno-lint-ignore-file no-console

import type { KvLike } from "../store/kv.ts";
import type { Store } from "../store/store.ts";
import { median } from "./_measure.ts";

/** One timed call: `setup` (untimed) makes what `run` needs. */
export interface StoreOp {
  readonly name: string;
  readonly calls: number;
  setup(store: Store): Promise<unknown>;
  run(store: Store, input: unknown): Promise<unknown>;
}

/** How many keys a store has read so far, where a bench counts them. */
export type KeysRead = () => number;

/**
 * The calls of a delivery, a give-up and the ops routes, on intents and
 * letters each call makes fresh, at `now`.
 *
 * @param now The time of every call.
 * @param admit The name and number of calls of `admit({ count, claim })`
 * (a store that sweeps on it times a multiple of its sweep).
 * @returns The calls, in the order a table shows them.
 */
export function storeOps(
  now: number,
  admit: { readonly name: string; readonly calls: number },
): StoreOp[] {
  let serial = 0;
  const fresh = (what: string) => `${what}_${++serial}`;
  const settling = (store: Store) =>
    store.createIntent({
      id: fresh("pb"),
      state: "settling",
      hold: "pending",
      settlingSince: now,
    });
  const letter = (id: string) => ({
    jobId: fresh("job"),
    intentId: id,
    deliveries: 10,
    cause: "exhausted" as const,
    reason: "gave up after 10 deliveries",
    resolution: "intent failed, hold voided",
    lastError: "signer answered 500",
    poisonedAt: now,
  });
  const lease = () => ({ owner: fresh("o"), ttlMs: 30_000, now });
  const claim = (what: string) => ({
    key: fresh(what),
    now,
    expiresAt: now + 600_000,
  });
  const none = () => Promise.resolve(undefined);
  return [
    {
      name: "getIntent (a hit)",
      calls: 200,
      setup: settling,
      run: (store, i) => store.getIntent((i as { id: string }).id),
    },
    {
      name: "getIntent (a miss: /readyz's probe)",
      calls: 200,
      setup: none,
      run: (store) => store.getIntent("readyz"),
    },
    {
      name: "admit({ count }) (/readyz's write probe)",
      calls: 200,
      setup: none,
      run: (store) => store.admit({ count: "relayer/write-probe", now }),
    },
    {
      name: "createIntent",
      calls: 100,
      setup: none,
      run: (store) =>
        store.createIntent({ id: fresh("pc"), state: "authorized" }),
    },
    {
      ...admit,
      setup: none,
      run: (store) =>
        store.admit({ count: fresh("jb"), claim: claim("k"), now }),
    },
    {
      name: "deliveries",
      calls: 200,
      setup: none,
      run: (store) => store.deliveries("job_000000500", now),
    },
    {
      name: "beginBroadcast + recordBroadcast (lease, claim)",
      calls: 50,
      setup: settling,
      run: async (store, i) => {
        const intent = i as { id: string; version: string };
        const held = lease();
        const begun = await store.beginBroadcast(
          intent.id,
          intent.version,
          now,
          { lease: { ...held, keep: true }, claim: claim("c") },
        );
        return await store.recordBroadcast(intent.id, begun.version, {
          outcome: "sent",
          txHash: `0x${fresh("t")}`,
          at: now,
        }, { lease: held });
      },
    },
    {
      name: "transition to failed with a dead letter (lease)",
      calls: 50,
      setup: (store) =>
        store.createIntent({
          id: fresh("pf"),
          state: "settling",
          hold: "pending",
          settlingSince: now,
          mayHaveSent: false,
          lastBroadcast: { outcome: "not_sent", at: now },
        }),
      run: (store, i) => {
        const intent = i as { id: string; version: string };
        return store.transition(intent.id, {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: now,
          ledger: "void",
          deadLetter: letter(intent.id),
        }, { lease: lease() });
      },
    },
    {
      name: "recordHold (a write)",
      calls: 50,
      setup: (store) =>
        store.createIntent({ id: fresh("ph"), state: "authorized" }),
      run: (store, i) => store.recordHold((i as { id: string }).id),
    },
    {
      name: "getDeadLetter",
      calls: 200,
      setup: async (store) => {
        const kept = letter("pi_00000001");
        await store.putDeadLetter(kept);
        return kept.jobId;
      },
      run: (store, jobId) => store.getDeadLetter(jobId as string),
    },
    {
      name: "listDeadLetters (first page of 50)",
      calls: 100,
      setup: none,
      run: (store) => store.listDeadLetters(),
    },
    {
      name: "redrive",
      calls: 50,
      setup: async (store) => {
        const kept = letter("pi_00000001");
        await store.putDeadLetter(kept);
        return (await store.getDeadLetter(kept.jobId))!;
      },
      run: (store, got) => {
        const { jobId, version } = got as { jobId: string; version: string };
        return store.redrive(jobId, version);
      },
    },
  ];
}

/** A duration in milliseconds, to 3 decimals under 1. */
export function ms(value: number): string {
  return value < 1 ? value.toFixed(3) : value.toFixed(2);
}

/**
 * Times each of `ops` on `big` and on `empty`, alternated, 3 rounds, and
 * prints a table of their medians and ratio, with the keys a call read on
 * `big` where `keysRead` counts them.
 */
export async function timeOps(
  ops: readonly StoreOp[],
  stores: { readonly big: Store; readonly empty: Store },
  keysRead?: KeysRead,
): Promise<void> {
  const keysColumn = keysRead === undefined ? "" : " keys read a call |";
  console.log(
    `\n| call | at size, ms | empty, ms | ratio |${keysColumn}\n| ---- | ---: | ---: | ---: |${
      keysRead === undefined ? "" : " ---: |"
    }`,
  );
  for (const op of ops) {
    const rounds = { big: [] as number[], empty: [] as number[] };
    let keys = 0;
    for (let round = 0; round < 3; round++) {
      for (const which of ["big", "empty"] as const) {
        const store = stores[which];
        const inputs = [];
        for (let i = 0; i < op.calls; i++) inputs.push(await op.setup(store));
        const before = keysRead?.() ?? 0;
        const started = performance.now();
        for (const input of inputs) await op.run(store, input);
        rounds[which].push((performance.now() - started) / op.calls);
        if (which === "big" && keysRead !== undefined) {
          keys = (keysRead() - before) / op.calls;
        }
      }
    }
    const [atSize, empty] = [median(rounds.big), median(rounds.empty)];
    console.log(
      `| ${op.name} | ${ms(atSize)} | ${ms(empty)} | ${
        (atSize / empty).toFixed(2)
      } |${keysRead === undefined ? "" : ` ${keys} |`}`,
    );
  }
}

/**
 * Reads every dead letter of `store`, newest first, in pages of 1,000, and
 * prints the first page's time, the median and the last's (the deepest
 * page should cost what the first does), with the most keys a page read
 * where `keysRead` counts them.
 */
export async function timePages(
  store: Store,
  keysRead?: KeysRead,
): Promise<void> {
  const times: number[] = [];
  let cursor: string | null = null;
  let keys = 0;
  do {
    const before = keysRead?.() ?? 0;
    const started = performance.now();
    const page: { cursor: string | null } = await store.listDeadLetters({
      limit: 1000,
      cursor,
    });
    times.push(performance.now() - started);
    if (keysRead !== undefined) keys = Math.max(keys, keysRead() - before);
    cursor = page.cursor;
  } while (cursor !== null);
  console.log(
    `\nlistDeadLetters, every page of 1,000 (${times.length} pages): first ${
      ms(times[0]!)
    } ms, median ${ms(median(times))} ms, last ${ms(times.at(-1)!)} ms${
      keysRead === undefined ? "" : `; at most ${keys} keys read a page`
    }`,
  );
}

/**
 * `kv` as a KvStore's handle that counts the keys each call reads
 * (`getMany` keys and `list` entries) and records every `list`'s selector
 * and options.
 */
export function countingKv(kv: Deno.Kv): {
  handle: KvLike;
  read: { keys: number };
  lists: { prefix: Deno.KvKey; start?: Deno.KvKey; limit?: number }[];
} {
  const read = { keys: 0 };
  const lists: { prefix: Deno.KvKey; start?: Deno.KvKey; limit?: number }[] =
    [];
  const handle: KvLike = {
    getMany: (keys) => {
      read.keys += keys.length;
      return kv.getMany(keys as Deno.KvKey[]);
    },
    list: (selector, options) => {
      lists.push({ ...selector, ...options } as (typeof lists)[number]);
      const entries = kv.list(selector as Deno.KvListSelector, options);
      return {
        async *[Symbol.asyncIterator]() {
          for await (const entry of entries) {
            read.keys++;
            yield entry;
          }
        },
      };
    },
    atomic: () => kv.atomic(),
  };
  return { handle, read, lists };
}
