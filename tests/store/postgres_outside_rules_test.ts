/**
 * PostgresStore when a rule its migration does not make is added to its
 * tables after the start: an admin's CHECK constraint, a NOT NULL column a
 * payment team adds with no default (their schema grows), or their own
 * audit trigger that RAISEs, or a publication (logical replication) whose
 * row filter or column list reaches past a table's replica identity. The
 * store's write then fails: it says which
 * rule refused it, in the server's words, that the store did not make it,
 * and that nothing was written (the intent is as it was), where the
 * server's words came alone, as if the store's own bug.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import type { PostgresStore } from "../../store/postgres.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";

const ignore = !postgresAvailable;

/** The write's refusal: `said` in its words, marked nothing written. */
function refusedFor(said: RegExp): (error: Error) => boolean {
  return (error) => {
    assert.match(error.message, said);
    assert.match(
      error.message,
      /, which the store's migration does not make \(added to its tables since\): nothing of it was written; deliveries retry until /,
    );
    assert.equal(isNotWritten(error), true);
    return true;
  };
}

/** `pi_1` and `pi_2`, each authorized with its hold pending. */
async function authorizedBoth(store: PostgresStore): Promise<void> {
  for (const id of ["pi_1", "pi_2"]) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
  }
}

/** `pi_1` and `pi_2`, each authorized with its hold pending, moved to settling. */
async function settlingBoth(store: PostgresStore): Promise<void> {
  for (const id of ["pi_1", "pi_2"]) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
    await store.transition(id, {
      from: "authorized",
      to: "settling",
      version: "1",
      at: 1,
    });
  }
}

/** The record of `id`'s broadcast of `0xabc`, sent at 2, on version 2. */
function recordSent(store: PostgresStore, id: string): Promise<unknown> {
  return store.recordBroadcast(id, "2", {
    outcome: "sent",
    txHash: "0xabc",
    at: 2,
  });
}

Deno.test({
  name:
    "PostgresStore names a payment team's audit trigger that RAISEs on its intents' update, and a CHECK constraint an admin added, as theirs, marked nothing written: the delivery's move to settling fails so, and the intent is as it was",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await authorizedBoth(store);
    await admin.unsafe(
      `CREATE FUNCTION "${schema}".team_audit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.id = 'pi_1' AND NEW.state = 'settling' THEN
            RAISE EXCEPTION 'audit: settling needs approval';
          END IF;
          RETURN NEW;
        END $$;
      CREATE TRIGGER team_audit BEFORE UPDATE ON "${schema}".intents
        FOR EACH ROW EXECUTE FUNCTION "${schema}".team_audit();
      ALTER TABLE "${schema}".intents ADD CONSTRAINT team_no_pi_2
        CHECK (id <> 'pi_2' OR state <> 'settling') NOT VALID`,
    );
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({
        pi_1: { sends: [{ txHash: "0xabc" }] },
        pi_2: { sends: [{ txHash: "0xdef" }] },
      }),
      now: () => 1_000_000,
    });
    // Before: the server's words alone, 'audit: settling needs approval',
    // not marked as nothing written.
    await assert.rejects(
      relayer.deliver({ intentId: "pi_1", kind: "settle" }, 1),
      refusedFor(
        /^Cannot move pi_1 from authorized to settling as PostgreSQL refused it for the function t\w+\.team_audit\(\), a trigger's \(audit: settling needs approval\)/,
      ),
    );
    await assert.rejects(
      relayer.deliver({ intentId: "pi_2", kind: "settle" }, 1),
      refusedFor(
        /^Cannot move pi_2 from authorized to settling as PostgreSQL refused it for the constraint "team_no_pi_2" on intents \(new row for relation "intents" violates check constraint "team_no_pi_2"\)/,
      ),
    );
    for (const id of ["pi_1", "pi_2"]) {
      const intent = await store.getIntent(id);
      assert.equal(intent?.state, "authorized");
      assert.equal(intent?.version, "1");
      assert.equal(intent?.lastBroadcast, null);
    }
  }),
});

