/**
 * PostgresStore when the server ends its connection in the middle of a
 * write (`pg_terminate_backend`, as a restart or a failover does), on a
 * real server: every write answers, lands whole or not at all, and the
 * store goes on without crashing the process.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { BusyError, type DeadLetter } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  afterFirstRead,
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { waitingOnLock } from "./_waiting_on_lock.ts";

const ignore = !postgresAvailable;
const NAME = "relayer_faults";

// The server is a process of the run, started on first use: here, with no
// time limit, not in the first test's 30 s (its initdb and start took 24 s
// of them with five test files running at once, and the test timed out).
Deno.test({
  name: "PostgresStore faults: the server is up",
  ignore,
  fn: async () => void await postgresUrl(),
});

const lease = { owner: "d1", ttlMs: 30_000, now: 1000, keep: true };
const claim = { key: "sig-1", now: 1000, expiresAt: 999_999 };
const letter: DeadLetter = {
  jobId: "a/settle",
  intentId: "a",
  deliveries: 5,
  cause: "exhausted",
  reason: "no luck after 5 deliveries",
  resolution: "sent to review",
  lastError: "rpc timeout",
  poisonedAt: 1000,
};

/** Rejects with "no answer" if `promise` has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${ms}ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A store on a fresh schema, its client's connections named so that the
 * test can find them, and an admin client of its own.
 */
async function setUp(
  options: {
    fetchTypes?: boolean;
    connectionWaitMs?: number;
    /** Opens each connection's socket (postgres.js's `socket` option). */
    socket?: () => Promise<net.Socket>;
  } = {},
) {
  const admin = await connect(2);
  const schema = freshSchema();
  await new PostgresStore(admin, { schema }).migrate();
  // `socket` is postgres.js's, not in its types.
  const sql = postgres(await postgresUrl(), {
    max: 1, // a connection handed back broken would be the next one used
    onnotice: () => {},
    fetch_types: options.fetchTypes ?? true,
    connection: { application_name: NAME },
    ...(options.socket ? { socket: options.socket } : {}),
  } as postgres.Options<Record<string, never>>);
  const store = new PostgresStore(sql, {
    schema,
    connectionWaitMs: options.connectionWaitMs ?? 3000,
  });
  const table = (name: string) => `"${schema}".${name}`;
  return {
    schema,
    admin,
    sql,
    store,
    table,
    async tearDown() {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

/** Rows for another session to lock: an expired replay record, and an old letter of `a`. */
async function lockableRows(
  admin: postgres.Sql,
  table: (name: string) => string,
): Promise<void> {
  await admin.unsafe(
    `INSERT INTO ${table("claims")} VALUES ('sig-1', 0);
     INSERT INTO ${table("dead_letters")}
       (job_id, intent_id, deliveries, cause, reason, resolution, last_error, poisoned_at)
       VALUES ('a/settle', 'a', 1, 'declared', 'r', 'old', 'e', 0)`,
  );
}

type Store = PostgresStore;

/** Each write path, the row another session locks to hold it up, and what it wrote if it landed. */
const PATHS: {
  name: string;
  blocks: (table: (name: string) => string) => string;
  write: (store: Store) => Promise<unknown>;
}[] = [
  {
    name: "transition with lease and replay record (held at the check)",
    blocks: (t) => `SELECT 1 FROM ${t("intents")} WHERE id = 'a' FOR UPDATE`,
    write: (store) =>
      store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1000,
      }, { lease, claim }),
  },
  {
    name: "transition to review with its dead letter (held at the letter)",
    blocks: (t) =>
      `SELECT 1 FROM ${t("dead_letters")} WHERE job_id = 'a/settle' FOR UPDATE`,
    write: async (store) => {
      const moved = await store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 500,
      });
      return await store.transition("a", {
        from: "settling",
        to: "needs_review",
        version: moved.version,
        at: 1000,
        deadLetter: letter,
      }, { lease, claim });
    },
  },
  {
    name: "putDeadLetter on the intent's version (held at the letter)",
    blocks: (t) =>
      `SELECT 1 FROM ${t("dead_letters")} WHERE job_id = 'a/settle' FOR UPDATE`,
    write: (store) =>
      store.putDeadLetter(letter, { claim, intentVersion: "1" }),
  },
  {
    name: "admit with count and replay record (held at the record)",
    blocks: (t) =>
      `SELECT 1 FROM ${t("claims")} WHERE key = 'sig-1' FOR UPDATE`,
    write: (store) => store.admit({ count: "a/settle", claim, now: 1000 }),
  },
  {
    name: "voidHold (held at the check)",
    blocks: (t) => `SELECT 1 FROM ${t("intents")} WHERE id = 'a' FOR UPDATE`,
    write: (store) => store.voidHold("a"),
  },
];

