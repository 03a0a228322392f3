/**
 * A connection of the client's pool left inside a failed transaction by
 * something else using the client (a `BEGIN` of its own sent as a plain
 * query, or postgres.js 3.4.9's `sql.begin()` handing its connection back
 * mid-transaction, porsager/postgres#1189), on a real server: the store's
 * read and write there reject with an error that says what happened, that
 * nothing was read or written, and what to do, keeping the server's error
 * as the cause; not a bare "current transaction is aborted, commands
 * ignored until end of transaction block". The write's `COMMIT` ends that
 * transaction, so the next write lands. On a client made with
 * `fetch_types: false` the write's `sql.begin()` fails at its `BEGIN`, and
 * postgres.js 3.4.9 keeps that connection from the pool until the server
 * ends the session: the write says so, and how to end it.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const ABORTED =
  /^Cannot (.+) as PostgreSQL ran it inside a transaction that had already failed on its connection \(25P02: current transaction is aborted\), which something else using this client left open: nothing was (read|written), so try again, and look for a transaction of your own on this client that is never committed or rolled back$/;

/** What a call refused so could not do, and what it says was not done; the server's 25P02 its cause. */
async function refusal(call: Promise<unknown>): Promise<string[]> {
  const error = await call.then(
    () => assert.fail("the call answered"),
    (error: Error) => error,
  );
  assert.equal((error.cause as { code?: string }).code, "25P02");
  const [, what, done] = error.message.match(ABORTED) ??
    assert.fail(error.message);
  return [what!, done!];
}

serverUpFirst();

Deno.test({
  name:
    "PostgresStore: a read and a write on a connection another user of the client left in a failed transaction reject saying so, that nothing was read or written, and to try again; the next write lands",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ sql, store }) => {
    await store.createIntent({ id: "pi_1" });
    // The pool's one connection, left in a failed transaction.
    await sql.unsafe("BEGIN");
    await sql.unsafe("SELECT 1/0").catch(() => {});

    assert.deepEqual(await refusal(store.getIntent("pi_1")), [
      "run the store's read",
      "read",
    ]);
    assert.deepEqual(await refusal(store.createIntent({ id: "pi_2" })), [
      "create intent pi_2",
      "written",
    ]);

    // The write's COMMIT ended the failed transaction.
    assert.equal(await store.getIntent("pi_2"), null);
    assert.equal((await store.createIntent({ id: "pi_2" })).state, "created");
    assert.equal((await store.getIntent("pi_1"))?.state, "created");
  }),
});

const KEPT =
  /^Cannot create intent pi_2 as PostgreSQL ran it inside a transaction that had already failed on its connection \(25P02: current transaction is aborted\), which something else using this client left open: nothing was written, and postgres\.js 3\.4\.9 now keeps that connection from the pool \(a client made with fetch_types: false writes through sql\.begin\(\), whose BEGIN failed\) until the server ends that session: end it \(pg_terminate_backend on the session 'idle in transaction \(aborted\)', or set idle_in_transaction_session_timeout\), and look for a transaction of your own on this client that is never committed or rolled back$/;

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false: a write on a connection left in a failed transaction rejects saying that postgres.js now keeps that connection from the pool and how to end its session, not to try again; once the session is ended the next write lands",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    adminMax: 1,
    fetchTypes: false,
    connectionWaitMs: 500,
  }, async ({ admin, sql, store }) => {
    await sql.unsafe("BEGIN");
    await sql.unsafe("SELECT 1/0").catch(() => {});

    const error = await store.createIntent({ id: "pi_2" }).then(
      () => assert.fail("the write answered"),
      (error: Error) => error,
    );
    assert.equal((error.cause as { code?: string }).code, "25P02");
    assert.match(error.message, KEPT);
    // Trying again does not help: the pool's one connection is kept.
    await assert.rejects(
      store.createIntent({ id: "pi_2" }),
      /no connection within 500ms/,
    );
    // The session ended as the error says, the next write lands.
    const [ended] = await admin`
      SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE state = 'idle in transaction (aborted)' AND usename = current_user
        AND pid <> pg_backend_pid()`;
    assert.equal(ended?.n, 1);
    let landed: string | undefined;
    for (let tries = 0; tries < 20 && landed === undefined; tries++) {
      landed = await store.createIntent({ id: "pi_2" }).then(
        (intent) => intent.state,
        () => undefined,
      );
    }
    assert.equal(landed, "created");
  }),
});
