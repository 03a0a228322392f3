/**
 * PostgresStore's read past `connectionWaitMs` while it runs on its
 * connection (held up by a table lock): it is cancelled on the server, so
 * the connection serves other queries again while the lock stands.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

serverUpFirst();

Deno.test({
  name:
    "PostgresStore cancels a read past connectionWaitMs that runs on its connection: behind a table lock that stands, the pool's one connection answers again within moments",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    connectionWaitMs: 300,
    migrateOn: "admin",
  }, async ({ admin, schema, sql, store }) => {
    await new PostgresStore(admin, { schema }).createIntent({
      id: "pi_1",
      hold: "pending",
    });
    const locker = await admin.reserve();
    try {
      await store.getIntent("pi_1"); // the connection open
      // A schema change holds the table, for longer than the test looks.
      await locker.unsafe("BEGIN");
      await locker.unsafe(
        `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
      );
      await assert.rejects(
        store.getIntent("pi_1"),
        /did not answer the store's .* within 300ms/,
      );
      // Its query cancelled, the connection takes the next one.
      const started = performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const answer = await Promise.race([
        sql`SELECT 1 AS one`.then((rows) => rows[0]),
        new Promise((resolve) => {
          timer = setTimeout(() => resolve("no answer"), 2_000);
        }),
      ]).finally(() => clearTimeout(timer));
      assert.deepEqual(
        answer,
        { one: 1 },
        `after ${Math.round(performance.now() - started)} ms`,
      );
      await locker.unsafe("ROLLBACK");
      assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
    } finally {
      await locker.unsafe("ROLLBACK").catch(() => {});
      locker.release();
    }
  }),
});
