/**
 * PostgresStore on a server whose `max_connections` other roles have
 * taken, not its own pool: a server of its own, started with 8 slots (3
 * of them kept for superusers, so 5 for everyone else).
 *
 * - One slot left: the migration's pooler check asks whether the server
 *   has room for a second connection (`NO_ROOM`, its server-wide count),
 *   seeks none, and hands its one connection back to the store.
 * - No slot left: the service's start refuses in one line that says what
 *   to do, and starts once a slot is free again.
 * - Room left: the check seeks its second connection; the server's own
 *   processes (a session of no kind on no database, to this role) are no
 *   client's.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { openService } from "../../main.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  type OwnedPostgresServer,
  startPostgres,
} from "../../support/postgres_server.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { postgresAvailable } from "../_postgres.ts";
import { inTime, timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/**
 * A server of 8 connection slots (5 for roles that are not superusers),
 * with a database `payments` owned by the role `app`, and a role `other`;
 * `as(role, max)` opens a client of that role on `payments`. The
 * superuser's `admin` client holds one slot.
 */
async function onSmallServer(
  test: (server: {
    admin: postgres.Sql;
    as: (role: "app" | "other", max: number) => postgres.Sql;
    url: (role: "app" | "other") => string;
    clientBackends: () => Promise<number>;
  }) => Promise<void>,
): Promise<void> {
  let server: OwnedPostgresServer | undefined;
  const clients: postgres.Sql[] = [];
  try {
    server = await startPostgres({ settings: { max_connections: "8" } });
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    clients.push(admin);
    await admin.unsafe(
      `CREATE ROLE app LOGIN PASSWORD 'app-pw';
       CREATE ROLE other LOGIN PASSWORD 'other-pw'`,
    );
    await admin.unsafe(`CREATE DATABASE payments OWNER app`);
    const url = (role: "app" | "other") => {
      const login = new URL(server!.url);
      login.username = role;
      login.password = `${role}-pw`;
      login.pathname = "/payments";
      return login.href;
    };
    await test({
      admin,
      url,
      as: (role, max) => {
        const sql = postgres(url(role), {
          max,
          onnotice: () => {},
          max_lifetime: null,
        });
        clients.push(sql);
        return sql;
      },
      async clientBackends() {
        const [row] = await admin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE backend_type = 'client backend'`;
        return row!.n;
      },
    });
  } finally {
    for (const sql of clients) await sql.end({ timeout: 1 });
    await server?.stop();
  }
}

/** Holds `n` connections of `other`, one client each. */
async function hold(
  as: (role: "app" | "other", max: number) => postgres.Sql,
  n: number,
): Promise<postgres.Sql[]> {
  const held = Array.from({ length: n }, () => as("other", 1));
  await Promise.all(held.map((sql) => sql`SELECT 1`));
  return held;
}

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check seeks no second connection where other roles hold all but one of the server's max_connections, and the store's calls go on on the one it has",
  ignore,
  fn: timeout(60_000, () =>
    onSmallServer(async ({ as, clientBackends }) => {
      // The admin's slot and three of other's: one left of the five.
      await hold(as, 3);
      assert.equal(await clientBackends(), 4);
      const store = new PostgresStore(as("app", 2), {
        schema: "relayer",
        connectionWaitMs: 2_000,
      });
      try {
        // Before, other roles' sessions uncounted (their kind hidden from
        // this role), the check sought a second connection, the server
        // refused it, and postgres.js 3.4.9 never put the first back in
        // service: the write below failed with "remaining connection
        // slots are reserved for non-replication superuser connections".
        await inTime(store.migrate(), 10_000, "the migration");
        await inTime(
          store.createIntent({ id: "pi_1", hold: "pending" }),
          5_000,
          "a write",
        );
        assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        assert.equal(await clientBackends(), 5);
      } finally {
        store.close();
      }
    })),
});

Deno.test({
  name:
    "openService() refuses in one line saying what to do where other roles hold every slot of the server's max_connections, and starts once one is free",
  ignore,
  fn: timeout(
    60_000,
    () =>
      onSmallServer(async ({ as, url, clientBackends }) => {
        const held = await hold(as, 4);
        assert.equal(await clientBackends(), 5);
        const config = loadConfig({
          SENDER_URL: "http://127.0.0.1:9000",
          WEBHOOK_SECRET: "a-secret-of-16-chars",
          DATABASE_URL: url("app"),
        });
        await assert.rejects(
          openService(config, { log: () => {}, databaseWaitMs: 2_000 }),
          (error) => {
            assert.ok(error instanceof ConfigError, String(error));
            assert.equal(error.setting, "DATABASE_URL");
            assert.match(
              error.message,
              /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/payments, no TLS: remaining connection slots are reserved for non-replication superuser connections \(the server has no connection slot left for this role: its CONNECTION LIMIT, the database's or the server's max_connections is reached; see pg_stat_activity for who holds them, end the idle ones or raise the limit, then try again\)$/,
            );
            assert.ok(!error.message.includes("app-pw"), error.message);
            return true;
          },
        );
        // One slot free again: the service starts.
        await held[0]!.end();
        const service = await openService(config, {
          log: () => {},
          databaseWaitMs: 2_000,
        });
        await service.close();
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check still seeks its second connection where the server has room, the server's own processes (hidden from this role, tied to no database) left uncounted",
  ignore,
  fn: timeout(60_000, () =>
    onSmallServer(async ({ as, clientBackends }) => {
      // The admin's slot alone: four of the five left. The checkpointer,
      // the WAL writer and the launchers read to this role as sessions of
      // no kind on no database; counted, they filled the five.
      assert.equal(await clientBackends(), 1);
      const store = new PostgresStore(as("app", 2), {
        schema: "relayer",
        connectionWaitMs: 2_000,
      });
      try {
        await inTime(store.migrate(), 10_000, "the migration");
        // The check's two connections, both kept by the client's pool.
        assert.equal(await clientBackends(), 3);
      } finally {
        store.close();
      }
    })),
});
