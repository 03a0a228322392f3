/**
 * A hot standby whose database defaults to SERIALIZABLE
 * (`ALTER DATABASE … SET default_transaction_isolation = 'serializable'`
 * on the primary, which the standby replays): PostgreSQL refuses every
 * transaction at that level there ("cannot use serializable mode in a hot
 * standby", 0A000), a statement alone too. A store pointed at it (a
 * replica's URL, an old primary a failover demoted) must still say that
 * the server is a standby and to connect to the primary, at its start and
 * on a write, as it does where the database keeps the default level.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { postgresAvailable } from "../_postgres.ts";
import {
  PAIR_CLIENT,
  serializableStandby,
  startPair,
  within,
} from "./_postgres_pair.ts";

const options = PAIR_CLIENT;

/**
 * The store, a write, a read and the move from Deno KV on a hot standby
 * whose database defaults to serializable. `german`: both servers word
 * their errors in German (see `postgres_localized_messages_test.ts`).
 */
async function onSerializableStandby(german: boolean): Promise<void> {
  const pair = await startPair(
    german
      ? { settings: { lc_messages: "C.UTF-8" }, env: { LANGUAGE: "de" } }
      : {},
  );
  const { password, port } = pair.primary;
  const primary = postgres(
    `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    options,
  );
  try {
    await within(
      new PostgresStore(primary, { schema: "relayer" }).migrate(),
      10_000,
    );
    await new PostgresStore(primary, { schema: "relayer" }).createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const standby = await serializableStandby(pair);
    const sql = postgres(standby, options);
    const store = new PostgresStore(sql, { schema: "relayer" });
    try {
      // Every statement there, as the server words it.
      await assert.rejects(
        sql`SELECT 1`,
        german
          ? /^PostgresError: kann serialisierbaren Modus nicht in einem Hot Standby verwenden$/
          : /^PostgresError: cannot use serializable mode in a hot standby$/,
      );
      // Before: "cannot use serializable mode in a hot standby", whose
      // hint is to lower the level, where the cure is the primary.
      await assert.rejects(
        within(store.migrate(), 10_000),
        /^Error: Cannot use this PostgreSQL database as the server is a hot standby \(pg_is_in_recovery\(\)\), which takes no writes: connect to the primary$/,
      );
      const written = await within(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        }),
        10_000,
      ).then(() => new Error("written"), (error: Error) => error);
      // Before: the write's read failed with the server's words alone.
      assert.match(
        written.message,
        /^Cannot move pi_1 from authorized to settling as PostgreSQL refused it as read-only \(a standby, /,
      );
      assert.equal(isNotWritten(written), true);
      const read = await within(store.getIntent("pi_1"), 10_000).then(
        () => new Error("read"),
        (error: Error) => error,
      );
      assert.match(read.message, /hot standby/);
      assert.match(read.message, /connect to the primary/);
      // And the move from Deno KV, as where the level is the default.
      const kv = await Deno.openKv(":memory:");
      try {
        await new KvStore(kv).createIntent({ id: "pi_2", state: "created" });
        await assert.rejects(
          within(moveKvToPostgres(kv, sql, { schema: "relayer" }), 10_000),
          /^ConflictError: Cannot move into schema relayer as the server is a hot standby \(pg_is_in_recovery\(\)\), which takes no writes: connect to the primary, then run the move again\. Nothing was moved\.$/,
        );
      } finally {
        kv.close();
      }
    } finally {
      store.close();
      await sql.end({ timeout: 0 });
    }
  } finally {
    await primary.end({ timeout: 0 });
    await pair.stop();
  }
}

Deno.test({
  name:
    "A hot standby whose database defaults to serializable: PostgresStore.migrate() and moveKvToPostgres() say it is a standby and to connect to the primary, and a write and a read say they met a standby, not the server's 'cannot use serializable mode'",
  ignore: !postgresAvailable,
  fn: () => onSerializableStandby(false),
});

Deno.test({
  name:
    "A hot standby whose database defaults to serializable, its words German ('kann serialisierbaren Modus nicht in einem Hot Standby verwenden'): the store, a write, a read and the move from Deno KV say it is a standby as in English, and postgres.js's type query refused so is taken, not left to end the process",
  ignore: !postgresAvailable,
  fn: () => onSerializableStandby(true),
});
