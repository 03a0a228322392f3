/**
 * moveKvToPostgres() behind a lock a prepared transaction holds on the
 * store's tables: another application's two-phase commit (`PREPARE
 * TRANSACTION`), never finished, keeps its locks with no session, so
 * pg_stat_activity shows nothing holding them. The move says so, naming
 * the transaction's gid and how to end it, as PostgresStore's writes do
 * (tests/store/postgres_prepared_lock_test.ts).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable, serverUpFirst } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

serverUpFirst();

Deno.test({
  name:
    "moveKvToPostgres() held past its wait by a prepared transaction (PREPARE TRANSACTION, never finished) names its gid and COMMIT PREPARED or ROLLBACK PREPARED, where it sent the operator to pg_stat_activity, which shows no session holding it; nothing is moved, and the move lands once it ends",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    // A server of its own: two-phase commit needs max_prepared_transactions.
    const server = await startPostgres({
      settings: { max_prepared_transactions: "4" },
    });
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_2pc_" });
    const kv = await Deno.openKv(`${dir}/relayer.kv`);
    const sql = postgres(server.url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
    });
    try {
      await new PostgresStore(sql, { schema: "relayer" }).migrate();
      await new KvStore(kv).createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      await sql.unsafe(
        `BEGIN; INSERT INTO relayer.claims (key, expires_at) VALUES ('sig_open', 1); PREPARE TRANSACTION 'tm-4711'`,
      );
      const now = () => 1_800_000_000_000;
      const error = await moveKvToPostgres(kv, sql, { now }).then(
        () => assert.fail("the move went on"),
        (error: Error) => error,
      );
      assert.ok(error instanceof BusyError, String(error));
      // Before: "Cannot move into schema relayer as another session held
      // its tables for over 10000ms (see pg_stat_activity): stop every
      // instance of the service on it, then run the move again. Nothing
      // was moved."
      assert.match(
        error.message,
        /^Cannot move into schema relayer as a prepared transaction held its tables for over 10000ms: 'tm-4711', prepared at .+ by .+\. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with COMMIT PREPARED 'tm-4711' or ROLLBACK PREPARED 'tm-4711' \(see pg_prepared_xacts\), then run the move again\. Nothing was moved\.$/,
      );
      const [row] = await sql`SELECT count(*)::int AS n FROM relayer.intents`;
      assert.equal(row?.n, 0);
      await sql.unsafe(`ROLLBACK PREPARED 'tm-4711'`);
      const report = await moveKvToPostgres(kv, sql, { now });
      assert.equal(report.moved.intents, 1);
    } finally {
      kv.close();
      await sql.end({ timeout: 0 }).catch(() => {});
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
