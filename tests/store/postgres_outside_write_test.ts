/**
 * PostgresStore when a cancel cuts a write's flight before its `BEGIN`
 * ran, and the intent moved on between the write's read and its flight:
 * the statements pipelined behind the cut query run outside any
 * transaction, each on its own, so the write's check of what it read
 * (the version, `refuse_stale`) fails alone and the writes behind it
 * would land without their guard (a void of the hold after a
 * write-ahead: a send may be in flight). The schema refuses each of the
 * store's statements (marked `WRITE_MARK`) outside a transaction that set
 * `relayer.in_write`, so nothing of it lands. And that a write by hand
 * and an older relayer's writes (unmarked) need nothing, and how
 * `migrate()` puts the guard on a schema.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BusyError } from "../../store/busy_error.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  EARLIER_MARK,
  IN_WRITE,
  WRITE_MARK,
} from "../../store/_postgres_schema.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";
import {
  cancelOnceRunning,
  misspelt,
  sleepingQuery,
  throughRelay,
} from "./_cut.ts";
import { markedBump, outcome } from "./_guard.ts";

const NAME = "outside_write";
const SLEEP = "SELECT pg_sleep(5); ";

/**
 * The flight's first query (a simple query, 'Q', at the chunk's start)
 * with `SLEEP` put before its text: a cancel then cuts it before its
 * `BEGIN` ran, as one that reaches the server as the flight begins does.
 */
function sleepingFirst(text: string): Uint8Array | undefined {
  if (text[0] !== "Q") return;
  return sleepingQuery(
    text,
    SLEEP,
    (query) => query.includes("SET LOCAL lock_timeout"),
  );
}

/**
 * A void of `pi_1` (settling, nothing sent) whose flight's first query a
 * cancel cuts before its `BEGIN` ran, after another instance wrote ahead
 * of a send between the void's read and its flight (`movedOn`) or not:
 * either way nothing of the void lands, and it answers "nothing was
 * written".
 */
async function cutVoid(movedOn: boolean): Promise<void> {
  let armed = false;
  let cancel: Promise<boolean> = Promise.resolve(false);
  await throughRelay({ max: 1, name: NAME }, ({ admin, schema }) => {
    const other = new PostgresStore(admin, { schema });
    return async (text) => {
      if (!armed) return;
      const rewritten = sleepingFirst(text);
      if (rewritten === undefined) return;
      armed = false;
      // Between the void's read and its flight: the write-ahead of a
      // send, by another instance.
      if (movedOn) {
        const read = await other.getIntent("pi_1");
        await other.beginBroadcast("pi_1", read!.version, 1);
      }
      // Once the first query sleeps, before its BEGIN: cancelled.
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return rewritten;
    };
  }, async ({ admin, schema, sql }) => {
    const store = new PostgresStore(sql, { schema });
    await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      mayHaveSent: false,
    });
    armed = true;
    const answer = await store.voidHold("pi_1").then(
      () => null,
      (error: Error) => error,
    );
    assert.ok(await cancel, "the cancel cut the flight's first query");
    const [row] = await admin.unsafe(
      `SELECT h.state AS hold, i.broadcasting, i.version
       FROM "${schema}".intents i JOIN "${schema}".holds h
         ON h.intent_id = i.id WHERE i.id = 'pi_1'`,
    );
    // The write-ahead stands, its hold pending: nothing of the void
    // landed, and the write says so.
    assert.deepEqual(
      { hold: row?.hold, broadcasting: row?.broadcasting },
      { hold: "pending", broadcasting: movedOn ? "1" : null },
    );
    assert.ok(answer instanceof BusyError, String(answer));
    assert.match(answer.message, /nothing was written; retry$/);
  });
}

Deno.test({
  name:
    "PostgresStore: a void whose flight's BEGIN a cancel cut, after a write-ahead moved the intent on, lands nothing outside its transaction",
  ignore: !postgresAvailable,
  // The relay runs in this process: its sockets close as the abort
  // reaches them, after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () => cutVoid(true),
});

// Nothing moved: the version check behind the cut BEGIN passes on its
// own, and only the guard refuses the writes. The answer is the first
// query's error ("nothing was written"), not "it may have landed".
Deno.test({
  name:
    "PostgresStore: a void whose flight's BEGIN a cancel cut, the intent unchanged, lands nothing and says so",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () => cutVoid(false),
});

