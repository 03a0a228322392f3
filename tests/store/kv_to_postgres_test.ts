/**
 * The move from Deno KV to PostgreSQL on the real things: a KV file opened
 * by `Deno.openKv`, driven by the relayer into every state a store holds,
 * moved into a schema of this run's PostgreSQL server; then every getter of
 * `PostgresStore` answers what `KvStore` answered, and the relayer carries
 * on there where it stopped on Deno KV.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  BusyError,
  ConflictError,
  createRelayer,
  type DeadLetter,
  type Intent,
  type Job,
  notSent,
  planResolution,
  poison,
  ReplayError,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { type KvLike, KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  moveKvToPostgres,
  WrittenAfterMoveError,
} from "../../store/kv_to_postgres.ts";
import {
  connect,
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

const T0 = 1_800_000_000_000;
const MINUTE = 60_000;
const POLICY = { maxDeliveries: 3, jitter: "none" } as const;

const job = (intentId: string): Job => ({ intentId, kind: "settle" });

/** A Deno KV file of its own, closed and removed by `close()`. */
async function kvFile(): Promise<{ kv: Deno.Kv; close(): Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_" });
  const kv = await Deno.openKv(`${dir}/relayer.kv`);
  return {
    kv,
    async close() {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/**
 * Drives a relayer on `store` into every state a store holds, on a clock
 * that starts at {@linkcode T0}; returns the clock.
 */
async function driveIntoEveryState(store: KvStore): Promise<() => number> {
  let clock = T0;
  const now = () => clock;
  for (
    const id of [
      "pi_settled",
      "pi_failed",
      "pi_review",
      "pi_pending",
      "pi_wait",
      "pi_redrive",
    ]
  ) await store.createIntent({ id, state: "authorized", hold: "pending" });
  await store.createIntent({ id: "pi_new", state: "created" });
  // A send whose write-ahead landed and whose record never did (a crash
  // between the two), as an import mid-flight keeps it.
  await store.createIntent({
    id: "pi_inflight",
    state: "settling",
    hold: "pending",
    settlingSince: T0 - MINUTE,
    broadcasting: T0 - 1000,
    lastBroadcast: { outcome: "sent", txHash: "0x01d", at: T0 - MINUTE },
  });
  const sender = new ScriptedSender({
    pi_settled: { sends: [{ txHash: "0x5e771ed" }], receipts: ["confirmed"] },
    pi_failed: {
      sends: [{ error: poison(notSent(new Error("signer: chain id"))) }],
    },
    pi_review: { sends: [{ error: new Error("rpc: connection refused") }] },
    pi_pending: { sends: [{ txHash: "0x9e4d1" }], receipts: ["pending"] },
    pi_wait: { sends: [{ error: notSent(new Error("rpc: nonce too low")) }] },
  });
  const relayer = createRelayer({
    store,
    sender,
    policy: POLICY,
    now,
    random: () => 0,
  });

  // A replay record and a count that lapse before the move.
  await store.admit({
    now: clock,
    count: "job_long_gone",
    ttlMs: MINUTE,
    claim: { key: "sig_old", now: clock, expiresAt: clock + MINUTE },
  });

  // Settled (hold captured), failed (hold voided, a declared letter), in
  // review (an exhausted letter): each delivered with the queue's number.
  for (const id of ["pi_settled", "pi_failed", "pi_review"]) {
    for (let delivery = 1;; delivery++) {
      const outcome = await relayer.deliver(job(id), delivery);
      if (outcome.action !== "retry") break;
      clock += outcome.delayMs;
    }
  }
  clock += 20 * MINUTE; // the old record and count lapse
  // Counted by the store (a queue that reports no number): sent, its
  // receipt pending; and refused twice by the signer, waiting.
  assert.equal((await relayer.deliver(job("pi_pending"))).action, "retry");
  assert.equal((await relayer.deliver(job("pi_wait"))).action, "retry");
  clock += MINUTE;
  assert.equal((await relayer.deliver(job("pi_wait"))).action, "retry");
  // A signed delivery's replay record, live at the move.
  await relayer.deliver(job("pi_new"), 1, {
    claim: { key: "sig_live", now: clock, expiresAt: clock + 30 * MINUTE },
  });
  // A letter kept by the queue's give-up, redriven (its message marked);
  // another that records an unreadable message.
  await relayer.giveUp(job("pi_redrive"), {
    deliveries: 5,
    queue: { queue: "qstash", messageId: "msg_redriven" },
  });
  assert.ok(await relayer.redrive("pi_redrive/settle"));
  await relayer.keepUnreadable({
    queue: "local",
    id: "m-9",
    raw: "{",
    detail: "not JSON",
  });
  return now;
}

/** Every key under the store's prefix, by kind. */
async function keysByKind(kv: Deno.Kv): Promise<Map<string, string[]>> {
  const kinds = new Map<string, string[]>();
  for await (const entry of kv.list({ prefix: ["relayer"] })) {
    const [, kind, id] = entry.key;
    const ids = kinds.get(String(kind)) ?? [];
    ids.push(String(id));
    kinds.set(String(kind), ids);
  }
  return kinds;
}

function unversioned(intent: Intent | null) {
  if (intent === null) return null;
  const { version: _, ...rest } = intent;
  return rest;
}

function letterUnversioned(
  letter: DeadLetter & { readonly version?: string } | null,
) {
  if (letter === null) return null;
  const { version: _, ...rest } = letter;
  return rest;
}

async function allDeadLetters(store: Store) {
  const letters = [];
  let cursor: string | null = null;
  do {
    const page = await store.listDeadLetters({ limit: 2, cursor });
    letters.push(...page.items.map(letterUnversioned));
    cursor = page.cursor;
  } while (cursor !== null);
  return letters;
}

/** Creates intent `id` on `store` as authorized, its hold pending. */
function authorized(store: KvStore, id = "pi_0001") {
  return store.createIntent({ id, state: "authorized", hold: "pending" });
}

Deno.test({
  name:
    "moveKvToPostgres() moves every state a relayer leaves on a Deno KV file, and the relayer carries on on PostgreSQL",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      const now = await driveIntoEveryState(kvStore);

      // The give-up holds pi_redrive's lease until it lapses: refused.
      const refused = await moveKvToPostgres(file.kv, pg.sql, {
        schema: pg.schema,
        now,
      }).then(() => null, (error) => error);
      assert.ok(refused instanceof BusyError, String(refused));
      assert.match(refused.message, /lease of intent pi_redrive/);
      assert.match(refused.message, /pause the queue/);
      const [row] = await pg.sql.unsafe(
        `SELECT count(*)::int AS n FROM "${pg.schema}".intents`,
      );
      assert.equal(row?.n, 0);

      // The service stopped; a minute later every lease has lapsed.
      const at = now() + MINUTE;
      const report = await moveAt(file, pg, at);
      const kinds = await keysByKind(file.kv);
      assert.deepEqual(report, {
        moved: {
          intents: 8,
          holds: 7,
          // pi_pending's, pi_wait's, and the redriven message's mark.
          counts: kinds.get("deliveries")!.length - 1,
          claims: 1,
          deadLetters: 3,
        },
        left: {
          lapsedCounts: 1,
          lapsedClaims: 1,
          lapsedLeases: 1,
          redriveRecords: 1,
          timeIndex: 3,
        },
      });

      // (a) Every getter answers what KvStore answers, for every id.
      const pgStore = pg.store;
      for (const id of kinds.get("intent")!) {
        assert.deepEqual(
          unversioned(await pgStore.getIntent(id)),
          unversioned(await kvStore.getIntent(id)),
          id,
        );
      }
      assert.equal((await pgStore.getIntent("pi_pending"))?.mayHaveSent, true);
      assert.equal(
        (await pgStore.getIntent("pi_inflight"))?.broadcasting,
        T0 - 1000,
      );
      assert.deepEqual((await pgStore.getIntent("pi_pending"))?.txHashes, [
        "0x9e4d1",
      ]);
      for (const key of kinds.get("deliveries")!) {
        assert.equal(
          await pgStore.deliveries(key, at),
          await kvStore.deliveries(key, at),
          key,
        );
      }
      assert.equal(await pgStore.deliveries("pi_wait/settle", at), 2);
      for (const jobId of kinds.get("dead")!) {
        assert.deepEqual(
          letterUnversioned(await pgStore.getDeadLetter(jobId)),
          letterUnversioned(await kvStore.getDeadLetter(jobId)),
          jobId,
        );
      }
      assert.deepEqual(
        await allDeadLetters(pgStore),
        await allDeadLetters(kvStore),
      );
      assert.equal((await allDeadLetters(pgStore)).length, 3);
      // The live replay record refuses on PostgreSQL; the lapsed one is gone.
      await assert.rejects(
        pgStore.admit({
          now: at,
          claim: { key: "sig_live", now: at, expiresAt: at + MINUTE },
        }),
        ReplayError,
      );
      assert.equal(
        await pgStore.admit({
          now: at,
          claim: { key: "sig_old", now: at, expiresAt: at + MINUTE },
        }),
        null,
      );

      // (b) The relayer carries on on PostgreSQL.
      const sender = new ScriptedSender({
        // Its script names the tx so a receipt finds it; a send would show in calls.
        pi_pending: { sends: [{ txHash: "0x9e4d1" }], receipts: ["confirmed"] },
        pi_wait: { sends: [{ error: notSent(new Error("rpc: nonce")) }] },
      });
      const relayer = createRelayer({
        store: pgStore,
        sender,
        policy: POLICY,
        now: () => at,
        random: () => 0,
      });
      // The tx sent on Deno KV confirms from its receipt: no second send.
      const confirmed = await relayer.deliver(job("pi_pending"));
      assert.equal(confirmed.action, "done", confirmed.reason);
      assert.equal(confirmed.delivery, 2);
      const settled = await pgStore.getIntent("pi_pending");
      assert.equal(settled?.state, "settled");
      assert.equal(settled?.hold, "captured");
      // The job's count goes on from Deno KV's: its third and last
      // delivery fails it, and voids its hold.
      const last = await relayer.deliver(job("pi_wait"));
      assert.equal(last.delivery, 3);
      assert.equal(last.action, "poison");
      const failed = await pgStore.getIntent("pi_wait");
      assert.equal(failed?.state, "failed");
      assert.equal(failed?.hold, "voided");
      // A late copy of the message given up and redriven on Deno KV sends nothing.
      const late = await relayer.deliver(job("pi_redrive"), 1, {
        message: { queue: "qstash", messageId: "msg_redriven" },
      });
      assert.equal(late.action, "done", late.reason);
      // A replayed signed delivery is still refused.
      await assert.rejects(
        relayer.deliver(job("pi_new"), 2, {
          claim: { key: "sig_live", now: at, expiresAt: at + MINUTE },
        }),
        ReplayError,
      );
      assert.deepEqual(
        sender.calls.filter((call) => call.method === "send"),
        [{ method: "send", intentId: "pi_wait", replace: false }],
      );
      // Held holds moved once: the ledger refuses a second move of each.
      await assert.rejects(pgStore.voidHold("pi_pending"), ConflictError);
      await assert.rejects(pgStore.captureHold("pi_wait"), ConflictError);
      assert.equal(await pgStore.captureHold("pi_settled"), "captured");
      await assert.rejects(pgStore.captureHold("pi_failed"), ConflictError);
    }),
});

/** {@linkcode rowCounts} of a schema the move wrote nothing into. */
const NO_ROWS = {
  intents: 0,
  holds: 0,
  counters: 0,
  claims: 0,
  dead_letters: 0,
  leases: 0,
};

async function rowCounts(sql: postgres.Sql, schema: string) {
  const [row] = await sql.unsafe(
    `SELECT ${
      ["intents", "holds", "counters", "claims", "dead_letters", "leases"]
        .map((t) => `(SELECT count(*)::int FROM "${schema}".${t}) AS ${t}`)
        .join(", ")
    }`,
  );
  return { ...row };
}

/** Moves `file`'s store into `pg`'s schema, the move's clock at `at`. */
function moveAt(
  file: Awaited<ReturnType<typeof kvFile>>,
  pg: Awaited<ReturnType<typeof openPostgresStore>>,
  at: number = T0,
): ReturnType<typeof moveKvToPostgres> {
  return moveKvToPostgres(file.kv, pg.sql, {
    schema: pg.schema,
    now: () => at,
  });
}

/** A Deno KV file and a fresh PostgreSQL schema for `body`, both closed after. */
async function withBoth(
  body: (
    file: Awaited<ReturnType<typeof kvFile>>,
    pg: Awaited<ReturnType<typeof openPostgresStore>>,
  ) => Promise<void>,
): Promise<void> {
  const file = await kvFile();
  const pg = await openPostgresStore();
  try {
    await body(file, pg);
  } finally {
    await pg.close();
    await file.close();
  }
}

Deno.test({
  name:
    "moveKvToPostgres() refuses a schema that holds rows, or is not migrated, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      await pg.store.createIntent({ id: "pi_0002", state: "created" });
      await pg.store.admit({ now: T0, count: "pi_0002/settle" });
      const error = await moveAt(file, pg).then(() => null, (error) => error);
      assert.ok(error instanceof ConflictError, String(error));
      assert.match(error.message, /already holds 1 intent, 1 count:/);
      assert.match(error.message, /Nothing was moved/);
      assert.equal(await pg.store.getIntent("pi_0001"), null);
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), {
        intents: 1,
        holds: 0,
        counters: 1,
        claims: 0,
        dead_letters: 0,
        leases: 0,
      });

      // A store under another prefix: nothing under the one given.
      const other = await moveKvToPostgres(file.kv, pg.sql, {
        prefix: ["payments"],
        schema: pg.schema,
        now: () => T0,
      }).then(() => null, (error) => error);
      assert.ok(other instanceof ConflictError, String(other));
      assert.match(
        other.message,
        /holds nothing under the prefix \["payments"\]: check that the handle is the store the service used/,
      );

      const bare = `${pg.schema}_bare`;
      await assert.rejects(
        moveKvToPostgres(file.kv, pg.sql, { schema: bare, now: () => T0 }),
        (error: Error) =>
          error instanceof ConflictError &&
          error.message.includes("is not migrated") &&
          error.message.includes(".migrate() first"),
      );
      const [found] = await pg.sql`SELECT to_regnamespace(${bare}) AS s`;
      assert.equal(found?.s, null);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() run again after an instance wrote Deno KV on since the move does not say the move is done: it names the intent written since, whose row PostgreSQL kept as moved, or that is not there",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      let paid = await authorized(kvStore, "pi_paid");
      const other = await authorized(kvStore, "pi_other");
      await moveAt(file, pg);

      // On PostgreSQL alone (the service switched): the move is done.
      const onPg = await pg.store.transition("pi_other", {
        from: "authorized",
        to: "settling",
        version: (await pg.store.getIntent("pi_other"))!.version,
        at: T0,
      });
      assert.equal(onPg.state, "settling");
      const done = await moveAt(file, pg).then(() => null, (e) => e);
      assert.ok(done instanceof ConflictError, String(done));
      assert.match(done.message, /If an earlier move committed, it is done/);
      assert.equal(other.state, "authorized"); // Deno KV's, older: no matter

      // The old service started again on Deno KV: it sent pi_paid's tx
      // there, which the schema's row, as moved, does not hold.
      paid = await kvStore.transition("pi_paid", {
        from: "authorized",
        to: "settling",
        version: paid.version,
        at: T0,
      });
      paid = await kvStore.beginBroadcast("pi_paid", paid.version, T0);
      await kvStore.recordBroadcast("pi_paid", paid.version, {
        outcome: "sent",
        txHash: "0x5e7",
        at: T0,
      });
      const since = await moveAt(file, pg).then(() => null, (e) => e);
      assert.ok(since instanceof ConflictError, String(since));
      assert.match(
        since.message,
        /^Cannot move into schema \S+ as it already holds 2 intents: /,
      );
      assert.doesNotMatch(since.message, /it is done/);
      assert.match(
        since.message,
        /But Deno KV was written after these rows were: intent pi_paid differs from its row, which nothing changed since it was moved\. /,
      );
      assert.match(since.message, /Nothing was moved\.$/);
      // PostgreSQL kept as it was.
      const row = await pg.store.getIntent("pi_paid");
      assert.equal(row?.state, "authorized");
      assert.deepEqual(row?.txHashes, []);

      // An intent created there since is not in the schema at all.
      await kvStore.createIntent({ id: "pi_0new", state: "created" });
      const created = await moveAt(file, pg).then(() => null, (e) => e);
      assert.match(
        String(created?.message),
        /But Deno KV was written after these rows were: intent pi_0new is not there\. /,
      );
      // What to run to empty it, in the schema of the move.
      const schema = /^Cannot move into schema (\w+) /.exec(created.message)
        ?.[1];
      assert.ok(schema, created.message);
      assert.ok(
        created.message.includes(
          `if none ran on PostgreSQL since, empty this schema (TRUNCATE ${
            ["intents", "holds", "leases", "counters", "claims", "dead_letters"]
              .map((table) => `"${schema}".${table}`).join(", ")
          }) and run the move again`,
        ),
        created.message,
      );
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() run again reads each intent's own hold: one with none beside one with a hold is the move done, a hold alone voided on Deno KV since is written since",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      // pi_a has no hold; pi_b, next in key order, has one.
      await kvStore.createIntent({ id: "pi_a", state: "created" });
      await kvStore.createIntent({
        id: "pi_b",
        state: "authorized",
        hold: "pending",
      });
      await moveAt(file, pg);
      const done = await moveAt(file, pg).then(() => null, (e) => e);
      assert.ok(done instanceof ConflictError, String(done));
      assert.match(done.message, /If an earlier move committed, it is done/);

      // The old service voided pi_b's hold on Deno KV: its intent is as
      // moved, its hold is not.
      assert.equal(await kvStore.voidHold("pi_b"), "voided");
      const since = await moveAt(file, pg).then(() => null, (e) => e);
      assert.ok(since instanceof ConflictError, String(since));
      assert.doesNotMatch(since.message, /it is done/);
      assert.match(
        since.message,
        /But Deno KV was written after these rows were: intent pi_b differs from its row, which nothing changed since it was moved\. /,
      );
      assert.equal((await pg.store.getIntent("pi_b"))?.hold, "pending");
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refusing a schema that holds rows gives a TRUNCATE that runs, on a schema named by a keyword too, and the move then goes through",
  ignore: !postgresAvailable,
  fn: async () => {
    const file = await kvFile();
    const sql = await connect(2);
    // A name the store takes (it quotes it), and SQL reads as a keyword.
    const schema = "user";
    try {
      const pg = new PostgresStore(sql, { schema });
      await pg.migrate();
      await pg.createIntent({ id: "pi_old", state: "created" });
      await authorized(new KvStore(file.kv));
      const move = () =>
        moveKvToPostgres(file.kv, sql, { schema, now: () => T0 });
      const refused = await move().then(() => null, (e) => e);
      assert.ok(refused instanceof ConflictError, String(refused));
      const truncate = /\((TRUNCATE [^)]*)\)/.exec(refused.message)?.[1];
      assert.ok(truncate, refused.message);
      await sql.unsafe(truncate);
      const report = await move();
      assert.equal(report.moved.intents, 1);
      assert.equal((await pg.getIntent("pi_0001"))?.state, "authorized");
      assert.equal(await pg.getIntent("pi_old"), null);
    } finally {
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
      await file.close();
    }
  },
});

