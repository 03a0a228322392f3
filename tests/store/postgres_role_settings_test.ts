/**
 * PostgresStore for a role whose settings it did not choose
 * (`ALTER ROLE … SET`): a `statement_timeout` too short for the
 * migration's check of the schema is refused in words that say what to
 * do, and once raised the store migrates; a `search_path` naming a schema
 * that does not exist, or `default_transaction_isolation = 'serializable'`,
 * leaves the store working; an `idle_in_transaction_session_timeout` short
 * enough to end the migration's session is said, with what to do; and a
 * write lost on a connection `idle_session_timeout` ended as it was sent
 * names that setting.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshDatabase,
  heldAfterBegin,
  postgresAvailable,
  serverUpFirst,
  sharedClient,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/**
 * A fresh database owned by a new login role given `settings`
 * (`ALTER ROLE … SET`), and `connect()`, a client of that role opened
 * after them.
 */
async function asRole(
  settings: string[],
  test: (db: {
    connect: (
      max?: number,
      options?: postgres.Options<Record<string, never>>,
    ) => postgres.Sql;
    alter: (setting: string) => Promise<void>;
  }) => Promise<void>,
): Promise<void> {
  const admin = await sharedClient();
  const role = `r${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw'`);
  const database = await freshDatabase();
  const clients: postgres.Sql[] = [];
  try {
    const name = new URL(database.url).pathname.slice(1);
    await admin.unsafe(`ALTER DATABASE "${name}" OWNER TO "${role}"`);
    const alter = (setting: string) =>
      admin.unsafe(`ALTER ROLE "${role}" SET ${setting}`).then(() => {});
    for (const setting of settings) await alter(setting);
    const login = new URL(database.url);
    login.username = role;
    login.password = `${role}-pw`;
    await test({
      alter,
      connect: (max = 2, options = {}) => {
        const sql = postgres(login.href, {
          max,
          onnotice: () => {},
          max_lifetime: null,
          ...options,
        });
        clients.push(sql);
        return sql;
      },
    });
  } finally {
    for (const sql of clients) await sql.end({ timeout: 1 });
    await database.drop();
    await admin.unsafe(`DROP ROLE IF EXISTS "${role}"`);
  }
}

/** A store on `sql` in `schema` migrates, and writes an intent it reads back. */
async function migratesAndWrites(sql: postgres.Sql, schema: string) {
  const store = new PostgresStore(sql, { schema });
  try {
    await store.migrate();
    await store.createIntent({ id: "pi_1", hold: "pending" });
    assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  } finally {
    store.close();
  }
}

/**
 * `migrate()` stopped by another session's `stop` (`pg_cancel_backend` or
 * `pg_terminate_backend`) while it waits on a lock: another session
 * creating the schema, uncommitted, holds the migration's `CREATE
 * SCHEMA`. Its error.
 */
async function migrateStoppedOnLock(
  connect: (max?: number) => postgres.Sql,
  stop: "pg_cancel_backend" | "pg_terminate_backend",
): Promise<Error> {
  const holder = connect();
  const watcher = connect();
  const store = new PostgresStore(connect(), { schema: "relayer" });
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  let created!: () => void;
  const begun = new Promise<void>((resolve) => created = resolve);
  const holding = holder.begin(async (tx) => {
    await tx.unsafe(`CREATE SCHEMA relayer`);
    created();
    await released;
    throw new Error("rolled back");
  }).catch(() => {});
  try {
    await begun;
    const migrating = store.migrate().then(
      () => assert.fail(`a migration ${stop} stopped went on`),
      (error: Error) => error,
    );
    for (let waited = 0;; waited += 20) {
      const [row] = await watcher.unsafe<{ stopped: boolean }[]>(
        `SELECT ${stop}(pid) AS stopped FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (row?.stopped === true) break;
      assert.ok(waited < 1_500, "the migration never waited on the lock");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return await migrating;
  } finally {
    release();
    await holding;
    store.close();
  }
}

serverUpFirst();

Deno.test({
  name:
    "PostgresStore.migrate() for a role whose statement_timeout cancels its check of the schema says so and what to do, and migrates once it is raised",
  ignore,
  fn: timeout(
    30_000,
    () =>
      asRole(["statement_timeout = '1ms'"], async ({ connect, alter }) => {
        const sql = connect();
        const store = new PostgresStore(sql, { schema: "relayer" });
        try {
          // Before: the server's words alone, "canceling statement due to
          // statement timeout".
          await assert.rejects(store.migrate(), (error: Error) => {
            assert.equal(
              error.message,
              `Cannot migrate the PostgreSQL schema "relayer" as statement_timeout cancelled its statement (canceling statement due to statement timeout): the role's or database's statement_timeout is too short for the migration's check of the schema (SHOW statement_timeout; raise it to 1s or more with ALTER ROLE … SET statement_timeout), then run migrate() again`,
            );
            return true;
          });
        } finally {
          store.close();
        }
        await alter("statement_timeout = '1s'");
        await migratesAndWrites(connect(), "relayer");
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore works for a role whose search_path names a schema that does not exist and whose transactions default to serializable",
  ignore,
  fn: timeout(30_000, () =>
    asRole(
      [
        "search_path = nosuch",
        "default_transaction_isolation = 'serializable'",
      ],
      async ({ connect }) => {
        const sql = connect();
        const [shown] = await sql`SHOW search_path`;
        assert.equal(shown?.search_path, "nosuch");
        const store = new PostgresStore(sql, { schema: "relayer" });
        try {
          await store.migrate();
          await Promise.all([
            store.createIntent({ id: "pi_1", hold: "pending" }),
            store.createIntent({ id: "pi_2", hold: "pending" }),
          ]);
          assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
          assert.equal(await store.admit({ count: "pi_1/settle", now: 2 }), 2);
          assert.equal((await store.getIntent("pi_2"))?.hold, "pending");
        } finally {
          store.close();
        }
      },
    )),
});

