/**
 * PostgresStore on a real server, its statements prepared on their
 * connection before a schema change altered what one of them returns (a
 * later release's migration, run by another instance in a rolling deploy;
 * an operator's `ALTER TABLE … ALTER COLUMN … TYPE`). PostgreSQL then
 * refuses that prepared statement ("cached plan must not change result
 * type", SQLSTATE 0A000), and postgres.js 3.4.9 prepares it again and
 * sends it anew, behind whatever it had sent on the connection after it.
 * In a write's flight that is the `COMMIT`: it answered `ROLLBACK` (the
 * transaction had failed), and the statement ran again alone, outside the
 * transaction, and committed by itself. A delivery counted and claimed in
 * one flight was answered as admitted, its count written, and its replay
 * record never was: the same signed delivery, sent again, would have been
 * admitted again. A session that lost the statements (`DEALLOCATE ALL`,
 * as a pooler in transaction mode loses them) left its connection out of
 * the pool after the failed write: the next one waited out
 * `connectionWaitMs` for a connection.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  answeredAs,
  betweenReadAndFlight,
  type FreshSchema,
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const NOW = 1_767_225_600_000;

/** The rows on record: the replay records' keys and the counts' job ids. */
async function onRecord(admin: postgres.Sql, schema: string) {
  const claims = await admin.unsafe(
    `SELECT key FROM "${schema}".claims ORDER BY key`,
  );
  const counts = await admin.unsafe(
    `SELECT job_id, deliveries FROM "${schema}".counters ORDER BY job_id`,
  );
  return {
    claims: claims.map((row) => String(row.key)),
    counts: counts.map((row) => `${row.job_id}: ${row.deliveries}`),
  };
}

/** Waits until session `pid` waits for a lock. */
async function waitsForLock(admin: postgres.Sql, pid: number): Promise<void> {
  for (let tries = 0; tries < 500; tries++) {
    const [row] = await admin`
      SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${pid}`;
    if (row?.wait_event_type === "Lock") return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`session ${pid} never waited for a lock`);
}

const claim = (key: string, now = NOW) => ({
  key,
  now,
  expiresAt: now + 60_000,
});

/**
 * Makes both of an admission's statements return something else: the
 * count (a column's type) and the claim (its check's function, made again
 * returning numeric). The first refusal aborts a flight, so the second is
 * met only when the write goes again.
 */
async function staleAdmission(
  admin: postgres.Sql,
  schema: string,
): Promise<void> {
  const [found] = await admin.unsafe(
    `SELECT pg_get_functiondef('"${schema}".refuse_replay(bigint)'::regprocedure) AS definition`,
  );
  const definition = String(found?.definition);
  const numeric = definition.replace(/RETURNS bigint/, "RETURNS numeric");
  assert.notEqual(numeric, definition);
  await admin.begin(async (tx) => {
    await tx.unsafe(`DROP FUNCTION "${schema}".refuse_replay(bigint)`);
    await tx.unsafe(numeric);
    await tx.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );
  });
}

/**
 * Admits delivery 1 of `job_2` with the claim `k2` after `job_1`'s (`k1`):
 * answered so, both its writes on record once, and a replay of its claim
 * refused with nothing more written.
 */
async function admitsOnce(
  { admin, schema, store }: Omit<FreshSchema, "sql">,
): Promise<void> {
  assert.equal(
    await store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
    1,
  );
  const once = { claims: ["k1", "k2"], counts: ["job_1: 1", "job_2: 1"] };
  assert.deepEqual(await onRecord(admin, schema), once);
  await assert.rejects(
    store.admit({ count: "job_3", claim: claim("k2"), now: NOW + 1 }),
    { name: "ReplayError" },
  );
  assert.deepEqual(await onRecord(admin, schema), once);
}

serverUpFirst();

