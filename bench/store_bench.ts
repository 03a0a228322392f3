/**
 * What a delivery costs on each store: `MemoryStore` (the baseline, no
 * I/O), `KvStore` on an in-memory Deno KV, `KvStore` on a SQLite file, and
 * `PostgresStore` on a local PostgreSQL server this run starts (loopback,
 * fsync off: the cost of the round trips and the server's work, not of a
 * disk). Three groups: a retry delivery that waits (path a of
 * `support/store_paths.ts`: the read path), a broadcast from authorized
 * (path b: the write path, two commits) and a delivery that poisons and
 * fails its intent (path e). Only the delivery is timed: creating its
 * intent is setup, and every iteration gets a fresh intent.
 *
 * With PostgreSQL it first prints the round trips and statements of every
 * delivery path on PostgresStore (the numbers `postgres_ops_test.ts` pins).
 * Without server binaries the PostgresStore rows are skipped with one line.
 *
 * `deno task bench:store`, or `deno bench --allow-read --allow-write
 * --allow-run --allow-net=127.0.0.1 --allow-env --filter store bench/store_bench.ts`.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { postgresBinDir, startPostgres } from "../support/postgres_server.ts";
import { measurePostgresPaths } from "../support/counting_postgres.ts";
import { PATHS } from "../support/store_paths.ts";

import { MemoryStore, type Outcome, type Store } from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import {
  assertTook,
  type PathId,
  pathOf,
  preparePath,
} from "../support/store_paths.ts";

// Opened on first use, not at load: a run over all the bench files
// (`deno task bench`, or a bare `deno bench` without the permissions a
// file needs) loads this file too, even when its `--filter` leaves none of
// these rows to run. (`deno task bench backoff` loads only the root file
// `backoff`.)
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

// PostgreSQL only where this run may start a server (`bench:store` grants
// it; other bench runs that load this file do not) and one is installed.
const server = Deno.permissions.querySync({ name: "run" }).state === "granted"
  ? await postgresBinDir().then((bin) => {
    if (bin === null) {
      console.error(
        "store_bench: no PostgreSQL server binaries (initdb): skipping the PostgresStore rows",
      );
      return null;
    }
    return startPostgres({ bin });
  })
  : null;

if (server) {
  const measured = await measurePostgresPaths(server.url);
  const rows = [
    "PostgresStore, per delivery (statements prepared):",
    "| path | round trips | statements |",
    "| --- | ---: | ---: |",
    ...PATHS.map((path) => {
      const counts = measured.get(path.id)!;
      return `| (${path.id}) ${path.name} | ${counts.roundTrips} | ${counts.statements} |`;
    }),
  ];
  console.log(rows.join("\n"));
}

async function openPostgresStore(url: string): Promise<Store> {
  const sql = postgres(url, { max: 4, onnotice: () => {} });
  const store = new PostgresStore(sql, { schema: "bench" });
  await store.migrate();
  return store;
}

const backends: readonly {
  name: string;
  open: () => Promise<Store>;
  ignore?: boolean;
}[] = [
  { name: "MemoryStore", open: () => Promise.resolve(new MemoryStore()) },
  { name: "KvStore in memory", open: () => openKvStore(false) },
  { name: "KvStore on a SQLite file", open: () => openKvStore(true) },
  {
    name: "PostgresStore on a local server",
    open: () => openPostgresStore(server!.url),
    ignore: server === null,
  },
];

const groups: readonly { id: PathId; group: string }[] = [
  { id: "a", group: "store: retry delivery (a)" },
  { id: "b", group: "store: broadcast from authorized (b)" },
  { id: "e", group: "store: poison delivery that fails the intent (e)" },
];

let next = 0;

for (const { id, group } of groups) {
  const path = pathOf(id);
  for (const [i, { name, open, ignore = false }] of backends.entries()) {
    let store: Store | undefined;
    Deno.bench(`store ${name}: ${path.name}`, {
      group,
      baseline: i === 0,
      ignore,
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