Deno.test({
  name:
    "moveKvToPostgres() refusing a schema a service wrote before any move (its readiness probe's count) does not say the move may be done: none of the store's intents is there",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await new KvStore(file.kv).createIntent({
        id: "pi_0001",
        state: "settling",
        hold: "pending",
        settlingSince: T0,
        lastBroadcast: { outcome: "sent", txHash: "0xabc", at: T0 },
      });
      // A service started on the schema before the move: /readyz counts.
      await pg.store.admit({ now: T0, count: "relayer/write-probe" });
      const error = await moveAt(file, pg).then(() => null, (error) => error);
      assert.ok(error instanceof ConflictError, String(error));
      assert.match(error.message, /already holds 1 count/);
      // Not "if an earlier move committed, it is done": switched, the
      // service would find none of its intents.
      assert.doesNotMatch(error.message, /it is done/);
      assert.match(
        error.message,
        /no move of this store committed here: it holds none of its intents \(pi_0001 among them\)/,
      );
      assert.match(error.message, /Nothing was moved\.$/);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses a read-only database, and a role that lacks the grants the store's calls use, saying what to do, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      // What a move with `client` is refused with.
      const refusal = (client: postgres.Sql) =>
        moveKvToPostgres(file.kv, client, { schema: pg.schema, now: () => T0 })
          .then(() => null, (error) => error);
      const readOnly = await connect(1, {
        connection: { default_transaction_read_only: "on" },
      });
      try {
        const error = await refusal(readOnly);
        assert.ok(error instanceof ConflictError, String(error));
        assert.match(
          error.message,
          /as this session is read-only though the server is a primary \(default_transaction_read_only = on, set for the role, the database or the connection\): turn it off for the move's role \(ALTER ROLE … SET default_transaction_read_only = off\), or connect as a role that may write, then run the move again\. Nothing was moved\.$/,
        );
      } finally {
        await readOnly.end();
      }
      // A role that may read the schema but not write it.
      const role = `r${pg.schema}`;
      await pg.sql.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD 'pw';
        GRANT USAGE ON SCHEMA "${pg.schema}" TO "${role}";
        GRANT SELECT ON ALL TABLES IN SCHEMA "${pg.schema}" TO "${role}"`);
      const url = new URL(await postgresUrl());
      url.username = role;
      url.password = "pw";
      const reader = postgres(url.href, { max: 1, onnotice: () => {} });
      try {
        const error = await refusal(reader);
        assert.ok(error instanceof ConflictError, String(error));
        assert.match(
          error.message,
          new RegExp(
            `^Cannot move into schema ${pg.schema} as this role lacks INSERT on ${pg.schema}\\.intents, .*: grant them to it \\(docs/postgres\\.md lists what a service role needs\\), or run the move as the schema's owner\\. Nothing was moved\\.$`,
          ),
        );
      } finally {
        await reader.end();
        await pg.sql.unsafe(`DROP OWNED BY "${role}"; DROP ROLE "${role}"`);
      }
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);
    }),
});

