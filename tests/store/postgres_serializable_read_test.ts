/**
 * PostgresStore's reads on a database whose transactions default to
 * SERIALIZABLE (`ALTER DATABASE … SET default_transaction_isolation`, set
 * by another team for its own application): the store's writes set READ
 * COMMITTED, but a read runs alone, at the database's level, and there
 * PostgreSQL may end it with a serialization failure (`40001`) for other
 * SERIALIZABLE transactions on the store's tables (a DBA's script, another
 * application's reconciliation), a pivot between them committed while the
 * read ran. A read changes nothing: the server's hint is to ask again.
 *
 * The read's window is held open by a table lock it waits for after it
 * took its snapshot, so the anomaly comes every run (without one, it comes
 * only where the read's statement runs as the pivot commits).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable, serverUpFirst } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { onDatabase } from "./_on_database.ts";

const ignore = !postgresAvailable;

/**
 * A fresh database with the store migrated in schema `relayer` and intents
 * `a` and `b`, whose sessions opened after default to SERIALIZABLE; `test`
 * is given the store on a client opened after that, and `pivot(read)`,
 * which runs the store's `read` across a read/write anomaly of two other
 * SERIALIZABLE sessions (see {@linkcode pivotUnder}).
 */
async function onSerializable(
  test: (db: {
    store: PostgresStore;
    pivot: <T>(read: () => Promise<T>) => Promise<T>;
  }) => Promise<void>,
): Promise<void> {
  await onDatabase(
    { default_transaction_isolation: "serializable" },
    async ({ admin, connect, url }) => {
      const owner = new PostgresStore(admin, { schema: "relayer" });
      await owner.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      await owner.createIntent({
        id: "b",
        state: "authorized",
        hold: "pending",
      });
      owner.close();
      const name = new URL(url).pathname.slice(1);
      const sql = connect();
      const [shown] = await sql`SHOW default_transaction_isolation`;
      assert.equal(shown?.default_transaction_isolation, "serializable");
      const store = new PostgresStore(sql, { schema: "relayer" });
      try {
        await test({
          store,
          pivot: (read) => pivotUnder(connect, admin, name, read),
        });
      } finally {
        store.close();
      }
    },
  );
}

/**
 * Runs `read` (the store's, of intent `a`) as the reader of PostgreSQL's
 * dangerous structure: a SERIALIZABLE session `w` reads `b` and updates `a`;
 * another, `t`, updates `b` and commits (w → t); `read` takes its snapshot
 * and waits behind a lock on `relayer.holds` that a third session holds;
 * `w` commits; the lock goes, and the read meets `w`'s committed version of
 * `a` it cannot see (read → w → t, t committed first): the server ends it,
 * "could not serialize access due to read/write dependencies among
 * transactions" (`40001`). A read asked again takes a new snapshot, which
 * sees `w`'s commit, and answers.
 */
