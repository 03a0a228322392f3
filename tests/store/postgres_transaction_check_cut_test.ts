/**
 * `PostgresStore.migrate()` checks that a transaction of one flight
 * answers, to refuse a pooler in statement mode, which ends the connection
 * at its `BEGIN`. A restart or a failover ends a connection once: the
 * check's transaction lost once, and answered when tried again, must let
 * the store start.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { throughRelay } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore.migrate() starts where the connection of its check of a transaction is lost once (a restart, a failover) and the check answers when tried again",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    let cuts = 0;
    await throughRelay(
      { max: 2 },
      () => (text) => {
        // The check's one flight: its answer dropped and the client's
        // connection closed, once.
        if (cuts === 0 && text.includes("SELECT $1::int AS one\0")) {
          cuts++;
          return Promise.resolve("cut");
        }
        return Promise.resolve();
      },
      async ({ schema, sql }) => {
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        assert.equal(cuts, 1, "the check's transaction was not cut");
        await store.createIntent({ id: "pi_0001", state: "authorized" });
        assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
        store.close();
      },
    );
  }),
});