/** Rewrites the value at `key` as `change` returns it, as an older writer may have left it. */
async function patched(
  kv: Deno.Kv,
  key: Deno.KvKey,
  change: (value: Record<string, unknown>) => Record<string, unknown>,
): Promise<void> {
  const entry = await kv.get<Record<string, unknown>>(key);
  assert.ok(entry.value, `${JSON.stringify(key)} is on record`);
  await kv.set(key, change(entry.value));
}

Deno.test({
  name:
    "moveKvToPostgres() refuses a tx hash or a queue's id holding U+0000 (PostgresStore writes neither), naming the record and the value, and moves nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const store = new KvStore(file.kv);
      const created = await authorized(store, "pi_1");
      const settling = await store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: created.version,
        at: T0,
      });
      const sending = await store.beginBroadcast("pi_1", settling.version, T0);
      // A broken Sender's hash, as a KvStore that took it kept it (stores
      // now refuse it alike); PostgreSQL text cannot hold it.
      await store.recordBroadcast("pi_1", sending.version, {
        outcome: "sent",
        txHash: "0xab_cd",
        at: T0,
      });
      await patched(file.kv, ["relayer", "intent", "pi_1"], (value) => ({
        ...value,
        lastBroadcast: {
          ...value.lastBroadcast as object,
          txHash: "0xab\u0000cd",
        },
        txHashes: ["0xab\u0000cd"],
      }));
      const move = () => moveAt(file, pg);
      await assert.rejects(move(), {
        name: "TypeError",
        message:
          'Cannot move from Deno KV as ["relayer","intent","pi_1"] holds U+0000 in its last tx hash, which PostgreSQL text cannot keep: PostgresStore would refuse to write it too. Mend that value on Deno KV (a tx hash as the chain knows it, a queue\'s id as the queue does), then run the move again. Nothing was moved.',
      });
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);
      const sent = await store.getIntent("pi_1");
      await store.recordBroadcast("pi_1", sent!.version, {
        outcome: "sent",
        txHash: "0xabcd",
        at: T0,
      });
      await store.createIntent({ id: "pi_2", state: "authorized" });
      await store.putDeadLetter({
        jobId: "pi_2/settle",
        intentId: "pi_2",
        deliveries: 3,
        cause: "exhausted",
        reason: "gave up after 3 deliveries",
        resolution: "job dropped, intent still authorized",
        lastError: "rpc: connection refused",
        poisonedAt: T0,
        queue: { queue: "qstash", messageId: "msg_1" },
      });
      await patched(file.kv, ["relayer", "dead", "pi_2/settle"], (value) => ({
        ...value,
        queue: { queue: "qstash", messageId: "msg\u00001" },
      }));
      await assert.rejects(move(), {
        name: "TypeError",
        message:
          /\["relayer","dead","pi_2\/settle"\] holds U\+0000 in its queue message id/,
      });
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);
      await patched(file.kv, ["relayer", "dead", "pi_2/settle"], (value) => ({
        ...value,
        queue: { queue: "cloudflare", dlqId: "dlq\u00001" },
      }));
      await assert.rejects(move(), {
        name: "TypeError",
        message:
          /\["relayer","dead","pi_2\/settle"\] holds U\+0000 in its queue dlq id, which PostgreSQL text cannot keep/,
      });
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);
      await patched(file.kv, ["relayer", "dead", "pi_2/settle"], (value) => ({
        ...value,
        queue: { queue: "q\u0000stash", messageId: "msg_1" },
      }));
      await assert.rejects(move(), {
        name: "TypeError",
        message:
          /\["relayer","dead","pi_2\/settle"\] holds U\+0000 in its queue, which PostgreSQL text cannot keep/,
      });
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() reads its check of the schema on a connection where a statement failed while its rows streamed, and moves (postgres.js 3.4.9 placed the check's row after the failed one's)",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await new KvStore(file.kv).createIntent({ id: "pi_1" });
      // One connection: the move's check follows the failed statement.
      const one = await connect(1);
      try {
        await assert.rejects(
          one`SELECT i, 1 / (4 - i) FROM generate_series(1, 10) i`,
          /division by zero/,
        );
        const report = await moveKvToPostgres(file.kv, one, {
          schema: pg.schema,
          now: () => T0,
        });
        assert.equal(report.moved.intents, 1);
        assert.equal((await pg.store.getIntent("pi_1"))?.state, "created");
      } finally {
        await one.end();
      }
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() cut short writes nothing, and the move run again moves everything",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const store = new KvStore(file.kv);
      for (let i = 0; i < 2500; i++) {
        const id = `pi_${String(i).padStart(5, "0")}`;
        await store.createIntent({ id, state: "authorized", hold: "pending" });
      }
      await store.admit({ now: T0, count: "pi_00001/settle" });
      // Last in key order: the copy has sent every intent when it meets it.
      await file.kv.set(["relayer", "zz_other", "x"], 1);
      const error = await moveAt(file, pg).then(() => null, (error) => error);
      assert.ok(error instanceof TypeError, String(error));
      assert.match(
        error.message,
        /\["relayer","zz_other","x"\] is not a key KvStore writes/,
      );
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);

      await file.kv.delete(["relayer", "zz_other", "x"]);
      // A hold without its intent, met once every intent is in.
      await file.kv.set(["relayer", "hold", "pi_ghost"], "pending");
      await assert.rejects(
        moveAt(file, pg),
        (error: Error) =>
          error instanceof TypeError && error.message.includes("pi_ghost"),
      );
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
      await file.kv.delete(["relayer", "hold", "pi_ghost"]);
      const report = await moveAt(file, pg);
      assert.deepEqual(report.moved, {
        intents: 2500,
        holds: 2500,
        counts: 1,
        claims: 0,
        deadLetters: 0,
      });
      assert.equal((await pg.store.getIntent("pi_02499"))?.hold, "pending");
      assert.equal(await pg.store.deliveries("pi_00001/settle", T0), 1);
    }),
});