Deno.test({
  name:
    "PostgresStore names a NOT NULL column with no default that a team added to its intents, and what to do, marked nothing written: createIntent fails so, and lands once the column has a default",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await admin.unsafe(
      `ALTER TABLE "${schema}".intents ADD COLUMN team_ref text NOT NULL DEFAULT 'old';
      ALTER TABLE "${schema}".intents ALTER COLUMN team_ref DROP DEFAULT`,
    );
    // Before: 'null value in column "team_ref" of relation "intents"
    // violates not-null constraint' alone, not marked as nothing written.
    await assert.rejects(
      store.createIntent({ id: "pi_1" }),
      refusedFor(
        /^Cannot create intent pi_1 as PostgreSQL refused it for a NOT NULL column on intents its INSERT gives no value \(null value in column "team_ref" of relation "intents" violates not-null constraint\), .* deliveries retry until the column has a DEFAULT \(ALTER TABLE … ALTER COLUMN team_ref SET DEFAULT …\), or is nullable$/,
      ),
    );
    assert.equal(await store.getIntent("pi_1"), null);
    await admin.unsafe(
      `ALTER TABLE "${schema}".intents ALTER COLUMN team_ref SET DEFAULT 'new'`,
    );
    assert.equal((await store.createIntent({ id: "pi_1" })).version, "1");
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() refuses a schema where a team added a NOT NULL column with no default to a table the store inserts into, naming it and what to do, and starts once it has a default",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ADD COLUMN team_ref text NOT NULL DEFAULT 'old';
      ALTER TABLE "${schema}".counters ALTER COLUMN team_ref DROP DEFAULT;
      ALTER TABLE "${schema}".intents ADD COLUMN team_note text NOT NULL DEFAULT '';
      ALTER TABLE "${schema}".intents ADD COLUMN team_seq bigint GENERATED ALWAYS AS IDENTITY;
      ALTER TABLE "${schema}".intents ADD COLUMN team_opt text`,
    );
    // Before: it started, and every delivery's count failed 'null value in
    // column "team_ref" of relation "counters" violates not-null
    // constraint'.
    await assert.rejects(
      store.migrate(),
      (error: Error) => {
        assert.equal(
          error.message,
          `Cannot use the PostgreSQL schema "${schema}" as ${schema}.counters.team_ref is NOT NULL with no default, a column the store's migration did not make and its INSERTs give no value, so each would fail: give it a DEFAULT (ALTER TABLE … ALTER COLUMN … SET DEFAULT …), or make it nullable`,
        );
        return true;
      },
    );
    await admin.unsafe(
      `ALTER TABLE "${schema}".counters ALTER COLUMN team_ref SET DEFAULT 'new'`,
    );
    await store.migrate();
    assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
  }),
});

Deno.test({
  name:
    "PostgresStore names a unique index a team added to its intents (one tx hash per intent) as theirs, marked nothing written, not as another writer's race: the record of a second intent's broadcast of that hash fails so",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await settlingBoth(store);
    await admin.unsafe(
      `CREATE UNIQUE INDEX team_one_hash ON "${schema}".intents (last_tx_hash)`,
    );
    await recordSent(store, "pi_1");
    // Before: a ConflictError, "Cannot record a broadcast for pi_2 as
    // another writer changed it at the same time; re-read it", where no
    // writer had: the relayer re-read and met it again.
    await assert.rejects(
      recordSent(store, "pi_2"),
      refusedFor(
        /^Cannot record a broadcast for pi_2 as PostgreSQL refused it for the constraint "team_one_hash" on intents \(duplicate key value violates unique constraint "team_one_hash"\)/,
      ),
    );
    assert.equal((await store.getIntent("pi_2"))?.version, "2");
  }),
});

