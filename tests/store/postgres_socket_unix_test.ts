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
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable } from "../_postgres.ts";
import {
  postgresBinDir,
  startPostgres,
} from "../../support/postgres_server.ts";
import { overSocket, runWithNetwork, unixGranted } from "./_unix_socket.ts";

Deno.test({
  name:
    "the Unix socket tests, run again with the network a Unix socket's path needs",
  ignore: unixGranted,
  async fn() {
    const { code, out } = await runWithNetwork(import.meta.url);
    assert.equal(code, 0, out);
    const passed = postgresAvailable ? 5 : 3;
    assert.match(out, new RegExp(`ok \\| ${passed} passed \\| 0 failed`), out);
  },
});

Deno.test({
  name:
    "a client given answeredSocketOption and a socket dir as its host connects over the Unix socket, as a plain client does",
  ignore: !postgresAvailable || !unixGranted,
  async fn() {
    // The server's socket goes in a dir of this test's choosing (-k).
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    const server = await startPostgres({ dir, bin: (await postgresBinDir())! });
    try {
      for (const given of [false, true]) {
        const answered = answeredSocketOption(5_000);
        // Trust over the socket (as peer logins are): no password.
        const sql = overSocket(dir, server.port, {
          max: 2,
          ...(given ? answered : {}),
        });
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

Deno.test({
  name:
    "a client given answeredSocketOption and a socket dir with no server's socket in it fails its query saying what to check, keeping the system's code",
  ignore: !unixGranted,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    try {
      // A socket file no server listens on (a server that stopped without
      // removing it): left by a process that exits without closing it.
      const stale = `${dir}/stale`;
      await Deno.mkdir(stale);
      const left = await new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `Deno.listen({ transport: "unix", path: ${
            JSON.stringify(`${stale}/.s.PGSQL.5432`)
          } }); Deno.exit(0);`,
        ],
      }).output();
      assert.ok(left.success, new TextDecoder().decode(left.stderr));
      for (
        const [where, code] of [
          [`${dir}/missing`, "ENOENT"],
          [stale, "ECONNREFUSED"],
        ] as const
      ) {
        const answered = answeredSocketOption(5_000);
        const sql = overSocket(where, 5432, answered);
        try {
          const error = await sql`SELECT 1`.then(
            () => assert.fail("a query answered with no server"),
            (error: Error & { code?: unknown }) => error,
          );
          assert.equal(error.code, code, error.message);
          // The system's own error kept as its cause.
          assert.equal((error.cause as { code?: unknown })?.code, code);
          assert.match(
            error.message,
            new RegExp(
              `^connect ${code} ${where}/\\.s\\.PGSQL\\.5432: no PostgreSQL socket there .*SHOW unix_socket_directories`,
            ),
          );
        } finally {
          await sql.end({ timeout: 0 });
          await answered.socket.closed(5_000);
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "answeredSocketOption's bound holds over a Unix socket: a session that stopped answering (its backend stopped) is closed within the bound, the line naming the socket's path, and the next query answers",
  ignore: !postgresAvailable || !unixGranted,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    const server = await startPostgres({ dir, bin: (await postgresBinDir())! });
    const lines: string[] = [];
    const answered = answeredSocketOption(1_000, (line) => lines.push(line));
    const sql = overSocket(dir, server.port, answered);
    let stopped: number | undefined;
    try {
      const [row] = await sql<{ pid: number }[]>`
        SELECT pg_backend_pid() AS pid`;
      const pid = row!.pid;
      // The session's backend stops (as a process held by a debugger, or
      // a host that froze): nothing answers, and no FIN comes.
      Deno.kill(pid, "SIGSTOP");
      stopped = pid;
      const start = performance.now();
      const error = await sql`SELECT 1`.then(
        () => assert.fail("a stopped backend answered"),
        (error: Error & { code?: unknown }) => error,
      );
      const took = performance.now() - start;
      assert.equal(error.code, "CONNECTION_CLOSED");
      assert.ok(took >= 900 && took < 3_000, `closed after ${took} ms`);
      assert.equal(lines.length, 1);
      assert.match(
        lines[0]!,
        new RegExp(
          `^PostgreSQL sent nothing for 1000ms after the client wrote to it: the connection to ${dir}/\\.s\\.PGSQL\\.${server.port} was closed`,
        ),
      );
      const [again] = await sql`SELECT pg_backend_pid() AS pid`;
      assert.notEqual(again?.pid, pid);
    } finally {
      if (stopped !== undefined) Deno.kill(stopped, "SIGCONT");
      await sql.end({ timeout: 0 });
      await answered.socket.closed(5_000);
      await server.stop();
    }
  },
});

Deno.test({
  name:
    "a client given answeredSocketOption and a socket dir whose socket closes each connection after its startup, unanswered (a proxy whose database is down), fails its query naming the socket's path",
  ignore: !unixGranted,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    const path = `${dir}/.s.PGSQL.5432`;
    const listener = Deno.listen({ transport: "unix", path });
    // It reads the startup, then closes without a word.
    const closing = (async () => {
      for await (const conn of listener) {
        await conn.read(new Uint8Array(1024)).catch(() => null);
        conn.close();
      }
    })();
    const answered = answeredSocketOption(5_000);
    const sql = overSocket(dir, 5432, answered);
    try {
      const error = await sql`SELECT 1`.then(
        () => assert.fail("a query answered with no server"),
        (error: Error & { code?: unknown }) => error,
      );
      assert.equal(error.code, "ECONNRESET", error.message);
      assert.equal(
        error.message,
        `${path} closed the connection before answering its startup: no PostgreSQL answered there (a proxy whose database is down?)`,
      );
    } finally {
      await sql.end({ timeout: 0 });
      await answered.socket.closed(5_000);
      listener.close();
      await closing;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "PostgresStore over a socket file no server listens on keeps the socket's own words of what to check, not those of a TCP host and port",
  ignore: !unixGranted,
  // postgres.js's own reconnect timer (connection.js's reconnect), set as
  // the refused connect closes, outlives sql.end(): not the store's.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    try {
      // Left by a process that exits without closing it, as a server that
      // stopped without removing its socket file.
      const left = await new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `Deno.listen({ transport: "unix", path: ${
            JSON.stringify(`${dir}/.s.PGSQL.5432`)
          } }); Deno.exit(0);`,
        ],
      }).output();
      assert.ok(left.success, new TextDecoder().decode(left.stderr));
      const answered = answeredSocketOption(5_000);
      const sql = overSocket(dir, 5432, answered);
      const store = new PostgresStore(sql, { connectionWaitMs: 1_000 });
      try {
        const error = await store.getIntent("pi_1").then(
          () => assert.fail("a read answered with no server"),
          (error: Error) => error,
        );
        assert.match(error.message, /no PostgreSQL socket there/);
        assert.doesNotMatch(error.message, /host and port/);
      } finally {
        store.close();
        await sql.end({ timeout: 0 });
        await answered.socket.closed(5_000);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