/**
 * `kv`, but `write` runs once while a list reaches the first intent: an
 * instance of the service still at work during the move.
 */
function writingMidCopy(kv: Deno.Kv, write: () => Promise<void>): KvLike {
  let written = false;
  return {
    getMany: kv.getMany.bind(kv),
    atomic: () => kv.atomic(),
    async *list(selector, options) {
      for await (const entry of kv.list(selector, options)) {
        if (!written && entry.key[1] === "intent") {
          written = true;
          await write();
        }
        yield entry;
      }
    },
  };
}

/** A write of an instance still running while the move copies the store. */
interface MidCopyCase {
  /** What the case shows. */
  readonly name: string;
  /** Intents on record before the move, `pi_0001` on. */
  readonly intents: number;
  /** What the instance writes once the copy reaches the first intent. */
  write(store: KvStore): Promise<void>;
  /** The record the refusal names. */
  readonly named: RegExp;
  /** Deliveries of `pi_0001/settle` once the move ran again. */
  readonly counted: number;
}

const MID_COPY: readonly MidCopyCase[] = [
  {
    name: "a count the copy has passed",
    intents: 1,
    write: async (store) => {
      await store.admit({ now: T0, count: "pi_0001/settle" });
    },
    named: /\["relayer","deliveries","pi_0001\/settle"\]/,
    counted: 1,
  },
  {
    // More intents than a page of Deno KV's list: the copy reads the last
    // of them after the writes, and sees the second's commit, newer than
    // the first's.
    name: "a count the copy has passed, then an intent it has yet to read",
    intents: 150,
    write: async (store) => {
      await store.admit({ now: T0, count: "pi_0001/settle" });
      await authorized(store, "pi_0200");
    },
    named: /\["relayer","(deliveries","pi_0001\/settle|intent","pi_0200)"\]/,
    counted: 1,
  },
  {
    // Not a hold without its intent, to be deleted.
    name: "an intent and its hold once the copy read the intents' page",
    intents: 1,
    write: async (store) => {
      await authorized(store, "pi_0002");
    },
    named: /\["relayer","hold","pi_0002"\]/,
    counted: 0,
  },
];

