/**
 * PostgresStore after the server ended connections of its pool in the
 * middle of a query (`pg_terminate_backend`, a fast shutdown): postgres.js
 * 3.4.9 keeps the server's goodbye ("terminating connection due to
 * administrator command", FATAL) of such a connection and rejects with it
 * the request that opens that connection again, once it is open, before
 * that request is sent. A read so met answers all the same, and a write's
 * connection so met is not lost to the pool. And where the connection so
 * ended was a write's, under its flight, the store takes that goodbye
 * itself: the client's next query is not rejected with it.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

// The server is a process of the run, started on first use: here, with no
// time limit, not in the first test's 30 s (its initdb and start took 9 to
// 14 s of them with six runs at once, load 7).
Deno.test({
  name: "PostgresStore after kept goodbyes: the server is up",
  ignore,
  fn: async () => void await postgresUrl(),
});

/**
 * A store on a fresh schema with intent `a`, its client's `max`
 * connections named `name` so that the test can end them, and an admin
 * client of its own.
 */
async function setUp(
  name: string,
  max: number,
  fetchTypes = true,
  prepare = true,
) {
  const admin = await connect(2);
  const schema = freshSchema();
  const setup = new PostgresStore(admin, { schema });
  await setup.migrate();
  await setup.createIntent({ id: "a", state: "authorized", hold: "pending" });
  let closes = 0;
  const sql = postgres(await postgresUrl(), {
    max,
    onnotice: () => {},
    onclose: () => void closes++,
    fetch_types: fetchTypes,
    prepare,
    max_lifetime: null,
    // As main.ts: within a second of the server's return, however many
    // connects failed in a row (postgres.js's own waits 20 s after 8).
    backoff: reconnectBackoffS,
    connection: { application_name: name },
  });
  const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
  return {
    schema,
    admin,
    sql,
    store,
    /** Ends every session of the store's client; how many there were. */
    async end(): Promise<number> {
      const [row] = await admin<{ n: number }[]>`
        SELECT count(pg_terminate_backend(pid))::int AS n
        FROM pg_stat_activity WHERE application_name = ${name}`;
      return row!.n;
    },
    /**
     * Until `n` more connections of the store's client closed than at
     * `from` (`closed()` with no argument: how many closed so far).
     * postgres.js 3.4.9 loses a query handed to a connection between its
     * socket's error and its close, which is not this file's case.
     */
    async closed(from?: number, n = 1): Promise<number> {
      if (from === undefined) return closes;
      for (let tries = 0; tries < 250 && closes < from + n; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(closes >= from + n, `${closes - from} of ${n} closes seen`);
      return closes;
    },
    /** Until `n` sessions of the store's client wait on a lock. */
    async waitingOnLock(n: number): Promise<void> {
      for (let tries = 0; tries < 250; tries++) {
        const [row] = await admin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = ${name} AND wait_event_type = 'Lock'`;
        if (row!.n >= n) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`${n} reads never waited on the lock`);
    },
    async tearDown() {
      store.close();
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

/** A read's state, or its error's message. */
function stateOf(store: PostgresStore, id: string): Promise<string> {
  return store.getIntent(id).then(
    (intent) => intent?.state ?? "missing",
    (error: Error) => error.message,
  );
}

/** One query of the client's own ended by the server while it runs, and its connection's close seen. */
async function endedMidQuery(
  sql: postgres.Sql,
  admin: postgres.Sql,
  name: string,
  closed: (from?: number, n?: number) => Promise<number>,
): Promise<void> {
  const from = await closed();
  const running = sql`SELECT pg_sleep(30) AS mid_query`.execute().then(
    () => "answered",
    (error: { code?: string }) => String(error.code),
  );
  // Its session once the server runs it, ended.
  for (let tries = 0; tries < 250; tries++) {
    const [row] = await admin<{ n: number }[]>`
      SELECT count(pg_terminate_backend(pid))::int AS n
      FROM pg_stat_activity
      WHERE application_name = ${name} AND state = 'active'
        AND query LIKE '%mid_query%'`;
    if (row!.n > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.notEqual(await running, "answered");
  await closed(from);
}

Deno.test({
  name:
    "PostgresStore answers reads sent right after the server ended every connection of its pool under reads: the goodbye postgres.js keeps for each is not their answer",
  ignore,
  fn: timeout(30_000, async () => {
    const max = 4;
    // Unprepared, every read is described first and has its connection to
    // itself: a prepared one may be sent behind another on a busy
    // connection, there behind the lock, while the store's last probe of
    // the server after the previous round holds the idle one.
    const { schema, admin, sql, store, end, waitingOnLock, closed, tearDown } =
      await setUp("relayer_kept_reads", max, true, false);
    const blocker = await admin.reserve();
    try {
      // Every connection of the pool open.
      await Promise.all(Array.from({ length: max }, () => sql`SELECT 1`));
      for (let round = 0; round < 3; round++) {
        // A read on each connection, held by a lock while the server ends
        // their sessions.
        await blocker.unsafe("BEGIN");
        await blocker.unsafe(
          `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
        );
        const held = Array.from({ length: max }, () => stateOf(store, "a"));
        await waitingOnLock(max);
        const from = await closed();
        assert.equal(await end(), max);
        await blocker.unsafe("ROLLBACK");
        // Each read the end met is asked once more, on a connection opened
        // anew, and answers (before, each failed as the connection lost).
        assert.deepEqual(
          await Promise.all(held),
          Array(max).fill("authorized"),
        );
        await closed(from, max);
        // Each connection is opened again by whichever asks first.
        const next = await Promise.all(
          Array.from({ length: max }, () => stateOf(store, "a")),
        );
        assert.deepEqual(next, Array(max).fill("authorized"));
      }
    } finally {
      blocker.release();
      await tearDown();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore answers a read on a client whose one connection the server ended under another query of the client's",
  ignore,
  fn: timeout(30_000, async () => {
    const NAME = "relayer_kept_app";
    const { admin, sql, store, closed, tearDown } = await setUp(NAME, 1);
    try {
      assert.equal(await stateOf(store, "a"), "authorized");
      for (let round = 0; round < 3; round++) {
        await endedMidQuery(sql, admin, NAME, closed);
        assert.equal(await stateOf(store, "a"), "authorized");
      }
    } finally {
      await tearDown();
    }
  }),
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `PostgresStore lands a write on a client whose one connection the server ended under another query of the client's, and the pool serves the read after it (fetch_types: ${fetchTypes})`,
    ignore,
    fn: timeout(30_000, async () => {
      const NAME = "relayer_kept_write";
      const { admin, sql, store, closed, tearDown } = await setUp(
        NAME,
        1,
        fetchTypes,
      );
      try {
        for (let round = 1; round <= 3; round++) {
          await endedMidQuery(sql, admin, NAME, closed);
          const count = await store.admit({ count: "a/settle", now: 1 }).then(
            String,
            (error: Error) => error.message,
          );
          assert.equal(count, String(round));
          await endedMidQuery(sql, admin, NAME, closed);
          const created = await store.createIntent({
            id: `b${round}`,
            state: "authorized",
            hold: "pending",
          }).then((intent) => intent.state, (error: Error) => error.message);
          assert.equal(created, "authorized");
          assert.equal(await stateOf(store, `b${round}`), "authorized");
        }
      } finally {
        await tearDown();
      }
    }),
  });
}

