/**
 * The TLS probe of node-check: `?sslmode=verify-full` through `clientTls`
 * on each Node's own `node:tls` (`tests/node/postgres_tls_node.ts`),
 * against a server of its own whose certificate names 127.0.0.1 alone:
 * a query answers over TLS with the server's CA trusted
 * (`NODE_EXTRA_CA_CERTS`, as docs/api.md's Node service is told), and the
 * connection is refused without it. About 2 s for the server and its
 * certificates, and a fraction of a second per Node.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError } from "./_check.ts";
import { bundle, run } from "./_npm_cache.ts";
import type { ResendRuntime } from "./_resend_probe.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { testCertificates } from "../support/test_tls.ts";

/**
 * Bundles the probe into `dir` and runs it under each runtime, twice,
 * against a TLS server it starts and stops, printing a line per runtime.
 *
 * @param dir The check's temp dir.
 * @param runtimes The runtimes to probe.
 * @returns Whether every run held.
 * @throws {CheckError} If `openssl` is missing or fails, or the server
 * does not start.
 *
 * @example
 * ```ts ignore
 * ok = await tlsProbe(dir, [{ label: "Node v20.20.2", command: "node" }]) && ok;
 * ```
 */
export async function tlsProbe(
  dir: string,
  runtimes: readonly ResendRuntime[],
): Promise<boolean> {
  await bundle("tests/node/postgres_tls_node.ts", `${dir}/postgres_tls.mjs`, {
    platform: "node",
  });
  const certificates = await testCertificates(["127.0.0.1"]).catch(
    (error: Error) => {
      throw new CheckError(
        `the TLS probe makes its certificates with openssl, which failed (${error.message}): install it (Debian's openssl package) and run again`,
      );
    },
  );
  let ok = true;
  try {
    const server = await startPostgres({ tls: certificates });
    try {
      const url = `${server.url}?sslmode=verify-full`;
      for (const runtime of runtimes) {
        const said: string[] = [];
        for (const trusted of [true, false]) {
          const { code, out } = await run(
            runtime.command,
            [...(runtime.args ?? []), "postgres_tls.mjs"],
            {
              cwd: dir,
              env: {
                ...runtime.env,
                RELAYER_PG_TLS_URL: url,
                ...(trusted
                  ? { NODE_EXTRA_CA_CERTS: certificates.caFile }
                  : { RELAYER_PG_TLS_EXPECT: "refused" }),
              },
              label: `the PostgreSQL TLS probe on ${runtime.label}`,
              timeoutMs: 30_000,
            },
          );
          const line = out.split("\n").find((l) => /^(ok|FAIL) /.test(l));
          ok = code === 0 && line?.startsWith("ok ") === true && ok;
          said.push(
            code === 0 && line?.startsWith("ok ")
              ? line.slice(3)
              : `FAIL (exit ${code}) ${out.trim()}`,
          );
        }
        console.log(
          `PostgreSQL TLS probe on ${runtime.label}: ${said.join("; ")}`,
        );
      }
    } finally {
      await server.stop();
    }
  } finally {
    await certificates.remove();
  }
  return ok;
}
