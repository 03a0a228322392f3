/**
 * PostgresStore on a real server, on a connection where a statement
 * failed while its rows streamed: cancelled (as the store cancels a read
 * past `connectionWaitMs`), or an error on a row. postgres.js 3.4.9 counts
 * a statement's rows per connection and resets the count only at a
 * `CommandComplete`, which such a statement never has
 * (porsager/postgres#1119, #1181): the next statement on the connection
 * resolves with its rows after as many holes as the failed one streamed.
 * Taken as they came, a read of an intent that exists said there was
 * none, and a page of dead letters listed `null`s before its letters
 * (`GET /v1/dead-letters` answered `"items":[null,null,…]`). The store
 * reads the rows the statement returned, and nothing in their place.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const NOW = 1_767_225_600_000;

/** Statements that stream three rows on `sql`'s one connection, then fail. */
const FAILED_MID_STREAM: readonly {
  readonly name: string;
  readonly fail: (sql: postgres.Sql, admin: postgres.Sql) => Promise<unknown>;
}[] = [
  {
    name: "a statement cancelled while its rows streamed",
    fail: async (sql, admin) => {
      // Three rows, then a wait the cancel cuts: the server sends the rows
      // before its error. Its answer taken at once: it fails before the
      // wait below ends if anything cuts it sooner, and a query's promise
      // rejected with nothing to take it fails the whole file.
      const answer = sql`SELECT i, pg_sleep(CASE WHEN i = 4 THEN 5 ELSE 0 END)
        FROM generate_series(1, 10) i`.execute().then(
        (rows) => ({ rows }),
        (error: unknown) => ({ error }),
      );
      // Cancelled once in its own wait, past the three rows: found by its
      // text, not by any pg_sleep on the server, which another file's test
      // running alongside may have (cancelled then before its rows).
      // Cancelled by pg_cancel_backend, whose signal is sent before it
      // answers: postgres.js's `query.cancel()` sends its cancel on a
      // connection of its own without waiting for it, and that cancel now
      // and then also cut the next statement on the session (the store's
      // read below, failing the test; or this statement's next run before
      // its wait ended, a rejection nothing took yet).
      for (;;) {
        const [row] = await admin`SELECT pg_cancel_backend(pid) AS cancelled
          FROM pg_stat_activity
          WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid()
            AND query LIKE '%pg_sleep(CASE WHEN i = 4 THEN 5 ELSE 0 END)%'`;
        if (row?.cancelled === true) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const settled = await answer;
      if ("error" in settled) throw settled.error;
      return settled.rows;
    },
  },
  {
    name: "a statement that failed on its fourth row",
    fail: (sql) => sql`SELECT i, 1 / (4 - i) FROM generate_series(1, 10) i`,
  },
];

serverUpFirst();

for (const c of FAILED_MID_STREAM) {
  Deno.test({
    name:
      `PostgresStore reads its own rows on a connection where ${c.name}: an intent that exists, and a page of dead letters without nulls`,
    ignore: !postgresAvailable,
    // One connection: the store's statements follow the failed one on it.
    fn: onFreshSchema({
      migrateOn: "admin",
    }, async ({ admin, schema, sql, store }) => {
      const setup = new PostgresStore(admin, { schema });
      await setup.createIntent({ id: "pi_1", hold: "pending" });
      // Two letters: the page's rows are all the statement's, in order.
      for (const id of ["pi_1", "pi_2"]) {
        await setup.putDeadLetter({
          jobId: `${id}/settle`,
          intentId: id,
          deliveries: 3,
          cause: "exhausted",
          reason: "r",
          resolution: "job dropped, intent still authorized",
          lastError: "e",
          poisonedAt: NOW,
        });
      }
      await store.getIntent("pi_1"); // the connection open

      const failed = await c.fail(sql, admin).then(
        () => null,
        (e: Error) => e,
      );
      assert.ok(failed !== null, "the statement did not fail");
      assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");

      await c.fail(sql, admin).catch(() => {});
      const page = await store.listDeadLetters();
      assert.deepEqual(
        JSON.parse(JSON.stringify(page.items)).map(
          (letter: { jobId: string } | null) => letter?.jobId ?? null,
        ),
        ["pi_1/settle", "pi_2/settle"],
      );
      assert.equal(page.cursor, null);

      await c.fail(sql, admin).catch(() => {});
      assert.equal(await store.recordHold("pi_1"), "pending");
    }),
  });
}

Deno.test({
  name:
    "PostgresStore.migrate() reads its check of the database on a connection where a statement failed while its rows streamed, and refuses a read-only one",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    // One connection, read-only: the check follows the failed statement.
    connection: { default_transaction_read_only: "on" },
    migrateOn: "admin",
  }, async ({ sql, store }) => {
    await assert.rejects(
      sql`SELECT i, 1 / (4 - i) FROM generate_series(1, 10) i`,
      /division by zero/,
    );
    await assert.rejects(
      store.migrate(),
      /database as this session is read-only though the server is a primary \(default_transaction_read_only = on, set for the role, the database or the connection\): turn it off for the store's role \(ALTER ROLE … SET default_transaction_read_only = off\), or connect as a role that may write$/,
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate()'s pooler check, given no second connection in time, hands its first back once a connection where a statement failed while its rows streamed says that session is there",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    max: 2,
    connectionWaitMs: 500,
    migrateOn: "admin",
  }, async ({ admin, sql, store }) => {
    const timers: ReturnType<typeof setTimeout>[] = [];
    try {
      // One connection busy past the check's wait for a second: three
      // rows, then a wait, then an error on the fourth. The check's
      // question whether the first's session is there goes to it next.
      const busy = sql`SELECT i, CASE WHEN i < 4 THEN 0
          ELSE i / (SELECT 0 FROM pg_sleep(1.5) WHERE i > 0) END AS x
        FROM generate_series(1, 10) i`.then(() => null, (e: Error) => e);
      for (;;) {
        const [row] = await admin`SELECT count(*)::int AS waiting
          FROM pg_stat_activity WHERE wait_event = 'PgSleep'
            AND query LIKE '%pg_sleep(1.5)%'`;
        if (Number(row?.waiting) > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await store.migrate();
      assert.match(String(await busy), /division by zero/);
      // Both connections are the pool's again.
      const reserved = Promise.all([sql.reserve(), sql.reserve()]);
      const both = await Promise.race([
        reserved.then(() => "both reserved"),
        new Promise<string>((resolve) => {
          timers.push(
            setTimeout(() => resolve("one kept from the pool"), 3_000),
          );
        }),
      ]);
      assert.equal(both, "both reserved");
      for (const connection of await reserved) connection.release();
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
  }),
});
