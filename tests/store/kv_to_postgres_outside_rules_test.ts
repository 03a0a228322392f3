/**
 * moveKvToPostgres() into a schema where a team added a NOT NULL column
 * with no default to one of the store's tables (their schema grows): the
 * move is refused before its transaction, naming the column and what to
 * do, as `PostgresStore.migrate()` refuses such a schema
 * (tests/store/postgres_outside_rules_test.ts).
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "moveKvToPostgres() refuses a schema where a team added a NOT NULL column with no default, naming it and what to do, before it moves anything, where its first insert failed in the server's words alone; it moves once the column has a default",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_rule_" });
    const kv = await Deno.openKv(`${dir}/relayer.kv`);
    const pg = await openPostgresStore();
    try {
      await new KvStore(kv).createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      await pg.sql.unsafe(
        `ALTER TABLE "${pg.schema}".intents ADD COLUMN team_ref text NOT NULL DEFAULT 'old';
        ALTER TABLE "${pg.schema}".intents ALTER COLUMN team_ref DROP DEFAULT`,
      );
      const now = () => 1_800_000_000_000;
      const error = await moveKvToPostgres(kv, pg.sql, {
        schema: pg.schema,
        now,
      }).then(() => null, (error: Error) => error);
      // Before: a PostgresError, 'null value in column "team_ref" of
      // relation "intents" violates not-null constraint'.
      assert.ok(error instanceof ConflictError, String(error));
      assert.equal(
        error.message,
        `Cannot move into schema ${pg.schema} as ${pg.schema}.intents.team_ref is NOT NULL with no default, a column the store's migration did not make and the move's inserts give no value: give it a DEFAULT (ALTER TABLE … ALTER COLUMN … SET DEFAULT …), or make it nullable, then run the move again. Nothing was moved.`,
      );
      await pg.sql.unsafe(
        `ALTER TABLE "${pg.schema}".intents ALTER COLUMN team_ref SET DEFAULT 'new'`,
      );
      const report = await moveKvToPostgres(kv, pg.sql, {
        schema: pg.schema,
        now,
      });
      assert.equal(report.moved.intents, 1);
    } finally {
      kv.close();
      await pg.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