Deno.test({
  name:
    "PostgresStore.migrate() cancelled by an operator (pg_cancel_backend) keeps the server's words, not statement_timeout's",
  ignore,
  fn: timeout(60_000, () =>
    asRole([], async ({ connect }) => {
      const error = await migrateStoppedOnLock(connect, "pg_cancel_backend");
      assert.match(error.message, /canceling statement due to user request/);
      assert.doesNotMatch(error.message, /statement_timeout/);
    })),
});

Deno.test({
  name:
    "PostgresStore.migrate() for a role whose idle_in_transaction_session_timeout of 1ms ends the migration's session either migrates or says so and what to do, never postgres.js's words alone, and migrates once it is raised",
  ignore,
  fn: timeout(30_000, () =>
    asRole(
      ["idle_in_transaction_session_timeout = '1ms'"],
      async ({ connect, alter }) => {
        // A fresh schema each time: the migration's transaction runs only
        // on a schema not yet migrated (the check of one-flight
        // transactions before it may meet the setting too, twice). Before, each of the tries met
        // "write CONNECTION_CLOSED 127.0.0.1:…" alone.
        const clients: postgres.Sql[] = [];
        for (let i = 0; i < 2; i++) {
          const sql = connect();
          clients.push(sql);
          const store = new PostgresStore(sql, { schema: `relayer${i}` });
          try {
            await store.migrate().catch((error: Error) => {
              assert.match(
                error.message,
                new RegExp(
                  `^Cannot (migrate the PostgreSQL schema "relayer${i}"|use this PostgreSQL client) as the server ended its session while its transaction waited for its next message \\(.*\\): the role's or database's idle_in_transaction_session_timeout is 1ms, shorter than a round trip between a transaction's messages; raise it to 1s or more \\(SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'\\), then run migrate\\(\\) again$`,
                ),
              );
            });
          } finally {
            store.close();
          }
        }
        // At once: each takes its bound (1 s) to end.
        await Promise.all(clients.map((sql) => sql.end({ timeout: 1 })));
        await alter("idle_in_transaction_session_timeout = '1s'");
        await migratesAndWrites(connect(), "relayer_next");
      },
    )),
});

Deno.test({
  name:
    "PostgresStore.migrate() on a migrated schema, for a role whose idle_in_transaction_session_timeout of 5ms ends its check's transaction twice on a client of one connection, either passes or says that setting and what to do, never postgres.js's words alone nor a pooler's mode",
  ignore,
  fn: timeout(30_000, () =>
    asRole([], async ({ connect, alter }) => {
      const owner = new PostgresStore(connect(), { schema: "relayer" });
      try {
        await owner.migrate();
      } finally {
        owner.close();
      }
      await alter("idle_in_transaction_session_timeout = '5ms'");
      // Before: "read ECONNRESET" alone in 3 starts of 6 (the read of the
      // setting met the goodbye postgres.js kept), or a pooler's
      // statement mode named where no pooler was.
      const clients: postgres.Sql[] = [];
      for (let i = 0; i < 6; i++) {
        const sql = connect(1);
        clients.push(sql);
        const store = new PostgresStore(sql, { schema: "relayer" });
        try {
          await store.migrate().catch((error: Error) => {
            assert.equal(
              error.message.replace(/\(Error: [^)]*\)/, "(…)"),
              "Cannot use this PostgreSQL client as the server ended its session while its transaction waited for its next message (…): the role's or database's idle_in_transaction_session_timeout is 5ms, shorter than a round trip between a transaction's messages; raise it to 1s or more (SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'), then run migrate() again",
            );
          });
        } finally {
          store.close();
        }
      }
      await Promise.all(clients.map((sql) => sql.end({ timeout: 1 })));
    })),
});

