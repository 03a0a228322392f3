/**
 * PostgresStore at production size: a server this run starts (loopback,
 * fsync off), one schema loaded with SQL (`generate_series`) to the size of
 * a payment team's (2M intents, mostly settled or failed, 200k dead
 * letters, 1M counts and 1M replay records expiring over 8 days, 50k
 * leases) and one left empty, both migrated by the store. It then times
 * the store's own calls on each, alternated, median of 3 rounds (each the
 * mean of its calls), and prints the `EXPLAIN (ANALYZE, BUFFERS)` of the
 * sweep, the one statement whose plan depends on the data.
 *
 * `deno run --allow-read --allow-write --allow-run --allow-net=127.0.0.1
 * --allow-env bench/postgres_scale.ts [--intents 2000000]` (about 2
 * minutes at that size). docs/postgres.md holds a run.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { median, readArgs, refuseArgs } from "./_measure.ts";
import { ms, storeOps, timeOps, timePages } from "./_store_ops.ts";

const { values } = readArgs("bench/postgres_scale.ts", () =>
  parseArgs({
    args: Deno.args,
    options: { intents: { type: "string", default: "2000000" } },
  }));
const INTENTS = Number(values.intents);
if (!Number.isSafeInteger(INTENTS) || INTENTS < 10_000) {
  refuseArgs(
    "bench/postgres_scale.ts",
    "--intents must be a whole number of at least 10000",
  );
}
/** The rest scale with the intents: 1/10 dead letters, 1/2 counts and replay records, 1/40 leases. */
const LETTERS = INTENTS / 10;
const KEYED = INTENTS / 2;
const LEASES = INTENTS / 40;
const NOW = 1_790_000_000_000;
const DAY = 86_400_000;

const server = await startPostgres();
const sql = postgres(server.url, { max: 4, onnotice: () => {} });

async function migrateTimed(schema: string): Promise<number> {
  const started = performance.now();
  await new PostgresStore(sql, { schema }).migrate();
  return performance.now() - started;
}
await migrateTimed("big");
await migrateTimed("empty");

const load = performance.now();
// Intents: 60% settled, 30% failed, 4% settling, 3% authorized, 2% in
// review, 1% created; holds on all but the created.
await sql.unsafe(`
  INSERT INTO big.intents (id, state, settling_since, may_have_sent,
    last_outcome, last_tx_hash, last_at, tx_hashes, version)
  SELECT 'pi_' || lpad(i::text, 8, '0'), s,
    CASE WHEN s <> 'authorized' AND s <> 'created' THEN ${NOW} - (i % 30) * ${DAY} END,
    s IN ('settling', 'settled', 'needs_review'),
    CASE WHEN s IN ('settling', 'settled', 'needs_review') THEN 'sent' END,
    CASE WHEN s IN ('settling', 'settled', 'needs_review') THEN '0x' || md5(i::text) || md5((i + 1)::text) END,
    CASE WHEN s IN ('settling', 'settled', 'needs_review') THEN ${NOW} - (i % 30) * ${DAY} END,
    CASE WHEN s IN ('settling', 'settled', 'needs_review') THEN '["0x' || md5(i::text) || md5((i + 1)::text) || '"]' ELSE '[]' END,
    1 + i % 7
  FROM (SELECT i, CASE WHEN r < 0.60 THEN 'settled' WHEN r < 0.90 THEN 'failed'
      WHEN r < 0.94 THEN 'settling' WHEN r < 0.97 THEN 'authorized'
      WHEN r < 0.99 THEN 'needs_review' ELSE 'created' END AS s
    FROM (SELECT i, ((i * 2654435761) % 1000) / 1000.0 AS r
      FROM generate_series(1::bigint, ${INTENTS}) i) a) b;
  INSERT INTO big.holds (intent_id, state)
  SELECT id, CASE state WHEN 'settled' THEN 'captured' WHEN 'failed' THEN 'voided' ELSE 'pending' END
  FROM big.intents WHERE state <> 'created';
  INSERT INTO big.leases (intent_id, owner, expires_at)
  SELECT 'pi_' || lpad((i * 37)::text, 8, '0'), 'owner-' || (i % 16),
    ${NOW} + 30000 - (i % 100) * 180000
  FROM generate_series(1::bigint, ${LEASES}) i;
  INSERT INTO big.counters (job_id, deliveries, expires_at)
  SELECT 'job_' || lpad(i::text, 9, '0'), 1 + i % 5,
    ${NOW} - ${DAY} + ((i * 7919) % ${KEYED}) * (${9 * DAY} / ${KEYED})
  FROM generate_series(1::bigint, ${KEYED}) i;
  INSERT INTO big.claims (key, expires_at)
  SELECT 'qstash:' || md5(i::text), ${NOW} - ${DAY} + ((i * 7919) % ${KEYED}) * (${
  9 * DAY
} / ${KEYED})
  FROM generate_series(1::bigint, ${KEYED}) i;
  INSERT INTO big.dead_letters (job_id, intent_id, deliveries, cause, reason,
    resolution, last_error, poisoned_at, queue, queue_message_id)
  SELECT 'dl_' || lpad(i::text, 8, '0'), 'pi_' || lpad((i * 9)::text, 8, '0'), 1 + i % 10,
    CASE WHEN i % 3 = 0 THEN 'declared' ELSE 'exhausted' END,
    'gave up after 10 deliveries', 'intent failed, hold voided',
    'signer answered 500: upstream timeout',
    ${NOW} - ((i * 104729) % ${LETTERS}) * (${
  90 * DAY
} / ${LETTERS}), 'qstash', 'msg_' || md5(i::text)
  FROM generate_series(1::bigint, ${LETTERS}) i;
`);
await sql.unsafe(`VACUUM ANALYZE big.intents, big.holds, big.leases,
  big.counters, big.claims, big.dead_letters`);
