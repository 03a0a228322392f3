/**
 * What the suites over a PostgreSQL Unix socket share: whether the run
 * may connect to a socket's path, a client of a server's socket dir, and
 * the file run again with the network such a path needs.
 *
 * @module
 */

import postgres from "postgres";

/**
 * Whether this run may connect to a Unix socket: Deno asks a connect to
 * one for net access to its path ("unix:/tmp/…/.s.PGSQL.5432"), which
 * `deno task test`'s loopback list does not grant.
 */
export const unixGranted: boolean =
  (await Deno.permissions.query({ name: "net" })).state === "granted";

/**
 * A client of `postgres` on the server whose socket is in `dir` at `port`,
 * one connection at most, given `more` (answeredSocketOption's, `ssl`, a
 * larger `max`).
 */
export function overSocket(
  dir: string,
  port: number,
  more: object,
): postgres.Sql {
  return postgres({
    host: dir,
    port,
    user: "postgres",
    database: "postgres",
    max: 1,
    connect_timeout: 5,
    onnotice: () => {},
    max_lifetime: null,
    ...more,
  } as postgres.Options<Record<string, never>>);
}

/**
 * The test file at `file` (its `import.meta.url`) run again with the
 * network, its tests narrowed by `filter` if given: its exit code and
 * what it printed.
 */
export async function runWithNetwork(
  file: string,
  filter?: string,
): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "test",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-net",
      ...(filter === undefined ? [] : ["--filter", filter]),
      new URL(file).pathname,
    ],
    cwd: new URL("../../", import.meta.url).pathname,
    env: { NO_COLOR: "1" },
    stdin: "null",
  }).output();
  const text = new TextDecoder();
  return { code, out: `${text.decode(stdout)}${text.decode(stderr)}` };
}