Deno.test({
  name:
    "PostgresStore takes the goodbye postgres.js keeps for a write's connection the server ended under its flight: the client's next queries are not rejected with it",
  ignore,
  fn: timeout(30_000, async () => {
    const NAME = "relayer_kept_flight";
    const max = 2;
    const { schema, admin, sql, store, closed, waitingOnLock, tearDown } =
      await setUp(NAME, max);
    const blocker = await admin.reserve();
    try {
      // Both connections open: after the write's is ended, the client's
      // next two queries find one open and one closed, which the second
      // opens again, unless the store's probes (`SELECT 1`, one per
      // connection of the pool, sent as the write failed) opened it first
      // and took the server's goodbye kept for it.
      await Promise.all(Array.from({ length: max }, () => sql`SELECT 1`));
      await blocker.unsafe("BEGIN");
      await blocker.unsafe(
        `SELECT 1 FROM "${schema}".intents WHERE id = 'a' FOR UPDATE`,
      );
      const from = await closed();
      const write = store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1000,
      }).then(() => "written", (error: Error) => error.message);
      // The flight waits on the row lock (its lock_timeout is 1.5 s), and
      // its session alone is ended, mid-flight: its goodbye is kept.
      await waitingOnLock(1);
      const [ended] = await admin<{ n: number }[]>`
        SELECT count(pg_terminate_backend(pid))::int AS n
        FROM pg_stat_activity
        WHERE application_name = ${NAME} AND wait_event_type = 'Lock'`;
      assert.equal(ended!.n, 1);
      await blocker.unsafe("ROLLBACK");
      assert.match(await write, /lost the connection during the write/);
      await closed(from);
      // Until the pool is open again (2 s at most): the store's probes.
      for (let tries = 0; tries < 100; tries++) {
        const [row] = await admin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = ${NAME}`;
        if (row!.n >= max) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const own = await Promise.all(
        Array.from({ length: max }, () =>
          sql`SELECT ${1}::int AS one`.then(
            () => "answered",
            (error: Error) => error.message,
          )),
      );
      assert.deepEqual(own, Array(max).fill("answered"));
      assert.equal(await stateOf(store, "a"), "authorized");
    } finally {
      blocker.release();
      await tearDown();
    }
  }),
});
