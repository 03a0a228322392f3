/**
 * The service on PostgreSQL over TLS, as managed databases serve it: a real
 * server with a certificate from a throwaway CA; `main.ts` as `deno task
 * start` runs it, with `?sslmode=verify-full` and the CA given to Deno by
 * `DENO_CERT`, keeps every connection on TLS; without the CA it refuses
 * to start in one line that says what to give; and `?sslmode=require`
 * against a server that does not take TLS says so.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import assert from "node:assert/strict";
import postgres from "postgres";
import { openService } from "../../main.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { postgresAvailable, postgresUrl, serverUpFirst } from "../_postgres.ts";
import { assertOneLine, healthy, startMain } from "../_main_process.ts";
import { timeout, withTimeout } from "../_timeout.ts";
import {
  ipv6LoopbackAvailable,
  tlsSuitesAvailable,
  withTlsPostgres,
} from "../_tls_postgres.ts";

/** Whether the TLS tests run: `false` only where PostgreSQL or `openssl` is missing, outside CI. */
const tlsAvailable = await tlsSuitesAvailable("the PostgreSQL TLS tests");

const base = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};

/** A server over TLS: its port, its URL by the name its certificate holds (localhost alone), and its CA's file. */
interface TlsServer {
  port: number;
  url: (query?: string) => string;
  caFile: string;
  /** PostgreSQL's major version (17 and later take direct TLS). */
  major: number;
}

/** A server over TLS for `fn`. */
function withTlsServer(
  fn: (server: TlsServer) => Promise<void>,
): Promise<void> {
  // The name alone, not the address the server listens on: a connection
  // by address must find the certificate names another host.
  return withTlsPostgres(["localhost"], async (server, certificates) => {
    const url = (query = "") => {
      const named = new URL(server.url);
      named.hostname = "localhost";
      return `${named.href}${query}`;
    };
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    const [row] = await admin<{ version: number }[]>`
      SELECT current_setting('server_version_num')::int AS version`;
    await admin.end();
    const major = Math.floor(row!.version / 10_000);
    await fn({ port: server.port, url, caFile: certificates.caFile, major });
  });
}

/**
 * Starts `main.ts` with `env`, which must come up and answer `/healthz`;
 * runs `whileUp` on its origin, then stops it with SIGTERM, which it must
 * take cleanly. Returns its start-up line.
 */
async function startsHealthy(
  env: Record<string, string>,
  whileUp: (origin: string) => Promise<void> = () => Promise.resolve(),
): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_tls_" });
  // Port 0: the child binds a port the system picks, and says which.
  const service = startMain(env, { writeDir: dir });
  const stop = new AbortController();
  try {
    const origin = await service.base();
    if (origin === null) {
      assert.fail(`main.ts did not start: ${(await service.ended()).stderr}`);
    }
    await Promise.race([
      healthy(origin, stop.signal),
      service.ended().then(({ stderr }) => assert.fail(stderr)),
    ]);
    await whileUp(origin);
    service.child.kill("SIGTERM");
    const { code, stdout, stderr } = await service.ended();
    assert.equal(code, 0, stderr);
    return stdout.split("\n")[0]!;
  } finally {
    stop.abort();
    service.kill();
    await service.ended().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Starts `main.ts` with `env`, which must refuse to start in one line
 * matching `pattern`: that line. One that listens instead fails at once
 * and is killed, so its sessions do not outlive the case on the shared
 * server.
 */
async function refusedStart(
  env: Record<string, string>,
  pattern: RegExp,
): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_tls_" });
  const service = startMain(env, { writeDir: dir });
  try {
    const origin = await service.base();
    if (origin !== null) {
      assert.fail(`main.ts listens on ${origin}, where it should refuse`);
    }
    const { code, stdout, stderr } = await service.ended();
    assert.equal(code, 1, stdout);
    assertOneLine(stderr, pattern);
    return stderr;
  } finally {
    service.kill();
    await service.ended().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
}

serverUpFirst();

Deno.test({
  name:
    "openService() says in one line that a server took no TLS where ?sslmode=require asks for it, at once, and not that the connection was lost",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    // This run's shared server serves no TLS: every try meets that again,
    // so it is no connection lost under the migration (tried again, and
    // "start again once the database is up", though the database is up).
    const url = new URL(await postgresUrl());
    url.search = "?sslmode=require";
    const lines: string[] = [];
    await assert.rejects(
      openService(loadConfig({ ...base, DATABASE_URL: url.href }), {
        log: (line) => lines.push(line),
      }),
      (error) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.match(
          error.message,
          /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/postgres, TLS, server not verified \(sslmode=require\): [^()]* \(the server did not take TLS: make it offer TLS, or change \?sslmode= in DATABASE_URL\)$/,
        );
        return true;
      },
    );
    assert.deepEqual(lines, []);
  }),
});

Deno.test({
  name:
    "main.ts connects as DATABASE_URL says, whatever the environment's PGSSL says",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    // This run's shared server serves no TLS; PGSSL=require would make
    // postgres.js ask it for TLS, and the start line would not say so.
    const line = await startsHealthy({
      ...base,
      DATABASE_URL: await postgresUrl(),
      PGSSL: "require",
    });
    assert.match(line, /; store PostgreSQL \S+, no TLS; /);
  }),
});

