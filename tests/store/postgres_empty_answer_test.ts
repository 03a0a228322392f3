/**
 * PostgresStore on a real server, its client answering one chosen query
 * with an empty result whose `command` is null: what postgres.js 3.4.9
 * resolves a query with when its bytes outlived the socket they were
 * written to (a socket error with no close that fails it) and the
 * connection's next startup sent them: the startup's `ReadyForQuery`
 * settles it with a fresh `Result`, no `CommandComplete` of its own. That
 * answer is not the query's. Taken as one, a read of an intent that
 * exists says there is none (the relayer drops the job as "intent not
 * found"), a write's read refuses it as "the intent does not exist", and
 * a flight's answers lack the rows it returns. Each is the connection
 * lost instead. A read is asked once more, and answers; a read whose
 * answer came back empty twice, and a write, fail so: the caller tries
 * again (the webhook's 503), and the next call answers. A write is never
 * asked again (its first flight may have landed).
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import {
  ConflictError,
  createRelayer,
  type Intent,
  type Outcome,
  type Sender,
} from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { createApp } from "../../webhook/app.ts";
import {
  answeredAs,
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";
import { genericRequest, NOW, SECRET } from "../webhook/_app.ts";

const ignore = !postgresAvailable;

/** An empty result as postgres.js 3.4.9's `Result` is: an array with `command` (and the rest) null. */
function emptyResult(): unknown[] {
  return Object.defineProperties([], {
    count: { value: null, writable: true },
    state: { value: null, writable: true },
    command: { value: null, writable: true },
    columns: { value: null, writable: true },
    statement: { value: null, writable: true },
  });
}

/**
 * `sql`, passing everything through (on the pool, on a connection it
 * reserves, inside `sql.begin`), except that the first `times` queries
 * whose text `chosen` picks (past the `skip` first ones) are sent as ever
 * and resolve to an empty result with `command` null, not to their own
 * answer. `hit()` says whether they all came.
 */
function emptyOnce(
  sql: postgres.Sql,
  chosen: (text: string) => boolean,
  skip = 0,
  times = 1,
): { sql: postgres.Sql; hit(): boolean } {
  let armed = times;
  const hooked = answeredAs(sql, (text) => {
    if (armed === 0 || !chosen(text) || skip-- > 0) return undefined;
    armed--;
    return () => emptyResult();
  }, { inBegin: true });
  return { sql: hooked, hit: () => armed === 0 };
}

/** What the store's error says of an answer that is not the query's. */
const LOST =
  /^PostgreSQL lost the connection during the .*answer came back empty/;

/** Seeds a fresh migrated schema with intent `a` settling on tx 0x1, intent `c` created, a dead letter of job `j`, and one delivery of job `m` counted. */
async function seeded(admin: postgres.Sql, schema: string): Promise<void> {
  const store = new PostgresStore(admin, { schema });
  await store.createIntent({
    id: "a",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
  });
  await store.createIntent({ id: "c" });
  await store.putDeadLetter({
    jobId: "j",
    intentId: "a",
    deliveries: 3,
    cause: "exhausted",
    reason: "r",
    resolution: "s",
    lastError: "e",
    poisonedAt: NOW,
  });
  await store.admit({ count: "m", now: NOW });
}

type Case = {
  readonly name: string;
  /** Picks the query whose answer comes back empty. */
  readonly chosen: (text: string) => boolean;
  /** The call; `fetchTypes: false` takes the store's `sql.begin` path. */
  readonly call: (store: PostgresStore) => Promise<unknown>;
  readonly fetchTypes?: boolean;
  /** A read, which the store asks once more: it answers on a second empty answer only. */
  readonly read?: true;
  /** What the same call answers once the store's client answers it. */
  readonly then: (answer: unknown) => void;
};