Deno.test({
  name:
    "PostgresStore: a write whose prepared statement PostgreSQL refused as a schema change altered its result goes again on its connection once the statement is prepared anew, and lands once, where the statement ran again alone after the transaction rolled back",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    // What the count returns changes type (bigint to numeric): the claim
    // before it in the flight is as it was.
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );

    // Before: "delivery 1" with its count written and its replay record
    // not; then, with the flight failed whole, refused as stale.
    await admitsOnce({ admin, schema, store });
    // The connection is still the pool's, its statements current.
    assert.equal(
      await store.admit({ count: "job_2", claim: claim("k3"), now: NOW }),
      2,
    );
    assert.equal(await store.deliveries("job_1"), 1);
  }),
});

for (const fetchTypes of [true, false]) {
  // Through reserve(), the write goes again on its connection once for
  // each stale statement, prepared anew; through sql.begin (fetch_types:
  // false), once, under new statement names. Before, on sql.begin's path:
  // "Cannot admit a delivery as PostgreSQL refused a statement this client
  // had prepared before the schema changed (cached plan must not change
  // result type): nothing of it was written; try again", and only the next
  // write landed.
  Deno.test({
    name: fetchTypes
      ? "PostgresStore: a write two of whose prepared statements a schema change made stale goes again once for each, and lands once"
      : "PostgresStore: on sql.begin's path (fetch_types: false), a write two of whose statements a schema change made stale commits nothing, goes again once under new names, and lands once",
    ignore: !postgresAvailable,
    fn: onFreshSchema({ fetchTypes }, async ({ admin, schema, store }) => {
      assert.equal(
        await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
        1,
      );
      // Both of an admission's statements return something else now: the
      // count (a column's type) and the claim (its check's function, made
      // again returning numeric). The first refusal aborts the flight, so
      // the second is met only when it goes again.
      await staleAdmission(admin, schema);
      await admitsOnce({ admin, schema, store });
    }),
  });
}

Deno.test({
  name:
    "PostgresStore: after a schema change altered what a prepared write returns, no write on any connection of the pool fails for it",
  ignore: !postgresAvailable,
  fn: onFreshSchema({ max: 3 }, async ({ admin, schema, store }) => {
    // Three admissions at once, each on a connection of its own: each
    // connection has the admission's statements prepared.
    const at = (n: number) =>
      store.admit({ count: `job_${n}`, claim: claim(`k${n}`), now: NOW });
    await Promise.all([1, 2, 3].map(at));
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );

    // Before: one write failed on each connection that had prepared the
    // admission (two of nine, in each of 3 runs).
    const answers = await Promise.allSettled(
      [4, 5, 6, 7, 8, 9, 10, 11, 12].map(at),
    );
    const failed = answers.flatMap((answer) =>
      answer.status === "rejected" ? [String(answer.reason)] : []
    );
    assert.deepEqual(failed, []);
    const { claims, counts } = await onRecord(admin, schema);
    assert.equal(claims.length, 12);
    assert.equal(counts.length, 12);
  }),
});

