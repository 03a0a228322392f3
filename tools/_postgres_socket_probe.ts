/**
 * The socket probe of node-check and bun-check: `answeredSocketOption`'s
 * socket (`store/_postgres_socket.ts`, a `node:stream` Duplex over
 * `node:net`) on the runtime's own streams, not Deno's
 * (`tests/node/postgres_socket_node.ts`, run as a plain script against the
 * check's server): a query through it over TCP and over the Unix socket;
 * TLS asked for over the Unix socket failed at once, twice on a pool of
 * one; the wait between rounds in which every host failed drawn from the
 * injected random; and `sql.end()` while a round's close is held (the
 * socket reads "open"), not awaiting `closed()`, the process gone within
 * 400 ms of it. About 1.1 s per Node or Bun, plus its bundle.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { bundle, run } from "./_npm_cache.ts";
import type { ResendRuntime } from "./_resend_probe.ts";

/** The checks the script prints a line for: each must say "ok". */
const CHECKS = 6;

/**
 * Bundles the probe into `dir` and runs it under each runtime against the
 * server at `url`, whose Unix socket is in `socketDir`, printing its lines.
 *
 * @param dir The check's temp dir.
 * @param url The server's URL (`postgres://postgres:…@127.0.0.1:<port>/postgres`).
 * @param socketDir The dir of the server's Unix socket.
 * @param runtimes The runtimes to probe.
 * @returns Whether every run passed.
 * @throws {CheckError} If the bundle fails or a run passes its deadline.
 *
 * @example
 * ```ts ignore
 * ok = await socketProbe(dir, url, socketDir, [{ label: "Node v20.20.2", command: "node" }]) && ok;
 * ```
 */
export async function socketProbe(
  dir: string,
  url: string,
  socketDir: string,
  runtimes: readonly ResendRuntime[],
): Promise<boolean> {
  await bundle(
    "tests/node/postgres_socket_node.ts",
    `${dir}/postgres_socket.mjs`,
    { platform: "node" },
  );
  let ok = true;
  for (const runtime of runtimes) {
    const { code, out } = await run(
      runtime.command,
      [...(runtime.args ?? []), "postgres_socket.mjs"],
      {
        cwd: dir,
        env: {
          ...runtime.env,
          RELAYER_PG_URL: url,
          RELAYER_PG_SOCKET_DIR: socketDir,
        },
        label: `the PostgreSQL socket probe on ${runtime.label}`,
        // A close left held keeps the process up to 1 s, which the script
        // measures itself; this bounds a run that hangs.
        timeoutMs: 60_000,
      },
    );
    const lines = out.split("\n").filter((line) => /^(ok|FAIL) /.test(line));
    const passed = code === 0 &&
      lines.filter((line) => line.startsWith("ok ")).length === CHECKS &&
      lines.length === CHECKS;
    ok = passed && ok;
    console.log(
      passed
        ? `PostgreSQL socket probe on ${runtime.label}: answeredSocketOption's socket answered over TCP and the Unix socket, failed TLS over the Unix socket at once, drew its held waits from the injected random, and let the process exit at sql.end() while a close was held`
        : `PostgreSQL socket probe on ${runtime.label}: FAIL (exit ${code})\n${out}`,
    );
  }
  return ok;
}