async function pivotUnder<T>(
  open: (max?: number) => postgres.Sql,
  admin: postgres.Sql,
  database: string,
  read: () => Promise<T>,
): Promise<T> {
  const w = await open(1).reserve();
  const lock = await admin.reserve();
  try {
    await w.unsafe(
      `BEGIN; SELECT state FROM relayer.intents WHERE id = 'b'`,
    );
    await w.unsafe(
      `UPDATE relayer.intents SET last_error = last_error WHERE id = 'a'`,
    );
    await open(1).unsafe(
      `UPDATE relayer.intents SET last_error = last_error WHERE id = 'b'`,
    );
    await lock.unsafe(
      `BEGIN; LOCK TABLE relayer.holds IN ACCESS EXCLUSIVE MODE`,
    );
    const reading = read().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    for (let waited = 0;; waited += 20) {
      const [row] = await admin<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = ${database} AND wait_event_type = 'Lock'`;
      if ((row?.n ?? 0) > 0) break;
      assert.ok(waited < 5_000, "the store's read never waited on the lock");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await w.unsafe(`COMMIT`);
    await lock.unsafe(`COMMIT`);
    const read$ = await reading;
    if ("error" in read$) throw read$.error;
    return read$.value;
  } finally {
    await w.unsafe(`ROLLBACK`).catch(() => {});
    await lock.unsafe(`ROLLBACK`).catch(() => {});
    w.release();
    lock.release();
  }
}

serverUpFirst();

Deno.test({
  name:
    "PostgresStore's read on a database whose transactions default to SERIALIZABLE, ended by a serialization failure for other SERIALIZABLE sessions, is asked again and answers",
  ignore,
  fn: timeout(30_000, () =>
    onSerializable(async ({ store, pivot }) => {
      // Before: "could not serialize access due to read/write dependencies
      // among transactions" (40001), the server's words alone.
      const a = await pivot(() => store.getIntent("a"));
      assert.deepEqual([a?.state, a?.hold, a?.version], [
        "authorized",
        "pending",
        "1",
      ]);
    })),
});

Deno.test({
  name:
    "PostgresStore's write whose read a serialization failure ended on a database defaulting to SERIALIZABLE reads again and lands, not a race lost to a writer that changed nothing of it",
  ignore,
  fn: timeout(30_000, () =>
    onSerializable(async ({ store, pivot }) => {
      // Before: a ConflictError, "another writer changed it at the same
      // time; re-read it", where the intent was at the version read.
      const moved = await pivot(() =>
        store.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        })
      );
      assert.deepEqual([moved.state, moved.version], ["settling", "2"]);
    })),
});

Deno.test({
  name:
    "PostgresStore's read that every ask meets a serialization failure (a pivot another application prepared with PREPARE TRANSACTION) says so, that nothing was read, and to give the role READ COMMITTED; a write's read so failed is marked nothing written",
  ignore,
  fn: timeout(60_000, async () => {
    // A server of its own: two-phase commit needs max_prepared_transactions.
    const server = await startPostgres({
      settings: { max_prepared_transactions: "4" },
    });
    const admin = postgres(server.url, { max: 2, onnotice: () => {} });
    const clients: postgres.Sql[] = [admin];
    const open = () => {
      const sql = postgres(server.url, {
        max: 2,
        onnotice: () => {},
        max_lifetime: null,
      });
      clients.push(sql);
      return sql;
    };
    let store: PostgresStore | undefined;
    try {
      const owner = new PostgresStore(admin, { schema: "relayer" });
      await owner.migrate();
      await owner.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      await owner.createIntent({
        id: "b",
        state: "authorized",
        hold: "pending",
      });
      owner.close();
      await admin.unsafe(
        `ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'`,
      );
      // The pivot, prepared: it can no longer be the one ended, so each
      // read of what it wrote is (read → w → t, t committed first).
      const w = await open().reserve();
      try {
        await w.unsafe(
          `BEGIN; SELECT state FROM relayer.intents WHERE id = 'b'`,
        );
        await w.unsafe(
          `UPDATE relayer.intents SET last_error = last_error WHERE id = 'a'`,
        );
        await open().unsafe(
          `UPDATE relayer.intents SET last_error = last_error WHERE id = 'b'`,
        );
        await w.unsafe(`PREPARE TRANSACTION 'pivot'`);
      } finally {
        w.release();
      }
      store = new PostgresStore(open(), { schema: "relayer" });
      const said =
        / failed as PostgreSQL ended it 4 times with a serialization failure \(could not serialize access due to read\/write dependencies among transactions\): the database's or role's default_transaction_isolation is serializable \(SHOW default_transaction_isolation\), so the store's reads run at that level beside other SERIALIZABLE transactions on its tables; nothing was read; retry, or give the store's role READ COMMITTED \(ALTER ROLE … SET default_transaction_isolation = 'read committed'\), which its writes set for themselves$/;
      // Before: the server's words alone, at the first ask.
      const read = await store.getIntent("a").then(
        () => new Error("read"),
        (error: Error) => error,
      );
      assert.match(read.message, /^The store's read failed as /);
      assert.match(read.message, said);
      assert.equal((read.cause as { code?: unknown })?.code, "40001");
      const written = await store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1,
      }).then(() => new Error("written"), (error: Error) => error);
      // Before: a ConflictError, "another writer changed it at the same
      // time; re-read it".
      assert.match(written.message, /^The store's read failed as /);
      assert.match(written.message, said);
      assert.ok(isNotWritten(written), written.message);
      await admin.unsafe(`COMMIT PREPARED 'pivot'`);
      const a = await store.getIntent("a");
      assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
    } finally {
      store?.close();
      await admin.unsafe(`ROLLBACK PREPARED 'pivot'`).catch(() => {});
      for (const sql of clients) await sql.end({ timeout: 1 });
      await server.stop();
    }
  }),
});
