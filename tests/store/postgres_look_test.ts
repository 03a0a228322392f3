/**
 * A delivery whose look (its first read of the intent, before anything is
 * written) the database fails, on a real server: `statement_timeout`
 * cutting a read held up by a table lock (57014), the server ending the
 * connection under it (57P01, a restart or failover) and again under each
 * look the store asks again, more times than its pool has connections, or
 * no connection for the role (53300). That is the store failing, not the
 * job: nothing is
 * decided, whatever the delivery's number, and the webhook answers 503
 * (with `Retry-After` once the store takes a write again). Counted as the
 * job's failure, the last delivery of a queue that brings its own number
 * (Pub/Sub, Cloudflare, QStash, the generic route with `delivery`) was
 * poisoned on a blip, and its resolution, reading the intent once the
 * blip was over, sent a payment whose tx had confirmed to review. The
 * queue's give-up, which reads the tx's receipt first, settles it.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createRelayer, type Sender, type Store } from "../../mod.ts";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import { createApp } from "../../webhook/app.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { waitingOnLock } from "./_waiting_on_lock.ts";
import { genericRequest, NOW, SECRET } from "../webhook/_app.ts";

const ignore = !postgresAvailable;
const job = { intentId: "a", kind: "settle" } as const;
const policy = { maxDeliveries: 3 };
const NAME = "relayer_look";

/**
 * `store` whose first `getIntent` runs while `during` holds it up, and
 * fails as the server fails it; `after` then lets go, so every read after
 * it (a poison's resolution, the next delivery) finds the store back.
 */
function failingFirstLook(
  store: Store,
  during: (read: () => Promise<unknown>) => Promise<unknown>,
): Store & { readonly failures: unknown[] } {
  const failures: unknown[] = [];
  let first = true;
  return new Proxy(store, {
    get(target, key, receiver) {
      if (key === "failures") return failures;
      const value = Reflect.get(target, key, receiver);
      if (key !== "getIntent" || typeof value !== "function") {
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (id: string) => {
        if (!first) return await target.getIntent(id);
        first = false;
        let read: Promise<unknown> | undefined;
        await during(() => (read = target.getIntent(id)))
          .catch((error) => failures.push(error));
        return await read; // rejects as the server failed it
      };
    },
  }) as Store & { readonly failures: unknown[] };
}

type Failure = {
  readonly name: string;
  /** The error the look fails with. */
  readonly pattern: RegExp;
  /** A client for the store and `during` for failingFirstLook. */
  setUp(url: string, schema: string, admin: postgres.Sql): Promise<{
    sql: postgres.Sql;
    during: (read: () => Promise<unknown>) => Promise<unknown>;
    tearDown(): Promise<void>;
  }>;
};

/** Another session's table lock (a schema change, LOCK TABLE) held while `read` runs, then `then`. */
async function underTableLock(
  admin: postgres.Sql,
  schema: string,
  read: () => Promise<unknown>,
  then: () => Promise<unknown> = () => Promise.resolve(),
): Promise<unknown> {
  const other = await admin.reserve();
  try {
    await other.unsafe(
      `BEGIN; LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
    );
    const reading = read();
    // The read may fail while `then` still runs (the server ended its
    // connection under it): taken here, so it is no unhandled rejection,
    // and still thrown below.
    reading.catch(() => {});
    await then();
    return await reading;
  } finally {
    await other.unsafe("ROLLBACK").catch(() => {});
    other.release();
  }
}

const FAILURES: readonly Failure[] = [
  {
    name: "statement_timeout cut it, held up by a table lock (57014)",
    pattern: /canceling statement due to statement timeout/,
    setUp(url, schema, admin) {
      const sql = postgres(url, {
        max: 2,
        onnotice: () => {},
        connection: { statement_timeout: 200 },
      });
      return Promise.resolve({
        sql,
        during: (read) => underTableLock(admin, schema, read),
        tearDown: async () => {},
      });
    },
  },
  {
    name:
      "the server ended its connection under it 3 times, more than its pool of 2 has connections (57P01, a restart or failover)",
    // postgres.js on Deno reports the server's FATAL as the socket's end.
    pattern:
      /terminating connection due to administrator command|socket has been ended by the other party|ECONNRESET/,
    setUp(url, schema, admin) {
      const sql = postgres(url, {
        max: 2,
        onnotice: () => {},
        backoff: reconnectBackoffS,
        connection: { application_name: NAME },
      });
      return Promise.resolve({
        sql,
        async during(read) {
          try {
            return await underTableLock(admin, schema, read, async () => {
              let pid = await waitingOnLock(admin, NAME, "the look");
              await admin`SELECT pg_terminate_backend(${pid})`;
              // The store asks the look again, once for each connection
              // of the pool: ended there too, each time.
              for (let n = 0; n < 2; n++) {
                pid = await waitingOnLock(
                  admin,
                  NAME,
                  "the look asked again",
                  pid,
                );
                await admin`SELECT pg_terminate_backend(${pid})`;
              }
            });
          } finally {
            // The blip is over: the client has connected again.
            await sql`SELECT 1`.catch(() => sql`SELECT 1`);
          }
        },
        tearDown: async () => {},
      });
    },
  },
  {
    name: "it got no connection (too many connections for its role, 53300)",
    pattern: /too many connections for role/,
    async setUp(url, schema, admin) {
      const role = `r${schema}`;
      await admin.unsafe(
        `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' CONNECTION LIMIT 2;
         GRANT USAGE ON SCHEMA "${schema}" TO "${role}";
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}";
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}"`,
      );
      const as = new URL(url);
      as.username = role;
      as.password = `${role}-pw`;
      const sql = postgres(as.href, {
        max: 2,
        onnotice: () => {},
        backoff: reconnectBackoffS,
      });
      const others = postgres(as.href, { max: 2, onnotice: () => {} });
      return {
        sql,
        async during(read) {
          // The store's client has not connected yet: another client of
          // the role holds both its slots while the look connects.
          const slots = await Promise.all([others.reserve(), others.reserve()]);
          try {
            return await read();
          } finally {
            for (const slot of slots) slot.release();
            await others.end();
          }
        },
        async tearDown() {
          await others.end({ timeout: 1 });
          await admin.unsafe(
            `DROP OWNED BY "${role}" CASCADE; DROP ROLE "${role}"`,
          );
        },
      };
    },
  },
];

