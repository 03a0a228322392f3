/**
 * The plan of PostgresStore's sweep, on a real server: the statement the
 * store sends, planned as PostgreSQL plans it for the store (a custom plan
 * on statistics from before the rows were swept, and the generic plan a
 * prepared statement may settle into), reads the expired rows by their
 * index and never the whole table.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

type Node = Record<string, unknown>;

/**
 * The nodes of an `EXPLAIN (FORMAT JSON)` plan that run under a `Limit`:
 * the sweep's look for expired rows, not the `DELETE` that joins them to
 * their table (on a table of this test's size, PostgreSQL rightly joins
 * 100 rows to 20,000 by a hash of a scan of it; on a large one, by the
 * primary key).
 */
function limited(plan: Node, under = false): Node[] {
  const here = under || plan["Node Type"] === "Limit";
  const below = (plan.Plans ?? []) as Node[];
  return [
    ...(here ? [plan] : []),
    ...below.flatMap((node) => limited(node, here)),
  ];
}

Deno.test({
  name:
    "PostgresStore: the sweep reads expired counts and replay records by their index, on a generic plan and on statistics older than the rows swept since, never the whole table",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, sql, close } = await openPostgresStore();
    const sent: { query: string; parameters: unknown[]; types: unknown[] }[] =
      [];
    const client = postgres(await postgresUrl(), {
      max: 2,
      onnotice: () => {},
      debug: (_connection, query, parameters, types) => {
        sent.push({ query, parameters, types });
      },
    });
    try {
      const s = `"${schema}"`;
      // 20,000 counts and replay records that expired at 1…20,000 ms, as
      // the statistics see them; all swept since, and 20,000 live ones
      // written, the statistics left as they were (autovacuum off on both
      // tables, so nothing analyzes them meanwhile).
      await sql.unsafe(`
        ALTER TABLE ${s}.counters SET (autovacuum_enabled = off);
        ALTER TABLE ${s}.claims SET (autovacuum_enabled = off);
        INSERT INTO ${s}.counters (job_id, deliveries, expires_at)
          SELECT 'old_' || i, 1, i FROM generate_series(1, 20000) i;
        INSERT INTO ${s}.claims (key, expires_at)
          SELECT 'old_' || i, i FROM generate_series(1, 20000) i;
        ANALYZE ${s}.counters, ${s}.claims;
        DELETE FROM ${s}.counters;
        DELETE FROM ${s}.claims;
        INSERT INTO ${s}.counters (job_id, deliveries, expires_at)
          SELECT 'live_' || i, 1, 1000000000000 + i FROM generate_series(1, 20000) i;
        INSERT INTO ${s}.claims (key, expires_at)
          SELECT 'live_' || i, 1000000000000 + i FROM generate_series(1, 20000) i;
      `);
      await sql.unsafe(`VACUUM ${s}.counters, ${s}.claims`);

      // The store's first count on this schema sweeps first.
      const now = 1_000_000;
      await new PostgresStore(client, { schema }).admit({
        count: "job_1",
        now,
      });
      const sweep = sent.find(({ query }) => query.includes("SKIP LOCKED"));
      assert.ok(sweep, "the count swept first");
      const types = await sql.unsafe<{ name: string }[]>(
        `SELECT format_type(oid, NULL) AS name FROM unnest($1::oid[]) WITH ORDINALITY AS t(oid, n) ORDER BY n`,
        [sweep.types.map(Number)],
      );
      const literals = sweep.parameters.map((value) =>
        `'${String(value).replaceAll("'", "''")}'`
      );

      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        // A name per mode: a prepared statement outlives a transaction
        // that failed, on the file's shared client.
        const name = `sweep_${mode}`;
        const plan = await sql.begin(async (tx) => {
          await tx.unsafe(`SET LOCAL plan_cache_mode = ${mode}`);
          await tx.unsafe(
            `PREPARE ${name} (${
              types.map(({ name }) => name).join(", ")
            }) AS ${sweep.query}`,
          );
          const [row] = await tx.unsafe(
            `EXPLAIN (FORMAT JSON) EXECUTE ${name} (${literals.join(", ")})`,
          );
          await tx.unsafe(`DEALLOCATE ${name}`);
          return (row!["QUERY PLAN"] as { Plan: Node }[])[0]!.Plan;
        });
        const all = limited(plan);
        const scanned = all
          .filter((node) =>
            node["Node Type"] === "Seq Scan" &&
            ["counters", "claims"].includes(String(node["Relation Name"]))
          )
          .map((node) => node["Relation Name"]);
        assert.deepEqual(
          scanned,
          [],
          `${mode}: the sweep looks for expired rows in no table whole, but its plan scans ${
            scanned.join(" and ")
          }:\n${JSON.stringify(plan, null, 1)}`,
        );
        // A limit the planner cannot see (a parameter) it guesses at a
        // tenth of the rows, and joins as many to the whole table.
        const limits = all
          .filter((node) => node["Node Type"] === "Limit")
          .map((node) => Number(node["Plan Rows"]));
        assert.ok(
          limits.length === 3 && limits.every((rows) => rows <= 100),
          `${mode}: each look of the sweep plans for at most 100 rows, not ${
            limits.join(", ")
          }`,
        );
        const indexes = all.map((node) => node["Index Name"]);
        for (const index of ["counters_expires_at", "claims_expires_at"]) {
          assert.ok(
            indexes.includes(index),
            `${mode}: the sweep reads ${index}`,
          );
        }
      }
    } finally {
      await client.end();
      await close();
    }
  },
});
