/**
 * A write refused as read-only (25006) on a client that chooses its
 * sessions by `target_session_attrs`: the store closes the session, and
 * it does not hand the closed connection back to the pool, where a query
 * waiting for a connection would be run on it and fail
 * (CONNECTION_DESTROYED). Each session here is read-only
 * (`default_transaction_read_only=on` at its start), which
 * `target_session_attrs=primary` takes, as it takes a standby's session
 * whose goodbye postgres.js kept (see `postgres_standby_pool_test.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";

Deno.test({
  name:
    "target_session_attrs=primary, a pool of 1: a write refused as read-only closes its session without handing it back, and a read waiting for the connection answers",
  ignore: !postgresAvailable,
  // The closed session's timers (the store's bound, postgres.js's own)
  // end after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const url = await postgresUrl();
    const schema = "relayer_read_only_choosing";
    const setup = postgres(url, { max: 1, onnotice: () => {} });
    const sql = postgres(url, {
      max: 1,
      onnotice: () => {},
      target_session_attrs: "primary",
      connection: { default_transaction_read_only: true },
    } as postgres.Options<Record<string, never>>);
    const store = new PostgresStore(sql, { schema });
    try {
      const migrating = new PostgresStore(setup, { schema });
      await migrating.migrate();
      await migrating.createIntent({ id: "pi_1", state: "created" });
      migrating.close();
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
    } finally {
      store.close();
      await sql.end({ timeout: 0 });
      await setup.end({ timeout: 0 });
    }
  },
});

Deno.test({
  name:
    "no target_session_attrs: a write refused as read-only keeps its session (the client would reopen one of the same kind)",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const url = await postgresUrl();
    const schema = "relayer_read_only_kept";
    const setup = postgres(url, { max: 1, onnotice: () => {} });
    const sql = postgres(url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      connection: { default_transaction_read_only: true },
    } as postgres.Options<Record<string, never>>);
    const store = new PostgresStore(sql, { schema });
    try {
      const migrating = new PostgresStore(setup, { schema });
      await migrating.migrate();
      migrating.close();
      const [before] = await sql`SELECT pg_backend_pid() AS pid`;
      await assert.rejects(
        () => store.createIntent({ id: "pi_1", state: "created" }),
        /read-only/,
      );
      const [after] = await sql`SELECT pg_backend_pid() AS pid`;
      assert.equal(after?.pid, before?.pid);
    } finally {
      store.close();
      await sql.end({ timeout: 0 });
      await setup.end({ timeout: 0 });
    }
  },
});
