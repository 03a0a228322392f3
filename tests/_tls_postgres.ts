/**
 * A PostgreSQL server of a test's own over TLS, with a certificate from a
 * throwaway CA (`support/test_tls.ts`), for the suites that check what a
 * client or the service does on TLS, and whether those suites run: they
 * need `openssl` besides the server's binaries.
 *
 * @module
 */

import {
  type OwnedPostgresServer,
  startPostgres,
} from "../support/postgres_server.ts";
import {
  type TestCertificates,
  testCertificates,
} from "../support/test_tls.ts";
import { postgresAvailable, suitesAvailable } from "./_postgres.ts";

/**
 * Whether `suites` run: `false` only where PostgreSQL or `openssl` is
 * missing, outside CI (under `CI=true` that is an error, as for the other
 * PostgreSQL suites).
 */
export async function tlsSuitesAvailable(suites: string): Promise<boolean> {
  return postgresAvailable &&
    suitesAvailable(
      await new Deno.Command("openssl", { args: ["version"], stdout: "null" })
        .output().then(() => true, () => false),
      suites,
      "no openssl on the PATH",
      "apt-get install openssl",
    );
}

/**
 * Whether this machine listens on the IPv6 loopback (not where IPv6 is
 * off), asked of a process of its own: a test process may not listen there.
 */
export function ipv6LoopbackAvailable(): Promise<boolean> {
  return new Deno.Command(Deno.execPath(), {
    args: ["eval", 'Deno.listen({ hostname: "::1", port: 0 }).close()'],
    stdout: "null",
    stderr: "null",
  }).output().then(({ success }) => success, () => false);
}

/**
 * Runs `fn` on a server that serves TLS with a certificate naming `names`
 * alone (host names and IP addresses), with the server `settings` given
 * (`listen_addresses`); then stops the server and removes the
 * certificates' files.
 */
export async function withTlsPostgres(
  names: readonly string[],
  fn: (
    server: OwnedPostgresServer,
    certificates: TestCertificates,
  ) => Promise<void>,
  settings?: Readonly<Record<string, string>>,
): Promise<void> {
  const certificates = await testCertificates(names);
  try {
    const server = await startPostgres({
      tls: certificates,
      ...(settings ? { settings } : {}),
    });
    try {
      await fn(server, certificates);
    } finally {
      await server.stop();
    }
  } finally {
    await certificates.remove();
  }
}
