/**
 * PostgresStore when a cancel (`pg_cancel_backend`, a `statement_timeout`)
 * cuts a write's `COMMIT` before it ended the transaction: the session is
 * left inside the write's transaction, failed ("idle in transaction
 * (aborted)"), and a connection handed back so fails the next call on it
 * (25P02), blamed on "something else using this client". The write rolls
 * its transaction back before it hands the connection back, also when it
 * already answered, past `connectionWaitMs`, that it may have landed, and
 * when the cut `COMMIT` is the one of the transaction that prepares a
 * statement refused as stale again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BusyError } from "../../store/busy_error.ts";
import type { Sql } from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { cancelOnceRunning, sleepingQuery, throughRelay } from "./_cut.ts";

const NAME = "commit_cancelled";
const SLEEP = "SELECT pg_sleep(5); ";

/**
 * The chunk with the flight's `COMMIT` (a simple query, 'Q', among the
 * flight's messages) put behind `SLEEP`: a cancel then cuts that query
 * inside the write's transaction, before its `COMMIT` ran, as one that
 * reaches the server as the `COMMIT` begins does.
 */
function sleepingCommit(text: string): Uint8Array | undefined {
  return sleepingQuery(text, SLEEP, (query) => query === "COMMIT\u0000");
}

/**
 * The chunk with the first `ROLLBACK` behind the cut `COMMIT` put behind
 * a statement the failed transaction refuses (25P02), which skips it: the
 * `ROLLBACK` fails, and the session stays inside the transaction, as a
 * cancel that cut the `ROLLBACK` leaves it.
 */
function failingRollback(text: string): Uint8Array | undefined {
  return sleepingQuery(
    text,
    "SELECT 1; ",
    (query) => query === "ROLLBACK\u0000",
  );
}

/** The state of the session named `NAME` (`"idle"`: outside any transaction). */
async function sessionState(admin: Sql): Promise<unknown> {
  const [session] = await admin`
    SELECT state FROM pg_stat_activity WHERE application_name = ${NAME}`;
  return session?.state;
}

/**
 * The next calls through `store` run: `pi_1` (written before the cut) is
 * read, and `pi_3` written, as `other` reads it.
 */
async function nextCallsRun(
  store: PostgresStore,
  other: PostgresStore,
): Promise<void> {
  assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
  await store.createIntent({ id: "pi_3", state: "authorized" });
  assert.equal((await other.getIntent("pi_3"))?.state, "authorized");
}

/** The tests' options: the relay runs in this process, its sockets closing as the abort reaches them, after the test. */
const RELAYED = {
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
} as const;

/** One connection: the next call goes on the write's. */
const ONE = { max: 1, name: NAME } as const;