const CASES: readonly Case[] = [
  {
    name: "getIntent() of an intent that exists",
    read: true,
    chosen: (text) =>
      text.includes("h.state AS hold") &&
      !text.includes("lease_owner"),
    call: (store) => store.getIntent("a"),
    then: (answer) =>
      assert.equal((answer as { state?: unknown } | null)?.state, "settling"),
  },
  {
    name: "a write's read of its intent (recordHold)",
    read: true,
    chosen: (text) => text.includes("lease_owner"),
    call: (store) => store.recordHold("c"),
    then: (answer) => assert.equal(answer, "pending"),
  },
  {
    name: "deliveries()",
    read: true,
    chosen: (text) => text.includes("SELECT deliveries, expires_at"),
    call: (store) => store.deliveries("m"),
    then: (answer) => assert.equal(answer, 1),
  },
  {
    name: "getDeadLetter()",
    read: true,
    chosen: (text) =>
      text.includes("queue_dlq_id") && text.includes("WHERE job_id = "),
    call: (store) => store.getDeadLetter("j"),
    then: (answer) =>
      assert.equal((answer as { jobId?: unknown } | null)?.jobId, "j"),
  },
  {
    name: "listDeadLetters()",
    read: true,
    chosen: (text) => text.includes("ORDER BY poisoned_at DESC"),
    call: (store) => store.listDeadLetters(),
    then: (answer) =>
      assert.equal((answer as { items: unknown[] }).items.length, 1),
  },
  {
    name: "a flight's count (admit)",
    chosen: (text) => text.includes("RETURNING deliveries"),
    call: (store) => store.admit({ count: "k", now: NOW }),
    // The first flight landed (the client answered it empty, the server
    // ran it): "it may have landed or not".
    then: (answer) => assert.equal(answer, 2),
  },
  {
    name: "a flight's count (admit) through sql.begin (fetch_types: false)",
    chosen: (text) => text.includes("RETURNING deliveries"),
    call: (store) => store.admit({ count: "k", now: NOW }),
    fetchTypes: false,
    // The first flight landed, as on the other path: its COMMIT went in
    // the flight (the client answered the count empty, the server ran
    // it and the COMMIT): "it may have landed or not".
    then: (answer) => assert.equal(answer, 2),
  },
  {
    name: "a flight's insert (createIntent)",
    chosen: (text) => text.includes("ON CONFLICT (id) DO NOTHING"),
    call: (store) => store.createIntent({ id: "n" }),
    // The first landed: the next read says so.
    then: (answer) =>
      assert.ok(
        answer instanceof ConflictError &&
          /as it exists/.test(answer.message),
        String(answer),
      ),
  },
  {
    name: "a flight's delete (redrive)",
    chosen: (text) => text.includes("WITH gone AS"),
    call: async (store) => {
      const letter = await store.getDeadLetter("j");
      return await store.redrive("j", letter?.version ?? "0");
    },
    then: (answer) =>
      assert.ok(
        // The first landed: the letter is gone.
        answer instanceof ConflictError && /is gone/.test(answer.message),
        String(answer),
      ),
  },
];

serverUpFirst();

for (const c of CASES) {
  if (!c.read) continue;
  Deno.test({
    name:
      `PostgresStore asks ${c.name} whose answer came back empty (command null) once more, and answers`,
    ignore,
    fn: onFreshSchema({
      fetchTypes: c.fetchTypes ?? true,
      migrateOn: "admin",
    }, async ({ admin, schema, sql: client }) => {
      await seeded(admin, schema);
      const wrapped = emptyOnce(client, c.chosen);
      const store = new PostgresStore(wrapped.sql, { schema });
      const answer = await c.call(store);
      assert.ok(wrapped.hit(), "the chosen query never ran");
      c.then(answer);
    }),
  });
}

for (const c of CASES) {
  const times = c.read ? 2 : 1;
  Deno.test({
    name: `PostgresStore answers ${c.name} whose answer came back empty${
      c.read ? " twice" : ""
    } (command null) as the connection lost, and the next call answers`,
    ignore,
    // One connection: a flight that failed so and kept it from the pool
    // would leave the next call none.
    fn: onFreshSchema({
      fetchTypes: c.fetchTypes ?? true,
      migrateOn: "admin",
    }, async ({ admin, schema, sql: client }) => {
      await seeded(admin, schema);
      const wrapped = emptyOnce(client, c.chosen, 0, times);
      const store = new PostgresStore(wrapped.sql, { schema });
      const first = await c.call(store).then(
        (answer) => ({ answer, error: undefined }),
        (error: unknown) => ({ answer: undefined, error }),
      );
      assert.ok(wrapped.hit(), "the chosen query never ran");
      assert.ok(
        first.error !== undefined,
        `answered ${JSON.stringify(first.answer)} on an empty answer`,
      );
      const error = first.error as Error;
      assert.ok(!(error instanceof ConflictError), String(error));
      assert.match(error.message, LOST);
      assert.match(error.message, /try again|the next read says which/);
      c.then(await c.call(store).catch((again: unknown) => again));
    }),
  });
}

/** A store over `client` in `schema` whose look at an intent (past the `skip` first) answers empty, `times` in a row, and a relayer on it. */
function relayerOver(
  client: postgres.Sql,
  schema: string,
  skip = 0,
  times = 2,
) {
  const wrapped = emptyOnce(
    client,
    (text) => text.includes("h.state AS hold") && !text.includes("lease_owner"),
    skip,
    times,
  );
  const store = new PostgresStore(wrapped.sql, { schema });
  // Tx 0x1 has confirmed; nothing is sent again.
  const sender: Sender = {
    send: () => Promise.reject(new Error("no send expected")),
    receipt: () => Promise.resolve("confirmed"),
  };
  const policy = { maxDeliveries: 3 };
  const deps = { store, sender, policy, now: () => NOW, random: () => 0 };
  return { store, deps, relayer: createRelayer(deps), hit: wrapped.hit };
}