/**
 * The cases on a server over TLS, which share one: each starts with no
 * client session and no store schema left on it (a case's service
 * migrates the schema `relayer`).
 */
const tlsCases: [string, (server: TlsServer) => Promise<void>][] = [
  [
    "main.ts keeps every PostgreSQL connection on TLS with ?sslmode=verify-full and the CA in DENO_CERT, and says so at start",
    async ({ port: pg, url, caFile }) => {
      const admin = postgres(url(), { max: 1, onnotice: () => {} });
      try {
        const line = await startsHealthy({
          ...base,
          DATABASE_URL: url("?sslmode=verify-full"),
          DENO_CERT: caFile,
        }, async (origin) => {
          const ready = await fetch(`${origin}/readyz`);
          assert.equal(ready.status, 200, await ready.text());
          const [seen] = await admin<{ total: number; tls: number }[]>`
            SELECT count(*)::int AS total, count(*) FILTER (WHERE s.ssl)::int AS tls
            FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
            WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`;
          assert.ok(seen!.total >= 1, "the service holds no connection");
          assert.equal(seen!.tls, seen!.total, "a connection without TLS");
        });
        assert.match(
          line,
          new RegExp(
            `; store PostgreSQL localhost:${pg}/postgres, TLS, server verified \\(sslmode=verify-full\\); `,
          ),
        );
      } finally {
        await admin.end();
      }
    },
  ],
  [
    "main.ts refuses to start, in one line naming DENO_CERT, when the server's certificate does not chain to a CA it trusts",
    async ({ port: pg, url }) => {
      const stderr = await refusedStart(
        { ...base, DATABASE_URL: url("?sslmode=verify-full") },
        new RegExp(
          `^relayer: cannot start: DATABASE_URL: cannot open PostgreSQL localhost:${pg}/postgres, TLS, server verified \\(sslmode=verify-full\\): .*certificate.* \\(the server's TLS certificate does not chain to a CA this process trusts, or names another host: give Deno the CA with DENO_CERT=<file>, and connect by a name the certificate holds\\)$`,
        ),
      );
      assert.ok(!stderr.includes(new URL(url()).password));
      // The runtime's words, then the service's hint, as one line: not the
      // store's own refusal, which names Node's and Bun's setting too.
      assert.ok(!/Cannot migrate|NODE_EXTRA_CA_CERTS/.test(stderr), stderr);
    },
  ],
  [
    "main.ts refused for a certificate it cannot trust, with DENO_CERT naming a path where there is no file, says so, not to give DENO_CERT",
    async ({ port: pg, url, caFile }) => {
      // A path mistyped: Deno trusts no CA from it, and says nothing.
      const missing = `${caFile}.gone`;
      const quoted = JSON.stringify(missing).replace(
        /[.*+?^${}()|[\]\\/]/g,
        "\\$&",
      );
      await refusedStart(
        {
          ...base,
          DATABASE_URL: url("?sslmode=verify-full"),
          DENO_CERT: missing,
        },
        new RegExp(
          `^relayer: cannot start: DATABASE_URL: cannot open PostgreSQL localhost:${pg}/postgres, TLS, server verified \\(sslmode=verify-full\\): .*certificate.* \\(DENO_CERT names ${quoted}, where there is no file, so Deno trusts no CA from it: set DENO_CERT to the path of the CA's PEM file, and connect by a name the server's certificate holds\\)$`,
        ),
      );
    },
  ],
  [
    "main.ts refuses to start under ?sslmode=verify-full at an IP address whose server's certificate names localhost alone, though DENO_CERT trusts its CA",
    async ({ port: pg, url, caFile }) => {
      const byAddress = new URL(url("?sslmode=verify-full"));
      byAddress.hostname = "127.0.0.1";
      await refusedStart(
        { ...base, DATABASE_URL: byAddress.href, DENO_CERT: caFile },
        new RegExp(
          `^relayer: cannot start: DATABASE_URL: cannot open PostgreSQL 127\\.0\\.0\\.1:${pg}/postgres, TLS, server verified \\(sslmode=verify-full\\): .*127\\.0\\.0\\.1.* \\(the server's TLS certificate does not chain to a CA this process trusts, or names another host: give Deno the CA with DENO_CERT=<file>, and connect by a name the certificate holds\\)$`,
        ),
      );
    },
  ],
  [
    "main.ts checks no certificate under ?sslmode=require at an IP address, as by name: it starts on TLS though the certificate names another host and no CA trusts it",
    async ({ port: pg, url }) => {
      const byAddress = new URL(url("?sslmode=require"));
      byAddress.hostname = "127.0.0.1";
      const line = await startsHealthy({
        ...base,
        DATABASE_URL: byAddress.href,
      });
      assert.match(
        line,
        new RegExp(
          `; store PostgreSQL 127\\.0\\.0\\.1:${pg}/postgres, TLS, server not verified \\(sslmode=require\\); `,
        ),
      );
    },
  ],
  [
    "main.ts says that direct TLS needs PostgreSQL 17 when the server did not take it",
    async ({ url, caFile, major }) => {
      const env = {
        ...base,
        DATABASE_URL: url("?sslmode=verify-full&sslnegotiation=direct"),
        DENO_CERT: caFile,
      };
      if (major >= 17) {
        // It takes direct TLS: the service starts.
        await startsHealthy(env);
        return;
      }
      await refusedStart(
        env,
        /^relayer: cannot start: DATABASE_URL: cannot open PostgreSQL localhost:\d+\/postgres, TLS, server verified \(sslmode=verify-full\), direct TLS \(PostgreSQL 17 and later\): .* \(the server did not take direct TLS, which needs PostgreSQL 17 or later: remove \?sslnegotiation=direct, or make it offer TLS\)$/,
      );
    },
  ],
  [
    "main.ts negotiates TLS as DATABASE_URL says, whatever the environment's PGSSLNEGOTIATION says",
    async ({ url, caFile, major }) => {
      // Before PostgreSQL 17 the server refuses direct TLS, so the start
      // fails if it is asked for (from 17 on, this shows less).
      if (major >= 17) {
        console.error("PostgreSQL 17 takes direct TLS: this test proves less");
      }
      await startsHealthy({
        ...base,
        DATABASE_URL: url("?sslmode=verify-full"),
        DENO_CERT: caFile,
        PGSSLNEGOTIATION: "direct",
      });
    },
  ],
];

