/**
 * PostgresStore when an admin enables row-level security on its tables
 * after the start (`ALTER TABLE … ENABLE ROW LEVEL SECURITY`, no policy
 * for the service role, which does not own the tables and has no
 * BYPASSRLS): the role's reads then find no row and its writes change
 * none, with no error. `migrate()` refuses it at start
 * (tests/store/postgres_sql_test.ts); here the service started before.
 * A read that finds no intent, or an intent without its hold, asks once
 * whether row security hides the store's rows, and says so as the store
 * failing: the delivery retries, and the job is neither dropped nor
 * poisoned.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  ConflictError,
  createRelayer,
  type Intent,
  type Relayer,
  ScriptedSender,
} from "../../mod.ts";
import { isNotRead, isNotWritten } from "../../store/_not_written.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { createApp } from "../../webhook/app.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

/** The words of a store whose role row security hides `tables` from. */
function hides(tables: string): RegExp {
  return new RegExp(
    `as row-level security hides rows of ${
      tables.replaceAll(".", "\\.")
    } from this role: add a policy for it that lets it see and write every row, give it BYPASSRLS, or disable row-level security there\\.`,
  );
}

/**
 * A refusal that says `message`, to the letter, and that `marked` finds
 * marked (nothing written, or nothing read).
 */
function refusedSaying(
  message: string,
  marked: (error: unknown) => boolean,
): (error: Error) => boolean {
  return (error) => {
    assert.equal(error.message, message);
    assert.equal(marked(error), true);
    return true;
  };
}

/** A client of two connections logged in as `role` (its password `<role>-pw`). */
async function roleClient(role: string): Promise<postgres.Sql> {
  const url = new URL(await postgresUrl());
  url.username = role;
  url.password = `${role}-pw`;
  return postgres(url.href, { max: 2, onnotice: () => {} });
}

/** A relayer on `store` that sends nothing, three deliveries to a job. */
function threeTries(store: PostgresStore): Relayer {
  return createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 3 },
  });
}

/** `id`'s move from authorized to settling, at version 1, at 1. */
function toSettling(store: PostgresStore, id: string): Promise<Intent> {
  return store.transition(id, {
    from: "authorized",
    to: "settling",
    version: "1",
    at: 1,
  });
}

/**
 * A schema migrated by its owner (the test's admin) holding `ids`, each
 * authorized with its hold pending, and a started store of a service role
 * granted DML on it: `rls(tables)` enables row-level security on them.
 */
