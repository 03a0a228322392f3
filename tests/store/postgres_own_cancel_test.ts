/**
 * PostgresStore's cancel of its own read past `connectionWaitMs` reaches
 * the server on a connection of its own (postgres.js 3.4.9 sends the
 * CancelRequest, the backend's pid and key, over a new connection), and
 * cancels whatever that backend runs when it arrives: once the read has
 * ended meanwhile, the statement its connection runs next. A write whose
 * statement it cancelled must not tell the operator to look for another
 * session's `pg_cancel_backend`.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../store/busy_error.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { relayed } from "./_cut.ts";
import { waitingOnLock } from "./_waiting_on_lock.ts";

/** A CancelRequest: length 16, code 80877102 (0x04D2162E), pid, key. */
function isCancelRequest(text: string): boolean {
  return text.length === 16 &&
    [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e].every((byte, at) =>
      text.charCodeAt(at) === byte
    );
}

/** What {@linkcode withHeldCancel} hands its test. */
interface HeldCancel {
  /** The store, on one connection through the relay, bound at 1000 ms. */
  store: PostgresStore;
  /** Another store on the store's client and schema (a store made per request, or per tenant), bound alike. */
  beside: PostgresStore;
  schema: string;
  /** A client of its own (one connection), to watch and cancel the store's session. */
  watcher: postgres.Sql;
  /** A session of its own, which holds the locks the store's statements wait on. */
  locker: postgres.ReservedSql;
  /** Settled once the store's cancel reached the relay. */
  cancelSent: Promise<void>;
  /** Lets the cancel held by the relay go on to the server. */
  letCancelGo: () => void;
  /** The pid of the store's session once `what` (its statement) waits on a lock. */
  waitingOn: (what: string) => Promise<number>;
  /** `performance.now` as it was, put back after the test. */
  realNow: () => number;
}

/**
 * A test body on a fresh schema and a store whose sessions are named
 * `name`, through a relay that holds each cancel the store sends until
 * the test lets it go (the delay of a cancel's own connection, a TCP
 * connect and the server's fork, made long enough to see). Whether the
 * test passes or throws, the cancel is let go, the locker's transaction
 * rolled back, `performance.now` put back, the clients ended, the schema
 * dropped and the relay closed.
 */
async function withHeldCancel(
  name: string,
  test: (held: HeldCancel) => Promise<void>,
): Promise<void> {
  const stop = new AbortController();
  let letCancelGo!: () => void;
  const cancelHeld = new Promise<void>((resolve) => letCancelGo = resolve);
  let cancelSeen!: () => void;
  const cancelSent = new Promise<void>((resolve) => cancelSeen = resolve);
  const through = relayed(await postgresUrl(), async (text) => {
    if (!isCancelRequest(text)) return;
    cancelSeen();
    await cancelHeld;
  }, stop.signal);
  const admin = await connect(2);
  const watcher = await connect(1);
  const sql = postgres(through, {
    max: 1,
    onnotice: () => {},
    max_lifetime: null,
    connection: { application_name: name },
  });
  const schema = freshSchema();
  const locker = await admin.reserve();
  const realNow = performance.now.bind(performance);
  const waitingOn = (what: string) => waitingOnLock(watcher, name, what);
  try {
    await new PostgresStore(admin, { schema }).migrate();
    const store = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
    const beside = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
    await test({
      store,
      beside,
      schema,
      watcher,
      locker,
      cancelSent,
      letCancelGo,
      waitingOn,
      realNow,
    });
  } finally {
    performance.now = realNow;
    letCancelGo();
    await locker.unsafe("ROLLBACK").catch(() => {});
    locker.release();
    await sql.end();
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    await watcher.end();
    stop.abort();
  }
}

