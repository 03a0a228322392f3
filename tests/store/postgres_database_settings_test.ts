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
import { PostgresStore } from "../../store/postgres.ts";
import { freshDatabase, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/**
 * A fresh database, migrated (schema `relayer`), then given `settings`
 * (`ALTER DATABASE … SET`), with an `admin` client on it opened before
 * them, and `connect()` for clients opened after, which take them.
 */
async function onDatabase(
  settings: Record<string, string>,
  test: (db: {
    admin: postgres.Sql;
    connect: (max?: number) => postgres.Sql;
  }) => Promise<void>,
): Promise<void> {
  const database = await freshDatabase();
  const admin = postgres(database.url, { max: 2, onnotice: () => {} });
  const clients: postgres.Sql[] = [];
  try {
    await new PostgresStore(admin, { schema: "relayer" }).migrate();
    const name = new URL(database.url).pathname.slice(1);
    for (const [setting, value] of Object.entries(settings)) {
      await admin.unsafe(
        `ALTER DATABASE "${name}" SET ${setting} = '${value}'`,
      );
    }
    await test({
      admin,
      connect: (max = 2) => {
        const sql = postgres(database.url, {
          max,
          onnotice: () => {},
          max_lifetime: null,
        });
        clients.push(sql);
        return sql;
      },
    });
  } finally {
    for (const sql of clients) await sql.end({ timeout: 1 });
    await admin.end({ timeout: 1 });
    await database.drop();
  }
}

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
        // The report ends 800 ms on.
        const ended = new Promise((resolve) => setTimeout(resolve, 800)).then(
          () => report.unsafe("COMMIT"),
        );
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
          assert.ok(performance.now() - started >= 700);
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