/** Drops the store's schema on `server` and waits (5 s at most) until no client session but the one asking is left. */
async function cleared(server: TlsServer): Promise<void> {
  const admin = postgres(server.url(), { max: 1, onnotice: () => {} });
  try {
    await admin`DROP SCHEMA IF EXISTS relayer CASCADE`;
    let left = -1;
    for (const start = Date.now(); Date.now() - start < 5_000;) {
      const [row] = await admin<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`;
      left = row!.n;
      if (left === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(left, 0, "client sessions left on the TLS server");
  } finally {
    await admin.end();
  }
}

Deno.test({
  name:
    "main.ts and PostgreSQL over TLS: one server for the cases that need one",
  ignore: !tlsAvailable,
  fn: timeout(
    60_000 * (tlsCases.length + 1),
    (t) =>
      withTlsServer(async (server) => {
        for (const [name, fn] of tlsCases) {
          await t.step(name, () =>
            withTimeout(async () => {
              await cleared(server);
              await fn(server);
            }, 60_000));
        }
      }),
  ),
});

Deno.test({
  name:
    "main.ts checks the certificate of a server DATABASE_URL names by IP address against that address with ?sslmode=verify-full, not against localhost",
  ignore: !tlsAvailable,
  fn: timeout(60_000, () =>
    // A certificate that names the address alone: postgres.js gives TLS no
    // server name for an address, and the check fell back to "localhost".
    withTlsPostgres(["127.0.0.1"], async (server, certificates) => {
      const url = new URL(server.url);
      assert.equal(url.hostname, "127.0.0.1");
      const line = await startsHealthy({
        ...base,
        DATABASE_URL: `${url.href}?sslmode=verify-full`,
        DENO_CERT: certificates.caFile,
      });
      assert.match(
        line,
        /; store PostgreSQL 127\.0\.0\.1:\d+\/postgres, TLS, server verified \(sslmode=verify-full\); /,
      );
    })),
});

Deno.test({
  name:
    "main.ts serves on a DATABASE_URL at an IPv6 address in brackets ([::1]), over verify-full TLS checked against that address",
  // Where this machine has no IPv6 loopback, tests/webhook/config_database_test.ts
  // still checks how loadConfig reads such a URL.
  ignore: !tlsAvailable || !await ipv6LoopbackAvailable(),
  fn: timeout(60_000, () =>
    // A certificate that names ::1 alone: postgres.js gives TLS no server
    // name for an address, and clientTls() checks it against ::1.
    withTlsPostgres(["::1"], async (server, certificates) => {
      const admin = postgres(server.url, { max: 1, onnotice: () => {} });
      try {
        const line = await startsHealthy({
          ...base,
          DATABASE_URL:
            `postgres://postgres:${server.password}@[::1]:${server.port}/postgres?sslmode=verify-full`,
          DENO_CERT: certificates.caFile,
        }, async (origin) => {
          const ready = await fetch(`${origin}/readyz`);
          assert.equal(ready.status, 200, await ready.text());
          const seen = await admin<{ address: string; tls: boolean }[]>`
            SELECT host(a.client_addr) AS address, s.ssl AS tls
            FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
            WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`;
          assert.ok(seen.length >= 1, "the service holds no connection");
          for (const session of seen) {
            assert.deepEqual({ ...session }, { address: "::1", tls: true });
          }
        });
        assert.match(
          line,
          new RegExp(
            `; store PostgreSQL \\[::1\\]:${server.port}/postgres, TLS, server verified \\(sslmode=verify-full\\); `,
          ),
        );
      } finally {
        await admin.end();
      }
    }, { listen_addresses: "127.0.0.1,::1" })),
});