Deno.test({
  name:
    "PostgresStore names a unique constraint on a team's own table that its trigger writes (a table of theirs named as one of the store's, intents in their schema) as theirs, marked nothing written, not as another writer's race",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await settlingBoth(store);
    // Their table's primary key is named intents_pkey, as the store's is:
    // PostgreSQL names it by its table, whatever the schema.
    const team = `${schema}_team`;
    try {
      await admin.unsafe(
        `CREATE SCHEMA "${team}";
        CREATE TABLE "${team}".intents (tx_hash text PRIMARY KEY);
        CREATE FUNCTION "${team}".one_hash() RETURNS trigger
          LANGUAGE plpgsql AS $$
          BEGIN
            IF NEW.last_tx_hash IS DISTINCT FROM OLD.last_tx_hash THEN
              INSERT INTO "${team}".intents VALUES (NEW.last_tx_hash);
            END IF;
            RETURN NULL;
          END $$;
        CREATE TRIGGER team_one_hash AFTER UPDATE ON "${schema}".intents
          FOR EACH ROW EXECUTE FUNCTION "${team}".one_hash()`,
      );
      await recordSent(store, "pi_1");
      // Before: a ConflictError, "… as another writer changed it at the
      // same time; re-read it", as if the store's own intents_pkey.
      await assert.rejects(
        recordSent(store, "pi_2"),
        refusedFor(
          /^Cannot record a broadcast for pi_2 as PostgreSQL refused it for the constraint "intents_pkey" on t\w+_team\.intents \(duplicate key value violates unique constraint "intents_pkey"\)/,
        ),
      );
      assert.equal((await store.getIntent("pi_2"))?.version, "2");
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${team}" CASCADE`);
    }
  }),
});

Deno.test({
  name:
    "PostgresStore names a publication (logical replication) whose row filter or column list reaches past a table's replica identity as what refused its write, with the server's detail, marked nothing written, where it said only 'cannot update table \"intents\"'; a replica identity that covers the filter lets the writes through",
  ignore,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    await authorizedBoth(store);
    // A CDC feed of finished payments to a warehouse (PostgreSQL 15's
    // row filters), and one of the holds' states alone (a column list).
    const filtered = `${schema}_finished`;
    const listed = `${schema}_hold_states`;
    try {
      await admin.unsafe(
        `CREATE PUBLICATION "${filtered}" FOR TABLE "${schema}".intents
          WHERE (state IN ('settled', 'failed'))`,
      );
      // Before: a bare PostgresError, "cannot update table "intents"",
      // not marked nothing written.
      await assert.rejects(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        }),
        refusedFor(
          /^Cannot move pi_1 from authorized to settling as PostgreSQL refused it for a publication of one of its tables \(logical replication\) \(cannot update table "intents": Column used in the publication WHERE expression is not part of the replica identity\.\), which .+ until the publication's row filter and column list name only columns of the table's replica identity, its primary key \(ALTER PUBLICATION … SET TABLE …; see pg_publication_tables\), or, for a row filter, the table's replica identity covers them \(ALTER TABLE … REPLICA IDENTITY FULL\)$/,
        ),
      );
      assert.equal((await store.getIntent("pi_1"))?.version, "1");
      // The cure the words name for a row filter.
      await admin.unsafe(
        `ALTER TABLE "${schema}".intents REPLICA IDENTITY FULL`,
      );
      const moved = await store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1,
      });
      assert.equal(moved.state, "settling");

      await admin.unsafe(
        `CREATE PUBLICATION "${listed}" FOR TABLE "${schema}".holds (state)`,
      );
      await assert.rejects(
        store.voidHold("pi_2"),
        refusedFor(
          /^Cannot .+ as PostgreSQL refused it for a publication of one of its tables \(logical replication\) \(cannot update table "holds": Column list used by the publication does not cover the replica identity\.\), which /,
        ),
      );
      assert.equal((await store.getIntent("pi_2"))?.hold, "pending");
    } finally {
      await admin.unsafe(
        `DROP PUBLICATION IF EXISTS "${filtered}", "${listed}"`,
      );
    }
  }),
});