const sizes = await sql.unsafe<{ relname: string; n: number; size: string }[]>(
  `SELECT relname, n_live_tup::int AS n,
    pg_size_pretty(pg_total_relation_size(relid)) AS size
  FROM pg_stat_user_tables WHERE schemaname = 'big' ORDER BY relname`,
);
console.log(
  `loaded in ${((performance.now() - load) / 1000).toFixed(0)} s: ${
    sizes.map(({ relname, n, size }) => `${relname} ${n} (${size})`).join(
      ", ",
    )
  }`,
);

const stores = {
  big: new PostgresStore(sql, { schema: "big" }),
  empty: new PostgresStore(sql, { schema: "empty" }),
};
let serial = 0;
const fresh = (what: string) => `${what}_c${++serial}`;

await timeOps(
  [
    ...storeOps(NOW, {
      name: "admit({ count, claim }) (sweeps every 64th)",
      calls: 256,
    }),
    {
      name: "migrate() on a current schema",
      calls: 5,
      setup: () => Promise.resolve(undefined),
      run: (store) => (store as PostgresStore).migrate(),
    },
  ],
  stores,
);
// Every dead letter, newest first, in pages of 1,000.
await timePages(stores.big);

// The sweep's statement as the store sends it (postgres.js prepares it),
// planned for any parameters: after 5 runs PostgreSQL may keep that plan.
const seen: { query: string; parameters: unknown[] }[] = [];
const traced = postgres(server.url, {
  max: 1,
  onnotice: () => {},
  debug: (_c, query, parameters) => seen.push({ query, parameters }),
});
await sql.unsafe(`DELETE FROM big.counters WHERE expires_at <= ${NOW};
  DELETE FROM big.claims WHERE expires_at <= ${NOW - 600_000}`);
await sql.unsafe(`VACUUM big.counters, big.claims`);
// The sweep caught up, the statistics from before (as between two of
// autovacuum's analyzes): counts and claims, on each schema.
const admits = { big: [] as number[], empty: [] as number[] };
for (let round = 0; round < 3; round++) {
  for (const schema of ["big", "empty"] as const) {
    const started = performance.now();
    for (let i = 0; i < 640; i++) {
      await stores[schema].admit({
        count: fresh("jc"),
        claim: { key: fresh("kc"), now: NOW, expiresAt: NOW + 600_000 },
        now: NOW,
      });
    }
    admits[schema].push((performance.now() - started) / 640);
  }
}
console.log(
  `\nadmit({ count, claim }), the sweep caught up (10 sweeps in 640): at size ${
    ms(median(admits.big))
  } ms, empty ${ms(median(admits.empty))} ms`,
);
// The schedule is this process's: counted on until it sweeps.
const tracedStore = new PostgresStore(traced, { schema: "big" });
while (!seen.some(({ query }) => query.includes("SKIP LOCKED"))) {
  await tracedStore.admit({ count: fresh("jb"), now: NOW });
}
await traced.end();
const sweep = seen.find(({ query }) => query.includes("SKIP LOCKED"))!;
for (const mode of ["force_custom_plan", "force_generic_plan"]) {
  const plan = await sql.begin(async (tx) => {
    await tx.unsafe(`SET LOCAL plan_cache_mode = ${mode}`);
    await tx.unsafe(
      `PREPARE sweep (${
        sweep.parameters.map(() => "int8").join(", ")
      }) AS ${sweep.query}`,
    );
    const rows = await tx.unsafe(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE sweep (${
        sweep.parameters.join(", ")
      })`,
    );
    // An EXPLAIN ANALYZE of a DELETE deletes: this is the sweep's run.
    // The scans, what they filtered out, and the time: the rest is joins.
    return rows.map((row) => String(row["QUERY PLAN"]))
      .filter((line) => /(Seq|Index) Scan|Removed by|Execution Time/.test(line))
      .join("\n");
  });
  console.log(`\nthe sweep, caught up, ${mode}:\n${plan}`);
}

await sql.end();
await server.stop();
