/**
 * PostgresStore on a client made with `fetch_types: false` writes through
 * `sql.begin()`: when postgres.js's own `ROLLBACK` of a failed write, or
 * its own `COMMIT` after the store's `COMMIT AND CHAIN`, does not run (a
 * cancel cuts it), the session stays inside the transaction, and postgres.js 3.4.9 keeps the connection as that
 * transaction's for good. The store closes it, and postgres.js opens it
 * again: the next calls on a pool of one answer.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import {
  cancelOnceRunning,
  misspelt,
  parseRewritten,
  throughRelay,
} from "./_cut.ts";

/** The tests' options: the relay runs in this process, its sockets closing after the test. */
const RELAYED = {
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
} as const;

/** One connection, made with `fetch_types: false`: the store writes through `sql.begin()`. */
const ONE = { max: 1, fetch_types: false } as const;

/** A write's statement (its `SET CONSTRAINTS ALL IMMEDIATE`) sent misspelt: the write fails inside its transaction. */
function failingWrite(text: string): Uint8Array | undefined {
  return misspelt(text, "ALL IMMEDIATE", "ALL IMMEDIATX");
}

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false closes a write's connection whose ROLLBACK of postgres.js's own failed, rather than leave it kept from the pool: the next calls answer",
  ...RELAYED,
  fn: timeout(60_000, async () => {
    let armed = false;
    let rollbacks = 0;
    let failed = false;
    // postgres.js's ROLLBACK (prepared, "rollback" its text) is sent
    // misspelt: refused before it ran, it leaves the session inside the
    // failed transaction, as a cancel that cut it does.
    // Before it, a statement of the write is sent misspelt too, so that
    // the write fails inside its transaction.
    await throughRelay(ONE, () => (text) => {
      if (!armed) return Promise.resolve();
      if (!failed) {
        const bytes = failingWrite(text);
        if (bytes !== undefined) failed = true;
        return Promise.resolve(bytes);
      }
      const bytes = misspelt(text, "rollback\u0000", "rollbakk");
      if (bytes === undefined) return Promise.resolve();
      armed = false;
      rollbacks++;
      return Promise.resolve(bytes);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_3",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.equal(rollbacks, 1, "postgres.js's ROLLBACK was sent misspelt");
      assert.ok(answer instanceof Error, "the write failed");
      assert.doesNotMatch(answer.message, /landed|written(?!;)/);
      assert.equal(await other.getIntent("pi_3"), null);
      // The pool's one connection serves the next calls.
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
      await store.createIntent({ id: "pi_2", state: "authorized" });
      assert.equal((await other.getIntent("pi_2"))?.state, "authorized");
    });
  }),
});

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false answers a write landed when a cancel cuts postgres.js's own COMMIT after the store's COMMIT AND CHAIN, and closes its connection rather than leave it kept from the pool: the next calls answer",
  ...RELAYED,
  fn: timeout(60_000, async () => {
    const NAME = `begin_commit_cut_${Deno.pid}`;
    const SLEEP = "SELECT pg_sleep(5)";
    let armed = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    // postgres.js's COMMIT (prepared on the connection's first write) put
    // behind a sleep, which a cancel cuts: its transaction, empty since
    // the store's COMMIT AND CHAIN, stays open, failed.
    await throughRelay({ ...ONE, name: NAME }, ({ admin }) => (text) => {
      if (!armed) return Promise.resolve();
      const bytes = parseRewritten(text, "commit", SLEEP);
      if (bytes === undefined) return Promise.resolve();
      armed = false;
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return Promise.resolve(bytes);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      armed = true;
      const intent = await store.createIntent({
        id: "pi_1",
        state: "authorized",
      });
      assert.ok(await cancel, "the cancel cut postgres.js's COMMIT");
      assert.equal(intent.state, "authorized");
      assert.equal((await other.getIntent("pi_1"))?.state, "authorized");
      // The pool's one connection serves the next calls.
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
      await store.createIntent({ id: "pi_2", state: "authorized" });
      assert.equal((await other.getIntent("pi_2"))?.state, "authorized");
    });
  }),
});

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false keeps a write's connection whose ROLLBACK of postgres.js's own ran: postgres.js handed it back, and it is not closed under the call it serves next",
  ...RELAYED,
  fn: timeout(60_000, async () => {
    let armed = false;
    // A statement of the write is sent misspelt, so that the write fails
    // inside its transaction; postgres.js's ROLLBACK runs.
    await throughRelay(ONE, () => (text) => {
      if (!armed) return Promise.resolve();
      const bytes = failingWrite(text);
      if (bytes !== undefined) armed = false;
      return Promise.resolve(bytes);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      const [before] = await sql`SELECT pg_backend_pid() AS pid`;
      armed = true;
      const answer = await store.createIntent({
        id: "pi_3",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.ok(answer instanceof Error, "the write failed");
      assert.equal(armed, false, "the write's statement was sent misspelt");
      assert.equal(await other.getIntent("pi_3"), null);
      // The same session serves the next calls: nothing closed it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const [after] = await sql`SELECT pg_backend_pid() AS pid`;
      assert.equal(after?.pid, before?.pid);
      await store.createIntent({ id: "pi_2", state: "authorized" });
      assert.equal((await other.getIntent("pi_2"))?.state, "authorized");
    });
  }),
});
