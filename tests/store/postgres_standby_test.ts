/**
 * A client given a hot standby and its primary, the standby listed first
 * (`postgres://…@standby:5432,primary:5432/db?target_session_attrs=…`), as
 * a failover-aware URL lists them, on a real primary and a real standby
 * made from it (`pg_basebackup -R`), both on 127.0.0.1.
 *
 * - `target_session_attrs=primary`: postgres.js 3.4.9 ends a connection to
 *   the standby and connects to the next host. Given
 *   `answeredSocketOption`, whose socket stays on the first host that
 *   answers, it connected to the standby again, hundreds of times a
 *   second, and no query answered: the socket now moves to the next host
 *   when the client ends a connection under `target_session_attrs`.
 * - `target_session_attrs=read-write`: postgres.js 3.4.9 checks the
 *   `default_transaction_read_only` the server reports, which a standby
 *   reports `off`, so it keeps the standby, and every write is refused as
 *   read-only. `PostgresStore` refuses such a client at construction and
 *   says to use `target_session_attrs=primary`.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { countedSocket } from "./_counted_socket.ts";
import {
  PAIR_CLIENT,
  standbyFirst,
  startPair,
  within,
} from "./_postgres_pair.ts";

const options = PAIR_CLIENT;

Deno.test({
  name:
    "target_session_attrs=primary over a standby and its primary: the store migrates and writes on the primary, with answeredSocketOption and without",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    try {
      for (const given of [false, true]) {
        // Counts the sockets made: one per connect.
        const { socket, count } = countedSocket(5_000);
        const sql = postgres(standbyFirst(pair, "primary"), {
          ...options,
          ...(given ? { socket } : {}),
        } as postgres.Options<Record<string, never>>);
        const schema = given ? "relayer_answered" : "relayer_plain";
        const store = new PostgresStore(sql, { schema });
        const what = given ? "with answeredSocketOption" : "plain";
        try {
          await within(store.migrate(), 10_000);
          await within(
            store.createIntent({ id: "pi_1", state: "created" }),
            10_000,
          );
          const [where] = await within(
            sql`SELECT inet_server_port() AS port, pg_is_in_recovery() AS standby`,
            10_000,
          );
          assert.deepEqual(
            { port: where?.port, standby: where?.standby },
            { port: pair.primary.port, standby: false },
            what,
          );
          // The standby is passed over once per connection, at most.
          if (given) {
            assert.ok(count.made <= 4, `${count.made} connects ${what}`);
          }
        } finally {
          store.close();
          await sql.end({ timeout: 0 });
          await socket.closed(5_000);
        }
      }
      // Written on the primary: the schema and its row are there.
      assert.equal(
        await pair.primary.psql(
          "SELECT count(*) FROM relayer_plain.intents, relayer_answered.intents",
        ),
        "1",
      );
    } finally {
      await pair.stop();
    }
  },
});

Deno.test({
  name:
    "target_session_attrs=read-write over a standby and its primary: postgres.js keeps the standby, and PostgresStore refuses the client, naming target_session_attrs=primary",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    const sql = postgres(standbyFirst(pair, "read-write"), options);
    try {
      // postgres.js 3.4.9's choice, which the refusal stands on: should a
      // release pick the primary here, the refusal can go.
      const [where] = await within(
        sql`SELECT pg_is_in_recovery() AS standby`,
        10_000,
      );
      assert.equal(where?.standby, true, "read-write kept the standby");
      assert.throws(
        () => new PostgresStore(sql),
        (error: Error) =>
          error instanceof TypeError &&
          /target_session_attrs=read-write/.test(error.message) &&
          /target_session_attrs=primary/.test(error.message),
      );
      // One host: nothing to choose from, so nothing is refused.
      const one = postgres(
        `postgres://postgres:${pair.primary.password}@127.0.0.1:${pair.primary.port}/postgres?target_session_attrs=read-write`,
        options,
      );
      new PostgresStore(one).close();
      await one.end({ timeout: 0 });
    } finally {
      await sql.end({ timeout: 0 });
      await pair.stop();
    }
  },
});

Deno.test({
  name:
    "A hot standby alone as the store's database: PostgresStore.migrate() and moveKvToPostgres() say it is a standby and to connect to the primary, migrated or not",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    const primary = postgres(
      `postgres://postgres:${pair.primary.password}@127.0.0.1:${pair.primary.port}/postgres`,
      options,
    );
    const standby = postgres(
      `postgres://postgres:${pair.primary.password}@127.0.0.1:${pair.standbyPort}/postgres`,
      options,
    );
    const kv = await Deno.openKv(":memory:");
    try {
      await new KvStore(kv).createIntent({ id: "pi_1", state: "created" });
      await within(
        new PostgresStore(primary, { schema: "relayer" }).migrate(),
        10_000,
      );
      // The standby has replayed the migration: the schema is there too.
      for (let waited = 0;; waited += 50) {
        const [row] = await standby`
          SELECT to_regclass('relayer.intents') IS NOT NULL AS there`;
        if (row?.there === true) break;
        assert.ok(waited < 10_000, "the standby never replayed the schema");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      for (const schema of ["relayer", "relayer_new"]) {
        // Before: "… read-only (a standby, or default_transaction_read_only
        // = on) …", which left an operator to find out which.
        await assert.rejects(
          within(new PostgresStore(standby, { schema }).migrate(), 10_000),
          /^Error: Cannot use this PostgreSQL database as the server is a hot standby \(pg_is_in_recovery\(\)\), which takes no writes: connect to the primary$/,
        );
      }
      await assert.rejects(
        within(moveKvToPostgres(kv, standby, { schema: "relayer" }), 10_000),
        /^ConflictError: Cannot move into schema relayer as the server is a hot standby \(pg_is_in_recovery\(\)\), which takes no writes: connect to the primary, then run the move again\. Nothing was moved\.$/,
      );
    } finally {
      kv.close();
      await standby.end({ timeout: 0 });
      await primary.end({ timeout: 0 });
      await pair.stop();
    }
  },
});