for (const midCopy of MID_COPY) {
  Deno.test({
    name:
      `moveKvToPostgres() refuses a store written while it copied it, and writes nothing: ${midCopy.name}`,
    ignore: !postgresAvailable,
    fn: () =>
      withBoth(async (file, pg) => {
        const store = new KvStore(file.kv);
        for (let i = 1; i <= midCopy.intents; i++) {
          await authorized(store, `pi_${String(i).padStart(4, "0")}`);
        }
        const kv = writingMidCopy(file.kv, () => midCopy.write(store));
        const error = await moveKvToPostgres(kv, pg.sql, {
          schema: pg.schema,
          now: () => T0,
        }).then(() => null, (error) => error);
        assert.ok(error instanceof ConflictError, String(error));
        assert.match(error.message, midCopy.named);
        assert.match(
          error.message,
          /\] was written while the move copied the store: .* Stop every one/,
        );
        assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
        // Stopped, the move carries what was written too.
        const report = await moveAt(file, pg);
        assert.ok(report.moved.intents >= midCopy.intents);
        assert.equal(
          await pg.store.deliveries("pi_0001/settle", T0),
          midCopy.counted,
        );
        assert.equal(
          (await rowCounts(pg.sql, pg.schema)).intents,
          report.moved.intents,
        );
      }),
  });
}

/**
 * `kv`, but `write` runs once during the move's last look over the whole
 * store (its second list of the whole prefix, the first being the copy):
 * once that list has passed `pi_0001` (`"during"`), or once it is done,
 * before PostgreSQL commits (`"after"`). An instance of the service still
 * at work, whose write no look inside the transaction can see.
 */
function writingInLastLook(
  kv: Deno.Kv,
  when: "during" | "after",
  write: () => Promise<void>,
): KvLike {
  let whole = 0;
  let written = false;
  return {
    getMany: kv.getMany.bind(kv),
    atomic: () => kv.atomic(),
    async *list(selector, options) {
      const last = "prefix" in selector && selector.prefix.length === 1 &&
        options?.limit === undefined && ++whole === 2;
      for await (const entry of kv.list(selector, options)) {
        yield entry;
        if (
          last && !written && when === "during" &&
          entry.key[2] === "pi_0001"
        ) {
          written = true;
          await write();
        }
      }
      if (last && !written && when === "after") {
        written = true;
        await write();
      }
    },
  };
}

Deno.test({
  name:
    "moveKvToPostgres() that cannot read Deno KV again after its commit says the move committed, not that nothing was moved, nor moved",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      let whole = 0;
      const kv: KvLike = {
        getMany: file.kv.getMany.bind(file.kv),
        atomic: () => file.kv.atomic(),
        list(selector, options) {
          const afterCommit = "prefix" in selector &&
            selector.prefix.length === 1 && options?.limit === undefined &&
            ++whole === 3;
          if (afterCommit) throw new Error("KV Connect: 503");
          return file.kv.list(selector, options);
        },
      };
      const error = await moveKvToPostgres(kv, pg.sql, {
        schema: pg.schema,
        now: () => T0,
      }).then(() => null, (error) => error);
      assert.ok(error instanceof Error, String(error));
      assert.match(
        error.message,
        /^The move into schema \S+ committed, but Deno KV could not be read again after it \(Error: KV Connect: 503\), .* do not switch the service yet\. /,
      );
      assert.doesNotMatch(error.message, /Nothing was moved/);
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 1);
    }),
});

for (const when of ["during", "after"] as const) {
  Deno.test({
    name:
      `moveKvToPostgres() does not say moved when a tx is recorded on Deno KV ${when} its last look over the store, before PostgreSQL commits: it says the move committed without it`,
    ignore: !postgresAvailable,
    fn: () =>
      withBoth(async (file, pg) => {
        const store = new KvStore(file.kv);
        let paid = await authorized(store);
        for (let i = 2; i <= 50; i++) {
          await authorized(store, `pi_${String(i).padStart(4, "0")}`);
        }
        paid = await store.transition("pi_0001", {
          from: "authorized",
          to: "settling",
          version: paid.version,
          at: T0,
        });
        paid = await store.beginBroadcast("pi_0001", paid.version, T0);
        const kv = writingInLastLook(file.kv, when, async () => {
          await store.recordBroadcast("pi_0001", paid.version, {
            outcome: "sent",
            txHash: "0xPAID",
            at: T0,
          });
        });
        const outcome = await moveKvToPostgres(kv, pg.sql, {
          schema: pg.schema,
          now: () => T0,
        }).then((report) => report, (error) => error);
        assert.ok(
          outcome instanceof WrittenAfterMoveError,
          `the move said ${JSON.stringify(outcome?.moved ?? String(outcome))}`,
        );
        assert.equal(outcome.committed, true);
        assert.equal(outcome.report.moved.intents, 50);
        assert.match(
          outcome.message,
          /^The move into schema \S+ committed, but Deno KV's \["relayer","intent","pi_0001"\] was written after the move's last look at it: /,
        );
        assert.match(
          outcome.message,
          /empty the schema \(TRUNCATE "(\w+)"\.intents, "\1"\.holds, "\1"\.leases, "\1"\.counters, "\1"\.claims, "\1"\.dead_letters\) and run the move again/,
        );
        assert.doesNotMatch(outcome.message, /Nothing was moved/);
        // Deno KV holds the tx; the schema, as committed, does not.
        assert.deepEqual((await store.getIntent("pi_0001"))?.txHashes, [
          "0xPAID",
        ]);
        assert.deepEqual((await pg.store.getIntent("pi_0001"))?.txHashes, []);
        // Run again, the move refuses the schema naming that intent.
        const again = await moveAt(file, pg).then(() => null, (e) => e);
        assert.match(
          String(again?.message),
          /But Deno KV was written after these rows were: intent pi_0001 differs from its row/,
        );
      }),
  });
}

