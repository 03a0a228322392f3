/**
 * What a delivery costs on each store: `MemoryStore` (the baseline, no
 * I/O), `KvStore` on an in-memory Deno KV, and `KvStore` on a SQLite file.
 * Two groups: a retry delivery that waits (path a of
 * `tests/store/_paths.ts`) and a delivery that poisons and fails its
 * intent (path e). Only the delivery is timed: creating its intent is
 * setup, and every iteration gets a fresh intent.
 *
 * `deno task bench:store`, or
 * `deno bench --allow-read --allow-write --filter store bench/store_bench.ts`.
 *
 * @module
 */

import { MemoryStore, type Outcome, type Store } from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import {
  assertTook,
  type PathId,
  pathOf,
  preparePath,
} from "../tests/store/_paths.ts";

// Opened on first use, not at load: `deno task bench backoff` loads this
// file too, without the permissions a file needs.
const opened: { kv: Deno.Kv; dir?: string }[] = [];

async function openKvStore(file: boolean): Promise<Store> {
  const dir = file
    ? await Deno.makeTempDir({ prefix: "relayer_store_bench_" })
    : undefined;
  const kv = await Deno.openKv(dir ? `${dir}/relayer.kv` : ":memory:");
  opened.push(dir ? { kv, dir } : { kv });
  return new KvStore(kv);
}

addEventListener("unload", () => {
  for (const { kv, dir } of opened) {
    kv.close();
    if (dir) Deno.removeSync(dir, { recursive: true });
  }
});

const backends: readonly { name: string; open: () => Promise<Store> }[] = [
  { name: "MemoryStore", open: () => Promise.resolve(new MemoryStore()) },
  { name: "KvStore in memory", open: () => openKvStore(false) },
  { name: "KvStore on a SQLite file", open: () => openKvStore(true) },
];

const groups: readonly { id: PathId; group: string }[] = [
  { id: "a", group: "store: retry delivery (a)" },
  { id: "e", group: "store: poison delivery that fails the intent (e)" },
];

let next = 0;

for (const { id, group } of groups) {
  const path = pathOf(id);
  for (const [i, { name, open }] of backends.entries()) {
    let store: Store | undefined;
    Deno.bench(`store ${name}: ${path.name}`, {
      group,
      baseline: i === 0,
    }, async (b) => {
      store ??= await open();
      const intentId = `pi_bench_${++next}`;
      const run = await preparePath(path, store, intentId);
      b.start();
      const outcome: Outcome = await run();
      b.end();
      assertTook(path, outcome, await store.getIntent(intentId));
    });
  }
}
