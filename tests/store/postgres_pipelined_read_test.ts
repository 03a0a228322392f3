/**
 * PostgresStore's reads past `connectionWaitMs` on a connection postgres.js
 * pipelines them on (every connection of the pool busy): a read sent
 * behind another query, not yet the one running, must not be cancelled
 * through postgres.js 3.4.9, which then drops it and gives its answer to
 * the query sent after it: another caller's read got this one's row.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

Deno.test({
  name:
    "PostgresStore: a read past connectionWaitMs, pipelined behind a slow query, leaves its answer to no other read: the read sent after it gets its own intent",
  ignore: !postgresAvailable,
  // One connection: every read is pipelined behind the query on it.
  fn: onFreshSchema({
    connectionWaitMs: 300,
    migrateOn: "admin",
    timeoutMs: 60_000,
  }, async ({ admin, schema, sql, store }) => {
    const setup = new PostgresStore(admin, { schema });
    await setup.createIntent({ id: "pi_1", hold: "pending" });
    await setup.createIntent({ id: "pi_2", hold: "pending" });
    await store.getIntent("pi_1"); // the connection open
    for (let round = 0; round < 3; round++) {
      // Another query of the client's, slower than the bound, which ends
      // within the bound of the read sent after the first gave up.
      const slow = sql`SELECT pg_sleep(0.45)`.execute();
      const first = store.getIntent("pi_1").then(
        () => "answered",
        () => "failed",
      );
      assert.equal(await first, "failed");
      // Sent after the first gave up, behind it on the same connection.
      const second = await store.getIntent("pi_2").then(
        (intent) => intent?.id ?? "missing",
        () => "failed",
      );
      await slow;
      assert.notEqual(second, "pi_1", "a read of pi_2 answered pi_1");
      // Sent once the connection is free: answered.
      assert.equal((await store.getIntent("pi_2"))?.id, "pi_2");
      await sleep(50);
    }
  }),
});