// Both write paths: the flight, and `sql.begin` (a client made with
// `fetch_types: false`, as through a pooler), which must bound its lock
// waits too.
for (
  const [path, fetchTypes] of PATHS.flatMap((p) =>
    [[p, true], [p, false]] as const
  )
) {
  Deno.test({
    name:
      `PostgresStore fails a write held up by another session's lock within connectionWaitMs with nothing written, and gives its connection back while the lock lasts: ${path.name}${
        fetchTypes ? "" : " (fetch_types: false)"
      }`,
    ignore,
    fn: timeout(30_000, async () => {
      const { admin, store, table, tearDown } = await setUp({
        connectionWaitMs: 1000,
        fetchTypes,
      });
      try {
        await store.createIntent({
          id: "a",
          state: "authorized",
          hold: "pending",
        });
        await lockableRows(admin, table);
        const snapshot = () =>
          admin.unsafe(
            `SELECT (SELECT row_to_json(i) FROM ${
              table("intents")
            } i WHERE id = 'a') AS intent,
                    (SELECT state FROM ${
              table("holds")
            } WHERE intent_id = 'a') AS hold,
                    (SELECT expires_at FROM ${table("claims")}) AS claim,
                    (SELECT resolution FROM ${
              table("dead_letters")
            }) AS letter`,
          );
        const before = await snapshot();
        const blocker = await admin.reserve();
        let locking = false;
        try {
          await blocker.unsafe("BEGIN");
          locking = true;
          await blocker.unsafe(path.blocks(table));
          let settled = false;
          const writing = path.write(store).then(
            () => "written",
            (error: Error) => error,
          ).finally(() => settled = true);
          // Timed from the write seen waiting on the lock: on a loaded
          // machine its reserve, BEGIN and a path's earlier write took up to
          // 700 ms before it. From there the store bounds the lock wait at
          // half of connectionWaitMs (500 ms), and the failed flight's other
          // answers within connectionWaitMs: 1,500 ms at most. Without the
          // bound, the write would wait for the lock to go (5 s below).
          let heldAt = performance.now();
          while (!settled) {
            const asked = performance.now();
            const [waiting] = await admin`
              SELECT 1 FROM pg_stat_activity
              WHERE application_name = ${NAME} AND wait_event_type = 'Lock'`;
            if (waiting) {
              heldAt = asked;
              break;
            }
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          const outcome = await within(writing, 5000);
          const heldMs = performance.now() - heldAt;
          // Busy, as another delivery's lease is: the relayer answers
          // retry, never poison, whatever the delivery's number.
          assert.ok(outcome instanceof BusyError, String(outcome));
          assert.match(
            outcome.message,
            /as another session held a lock it needed for over 500ms \(lock_timeout; see pg_locks and pg_stat_activity\): nothing was written; retry$/,
          );
          assert.ok(heldMs < 1500, `held up for ${Math.round(heldMs)} ms`);
          // The write's connection, the pool's only one, is back while the
          // lock lasts: the store goes on.
          assert.equal(
            await within(store.admit({ count: "c/settle", now: 5 }), 4000),
            1,
          );
          await blocker.unsafe("COMMIT");
          locking = false;
        } finally {
          // A check above that failed leaves the lock to no one: the
          // teardown's DROP SCHEMA would wait on it, and the failure show
          // as the test's time-out.
          if (locking) await blocker.unsafe("ROLLBACK").catch(() => {});
          blocker.release();
        }
        // Nothing of the held write landed, even once the lock went.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const after = await snapshot();
        if (path.name.startsWith("transition to review")) {
          // Its first transition landed before the lock, alone.
          assert.equal(after[0]!.intent.state, "settling");
          assert.deepEqual(
            { ...after[0]!, intent: undefined },
            { ...before[0]!, intent: undefined },
          );
        } else assert.deepEqual(after, before);
      } finally {
        await tearDown();
      }
    }),
  });
}

for (const path of PATHS) {
  Deno.test({
    name:
      `PostgresStore answers a write whose connection the server ended under it, and goes on: ${path.name}`,
    ignore,
    fn: timeout(30_000, async () => {
      const { admin, store, table, tearDown } = await setUp();
      try {
        await store.createIntent({
          id: "a",
          state: "authorized",
          hold: "pending",
        });
        await store.createIntent({
          id: "b",
          state: "authorized",
          hold: "pending",
        });
        await lockableRows(admin, table);
        const before = await admin.unsafe(
          `SELECT (SELECT row_to_json(i) FROM ${
            table("intents")
          } i WHERE id = 'a') AS intent,
                  (SELECT state FROM ${
            table("holds")
          } WHERE intent_id = 'a') AS hold,
                  (SELECT resolution FROM ${table("dead_letters")}) AS letter`,
        );
        const blocker = await admin.reserve();
        try {
          await blocker.unsafe("BEGIN");
          await blocker.unsafe(path.blocks(table));
          const written = path.write(store);
          written.catch(() => {});
          // The store's connection waits on the lock: end it there.
          const pid = await waitingOnLock(admin, NAME, "the write");
          await admin`SELECT pg_terminate_backend(${pid})`;
          await blocker.unsafe("ROLLBACK");
          const outcome = await within(
            written.then(() => "written", (error: Error) => error),
            5000,
          );
          assert.ok(outcome instanceof Error, String(outcome));
          assert.match(outcome.message, /lost the connection|terminat/i);
          assert.doesNotMatch(outcome.message, /\n\s+at /, "no stack");
        } finally {
          blocker.release();
        }
        // The ended transaction wrote nothing of itself.
        const after = await admin.unsafe(
          `SELECT (SELECT row_to_json(i) FROM ${
            table("intents")
          } i WHERE id = 'a') AS intent,
                  (SELECT state FROM ${
            table("holds")
          } WHERE intent_id = 'a') AS hold,
                  (SELECT resolution FROM ${table("dead_letters")}) AS letter`,
        );
        if (path.name.startsWith("transition to review")) {
          // Its first transition landed before the fault, alone.
          assert.equal(after[0]!.intent.state, "settling");
          assert.equal(after[0]!.letter, "old");
        } else assert.deepEqual(after, before);
        // The store goes on, on its one connection, a write first: a
        // write's reserve() that met the server's goodbye (postgres.js
        // 3.4.9 keeps it for the next request on that connection) would
        // keep the connection from the pool for good, and every later
        // write would get no connection.
        for (let n = 0; n < 3; n++) {
          assert.equal(
            await within(store.admit({ count: `c${n}/settle`, now: 5 }), 4000),
            1,
          );
          assert.equal(
            (await within(store.getIntent("b"), 4000))?.state,
            "authorized",
          );
        }
        const b = await store.transition("b", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 2000,
        }, { lease: { ...lease, now: 2000 } });
        assert.equal(b.state, "settling");
      } finally {
        await tearDown();
      }
    }),
  });
}