Deno.test({
  name:
    "moveKvToPostgres() reads an intent kept without mayHaveSent as the rules read it on Deno KV: one that may have sent, not a clean one",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      // A settling intent whose last send was declared not sent, kept
      // without the field (a record not written by KvStore itself: an
      // import by hand, a store of one's own on the same keys).
      await file.kv.atomic()
        .set(["relayer", "intent", "pi_0001"], {
          id: "pi_0001",
          state: "settling",
          settlingSince: T0,
          broadcasting: null,
          lastBroadcast: { outcome: "not_sent", at: T0 + 1000 },
          txHashes: [],
        })
        .set(["relayer", "hold", "pi_0001"], "pending")
        .commit();
      const onKv = await new KvStore(file.kv).getIntent("pi_0001");
      assert.deepEqual(planResolution(onKv), {
        action: "review",
        text: "an earlier broadcast may have been sent, needs review",
      });
      await moveAt(file, pg);
      const onPostgres = await pg.store.getIntent("pi_0001");
      assert.equal(onPostgres?.mayHaveSent, true);
      assert.deepEqual(planResolution(onPostgres), planResolution(onKv));
      // The queue's give-up on PostgreSQL sends the payment to review, its
      // hold left pending, as on Deno KV.
      const sender = new ScriptedSender({});
      const relayer = createRelayer({
        store: pg.store,
        sender,
        policy: POLICY,
        now: () => T0 + 10 * MINUTE,
        random: () => 0,
      });
      const outcome = await relayer.giveUp(job("pi_0001"), {
        deliveries: 5,
        queue: { queue: "qstash", messageId: "msg_1" },
      });
      assert.equal(outcome.action, "poison");
      assert.deepEqual(sender.calls, []);
      const after = await pg.store.getIntent("pi_0001");
      assert.equal(after?.state, "needs_review");
      assert.equal(after?.hold, "pending");
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() leaves a count an early revision kept as a plain number as lapsed, as KvStore reads it: the job's next delivery counts from 1 on both",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      await authorized(kvStore);
      // countDelivery() of the first KvStore: a number, with no expiry.
      await file.kv.set(["relayer", "deliveries", "pi_0001/settle"], 4);
      const report = await moveAt(file, pg);
      assert.equal(report.moved.counts, 0);
      assert.equal(report.left.lapsedCounts, 1);
      assert.equal(await pg.store.deliveries("pi_0001/settle", T0), 0);
      const count = { now: T0, count: "pi_0001/settle" };
      assert.equal(await kvStore.admit(count), 1);
      assert.equal(await pg.store.admit(count), 1);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses a schema that holds a row in any one of its tables, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      // A row each, alone: what a service run briefly on the schema leaves
      // (an unreadable message's letter, a signed delivery's replay record).
      const s = `"${pg.schema}"`;
      const rows = [
        [`${s}.intents (id, state) VALUES ('pi_0002', 'created')`, "1 intent"],
        [
          `${s}.counters (job_id, deliveries, expires_at) VALUES ('pi_0002/settle', 1, ${T0})`,
          "1 count",
        ],
        [
          `${s}.dead_letters (job_id, intent_id, deliveries, cause, reason, resolution, last_error, poisoned_at) VALUES ('unreadable:local:m-1', '', 0, 'exhausted', 'r', 'r', 'e', ${T0})`,
          "1 dead letter",
        ],
        [
          `${s}.claims (key, expires_at) VALUES ('sig_other', ${T0 + MINUTE})`,
          "1 replay record",
        ],
        [
          `${s}.leases (intent_id, owner, expires_at) VALUES ('pi_0002', 'delivery-1', ${T0})`,
          "1 lease",
        ],
      ] as const;
      for (const [values, held] of rows) {
        await pg.sql.unsafe(`INSERT INTO ${values}`);
        const table = values.slice(s.length + 1, values.indexOf(" "));
        const error = await moveAt(file, pg).then(() => null, (error) => error);
        assert.ok(error instanceof ConflictError, `${table}: ${error}`);
        assert.match(error.message, new RegExp(`already holds ${held}:`));
        assert.equal(await pg.store.getIntent("pi_0001"), null, table);
        assert.equal(
          (await rowCounts(pg.sql, pg.schema))[table],
          1,
          table,
        );
        await pg.sql.unsafe(`DELETE FROM ${s}.${table}`);
      }
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses a lease taken after its first look at the leases, before the copy began, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      // A delivery takes the lease as the move opens its transaction: the
      // lease is older than the copy's start mark, yet held.
      let taken = false;
      const kv: KvLike = {
        getMany: file.kv.getMany.bind(file.kv),
        list: file.kv.list.bind(file.kv),
        atomic: () => {
          if (!taken) {
            taken = true;
            return {
              commit: async () => {
                await file.kv.set(["relayer", "lease", "pi_0001"], {
                  owner: "delivery-1",
                  expiresAt: T0 + MINUTE,
                });
                return await file.kv.atomic().commit();
              },
            } as ReturnType<KvLike["atomic"]>;
          }
          return file.kv.atomic();
        },
      };
      const error = await moveKvToPostgres(kv, pg.sql, {
        schema: pg.schema,
        now: () => T0,
      }).then(() => null, (error) => error);
      assert.ok(taken);
      assert.ok(error instanceof BusyError, String(error));
      // Named as the first look names one: when the move takes it as lapsed.
      assert.equal(
        error.message,
        `Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until ${
          new Date(T0 + MINUTE).toISOString()
        }: pause the queue (or stop the service), wait until ${
          new Date(T0 + MINUTE + 5_000).toISOString()
        }, its expiry and the clock skew of 5s the move allows for another instance's clock, then run the move again. Nothing was moved.`,
      );
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() takes a lease as held until clockSkewMs past its expiry, as a delivery does, and free from then on",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      const skew = 5_000;
      await file.kv.set(["relayer", "lease", "pi_0001"], {
        owner: "delivery-1",
        expiresAt: T0,
      });
      const held = await moveKvToPostgres(file.kv, pg.sql, {
        schema: pg.schema,
        now: () => T0 + skew - 1,
        clockSkewMs: skew,
      }).then(() => null, (error) => error);
      assert.ok(held instanceof BusyError, String(held));
      // Its expiry is past: the refusal names the time it waits for.
      assert.equal(
        held.message,
        `Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until ${
          new Date(T0).toISOString()
        }: pause the queue (or stop the service), wait until ${
          new Date(T0 + skew).toISOString()
        }, its expiry and the clock skew of 5s the move allows for another instance's clock, then run the move again. Nothing was moved.`,
      );
      // No skew allowed: its expiry alone is the time, named once.
      const unskewed = await moveKvToPostgres(file.kv, pg.sql, {
        schema: pg.schema,
        now: () => T0 - 1,
        clockSkewMs: 0,
      }).then(() => null, (error) => error);
      assert.ok(unskewed instanceof BusyError, String(unskewed));
      assert.equal(
        unskewed.message,
        `Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until ${
          new Date(T0).toISOString()
        }: pause the queue (or stop the service), wait for the lease to lapse, then run the move again. Nothing was moved.`,
      );
      const report = await moveKvToPostgres(file.kv, pg.sql, {
        schema: pg.schema,
        now: () => T0 + skew,
        clockSkewMs: skew,
      });
      assert.equal(report.left.lapsedLeases, 1);
      assert.equal(report.moved.intents, 1);
    }),
});

/**
 * The move's refusal of `kv` while a delivery holds pi_0001's lease until
 * `expiresAt` (as Deno KV keeps it, whatever its type).
 */
async function heldLeaseRefusal(
  kv: Deno.Kv,
  pg: { sql: postgres.Sql; schema: string },
  expiresAt: unknown,
): Promise<BusyError> {
  await kv.set(["relayer", "lease", "pi_0001"], {
    owner: "delivery-1",
    expiresAt,
  });
  const error = await moveKvToPostgres(kv, pg.sql, {
    schema: pg.schema,
    now: () => T0,
  }).then(() => null, (error) => error);
  assert.ok(error instanceof BusyError, String(error));
  return error;
}

