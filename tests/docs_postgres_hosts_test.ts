/**
 * docs/postgres.md, "Several hosts, or a Unix socket (a process of your
 * own)": what postgres.js 3.4.9 makes of a socket dir and of libpq's
 * `?host=`, and the store's refusal of `target_session_attrs=read-write`
 * over several hosts, as the section says them. No server: postgres.js
 * connects on a client's first query, and none is sent here (the
 * connections themselves are run in `tests/store/postgres_socket_unix_test.ts`
 * and `tests/store/postgres_standby_test.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { underPgEnv } from "./_pg_env.ts";

/** The options postgres.js read, of which it dials `path` or `host`. */
function dials(sql: postgres.Sql): { path: unknown; host: unknown } {
  const options = sql.options as unknown as { path: unknown; host: unknown };
  return { path: options.path, host: options.host };
}

Deno.test("docs/postgres.md: a socket dir as the host option, or as PGHOST, is dialled as <dir>/.s.PGSQL.<port>", async () => {
  const given = postgres({ host: "/run/postgresql", port: 5432 });
  assert.equal(dials(given).path, "/run/postgresql/.s.PGSQL.5432");
  // A host option wins over the URL's host.
  const over = postgres("postgres://relayer@db.example.com:6543/payments", {
    host: "/run/postgresql",
  });
  assert.equal(dials(over).path, "/run/postgresql/.s.PGSQL.6543");
  // PGHOST in a process of its own: set in this one, every client that
  // another file of the run made meanwhile dialled the socket dir.
  assert.equal(
    await underPgEnv("dials", { PGHOST: "/run/postgresql" }),
    "/run/postgresql/.s.PGSQL.5432",
  );
  await given.end();
  await over.end();
});

Deno.test("docs/postgres.md: postgres.js 3.4.9 reads no socket dir from a URL (?host= or a percent-encoded host)", async () => {
  assert.throws(
    () => postgres("postgres://relayer@/payments?host=/run/postgresql"),
    /Invalid URL/,
  );
  const after = postgres(
    "postgres://relayer@localhost/payments?host=/run/postgresql",
  );
  assert.deepEqual(dials(after), { path: false, host: ["localhost"] });
  const encoded = postgres("postgres://relayer@%2Frun%2Fpostgresql/payments");
  assert.deepEqual(dials(encoded), {
    path: false,
    host: ["%2Frun%2Fpostgresql"],
  });
  await after.end();
  await encoded.end();
});

Deno.test("docs/postgres.md: PostgresStore refuses target_session_attrs=read-write over several hosts, and takes primary", async () => {
  const hosts = "postgres://relayer@db-a:5432,db-b:5432/payments";
  const readWrite = postgres(`${hosts}?target_session_attrs=read-write`);
  assert.throws(
    () => new PostgresStore(readWrite),
    (error: Error) =>
      error instanceof TypeError &&
      error.message.includes("target_session_attrs=read-write") &&
      error.message.endsWith("use target_session_attrs=primary"),
  );
  const primary = postgres(`${hosts}?target_session_attrs=primary`);
  new PostgresStore(primary).close();
  // One host: nothing to choose among.
  const one = postgres(
    "postgres://relayer@db-a:5432/payments?target_session_attrs=read-write",
  );
  new PostgresStore(one).close();
  await Promise.all([readWrite.end(), primary.end(), one.end()]);
});

Deno.test("docs/postgres.md: PostgresStore refuses target_session_attrs that choose a standby or a read-only session, over one host or several", async () => {
  for (const attrs of ["read-only", "standby", "prefer-standby"]) {
    for (
      const hosts of [
        "postgres://relayer@db-a:5432,db-b:5432/payments",
        "postgres://relayer@db-a:5432/payments",
      ]
    ) {
      const sql = postgres(`${hosts}?target_session_attrs=${attrs}`);
      try {
        assert.throws(
          () => new PostgresStore(sql),
          (error: Error) =>
            error instanceof TypeError &&
            error.message.includes(`target_session_attrs=${attrs}`) &&
            error.message.endsWith(
              "use target_session_attrs=primary, or leave it out",
            ),
          `${attrs} over ${hosts}`,
        );
      } finally {
        await sql.end();
      }
    }
  }
});
