/**
 * The migration and the move from Deno KV for a role that may not read
 * `pg_catalog.pg_settings` (`REVOKE SELECT ON pg_catalog.pg_settings FROM
 * PUBLIC`, as some hardened databases do) and whose `statement_timeout` is
 * short: both raise that timeout for their transaction from
 * `current_setting()`, which every role may call, not from the view.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { timeoutAtLeast } from "../../store/_postgres_schema.ts";
import { freshDatabase, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/**
 * A fresh database in which PUBLIC may not read pg_settings, a login role
 * of its own there with `statement_timeout = '300ms'` and CREATE on the
 * database, and `sql`, a client of that role.
 */
async function asHardenedRole(
  test: (db: { admin: postgres.Sql; sql: postgres.Sql }) => Promise<void>,
): Promise<void> {
  const database = await freshDatabase();
  const name = new URL(database.url).pathname.slice(1);
  const role = `r${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(database.url, { max: 1, onnotice: () => {} });
  let sql: postgres.Sql | undefined;
  try {
    await admin.unsafe(
      `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw';
      GRANT CREATE ON DATABASE "${name}" TO "${role}";
      REVOKE SELECT ON pg_catalog.pg_settings FROM PUBLIC;
      ALTER ROLE "${role}" IN DATABASE "${name}" SET statement_timeout = '300ms'`,
    );
    const login = new URL(database.url);
    login.username = role;
    login.password = `${role}-pw`;
    sql = postgres(login.href, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const [shown] = await sql`SHOW statement_timeout`;
    assert.equal(shown?.statement_timeout, "300ms");
    await assert.rejects(
      sql`SELECT setting FROM pg_catalog.pg_settings`,
      /permission denied/,
    );
    await test({ admin, sql });
  } finally {
    await sql?.end({ timeout: 1 });
    await admin.end({ timeout: 1 });
    await database.drop();
    const server = postgres(
      Object.assign(new URL(database.url), { pathname: "/postgres" }).href,
      { max: 1, onnotice: () => {} },
    );
    try {
      await server.unsafe(`DROP ROLE IF EXISTS "${role}"`);
    } finally {
      await server.end();
    }
  }
}

Deno.test({
  name:
    "PostgresStore.migrate() and moveKvToPostgres() run for a role denied SELECT on pg_settings, its short statement_timeout raised for their transaction",
  ignore,
  fn: timeout(30_000, () =>
    asHardenedRole(async ({ sql }) => {
      // Before: "permission denied for view pg_settings" (42501).
      await new PostgresStore(sql, { schema: "relayer" }).migrate();
      // The raise, read without pg_settings, for this role.
      const inside = await sql.begin(async (tx) => {
        await tx.unsafe(timeoutAtLeast("statement_timeout", 3_000));
        const [row] = await tx.unsafe(`SHOW statement_timeout`);
        return row?.statement_timeout;
      });
      assert.equal(inside, "3s");

      const dir = await Deno.makeTempDir({ prefix: "settings_hidden_" });
      const kv = await Deno.openKv(`${dir}/relayer.kv`);
      try {
        await new KvStore(kv).createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        });
        // Into the schema just migrated, empty.
        const report = await moveKvToPostgres(kv, sql, { schema: "relayer" });
        assert.equal(report.moved.intents, 1);
      } finally {
        kv.close();
        await Deno.remove(dir, { recursive: true });
      }
      const [after] = await sql`SHOW statement_timeout`;
      assert.equal(after?.statement_timeout, "300ms");
    })),
});