Deno.test({
  name:
    "PostgresStore: a write whose statement, refused as stale, cannot be prepared anew for another session's lock fails as busy within lock_timeout, and its connection goes back to the pool, where it waited out connectionWaitMs and kept the connection for as long as the lock",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    // Four: the test holds locks of its own on two of them.
    adminMax: 4,
    connectionWaitMs: 4_000,
  }, async ({ admin, schema, sql }) => {
    const [row, locker] = await Promise.all([admin.reserve(), admin.reserve()]);
    // What runs once a write has read its intent, before its flight.
    let gap = () => Promise.resolve();
    const store = new PostgresStore(
      betweenReadAndFlight(sql, () => gap()),
      { schema, connectionWaitMs: 4_000 },
    );
    try {
      for (const id of ["pi_1", "pi_2"]) {
        await store.createIntent({ id, hold: "pending" });
      }
      const authorize = (id: string, key: string) =>
        store.transition(id, {
          from: "created",
          to: "authorized",
          version: "1",
          at: NOW,
        }, {
          lease: { owner: `o_${id}`, ttlMs: 30_000, now: NOW, keep: true },
          claim: claim(key),
        });
      assert.equal((await authorize("pi_1", "k1")).version, "2");
      const [me] = await sql`SELECT pg_backend_pid() AS pid`;
      const pid = Number(me!.pid);
      gap = async () => {
        gap = () => Promise.resolve();
        // After the read: the intent's version changes type, so the
        // flight's UPDATE … RETURNING version is stale (its read was not).
        await admin.unsafe(
          `ALTER TABLE "${schema}".intents ALTER COLUMN version TYPE numeric`,
        );
        // The flight waits at its check for a row lock another session
        // holds; meanwhile another migration asks for the table, queued
        // behind the flight's own lock, and takes it once the refused
        // flight rolled back: before the statement is prepared anew.
        await row.unsafe("BEGIN");
        await row.unsafe(
          `SELECT 1 FROM "${schema}".intents WHERE id = 'pi_2' FOR UPDATE`,
        );
      };
      const write = authorize("pi_2", "k2");
      write.catch(() => {});
      await waitsForLock(admin, pid);
      await locker.unsafe("BEGIN");
      const [other] = await locker`SELECT pg_backend_pid() AS pid`;
      const locked = locker.unsafe(
        `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
      ).execute();
      await waitsForLock(admin, Number(other!.pid));
      await row.unsafe("COMMIT");
      await locked;
      try {
        // Before: "refused a statement this client had prepared before the
        // schema changed" after connectionWaitMs, and the pool's one
        // connection kept until the lock went: the next write failed for a
        // connection.
        await assert.rejects(write, { name: "BusyError" });
        assert.equal(await store.admit({ count: "job_1", now: NOW }), 1);
      } finally {
        await locker.unsafe("COMMIT");
      }
      const [intent] = await admin.unsafe(
        `SELECT version FROM "${schema}".intents WHERE id = 'pi_2'`,
      );
      assert.equal(String(intent?.version), "1");
      assert.deepEqual((await onRecord(admin, schema)).claims, ["k1"]);
      // Once the lock went, the same write lands, once.
      assert.equal((await authorize("pi_2", "k2")).version, "2");
      assert.deepEqual((await onRecord(admin, schema)).claims, ["k1", "k2"]);
    } finally {
      await row.unsafe("ROLLBACK").catch(() => {});
      await locker.unsafe("ROLLBACK").catch(() => {});
      row.release();
      locker.release();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore: a write on a session that lost the statements this client prepared there fails, nothing of it written, and the next write on that connection lands",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    connectionWaitMs: 2_000,
  }, async ({ admin, schema, sql, store }) => {
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    // What a pooler in transaction mode does to them (the next
    // transaction on another server session), or a DISCARD ALL.
    await sql.unsafe("DEALLOCATE ALL");
    await assert.rejects(
      store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
      /^Error: Cannot admit a delivery as PostgreSQL does not know a statement this client prepared/,
    );
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1"],
      counts: ["job_1: 1"],
    });
    // postgres.js kept the connection from the pool after it (the next
    // write waited out connectionWaitMs for one); now it lands.
    assert.equal(
      await store.admit({ count: "job_3", claim: claim("k3"), now: NOW }),
      1,
    );
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1", "k3"],
      counts: ["job_1: 1", "job_3: 1"],
    });
  }),
});

/** Makes the holds' state column an enum of its three states. */
async function holdsAsEnum(
  admin: postgres.Sql,
  schema: string,
): Promise<void> {
  await admin.begin(async (tx) => {
    await tx.unsafe(
      `CREATE TYPE "${schema}".hold_state AS ENUM ('pending', 'voided', 'captured')`,
    );
    await tx.unsafe(
      `ALTER TABLE "${schema}".holds DROP CONSTRAINT holds_state_check`,
    );
    await tx.unsafe(
      `ALTER TABLE "${schema}".holds ALTER COLUMN state TYPE "${schema}".hold_state USING state::"${schema}".hold_state`,
    );
  });
}

/** The intents on record, each with its hold and version. */
async function intentsOnRecord(
  admin: postgres.Sql,
  schema: string,
): Promise<string[]> {
  const rows = await admin.unsafe(
    `SELECT i.id, i.version, h.state::text AS hold FROM "${schema}".intents i
      JOIN "${schema}".holds h ON h.intent_id = i.id ORDER BY i.id`,
  );
  return rows.map((row) => `${row.id}: ${row.hold} at ${row.version}`);
}

for (const fetchTypes of [true, false]) {
  const path = fetchTypes ? "" : "on sql.begin's path (fetch_types: false), ";
  Deno.test({
    name:
      `PostgresStore: ${path}a write whose prepared statement PostgreSQL refused as a schema change altered a column it assigns (text to an enum) goes again once the statement is prepared anew, and lands`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({ fetchTypes }, async ({ admin, schema, store }) => {
      await store.createIntent({ id: "pi_1", hold: "pending" });
      await store.createIntent({ id: "pi_2", hold: "pending" });
      // The hold's statement prepared on the connection, its value as
      // text. The column becomes an enum: the prepared statement's text
      // value no longer fits it (transformAssignedExpr), a new one's does.
      assert.equal(await store.voidHold("pi_1"), "voided");
      await holdsAsEnum(admin, schema);
      assert.equal(await store.voidHold("pi_2"), "voided");
      assert.deepEqual(await intentsOnRecord(admin, schema), [
        "pi_1: voided at 2",
        "pi_2: voided at 2",
      ]);
    }),
  });

  Deno.test({
    name:
      `PostgresStore: ${path}a write whose statement, prepared anew on a schema changed under it, PostgreSQL refuses again (text into an enum) fails saying that trying again cannot help, nothing of it written`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({ fetchTypes }, async ({ admin, schema, store }) => {
      await store.createIntent({ id: "pi_1", hold: "pending" });
      await holdsAsEnum(admin, schema);
      // createIntent writes its hold as text (`::text`), which no enum
      // column takes, prepared anew or not. Before: "…refused a statement
      // this client had prepared before the schema changed (…): nothing
      // of it was written; try again", at every write.
      for (const id of ["pi_2", "pi_3"]) {
        const failed = store.createIntent({ id, hold: "pending" });
        // Its cause is PostgreSQL's refusal (42804, datatype_mismatch),
        // as every other store error's: not the store's own mark.
        await assert.rejects(failed, (error: Error) => {
          assert.equal((error.cause as { code?: unknown })?.code, "42804");
          return true;
        });
        await assert.rejects(
          failed,
          new RegExp(
            `^Error: Cannot create intent ${id} as PostgreSQL refuses its statement on the schema as it is now \\(column "state" is of type "?[a-z0-9_]+"?\\.hold_state but expression is of type text\\): the schema was changed into one this version of the store cannot write \\(a later release's migration\\?\\); nothing of it was written, and trying again cannot help until this instance runs the version that made the change, or the change is undone$`,
          ),
        );
      }
      assert.deepEqual(await intentsOnRecord(admin, schema), [
        "pi_1: pending at 1",
      ]);
      // What fits still lands.
      assert.equal(await store.voidHold("pi_1"), "voided");
    }),
  });
}

