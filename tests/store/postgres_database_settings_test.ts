/**
 * PostgresStore on a database whose settings it did not choose
 * (`ALTER DATABASE … SET`, as `ALTER ROLE … SET`): a payment team's
 * database often carries a short `statement_timeout` or `lock_timeout` for
 * every role that connects. The store bounds its own waits (a migration's
 * table locks at 2 s, three tries; a write's at half of
 * `connectionWaitMs`), and these tests check that a database's own
 * settings neither cut those bounds short nor turn the store's answers
 * into the server's bare words.
 *
 * One database of the run's server per test, set before the store's
 * client connects (a setting reaches only sessions opened after it).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../store/busy_error.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { onDatabase } from "./_on_database.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

Deno.test({
  name:
    "PostgresStore.migrate() waits for a table lock as long as it bounds that wait (2 s), though the database's statement_timeout is shorter: two instances upgrading behind a report's open transaction both start once it ends",
  ignore,
  fn: timeout(
    30_000,
    () =>
      onDatabase({ statement_timeout: "300ms" }, async ({ admin, connect }) => {
        // A schema from before 0.2 (no tx_hashes): the upgrade's ALTER TABLE
        // waits for every open transaction that read the table.
        await admin.unsafe(`ALTER TABLE relayer.intents DROP COLUMN tx_hashes`);
        const report = await admin.reserve();
        await report.unsafe(`BEGIN; SELECT count(*) FROM relayer.intents`);
        // The report ends 1.5 s on: within the migration's wait (2 s), past
        // a statement_timeout raised to less than that wait.
        const ended = new Promise((resolve) => setTimeout(resolve, 1_500))
          .then(() => report.unsafe("COMMIT"));
        const started = performance.now();
        try {
          // Two instances at once: one waits for the table, the other for
          // the first's migration (its advisory lock).
          const a = connect();
          const b = connect();
          const [shown] = await a`SHOW statement_timeout`;
          assert.equal(shown?.statement_timeout, "300ms");
          const migrated = await Promise.allSettled([
            new PostgresStore(a, { schema: "relayer" }).migrate(),
            new PostgresStore(b, { schema: "relayer" }).migrate(),
          ]);
          // Before: both "canceling statement due to statement timeout", at
          // 300 ms, while the report still ran.
          assert.deepEqual(
            migrated.map((m) =>
              m.status === "fulfilled" ? "migrated" : String(m.reason)
            ),
            ["migrated", "migrated"],
          );
          assert.ok(performance.now() - started >= 1_400);
          const [column] = await admin`
          SELECT count(*)::int AS n FROM information_schema.columns
          WHERE table_schema = 'relayer' AND table_name = 'intents'
            AND column_name = 'tx_hashes'`;
          assert.equal(column?.n, 1);
          // Raised for the migration's transaction only: the sessions keep
          // the database's setting for everything else.
          const after = await Promise.all(
            [a, b].map(async (sql) =>
              (await sql`SHOW statement_timeout`)[0]?.statement_timeout
            ),
          );
          assert.deepEqual(after, ["300ms", "300ms"]);
        } finally {
          await ended.catch(() => {});
          report.release();
        }
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore says a read the database's lock_timeout ended behind a table lock was ended so, and that nothing was read or written: the look's read, and a write's read as busy without the flight's bound",
  ignore,
  fn: timeout(
    30_000,
    () =>
      onDatabase({ lock_timeout: "100ms" }, async ({ admin, connect }) => {
        const sql = connect();
        // The flight's own bound, 5 s: the read met the database's 100 ms.
        const store = new PostgresStore(sql, {
          schema: "relayer",
          connectionWaitMs: 10_000,
        });
        await store.createIntent({
          id: "a",
          state: "authorized",
          hold: "pending",
        });
        // A schema change's lock (ALTER TABLE, VACUUM FULL), which every
        // read of the table waits for.
        const change = await admin.reserve();
        try {
          await change.unsafe(
            `BEGIN; LOCK TABLE relayer.intents IN ACCESS EXCLUSIVE MODE`,
          );
          const read = await store.getIntent("a").then(
            () => new Error("read"),
            (error: Error) => error,
          );
          // Before: "canceling statement due to lock timeout", bare.
          assert.match(
            read.message,
            /^The store's read of intent a failed as the role's or database's lock_timeout ended its wait for a table lock another session held \(canceling statement due to lock timeout; SHOW lock_timeout; a schema change, VACUUM FULL or LOCK TABLE holds one: see pg_locks and pg_stat_activity\): nothing was read; retry$/,
          );
          assert.equal((read.cause as { code?: unknown })?.code, "55P03");
          const written = await store.transition("a", {
            from: "authorized",
            to: "settling",
            version: "1",
            at: 1,
          }).then(() => new Error("written"), (error: Error) => error);
          assert.ok(written instanceof BusyError, String(written));
          // Before: "… held a lock it needed for over 5000ms (lock_timeout …)",
          // the flight's bound, which this write never reached.
          assert.match(
            written.message,
            /^Cannot move a from authorized to settling as its read waited for a table lock another session held past the role's or database's lock_timeout \(canceling statement due to lock timeout; SHOW lock_timeout; a schema change, VACUUM FULL or LOCK TABLE holds one: see pg_locks and pg_stat_activity\): nothing was written; retry$/,
          );
        } finally {
          await change.unsafe("ROLLBACK").catch(() => {});
          change.release();
        }
        const a = await store.getIntent("a");
        assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
        store.close();
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate() checks a service role's grants and row-level security at start whatever functions the role's search_path finds first",
  ignore,
  fn: timeout(30_000, () =>
    onDatabase({}, async ({ admin, url }) => {
      const role = `r${crypto.randomUUID().slice(0, 8)}`;
      const login = new URL(url);
      login.username = role;
      login.password = `${role}-pw`;
      // A schema on the role's search_path (ALTER ROLE … SET search_path)
      // holding functions that a call with an array beats pg_catalog's
      // polymorphic ones at (CVE-2018-1058's pattern): any role with
      // CREATE on a schema there, such as public before PostgreSQL 15.
      const check = async (decoy: string, grants: string) => {
        await admin.unsafe(`CREATE SCHEMA decoy; ${decoy};
          GRANT USAGE ON SCHEMA decoy TO "${role}";
          ALTER ROLE "${role}" SET search_path = decoy, public;
          GRANT USAGE ON SCHEMA relayer TO "${role}"; ${grants}`);
        const sql = postgres(login.href, { max: 2, onnotice: () => {} });
        try {
          return await new PostgresStore(sql, { schema: "relayer" }).migrate()
            .then(() => "started", (error: Error) => error.message);
        } finally {
          await sql.end();
          await admin.unsafe(
            `DROP SCHEMA decoy CASCADE; DROP OWNED BY "${role}"`,
          );
        }
      };
      await admin.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw'`);
      try {
        // A role granted only SELECT on intents: before, array_to_string
        // (text[], text) answered '' for what it lacks, and it started.
        assert.match(
          await check(
            `CREATE FUNCTION decoy.array_to_string(text[], text) RETURNS text
              LANGUAGE sql AS $$SELECT ''::text$$`,
            `GRANT SELECT ON relayer.intents TO "${role}"`,
          ),
          /^Cannot use the PostgreSQL schema "relayer" as this role lacks INSERT on relayer\.intents, /,
        );
        // A role every grant was given, from which row-level security
        // hides intents (a policy for another role only): before,
        // unnest(oid[]) named this role among the policy's, and
        // array_to_string(text[], text) answered '' for the tables hidden,
        // and it started, every delivery reading a live payment as missing.
        assert.match(
          await check(
            `CREATE FUNCTION decoy.unnest(oid[]) RETURNS SETOF oid
              LANGUAGE sql AS $$SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user$$;
            CREATE FUNCTION decoy.array_to_string(text[], text) RETURNS text
              LANGUAGE sql AS $$SELECT ''::text$$;
            ALTER TABLE relayer.intents ENABLE ROW LEVEL SECURITY;
            CREATE POLICY other ON relayer.intents TO pg_monitor USING (true)`,
            `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA relayer TO "${role}";
            GRANT USAGE ON ALL SEQUENCES IN SCHEMA relayer TO "${role}"`,
          ),
          /^Cannot use the PostgreSQL schema "relayer" as row-level security hides rows of relayer\.intents from this role/,
        );
      } finally {
        await admin.unsafe(`DROP ROLE "${role}"`);
      }
    })),
});