async function serviceStore(
  ids: string[],
  test: (t: {
    owner: PostgresStore;
    store: PostgresStore;
    schema: string;
    rls: (...tables: string[]) => Promise<void>;
    admin: postgres.Sql;
    sql: postgres.Sql;
    role: string;
  }) => Promise<void>,
): Promise<void> {
  const admin = await connect(2);
  const schema = freshSchema();
  const role = `r${freshSchema()}`;
  await admin.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw'`);
  const sql = await roleClient(role);
  try {
    const owner = new PostgresStore(admin, { schema });
    await owner.migrate();
    for (const id of ids) {
      await owner.createIntent({ id, state: "authorized", hold: "pending" });
    }
    await admin.unsafe(`GRANT USAGE ON SCHEMA "${schema}" TO "${role}";
      GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}";
      GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}"`);
    const store = new PostgresStore(sql, { schema });
    await store.migrate(); // it starts: nothing is hidden yet
    await test({
      owner,
      store,
      schema,
      admin,
      sql,
      role,
      rls: (...tables) =>
        admin.unsafe(
          tables.map((table) =>
            `ALTER TABLE "${schema}".${table} ENABLE ROW LEVEL SECURITY`
          ).join("; "),
        ).then(() => {}),
    });
  } finally {
    await sql.end();
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE;
      DROP OWNED BY "${role}"; DROP ROLE "${role}"`);
    await admin.end();
  }
}

Deno.test({
  name:
    "PostgresStore: row-level security enabled on intents after the start is the store failing, and a delivery retries where it read the payment as missing and dropped its job",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_1"], async ({ owner, store, schema, rls }) => {
        const relayer = threeTries(store);
        await rls("intents");
        // Before: getIntent answered null, the deliveries "intent pi_1 not
        // found", and the last was poisoned, "job dropped, intent not
        // found", the payment left authorized with its hold pending.
        await assert.rejects(
          store.getIntent("pi_1"),
          hides(`${schema}.intents`),
        );
        for (const n of [1, 3]) {
          await assert.rejects(
            relayer.deliver({ intentId: "pi_1", kind: "settle" }, n),
            hides(`${schema}.intents`),
          );
        }
        // A write's own read: before, "Cannot transition intent pi_1 as
        // the intent does not exist", a refusal (the job's failure).
        await assert.rejects(
          toSettling(store, "pi_1"),
          hides(`${schema}.intents`),
        );
        assert.equal(await owner.getDeadLetter("pi_1/settle"), null);
        assert.equal((await owner.getIntent("pi_1"))?.version, "1");
        // An intent that does not exist, with nothing hidden, is still null.
        assert.equal(await owner.getIntent("pi_none"), null);
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore: row-level security enabled on holds after the start is the store failing, and a delivery retries where it read the hold as missing and poisoned the job at once",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_2"], async ({ owner, store, schema, rls }) => {
        const relayer = threeTries(store);
        await rls("holds");
        // Before: the intent read with no hold, and delivery 1 was poisoned,
        // "the hold of pi_2 is not recorded: nothing to settle", its job
        // dropped, the hold pending.
        await assert.rejects(store.getIntent("pi_2"), hides(`${schema}.holds`));
        await assert.rejects(
          relayer.deliver({ intentId: "pi_2", kind: "settle" }, 1),
          hides(`${schema}.holds`),
        );
        // Through the webhook: a store outage's 503, "retry".
        const lines: unknown[] = [];
        const app = createApp({
          store,
          sender: new ScriptedSender({}),
          insecureDev: true,
          random: () => 0,
          log: (line: unknown) => lines.push(line),
        });
        const res = await app.request("/v1/deliveries", {
          method: "POST",
          body: JSON.stringify({
            job: { intentId: "pi_2", kind: "settle" },
            delivery: 1,
          }),
        });
        // The answer names no store error; the log's line (cut at 300
        // characters) says which table and what to do.
        assert.deepEqual([res.status, (await res.json()).type], [
          503,
          "urn:relayer:problem:delivery-failed",
        ]);
        assert.equal(lines.length, 1);
        assert.match(String(lines[0]), hides(`${schema}.holds`));
        assert.equal(await owner.getDeadLetter("pi_2/settle"), null);
        const intent = await owner.getIntent("pi_2");
        assert.deepEqual([intent?.hold, intent?.version], ["pending", "1"]);
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate() refuses a role that row-level security lets read but not write (a policy FOR SELECT only), where every delivery read a race lost for good",
  ignore,
  fn: timeout(30_000, () =>
    serviceStore(
      ["pi_3"],
      async ({ store, schema, rls, admin, sql, role }) => {
        await rls("intents");
        await admin.unsafe(
          `CREATE POLICY reads ON "${schema}".intents FOR SELECT TO "${role}" USING (true)`,
        );
        // What the role's deliveries meet, started before the policy: the
        // compare-and-set's row hidden from its UPDATE, said as the store
        // failing (tests below); once "changed since it was read", for good.
        const relayer = threeTries(store);
        await assert.rejects(
          relayer.deliver({ intentId: "pi_3", kind: "settle" }, 1),
          /as row-level security lets this role read but not write there/,
        );
        // Before, a start on it went on.
        await assert.rejects(
          new PostgresStore(sql, { schema }).migrate(),
          (error: Error) => {
            assert.equal(
              error.message,
              `Cannot use the PostgreSQL schema "${schema}" as row-level security lets this role read but not write there: no policy allows it INSERT on ${schema}.intents, UPDATE on ${schema}.intents, so those writes change no row or fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there`,
            );
            return true;
          },
        );
        // One FOR ALL: it starts, and writes.
        await admin.unsafe(
          `CREATE POLICY service ON "${schema}".intents TO "${role}" USING (true) WITH CHECK (true)`,
        );
        const started = new PostgresStore(sql, { schema });
        await started.migrate();
        const moved = await toSettling(started, "pi_3");
        assert.equal(moved.state, "settling");
      },
    )),
});

Deno.test({
  name:
    "PostgresStore: FORCE ROW LEVEL SECURITY on a table the service role owns, after the start, is the store failing as for a role that does not own it",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_4"], async ({ owner, store, schema, admin, role }) => {
        // An owner bypasses row security unless it is forced on the table.
        await admin.unsafe(`ALTER TABLE "${schema}".intents OWNER TO "${role}";
        ALTER TABLE "${schema}".intents ENABLE ROW LEVEL SECURITY;
        ALTER TABLE "${schema}".intents FORCE ROW LEVEL SECURITY`);
        await assert.rejects(
          store.getIntent("pi_4"),
          hides(`${schema}.intents`),
        );
        assert.equal((await owner.getIntent("pi_4"))?.hold, "pending");
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore: a policy FOR SELECT only added after the start is the store failing, named, where every delivery read a race lost, for good, and a create failed in the server's words alone",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(
        ["pi_5"],
        async ({ owner, store, schema, rls, admin, role }) => {
          await rls("intents");
          await admin.unsafe(
            `CREATE POLICY reads ON "${schema}".intents FOR SELECT TO "${role}" USING (true)`,
          );
          const words =
            `row-level security lets this role read but not write there: no policy allows it INSERT on ${schema}.intents, UPDATE on ${schema}.intents, so those writes change no row or fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there. Nothing was written; deliveries retry until then`;
          const relayer = threeTries(store);
          // Before: each delivery answered retry, "Cannot move pi_5 from
          // authorized to settling as its intent changed since it was read;
          // re-read it", past its last, with nothing to say why.
          // The last delivery keeps a dead letter in place of the move,
          // and fails so too: the job is kept, not dropped.
          for (
            const [n, what] of [
              [1, "move pi_5 from authorized to settling"],
              [3, "keep the dead letter of pi_5/settle"],
            ] as const
          ) {
            await assert.rejects(
              relayer.deliver({ intentId: "pi_5", kind: "settle" }, n),
              refusedSaying(`Cannot ${what} as ${words}`, isNotWritten),
            );
          }
          // Before: a PostgresError, 'new row violates row-level security
          // policy for table "intents"'.
          await assert.rejects(
            store.createIntent({ id: "pi_new", state: "created" }),
            refusedSaying(
              `Cannot create intent pi_new as ${words}`,
              isNotWritten,
            ),
          );
          const intent = await owner.getIntent("pi_5");
          assert.deepEqual([intent?.state, intent?.version], [
            "authorized",
            "1",
          ]);
          assert.equal(await owner.getIntent("pi_new"), null);
          // A race truly lost, with no row security on the table, is still one.
          await admin.unsafe(
            `ALTER TABLE "${schema}".intents DISABLE ROW LEVEL SECURITY`,
          );
          await toSettling(owner, "pi_5");
          await assert.rejects(
            store.transition("pi_5", {
              from: "settling",
              to: "settled",
              version: "1",
              at: 2,
            }),
            (error: Error) =>
              error instanceof ConflictError &&
              /changed since it was read/.test(error.message),
          );
        },
      ),
  ),
});

Deno.test({
  name:
    "PostgresStore: a grant revoked after the start is the store failing, naming the privilege to grant and that nothing was written or read, where it failed in the server's words alone",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_6"], async ({ owner, store, schema, admin, role }) => {
        await admin.unsafe(
          `REVOKE INSERT, UPDATE ON "${schema}".intents FROM "${role}"`,
        );
        const relayer = threeTries(store);
        // Before: a PostgresError, "permission denied for table intents",
        // not marked as nothing written.
        await assert.rejects(
          relayer.deliver({ intentId: "pi_6", kind: "settle" }, 1),
          refusedSaying(
            `Cannot move pi_6 from authorized to settling as this role lacks INSERT on ${schema}.intents, UPDATE on ${schema}.intents (permission denied for table intents): grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner. Nothing was written; deliveries retry until then`,
            isNotWritten,
          ),
        );
        await admin.unsafe(
          `REVOKE SELECT ON "${schema}".intents FROM "${role}"`,
        );
        await assert.rejects(
          store.getIntent("pi_6"),
          refusedSaying(
            `The store's read of intent pi_6 failed as this role lacks SELECT on ${schema}.intents, INSERT on ${schema}.intents, UPDATE on ${schema}.intents (permission denied for table intents): grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner. Nothing was read; deliveries retry until then`,
            isNotRead,
          ),
        );
        const intent = await owner.getIntent("pi_6");
        assert.deepEqual([intent?.state, intent?.version], ["authorized", "1"]);
        // Granted again, it writes.
        await admin.unsafe(
          `GRANT SELECT, INSERT, UPDATE ON "${schema}".intents TO "${role}"`,
        );
        const moved = await toSettling(store, "pi_6");
        assert.equal(moved.state, "settling");
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore: row-level security enabled after the start on a role whose row_security is off is the store failing, named, where every call failed in the server's words alone",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_7"], async ({ owner, schema, rls, admin, role }) => {
        await admin.unsafe(`ALTER ROLE "${role}" SET row_security = off`);
        const sql = await roleClient(role);
        const store = new PostgresStore(sql, { schema });
        try {
          await store.migrate();
          await rls("intents");
          const words = (head: string, done: string) =>
            `${head} as row-level security hides rows of ${schema}.intents from this role (no policy lets it read them, or its row_security is off: query would be affected by row-level security policy for table "intents"): add a policy for it that lets it see and write every row, give it BYPASSRLS, or disable row-level security there. Nothing was ${done}; deliveries retry until then`;
          // Before: a PostgresError, 'query would be affected by row-level
          // security policy for table "intents"', at every read and write.
          await assert.rejects(
            store.getIntent("pi_7"),
            refusedSaying(
              words("The store's read of intent pi_7 failed", "read"),
              isNotRead,
            ),
          );
          await assert.rejects(
            store.createIntent({ id: "pi_x", state: "created" }),
            refusedSaying(
              words("Cannot create intent pi_x", "written"),
              isNotWritten,
            ),
          );
          assert.equal(await owner.getIntent("pi_x"), null);
        } finally {
          store.close();
          await sql.end();
        }
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore names a team's function that refuses a read (a row-security policy's on dead_letters, raising) as nothing read, not as nothing written",
  ignore,
  fn: timeout(
    30_000,
    () =>
      serviceStore(["pi_1"], async ({ owner, store, schema, rls, admin }) => {
        await owner.putDeadLetter({
          jobId: "pi_1/settle",
          intentId: "pi_1",
          deliveries: 1,
          cause: "declared",
          reason: "declared poison",
          resolution: "dropped",
          lastError: "boom",
          poisonedAt: 1,
        });
        await admin.unsafe(
          `CREATE FUNCTION "${schema}".audit_read() RETURNS boolean
            LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'audit: reads of dead letters need a ticket'; END $$;
          CREATE POLICY audit ON "${schema}".dead_letters
            USING ("${schema}".audit_read())`,
        );
        await rls("dead_letters");
        // Before: "… nothing of it was written; deliveries retry until …",
        // marked nothing written, for a list that writes nothing.
        const error = await store.listDeadLetters({ limit: 10 }).then(
          () => assert.fail("the list went on"),
          (error: Error) => error,
        );
        assert.match(
          error.message,
          /^Cannot list dead letters as PostgreSQL refused it for the function \S*audit_read\(\), a policy's \(audit: reads of dead letters need a ticket\), which the store's migration does not make \(added to its tables since\): nothing of it was read; it fails until that rule lets the store's reads through, or is removed$/,
        );
        assert.ok(isNotRead(error), "not marked nothing read");
        assert.ok(!isNotWritten(error), "marked nothing written");
      }),
  ),
});
