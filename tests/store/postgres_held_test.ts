/**
 * PostgresStore when another database session holds a delivery up, on a
 * real server: a lock past the write's `lock_timeout` (55P03) and a
 * statement cancelled by `statement_timeout` (57014) are busy answers, as
 * another delivery's lease is. The relayer retries them, never poisons a
 * payment on them whatever the delivery's number, and the webhook's log
 * line says what held it, on one line, without the database's URL.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError, createRelayer, ScriptedSender } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { createApp } from "../../webhook/app.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { genericRequest, NOW, SECRET } from "../webhook/_app.ts";

const ignore = !postgresAvailable;
const job = { intentId: "a", kind: "settle" } as const;
const policy = { maxDeliveries: 3 };
const LOCK_TIMEOUT =
  /as another session held a lock it needed for over 500ms \(lock_timeout; see pg_locks and pg_stat_activity\): nothing was written; retry$/;
const STATEMENT_TIMEOUT =
  /as statement_timeout ended its wait for a row another session held \(canceling statement due to statement timeout while (locking|updating|inserting index) tuple \(\d+,\d+\) in relation "(intents|leases)"; see pg_locks and pg_stat_activity\): nothing was written; retry$/;
const TOO_SHORT =
  /as statement_timeout cancelled its statement, which waited for no row another session held \(canceling statement due to statement timeout\): the role's statement_timeout is too short for the store's writes \(SHOW statement_timeout; raise it with ALTER ROLE … SET statement_timeout\), or a table lock held it up \(a schema change; see pg_stat_activity\): nothing was written; retry$/;
const CANCELLED =
  /as another session cancelled its statement \(canceling statement due to user request: pg_cancel_backend; see pg_stat_activity\): nothing was written; retry$/;

/**
 * A store on a fresh schema with intent `a` authorized (its writes' locks
 * waited for at most 500 ms), a relayer and a webhook over it, and an
 * admin client to hold rows with. `connection` sets the store's sessions'
 * defaults (`statement_timeout`).
 */
