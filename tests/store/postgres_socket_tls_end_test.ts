/**
 * `main.ts`'s socket for postgres.js (`store/_postgres_socket.ts`) under
 * TLS, on a real server with a certificate from a throwaway CA, as a
 * client ends: postgres.js ends the TLS socket over it, which destroys
 * this stream, and the TCP socket under it can then meet a reset. The
 * stream handed that error on to the TLS socket, which had closed and
 * whose listeners postgres.js had taken off: an uncaught ECONNRESET, which
 * ended the process at its stop (SIGTERM answered with exit code 1, in
 * about half of `tests/webhook/database_tls_test.ts`'s runs; 25 to 35
 * times in 30 clients ended here).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { testCertificates } from "../../support/test_tls.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "answeredSocket: clients on TLS end with nothing uncaught, however their connections' TCP sockets close under the TLS",
  ignore: !postgresAvailable,
  fn: timeout(120_000, async () => {
    const certificates = await testCertificates(["localhost", "127.0.0.1"]);
    const server = await startPostgres({ tls: certificates });
    const ca = await Deno.readTextFile(certificates.caFile);
    // A test fails on an uncaught error in any case; this counts them, so
    // that the failure says how many.
    const uncaught: string[] = [];
    const caught = (event: ErrorEvent) => {
      uncaught.push(String(event.error));
      event.preventDefault();
    };
    globalThis.addEventListener("error", caught);
    try {
      const url = new URL(server.url);
      url.hostname = "localhost";
      for (let client = 0; client < 20; client++) {
        const socket = answeredSocket(10_000);
        const sql = postgres(url.href, {
          max: 4,
          onnotice: () => {},
          socket,
          ssl: { ca, rejectUnauthorized: true },
        } as postgres.Options<Record<string, never>>);
        const [row] = await sql`SELECT ssl FROM pg_stat_ssl
          WHERE pid = pg_backend_pid()`;
        assert.equal(row?.ssl, true);
        await Promise.all([1, 2, 3].map(() => sql`SELECT pg_sleep(0.01)`));
        await sql.end({ timeout: 5 });
        await socket.closed(1_000);
      }
      // A reset that came after the last end is heard by now.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(uncaught, []);
    } finally {
      globalThis.removeEventListener("error", caught);
      await server.stop();
      await certificates.remove();
    }
  }),
});
