/**
 * A PostgresStore on a database never migrated (a Worker deployed before
 * its `migrate()`, which no Worker runs at start) says so, and what to do,
 * on every call that reaches a table, read or write: PostgreSQL's own
 * `relation "…" does not exist` said neither, and the webhook answered
 * "try again" on it, which no retry can mend.
 *
 * @module
 */

import assert from "node:assert/strict";
import { describeError } from "../../policy/_walk.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { isSchemaBehind, schemaBehind } from "../../store/_schema_behind.ts";
import { ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";

const ignore = !postgresAvailable;

/** A store on a fresh schema this version migrated, holding pi_0001. */
async function migratedWithIntent() {
  const opened = await openPostgresStore();
  await opened.store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  return opened;
}

/**
 * Asserts `error` names `schema` and migrate(), within the 300 characters
 * the app logs (`describeError`), keeps PostgreSQL's error (`code`) as its
 * cause and is marked a schema behind, which the routes tell apart from
 * other store failures: no retry mends it.
 */
function assertNamesMigrate(
  error: Error,
  schema: string,
  code: string,
  name = "",
): void {
  assert.match(
    error.message,
    new RegExp(`schema "${schema}"[^]*run store\\.migrate\\(\\)`),
    `${name}: ${error.message}`,
  );
  assert.match(describeError(error), /run store\.migrate\(\)/, name);
  assert.equal(
    (error.cause as { code?: unknown } | undefined)?.code,
    code,
    `${name}: PostgreSQL's error is its cause`,
  );
  assert.equal(isSchemaBehind(error), true, name);
}

/** The error `call` rejects with. */
async function failure(call: () => Promise<unknown>): Promise<Error> {
  try {
    await call();
  } catch (error) {
    return error as Error;
  }
  throw new Error("the call did not fail");
}

Deno.test({
  name:
    "PostgresStore on a schema never migrated names migrate() on each read and write, within the 300 characters the app logs, keeping PostgreSQL's error as the cause",
  ignore,
  async fn() {
    const { schema, store } = await openPostgresStore({ migrated: false });
    const calls: [string, () => Promise<unknown>][] = [
      ["getIntent", () => store.getIntent("pi_0001")],
      ["createIntent", () =>
        store.createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        })],
      ["deliveries", () => store.deliveries("pi_0001/settle")],
      ["getDeadLetter", () => store.getDeadLetter("pi_0001/settle")],
      ["listDeadLetters", () => store.listDeadLetters()],
      ["voidHold", () => store.voidHold("pi_0001")],
      ["admit", () => store.admit({ count: "pi_0001/settle", now: 1_000 })],
    ];
    for (const [name, call] of calls) {
      assertNamesMigrate(await failure(call), schema, "42P01", name);
    }
  },
});

Deno.test({
  name:
    "PostgresStore on a schema migrated by an older version, a table of the store missing, names migrate() without saying the database has none of them",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await openPostgresStore();
    // A table a newer version added, not yet there: the upgrade's
    // migration was skipped.
    await sql.unsafe(`DROP TABLE "${schema}".dead_letters`);
    const error = await failure(() => store.getDeadLetter("pi_0001/settle"));
    assert.match(error.message, /run store\.migrate\(\)/);
    assert.doesNotMatch(error.message, /has no tables/, error.message);
    assert.match(error.message, new RegExp(`schema "${schema}" or a table`));
    assert.equal(await store.getIntent("pi_0001"), null, "the rest is there");
    await close();
  },
});

