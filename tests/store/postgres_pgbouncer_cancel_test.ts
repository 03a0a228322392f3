/**
 * PostgresStore behind a real PgBouncer in transaction mode when a cancel
 * (`pg_cancel_backend`) cuts a write's `BEGIN`: the flight's first query
 * fails, the server session goes idle, and PgBouncer unlinks it from the
 * client while the statements pipelined behind were sent to it. Their
 * answers come from a session no longer linked ("got packet '1' from
 * server when not linked" in PgBouncer's log) and are dropped: postgres.js
 * waits for them for good on that connection. The write answers as it
 * does without the pooler (nothing was written: the tables' guard refuses
 * the store's statements outside its transaction), within
 * `connectionWaitMs`, and the connection is closed and opened again rather
 * than kept from the pool: the next write on a pool of one answers.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import { BusyError } from "../../store/busy_error.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  processPostgres,
  startPgBouncer,
} from "../../support/postgres_server.ts";
import { pgbouncerAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { cancelOnceRunning, sleepingQuery, throughRelay } from "./_cut.ts";

const NAME = "pgbouncer_begin_cut";
const SLEEP = "SELECT pg_sleep(5); ";

Deno.test({
  name:
    "PostgresStore through PgBouncer in transaction mode: a write whose BEGIN a cancel cut answers that nothing was written within connectionWaitMs, and its connection is opened again, not kept from the pool",
  ignore: !await pgbouncerAvailable(),
  // The relay runs in this process, its sockets closing after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(60_000, async () => {
    const { server, missing } = await processPostgres();
    if (server === null) throw new Error(missing);
    const bouncer = await startPgBouncer(server, {
      mode: "transaction",
      poolSize: 2,
    });
    let armed = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    // Another session locks the intents table as the flight goes: the
    // statements behind its cut BEGIN wait to be parsed, so their answers
    // come after PgBouncer flushed the BEGIN's and unlinked the session.
    let letGo = () => {};
    let holder: Promise<unknown> = Promise.resolve();
    const lockIntents = (admin: postgres.Sql, schema: string) =>
      new Promise<void>((locked) => {
        const heldUntil = new Promise<void>((resolve) => letGo = resolve);
        holder = admin.begin(async (tx) => {
          await tx.unsafe(
            `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
          );
          locked();
          await heldUntil;
        });
      });
    try {
      // The client's flight goes through a relay that puts a sleep before
      // its first query (the BEGIN): a cancel then cuts it before it ran.
      // One connection: a connection kept from the pool leaves none.
      await throughRelay({
        max: 1,
        name: NAME,
        url: bouncer.url,
        prepare: false,
      }, ({ admin, schema }) => (text) => {
        if (!armed) return Promise.resolve();
        const rewritten = sleepingQuery(
          text,
          SLEEP,
          (query) => query.startsWith("BEGIN"),
        );
        if (rewritten === undefined) return Promise.resolve();
        armed = false;
        return lockIntents(admin, schema).then(() => {
          cancel = cancelOnceRunning(admin, NAME, SLEEP);
          return rewritten;
        });
      }, async ({ admin, schema, sql }) => {
        const other = new PostgresStore(admin, { schema });
        const waitMs = 1_000;
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: waitMs,
        });
        const read = await store.createIntent({
          id: "pi_1",
          state: "authorized",
          hold: "pending",
        });
        armed = true;
        const started = performance.now();
        const answer = await store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: read.version,
          at: 0,
        }).then(() => null, (error: Error) => error);
        const took = performance.now() - started;
        letGo();
        await holder;
        assert.ok(await cancel, "the cancel cut the flight's BEGIN");
        assert.ok(answer instanceof BusyError, String(answer));
        assert.match(answer.message, /nothing was written; retry$/);
        assert.ok(took < waitMs + 500, `the write took ${Math.round(took)} ms`);
        assert.equal((await other.getIntent("pi_1"))?.state, "authorized");
        // The check's late answers reach the pooler, which drops them.
        await new Promise((resolve) => setTimeout(resolve, 300));
        // The pool is whole: the next calls get a connection and answer.
        await store.createIntent({ id: "pi_3", state: "authorized" });
        assert.equal((await store.getIntent("pi_3"))?.state, "authorized");
        assert.equal((await other.getIntent("pi_3"))?.state, "authorized");
      });
    } finally {
      await bouncer.stop();
    }
  }),
});
