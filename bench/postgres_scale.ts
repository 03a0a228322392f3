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

const { values } = parseArgs({
  args: Deno.args,
  options: { intents: { type: "string", default: "2000000" } },
});
const INTENTS = Number(values.intents);
if (!Number.isSafeInteger(INTENTS) || INTENTS < 10_000) {
  throw new TypeError("--intents must be a whole number of at least 10000");
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
type Schema = keyof typeof stores;
let serial = 0;
const fresh = (what: string) => `${what}_${++serial}`;

/** One measured call: `setup` (untimed) returns what `run` needs. */
interface Op<T> {
  readonly name: string;
  readonly calls: number;
  setup(store: PostgresStore, schema: Schema): Promise<T>;
  run(store: PostgresStore, input: T): Promise<unknown>;
}

async function settling(store: PostgresStore) {
  return await store.createIntent({
    id: fresh("pb"),
    state: "settling",
    hold: "pending",
    settlingSince: NOW,
  });
}
const letter = (id: string) => ({
  jobId: fresh("job"),
  intentId: id,
  deliveries: 10,
  cause: "exhausted" as const,
  reason: "gave up after 10 deliveries",
  resolution: "intent failed, hold voided",
  lastError: "signer answered 500",
  poisonedAt: NOW,
});

const OPS: Op<unknown>[] = [
  {
    name: "getIntent (a hit)",
    calls: 200,
    setup: (store) => settling(store),
    run: (store, i) => store.getIntent((i as { id: string }).id),
  },
  {
    name: "getIntent (a miss: /readyz's probe)",
    calls: 200,
    setup: () => Promise.resolve(undefined),
    run: (store) => store.getIntent("readyz"),
  },
  {
    name: "createIntent",
    calls: 100,
    setup: () => Promise.resolve(undefined),
    run: (store) =>
      store.createIntent({ id: fresh("pc"), state: "authorized" }),
  },
  {
    name: "admit({ count, claim }) (sweeps every 64th)",
    calls: 256,
    setup: () => Promise.resolve(undefined),
    run: (store) =>
      store.admit({
        count: fresh("jb"),
        claim: { key: fresh("k"), now: NOW, expiresAt: NOW + 600_000 },
        now: NOW,
      }),
  },
  {
    name: "deliveries",
    calls: 200,
    setup: () => Promise.resolve(undefined),
    run: (store) => store.deliveries("job_000000500", NOW),
  },
  {
    name: "beginBroadcast + recordBroadcast (lease, claim)",
    calls: 50,
    setup: (store) => settling(store),
    run: async (store, i) => {
      const intent = i as { id: string; version: string };
      const lease = { owner: fresh("o"), ttlMs: 30_000, now: NOW };
      const begun = await store.beginBroadcast(intent.id, intent.version, NOW, {
        lease: { ...lease, keep: true },
        claim: { key: fresh("c"), now: NOW, expiresAt: NOW + 600_000 },
      });
      return await store.recordBroadcast(intent.id, begun.version, {
        outcome: "sent",
        txHash: `0x${fresh("t")}`,
        at: NOW,
      }, { lease });
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
        settlingSince: NOW,
        mayHaveSent: false,
        lastBroadcast: { outcome: "not_sent", at: NOW },
      }),
    run: (store, i) => {
      const intent = i as { id: string; version: string };
      return store.transition(intent.id, {
        from: "settling",
        to: "failed",
        version: intent.version,
        at: NOW,
        ledger: "void",
        deadLetter: letter(intent.id),
      }, { lease: { owner: fresh("o"), ttlMs: 30_000, now: NOW } });
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
    setup: () => Promise.resolve(undefined),
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
  {
    name: "migrate() on a current schema",
    calls: 5,
    setup: () => Promise.resolve(undefined),
    run: (store) => store.migrate(),
  },
];

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}
function ms(value: number): string {
  return value < 1 ? value.toFixed(3) : value.toFixed(2);
}

console.log(
  "\n| call | at size, ms | empty, ms | ratio |\n| ---- | ---: | ---: | ---: |",
);
for (const op of OPS) {
  const rounds: Record<Schema, number[]> = { big: [], empty: [] };
  for (let round = 0; round < 3; round++) {
    for (const schema of ["big", "empty"] as const) {
      const store = stores[schema];
      const inputs = [];
      for (let i = 0; i < op.calls; i++) {
        inputs.push(await op.setup(store, schema));
      }
      const started = performance.now();
      for (const input of inputs) await op.run(store, input);
      rounds[schema].push((performance.now() - started) / op.calls);
    }
  }
  const [big, empty] = [median(rounds.big), median(rounds.empty)];
  console.log(
    `| ${op.name} | ${ms(big)} | ${ms(empty)} | ${(big / empty).toFixed(2)} |`,
  );
}

// Every dead letter, newest first, in pages of 1,000: the deepest page
// costs what the first does.
for (const schema of ["big"] as const) {
  const times: number[] = [];
  let cursor: string | null = null;
  do {
    const started = performance.now();
    const page: { cursor: string | null } = await stores[schema]
      .listDeadLetters({ limit: 1000, cursor });
    times.push(performance.now() - started);
    cursor = page.cursor;
  } while (cursor !== null);
  console.log(
    `\nlistDeadLetters, every page of 1,000 (${times.length} pages): first ${
      ms(times[0]!)
    } ms, median ${ms(median(times))} ms, last ${ms(times.at(-1)!)} ms`,
  );
}

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
const admits: Record<Schema, number[]> = { big: [], empty: [] };
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
