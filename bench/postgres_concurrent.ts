/**
 * PostgresStore under concurrent writes: a server this run starts
 * (loopback, fsync off), one client of 8 connections, and `--workers`
 * callers each creating an intent and reading it back until `--writes`
 * intents exist; it prints writes a second, median of 3 rounds with
 * min–max, after a round not counted. With `--against <store/postgres.ts of another checkout>` it
 * runs that store's code too, alternated round by round (the order
 * rotated), each round on a fresh schema, and prints this code's rate
 * against it: how a change to the write path costs under contention for
 * the pool's connections, which `deno task bench:store` (one call at a
 * time) does not show.
 *
 * `deno run --allow-read --allow-write --allow-run --allow-net=127.0.0.1
 * --allow-env bench/postgres_concurrent.ts [--workers 32] [--writes 4000]
 * [--against file:///path/to/other/store/postgres.ts]`. docs/postgres.md
 * holds a run.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { median, readArgs, refuseArgs } from "./_measure.ts";

const { values } = readArgs("bench/postgres_concurrent.ts", () =>
  parseArgs({
    args: Deno.args,
    options: {
      workers: { type: "string", default: "32" },
      writes: { type: "string", default: "4000" },
      against: { type: "string" },
    },
  }));
const WORKERS = Number(values.workers);
const WRITES = Number(values.writes);
if (!Number.isSafeInteger(WORKERS) || WORKERS < 1) {
  refuseArgs(
    "bench/postgres_concurrent.ts",
    "--workers must be a whole number of at least 1",
  );
}
if (!Number.isSafeInteger(WRITES) || WRITES < WORKERS) {
  refuseArgs(
    "bench/postgres_concurrent.ts",
    "--writes must be a whole number of at least --workers",
  );
}

type StoreClass = typeof PostgresStore;
const versions: { name: string; Store: StoreClass }[] = [
  { name: "this code", Store: PostgresStore },
];
if (values.against !== undefined) {
  const other = await import(values.against) as { PostgresStore: StoreClass };
  versions.push({ name: "against", Store: other.PostgresStore });
}

const server = await startPostgres();
const sql = postgres(server.url, { max: 8, onnotice: () => {} });

/** Writes a second through a fresh schema of `Store`'s code. */
async function round(Store: StoreClass, schema: string): Promise<number> {
  const store = new Store(sql, { schema });
  await store.migrate();
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (next < WRITES) {
        const id = `pi_${next++}`;
        await store.createIntent({ id });
        if ((await store.getIntent(id))?.state !== "created") {
          throw new Error(`${id} was not written`);
        }
      }
    }),
  );
  const rate = WRITES / (performance.now() - started) * 1000;
  store.close();
  await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
  return rate;
}

// One round of each first, not counted: the client's connections open,
// and the code is compiled.
for (const [i, v] of versions.entries()) await round(v.Store, `warm_${i}`);
const rates = versions.map(() => [] as number[]);
const ratios: number[] = [];
for (let r = 0; r < 3; r++) {
  const order = r % 2 === 0
    ? versions.map((_, i) => i)
    : versions.map((_, i) => i).reverse();
  for (const i of order) {
    rates[i]!.push(await round(versions[i]!.Store, `concurrent_${r}_${i}`));
  }
  if (versions.length === 2) ratios.push(rates[0]![r]! / rates[1]![r]!);
}
const spread = (xs: number[], digits: number) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${
    Math.max(...xs).toFixed(digits)
  })`;
console.log(
  `${WORKERS} callers, ${WRITES} intents written and read back, a client of 8 connections; median of 3 (min–max):`,
);
versions.forEach((v, i) =>
  console.log(`  ${v.name}: ${spread(rates[i]!, 0)} writes/s`)
);
if (ratios.length > 0) {
  console.log(`  this code ÷ against, per round: ${spread(ratios, 2)}×`);
}
await sql.end();
await server.stop();
