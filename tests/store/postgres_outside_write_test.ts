/**
 * PostgresStore when a cancel cuts a write's flight before its `BEGIN`
 * ran, and the intent moved on between the write's read and its flight:
 * the statements pipelined behind the cut query run outside any
 * transaction, each on its own, so the write's check of what it read
 * (the version, `refuse_stale`) fails alone and the writes behind it
 * would land without their guard (a void of the hold after a
 * write-ahead: a send may be in flight). The schema refuses every write
 * to the store's tables outside a transaction that set
 * `relayer.in_write`, so nothing of it lands. And what an operator's
 * write by hand meets, and how `migrate()` puts the guard on a schema.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../store/busy_error.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { IN_WRITE } from "../../store/_postgres_schema.ts";
import {
  connect,
  freshSchema,
  onFreshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { relayed } from "./_cut.ts";

const NAME = "outside_write";
const SLEEP = "SELECT pg_sleep(5); ";

/**
 * The flight's first query (a simple query, 'Q', at the chunk's start)
 * with `SLEEP` put before its text: a cancel then cuts it before its
 * `BEGIN` ran, as one that reaches the server as the flight begins does.
 */
function sleepingFirst(text: string): Uint8Array | undefined {
  if (text[0] !== "Q" || !text.includes("SET LOCAL lock_timeout")) return;
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
  const length = new DataView(bytes.buffer).getUint32(1);
  const query = text.slice(5, 1 + length);
  const rewritten = SLEEP + query;
  const out = new Uint8Array(5 + rewritten.length + (text.length - 1 - length));
  out[0] = 0x51;
  new DataView(out.buffer).setUint32(1, 4 + rewritten.length);
  out.set(Uint8Array.from(rewritten, (c) => c.charCodeAt(0)), 5);
  out.set(bytes.subarray(1 + length), 5 + rewritten.length);
  return out;
}

Deno.test({
  name:
    "PostgresStore: a void whose flight's BEGIN a cancel cut, after a write-ahead moved the intent on, lands nothing outside its transaction",
  ignore: !postgresAvailable,
  // The relay runs in this process: its sockets close as the abort
  // reaches them, after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const stop = new AbortController();
    const admin = await connect(2);
    const schema = freshSchema();
    const other = new PostgresStore(admin, { schema });
    let armed = false;
    let cancelled = false;
    const through = relayed(await postgresUrl(), async (text) => {
      if (!armed) return;
      const rewritten = sleepingFirst(text);
      if (rewritten === undefined) return;
      armed = false;
      // Between the void's read and its flight: the write-ahead of a
      // send, by another instance.
      const read = await other.getIntent("pi_1");
      await other.beginBroadcast("pi_1", read!.version, 1);
      // Once the first query sleeps, before its BEGIN: cancelled.
      void (async () => {
        for (let tries = 0; tries < 200 && !cancelled; tries++) {
          const [row] = await admin`
            SELECT count(pg_cancel_backend(pid))::int AS n
            FROM pg_stat_activity
            WHERE application_name = ${NAME} AND state = 'active'
              AND query LIKE ${SLEEP + "%"}`;
          cancelled = row?.n === 1;
          if (!cancelled) await new Promise((r) => setTimeout(r, 10));
        }
      })();
      return rewritten;
    }, stop.signal);
    const sql = postgres(through, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      connection: { application_name: NAME },
    });
    try {
      await other.migrate();
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
      assert.ok(cancelled, "the cancel cut the flight's first query");
      const [row] = await admin.unsafe(
        `SELECT h.state AS hold, i.broadcasting, i.version
         FROM "${schema}".intents i JOIN "${schema}".holds h
           ON h.intent_id = i.id WHERE i.id = 'pi_1'`,
      );
      // The write-ahead stands, its hold pending: nothing of the void
      // landed, and the write says so.
      assert.deepEqual(
        { hold: row?.hold, broadcasting: row?.broadcasting },
        { hold: "pending", broadcasting: "1" },
      );
      assert.ok(answer instanceof BusyError, String(answer));
      assert.match(answer.message, /nothing was written; retry$/);
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      stop.abort();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: a write by hand outside a transaction that set relayer.in_write is refused with what to do; migrate() guards a schema an older version made, and enables a guard disabled",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql, store }) => {
    await store.createIntent({ id: "pi_1", state: "authorized" });
    // `sql` is the store's client: no session setting lets it through.
    const refused = await sql.unsafe(
      `UPDATE "${schema}".intents SET version = version + 1`,
    ).then(
      () => null,
      (error: Error & { code?: string; hint?: string }) => error,
    );
    assert.equal(refused?.code, "RL003");
    assert.equal(
      refused?.message,
      `the relayer's table ${schema}.intents takes writes only inside a transaction that ran SET LOCAL relayer.in_write = 'on'`,
    );
    assert.match(
      String(refused?.hint),
      /BEGIN; SET LOCAL relayer\.in_write = 'on'; your statements; COMMIT;/,
    );
    // As the runbook's recipe: it lands.
    await sql.begin(async (tx) => {
      await tx.unsafe(IN_WRITE);
      await tx.unsafe(
        `UPDATE "${schema}".intents SET version = version + 1 WHERE id = 'pi_1'`,
      );
    });
    assert.equal((await store.getIntent("pi_1"))?.version, "2");

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