Deno.test({
  name:
    "PostgresStore: a write whose COMMIT a cancel cut lands nothing and hands its connection back outside any transaction: the next read on it answers",
  ...RELAYED,
  async fn() {
    let armed = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay(ONE, ({ admin }) => (text) => {
      if (!armed) return Promise.resolve();
      const rewritten = sleepingCommit(text);
      if (rewritten === undefined) return Promise.resolve();
      armed = false;
      // Once the COMMIT's query sleeps: cancelled.
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return Promise.resolve(rewritten);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, { schema });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_2",
        state: "authorized",
        hold: "pending",
      }).then(() => null, (error: Error) => error);
      assert.ok(await cancel, "the cancel cut the flight's COMMIT");
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
      assert.equal(await other.getIntent("pi_2"), null);
      assert.equal(await sessionState(admin), "idle");
      // The next calls on the same connection run.
      await nextCallsRun(store, other);
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write answered past connectionWaitMs, whose COMMIT a cancel then cut, hands its connection back outside any transaction: the next read on it answers",
  ...RELAYED,
  async fn() {
    let armed = false;
    await throughRelay(ONE, () => (text) => {
      if (!armed) return Promise.resolve();
      const rewritten = sleepingCommit(text);
      if (rewritten === undefined) return Promise.resolve();
      armed = false;
      return Promise.resolve(rewritten);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 500 });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      // The flight is not answered within the bound (its COMMIT sleeps).
      await assert.rejects(
        store.createIntent({ id: "pi_2", state: "authorized" }),
        /did not answer the write within 500ms: it may have landed or not/,
      );
      // Then a cancel cuts the COMMIT's query, inside the transaction.
      assert.ok(
        await cancelOnceRunning(admin, NAME, SLEEP),
        "the cancel cut the flight's COMMIT",
      );
      let state: unknown = "active";
      for (let tries = 0; tries < 100 && state === "active"; tries++) {
        await new Promise((r) => setTimeout(r, 20));
        state = await sessionState(admin);
      }
      assert.equal(await other.getIntent("pi_2"), null);
      // The next calls on the same connection run.
      await nextCallsRun(store, other);
      assert.equal(await sessionState(admin), "idle");
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write refused as stale, whose preparing again a cancel cut at its COMMIT, hands its connection back outside any transaction: the next read on it answers",
  ...RELAYED,
  async fn() {
    let armed = false;
    let commits = 0;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay(ONE, ({ admin }) => (text) => {
      if (!armed) return Promise.resolve();
      const rewritten = sleepingCommit(text);
      // The flight's COMMIT goes as it was; the next one (the
      // transaction that prepares the stale statement again) sleeps.
      if (rewritten === undefined || ++commits < 2) return Promise.resolve();
      armed = false;
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return Promise.resolve(rewritten);
    }, async ({ admin, schema, sql }) => {
      const store = new PostgresStore(sql, { schema });
      assert.equal(await store.admit({ count: "job_1", now: 1 }), 1);
      // What the count returns changes type: its prepared statement is
      // refused as stale, and prepared again after the flight.
      await admin.unsafe(
        `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
      );
      armed = true;
      const answer = await store.admit({ count: "job_1", now: 2 }).then(
        () => null,
        (error: Error) => error,
      );
      assert.ok(await cancel, "the cancel cut the COMMIT of preparing again");
      // The cancel's answer, busy: nothing was written, and the delivery
      // is retried as busy, not as the store failing.
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(
        answer.message,
        /^Cannot admit a delivery as another session cancelled its statement .*: nothing was written; retry$/,
      );
      // The next calls on the same connection run.
      assert.equal(await store.deliveries("job_1"), 1);
      assert.equal(await store.admit({ count: "job_2", now: 3 }), 1);
      assert.equal(await sessionState(admin), "idle");
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write whose COMMIT a cancel cut, and each of whose three ROLLBACKs failed, closes its connection rather than hand it back inside the failed transaction: the next read answers",
  ...RELAYED,
  async fn() {
    let armed = false;
    let rollbacks = 0;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay(ONE, ({ admin }) => (text) => {
      if (!armed) return Promise.resolve();
      const commit = sleepingCommit(text);
      if (commit !== undefined) {
        cancel = cancelOnceRunning(admin, NAME, SLEEP);
        return Promise.resolve(commit);
      }
      // Each ROLLBACK behind it fails.
      const rollback = failingRollback(text);
      if (rollback === undefined) return Promise.resolve();
      if (++rollbacks === 3) armed = false;
      return Promise.resolve(rollback);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, { schema });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_2",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.ok(await cancel, "the cancel cut the flight's COMMIT");
      assert.equal(rollbacks, 3);
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
      assert.equal(await other.getIntent("pi_2"), null);
      // The next calls, on the pool's one connection, run.
      await nextCallsRun(store, other);
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write whose COMMIT a cancel cut, and whose first ROLLBACK after it failed too, sends the ROLLBACK again before the connection goes back: the next read on it answers",
  ...RELAYED,
  async fn() {
    let armed = false;
    let rollbackArmed = false;
    let refused = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay(ONE, ({ admin }) => (text) => {
      if (rollbackArmed) {
        // The first ROLLBACK behind the cut COMMIT fails.
        const rewritten = failingRollback(text);
        if (rewritten === undefined) return Promise.resolve();
        rollbackArmed = false;
        refused = true;
        return Promise.resolve(rewritten);
      }
      if (!armed) return Promise.resolve();
      const rewritten = sleepingCommit(text);
      if (rewritten === undefined) return Promise.resolve();
      armed = false;
      rollbackArmed = true;
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return Promise.resolve(rewritten);
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, { schema });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_2",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.ok(await cancel, "the cancel cut the flight's COMMIT");
      assert.ok(refused, "the first ROLLBACK after it failed");
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
      assert.equal(await other.getIntent("pi_2"), null);
      assert.equal(await sessionState(admin), "idle");
      // The next calls on the same connection run.
      await nextCallsRun(store, other);
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write whose COMMIT a cancel cut, and whose ROLLBACK after it goes unanswered past connectionWaitMs, answers within the bound, and the next calls run (its connection closed and opened again, as its session's state is unknown)",
  ...RELAYED,
  async fn() {
    let armed = false;
    let rollbackArmed = false;
    let held = false;
    let letRollbackGo!: () => void;
    const rollbackHeld = new Promise<void>((r) => letRollbackGo = r);
    let cancelled!: (cancel: Promise<boolean>) => void;
    const cancel = new Promise<boolean>((r) => cancelled = r);
    await throughRelay(ONE, ({ admin }) => async (text) => {
      if (rollbackArmed && text.includes("ROLLBACK\u0000")) {
        // The ROLLBACK behind the cut COMMIT is held (a server or a link
        // that stopped answering), until the test lets it go.
        rollbackArmed = false;
        held = true;
        await rollbackHeld;
        return;
      }
      if (!armed) return;
      const rewritten = sleepingCommit(text);
      if (rewritten === undefined) return;
      armed = false;
      rollbackArmed = true;
      cancelled(cancelOnceRunning(admin, NAME, SLEEP));
      return rewritten;
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 500 });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const writing = store.createIntent({ id: "pi_2", state: "authorized" })
        .then(() => null, (error: Error) => error);
      assert.ok(await cancel, "the cancel cut the flight's COMMIT");
      const cutAt = performance.now();
      // Answered within the bound, not once the ROLLBACK answers.
      const answer = await Promise.race([
        writing,
        new Promise<"hung">((r) => setTimeout(() => r("hung"), 3_000)),
      ]);
      letRollbackGo();
      assert.ok(held, "the ROLLBACK after the cut COMMIT was held");
      assert.notEqual(answer, "hung", "the write answered within 3 s");
      assert.ok(performance.now() - cutAt < 2_500);
      assert.ok(answer instanceof BusyError, String(answer));
      assert.equal(await other.getIntent("pi_2"), null);
      // Its connection closed (the session's state unknown) and opened
      // again: the next calls run, outside any transaction.
      await nextCallsRun(store, other);
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write whose COMMIT a cancel cut, and whose ROLLBACK did not answer within connectionWaitMs, closes its connection rather than hand it back once a failed ROLLBACK answers: the next read answers",
  ...RELAYED,
  async fn() {
    const waitMs = 1_000;
    let armed = false;
    let cutCommit = true;
    let rollbacks = 0;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay(ONE, ({ admin }) => (text) => {
      if (!armed) return Promise.resolve();
      const commit = cutCommit ? sleepingCommit(text) : undefined;
      if (commit !== undefined) {
        cutCommit = false;
        cancel = cancelOnceRunning(admin, NAME, SLEEP);
        return Promise.resolve(commit);
      }
      // Each ROLLBACK fails, and the first goes on only past the bound.
      const rollback = failingRollback(text);
      if (rollback === undefined) return Promise.resolve();
      if (++rollbacks === 3) armed = false;
      if (rollbacks > 1) return Promise.resolve(rollback);
      return new Promise((resolve) =>
        setTimeout(() => resolve(rollback), waitMs + 500)
      );
    }, async ({ admin, schema, sql }) => {
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: waitMs,
      });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_2",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.ok(await cancel, "the cancel cut the flight's COMMIT");
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
      // The ROLLBACK held past the bound reaches the server, and fails.
      await new Promise((resolve) => setTimeout(resolve, waitMs + 1_000));
      assert.equal(await other.getIntent("pi_2"), null);
      // The next calls, on the pool's one connection, run.
      await nextCallsRun(store, other);
    });
  },
});