for (const fetchTypes of [true, false]) {
  // Without types fetched, the store writes through sql.begin, whose
  // COMMIT is postgres.js's own, prepared: the store commits first (with
  // COMMIT AND CHAIN), and postgres.js's COMMIT ends an empty transaction.
  const path = fetchTypes ? "" : "through sql.begin (fetch_types: false), ";
  Deno.test({
    name:
      `PostgresStore: ${path}a write whose statements are new on a session that lost the statements this client prepared there lands as it answered, where its COMMIT, sent again, rolled it back`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({
      connectionWaitMs: 2_000,
      fetchTypes,
    }, async ({ admin, schema, sql, store }) => {
      assert.equal(await store.admit({ count: "job_1", now: NOW }), 1);
      // What a pooler in transaction mode does to them (the next
      // transaction on another server session), or a DISCARD ALL.
      await sql.unsafe("DEALLOCATE ALL");
      // Its claim's statement is new on the connection, prepared there
      // now; its COMMIT is one the connection had prepared. Before:
      // PostgreSQL refused that COMMIT (26000), which aborted the
      // transaction; postgres.js sent it again, it answered ROLLBACK, and
      // the write answered as admitted with nothing of it on record.
      assert.equal(await store.admit({ claim: claim("k2"), now: NOW }), null);
      assert.deepEqual(await onRecord(admin, schema), {
        claims: ["k2"],
        counts: ["job_1: 1"],
      });
      await assert.rejects(
        store.admit({ claim: claim("k2"), now: NOW }),
        { name: "ReplayError" },
      );
      // The connection is back in the pool: a write whose count the
      // session lost fails with the pooler's advice, and the next lands.
      await assert.rejects(
        store.admit({ count: "job_1", now: NOW }),
        /^Error: Cannot admit a delivery as PostgreSQL does not know a statement this client prepared/,
      );
      assert.equal(await store.admit({ count: "job_1", now: NOW }), 2);
    }),
  });
}

