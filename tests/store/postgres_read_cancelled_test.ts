/**
 * PostgresStore's reads outside a write (`getIntent`, `deliveries`,
 * `getDeadLetter`) whose statement another session cancels
 * (`pg_cancel_backend`, 57014): they fail with the store's own error,
 * which names the cancel and says that nothing was read and to retry, as
 * its writes say theirs, never the server's raw error; and the store
 * reads again at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";
import { waitingOnLock } from "./_waiting_on_lock.ts";

const NAME = "relayer_read_cancelled";

/**
 * `test` once `pi_1` is written (a pending hold) and `table` of `schema`
 * is locked (ACCESS EXCLUSIVE) in a transaction of a session of `admin`'s,
 * the locker, which `test` ends with `ROLLBACK`; ended and released
 * afterwards, whether the test passes or throws.
 */
async function withLockedTable(
  admin: postgres.Sql,
  schema: string,
  table: string,
  test: (locker: postgres.ReservedSql) => Promise<void>,
): Promise<void> {
  await new PostgresStore(admin, { schema }).createIntent({
    id: "pi_1",
    hold: "pending",
  });
  const locker = await admin.reserve();
  try {
    await locker.unsafe("BEGIN");
    await locker.unsafe(
      `LOCK TABLE "${schema}".${table} IN ACCESS EXCLUSIVE MODE`,
    );
    await test(locker);
  } finally {
    await locker.unsafe("ROLLBACK").catch(() => {});
    locker.release();
  }
}

const READS = [
  {
    name: "getIntent",
    table: "intents",
    read: (store: PostgresStore) => store.getIntent("pi_1"),
    what: "read of intent pi_1",
  },
  {
    name: "deliveries",
    table: "counters",
    read: (store: PostgresStore) => store.deliveries("pi_1/settle", 1),
    what: "read of the deliveries counted for pi_1/settle",
  },
  {
    name: "getDeadLetter",
    table: "dead_letters",
    read: (store: PostgresStore) => store.getDeadLetter("pi_1/settle"),
    what: "read of the dead letter of pi_1/settle",
  },
] as const;

serverUpFirst();

for (const { name, table, read, what } of READS) {
  Deno.test({
    name:
      `PostgresStore.${name} whose statement another session cancels fails with the store's own error (nothing was read; retry), not PostgreSQL's 57014`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({
      migrateOn: "admin",
      connection: { application_name: NAME },
    }, async ({ admin, schema, store }) => {
      await withLockedTable(admin, schema, table, async (locker) => {
        const reading = read(store).then(
          (answer) => answer,
          (error: unknown) => error,
        );
        const pid = await waitingOnLock(admin, NAME, `the ${name}`);
        await admin`SELECT pg_cancel_backend(${pid})`;
        const error = await reading;
        await locker.unsafe("ROLLBACK");
        assert.ok(error instanceof Error, `answered ${String(error)}`);
        assert.notEqual(error.name, "PostgresError", String(error));
        assert.equal(
          error.message,
          `The store's ${what} failed as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was read; retry`,
        );
        assert.equal((error.cause as { code?: unknown })?.code, "57014");
        // The connection serves the next read.
        await read(store);
      });
    }),
  });
}

Deno.test({
  name:
    "PostgresStore.getIntent that the role's statement_timeout cancels says the timeout is too short for the store's reads (nothing was read; retry)",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    migrateOn: "admin",
    connection: { application_name: NAME, statement_timeout: "300" },
  }, async ({ admin, schema, store }) => {
    await withLockedTable(admin, schema, "intents", async (locker) => {
      const error = await store.getIntent("pi_1").then(
        (answer) => answer,
        (error: unknown) => error,
      );
      await locker.unsafe("ROLLBACK");
      assert.ok(error instanceof Error, `answered ${String(error)}`);
      assert.match(
        error.message,
        /^The store's read of intent pi_1 failed as statement_timeout cancelled its statement, .*: the role's statement_timeout is too short for the store's reads \(SHOW statement_timeout; .*: nothing was read; retry$/,
      );
      assert.equal((error.cause as { code?: unknown })?.code, "57014");
    });
  }),
});