// The check at the head of a dead letter's flight (the intent still at
// the version read: a `SELECT … FOR SHARE`, which fires no trigger)
// answers outside the transaction behind the cut BEGIN, and the letter's
// statement behind it is refused before its guard ran (here misspelt, as a
// second cancel that cuts it in its parse would): nothing landed, and the
// answer is the first query's error. It answered that the guard let a
// write through ("it may have landed"): the crash test's cancel fault met
// it on a give-up's void, and four sessions cancelling one met it about
// once in 900 refused writes.
Deno.test({
  name:
    "PostgresStore: a dead letter whose flight's BEGIN a cancel cut, its check answered outside the transaction and its own statement refused before its guard ran, lands nothing and says so, not that the guard let a write through",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    let armed = false;
    let cut = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    await throughRelay({ max: 1, name: NAME }, ({ admin }) => {
      return (text) => {
        if (!armed) return Promise.resolve();
        let rewritten: Uint8Array | undefined;
        if (!cut) {
          rewritten = sleepingFirst(text);
          if (rewritten === undefined) return Promise.resolve();
          cut = true;
          cancel = cancelOnceRunning(admin, NAME, SLEEP);
          text = new TextDecoder("latin1").decode(rewritten);
        }
        // The letter's statement, behind the check (its first DELETE).
        const refused = misspelt(text, "DELETE FROM", "DELETX FROM");
        if (refused !== undefined) armed = false;
        return Promise.resolve(refused ?? rewritten);
      };
    }, async ({ admin, schema, sql }) => {
      const intent = await new PostgresStore(admin, { schema }).createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      const store = new PostgresStore(sql, { schema });
      armed = true;
      const answer = await store.putDeadLetter({
        jobId: "job_1",
        intentId: "pi_1",
        deliveries: 1,
        cause: "declared",
        reason: "declared poison",
        resolution: "dropped",
        lastError: "boom",
        poisonedAt: 1,
      }, { intentVersion: intent.version }).then(
        () => null,
        (error: Error) => error,
      );
      assert.ok(await cancel, "the cancel cut the flight's first query");
      assert.equal(armed, false, "the letter's statement was not refused");
      const rows = await admin.unsafe(
        `SELECT 1 FROM "${schema}".dead_letters WHERE job_id = 'job_1'`,
      );
      assert.equal(rows.length, 0);
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
    });
  },
});

Deno.test({
  name:
    "PostgreSQL: a write by hand needs nothing; a statement marked as the store's is refused outside a transaction that set relayer.in_write, and lands inside one; migrate() guards a schema an older version made, and enables a guard disabled",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql, store }) => {
    await store.createIntent({ id: "pi_1", state: "authorized" });
    // By hand (an operator, the payments API): no setting, no
    // transaction of its own, on the store's own client too.
    await sql.unsafe(
      `UPDATE "${schema}".intents SET version = version + 1 WHERE id = 'pi_1'`,
    );
    await admin`UPDATE ${admin(schema)}.intents SET version = version + 1
      WHERE id = ${"pi_1"}`;
    assert.equal((await store.getIntent("pi_1"))?.version, "3");
    // The store's mark, outside its transaction: refused, each statement
    // alone (a simple query and a prepared one).
    const marked = markedBump(schema);
    for (
      const attempt of [
        () => sql.unsafe(marked),
        () => sql.unsafe(marked, [], { prepare: true }),
      ]
    ) {
      const refused = await attempt().then(
        () => null,
        (error: Error & { code?: string; hint?: string }) => error,
      );
      assert.equal(refused?.code, "RL003");
      assert.equal(
        refused?.message,
        `a write of the relayer's to ${schema}.intents ran outside its transaction (a cancel cut its BEGIN): refused`,
      );
      assert.match(String(refused?.hint), /a write by hand needs nothing/);
    }
    assert.equal((await store.getIntent("pi_1"))?.version, "3");
    // Inside a transaction that set it, as the store's flight is: it lands.
    await sql.begin(async (tx) => {
      await tx.unsafe(IN_WRITE);
      await tx.unsafe(marked);
    });
    assert.equal((await store.getIntent("pi_1"))?.version, "4");

    const guards = async () =>
      (await admin.unsafe(
        `SELECT count(*)::int AS n FROM pg_trigger
         WHERE tgname = 'in_write_only' AND tgenabled <> 'D'
           AND tgrelid IN (SELECT oid FROM pg_class
             WHERE relnamespace = '"${schema}"'::regnamespace)`,
      ))[0]!.n;
    assert.equal(await guards(), 6);
    // A schema the version before made: no guard.
    for (
      const table of [
        "intents",
        "holds",
        "leases",
        "counters",
        "claims",
        "dead_letters",
      ]
    ) {
      await admin.unsafe(
        `DROP TRIGGER in_write_only ON "${schema}".${table}`,
      );
    }
    await new PostgresStore(sql, { schema }).migrate();
    assert.equal(await guards(), 6);
    await admin.unsafe(
      `ALTER TABLE "${schema}".holds DISABLE TRIGGER in_write_only`,
    );
    await new PostgresStore(sql, { schema }).migrate();
    assert.equal(await guards(), 6);
  }),
});