Deno.test({
  name:
    "PostgresStore lands a write whole or not at all when the server ends its connection between its read and its flight",
  ignore,
  fn: timeout(30_000, async () => {
    const { schema, admin, sql, store, table, tearDown } = await setUp();
    try {
      await store.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      const moved = await store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 500,
      });
      // End the connection once the write's read has answered.
      let ended = false;
      const hooked = afterFirstRead(sql, async () => {
        await admin`
          SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = ${NAME}`;
        await new Promise((done) => setTimeout(done, 200));
        ended = true;
      });
      const hookedStore = new PostgresStore(hooked, {
        schema,
        connectionWaitMs: 3000,
      });
      const outcome = await within(
        hookedStore.transition("a", {
          from: "settling",
          to: "needs_review",
          version: moved.version,
          at: 1000,
          deadLetter: letter,
        }, { lease, claim }).then(() => "written", (error: Error) => error),
        8000,
      );
      assert.ok(ended, "the read was never seen");
      const [row] = await admin.unsafe(
        `SELECT (SELECT state FROM ${table("intents")} WHERE id = 'a') AS state,
                (SELECT count(*)::int FROM ${table("dead_letters")}) AS letters,
                (SELECT count(*)::int FROM ${table("leases")}) AS leases,
                (SELECT count(*)::int FROM ${table("claims")}) AS claims`,
      );
      // Whole (review, its letter, lease and record) or nothing.
      const landed = row!.state === "needs_review";
      assert.deepEqual(
        [row!.letters, row!.leases, row!.claims],
        landed ? [1, 1, 1] : [0, 0, 0],
        `${String(outcome)}: ${JSON.stringify(row)}`,
      );
      assert.equal(landed, outcome === "written", String(outcome));
      assert.equal((await store.getIntent("a"))?.state, row!.state);
    } finally {
      await tearDown();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false fails a write that gets no connection within connectionWaitMs, and nothing of it lands later",
  ignore,
  fn: timeout(30_000, async () => {
    const { schema, sql, store, tearDown } = await setUp({
      fetchTypes: false,
      connectionWaitMs: 300,
    });
    try {
      // Set up through a store of the default bound: on a loaded machine
      // the connect alone, then the write alone, took over the 300 ms, and
      // the setup failed as the test's write should.
      await new PostgresStore(sql, { schema }).createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      // Another holds the client's one connection for a while.
      const held = sql.begin(() =>
        new Promise((resolve) => setTimeout(resolve, 1200))
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = performance.now();
      const outcome = await within(
        store.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1000,
        }).then(() => "written", (error: Error) => error),
        5000,
      );
      const waited = performance.now() - started;
      assert.ok(outcome instanceof Error, String(outcome));
      assert.match(
        outcome.message,
        /no connection within 300ms|did not answer the store.s read within 300ms/,
      );
      assert.ok(waited >= 250 && waited < 1000, `${waited} ms`);
      await held;
      // The connection came later: the abandoned write rolled back.
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal((await store.getIntent("a"))?.state, "authorized");
    } finally {
      await tearDown();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore answers a read the pool cannot serve within connectionWaitMs with an error, and the read does not wait on in the queue",
  ignore,
  fn: timeout(30_000, async () => {
    const { schema, sql, store, tearDown } = await setUp({
      connectionWaitMs: 300,
    });
    try {
      // Set up through a store of the default bound, as above.
      await new PostgresStore(sql, { schema }).createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      const held = await sql.reserve(); // the client's one connection
      const started = performance.now();
      const outcome = await within(
        store.getIntent("a").then(() => "read", (error: Error) => error),
        5000,
      );
      assert.ok(outcome instanceof Error, String(outcome));
      assert.match(
        outcome.message,
        /^PostgreSQL did not answer the store's read within 300ms/,
      );
      assert.ok(performance.now() - started < 2000);
      held.release();
      // The connection is free again, and the store reads at once.
      assert.equal(
        (await within(store.getIntent("a"), 2000))?.state,
        "authorized",
      );
    } finally {
      await tearDown();
    }
  }),
});

for (const code of ["ETIMEDOUT", "SOME_UNKNOWN_FAILURE"]) {
  Deno.test({
    name:
      `PostgresStore answers a write whose socket fails under it with ${code}, and goes on`,
    ignore,
    fn: timeout(30_000, async () => {
      const port = Number(new URL(await postgresUrl()).port);
      const sockets: net.Socket[] = [];
      const { schema, admin, store, tearDown } = await setUp({
        connectionWaitMs: 1000,
        socket: () =>
          new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(port, "127.0.0.1");
            socket.once("connect", () => {
              sockets.push(socket);
              resolve(socket);
            });
            socket.once("error", reject);
          }),
      });
      const blocker = await admin.reserve();
      try {
        await store.createIntent({
          id: "a",
          state: "authorized",
          hold: "pending",
        });
        await store.createIntent({
          id: "b",
          state: "authorized",
          hold: "pending",
        });
        await blocker.unsafe("BEGIN");
        await blocker.unsafe(
          `SELECT 1 FROM "${schema}".intents WHERE id = 'a' FOR UPDATE`,
        );
        const written = store.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        }).then(() => "written", (error: Error) => error);
        await waitingOnLock(admin, NAME, "the write");
        // The socket fails as a keepalive timeout (or something unknown) would.
        sockets.at(-1)!.destroy(
          Object.assign(new Error(`read ${code}`), { code }),
        );
        const outcome = await within(written, 5000);
        assert.ok(outcome instanceof Error, String(outcome));
        await blocker.unsafe("ROLLBACK");
        // Nothing landed, and the store goes on.
        assert.equal(
          (await within(store.getIntent("a"), 4000))?.state,
          "authorized",
        );
        const b = await within(
          store.transition("b", {
            from: "authorized",
            to: "settling",
            version: "1",
            at: 2,
          }),
          4000,
        );
        assert.equal(b.state, "settling");
      } finally {
        blocker.release();
        await tearDown();
      }
    }),
  });
}