Deno.test({
  name:
    "PostgresStore on a schema an earlier revision migrated (no tx_hashes column, no refuse_stale function) names migrate() on every intent call, keeping PostgreSQL's error as the cause",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await migratedWithIntent();
    // The schema as the first revisions of PostgresStore migrated it
    // (25bb555, read back with pg_dump): the same tables, without the
    // column and the function a later one added.
    await sql.unsafe(
      `ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes; DROP FUNCTION "${schema}".refuse_stale(bigint)`,
    );
    const intent = (await sql.unsafe(
      `SELECT version FROM "${schema}".intents WHERE id = 'pi_0001'`,
    ))[0]!;
    const version = String(intent.version);
    const calls: [string, () => Promise<unknown>][] = [
      ["getIntent", () => store.getIntent("pi_0001")],
      ["createIntent", () =>
        store.createIntent({
          id: "pi_0002",
          state: "authorized",
          hold: "pending",
        })],
      ["transition", () =>
        store.transition("pi_0001", {
          from: "authorized",
          to: "settling",
          version,
          at: 1_000,
        })],
      ["voidHold", () => store.voidHold("pi_0001")],
    ];
    for (const [name, call] of calls) {
      const error = await failure(call);
      assertNamesMigrate(error, schema, "42703", name);
      // Its statement refused, its transaction rolled back: not written.
      if (name === "createIntent") assert.equal(isNotWritten(error), true);
    }
    // This version's migrate() mends it, and the intent reads as written.
    await store.migrate();
    assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
    await close();
  },
});

Deno.test({
  name:
    "PostgresStore on a schema a revision migrated with tx_hashes but before refuse_stale names migrate() on an intent's write, keeping PostgreSQL's error (an undefined function) as the cause",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await migratedWithIntent();
    // The revisions from b39a30d4 (tx_hashes) to fc7c6f1c (refuse_stale)
    // migrated the column but not the function.
    await sql.unsafe(`DROP FUNCTION "${schema}".refuse_stale(bigint)`);
    const version = String(
      (await sql.unsafe(
        `SELECT version FROM "${schema}".intents WHERE id = 'pi_0001'`,
      ))[0]!.version,
    );
    const error = await failure(() =>
      store.transition("pi_0001", {
        from: "authorized",
        to: "settling",
        version,
        at: 1_000,
      })
    );
    assertNamesMigrate(error, schema, "42883");
    // This version's migrate() mends it.
    await store.migrate();
    assert.equal(
      (await store.transition("pi_0001", {
        from: "authorized",
        to: "settling",
        version,
        at: 1_000,
      })).state,
      "settling",
    );
    await close();
  },
});

Deno.test({
  name:
    "PostgresStore on a current schema, an operator's trigger on it calling a function or column that does not exist, says so, not run migrate() (which mends nothing), and writes nothing",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await migratedWithIntent();
    // An operator's audit trigger, its function's body naming what the
    // database lacks: PostgreSQL raises 42883 (42703 for a column) inside
    // the store's write, with the function in its context.
    await sql.unsafe(`
      CREATE FUNCTION "${schema}".audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM audit_log_write(NEW.id); RETURN NEW; END $$;
      CREATE TRIGGER audit AFTER INSERT OR UPDATE ON "${schema}".intents
      FOR EACH ROW EXECUTE FUNCTION "${schema}".audit();
      CREATE FUNCTION "${schema}".audit_column() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM NEW.no_such_column; RETURN NEW; END $$;
      CREATE TRIGGER audit_column AFTER INSERT OR UPDATE ON "${schema}".holds
      FOR EACH ROW EXECUTE FUNCTION "${schema}".audit_column();
    `);
    const version = String(
      (await sql.unsafe(
        `SELECT version FROM "${schema}".intents WHERE id = 'pi_0001'`,
      ))[0]!.version,
    );
    const calls: [string, string, () => Promise<unknown>][] = [
      ["createIntent", "42883", () =>
        store.createIntent({
          id: "pi_0002",
          state: "authorized",
          hold: "pending",
        })],
      ["transition", "42883", () =>
        store.transition("pi_0001", {
          from: "authorized",
          to: "settling",
          version,
          at: 1_000,
        })],
      ["voidHold", "42703", () => store.voidHold("pi_0001")],
    ];
    // migrate() finds the schema current and changes nothing: the advice
    // it gives would send the operator round in a loop.
    await store.migrate();
    for (const [name, code, call] of calls) {
      const error = await failure(call);
      assert.doesNotMatch(
        error.message,
        /run store\.migrate\(\)/,
        `${name}: ${error.message}`,
      );
      assert.match(
        describeError(error),
        /audit_log_write|no_such_column/,
        `${name}: PostgreSQL's own words are kept: ${describeError(error)}`,
      );
      assert.equal(
        (error.cause as { code?: unknown } | undefined)?.code ??
          (error as { code?: unknown }).code,
        code,
        name,
      );
      assert.equal(isSchemaBehind(error), false, name);
    }
    // Nothing of the writes landed.
    assert.equal(await store.getIntent("pi_0002"), null);
    const after = await store.getIntent("pi_0001");
    assert.equal(after?.state, "authorized");
    assert.equal(after?.hold, "pending");
    await close();
  },
});

