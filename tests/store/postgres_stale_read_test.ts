/**
 * PostgresStore's reads on a real server after a schema change altered
 * what their prepared statements return (a later release's migration, run
 * by another instance in a rolling deploy; an operator's `ALTER TABLE …
 * ALTER COLUMN … TYPE`), while several reads wait on one connection
 * (pipelined: every connection of the pool busy). PostgreSQL refuses each
 * prepared read as stale; postgres.js 3.4.9 prepares each again and sends
 * it anew behind the ones already sent, each asking for its statement's
 * description first, and reads the descriptions in the wrong order: the
 * first read answered, the others never did (each failed after
 * `connectionWaitMs`), and the connection then answered each read with the
 * rows of a read sent after it. `getIntent("pi_0")` answered `pi_5`'s
 * record. A read whose session lost its statements (a pooler in
 * transaction mode) was sent again the same way; it now says why it
 * failed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredAs, onFreshSchema, postgresAvailable } from "../_postgres.ts";

// Each test's store is on a client of one connection (onFreshSchema's
// default): every read waits behind the others on it.

/** Reads each of `ids` at once: each answer's id, "none", or its error. */
function readIds(store: PostgresStore, ids: readonly string[]) {
  return Promise.all(ids.map((id) =>
    store.getIntent(id).then(
      (intent) => intent === null ? "none" : intent.id,
      (error: Error) => error.message,
    )
  ));
}

Deno.test({
  name:
    "PostgresStore: reads waiting on one connection when a schema change made their prepared statement stale each answer their own intent, and so do the reads after them",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    connectionWaitMs: 2_000,
    timeoutMs: 60_000,
  }, async ({ admin, schema, store }) => {
    const ids = Array.from({ length: 6 }, (_, i) => `pi_${i}`);
    for (const id of ids) {
      await store.createIntent({ id, hold: "pending" });
    }
    const readAll = () => readIds(store, ids);
    assert.deepEqual(await readAll(), ids);
    // Back and forth: each change makes the statements stale again.
    for (const type of ["numeric", "bigint", "numeric"]) {
      await admin.unsafe(
        `ALTER TABLE "${schema}".intents ALTER COLUMN version TYPE ${type}`,
      );
      // Before: ["pi_0", then five "PostgreSQL did not answer the
      // store's read within 2000ms …"], then ["pi_5", then five "… its
      // answer came back empty …"].
      assert.deepEqual(await readAll(), ids, `as ${type}, the first reads`);
      assert.deepEqual(await readAll(), ids, `as ${type}, the reads after`);
    }
  }),
});

Deno.test({
  name:
    "PostgresStore: reads handed to their connection as it reads an answer, once a schema change made their prepared statement stale, each answer their own intent",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    connectionWaitMs: 2_000,
    timeoutMs: 60_000,
  }, async ({ admin, schema, sql, store }) => {
    const ids = Array.from({ length: 200 }, (_, i) => `pi_${i}`);
    await sql.unsafe(
      `INSERT INTO "${schema}".intents (id, state)
         SELECT 'pi_' || n, 'authorized' FROM generate_series(0, 199) n`,
    );
    const readAll = () => readIds(store, ids);
    assert.deepEqual(await readAll(), ids);
    for (const [n, type] of ["numeric", "bigint", "numeric"].entries()) {
      await admin.unsafe(
        `ALTER TABLE "${schema}".intents ALTER COLUMN version TYPE ${type}`,
      );
      // The one connection waits for a new statement's description
      // (a parameter, prepared): the reads wait for the connection, and
      // postgres.js hands them all to it as it reads that statement's
      // answer. The answers to the first ones, refused as stale, come
      // back on the same task on Deno, before a microtask ran: postgres.js
      // sent each again. Before: a RangeError thrown from postgres.js's
      // DataRow (rows parsed with another statement's columns), or reads
      // that never answered and a connection left idle in a transaction.
      const busy = sql.unsafe(
        `SELECT pg_sleep(0.05), $1::int AS busy_${n}`,
        [1],
        { prepare: true },
      );
      const reads = readAll();
      await busy;
      assert.deepEqual(await reads, ids, `as ${type}, the reads handed over`);
      assert.deepEqual(await readAll(), ids, `as ${type}, the reads after`);
    }
  }),
});

