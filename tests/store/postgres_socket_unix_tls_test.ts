/**
 * `answeredSocketOption` used alone (no PostgresStore to refuse the
 * client) on a client that asks for TLS over a Unix socket: PostgreSQL
 * does not do TLS there, and each query failed as a network fault ("…
 * before secure TLS connection was established", tests/store/
 * postgres_unix_tls_test.ts on a real server). The socket fails such a
 * connection before it connects, in words that say what to change, and
 * closes it, so the pool's place is free for the next query.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { answeredSocketOption } from "../../store/postgres_socket.ts";

/** The socket's refusal of TLS over the socket file `path`. */
function refusal(path: string, asked: string, fix: string): string {
  return `Cannot connect to the Unix socket ${path} with TLS (${asked}): PostgreSQL does not do TLS on a Unix socket (every connection would fail its TLS handshake): ${fix}`;
}

const LEAVE_SSL_OUT =
  "leave ssl out for a socket (and PGSSL unset), or connect over TCP to keep TLS";

Deno.test("answeredSocketOption()'s socket fails a connection that asks for TLS over a Unix socket before it connects, in words that say what to change (ssl disable and false named as the TLS they are), and frees its place in the pool", async () => {
  // No server is needed: the socket connects to nothing.
  const dir = "/run/relayer-no-such-dir";
  const path = `${dir}/.s.PGSQL.5432`;
  for (
    const [more, asked, fix] of [
      [{ ssl: "require" }, "ssl require", LEAVE_SSL_OUT],
      [{ ssl: true }, "ssl given", LEAVE_SSL_OUT],
      [
        { ssl: "prefer", sslnegotiation: "direct" },
        "ssl prefer, sslnegotiation direct",
        LEAVE_SSL_OUT,
      ],
      [
        { ssl: "disable" },
        'ssl "disable", which postgres.js 3.4.9 reads as TLS, not as no TLS',
        "give ssl: false (and leave PGSSL unset)",
      ],
      [
        { ssl: "false" },
        'ssl "false", which postgres.js 3.4.9 reads as TLS, not as no TLS',
        "give ssl: false (and leave PGSSL unset)",
      ],
    ] as const
  ) {
    const answered = answeredSocketOption(2_000);
    const sql = postgres({
      host: dir,
      port: 5432,
      max: 1,
      connect_timeout: 5,
      onnotice: () => {},
      backoff: 0.05,
      ...more,
      ...answered,
    } as unknown as postgres.Options<Record<string, never>>);
    try {
      // Two in a row on a pool of one: the first's connection was closed,
      // so the second gets the place, and fails the same way, at once.
      for (let i = 0; i < 2; i++) {
        const started = performance.now();
        await assert.rejects(
          sql`SELECT 1`,
          (error: Error) => error.message === refusal(path, asked, fix),
          `${asked}, query ${i + 1}`,
        );
        const ms = performance.now() - started;
        // At once: under the socket's own 2 s bound and connect_timeout's
        // 5 s, where 1 s failed a loaded machine's run at 1,468 ms.
        assert.ok(ms < 2_000, `${asked}, query ${i + 1}: ${ms.toFixed(0)} ms`);
      }
    } finally {
      await sql.end({ timeout: 0 });
      await answered.socket.closed(5_000);
    }
  }
});

Deno.test("answeredSocketOption()'s socket lets ssl prefer over a Unix socket connect (the server says no to TLS, and prefer goes on in plain text), and ssl false or left unset (undefined, null: postgres.js keeps either as given)", async () => {
  for (const ssl of ["prefer", false, undefined, null]) {
    const answered = answeredSocketOption(2_000);
    const sql = postgres({
      host: "/run/relayer-no-such-dir",
      port: 5432,
      max: 1,
      onnotice: () => {},
      ssl,
      ...answered,
    } as postgres.Options<Record<string, never>>);
    try {
      // Connected, so it fails as a socket dir with no server: not refused.
      await assert.rejects(
        sql`SELECT 1`,
        (error: Error) => !/does not do TLS/.test(error.message),
        String(ssl),
      );
    } finally {
      await sql.end({ timeout: 0 });
      await answered.socket.closed(5_000);
    }
  }
});