Deno.test({
  name:
    "PostgresStore on a current schema, an operator's trigger on it writing to a table that does not exist (42P01), says so, not run migrate(), and writes nothing",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await openPostgresStore();
    await sql.unsafe(`
      CREATE FUNCTION "${schema}".audit_table() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO no_such_audit_table VALUES (NEW.id); RETURN NEW; END $$;
      CREATE TRIGGER audit_table AFTER INSERT OR UPDATE ON "${schema}".intents
      FOR EACH ROW EXECUTE FUNCTION "${schema}".audit_table();
    `);
    const error = await failure(() =>
      store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      })
    );
    assert.doesNotMatch(error.message, /run store\.migrate\(\)/, error.message);
    assert.match(describeError(error), /no_such_audit_table/);
    assert.equal(
      (error.cause as { code?: unknown } | undefined)?.code ??
        (error as { code?: unknown }).code,
      "42P01",
    );
    assert.equal(await store.getIntent("pi_0001"), null);
    await close();
  },
});

Deno.test({
  name:
    "PostgresStore on a schema never migrated marks each write refused as not written, and an ops route says nothing changed, not that it may have landed",
  ignore,
  async fn() {
    const { store } = await openPostgresStore({ migrated: false });
    const writes: [string, () => Promise<unknown>][] = [
      ["createIntent", () =>
        store.createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        })],
    ];
    for (const [name, call] of writes) {
      const error = await failure(call);
      assert.match(error.message, /run store\.migrate\(\)/, name);
      assert.equal(isNotWritten(error), true, `${name}: ${error.message}`);
    }
    // A Worker deployed before its migration: the operator's create was
    // refused whole, and a read to see whether it landed fails as well.
    const lines: string[] = [];
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      webhookSecret: "local-secret-0123456789-unmigrated",
      opsToken: "ops-token-0123456789-unmigrated",
      log: (line) => void lines.push(line),
    });
    const res = await app.request("/v1/intents", {
      method: "POST",
      headers: { authorization: "Bearer ops-token-0123456789-unmigrated" },
      body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
    });
    const body = await res.json();
    assert.equal(res.status, 503);
    assert.match(
      body.detail,
      /schema is not migrated[^]*nothing changed[^]*run migrate\(\)/,
      body.detail,
    );
    assert.doesNotMatch(body.detail, /may have landed/, body.detail);
    assert.match(lines.join("\n"), /run store\.migrate\(\)/);
  },
});

Deno.test("isSchemaBehind() finds a schema behind wrapped as a cause three deep (a delivery's error around the store's), and no deeper", () => {
  let error: Error = schemaBehind(new Error("no table"));
  for (let depth = 0; depth <= 3; depth++) {
    assert.equal(isSchemaBehind(error), true, `wrapped ${depth} deep`);
    error = new Error(`wrapped ${depth + 1}`, { cause: error });
  }
  assert.equal(isSchemaBehind(error), false, "wrapped 4 deep");
});
