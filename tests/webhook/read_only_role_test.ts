/**
 * The service on a PostgreSQL database whose DBA made the store's role
 * read-only (`ALTER ROLE … SET default_transaction_read_only = on`, as a
 * failover target is held read-only), on a real server: every write is
 * refused (25006) with nothing written. A delivery is answered 503 with
 * nothing decided, so the queue delivers it again, and is never poisoned
 * on the refusal, even at the queue's last delivery; the delivery, the
 * ops routes that write and `/readyz` say that the database is read-only
 * and what to do; once the role's setting is reset, the same pool writes
 * again.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createApp } from "../../webhook/app.ts";
import { ScriptedSender } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { isReadOnly } from "../../store/_read_only.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { signedDelivery } from "./_signing.ts";

const OPS = "ops-token-for-tests";
const SECRET = "webhook-secret-for-tests";
const NOW = 1_000_000;
const ops = {
  authorization: `Bearer ${OPS}`,
  "content-type": "application/json",
};

/** How the routes name the read-only database. */
const READ_ONLY =
  "as the database is read-only and took none of it (a hot standby, a primary a failover demoted, or default_transaction_read_only = on for the store's role or database; the relayer's log names it)";
/** What the routes say to do about it. */
const WRITABLE =
  "Point the store at the primary (a URL that lists several hosts takes target_session_attrs=primary), or turn default_transaction_read_only off for the store's role or database (ALTER ROLE … SET default_transaction_read_only = off)";

/** A signed POST /v1/deliveries of pi_1's settle job as delivery `n`. */
function delivery(n: number): RequestInit {
  return signedDelivery(SECRET, "pi_1", n, Math.floor(NOW / 1000));
}

/**
 * A fresh schema of the run's server, migrated, with pi_1 authorized, and
 * a service role granted the store's tables and set read-only
 * (`ALTER ROLE … SET`), and a client of `max` connections as that role.
 * `writable` is a store on the owner's client; `reset()` resets the
 * role's setting.
 */
function onReadOnlyRole(
  max: number,
  test: (db: {
    writable: PostgresStore;
    sql: postgres.Sql;
    schema: string;
    reset: () => Promise<void>;
  }) => Promise<void>,
): (t: Deno.TestContext) => Promise<void> {
  return timeout(30_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    const role = `r_${schema}`;
    const login = new URL(await postgresUrl());
    login.username = role;
    login.password = `${role}-pw`;
    let sql: postgres.Sql | undefined;
    try {
      const writable = new PostgresStore(admin, { schema });
      await writable.migrate();
      await admin.unsafe(
        `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw';
        GRANT USAGE ON SCHEMA "${schema}" TO "${role}";
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}";
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";
        ALTER ROLE "${role}" SET default_transaction_read_only = on`,
      );
      await writable.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      sql = postgres(login.href, { max, onnotice: () => {} });
      await test({
        writable,
        sql,
        schema,
        reset: async () =>
          void await admin.unsafe(
            `ALTER ROLE "${role}" RESET default_transaction_read_only`,
          ),
      });
    } finally {
      await sql?.end({ timeout: 1 });
      try {
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE;
          DROP OWNED BY "${role}"; DROP ROLE "${role}"`);
      } finally {
        await admin.end({ timeout: 1 });
      }
    }
  });
}

serverUpFirst();

Deno.test({
  name:
    "createApp() on PostgreSQL whose role a DBA set read-only: a delivery, the creation, redrive and discard routes and /readyz say the database is read-only, that nothing was written and what to do",
  ignore: !postgresAvailable,
  fn: onReadOnlyRole(2, async ({ writable, sql, schema }) => {
    const letter = {
      intentId: "pi_2",
      deliveries: 5,
      cause: "exhausted",
      reason: "no luck after 5 deliveries",
      resolution: "job dropped, intent still authorized",
      lastError: "timeout",
      poisonedAt: 1,
    } as const;
    await writable.createIntent({ id: "pi_2", state: "authorized" });
    await writable.putDeadLetter({ ...letter, jobId: "pi_2/settle" });
    // A letter naming no intent: discarded at once, its one write.
    await writable.putDeadLetter({
      ...letter,
      jobId: "pi_3/settle",
      intentId: "pi_3",
    });
    const before = await writable.getIntent("pi_1");
    const store = new PostgresStore(sql, { schema });
    const lines: string[] = [];
    const app = createApp({
      store,
      sender: new ScriptedSender({ pi_1: { sends: [{ txHash: "0xabc" }] } }),
      policy: { maxDeliveries: 3 },
      now: () => NOW,
      random: () => 0,
      webhookSecret: SECRET,
      opsToken: OPS,
      redriveTo: { publish: () => Promise.resolve() },
      log: (line) => lines.push(line),
    });
    const answers = [
      [await app.request("/v1/deliveries", delivery(1)), "delivery-failed"],
      // The queue's last: the refusal is the store's, not the job's.
      [await app.request("/v1/deliveries", delivery(3)), "delivery-failed"],
      [
        await app.request("/v1/intents", {
          method: "POST",
          headers: ops,
          body: '{"id":"pi_4","state":"authorized"}',
        }),
        "store-failed",
      ],
      [
        await app.request("/v1/dead-letters/pi_2%2Fsettle/redrive", {
          method: "POST",
          headers: ops,
        }),
        "redrive-failed",
      ],
      [
        await app.request("/v1/dead-letters/pi_3%2Fsettle", {
          method: "DELETE",
          headers: ops,
        }),
        "store-failed",
      ],
      [await app.request("/readyz"), "not-ready"],
    ] as const;
    const details = [];
    for (const [res, type] of answers) {
      assert.equal(res.status, 503, res.url);
      const problem = await res.json();
      assert.equal(problem.type, `urn:relayer:problem:${type}`);
      details.push(problem.detail);
    }
    assert.deepEqual(details, [
      `The delivery could not finish ${READ_ONLY}. ${WRITABLE}; the queue will redeliver it.`,
      `The delivery could not finish ${READ_ONLY}. ${WRITABLE}; the queue will redeliver it.`,
      `The creation of intent pi_4 failed ${READ_ONLY}: nothing changed. ${WRITABLE}, then try again.`,
      `The redrive of pi_2/settle failed ${READ_ONLY}: nothing changed in the store, and its dead letter stays (a job it queued before the store failed is harmless, as it only says "go and look"). ${WRITABLE}, then try again.`,
      `The discard of pi_3/settle failed ${READ_ONLY}: nothing changed. ${WRITABLE}, then try again.`,
      `The store's write failed ${READ_ONLY}: deliveries would be answered 503 now. ${WRITABLE}.`,
    ]);
    // Nothing was written.
    assert.deepEqual(await writable.getIntent("pi_1"), before);
    assert.equal(await writable.getIntent("pi_4"), null);
    assert.equal(await writable.getDeadLetter("pi_1/settle"), null);
    assert.ok(await writable.getDeadLetter("pi_2/settle"));
    assert.ok(await writable.getDeadLetter("pi_3/settle"));
    assert.ok(
      lines.some((line) => /PostgreSQL refused it as read-only/.test(line)),
      lines.join("\n"),
    );
  }),
});

