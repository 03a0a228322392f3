/**
 * PostgresStore on a server restarted (`pg_ctl restart -m fast`) between
 * the store's construction and its first use, and again under a live
 * pool: the first use migrates and writes, a call while the server is
 * down fails with the connect's error (or the lost connection's), and the
 * store works once it is back, its counts going on from where they were.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import {
  type OwnedPostgresServer,
  startPostgres,
} from "../../support/postgres_server.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "PostgresStore on a server restarted before its first use, and under a live pool, migrates, fails a call made while it is down with the connect's error, and works once it is back",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    let server: OwnedPostgresServer | undefined;
    let sql: postgres.Sql | undefined;
    try {
      server = await startPostgres();
      sql = postgres(server.url, {
        max: 2,
        onnotice: () => {},
        max_lifetime: null,
        backoff: reconnectBackoffS,
      });
      const store = new PostgresStore(sql, { connectionWaitMs: 2_000 });
      try {
        await server.halt("fast");
        await server.resume();
        await store.migrate();
        await store.createIntent({ id: "pi_1", hold: "pending" });
        assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);

        await server.halt("fast");
        await assert.rejects(
          store.getIntent("pi_1"),
          /ECONNREFUSED|lost the connection/,
        );
        await server.resume();
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        assert.equal(await store.admit({ count: "pi_1/settle", now: 2 }), 2);
      } finally {
        store.close();
      }
    } finally {
      await sql?.end({ timeout: 1 });
      await server?.stop();
    }
  }),
});