const GIVE_UP_READS: readonly {
  readonly read: string;
  readonly intent: string;
  readonly skip: number;
  /** What the next give-up, all its reads answered, decides. */
  readonly then: (outcome: Outcome, intent: Intent | null) => void;
}[] = [
  {
    // Taken as no intent: no receipt looked up, and the payment whose tx
    // had confirmed was sent to review.
    read: "its look for a confirmed tx, on a settling intent",
    intent: "a",
    skip: 0,
    then: (outcome, intent) => {
      assert.equal(outcome.action, "done", JSON.stringify(outcome));
      assert.equal(intent?.state, "settled");
    },
  },
  {
    // Taken as no intent: "job dropped, intent not found".
    read: "its resolution's read, on a created intent",
    intent: "c",
    skip: 1,
    then: (outcome, intent) => {
      assert.equal(
        outcome.action === "poison" && outcome.resolution,
        "job dropped, intent still created",
        JSON.stringify(outcome),
      );
      assert.equal(intent?.state, "created");
    },
  },
];

for (const { read, intent, skip, then } of GIVE_UP_READS) {
  Deno.test({
    name:
      `A queue's give-up whose read of the intent (${read}) came back empty twice (command null) decides nothing: it fails as the store did, and the next give-up decides on the intent`,
    ignore,
    fn: onFreshSchema({
      max: 2,
      migrateOn: "admin",
    }, async ({ admin, schema, sql: client }) => {
      await seeded(admin, schema);
      await admin.unsafe(`DELETE FROM "${schema}".dead_letters`);
      const t = relayerOver(client, schema, skip);
      const job = { intentId: intent, kind: "settle" } as const;
      const giveUp = () =>
        t.relayer.giveUp({ ...job }, {
          deliveries: 3,
          queue: { queue: "pubsub", messageId: "m1", dlqId: "d1" },
        });
      const first = await giveUp().then(
        (answer) => ({ answer, error: undefined }),
        (error: unknown) => ({ answer: undefined, error }),
      );
      assert.ok(t.hit());
      assert.ok(first.error !== undefined, JSON.stringify(first.answer));
      assert.match(String((first.error as Error).message), LOST);
      const before = await t.store.getIntent(intent);
      assert.equal(before?.version, "1"); // nothing moved
      assert.deepEqual((await t.store.listDeadLetters()).items, []);
      const again = await giveUp();
      then(again, await t.store.getIntent(intent));
    }),
  });
}

/**
 * The seeded intents in `schema` (no dead letters), an app over a relayer
 * on `client` whose look at an intent answers empty `times` in a row, and
 * its answer to a signed last delivery (3) of intent `a`'s settle job,
 * its look met by the empty answer.
 */
async function lastDelivery(
  admin: postgres.Sql,
  schema: string,
  client: postgres.Sql,
  times: number,
) {
  await seeded(admin, schema);
  await admin.unsafe(`DELETE FROM "${schema}".dead_letters`);
  const t = relayerOver(client, schema, 0, times);
  const app = createApp({ ...t.deps, webhookSecret: SECRET, log: () => {} });
  const job = { intentId: "a", kind: "settle" };
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 3 })),
  );
  const body = await res.json();
  assert.ok(t.hit());
  return { t, app, job, res, body };
}

Deno.test({
  name:
    "The webhook answers a signed last delivery whose look came back empty twice (command null) with 503, poisons nothing, and the next delivery settles the intent",
  ignore,
  fn: onFreshSchema({
    max: 2,
    migrateOn: "admin",
  }, async ({ admin, schema, sql: client }) => {
    const { t, app, job, res, body } = await lastDelivery(
      admin,
      schema,
      client,
      2,
    );
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body.type, "urn:relayer:problem:delivery-failed");
    assert.deepEqual((await t.store.listDeadLetters()).items, []);
    assert.equal((await t.store.getIntent("a"))?.state, "settling");
    const again = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify({ job, delivery: 4 })),
    );
    assert.equal(again.status, 200);
    assert.equal((await t.store.getIntent("a"))?.state, "settled");
  }),
});

Deno.test({
  name:
    "The webhook settles the intent on a signed delivery whose look came back empty (command null) once: the look is asked once more",
  ignore,
  fn: onFreshSchema({
    max: 2,
    migrateOn: "admin",
  }, async ({ admin, schema, sql: client }) => {
    const { t, body, res } = await lastDelivery(admin, schema, client, 1);
    // Before: 503, the look failing as the connection lost.
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.outcome, "done");
    assert.equal((await t.store.getIntent("a"))?.state, "settled");
  }),
});