Deno.test({
  name:
    "PostgreSQL: the guard refuses a marked statement on a session that never set relayer.in_write, and a marked INSERT or DELETE; the mark elsewhere than a statement's start is not the store's; migrate() replaces a guard that refuses every write",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql, store }) => {
    await store.createIntent({ id: "pi_1", state: "authorized" });
    const s = `"${schema}"`;
    const refused = async (run: () => Promise<unknown>, what: string) => {
      const error = await run().then(
        () => null,
        (error: Error & { code?: string }) => error,
      );
      assert.equal(error?.code, "RL003", what);
    };
    // admin's sessions never ran IN_WRITE: the setting is not defined
    // there at all (a new connection whose flight's BEGIN was cut).
    await refused(
      () =>
        admin.unsafe(
          `${WRITE_MARK}UPDATE ${s}.intents SET version = version + 1 WHERE id = 'pi_1'`,
        ),
      "a session that never set it",
    );
    // Every kind of write the store sends (a sweep's and a redrive's
    // DELETE, an admit's INSERT), each refused with no row touched.
    await refused(
      () => sql.unsafe(`${WRITE_MARK}DELETE FROM ${s}.leases WHERE false`),
      "DELETE",
    );
    await refused(
      () =>
        sql.unsafe(
          `${WRITE_MARK}INSERT INTO ${s}.counters SELECT * FROM ${s}.counters WHERE false`,
        ),
      "INSERT",
    );
    assert.equal((await store.getIntent("pi_1"))?.version, "1");
    // The mark inside a statement of one's own (a comment copied along)
    // does not make it the store's.
    await admin.unsafe(
      `UPDATE ${s}.intents SET version = version + 1 WHERE id = 'pi_1' ${WRITE_MARK}`,
    );
    assert.equal((await store.getIntent("pi_1"))?.version, "2");
    // A schema migrated by the version whose guard refused every write
    // outside relayer.in_write: the next migrate() replaces it, and a
    // write by hand lands again.
    await admin.unsafe(
      `CREATE OR REPLACE FUNCTION ${s}.refuse_outside() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          IF coalesce(current_setting('relayer.in_write', true), '') <> 'on' THEN
            RAISE EXCEPTION 'outside' USING ERRCODE = 'RL003';
          END IF;
          RETURN NULL;
        END
        $$`,
    );
    const byHand = () =>
      admin.unsafe(
        `UPDATE ${s}.intents SET version = version + 1 WHERE id = 'pi_1'`,
      );
    await refused(byHand, "the guard of the version before");
    await new PostgresStore(sql, { schema }).migrate();
    await byHand();
    assert.equal((await store.getIntent("pi_1"))?.version, "3");
  }),
});

/**
 * What a relayer of an earlier version sends, rewritten from this one's
 * bytes on their way to the server: in each Parse ('P') and simple query
 * ('Q'), `WRITE_MARK` replaced by that version's `mark` and `IN_WRITE` by
 * its `inWrite` (the version before the marks: neither, both empty).
 * Messages are cut where the client's chunks are, so each connection
 * keeps what a chunk left of a message for the next one; its first
 * message (the startup, or an SSL request) has no type byte.
 */
