import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../mod.ts";
import { createRelayer, ScriptedSender, type SenderScript } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { isNotRead } from "../../store/_not_written.ts";
import { poolCloses } from "../../store/_postgres_closes.ts";
import {
  answeredAs,
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

// Deno's op and resource sanitizers are off by default: these tests turn
// them on, each over a client of its own that it ends, so that a timer of
// the store's own (connectionWaitMs' bounds, the pooler check's waits) that
// outlives its call fails them. postgres.js's timers are its connections'
// (idle, lifetime), cleared when the client ends.
const sanitized = { sanitizeOps: true, sanitizeResources: true } as const;

// The server is a process of the run, started on first use: here, not in a
// sanitized test.
Deno.test({
  name: "PostgresStore timers: the server is up",
  ignore: !postgresAvailable,
  fn: async () => void await postgresUrl(),
});

Deno.test({
  name: "PostgresStore leaves no timer behind its calls once its client ended",
  ignore: !postgresAvailable,
  ...sanitized,
  fn: async () => {
    const sql = await connect(4);
    const schema = freshSchema();
    try {
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 2_000 });
      await store.migrate();
      const scripts: Record<string, SenderScript> = {};
      const jobs = [];
      for (let i = 0; i < 10; i++) {
        const id = `pi_${i}`;
        await store.createIntent({ id, state: "authorized", hold: "pending" });
        scripts[id] = {
          sends: [{ txHash: `0x${i}` }],
          receipts: ["confirmed"],
        };
        jobs.push({ intentId: id, kind: "settle" } as const);
      }
      const relayer = createRelayer({
        store,
        sender: new ScriptedSender(scripts),
      });
      await Promise.all(jobs.map((job) => relayer.deliver(job, 1)));
      await Promise.all(jobs.map((job) => relayer.deliver(job, 2)));
      await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    } finally {
      await sql.end();
    }
  },
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `PostgresStore leaves no timer behind a read and a write that got no connection within connectionWaitMs (${
        fetchTypes ? "reserve" : "sql.begin"
      } path), once the connection came back and its client ended`,
    ignore: !postgresAvailable,
    ...sanitized,
    fn: async () => {
      const sql = await connect(1, { fetchTypes });
      const schema = freshSchema();
      try {
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 100,
        });
        await store.migrate();
        const held = await sql.reserve();
        try {
          await assert.rejects(
            store.getIntent("pi_1"),
            /did not answer the store's read within 100ms/,
          );
          await assert.rejects(
            store.createIntent({
              id: "pi_1",
              state: "authorized",
              hold: "pending",
            }),
            /within 100ms/,
          );
        } finally {
          held.release();
        }
        // The connection back: the write that came too late left nothing.
        // Read with a bound a loaded machine meets (the pool's one
        // connection may first serve what queued behind the held one).
        const patient = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 10_000,
        });
        assert.equal(await patient.getIntent("pi_1"), null);
        await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
      } finally {
        await sql.end();
      }
    },
  });
}

