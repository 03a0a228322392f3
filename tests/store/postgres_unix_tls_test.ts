/**
 * TLS asked for over a Unix socket (`ssl: "require"`, or `PGSSL=require`
 * in the environment, with a socket dir as the host). PostgreSQL does not
 * do TLS on a Unix socket: it answers the client's SSLRequest there with
 * a no, and libpq ignores `sslmode` for a socket. postgres.js 3.4.9 starts
 * TLS anyway (for every mode but `prefer`), and the server closes the
 * connection: each query fails with "Client network socket disconnected
 * before secure TLS connection was established" (ECONNRESET), which reads
 * as a network fault. `new PostgresStore(sql)` refuses such a client, and
 * says to leave `ssl` out for a socket or to connect over TCP to keep TLS.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable } from "../_postgres.ts";
import { underPgEnv } from "../_pg_env.ts";
import {
  postgresBinDir,
  startPostgres,
} from "../../support/postgres_server.ts";
import { overSocket, runWithNetwork, unixGranted } from "./_unix_socket.ts";

/** Whether `error` is the store's refusal of TLS over a Unix socket. */
function refusesTls(error: Error): boolean {
  return error instanceof TypeError &&
    /Unix socket/.test(error.message) &&
    /does not do TLS/.test(error.message) &&
    /leave ssl out/.test(error.message) &&
    /over TCP/.test(error.message);
}

Deno.test({
  name:
    "the Unix socket TLS test, run again with the network a Unix socket's path needs",
  ignore: unixGranted || !postgresAvailable,
  async fn() {
    const { code, out } = await runWithNetwork(
      import.meta.url,
      "real server",
    );
    assert.equal(code, 0, out);
    assert.match(out, /ok \| 1 passed \| 0 failed/, out);
  },
});

Deno.test({
  name:
    "on a real server, TLS over its Unix socket fails every query in TLS's words, or answeredSocketOption's (prefer alone connects, in plain text), and PostgresStore refuses the clients that ask for it",
  ignore: !postgresAvailable || !unixGranted,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "relayer-pg-unix-" });
    const server = await startPostgres({ dir, bin: (await postgresBinDir())! });
    try {
      for (const given of [false, true]) {
        for (
          const more of [
            { ssl: "require" },
            { ssl: "verify-full" },
            { ssl: "allow" },
            { ssl: true },
            { ssl: "prefer", sslnegotiation: "direct" },
            { ssl: "prefer" },
          ]
        ) {
          const answered = answeredSocketOption(5_000);
          const sql = overSocket(dir, server.port, {
            ...more,
            ...(given ? answered : {}),
          });
          const what = `${JSON.stringify(more)}${
            given ? " with answeredSocketOption" : ""
          }`;
          try {
            const asked = sql`SELECT inet_server_addr() AS addr`;
            if (more.ssl === "prefer" && !("sslnegotiation" in more)) {
              // The server said no to TLS: prefer goes on in plain text.
              const [row] = await asked;
              assert.equal(row?.addr, null, what);
              new PostgresStore(sql).close();
              continue;
            }
            // The socket fails it before it connects, in words that say
            // what to change; a plain client fails it in TLS's.
            await assert.rejects(
              asked,
              (error: Error & { code?: string }) =>
                given
                  ? /^Cannot connect to the Unix socket .* does not do TLS on a Unix socket .*leave ssl out for a socket/
                    .test(error.message)
                  : /before secure TLS connection was established/.test(
                    error.message,
                  ),
              what,
            );
            assert.throws(() => new PostgresStore(sql), refusesTls, what);
          } finally {
            await sql.end({ timeout: 0 });
            await answered.socket.closed(5_000);
          }
        }
      }
    } finally {
      await server.stop();
    }
  },
});

Deno.test("PostgresStore refuses TLS over a Unix socket however it is asked (the ssl option, PGSSL), and not over TCP nor a socket without it", async () => {
  // postgres.js connects on a client's first query: none is sent here.
  const dir = "/run/postgresql";
  for (const ssl of ["require", "verify-full", "verify-ca", "allow", true]) {
    const sql = postgres({ host: dir, ssl } as postgres.Options<
      Record<string, never>
    >);
    assert.throws(() => new PostgresStore(sql), refusesTls, String(ssl));
    await sql.end();
  }
  // PGSSL in a process of its own: set in this one, every client that
  // another file of the run made meanwhile started TLS with the run's
  // server, which serves none.
  const [env] = await underPgEnv("refusals", { PGSSL: "require" }) as [
    string | null,
  ];
  assert.ok(
    env !== null && env.startsWith("TypeError: ") &&
      refusesTls(new TypeError(env.slice("TypeError: ".length))),
    `PGSSL=require: ${env}`,
  );
  for (
    const sql of [
      postgres({ host: dir }),
      postgres({ host: dir, ssl: false }),
      postgres({ host: dir, ssl: "prefer" }),
      postgres("postgres://relayer@127.0.0.1:5432/payments?sslmode=require"),
    ]
  ) {
    new PostgresStore(sql).close();
    await sql.end();
  }
});

/** The store's refusal of `ssl` given as the string `word`. */
function refusesWord(word: string) {
  return {
    name: "TypeError",
    message:
      `Cannot create PostgresStore as 'sql' has ssl "${word}" (its ssl option, or PGSSL), which postgres.js 3.4.9 reads as TLS with the server's certificate checked, not as no TLS: give ssl: false, or ?sslmode=disable in the URL, and leave PGSSL unset`,
  };
}

Deno.test('PostgresStore refuses ssl: "disable" (and "false"), which postgres.js 3.4.9 reads as TLS, over a Unix socket and over TCP alike, and names it as what it is, not as TLS asked for', async () => {
  for (const word of ["disable", "false"]) {
    for (const host of ["/run/postgresql", "127.0.0.1"]) {
      const sql = postgres({ host, ssl: word } as postgres.Options<
        Record<string, never>
      >);
      assert.throws(
        () => new PostgresStore(sql),
        refusesWord(word),
        `${word} on ${host}`,
      );
      await sql.end();
    }
  }
});

Deno.test("PostgresStore refuses PGSSL=disable, which postgres.js 3.4.9 reads as TLS, on a client the URL does not tell its TLS", async () => {
  // PGSSL in a process of its own (see above). The URL's sslmode comes
  // before PGSSL: no TLS.
  assert.deepEqual(await underPgEnv("refusals", { PGSSL: "disable" }), [
    `TypeError: ${refusesWord("disable").message}`,
    null,
  ]);
});

Deno.test("PostgresStore takes ssl: false over a Unix socket: no TLS", async () => {
  const sql = postgres({ host: "/run/postgresql", ssl: false });
  assert.equal(sql.options.ssl, false);
  new PostgresStore(sql).close();
  await sql.end();
});

Deno.test("PostgresStore takes ?sslmode=disable over a Unix socket, which postgres.js 3.4.9 reads as no TLS", async () => {
  const sql = postgres(
    "postgres://relayer@localhost/payments?sslmode=disable",
    {
      host: "/run/postgresql",
    },
  );
  assert.equal(sql.options.ssl, false);
  assert.equal(sql.options.path, "/run/postgresql/.s.PGSQL.5432");
  new PostgresStore(sql).close();
  await sql.end();
});