/** Opens a transaction on the locker that holds the whole intents table. */
async function lockIntents({ locker, schema }: HeldCancel): Promise<void> {
  await locker.unsafe("BEGIN");
  await locker.unsafe(
    `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
  );
}

/** Opens a transaction on the locker that holds intent pi_1's row. */
async function lockRow({ locker, schema }: HeldCancel): Promise<void> {
  await locker.unsafe("BEGIN");
  await locker.unsafe(
    `SELECT 1 FROM "${schema}".intents WHERE id = 'pi_1' FOR UPDATE`,
  );
}

/** What `promise` rejects with, or null once it resolves. */
function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => null, (error: unknown) => error);
}

Deno.test({
  name:
    "PostgresStore: a write whose statement its own cancel of a slow read hit (the read ended before the cancel arrived) says so, not that another session cancelled it",
  ignore: !postgresAvailable,
  // The relay runs in this process (_cut.ts's tests run it in a child):
  // its sockets close after the test, as the abort reaches them.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withHeldCancel("own_cancel", async (held) => {
      const { store, locker, letCancelGo, waitingOn } = held;
      const read = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      // The read, held up by a table lock past its bound: cancelled.
      await lockIntents(held);
      await assert.rejects(
        store.getIntent("pi_1"),
        /did not answer the store's .* within 1000ms/,
      );
      // The cancel of it is on its way, held by the relay.
      await held.cancelSent;
      // The lock goes before the cancel arrives: the read ends, and the
      // connection takes the next statement, a write's, which waits for
      // the intent's row (held now, by the same session as before).
      await locker.unsafe("ROLLBACK");
      await lockRow(held);
      const write = errorOf(store.beginBroadcast("pi_1", read.version, 1));
      // The write's statement waits for the row.
      await waitingOn("the write");
      letCancelGo();
      const error = await write;
      await locker.unsafe("ROLLBACK");
      assert.ok(error instanceof BusyError, String(error));
      assert.match(
        error.message,
        /^Cannot start a broadcast for pi_1 as a cancel cut its statement \(canceling statement due to user request\): this store cancelled a read of its own that ran past connectionWaitMs \d+ms before, and that cancel, reaching the server after the read ended, cuts the statement the read's connection runs next; else another session's pg_cancel_backend did \(see pg_stat_activity\): nothing was written; retry$/,
      );
      // Nothing of the write landed.
      assert.deepEqual(await store.getIntent("pi_1"), read);

      // Past OWN_CANCEL_MS (60 s) since, a cancel by request is another
      // session's: the monotonic clock the store reads, stepped past it.
      performance.now = () => held.realNow() + 61_000;
      await lockRow(held);
      const later = errorOf(store.beginBroadcast("pi_1", read.version, 1));
      // The write's statement waits for the row, and is cancelled.
      const [cancelled] = await held.watcher`
        SELECT pg_cancel_backend(${await waitingOn("the write")}) AS done`;
      assert.equal(cancelled?.done, true);
      const other = await later;
      await locker.unsafe("ROLLBACK");
      assert.ok(other instanceof BusyError, String(other));
      assert.match(
        other.message,
        /^Cannot start a broadcast for pi_1 as another session cancelled its statement \(canceling statement due to user request: pg_cancel_backend; see pg_stat_activity\): nothing was written; retry$/,
      );
      assert.deepEqual(await store.getIntent("pi_1"), read);
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a read whose statement its own cancel of a slow read hit says so, and one another session cancels past OWN_CANCEL_MS since says that",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withHeldCancel("own_cancel_read", async (held) => {
      const { store, locker, waitingOn } = held;
      await store.createIntent({ id: "pi_1", state: "authorized" });
      // A read held up by a table lock past its bound: cancelled, the
      // cancel held by the relay.
      await lockIntents(held);
      await assert.rejects(
        store.getIntent("pi_1"),
        /did not answer the store's .* within 1000ms/,
      );
      await held.cancelSent;
      // The first read ends; the next waits on the lock, and the cancel
      // arrives then.
      await locker.unsafe("ROLLBACK");
      await lockIntents(held);
      const read = errorOf(store.getIntent("pi_1"));
      await waitingOn("the read");
      held.letCancelGo();
      const error = await read;
      await locker.unsafe("ROLLBACK");
      assert.ok(error instanceof Error, String(error));
      assert.match(
        error.message,
        /^The store's read of intent pi_1 failed as a cancel cut its statement \(canceling statement due to user request\): this store cancelled a read of its own that ran past connectionWaitMs \d+ms before, .*: nothing was read; retry$/,
      );

      // Past OWN_CANCEL_MS (60 s) since, a cancel by request is another
      // session's.
      performance.now = () => held.realNow() + 61_000;
      await lockIntents(held);
      const later = errorOf(store.getIntent("pi_1"));
      await held.watcher`SELECT pg_cancel_backend(${await waitingOn(
        "the read",
      )})`;
      const other = await later;
      await locker.unsafe("ROLLBACK");
      assert.ok(other instanceof Error, String(other));
      assert.equal(
        other.message,
        "The store's read of intent pi_1 failed as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was read; retry",
      );
    });
  },
});

Deno.test({
  name:
    "PostgresStore: a write whose statement the cancel of a slow read by another store on the same client hit (a store per tenant or per request, one client) says so, not that another session cancelled it",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withHeldCancel("own_cancel_beside", async (held) => {
      const { store, beside, locker, letCancelGo, waitingOn } = held;
      const read = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      // The other store's read, held up by a table lock past its bound:
      // cancelled, the cancel held by the relay.
      await lockIntents(held);
      await assert.rejects(
        beside.getIntent("pi_1"),
        /did not answer the store's .* within 1000ms/,
      );
      await held.cancelSent;
      // The read ends; the client's one connection takes this store's
      // write, which waits for the intent's row when the cancel arrives.
      await locker.unsafe("ROLLBACK");
      await lockRow(held);
      const write = errorOf(store.beginBroadcast("pi_1", read.version, 1));
      await waitingOn("the write");
      letCancelGo();
      const error = await write;
      await locker.unsafe("ROLLBACK");
      assert.ok(error instanceof BusyError, String(error));
      // Before: "… as another session cancelled its statement (canceling
      // statement due to user request: pg_cancel_backend; see
      // pg_stat_activity) …": no session had.
      assert.match(
        error.message,
        /^Cannot start a broadcast for pi_1 as a cancel cut its statement \(canceling statement due to user request\): another store on the same postgres\.js client cancelled a read of its own that ran past connectionWaitMs \d+ms before, and that cancel, reaching the server after the read ended, cuts the statement the read's connection runs next; else another session's pg_cancel_backend did \(see pg_stat_activity\): nothing was written; retry$/,
      );
      assert.deepEqual(await store.getIntent("pi_1"), read);
    });
  },
});