function asEarlier(
  { mark, inWrite }: { mark: string; inWrite: string },
): (text: string, connection: number) => Uint8Array {
  const left = new Map<number, string>();
  const started = new Set<number>();
  const bytes = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
  const length = (s: string, at: number) =>
    new DataView(bytes(s.slice(at, at + 4)).buffer).getUint32(0);
  const framed = (type: string, body: string) => {
    const out = new Uint8Array(5 + body.length);
    out[0] = type.charCodeAt(0);
    new DataView(out.buffer).setUint32(1, 4 + body.length);
    out.set(bytes(body), 5);
    return out;
  };
  return (text, connection) => {
    let rest = (left.get(connection) ?? "") + text;
    const out: Uint8Array[] = [];
    for (;;) {
      if (!started.has(connection)) {
        if (rest.length < 8) break;
        const n = length(rest, 0);
        if (rest.length < n) break;
        // An SSL request (80877103) is followed by the startup.
        if (!(n === 8 && length(rest, 4) === 80877103)) started.add(connection);
        out.push(bytes(rest.slice(0, n)));
        rest = rest.slice(n);
        continue;
      }
      if (rest.length < 5) break;
      const n = length(rest, 1);
      if (rest.length < 1 + n) break;
      const type = rest[0]!;
      let body = rest.slice(5, 1 + n);
      if (type === "P" || type === "Q") {
        body = body.replaceAll(WRITE_MARK, mark).replaceAll(
          `${IN_WRITE}; `,
          inWrite && `${inWrite}; `,
        );
      }
      out.push(framed(type, body));
      rest = rest.slice(1 + n);
    }
    left.set(connection, rest);
    const joined = new Uint8Array(out.reduce((sum, b) => sum + b.length, 0));
    let at = 0;
    for (const b of out) {
      joined.set(b, at);
      at += b.length;
    }
    return joined;
  };
}

/**
 * A store of an earlier version (`earlier`, see {@linkcode asEarlier})
 * through a relay that rewrites this one's statements as that version
 * sent them: on a schema this version migrated, each of its writes lands,
 * as during a rollout.
 */
async function earlierWrites(
  earlier: { mark: string; inWrite: string },
): Promise<void> {
  const rewrite = asEarlier(earlier);
  let marks = 0;
  await throughRelay({ max: 2 }, () => (text, connection) => {
    marks += text.split(WRITE_MARK).length - 1;
    return Promise.resolve(rewrite(text, connection));
  }, async ({ admin, schema, sql }) => {
    const old = new PostgresStore(sql, { schema });
    await old.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      mayHaveSent: false,
    });
    let intent = (await old.getIntent("pi_1"))!;
    intent = await old.beginBroadcast("pi_1", intent.version, 1);
    intent = await old.recordBroadcast("pi_1", intent.version, {
      outcome: "not_sent",
      at: 2,
    });
    assert.equal(await old.voidHold("pi_1"), "voided");
    assert.equal(await old.admit({ count: "pi_1/settle", now: 3 }), 1);
    // Its statements reached the server as that version sent them, and
    // the guard let each through: they landed.
    assert.ok(marks > 0, "the relay rewrote the store's writes");
    const [row] = await admin.unsafe(
      `SELECT h.state AS hold, i.broadcasting FROM "${schema}".intents i
       JOIN "${schema}".holds h ON h.intent_id = i.id WHERE i.id = 'pi_1'`,
    );
    assert.equal(row?.hold, "voided");
  });
}

Deno.test({
  name:
    "PostgresStore: a relayer of the version before (no mark, no relayer.in_write) keeps writing on a schema this version migrated, as during a rollout",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () => earlierWrites({ mark: "", inWrite: "" }),
});

Deno.test({
  name:
    "PostgresStore: a relayer of the versions a04d928 to 1ace61d (statements marked /* relayer:write */, relayer.in_write set to on) keeps writing on a schema this version migrated, as during a rollout",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    earlierWrites({
      mark: `${EARLIER_MARK} `,
      inWrite: "SET LOCAL relayer.in_write = 'on'",
    }),
});