Deno.test({
  name:
    "PostgresStore goes on when the server ends its idle connections (idle_session_timeout) and bounds idle transactions (idle_in_transaction_session_timeout): a write's transaction is one flight, never idle",
  ignore,
  fn: timeout(30_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    await new PostgresStore(admin, { schema }).migrate();
    // One connection, so that each time the server ends it is one close
    // the client must have seen before the next write.
    let closed = 0;
    const sql = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      onclose: () => void closed++,
      connection: {
        application_name: schema,
        // Not 500 ms: a new session sits idle from its login to its first
        // statement, and a loaded machine can pause the client that long
        // (seen once, a CI run beside other work: the server ended the
        // session under the write, "may have landed or not", the store's
        // right answer to that race, not this test's case).
        idle_session_timeout: 1_500,
        // Not 1 ms: the flight is several socket writes, and a loaded
        // machine can pause the client between two of them for longer
        // (seen: one write in three of a parallel run of tests/store/).
        // That the flight waits no round trip is pinned exactly by
        // postgres_ops_test.ts (each write's round trips counted).
        idle_in_transaction_session_timeout: 100,
      },
    });
    const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
    // Until the server has ended the session and the client has seen its
    // connection close: a fixed sleep (and then a fixed 500 ms past the
    // server's view) raced a loaded machine, and the next write met the
    // connection closing under it (ECONNRESET, "may have landed or not"),
    // which is the store's right answer to that race, not this test's case.
    const allEnded = async (times: number) => {
      for (let i = 0; i < 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        if (closed < times) continue;
        const [row] = await admin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = ${schema}`;
        if (row?.n === 0) return;
      }
      throw new Error("the server did not end the idle session within 10 s");
    };
    try {
      await store.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      for (let n = 1; n <= 4; n++) {
        // The pool's connection ended by the server meanwhile.
        await allEnded(n);
        assert.equal(await store.admit({ count: "a/settle", now: 1 }), n);
        assert.equal((await store.getIntent("a"))?.state, "authorized");
      }
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});
