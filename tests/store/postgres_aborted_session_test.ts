/**
 * A connection of the client's pool left inside a failed transaction by
 * something else using the client (a `BEGIN` of its own sent as a plain
 * query, or postgres.js 3.4.9's `sql.begin()` handing its connection back
 * mid-transaction, porsager/postgres#1189), on a real server: the store's
 * read and write there reject with an error that says what happened, that
 * nothing was read or written, and what to do, keeping the server's error
 * as the cause; not a bare "current transaction is aborted, commands
 * ignored until end of transaction block". The write's `COMMIT` ends that
 * transaction, so the next write lands.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { connect, freshSchema, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

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

Deno.test({
  name:
    "PostgresStore: a read and a write on a connection another user of the client left in a failed transaction reject saying so, that nothing was read or written, and to try again; the next write lands",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const sql = await connect(1);
    const schema = freshSchema();
    try {
      const store = new PostgresStore(sql, { schema });
      await store.migrate();
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
    } finally {
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }
  }),
});
