/**
 * `answeredSocketOption` over a Unix socket: the server's socket dir given
 * as the client's host (`{ host: "/run/postgresql" }`, or `PGHOST`), as
 * local peer or trust logins and Cloud SQL's connector use it. postgres.js
 * 3.4.9 connects to `<dir>/.s.PGSQL.<port>` there with its own socket, but
 * hands a `socket` option the same options and opens none: the socket
 * dialled the dir as a TCP host name ("getaddrinfo ENOTFOUND /run/…"). It
 * connects to the path now, under the same watch.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable } from "../_postgres.ts";
import {
  postgresBinDir,
  startPostgres,
} from "../../support/postgres_server.ts";

Deno.test({
  name:
    "a client given answeredSocketOption and a socket dir as its host connects over the Unix socket, as a plain client does",
  ignore: !postgresAvailable,
  async fn() {
    // The server's socket goes in a dir of this test's choosing (-k).
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    const server = await startPostgres({ dir, bin: (await postgresBinDir())! });
    try {
      for (const given of [false, true]) {
        const answered = answeredSocketOption(5_000);
        // Trust over the socket (as peer logins are): no password.
        const sql = postgres({
          host: dir,
          port: server.port,
          user: "postgres",
          database: "postgres",
          max: 2,
          connect_timeout: 5,
          onnotice: () => {},
          max_lifetime: null,
          ...(given ? answered : {}),
        } as postgres.Options<Record<string, never>>);
        const store = new PostgresStore(sql, {
          schema: given ? "relayer_answered" : "relayer_plain",
        });
        const what = given ? "with answeredSocketOption" : "plain";
        try {
          await store.migrate();
          await store.createIntent({ id: "pi_1", state: "created" });
          assert.equal((await store.getIntent("pi_1"))?.state, "created", what);
          // No TCP address: the session came over the Unix socket.
          const [session] = await sql`SELECT inet_server_addr() AS addr`;
          assert.equal(session?.addr, null, what);
        } finally {
          store.close();
          await sql.end({ timeout: 0 });
          await answered.socket.closed(5_000);
        }
      }
    } finally {
      await server.stop();
    }
  },
});
