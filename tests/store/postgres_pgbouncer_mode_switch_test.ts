/**
 * PostgresStore behind a real PgBouncer whose `pool_mode` an operator
 * switches to `statement` after the store started (an edit of
 * `pgbouncer.ini` and a reload): from then on the pooler ends the client's
 * connection at each write's `BEGIN`. `migrate()` refuses such a pooler at
 * start; met later, each write may have landed or not, which it says, and
 * from the pooler's words, kept by postgres.js for the request that opens
 * the connection again, the store names the pooler's mode: a read that
 * meets them is asked again (it was never sent), and the writes after say
 * what to set.
 *
 * Without `pgbouncer` these tests are skipped with one loud line, except
 * under `CI=true`, where that fails the run.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  processPostgres,
  startPgBouncer,
} from "../../support/postgres_server.ts";
import { freshDatabase, pgbouncerAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const available: boolean = await pgbouncerAvailable();

/**
 * A store behind a PgBouncer started in transaction mode, on a fresh
 * database, migrated, with intent `a` created; its client of one
 * connection (`fetchTypes: false` takes the writes' `sql.begin` path):
 * the request after a lost write is the one that opens it again, and
 * meets what the pooler said as it ended it.
 */
async function behindPooler(
  fetchTypes: boolean,
  test: (at: {
    sql: postgres.Sql;
    store: PostgresStore;
    setMode: (mode: "transaction" | "statement") => Promise<void>;
    move: () => Promise<string>;
  }) => Promise<void>,
): Promise<void> {
  const { server, missing } = await processPostgres();
  if (server === null) throw new Error(missing);
  const pooler = await startPgBouncer(server, { mode: "transaction" });
  const database = await freshDatabase();
  const url = new URL(pooler.url);
  url.pathname = new URL(database.url).pathname;
  const sql = postgres(url.href, {
    prepare: false,
    max: 1,
    max_lifetime: null,
    onnotice: () => {},
    fetch_types: fetchTypes,
  });
  const store = new PostgresStore(sql, { schema: "relayer" });
  try {
    await store.migrate();
    await store.createIntent({ id: "a", state: "authorized", hold: "pending" });
    await test({
      sql,
      store,
      setMode: (mode) => pooler.setMode(mode),
      move: () =>
        store.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        }).then(() => "landed", (error: Error) => error.message),
    });
  } finally {
    store.close();
    await sql.end({ timeout: 1 });
    await pooler.stop();
    await database.drop();
  }
}

/**
 * Back in transaction mode, `move()` lands (the connections the pooler
 * ended are opened again); then, in statement mode once more, the first
 * write the pooler ends says `lost`'s words: those met before the landed
 * write are forgotten.
 */
async function forgottenOnceLanded(
  at: {
    store: PostgresStore;
    setMode: (mode: "transaction" | "statement") => Promise<void>;
    move: () => Promise<string>;
  },
  lost: RegExp,
): Promise<void> {
  await at.setMode("transaction");
  let landed = "";
  for (let i = 0; i < 5 && landed !== "landed"; i++) {
    landed = await at.move();
  }
  assert.equal(landed, "landed");
  await at.setMode("statement");
  assert.match(
    await at.store.createIntent({ id: "b", hold: "pending" }).then(
      () => "landed",
      (e: Error) => e.message,
    ),
    lost,
  );
}

/** A lost write's words, with the pool mode named or not. */
const LOST =
  /^PostgreSQL lost the connection during the write \(.*\): it may have landed or not; the next read says which$/;
const LOST_NAMED =
  /^PostgreSQL lost the connection during the write \(.*\): it may have landed or not; the next read says which\. The pooler in front of PostgreSQL ended a connection of this client at a transaction's BEGIN since the last write that landed \(transaction blocks not allowed in statement pooling mode\): its pool mode is statement/;

