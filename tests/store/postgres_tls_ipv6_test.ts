/**
 * A server at an IPv6 address over verified TLS, whose certificate names
 * `::1` alone: postgres.js 3.4.9 gives TLS no server name for an IPv6
 * address either, so `migrate()` on a client made without `clientTls`
 * names the check against `localhost` and `clientTls`, and one given
 * `clientTls` for the URL at `[::1]` migrates. On a real server listening
 * on `::1`, from a process of its own (`_ipv6_tls_migrate.ts`), as the
 * test process may connect to IPv4 hosts only; ignored where this machine
 * has no IPv6 loopback.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startPostgres } from "../../support/postgres_server.ts";
import { testCertificates } from "../../support/test_tls.ts";
import { tlsSuitesAvailable } from "../_tls_postgres.ts";
import { timeout } from "../_timeout.ts";

const tlsAvailable = await tlsSuitesAvailable("the PostgreSQL TLS tests");

// Whether this machine listens on the IPv6 loopback (not where IPv6 is
// off), asked of a process of its own: this one may not listen there.
const ipv6Loopback: boolean = await new Deno.Command(Deno.execPath(), {
  args: ["eval", 'Deno.listen({ hostname: "::1", port: 0 }).close()'],
  stdout: "null",
  stderr: "null",
}).output().then(({ success }) => success, () => false);

Deno.test({
  name:
    "migrate() at [::1] over verify-full TLS names clientTls() on a client without it, and migrates on one given clientTls() for the URL",
  ignore: !tlsAvailable || !ipv6Loopback,
  fn: timeout(60_000, async () => {
    const certificates = await testCertificates(["::1"]);
    const server = await startPostgres({
      tls: certificates,
      settings: { listen_addresses: "127.0.0.1,::1" },
    });
    try {
      const url =
        `postgres://postgres:${server.password}@[::1]:${server.port}/postgres?sslmode=verify-full`;
      const { code, stdout, stderr } = await new Deno.Command(
        Deno.execPath(),
        {
          args: [
            "run",
            "--no-check",
            "--allow-read",
            "--allow-env",
            "--allow-net=[::1]",
            `${import.meta.dirname}/_ipv6_tls_migrate.ts`,
            url,
            certificates.caFile,
          ],
          stdout: "piped",
          stderr: "piped",
        },
      ).output();
      assert.equal(code, 0, new TextDecoder().decode(stderr));
      const [plain, given] = new TextDecoder().decode(stdout).trim().split(
        "\n",
      ).map((line) => JSON.parse(line));
      assert.match(
        plain.message,
        /^Cannot migrate the PostgreSQL schema "relayer" as the server's TLS certificate was checked against localhost, not ::1 \(Hostname\/IP does not match certificate's altnames: Host: localhost\. is not cert's CN: ::1\): postgres\.js gives TLS no server name for a host given as an IP address\. Give the client ssl: clientTls\(/,
      );
      assert.deepEqual(given, { migrated: "::1/128" });
    } finally {
      await server.stop();
      await certificates.remove();
    }
  }),
});