Deno.test({
  name:
    "PostgreSQL: a statement marked as the versions a04d928 to 1ace61d marked theirs is refused outside a transaction that set relayer.in_write on, as their guard refused it; on lets none of this version's through",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ schema, sql, store }) => {
    await store.createIntent({ id: "pi_1", state: "authorized" });
    // That version's statement alone (a cancel cut its BEGIN): refused.
    assert.equal(
      await outcome(sql.unsafe(markedBump(schema, `${EARLIER_MARK} `))),
      "RL003",
    );
    // This version's, in a transaction that set only that version's `on`:
    // refused, the transaction's moment is what it asks.
    assert.equal(
      await outcome(sql.begin(async (tx) => {
        await tx.unsafe("SET LOCAL relayer.in_write = 'on'");
        await tx.unsafe(markedBump(schema));
      })),
      "RL003",
    );
    // That version's, in its transaction: landed.
    assert.equal(
      await outcome(sql.begin(async (tx) => {
        await tx.unsafe("SET LOCAL relayer.in_write = 'on'");
        await tx.unsafe(markedBump(schema, `${EARLIER_MARK} `));
      })),
      "landed",
    );
    assert.equal((await store.getIntent("pi_1"))?.version, "2");
  }),
});

Deno.test({
  name:
    "PostgreSQL: relayer.in_write left on for a session (a SET, set_config(…, false); behind a pooler in transaction mode, another client's) lets no statement marked as the store's through outside its transaction",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql, store }) => {
    // A schema whose guard took any transaction's `on` (as migrated
    // before): the next migration puts this version's in its place.
    await admin.unsafe(
      `CREATE OR REPLACE FUNCTION "${schema}".refuse_outside() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          IF starts_with(current_query(), '${EARLIER_MARK}')
            AND coalesce(current_setting('relayer.in_write', true), '') <> 'on' THEN
            RAISE EXCEPTION 'outside' USING ERRCODE = 'RL003';
          END IF;
          RETURN NULL;
        END
        $$`,
    );
    await store.migrate();
    await store.createIntent({ id: "pi_1", state: "authorized" });
    // `sql` has one connection: each setting holds for the statement
    // after it, as for the store's statements on a server session of a
    // pooler that another client's SET left so.
    for (
      const set of [
        "SET relayer.in_write = 'on'",
        "SELECT set_config('relayer.in_write', 'on', false)",
      ]
    ) {
      await sql.unsafe(set);
      assert.equal(
        await outcome(sql.unsafe(markedBump(schema))),
        "RL003",
        `after ${set}`,
      );
      // The store's own writes land on that session.
      const id = `pi_${set.length}`;
      await store.createIntent({ id, state: "authorized" });
      assert.equal((await store.getIntent(id))?.state, "authorized");
      await sql.unsafe("RESET relayer.in_write");
    }
    assert.equal((await store.getIntent("pi_1"))?.version, "1");
  }),
});

Deno.test({
  name:
    "PostgreSQL: with session_replication_role = replica (a restore's or a replication tool's, for a session, a role or the database), the guard still refuses a statement marked as the store's outside its transaction",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql, store }) => {
    await store.createIntent({ id: "pi_1", state: "authorized" });
    // A schema this version made: its guards fire in replica mode too.
    await sql.unsafe("SET session_replication_role = replica");
    try {
      assert.equal(await outcome(sql.unsafe(markedBump(schema))), "RL003");
    } finally {
      await sql.unsafe("RESET session_replication_role");
    }
    // A schema migrated before: its guards fire in origin mode only.
    for (const table of ["intents", "holds"]) {
      await admin.unsafe(
        `ALTER TABLE "${schema}".${table} ENABLE TRIGGER in_write_only`,
      );
    }
    await store.migrate();
    // `sql` has one connection: the setting holds for what follows. The
    // test's role is a superuser, as one who may set it.
    await sql.unsafe("SET session_replication_role = replica");
    try {
      assert.equal(await outcome(sql.unsafe(markedBump(schema))), "RL003");
      // The store's own writes land.
      await store.createIntent({ id: "pi_2", state: "authorized" });
      assert.equal((await store.getIntent("pi_2"))?.state, "authorized");
    } finally {
      await sql.unsafe("RESET session_replication_role");
    }
    assert.equal((await store.getIntent("pi_1"))?.version, "1");
  }),
});
