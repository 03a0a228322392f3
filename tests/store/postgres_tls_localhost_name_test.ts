/**
 * A client at `localhost` over verified TLS whose server's certificate
 * does not name `localhost`: the runtime's refusal is its own, for the host
 * the client dialled, so `migrate()` does not say the certificate was
 * checked against localhost in place of an address, nor name clientTls(),
 * which changes nothing for a name.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { timeout } from "../_timeout.ts";
import { tlsSuitesAvailable, withTlsPostgres } from "../_tls_postgres.ts";

const tlsAvailable = await tlsSuitesAvailable("the PostgreSQL TLS tests");

Deno.test({
  name:
    "migrate() on a client at localhost whose server's certificate names only its address does not say the check was against localhost in place of an address, nor name clientTls()",
  ignore: !tlsAvailable,
  fn: timeout(
    60_000,
    () =>
      withTlsPostgres(["127.0.0.1"], async (server, certificates) => {
        const url = new URL(`${server.url}?sslmode=verify-full`);
        url.hostname = "localhost";
        const ca = await Deno.readTextFile(certificates.caFile);
        const sql = postgres(url.href, {
          max: 1,
          ssl: { ca },
          onnotice: () => {},
        });
        try {
          await assert.rejects(new PostgresStore(sql).migrate(), (error) => {
            assert.ok(error instanceof Error);
            assert.equal(
              (error.cause as { code?: string } | undefined)?.code ??
                (error as { code?: string }).code,
              "ERR_TLS_CERT_ALTNAME_INVALID",
              error.message,
            );
            assert.doesNotMatch(error.message, /checked against localhost/);
            assert.doesNotMatch(error.message, /clientTls/);
            return true;
          });
        } finally {
          await sql.end();
        }
      }),
  ),
});