/**
 * Intent `a` settling on tx 0x1, which has confirmed, in a fresh schema,
 * its store's first look failing as `failure` says.
 */
async function setUp(failure: Failure) {
  const admin = await connect(2);
  const schema = freshSchema();
  await new PostgresStore(admin, { schema }).migrate();
  await new PostgresStore(admin, { schema }).createIntent({
    id: "a",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
  });
  const url = await postgresUrl();
  const client = await failure.setUp(url, schema, admin);
  const inner = new PostgresStore(client.sql, {
    schema,
    connectionWaitMs: 2000,
  });
  const store = failingFirstLook(inner, client.during);
  // Tx 0x1 has confirmed; nothing is sent again.
  const sender: Sender = {
    send: () => Promise.reject(new Error("no send expected")),
    receipt: () => Promise.resolve("confirmed"),
  };
  const deps = { store, sender, policy, now: () => NOW, random: () => 0 };
  return {
    store,
    inner,
    deps,
    relayer: createRelayer(deps),
    async tearDown() {
      // Closed first: its pause between rounds of taking a lost
      // connection's goodbye (a timer) ends at the close, not after.
      inner.close();
      await client.sql.end({ timeout: 1 });
      await client.tearDown();
      // A timer of postgres.js 3.4.9's was still pending as the 57P01 case
      // ended under load (--trace-leaks: a connection's max_lifetime timer,
      // set at its connect, cleared only at its socket's close), and cleared
      // in the next test: both failed, in 2 full runs of this file of 40 in
      // pairs, and once in a run of the Postgres suites. A margin, not a
      // proof: 0 of 70 runs failed with this pause for the closes to land.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

for (const failure of FAILURES) {
  Deno.test({
    name:
      `A last delivery with no replay record (Pub/Sub, Cloudflare) whose look ${failure.name} decides nothing, and the queue's give-up settles the payment whose tx confirmed`,
    ignore,
    fn: timeout(30_000, async () => {
      const t = await setUp(failure);
      try {
        const answer = await t.relayer.deliver(job, policy.maxDeliveries).then(
          (outcome) => outcome,
          (error: Error) => error,
        );
        assert.equal(t.store.failures.length, 1);
        assert.match(String(t.store.failures[0]), failure.pattern);
        // Thrown as the store threw it: the webhook's 503, the queue
        // handler's retry, nothing decided.
        assert.ok(answer instanceof Error, JSON.stringify(answer));
        assert.match(answer.message, failure.pattern);
        assert.equal((await t.inner.getIntent("a"))?.state, "settling");
        assert.deepEqual((await t.inner.listDeadLetters()).items, []);
        // The queue gives up on its last delivery: the give-up reads the
        // receipt before it sends anything to review.
        const given = await t.relayer.giveUp(job, {
          deliveries: policy.maxDeliveries,
          queue: { queue: "pubsub", messageId: "m1", dlqId: "d1" },
        });
        assert.equal(given.action, "done", JSON.stringify(given));
        assert.equal(
          given.reason,
          "the queue gave up after 3 deliveries: 0x1 confirmed, intent settled",
        );
        const a = await t.inner.getIntent("a");
        assert.deepEqual([a?.state, a?.hold], ["settled", "captured"]);
      } finally {
        await t.tearDown();
      }
    }),
  });
}

Deno.test({
  name:
    "The webhook answers a signed last delivery whose look statement_timeout cut with 503 and the policy's Retry-After once the store takes a write, logs it as failed unexpectedly, and poisons nothing",
  ignore,
  fn: timeout(30_000, async () => {
    const t = await setUp(FAILURES[0]!);
    try {
      const lines: string[] = [];
      const app = createApp({
        ...t.deps,
        webhookSecret: SECRET,
        log: (line) => lines.push(line),
      });
      const res = await app.request(
        "/v1/deliveries",
        await genericRequest(
          JSON.stringify({ job, delivery: policy.maxDeliveries }),
        ),
      );
      const body = await res.json();
      assert.equal(res.status, 503, JSON.stringify(body));
      assert.equal(body.type, "urn:relayer:problem:delivery-failed");
      assert.equal(res.headers.get("retry-after"), "10"); // 10 s for #3
      const line = lines.find((l) => l.startsWith("worker"));
      assert.match(
        line ?? "",
        /^worker {2}a\/settle +failed unexpectedly: Error: The store's read of intent a failed as statement_timeout cancelled its statement, which waited for no row another session held \(canceling statement due to statement timeout\): the role's statement_timeout is too short for the store's reads /,
      );
      assert.equal((await t.inner.getIntent("a"))?.state, "settling");
      assert.deepEqual((await t.inner.listDeadLetters()).items, []);
      // The queue's next delivery, the store back, settles it.
      const again = await app.request(
        "/v1/deliveries",
        await genericRequest(
          JSON.stringify({ job, delivery: policy.maxDeliveries + 1 }),
        ),
      );
      assert.equal(again.status, 200);
      assert.equal((await t.inner.getIntent("a"))?.state, "settled");
    } finally {
      await t.tearDown();
    }
  }),
});
