/**
 * A client of one's own, made as the docs' short examples make it
 * (`postgres(url)`, no `ssl: clientTls(…)`), at a server named by IP
 * address over verified TLS: postgres.js 3.4.9 gives TLS no server name
 * for an address, so the runtime checks the certificate against
 * `localhost`. `migrate()`, a service's first call, says so and what to
 * give the client, where it passed on the runtime's words alone ("Host:
 * localhost. is not cert's CN: 127.0.0.1"), which name neither. So does
 * a server whose certificate does not chain to a CA the process trusts:
 * where to give the CA ("unable to verify the first certificate" said
 * nothing of it).
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { clientTls, PostgresStore } from "../../store/postgres.ts";
import { timeout } from "../_timeout.ts";
import { tlsSuitesAvailable, withTlsPostgres } from "../_tls_postgres.ts";

const tlsAvailable = await tlsSuitesAvailable("the PostgreSQL TLS tests");

Deno.test({
  name:
    "migrate() on a client at an IP address whose TLS checked the certificate against localhost names clientTls(), on one without the CA names DENO_CERT and NODE_EXTRA_CA_CERTS, and migrates once given both",
  ignore: !tlsAvailable,
  fn: timeout(60_000, () =>
    // The certificate names the address alone, as a managed database's
    // private address would have it.
    withTlsPostgres(["127.0.0.1"], async (server, certificates) => {
      const url = `${server.url}?sslmode=verify-full`;
      assert.equal(new URL(url).hostname, "127.0.0.1");
      // The CA as the process trusts it: DENO_CERT or NODE_EXTRA_CA_CERTS
      // in a service; here, in process, postgres.js's TLS options.
      const ca = await Deno.readTextFile(certificates.caFile);
      const plain = postgres(url, { max: 1, ssl: { ca }, onnotice: () => {} });
      try {
        await assert.rejects(new PostgresStore(plain).migrate(), (error) => {
          assert.ok(error instanceof Error);
          assert.match(
            error.message,
            /^Cannot migrate the PostgreSQL schema "relayer" as the server's TLS certificate was checked against localhost, not 127\.0\.0\.1 \(Hostname\/IP does not match certificate's altnames: Host: localhost\. is not cert's CN: 127\.0\.0\.1\): postgres\.js gives TLS no server name for a host given as an IP address\. Give the client ssl: clientTls\(/,
          );
          assert.equal(
            (error.cause as { code?: string }).code,
            "ERR_TLS_CERT_ALTNAME_INVALID",
          );
          return true;
        });
      } finally {
        await plain.end();
      }
      // Without the CA, as a process that was not given DENO_CERT or
      // NODE_EXTRA_CA_CERTS: the runtime's words name neither.
      const untrusted = postgres(url, { max: 1, onnotice: () => {} });
      try {
        await assert.rejects(
          new PostgresStore(untrusted).migrate(),
          (error) => {
            assert.ok(error instanceof Error);
            assert.match(
              error.message,
              /^Cannot migrate the PostgreSQL schema "relayer" as the server's TLS certificate does not chain to a CA this process trusts \(unable to verify the first certificate\): give the process the CA that signed it \(a managed database's own, such as Amazon RDS's bundle\), with DENO_CERT=<file> on Deno, or NODE_EXTRA_CA_CERTS=<file> on Node and Bun$/,
            );
            assert.equal(
              (error.cause as { code?: string }).code,
              "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
            );
            return true;
          },
        );
      } finally {
        await untrusted.end();
      }
      // What the message says to give: the check against the address.
      const checked = clientTls({ url, ssl: "verify-full" });
      assert.equal(typeof checked, "object");
      const given = postgres(url, {
        max: 1,
        ssl: { ca, ...(checked as object) },
        onnotice: () => {},
      });
      const store = new PostgresStore(given);
      try {
        await store.migrate();
      } finally {
        store.close();
        await given.end();
      }
    })),
});