Deno.test({
  name:
    "PostgresStore leaves no timer behind a write another session's lock held past its bound (busy), once the lock went and its client ended",
  ignore: !postgresAvailable,
  ...sanitized,
  fn: async () => {
    const sql = await connect(2);
    const schema = freshSchema();
    try {
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 400 });
      await store.migrate();
      const intent = await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      // Another session (a psql left open) keeps the intent's row locked.
      const other = await sql.reserve();
      try {
        await other`BEGIN`;
        await other.unsafe(
          `SELECT 1 FROM "${schema}".intents WHERE id = 'pi_1' FOR UPDATE`,
        );
        await assert.rejects(
          store.transition("pi_1", {
            from: "authorized",
            to: "settling",
            version: intent.version,
            at: 1,
          }),
          BusyError,
        );
        await other`ROLLBACK`;
      } finally {
        other.release();
      }
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
      await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name:
    "PostgresStore.close() fails at once a write waiting for a connection (nothing of it sent) and, once its client ended, every call, leaving no timer",
  ignore: !postgresAvailable,
  ...sanitized,
  fn: timeout(30_000, async () => {
    const sql = await connect(1);
    const admin = await connect(1);
    const schema = freshSchema();
    try {
      // Far longer than the test may take: no call may wait it out.
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 60_000,
      });
      await store.migrate();
      await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      const held = await sql.reserve();
      let closedMs = Infinity;
      try {
        // Its connection is the one the test holds: it waits for it.
        const waiting = store.admit({ count: "pi_1/settle", now: 1 });
        await new Promise((resolve) => setTimeout(resolve, 100));
        const started = performance.now();
        store.close();
        store.close(); // idempotent
        await assert.rejects(
          waiting,
          /^Error: Cannot write as the store is closed/,
        );
        closedMs = performance.now() - started;
      } finally {
        held.release();
      }
      // The pool's one connection went to the write's reserve, which
      // handed it back: the pool answers.
      await sql`SELECT 1`;
      assert.ok(closedMs < 1_000, `the write failed after ${closedMs} ms`);
      await sql.end();
      // After the end: a write's reserve() would never settle there.
      const started = performance.now();
      const calls: [string, Promise<unknown>][] = [
        ["migrate", store.migrate()],
        ["read", store.getIntent("pi_1")],
        ["read", store.deliveries("pi_1/settle")],
        ["read", store.getDeadLetter("pi_1/settle")],
        ["list dead letters", store.listDeadLetters()],
        ["admit a delivery", store.admit({ count: "pi_1/settle", now: 2 })],
        [
          "create intent pi_2",
          store.createIntent({ id: "pi_2", state: "created" }),
        ],
        ["record", store.recordHold("pi_1")],
      ];
      const settled = await Promise.allSettled(calls.map(([, call]) => call));
      for (const [i, [what]] of calls.entries()) {
        const answer = settled[i]!;
        assert.equal(answer.status, "rejected", what);
        const reason = (answer as PromiseRejectedResult).reason;
        assert.match(
          String(reason?.message),
          new RegExp(`^Cannot ${what}.* as the store is closed \\(`),
        );
        // A read's own refusal read nothing and wrote nothing; no other.
        assert.equal(
          isNotRead(reason),
          what === "read" || what === "list dead letters",
          what,
        );
      }
      const took = performance.now() - started;
      assert.ok(took < 1_000, `the calls failed after ${took} ms`);
      // Nothing of the write cut short was sent.
      const [row] = await admin.unsafe(
        `SELECT count(*)::int AS n FROM "${schema}".counters`,
      );
      assert.equal(row?.n, 0);
      await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    } finally {
      await sql.end({ timeout: 1 });
      await admin.end();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore.close() stops a write's probe of the pool after a lost connection, with its timer: one never answered (sent on a connection as it was lost) does not outlive the store's client",
  ignore: !postgresAvailable,
  ...sanitized,
  fn: timeout(30_000, async () => {
    const admin = await connect(1);
    const schema = freshSchema();
    const sql = postgres(await postgresUrl(), {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
      connection: { application_name: schema },
    });
    // The probe (`SELECT $1::int`) never answered, as postgres.js 3.4.9
    // leaves a query handed to a connection between its socket's error and
    // its close: the probe then waits out its own bound (1 s here).
    let probed = () => {};
    const asked = new Promise<void>((resolve) => probed = resolve);
    let armed = false;
    let closed = false;
    const sentClosed: string[] = [];
    const store = new PostgresStore(
      answeredAs(sql, (text) => {
        if (closed) sentClosed.push(text);
        if (!armed || text !== "SELECT ?::int") return undefined;
        armed = false;
        probed();
        return () => new Promise(() => {});
      }),
      { schema, connectionWaitMs: 2_000 },
    );
    try {
      await store.migrate();
      await store.createIntent({ id: "pi_1", hold: "pending" });
      // The pool's sessions ended (terminated): the next write probes the
      // pool first. Each connection keeps the server's goodbye and hands it
      // to the query that opens it again (see `goodbyeBeforeSent`): taken
      // here, so that the probe is sent and held, not refused.
      const closes = poolCloses(sql);
      const [ended] = await admin<{ n: number }[]>`
        SELECT count(pg_terminate_backend(pid))::int AS n
        FROM pg_stat_activity WHERE application_name = ${schema}`;
      assert.ok(ended!.n > 0);
      for (let waited = 0; closes.count < ended!.n; waited += 10) {
        assert.ok(waited < 10_000, "the client never saw the closes");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      for (let tries = 0;; tries++) {
        const answers = await Promise.allSettled(
          [1, 2].map(() => sql`SELECT pg_sleep(0.05)`),
        );
        if (answers.every((answer) => answer.status === "fulfilled")) break;
        assert.ok(tries < 10, "the pool never opened again");
      }
      armed = true;
      const write = store.createIntent({ id: "pi_2" });
      await asked;
      store.close();
      closed = true;
      await assert.rejects(write, /as the store is closed/);
      // A timer's turn: what the close set going ran its microtasks. Nothing
      // was sent once closed: before, the probe cut short went on to its
      // round of `SELECT 1`s, one per connection of the pool.
      await new Promise((resolve) => setTimeout(resolve, 0));
      assert.deepEqual(sentClosed, []);
      await sql.end();
      // Before: the probe's timer ran on for its second after the end,
      // and this test failed the op sanitizer ("A timer was started in
      // this test, but never completed").
    } finally {
      store.close();
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});