Deno.test({
  name:
    "moveKvToPostgres() refuses a lease held past the last time a Date can hold (a relayer's leaseMs that long, a clock beyond it) as held, with its expiry in milliseconds, not a RangeError",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      const expiresAt = 8_640_000_000_000_001;
      const error = await heldLeaseRefusal(file.kv, pg, expiresAt);
      assert.equal(
        error.message,
        `Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until ${expiresAt} (ms since 1970, past what a Date can show): pause the queue (or stop the service), wait until ${
          expiresAt + 5_000
        } (ms since 1970, past what a Date can show), its expiry and the clock skew of 5s the move allows for another instance's clock, then run the move again. Nothing was moved.`,
      );
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() names a held lease's expiry as ISO 8601 up to the last time a Date can hold, and no expiry for a lease whose expiresAt is no whole number",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      const messages: string[] = [];
      for (const expiresAt of [8_640_000_000_000_000, "soon"]) {
        messages.push((await heldLeaseRefusal(file.kv, pg, expiresAt)).message);
      }
      assert.deepEqual(messages, [
        "Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until +275760-09-13T00:00:00.000Z: pause the queue (or stop the service), wait until 8640000000005000 (ms since 1970, past what a Date can show), its expiry and the clock skew of 5s the move allows for another instance's clock, then run the move again. Nothing was moved.",
        "Cannot move from Deno KV as a delivery holds the lease of intent pi_0001: pause the queue (or stop the service), wait for the lease to lapse, then run the move again. Nothing was moved.",
      ]);
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() keeps each count's expiry, and leaves one that lapses at the move's time: PostgreSQL counts as Deno KV did until it lapses",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      await authorized(kvStore);
      const DAY = 24 * 60 * MINUTE;
      // Counted twice, lapsing 8 days after the second; and one that lapses
      // at the very time of the move.
      await kvStore.admit({ now: T0, count: "pi_0001/settle" });
      await kvStore.admit({ now: T0 + MINUTE, count: "pi_0001/settle" });
      await kvStore.admit({ now: T0, count: "pi_gone/settle", ttlMs: MINUTE });
      const at = T0 + MINUTE;
      const report = await moveAt(file, pg, at);
      assert.equal(report.moved.counts, 1);
      assert.equal(report.left.lapsedCounts, 1);
      const lapses = T0 + MINUTE + 8 * DAY;
      for (const when of [at, lapses - 1, lapses]) {
        assert.equal(
          await pg.store.deliveries("pi_0001/settle", when),
          await kvStore.deliveries("pi_0001/settle", when),
          String(when - at),
        );
      }
      assert.equal(await pg.store.deliveries("pi_0001/settle", lapses - 1), 2);
      // The next delivery before it lapses is the third, on both.
      const next = { now: lapses - 1, count: "pi_0001/settle" };
      assert.equal(await pg.store.admit(next), 3);
      assert.equal(await kvStore.admit(next), 3);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() moves a replay record past its expiry but within its grace, as Deno KV keeps it: a replay from an instance whose clock is behind is still refused",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      const GRACE = 10 * MINUTE; // CLAIM_GRACE_MS
      const at = T0 + GRACE + MINUTE;
      // Lapsed a minute before the move; lapsed the grace before it.
      await kvStore.admit({
        now: T0,
        claim: { key: "sig_recent", now: T0, expiresAt: at - MINUTE },
      });
      await kvStore.admit({
        now: T0,
        claim: { key: "sig_old", now: T0, expiresAt: at - GRACE },
      });
      const report = await moveAt(file, pg, at);
      assert.equal(report.moved.claims, 1);
      assert.equal(report.left.lapsedClaims, 1);
      // Another instance's clock, two minutes behind the move's.
      const behind = at - 2 * MINUTE;
      const replay = {
        now: behind,
        claim: { key: "sig_recent", now: behind, expiresAt: at + MINUTE },
      };
      await assert.rejects(kvStore.admit(replay), ReplayError);
      await assert.rejects(pg.store.admit(replay), ReplayError);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() moves a dead letter whose reason, resolution and last error hold U+0000 with each as U+FFFD, as PostgresStore keeps them",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const store = new KvStore(file.kv);
      await store.createIntent({ id: "pi_1", state: "authorized" });
      // KvStore keeps them as they came: a Sender's error text, and a
      // resolution quoting a hash a broken Sender returned.
      await store.putDeadLetter({
        jobId: "pi_1/settle",
        intentId: "pi_1",
        deliveries: 3,
        cause: "exhausted",
        reason: "gave up after 3 deliveries: rpc:\0 reset",
        resolution: "last broadcast sent as 0xab\0cd, needs review",
        lastError: "rpc:\0 reset",
        poisonedAt: T0,
      });
      assert.equal((await moveAt(file, pg)).moved.deadLetters, 1);
      const letter = await pg.store.getDeadLetter("pi_1/settle");
      assert.deepEqual(
        [letter?.reason, letter?.resolution, letter?.lastError],
        [
          "gave up after 3 deliveries: rpc:\uFFFD reset",
          "last broadcast sent as 0xab\uFFFDcd, needs review",
          "rpc:\uFFFD reset",
        ],
      );
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() moves intents KvStore did not write itself as KvStore reads them: a created one without mayHaveSent, one stored before 0.2 without txHashes, one whose last error holds U+0000",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      await file.kv.atomic()
        .set(["relayer", "intent", "pi_created"], {
          id: "pi_created",
          state: "created",
          settlingSince: null,
          broadcasting: null,
          lastBroadcast: null,
        })
        .set(["relayer", "intent", "pi_old"], {
          id: "pi_old",
          state: "settling",
          settlingSince: T0,
          broadcasting: null,
          mayHaveSent: true,
          lastBroadcast: { outcome: "sent", txHash: "0x0ld", at: T0 },
        })
        .set(["relayer", "hold", "pi_old"], "pending")
        .set(["relayer", "intent", "pi_nul"], {
          id: "pi_nul",
          state: "settling",
          settlingSince: T0,
          broadcasting: null,
          mayHaveSent: true,
          lastBroadcast: { outcome: "unknown", at: T0, error: "rpc:\0 reset" },
          txHashes: [],
        })
        .set(["relayer", "hold", "pi_nul"], "pending")
        .commit();
      const report = await moveAt(file, pg);
      assert.equal(report.moved.intents, 3);
      const created = await pg.store.getIntent("pi_created");
      assert.equal(created?.mayHaveSent, false);
      assert.equal(created?.state, "created");
      // The hash of the send on record, which a receipt is looked up by.
      assert.deepEqual((await pg.store.getIntent("pi_old"))?.txHashes, [
        "0x0ld",
      ]);
      assert.deepEqual(
        (await pg.store.getIntent("pi_old"))?.txHashes,
        (await kvStore.getIntent("pi_old"))?.txHashes,
      );
      assert.equal(
        (await pg.store.getIntent("pi_nul"))?.lastBroadcast?.error,
        "rpc:\uFFFD reset",
      );
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses an intent an earlier version took with mayHaveSent false beside a send on record, saying what to mend on Deno KV, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      // Taken by createIntent before this version refused it
      // (docs/upgrading.md): KvStore still reads it as it is.
      await file.kv.atomic()
        .set(["relayer", "intent", "pi_taken"], {
          id: "pi_taken",
          state: "authorized",
          settlingSince: null,
          broadcasting: null,
          mayHaveSent: false,
          lastBroadcast: { outcome: "sent", txHash: "0x7a4e", at: T0 },
          txHashes: ["0x7a4e"],
        })
        .set(["relayer", "hold", "pi_taken"], "pending")
        .commit();
      const refused = await moveAt(file, pg).then(() => null, (e) => e);
      assert.ok(refused instanceof TypeError, String(refused));
      assert.match(
        refused.message,
        /^Cannot move from Deno KV as \["relayer","intent","pi_taken"\] holds an intent with mayHaveSent false beside a send on record \(its last broadcast is sent\), which an earlier version took and no store writes now \(docs\/upgrading\.md\): /,
      );
      // What to do is on Deno KV, not an option of createIntent's.
      assert.match(
        refused.message,
        /With the service stopped, set mayHaveSent to true in that record on Deno KV .*then run the move again\. Nothing was moved\.$/,
      );
      assert.ok(!refused.message.includes("pass true"), refused.message);
      assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS);

      // Mended as it says, it moves, its send counted.
      const entry = await file.kv.get<Record<string, unknown>>([
        "relayer",
        "intent",
        "pi_taken",
      ]);
      await file.kv.set(entry.key, { ...entry.value, mayHaveSent: true });
      assert.equal((await moveAt(file, pg)).moved.intents, 1);
      const moved = await pg.store.getIntent("pi_taken");
      assert.equal(moved?.mayHaveSent, true);
      assert.deepEqual(moved?.txHashes, ["0x7a4e"]);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() names the send on record beside mayHaveSent false as it is kept (an unknown outcome, a tx hash, a broadcast in flight), and calls an intent wrong for more than that, or created, malformed",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const base = {
        id: "pi_taken",
        state: "authorized",
        settlingSince: null,
        broadcasting: null,
        mayHaveSent: false,
        lastBroadcast: null,
        txHashes: [],
      };
      const cases: [string, Record<string, unknown>, RegExp][] = [
        [
          "unknown",
          { lastBroadcast: { outcome: "unknown", at: T0 } },
          /beside a send on record \(its last broadcast is unknown\)/,
        ],
        [
          "a tx hash",
          { txHashes: ["0x7a4e"] },
          /beside a send on record \(it has a tx hash on record \("0x7a4e"\)\)/,
        ],
        [
          "in flight",
          // Authorized, a send before the move to settling is another
          // process's.
          { broadcasting: T0 },
          /beside a send on record \(a broadcast in flight \('broadcasting'\)\)/,
        ],
        [
          "wrong for more",
          {
            state: "settled",
            lastBroadcast: { outcome: "sent", txHash: "0x7a4e", at: T0 },
            txHashes: ["0x7a4e"],
            settlingSince: "never",
          },
          /^Cannot move from Deno KV as \["relayer","intent","pi_taken"\] does not hold an intent \(/,
        ],
        [
          "created",
          {
            state: "created",
            lastBroadcast: { outcome: "sent", txHash: "0x7a4e", at: T0 },
            txHashes: ["0x7a4e"],
          },
          /^Cannot move from Deno KV as \["relayer","intent","pi_taken"\] does not hold an intent \(/,
        ],
      ];
      const key = ["relayer", "intent", "pi_taken"];
      for (const [what, fields, said] of cases) {
        await file.kv.set(key, { ...base, ...fields });
        const refused = await moveAt(file, pg).then(() => null, (e) => e);
        assert.ok(refused instanceof TypeError, `${what}: ${refused}`);
        assert.match(refused.message, said, what);
        assert.deepEqual(await rowCounts(pg.sql, pg.schema), NO_ROWS, what);
      }
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() moves the holds of intents it has not sent yet when a statement of holds fills: every intent is in before the first hold",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      // 1,500 intents, the first 500 without a hold: the first 1,000 holds
      // name intents the copy's second statement of intents carries.
      for (let i = 0; i < 1500; i += 100) {
        const atomic = file.kv.atomic();
        for (let j = i; j < i + 100; j++) {
          const id = `pi_${String(j).padStart(5, "0")}`;
          atomic.set(["relayer", "intent", id], {
            id,
            state: j < 500 ? "created" : "authorized",
            settlingSince: null,
            broadcasting: null,
            mayHaveSent: false,
            lastBroadcast: null,
            txHashes: [],
          });
          if (j >= 500) atomic.set(["relayer", "hold", id], "pending");
        }
        assert.ok((await atomic.commit()).ok);
      }
      const report = await moveAt(file, pg);
      assert.equal(report.moved.intents, 1500);
      assert.equal(report.moved.holds, 1000);
      assert.equal((await pg.store.getIntent("pi_01499"))?.hold, "pending");
      assert.equal((await pg.store.getIntent("pi_00000"))?.hold, null);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses with a BusyError a schema whose tables another session holds past its wait, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      await authorized(new KvStore(file.kv));
      // An instance's write left open on the intents, for longer than the
      // move waits for its lock (10 s).
      const other = await connect(1);
      const reserved = await other.reserve();
      try {
        await reserved`BEGIN`;
        await reserved.unsafe(
          `INSERT INTO "${pg.schema}".claims (key, expires_at) VALUES ('sig_open', ${T0})`,
        );
        const error = await moveAt(file, pg).then(() => null, (error) => error);
        assert.ok(error instanceof BusyError, String(error));
        assert.match(
          error.message,
          /held its tables for over 10000ms \(see pg_stat_activity\): stop every instance/,
        );
        await reserved`ROLLBACK`;
      } finally {
        reserved.release();
        await other.end();
      }
      assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
    }),
});