Deno.test({
  name:
    "PostgresStore on a role a DBA set read-only writes again once the role's setting is reset: a session that refused a write as read-only is closed, not handed back to the pool",
  ignore: !postgresAvailable,
  fn: onReadOnlyRole(2, async ({ sql, schema, reset }) => {
    const store = new PostgresStore(sql, { schema });
    // Both connections of the pool open, each read-only from its start.
    await Promise.all([store.getIntent("pi_1"), store.getIntent("pi_1")]);
    await assert.rejects(store.createIntent({ id: "pi_4" }), isReadOnly);
    // Reset, the pool's sessions (read-only from their start) are closed
    // as they refuse a write, and opened again writable: a write lands
    // within one try more than the pool has connections.
    await reset();
    const tries: string[] = [];
    for (let i = 5; i <= 7 && tries.at(-1) !== "written"; i++) {
      tries.push(
        await store.createIntent({ id: `pi_${i}` }).then(
          () => "written",
          (error) => isReadOnly(error) ? "read-only" : String(error),
        ),
      );
    }
    assert.equal(tries.at(-1), "written", tries.join(", "));
  }),
});

Deno.test({
  name:
    "/readyz on a role a DBA set read-only, then writable but refused the store's writes otherwise, no longer says the database is read-only",
  ignore: !postgresAvailable,
  fn: onReadOnlyRole(1, async ({ sql, schema, reset }) => {
    let t = NOW;
    const app = createApp({
      store: new PostgresStore(sql, { schema }),
      sender: new ScriptedSender({}),
      opsToken: OPS,
      log: () => {},
      now: () => t,
    });
    const detail = async () => {
      t += 60_000;
      const res = await app.request("/readyz");
      assert.equal(res.status, 503);
      return (await res.json()).detail;
    };
    assert.equal(
      await detail(),
      `The store's write failed ${READ_ONLY}: deliveries would be answered 503 now. ${WRITABLE}.`,
    );
    // Writable again, but the role may no longer write the counts.
    await reset();
    const admin = await connect(1);
    try {
      await admin.unsafe(
        `REVOKE INSERT, UPDATE ON "${schema}".counters FROM "r_${schema}"`,
      );
    } finally {
      await admin.end({ timeout: 1 });
    }
    // The session that refused the write as read-only was closed: the
    // next is writable, and refuses the write for want of a grant.
    const details: string[] = [];
    for (
      let i = 0;
      i < 3 && !/did not answer/.test(details.at(-1) ?? "");
      i++
    ) {
      details.push(await detail());
    }
    assert.equal(
      details.at(-1),
      "The store did not answer a read, or refused a write (the relayer's log says why): deliveries would be answered 503 now.",
      details.join("\n"),
    );
  }),
});
