/**
 * moveKvToPostgres() for a role that row-level security lets read the
 * store's tables but not write them (a policy `FOR SELECT` only, the
 * role neither their owner nor BYPASSRLS): the move is refused before its
 * transaction, in words that say what to change, as `PostgresStore.migrate()`
 * refuses such a role (tests/store/postgres_row_security_test.ts).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { ConflictError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "moveKvToPostgres() refuses a role that row-level security lets read but not write (a policy FOR SELECT only) before it moves anything, naming what to change, where it failed at its first insert in the server's words alone",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_rls_" });
    const kv = await Deno.openKv(`${dir}/relayer.kv`);
    const pg = await openPostgresStore();
    const role = `r${pg.schema}`;
    let mover: postgres.Sql | undefined;
    try {
      await new KvStore(kv).createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      await pg.sql.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD 'pw';
        GRANT USAGE ON SCHEMA "${pg.schema}" TO "${role}";
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${pg.schema}" TO "${role}";
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${pg.schema}" TO "${role}";
        ALTER TABLE "${pg.schema}".intents ENABLE ROW LEVEL SECURITY;
        CREATE POLICY reads ON "${pg.schema}".intents FOR SELECT TO "${role}" USING (true)`);
      const url = new URL(await postgresUrl());
      url.username = role;
      url.password = "pw";
      mover = postgres(url.href, { max: 1, onnotice: () => {} });
      const error = await moveKvToPostgres(kv, mover, {
        schema: pg.schema,
        now: () => 1_800_000_000_000,
      }).then(() => null, (error: Error) => error);
      // Before: a PostgresError, 'new row violates row-level security
      // policy for table "intents"', which says neither what to change
      // nor that nothing was moved.
      assert.ok(error instanceof ConflictError, String(error));
      assert.equal(
        error.message,
        `Cannot move into schema ${pg.schema} as row-level security lets this role read but not write there: no policy allows it INSERT on ${pg.schema}.intents, UPDATE on ${pg.schema}.intents, so the move's inserts fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there, then run the move again. Nothing was moved.`,
      );
      const [row] = await pg.sql.unsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM "${pg.schema}".intents`,
      );
      assert.equal(row?.n, 0);
      // One FOR ALL: the move runs.
      await pg.sql.unsafe(
        `CREATE POLICY service ON "${pg.schema}".intents TO "${role}" USING (true) WITH CHECK (true)`,
      );
      const report = await moveKvToPostgres(kv, mover, {
        schema: pg.schema,
        now: () => 1_800_000_000_000,
      });
      assert.equal(report.moved.intents, 1);
    } finally {
      await mover?.end();
      await pg.close();
      await pg.sql.unsafe(
        `DROP OWNED BY "${role}"; DROP ROLE IF EXISTS "${role}"`,
      );
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