Deno.test({
  name:
    "PostgresStore.migrate() whose session a short idle_in_transaction_session_timeout ended right after its BEGIN says that setting and to raise it, where postgres.js's words came alone",
  ignore,
  fn: timeout(30_000, () =>
    asRole(
      ["idle_in_transaction_session_timeout = '20ms'"],
      async ({ connect }) => {
        // The migration's transaction held 200 ms between its BEGIN and
        // its first message: the server ends the session at 20 ms, every
        // time.
        const { sql: held, held: holdsOver } = heldAfterBegin(connect(), 200);
        const store = new PostgresStore(held, { schema: "relayer" });
        try {
          await assert.rejects(
            store.migrate(),
            (error: Error) => {
              assert.match(
                error.message,
                /^Cannot migrate the PostgreSQL schema "relayer" as the server ended its session while its transaction waited for its next message \(.+\): the role's or database's idle_in_transaction_session_timeout is 20ms, shorter than a round trip between a transaction's messages; raise it to 1s or more \(SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'\), then run migrate\(\) again$/,
              );
              return true;
            },
          );
        } finally {
          store.close();
          await holdsOver();
        }
      },
    )),
});

Deno.test({
  name:
    "PostgresStore.migrate() runs its migration under an idle_in_transaction_session_timeout raised to its statement_timeout, though the role's is 300 ms",
  ignore,
  fn: timeout(30_000, () =>
    asRole(
      ["idle_in_transaction_session_timeout = '300ms'"],
      async ({ connect }) => {
        // Each transaction's setting, asked in it as it ends.
        const seen: number[] = [];
        const sql = connect();
        const client = new Proxy(sql, {
          get(target, key) {
            if (key !== "begin") return Reflect.get(target, key);
            return (...args: unknown[]) => {
              const body = args.pop() as (tx: postgres.Sql) => unknown;
              return (target.begin as (...a: unknown[]) => unknown)(
                ...args,
                async (tx: postgres.Sql) => {
                  const done = await body(tx);
                  const [row] = await tx<{ ms: number }[]>`
                    SELECT setting::int AS ms FROM pg_catalog.pg_settings
                    WHERE name = 'idle_in_transaction_session_timeout'`;
                  seen.push(row!.ms);
                  return done;
                },
              );
            };
          },
        });
        const store = new PostgresStore(client, { schema: "relayer" });
        try {
          await store.migrate();
        } finally {
          store.close();
        }
        // The migration's (its lock_timeout and a second, 3 s): a role's
        // setting of a few ms ended it between its statements.
        assert.ok(Math.max(...seen) >= 3_000, JSON.stringify(seen));
      },
    )),
});

Deno.test({
  name:
    "PostgresStore.migrate() whose session is ended by another (pg_terminate_backend) under no idle_in_transaction_session_timeout (0, the default) keeps the loss's words, never names that setting",
  ignore,
  fn: timeout(30_000, () =>
    asRole([], async ({ connect }) => {
      // Its CREATE SCHEMA waits on another's, where it is ended.
      const error = await migrateStoppedOnLock(connect, "pg_terminate_backend");
      assert.doesNotMatch(error.message, /idle_in_transaction_session_timeout/);
    })),
});

/**
 * Writes intents on `store`, each `gapMs` ± 5 ms after the last, until one
 * fails (its id and error) or `n` land (`undefined`).
 */
async function writeUntilLost(
  store: PostgresStore,
  gapMs: number,
  n: number,
): Promise<{ id: string; error: Error } | undefined> {
  for (let i = 0; i < n; i++) {
    await new Promise((resolve) => setTimeout(resolve, gapMs - 5 + (i % 11)));
    const id = `pi_${gapMs}_${n}_${i}`;
    try {
      await store.createIntent({ id, state: "created" });
    } catch (error) {
      return { id, error: error as Error };
    }
  }
  return undefined;
}

Deno.test({
  name:
    "PostgresStore: a write lost on a connection the role's idle_session_timeout ended as it was sent names that setting and what to do (turn it off for the role, or set the client's idle_timeout below it), and a client whose idle_timeout is below it loses none",
  ignore,
  fn: timeout(
    60_000,
    () =>
      asRole(["idle_session_timeout = '60ms'"], async ({ connect }) => {
        const store = new PostgresStore(connect(1), { schema: "relayer" });
        try {
          await store.migrate();
          // Before: "PostgreSQL lost the connection during the write (read
          // ECONNRESET): it may have landed or not; the next read says
          // which", or "… before any of it was sent …: if it goes on, the
          // server's log says why it ends new connections (an expired
          // password, a connection limit, a restart)", nothing of the
          // setting that ended it.
          const lost = await writeUntilLost(store, 60, 300);
          assert.ok(lost !== undefined, "no write met the server's end");
          assert.match(
            lost.error.message,
            /^PostgreSQL lost the connection .*\. The role's or database's idle_session_timeout \(60ms\) ends idle pooled connections, a write sent on one as it ends lost with it: turn it off for the store's role, or give the client an idle_timeout below it \(postgres\(url, \{ idle_timeout: … \}\), in seconds\)$/,
          );
          // The server ended the session idle, before it read the write.
          assert.equal(await store.getIntent(lost.id), null);
        } finally {
          store.close();
        }
        // The client's idle_timeout first (30 ms): none lost.
        const first = new PostgresStore(connect(1, { idle_timeout: 0.03 }), {
          schema: "relayer",
        });
        try {
          await first.migrate();
          assert.equal(await writeUntilLost(first, 60, 40), undefined);
        } finally {
          first.close();
        }
      }),
  ),
});
