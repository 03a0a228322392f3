/**
 * A write refused as read-only (25006) on a client that chooses its
 * sessions by `target_session_attrs`: the store closes the session, and
 * it does not hand the closed connection back to the pool, where a query
 * waiting for a connection would be run on it and fail
 * (CONNECTION_DESTROYED). Each session here is read-only
 * (`default_transaction_read_only=on` at its start), which
 * `target_session_attrs=primary` takes, as it takes a standby's session
 * whose goodbye postgres.js kept (see `postgres_standby_pool_test.ts`).
 * Without `target_session_attrs` too: a session keeps the read-only
 * default it started with, so one kept after a DBA reset the role's
 * setting refused every write until its lifetime ended.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";

/**
 * Runs `fn` with a store on a client of one connection whose sessions are
 * read-only, `options` added, after `schema` is migrated (and `seed` run)
 * on a writable client.
 */
async function withReadOnlySessions(
  schema: string,
  options: Record<string, unknown>,
  seed: (writable: PostgresStore) => Promise<unknown>,
  fn: (store: PostgresStore, sql: postgres.Sql) => Promise<void>,
): Promise<void> {
  const url = await postgresUrl();
  const setup = postgres(url, { max: 1, onnotice: () => {} });
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    ...options,
    connection: { default_transaction_read_only: true },
  } as postgres.Options<Record<string, never>>);
  const store = new PostgresStore(sql, { schema });
  try {
    const migrating = new PostgresStore(setup, { schema });
    await migrating.migrate();
    await seed(migrating);
    migrating.close();
    await fn(store, sql);
  } finally {
    store.close();
    await sql.end({ timeout: 0 });
    await setup.end({ timeout: 0 });
  }
}

Deno.test({
  name:
    "target_session_attrs=primary, a pool of 1: a write refused as read-only closes its session without handing it back, and a read waiting for the connection answers",
  ignore: !postgresAvailable,
  // The closed session's timers (the store's bound, postgres.js's own)
  // end after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withReadOnlySessions(
      "relayer_read_only_choosing",
      { target_session_attrs: "primary" },
      (writable) => writable.createIntent({ id: "pi_1", state: "created" }),
      async (store) => {
        for (let round = 0; round < 3; round++) {
          const write = store.createIntent({
            id: `pi_w${round}`,
            state: "created",
          });
          const read = store.getIntent("pi_1");
          const [written, got] = await Promise.allSettled([write, read]);
          assert.equal(written.status, "rejected", `round ${round}`);
          assert.equal(
            got.status,
            "fulfilled",
            `round ${round}: ${got.status === "rejected" ? got.reason : ""}`,
          );
        }
      },
    );
  },
});

Deno.test({
  name:
    "no target_session_attrs: a write refused as read-only closes its session too, so that the one opened next takes the role's and the database's default_transaction_read_only as they are then",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    await withReadOnlySessions(
      "relayer_read_only_kept",
      { max_lifetime: null },
      async () => {},
      async (store, sql) => {
        const [before] = await sql`SELECT pg_backend_pid() AS pid`;
        await assert.rejects(
          () => store.createIntent({ id: "pi_1", state: "created" }),
          /read-only/,
        );
        const [after] = await sql`SELECT pg_backend_pid() AS pid`;
        assert.notEqual(after?.pid, before?.pid);
      },
    );
  },
});