Deno.test({
  name:
    "PostgresStore: a write whose statement a schema change made stale again at each flight stops going again connectionWaitMs after its first refusal, nothing of it written",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, sql }) => {
    // Each time the count's statement is prepared anew (answered), its
    // column changes type again, so the next flight finds it stale; and
    // 600 ms pass, so the second preparing ends past connectionWaitMs
    // (1,000 ms) after the first refusal.
    let types: string[] = [];
    let prepared = 0;
    const store = new PostgresStore(
      answeredAs(
        sql,
        (text) =>
          text.includes("RETURNING deliveries") && types.length > 0
            ? async (rows) => {
              prepared++;
              await admin.unsafe(
                `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE ${types.shift()}`,
              );
              await new Promise((resolve) => setTimeout(resolve, 600));
              return rows;
            }
            : undefined,
      ),
      { schema, connectionWaitMs: 1_000 },
    );
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    types = ["bigint", "numeric", "bigint"];
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );
    prepared = 0;
    await assert.rejects(
      store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
      /^Error: Cannot admit a delivery as PostgreSQL refused a statement this client had prepared before the schema changed \(cached plan must not change result type\): nothing of it was written; try again$/,
    );
    // Two flights, each refused, the statement prepared anew after each;
    // without the bound, a third flight (two writes: three flights at
    // most) and a third preparing.
    assert.equal(prepared, 2);
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1"],
      counts: ["job_1: 1"],
    });
  }),
});

/**
 * `sql`, whose `sql.begin()` calls go through `around`, which makes the
 * call (`begin`), acting before or after it.
 */
function aroundBegin(
  sql: postgres.Sql,
  around: (begin: () => Promise<unknown>) => Promise<unknown>,
): postgres.Sql {
  return new Proxy(sql, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (key !== "begin" || typeof value !== "function") return value;
      return (...args: unknown[]) =>
        around(() => value.apply(target, args) as Promise<unknown>);
    },
  });
}

