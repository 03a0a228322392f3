/**
 * How long `moveKvToPostgres` takes: a KV file this run fills through
 * `KvStore` (`--intents` intents, each with its hold and a job's count
 * of one delivery), moved into a fresh schema of a server this run
 * starts (loopback, fsync off), a round not counted, then 3; it prints
 * the seconds a move took and records a second, median (min–max), beside
 * one plain read of the whole KV store in the same round (the floor of
 * any move: every record read once), as the move's time over that read's.
 *
 * `deno run --allow-read --allow-write --allow-run --allow-net=127.0.0.1
 * --allow-env bench/kv_to_postgres.ts [--intents 20000]`. docs/stores.md
 * holds a run.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import postgres from "postgres";
import { KvStore } from "../store/kv.ts";
import { moveKvToPostgres } from "../store/kv_to_postgres.ts";
import { PostgresStore } from "../store/postgres.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { readArgs, refuseArgs, spread } from "./_measure.ts";

const { values } = readArgs("bench/kv_to_postgres.ts", () =>
  parseArgs({
    args: Deno.args,
    options: { intents: { type: "string", default: "20000" } },
  }));
const INTENTS = Number(values.intents);
if (!Number.isSafeInteger(INTENTS) || INTENTS < 1) {
  refuseArgs(
    "bench/kv_to_postgres.ts",
    "--intents must be a whole number of at least 1",
  );
}

const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_bench_" });
const kv = await Deno.openKv(`${dir}/relayer.kv`);
const server = await startPostgres();
const sql = postgres(server.url, { max: 4, onnotice: () => {} });
try {
  const store = new KvStore(kv);
  const now = Date.now();
  for (let i = 0; i < INTENTS; i++) {
    const id = `pi_${String(i).padStart(7, "0")}`;
    await store.createIntent({ id, state: "authorized", hold: "pending" });
    await store.admit({ now, count: `${id}/settle` });
  }
  const records = INTENTS * 3;

  /** Seconds of one plain read of every record under the store's prefix. */
  const readAll = async () => {
    const started = performance.now();
    let n = 0;
    for await (const _ of kv.list({ prefix: ["relayer"] })) n++;
    if (n !== records) throw new Error(`read ${n} records of ${records}`);
    return (performance.now() - started) / 1000;
  };
  /** Seconds of one move into a fresh schema. */
  const move = async (schema: string) => {
    const target = new PostgresStore(sql, { schema });
    await target.migrate();
    const started = performance.now();
    const report = await moveKvToPostgres(kv, sql, { schema, now: () => now });
    const seconds = (performance.now() - started) / 1000;
    if (report.moved.intents !== INTENTS || report.moved.counts !== INTENTS) {
      throw new Error(`moved ${JSON.stringify(report.moved)}`);
    }
    target.close();
    await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    return seconds;
  };

  // A round not counted: the client's connections open, the code compiles.
  await readAll();
  await move("warm");
  const moves: number[] = [];
  const reads: number[] = [];
  const ratios: number[] = [];
  for (let r = 0; r < 3; r++) {
    // The order alternated round by round.
    let m: number;
    let s: number;
    if (r % 2 === 0) {
      m = await move(`moved_${r}`);
      s = await readAll();
    } else {
      s = await readAll();
      m = await move(`moved_${r}`);
    }
    moves.push(m);
    reads.push(s);
    ratios.push(m / s);
  }
  const seconds = (v: number) => `${v.toFixed(2)} s`;
  const rate = (v: number) => Math.round(v).toLocaleString("en");
  console.log(
    `${INTENTS.toLocaleString("en")} intents, their holds and counts (${
      records.toLocaleString("en")
    } records); median of 3 (min–max):`,
  );
  console.log(`  the move:          ${spread(moves, seconds)}`);
  console.log(
    `  records a second:  ${spread(moves.map((v) => records / v), rate)}`,
  );
  console.log(`  one read of the KV store: ${spread(reads, seconds)}`);
  console.log(
    `  the move ÷ that read, per round: ${
      spread(ratios, (v) => `${v.toFixed(1)}×`)
    }`,
  );
} finally {
  await sql.end();
  await server.stop();
  kv.close();
  await Deno.remove(dir, { recursive: true });
}