Deno.test({
  name:
    "moveKvToPostgres() refuses a record kept under a key not its own, or under a key PostgreSQL text cannot hold, naming it, and writes nothing",
  ignore: !postgresAvailable,
  fn: () =>
    withBoth(async (file, pg) => {
      const kvStore = new KvStore(file.kv);
      await authorized(kvStore);
      await kvStore.putDeadLetter({
        jobId: "pi_0001/settle",
        intentId: "pi_0001",
        deliveries: 3,
        cause: "exhausted",
        reason: "no luck after 3 deliveries",
        resolution: "job dropped, intent still authorized",
        lastError: "rpc: connection refused",
        poisonedAt: T0,
      });
      const intent = await file.kv.get(["relayer", "intent", "pi_0001"]);
      const letter = await file.kv.get(["relayer", "dead", "pi_0001/settle"]);
      const cases = [
        // An intent copied to another id by hand: the record says pi_0001.
        [
          ["relayer", "intent", "pi_0002"],
          intent.value,
          /the intent of its key/,
        ],
        [
          ["relayer", "dead", "pi_0002/settle"],
          letter.value,
          /the dead letter of its job/,
        ],
        [
          ["relayer", "claim", "sig\0x"],
          { expiresAt: T0 + MINUTE },
          /holds U\+0000/,
        ],
      ] as const;
      for (const [key, value, refusal] of cases) {
        await file.kv.set(key, value);
        const error = await moveAt(file, pg).then(() => null, (error) => error);
        assert.ok(error instanceof TypeError, `${key}: ${error}`);
        assert.match(error.message, refusal);
        assert.ok(error.message.includes(JSON.stringify(key)), error.message);
        assert.equal((await rowCounts(pg.sql, pg.schema)).intents, 0);
        await file.kv.delete(key);
      }
      assert.equal(
        (await moveAt(file, pg)).moved.deadLetters,
        1,
      );
    }),
});

// As KvStore: a prefix of null (a tenant's prefix not filled in) moved the
// default prefix's intents, another tenant's, in silence.
Deno.test("moveKvToPostgres() refuses a prefix of null, naming it, before it reads or writes anything", async () => {
  const kv = {
    list: () => {
      throw new Error("no read expected");
    },
  } as unknown as KvLike;
  const sql = Object.assign(() => {
    throw new Error("no query expected");
  }, { begin: () => Promise.reject(new Error("no query expected")) });
  await assert.rejects(
    moveKvToPostgres(kv, sql as never, { prefix: null as never }),
    (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(
        error.message,
        `Cannot move from Deno KV as 'prefix' must be the KvStore's prefix, an array of key parts such as ["relayer"]: current value is null`,
      );
      return true;
    },
  );
});
