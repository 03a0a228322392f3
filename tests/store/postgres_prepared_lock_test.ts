/**
 * PostgresStore behind a lock a prepared transaction holds: another
 * application's two-phase commit (`PREPARE TRANSACTION`) that updated an
 * intent and was never finished (its transaction manager crashed) keeps
 * its row lock with no session: pg_stat_activity shows nothing holding
 * it, and only `COMMIT PREPARED` or `ROLLBACK PREPARED` ends it. A write
 * that waited past its `lock_timeout` says so, naming the transaction's
 * gid, where it sent the operator to pg_stat_activity.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import {
  postgresAvailable,
  rollbackPrepared,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

serverUpFirst();

/**
 * A store on a server of its own (two-phase commit needs
 * max_prepared_transactions), intent `a` authorized, and a transaction
 * prepared under `gid` (an SQL literal) that updated it and holds its row:
 * `test` runs with them. Whether it passes or throws, every prepared
 * transaction left is rolled back, and the clients and the server end.
 */
async function heldByPrepared(
  gid: string,
  test: (fresh: {
    admin: postgres.Sql;
    store: PostgresStore;
    url: string;
  }) => Promise<void>,
): Promise<void> {
  const server = await startPostgres({
    settings: { max_prepared_transactions: "4" },
  });
  const admin = postgres(server.url, { max: 2, onnotice: () => {} });
  const sql = postgres(server.url, {
    max: 2,
    onnotice: () => {},
    max_lifetime: null,
  });
  const store = new PostgresStore(sql, {
    schema: "relayer",
    connectionWaitMs: 1_000,
  });
  try {
    await store.migrate();
    await store.createIntent({ id: "a", state: "authorized", hold: "pending" });
    const other = await admin.reserve();
    try {
      await other.unsafe(
        `BEGIN; UPDATE relayer.intents SET last_error = last_error WHERE id = 'a'`,
      );
      await other.unsafe(`PREPARE TRANSACTION ${gid}`);
    } finally {
      other.release();
    }
    await test({ admin, store, url: server.url });
  } finally {
    store.close();
    await sql.end({ timeout: 0 }).catch(() => {});
    await rollbackPrepared(admin);
    await admin.end({ timeout: 0 }).catch(() => {});
    await server.stop();
  }
}

/** Moves intent `a` from authorized to settling on `store`: its error. */
function settling(store: PostgresStore): Promise<Error> {
  return store.transition("a", {
    from: "authorized",
    to: "settling",
    version: "1",
    at: 1,
  }).then(() => assert.fail("the write went on"), (error: Error) => error);
}

Deno.test({
  name:
    "PostgresStore: a write held past its lock_timeout by a prepared transaction (PREPARE TRANSACTION, never finished) (or until a shorter statement_timeout ended its wait) names its gid and COMMIT PREPARED or ROLLBACK PREPARED, where it sent the operator to pg_stat_activity, which shows no session holding it",
  ignore: !postgresAvailable,
  fn: timeout(
    60_000,
    () =>
      heldByPrepared("'tm-4711'", async ({ admin, store, url }) => {
        // Before: "Cannot move a from authorized to settling as another
        // session held a lock it needed for over 500ms (lock_timeout; see
        // pg_locks and pg_stat_activity): nothing was written; retry".
        const error = await settling(store);
        assert.ok(error instanceof BusyError, String(error));
        assert.match(
          error.message,
          /^Cannot move a from authorized to settling as a prepared transaction held a lock it needed for over 500ms \(lock_timeout\): 'tm-4711', prepared at .+ by .+\. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with COMMIT PREPARED 'tm-4711' or ROLLBACK PREPARED 'tm-4711' \(see pg_prepared_xacts\)\. Nothing was written; retry$/,
        );
        // A role whose statement_timeout is below the write's lock_timeout
        // ends the wait first. Before: "… as statement_timeout ended its wait
        // for a row another session held (…; see pg_locks and
        // pg_stat_activity): nothing was written; retry".
        const timed = postgres(url, {
          max: 1,
          onnotice: () => {},
          connection: { statement_timeout: 200 },
        });
        const short = new PostgresStore(timed, {
          schema: "relayer",
          connectionWaitMs: 1_000,
        });
        try {
          const cut = await settling(short);
          assert.ok(cut instanceof BusyError, String(cut));
          assert.match(
            cut.message,
            /^Cannot move a from authorized to settling as a prepared transaction held a row it needed until statement_timeout ended its wait \(canceling statement due to statement timeout while locking tuple \(0,\d+\) in relation "intents"\): 'tm-4711', prepared at .+ by .+\. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with COMMIT PREPARED 'tm-4711' or ROLLBACK PREPARED 'tm-4711' \(see pg_prepared_xacts\)\. Nothing was written; retry$/,
          );
        } finally {
          short.close();
          await timed.end({ timeout: 0 }).catch(() => {});
        }
        await admin.unsafe(`ROLLBACK PREPARED 'tm-4711'`);
        const moved = await store.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        });
        assert.equal(moved.state, "settling");
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore: a write held by a prepared transaction whose gid holds a backslash names a COMMIT PREPARED and a ROLLBACK PREPARED that end it",
  ignore: !postgresAvailable,
  fn: timeout(60_000, () =>
    // A transaction manager's gid (PostgreSQL quotes it E'…').
    heldByPrepared("'tm\\4711'", async ({ admin, store }) => {
      const error = await settling(store);
      assert.ok(error instanceof BusyError, String(error));
      const end = / or (ROLLBACK PREPARED .+) \(see pg_prepared_xacts\)/.exec(
        error.message,
      )?.[1];
      assert.ok(end !== undefined, error.message);
      // Before: "ROLLBACK PREPARED 'tm\\4711'", which names another gid:
      // 'prepared transaction with identifier "tm\\4711" does not exist'.
      await admin.unsafe(end);
      const [row] = await admin`
        SELECT count(*)::int AS n FROM pg_catalog.pg_prepared_xacts`;
      assert.equal(row?.n, 0);
    })),
});