Deno.test({
  name:
    "PostgresStore: two stores of one schema on one client read their intents after schema changes only one of them read through",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    timeoutMs: 60_000,
  }, async ({ admin, schema, sql, store: first }) => {
    const second = new PostgresStore(sql, { schema });
    const ids = Array.from({ length: 6 }, (_, i) => `pi_${i}`);
    for (const id of ids) {
      await first.createIntent({ id, hold: "pending" });
    }
    const readAll = (store: PostgresStore) => readIds(store, ids);
    assert.deepEqual(await readAll(first), ids);
    assert.deepEqual(await readAll(second), ids);
    // Each change to a type the column never had: every statement
    // prepared before it is stale. Only the first store reads between
    // them, preparing its statements under new names each time.
    for (const type of ["numeric", "integer", "text"]) {
      await admin.unsafe(
        `ALTER TABLE "${schema}".intents ALTER COLUMN version TYPE ${type}`,
      );
      assert.deepEqual(await readAll(first), ids, `the first, as ${type}`);
    }
    // Before: six "cached plan must not change result type", the second
    // store asking under the names the first had used before each
    // change, one after the other.
    assert.deepEqual(await readAll(second), ids, "the second");
  }),
});

Deno.test({
  name:
    "PostgresStore: a read on a session that lost the statements this client prepared there fails with a pooler's advice, and the reads after it land",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ sql, store }) => {
    await store.createIntent({ id: "pi_1", hold: "pending" });
    assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
    // What a pooler in transaction mode does to them (the next
    // transaction on another server session), or a DISCARD ALL.
    await sql.unsafe("DEALLOCATE ALL");
    await assert.rejects(
      store.getIntent("pi_1"),
      /^Error: The store's read failed as PostgreSQL does not know a statement this client prepared: a pooler in transaction mode \(PgBouncer, Supavisor\) sent it to another server session; create the client with prepare: false/,
    );
    assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
    assert.equal(await store.deliveries("job_1"), 0);
  }),
});

/** PostgreSQL's refusal of a prepared statement a schema change made stale, as postgres.js 3.4.9 rejects with it. */
function staleRefusal(): Error {
  return Object.assign(
    new Error("cached plan must not change result type"),
    {
      name: "PostgresError",
      severity: "ERROR",
      code: "0A000",
      routine: "RevalidateCachedQuery",
    },
  );
}

Deno.test({
  name:
    "PostgresStore: a read refused as stale is asked twice more under new names, and fails saying so when the schema changed under each ask",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ schema, sql, store: plain }) => {
    await plain.createIntent({ id: "pi_1", hold: "pending" });
    // The store's intent read answered with a stale refusal for its first
    // `refusals` asks, as a read that a schema change overtook each time.
    const texts: string[] = [];
    let refusals = 0;
    const hooked = answeredAs(sql, (text) => {
      if (!text.includes("h.state AS hold") || text.includes("lease_owner")) {
        return undefined;
      }
      texts.push(text);
      if (refusals === 0) return undefined;
      refusals--;
      return () => {
        throw staleRefusal();
      };
    });
    const store = new PostgresStore(hooked, {
      schema,
      connectionWaitMs: 2_000,
    });
    refusals = 2;
    assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
    assert.equal(texts.length, 3);
    // Each ask went under new statement names (a new comment after the
    // table's name), which no connection has prepared: three on the
    // connection now.
    const prepared = await sql.unsafe(
      "SELECT statement FROM pg_prepared_statements",
    );
    assert.equal(
      prepared.filter((row) =>
        String(row.statement).includes("h.state AS hold") &&
        !String(row.statement).includes("lease_owner")
      ).length,
      3,
    );
    texts.length = 0;
    refusals = 3;
    await assert.rejects(
      store.getIntent("pi_1"),
      /^Error: The store's read failed as PostgreSQL refused its statement as stale 3 times: the schema changed under it \(cached plan must not change result type\); try again$/,
    );
    assert.equal(texts.length, 3);
    assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
  }),
});
