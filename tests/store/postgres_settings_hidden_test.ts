/**
 * PostgresStore for a role that may not read some of pg_catalog's views,
 * as some hardened databases revoke them from PUBLIC:
 *
 * - `pg_settings`, with a short `statement_timeout`: the migration and the
 *   move from Deno KV raise that timeout for their transaction from
 *   `current_setting()`, which every role may call, not from the view.
 * - `pg_stat_activity`: the migration's pooler check asks whether the
 *   server has room for a second connection, and whether its first
 *   connection's session is still there, of `pg_stat_get_activity()`,
 *   which every role may call, not of the view.
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
import { inTime, timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/** A store on `sql` migrates, then writes an intent and counts a delivery. */
async function migratesAndWrites(sql: postgres.Sql): Promise<void> {
  const store = new PostgresStore(sql, {
    schema: "relayer",
    connectionWaitMs: 2_000,
  });
  try {
    await store.migrate();
    await store.createIntent({ id: "pi_1", hold: "pending" });
    assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
  } finally {
    store.close();
  }
}

/**
 * A fresh database in which PUBLIC may not read pg_settings, a login role
 * of its own there with `statement_timeout = '300ms'` and CREATE on the
 * database, and `sql`, a client of that role.
 */
async function asHardenedRole(
  hidden: "pg_settings" | "pg_stat_activity",
  options: { max?: number; limit?: number; databaseLimit?: number },
  test: (db: { admin: postgres.Sql; sql: postgres.Sql }) => Promise<void>,
): Promise<void> {
  const database = await freshDatabase();
  const name = new URL(database.url).pathname.slice(1);
  const role = `r${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(database.url, { max: 1, onnotice: () => {} });
  let sql: postgres.Sql | undefined;
  try {
    await admin.unsafe(
      `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' CONNECTION LIMIT ${
        options.limit ?? -1
      };
      GRANT CREATE ON DATABASE "${name}" TO "${role}";
      REVOKE SELECT ON pg_catalog.${hidden} FROM PUBLIC;
      ALTER ROLE "${role}" IN DATABASE "${name}" SET statement_timeout = '300ms';
      ALTER DATABASE "${name}" CONNECTION LIMIT ${options.databaseLimit ?? -1}`,
    );
    const login = new URL(database.url);
    login.username = role;
    login.password = `${role}-pw`;
    sql = postgres(login.href, {
      max: options.max ?? 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const [shown] = await sql`SHOW statement_timeout`;
    assert.equal(shown?.statement_timeout, "300ms");
    await assert.rejects(
      sql.unsafe(`SELECT * FROM pg_catalog.${hidden}`),
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
  fn: timeout(
    30_000,
    () =>
      asHardenedRole("pg_settings", {}, async ({ sql }) => {
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
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check, for a role denied SELECT on pg_stat_activity, seeks no second connection a connection limit refuses, and hands back the connections it took",
  ignore,
  fn: timeout(30_000, async () => {
    // A role limited to one connection: before, the check could not ask
    // whether the server had room, sought a second, was refused (53300),
    // and postgres.js 3.4.9 never put the first back in service: every
    // call after failed with "too many connections for role".
    await asHardenedRole("pg_stat_activity", { limit: 1 }, async ({ sql }) => {
      await migratesAndWrites(sql);
    });
    // A pool of two, migrated three times (a start, the move's, another
    // start's): before, each check kept one connection for good, its
    // question whether the first's session was still there refused
    // ("permission denied for view pg_stat_activity"), and the third
    // migration waited for a connection that never came.
    await asHardenedRole("pg_stat_activity", {}, async ({ sql }) => {
      const store = new PostgresStore(sql, {
        schema: "relayer",
        connectionWaitMs: 2_000,
      });
      for (let i = 1; i <= 3; i++) {
        await inTime(store.migrate(), 5_000, `migration ${i}`);
      }
      await Promise.all([
        store.createIntent({ id: "pi_1", hold: "pending" }),
        store.createIntent({ id: "pi_2", hold: "pending" }),
      ]);
      assert.equal((await store.getIntent("pi_2"))?.hold, "pending");
      store.close();
    });
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check, for a role denied SELECT on pg_stat_activity, seeks no second connection the database's connection limit refuses",
  ignore,
  fn: timeout(30_000, async () => {
    // The database takes two: this test's own connection, and the
    // store's first. Counted by database, the check sees no room.
    await asHardenedRole(
      "pg_stat_activity",
      { databaseLimit: 2 },
      async ({ admin, sql }) => {
        await admin`SELECT 1`;
        await migratesAndWrites(sql);
      },
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check, for a role denied SELECT on pg_stat_activity, counts the sessions a limit counts: other roles' sessions leave room for its second connection",
  ignore,
  fn: timeout(30_000, async () => {
    // The role may hold two connections, the database three: the test's
    // own session and the server's background processes are no role's
    // session of the store's, and the latter no database's. Counted with
    // them, the check saw no room and was skipped, on any busy server.
    for (
      const options of [{ limit: 2 }, { databaseLimit: 3 }] as const
    ) {
      await asHardenedRole(
        "pg_stat_activity",
        options,
        async ({ admin, sql }) => {
          await admin`SELECT 1`;
          await migratesAndWrites(sql);
          // The check sought its second connection: two sessions of the role.
          const [row] = await admin`
          SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity
          WHERE datname = current_database() AND usename <> current_user`;
          assert.equal(row?.n, 2, JSON.stringify(options));
        },
      );
    }
  }),
});