Deno.test({
  name:
    "PostgresStore: on sql.begin's path (fetch_types: false), a write refused as stale again when it goes again under new names (the schema changed once more) fails saying to try again, not that trying again cannot help, and the next write prepares its statements anew",
  ignore: !postgresAvailable,
  fn: onFreshSchema({ fetchTypes: false }, async ({ admin, schema, sql }) => {
    // What runs before the write's second sql.begin, once armed.
    let before: (() => Promise<void>) | undefined;
    let begins = 0;
    let counts = 0;
    const store = new PostgresStore(
      answeredAs(
        aroundBegin(sql, async (begin) => {
          if (before !== undefined && ++begins === 2) {
            const run = before;
            before = undefined;
            await run();
          }
          return await begin();
        }),
        (text) => {
          if (text.includes("RETURNING deliveries")) counts++;
          return undefined;
        },
        { inBegin: true },
      ),
      { schema },
    );
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );
    // The write's first flight is refused as stale. Before it goes again
    // under new names, another write prepares the count under those names
    // on the one connection, and the column changes type again.
    before = async () => {
      assert.equal(await store.admit({ count: "job_3", now: NOW }), 1);
      await admin.unsafe(
        `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE bigint`,
      );
    };
    await assert.rejects(
      store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
      /^Error: Cannot admit a delivery as PostgreSQL refused a statement this client had prepared before the schema changed \(cached plan must not change result type\): nothing of it was written; try again$/,
    );
    assert.equal(before, undefined, "the write never went again");
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1"],
      counts: ["job_1: 1", "job_3: 1"],
    });
    // Under names no connection has prepared: one flight.
    counts = 0;
    assert.equal(await store.admit({ count: "job_2", now: NOW }), 1);
    assert.equal(counts, 1);
  }),
});

Deno.test({
  name:
    "PostgresStore: on sql.begin's path (fetch_types: false), a write refused as stale does not go again once the store is closed: it fails, nothing of it written",
  ignore: !postgresAvailable,
  fn: onFreshSchema({ fetchTypes: false }, async ({ admin, schema, sql }) => {
    let closing = false;
    const store: PostgresStore = new PostgresStore(
      aroundBegin(sql, (begin) =>
        begin().catch((error) => {
          // The store closes (the process stops) as the write's first
          // flight fails.
          if (closing) store.close();
          throw error;
        })),
      { schema },
    );
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );
    closing = true;
    await assert.rejects(
      store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
      /^Error: Cannot admit a delivery as PostgreSQL refused a statement this client had prepared before the schema changed \(cached plan must not change result type\): nothing of it was written; try again$/,
    );
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1"],
      counts: ["job_1: 1"],
    });
  }),
});

Deno.test({
  name:
    "PostgresStore: on sql.begin's path (fetch_types: false), a write refused as stale waits to go again only within connectionWaitMs of its start, and fails with nothing written when no connection came in time",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    fetchTypes: false,
    connectionWaitMs: 1_000,
  }, async ({ admin, schema, sql }) => {
    let busy: Promise<unknown> | undefined;
    let arm = false;
    const store = new PostgresStore(
      aroundBegin(sql, (begin) => {
        if (!arm) return begin();
        arm = false;
        // Refused as stale, the write's first flight hands the one
        // connection back; a query of another's takes it for 2 s before
        // the write can go again.
        return begin().catch((error) => {
          busy = sql`SELECT pg_sleep(2)`.execute();
          throw error;
        });
      }),
      { schema, connectionWaitMs: 1_000 },
    );
    assert.equal(
      await store.admit({ count: "job_1", claim: claim("k1"), now: NOW }),
      1,
    );
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
    );
    arm = true;
    const started = performance.now();
    await assert.rejects(
      store.admit({ count: "job_2", claim: claim("k2"), now: NOW }),
      /^Error: PostgreSQL gave the store no connection within 1000ms/,
    );
    const took = performance.now() - started;
    assert.ok(took < 1_800, `answered after ${Math.round(took)} ms`);
    assert.ok(busy !== undefined, "nothing took the connection");
    await busy;
    // The write's transaction, begun once the connection came, rolled
    // back at once.
    assert.deepEqual(await onRecord(admin, schema), {
      claims: ["k1"],
      counts: ["job_1: 1"],
    });
    assert.equal(await store.admit({ count: "job_2", now: NOW }), 1);
  }),
});