Deno.test({
  name:
    "PostgresStore behind PgBouncer switched to statement mode after its start: a read that meets the pooler's words is asked again, and the writes after the first say the pool mode to set, until one lands again",
  ignore: !available,
  fn: timeout(
    60_000,
    () =>
      behindPooler(true, async ({ store, setMode, move }) => {
        await setMode("statement");
        assert.match(await move(), LOST);
        // Before: "transaction blocks not allowed in statement pooling
        // mode", bare, though the read was never sent.
        const read = await store.getIntent("a").catch((error: Error) =>
          error.message
        );
        assert.equal(typeof read === "string" ? read : read?.version, "1");
        // Before: the same words as the first write's, every write after.
        assert.match(
          await move(),
          /^PostgreSQL lost the connection during the write \(.*\): it may have landed or not; the next read says which\. The pooler in front of PostgreSQL ended a connection of this client at a transaction's BEGIN since the last write that landed \(transaction blocks not allowed in statement pooling mode\): its pool mode is statement \(PgBouncer's pool_mode = statement\), and every write of the store is a transaction, so none will land\. Give the store's database or user the pooler's transaction mode \(with prepare: false, \?prepare=false in DATABASE_URL\) or its session mode$/,
        );
        assert.equal((await store.getIntent("a"))?.version, "1");
        // A write landed: the words before it are forgotten, and the first
        // write the pooler ends again says only what it knows.
        await forgottenOnceLanded({ store, setMode, move }, LOST);
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate() on a client behind PgBouncer switched to statement mode after a store on it started, whose schema check meets the pooler's words a lost write left, says the pool mode to set, not the pooler's words alone",
  ignore: !available,
  fn: timeout(
    60_000,
    () =>
      behindPooler(true, async ({ sql, setMode, move }) => {
        // A second instance's start on the same client (a Worker's per
        // request, a service's health check that migrates): its first
        // request is the schema's check.
        const next = new PostgresStore(sql, { schema: "relayer" });
        try {
          await setMode("statement");
          assert.match(await move(), LOST);
          // Before: "transaction blocks not allowed in statement pooling
          // mode", the pooler's words alone.
          await assert.rejects(next.migrate(), (error: Error) => {
            assert.match(
              error.message,
              /^Cannot use this PostgreSQL client as the pooler in front of PostgreSQL ended its connection at a transaction's BEGIN \(transaction blocks not allowed in statement pooling mode\): a pooler in statement mode \(PgBouncer's pool_mode = statement\) does so, and every write of the store is a transaction, so none would be written\. Give the store's database or user the pooler's transaction mode \(with prepare: false, \?prepare=false in DATABASE_URL\) or its session mode$/,
            );
            return true;
          });
        } finally {
          next.close();
        }
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore behind PgBouncer switched to statement mode: a read that meets the pooler's words as the store closes (a drain) is not asked again and says the pool mode to set, that nothing was read, not the pooler's words alone",
  ignore: !available,
  fn: timeout(
    60_000,
    () =>
      behindPooler(true, async ({ store, setMode, move }) => {
        await setMode("statement");
        assert.notEqual(
          await move(),
          "landed",
          "a write landed in statement mode",
        );
        const read = store.getIntent("a").then(
          () => new Error("read"),
          (error: Error) => error,
        );
        store.close();
        const error = await read;
        // Before: "transaction blocks not allowed in statement pooling mode".
        assert.equal(
          error.message,
          "The store's read failed as the pooler in front of PostgreSQL ended its connection (transaction blocks not allowed in statement pooling mode): nothing was read; retry. Its pool mode is statement (PgBouncer's pool_mode = statement), which ends a connection at each write's BEGIN: Give the store's database or user the pooler's transaction mode (with prepare: false, ?prepare=false in DATABASE_URL) or its session mode",
        );
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore behind PgBouncer switched to statement mode: the pooler's words met only by the store's own probe of the pool after a lost write (no read between) are named by the next lost write",
  ignore: !available,
  fn: timeout(60_000, () =>
    behindPooler(true, async ({ setMode, move }) => {
      await setMode("statement");
      assert.match(await move(), LOST);
      // The store's probe of the pool, a timer's turn after the loss, is
      // the request that opens the connection again and meets the words;
      // the next write's read then finds the connection open.
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Before: the same words as the first write's.
      assert.match(await move(), LOST_NAMED);
    })),
});

/** A write lost at its BEGIN through `sql.begin`, with the pool mode named or not. */
const LOST_BEFORE =
  /^PostgreSQL lost the connection the write was to go on before any of it was sent \(.*\): nothing was written, so try again; if it goes on, the server's log says why it ends new connections \(an expired password, a connection limit, a restart\)$/;
const LOST_BEFORE_NAMED =
  /^PostgreSQL lost the connection the write was to go on before any of it was sent \(.*\): nothing was written, so try again; the pooler in front of PostgreSQL ended a connection of this client at a transaction's BEGIN since the last write that landed \(transaction blocks not allowed in statement pooling mode\): its pool mode is statement \(PgBouncer's pool_mode = statement\), and every write of the store is a transaction, so none will land\. Give the store's database or user the pooler's transaction mode \(with prepare: false, \?prepare=false in DATABASE_URL\) or its session mode$/;

Deno.test({
  name:
    "PostgresStore on a client with fetch_types: false (its writes through sql.begin) behind PgBouncer switched to statement mode: a write lost at its BEGIN after the pooler's words were met says the pool mode to set, not the server's log and an expired password, and once a write lands the next says only what it knows",
  ignore: !available,
  fn: timeout(
    60_000,
    () =>
      behindPooler(false, async ({ store, setMode, move }) => {
        await setMode("statement");
        // At its BEGIN, before any of it was sent: nothing written.
        assert.match(await move(), LOST_BEFORE);
        // The pooler's words, kept for the read that opens the connection
        // again: it is asked again and answers.
        assert.equal((await store.getIntent("a"))?.version, "1");
        // Before: the first write's words again, naming the server's log,
        // an expired password, a connection limit, a restart.
        assert.match(await move(), LOST_BEFORE_NAMED);
        // A write landed: the words before it are forgotten.
        await forgottenOnceLanded({ store, setMode, move }, LOST_BEFORE);
      }),
  ),
});
