/**
 * What node-check and bun-check share to run `PostgresStore`'s contract
 * under another runtime: a real PostgreSQL server started for the run and
 * stopped after, or a loud skip where this machine has no server binaries
 * (a failure under `CI=true`).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError } from "./_check.ts";
import { postgresBinDir, startPostgres } from "../support/postgres_server.ts";

/**
 * Runs `check` against a PostgreSQL server started for it.
 *
 * @param title What the skip line starts with (`"PostgresStore contract on Bun"`).
 * @param check Gets the server's URL and the dir of its Unix socket;
 * resolves to whether it passed.
 * @returns What `check` returned; `true` with a loud line where there are
 * no server binaries, outside CI.
 * @throws {CheckError} If there are no server binaries under `CI=true`.
 */
export async function withPostgres(
  title: string,
  check: (url: string, socketDir: string) => Promise<boolean>,
): Promise<boolean> {
  if (await postgresBinDir() === null) {
    const missing =
      "no PostgreSQL server binaries (initdb) under `pg_config --bindir` or /usr/lib/postgresql/*/bin: install Debian's postgresql package";
    if (Deno.env.get("CI") === "true") throw new CheckError(missing);
    console.log(`${title}: SKIPPED, ${missing}`);
    return true;
  }
  const server = await startPostgres();
  try {
    return await check(server.url, server.dir);
  } finally {
    await server.stop();
  }
}