async function setUp(connection: Record<string, number> = {}) {
  const admin = await connect(2);
  const schema = freshSchema();
  await new PostgresStore(admin, { schema }).migrate();
  const url = await postgresUrl();
  const sql = postgres(url, { max: 2, onnotice: () => {}, connection });
  const store = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
  await store.createIntent({ id: "a", state: "authorized", hold: "pending" });
  const sender = new ScriptedSender({ a: { sends: [{ txHash: "0x1" }] } });
  const deps = { store, sender, policy, now: () => NOW, random: () => 0 };
  const lines: string[] = [];
  const app = createApp({
    ...deps,
    webhookSecret: SECRET,
    log: (line) => lines.push(line),
  });
  const table = (name: string) => `"${schema}".${name}`;
  return {
    url,
    admin,
    store,
    sender,
    table,
    schema,
    relayer: createRelayer(deps),
    app,
    lines,
    /** Moves intent `a` to settling: `"written"`, or the store's error. */
    settleA: (): Promise<"written" | Error> =>
      store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1,
      }).then(() => "written" as const, (error: Error) => error),
    /** Runs `body` while another session holds what `statement` locks. */
    async holding<T>(statement: string, body: () => Promise<T>): Promise<T> {
      const other = await admin.reserve();
      try {
        await other.unsafe("BEGIN");
        await other.unsafe(statement);
        return await body();
      } finally {
        await other.unsafe("ROLLBACK").catch(() => {});
        other.release();
      }
    },
    async tearDown() {
      // Closed first: a lost connection's probes (timers) end with it,
      // not in the next test.
      store.close();
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

Deno.test({
  name:
    "PostgresStore answers a write whose statement statement_timeout cancelled (waiting on another session's lock) with a BusyError that says so, and nothing of it lands",
  ignore,
  fn: timeout(30_000, async () => {
    const t = await setUp({ statement_timeout: 200 });
    try {
      const outcome = await t.holding(
        `SELECT 1 FROM ${t.table("intents")} WHERE id = 'a' FOR UPDATE`,
        t.settleA,
      );
      assert.ok(outcome instanceof BusyError, String(outcome));
      assert.match(
        outcome.message,
        /^Cannot move a from authorized to settling as statement_timeout ended/,
      );
      assert.match(outcome.message, STATEMENT_TIMEOUT);
      const a = await t.store.getIntent("a");
      assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
    } finally {
      await t.tearDown();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore says apart a write statement_timeout cut while no other session held anything it needed (a statement_timeout too short for the write): busy, never a poison, and nothing lands",
  ignore,
  fn: timeout(30_000, async () => {
    const t = await setUp({ statement_timeout: 200 });
    try {
      // A write slower than the role's statement_timeout with no lock in
      // its way: an audit trigger, a disk stalling.
      await t.admin.unsafe(
        `CREATE FUNCTION ${t.table("slow")}() RETURNS trigger LANGUAGE plpgsql
           AS $$ BEGIN PERFORM pg_sleep(0.4); RETURN NEW; END $$;
         CREATE TRIGGER slow BEFORE UPDATE ON ${t.table("intents")}
           FOR EACH ROW EXECUTE FUNCTION ${t.table("slow")}()`,
      );
      const slow = await t.settleA();
      assert.ok(slow instanceof BusyError, String(slow));
      assert.match(
        slow.message,
        /^Cannot move a from authorized to settling as statement_timeout cancelled its statement, which waited for no row/,
      );
      assert.match(slow.message, TOO_SHORT);
      // The relayer's line says so, at the last delivery as at any: busy.
      // There the intent is authorized, so nothing is sent: the write is
      // the drop of its job (its letter, checked against the intent).
      const outcome = await t.relayer.deliver(job, policy.maxDeliveries);
      assert.equal(outcome.action, "retry", JSON.stringify(outcome));
      assert.match(
        outcome.reason,
        /^intent a is busy: Cannot keep the dead letter of a\/settle as /,
      );
      assert.match(outcome.reason, TOO_SHORT);
      assert.deepEqual((await t.store.listDeadLetters()).items, []);
      await t.admin.unsafe(
        `DROP TRIGGER slow ON ${t.table("intents")}`,
      );
      const a = await t.store.getIntent("a");
      assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
    } finally {
      await t.tearDown();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore says apart a write another session cancelled (pg_cancel_backend) while it waited on a row: busy, and nothing lands",
  ignore,
  fn: timeout(30_000, async () => {
    const t = await setUp();
    try {
      const outcome = await t.holding(
        `SELECT 1 FROM ${t.table("intents")} WHERE id = 'a' FOR UPDATE`,
        async () => {
          const writing = t.settleA();
          // This test's write only: the server is shared with the other
          // test files, whose own writes wait on locks too.
          for (let tries = 0; tries < 200; tries++) {
            const [waiting] = await t.admin`
              SELECT pg_cancel_backend(pid) AS done FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'
                AND query LIKE ${`%${t.schema}%intents%`}`;
            if (waiting?.done) break;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          return await writing;
        },
      );
      assert.ok(outcome instanceof BusyError, String(outcome));
      assert.match(outcome.message, CANCELLED);
      const a = await t.store.getIntent("a");
      assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
    } finally {
      await t.tearDown();
    }
  }),
});

for (
  const [held, connection, pattern] of [
    ["past lock_timeout", {}, LOCK_TIMEOUT],
    ["past statement_timeout", { statement_timeout: 200 }, STATEMENT_TIMEOUT],
  ] as const
) {
  Deno.test({
    name:
      `A delivery past maxDeliveries whose write another session held up ${held} is a retry that says so, never a poison: once the session lets go the next drops the job, sending nothing, its letter kept`,
    ignore,
    fn: timeout(30_000, async () => {
      const t = await setUp(connection);
      try {
        // A lapsed lease row of the intent, which an operator's session
        // holds: the last delivery, which finds the intent authorized and
        // sends nothing, drops its job, and that write waits at the lease
        // it keeps until it lapses (as a queue's give-up does).
        await t.admin.unsafe(
          `INSERT INTO ${t.table("leases")} VALUES ('a', 'gone', 0)`,
        );
        // No claim, as a Pub/Sub push or a Cloudflare message: nothing but
        // the busy answer keeps the last delivery from a poison.
        const outcome = await t.holding(
          `SELECT 1 FROM ${t.table("leases")} WHERE intent_id = 'a' FOR UPDATE`,
          () => t.relayer.deliver(job, policy.maxDeliveries),
        );
        assert.equal(outcome.action, "retry", JSON.stringify(outcome));
        assert.match(
          outcome.reason,
          /^intent a is busy: Cannot keep the dead letter of a\/settle as /,
        );
        assert.match(outcome.reason, pattern);
        assert.deepEqual((await t.store.listDeadLetters()).items, []);
        assert.equal((await t.store.getIntent("a"))?.state, "authorized");
        assert.equal(t.sender.calls.length, 0);
        // The session let go: the next delivery drops the job, its letter
        // kept for a redrive, and still sends nothing.
        const next = await t.relayer.deliver(job, policy.maxDeliveries + 1);
        assert.equal(next.action, "poison", JSON.stringify(next));
        assert.match(next.reason, /^no luck after \d+ deliveries$/);
        assert.equal(t.sender.calls.length, 0);
        assert.equal(
          (await t.store.getDeadLetter("a/settle"))?.resolution,
          "job dropped, intent still authorized",
        );
        assert.equal((await t.store.getIntent("a"))?.state, "authorized");
      } finally {
        await t.tearDown();
      }
    }),
  });
}

Deno.test({
  name:
    "The webhook answers a delivery whose count another session holds past lock_timeout with a retry and Retry-After, and logs one line that says so, without the database's URL",
  ignore,
  fn: timeout(30_000, async () => {
    const t = await setUp();
    try {
      await t.admin.unsafe(
        `INSERT INTO ${t.table("counters")} VALUES ('a/settle', 1, 9e15)`,
      );
      const res = await t.holding(
        `SELECT 1 FROM ${
          t.table("counters")
        } WHERE job_id = 'a/settle' FOR UPDATE`,
        async () =>
          // No delivery number: the store counts it, in the held row.
          await t.app.request(
            "/v1/deliveries",
            await genericRequest(JSON.stringify({ job })),
          ),
      );
      assert.equal(res.status, 503);
      assert.equal(res.headers.get("retry-after"), "3"); // 2.5 s for #1
      const body = await res.json();
      assert.equal(body.outcome, "retry", JSON.stringify(body));
      assert.equal(body.delivery, 1);
      assert.match(
        body.reason,
        /^intent a is busy: Cannot admit a delivery as another session held a lock/,
      );
      assert.equal(t.lines.length, 1, t.lines.join("\n"));
      const [line] = t.lines;
      assert.match(
        line!,
        /^worker {2}a\/settle +#1 +retry +\(intent a is busy: Cannot admit a delivery as another session held a lock it needed for over 500ms \(lock_timeout; see pg_locks and pg_stat_activity\): nothing was written; retry\)$/,
      );
      const url = new URL(t.url);
      for (const secret of [t.url, url.password, url.host]) {
        assert.ok(!line!.includes(secret), `the log names ${secret}`);
      }
      assert.equal(await t.store.deliveries("a/settle"), 1);
    } finally {
      await t.tearDown();
    }
  }),
});

Deno.test({
  name:
    "The webhook answers a delivery that gets no connection (too many connections for its role, 53300) as a store outage: 503, nothing decided, one line naming the limit and not the URL, and the store goes on once a slot frees",
  ignore,
  // A loaded CI run failed this test on a timer left running: the store's
  // probe of the pool after the lost connection (500 ms here), which
  // close() did not stop (it does now, held by postgres_timers_test.ts
  // under the sanitizers), or postgres.js's own reconnect timer
  // (connection.js's reconnect), set with its backoff as a query opens
  // again a connection the server refused (53300), which can outlive
  // sql.end(), and so can the connect it makes: not the store's.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(30_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    const role = `r${schema}`;
    await admin.unsafe(
      `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' CONNECTION LIMIT 2;
       CREATE SCHEMA "${schema}" AUTHORIZATION "${role}"`,
    );
    const url = new URL(await postgresUrl());
    url.username = role;
    url.password = `${role}-pw`;
    const sql = postgres(url.href, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const store = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
    const others = postgres(url.href, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    try {
      await store.migrate();
      await store.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      // Closed before its client ends (docs/postgres.md), as every store.
      store.close();
      await sql.end();
      const fresh = postgres(url.href, {
        max: 2,
        onnotice: () => {},
        max_lifetime: null,
      });
      const held = new PostgresStore(fresh, { schema, connectionWaitMs: 1000 });
      // Another client of the role takes both its slots.
      const slots = await Promise.all([others.reserve(), others.reserve()]);
      const lines: string[] = [];
      const app = createApp({
        store: held,
        sender: new ScriptedSender({ a: { sends: [{ txHash: "0x1" }] } }),
        policy: { maxDeliveries: 3 },
        now: () => NOW,
        random: () => 0,
        webhookSecret: SECRET,
        log: (line) => lines.push(line),
      });
      const res = await app.request(
        "/v1/deliveries",
        await genericRequest(JSON.stringify({ job, delivery: 3 })),
      );
      assert.equal(res.status, 503);
      assert.equal(
        (await res.json()).type,
        "urn:relayer:problem:delivery-failed",
      );
      const line = lines.find((l) => l.startsWith("worker"));
      // The server's words, and what to do, whole: its words alone
      // ("PostgresError: too many connections for role …") said which
      // limit, not what to do about it.
      assert.match(
        line ?? "",
        /^worker {2}a\/settle +failed unexpectedly: Error: The store's read failed as PostgreSQL has no connection slot left for it \(PostgresError: too many connections for role "r\w+"\): end idle sessions \(see pg_stat_activity\), raise that limit, or lower the pool's max; nothing was read, so try again$/,
      );
      for (const l of lines) {
        assert.ok(!l.includes(`${role}-pw`) && !l.includes(url.host), l);
        assert.doesNotMatch(l, /\n/);
      }
      for (const slot of slots) slot.release();
      await others.end();
      // Nothing was decided or written, and the store goes on. Its first
      // read after the slots free needs a fresh login, which a loaded
      // machine took past the read's 1 s bound (one run of a flake hunt at
      // load 15-19 on 2 cores): it is asked again, for 5 s at most, where
      // it says it was not answered in time; any other failure fails.
      const deadline = Date.now() + 5_000;
      let letters;
      for (;;) {
        try {
          letters = await held.listDeadLetters();
          break;
        } catch (error) {
          if (
            Date.now() > deadline ||
            !/did not answer the store's read within/.test(String(error))
          ) throw error;
        }
      }
      assert.deepEqual(letters.items, []);
      const a = await held.getIntent("a");
      assert.deepEqual([a?.state, a?.version], ["authorized", "1"]);
      // The store's probes of the pool after the lost connection stop
      // with it (docs/postgres.md), before its client ends.
      held.close();
      await fresh.end();
    } finally {
      await others.end({ timeout: 1 });
      await admin.unsafe(
        `DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP OWNED BY "${role}" CASCADE; DROP ROLE "${role}"`,
      );
      await admin.end();
    }
  }),
});
