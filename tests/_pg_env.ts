/**
 * What postgres.js makes of a client under `PG*` variables of the
 * environment (`PGSSL`, `PGHOST`), seen in a process of its own. postgres.js
 * 3.4.9 reads each option it is not given from `PG<OPTION>` when a client
 * is made, and the files of a parallel run share one process's
 * environment: a file that set `PGSSL=require` in its own made every
 * client another file opened meanwhile start TLS with the run's server,
 * which serves none ("Client network socket disconnected before secure TLS
 * connection was established"), failing that file's test.
 *
 * Run as `deno run tests/_pg_env.ts <case>`, with the variables set; it
 * prints a line of JSON. Cases:
 * - `dials`: the `path` a client of port 5432 and no host dials;
 * - `refusals`: for a client of the socket dir `/run/postgresql`, and one
 *   whose URL says `?sslmode=disable` beside that host, the message of
 *   `new PostgresStore()`'s refusal, or `null`.
 *
 * @module
 */

// deno-lint-ignore-file no-console

import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";

/** The message `new PostgresStore(sql)` throws, `null` where it takes `sql`. */
function refusal(sql: postgres.Sql): string | null {
  try {
    new PostgresStore(sql).close();
    return null;
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

/**
 * Runs `deno run tests/_pg_env.ts <which>` with `env` added to this
 * process's environment (not set in it), and returns what it printed.
 */
export async function underPgEnv(
  which: "dials" | "refusals",
  env: Record<string, string>,
): Promise<unknown> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-check",
      "--allow-read",
      "--allow-env",
      import.meta.filename!,
      which,
    ],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(
      `tests/_pg_env.ts ${which} exited ${code}: ${
        new TextDecoder().decode(stderr)
      }`,
    );
  }
  return JSON.parse(new TextDecoder().decode(stdout));
}

if (import.meta.main) {
  // postgres.js connects on a client's first query: none is sent here.
  if (Deno.args[0] === "dials") {
    const sql = postgres({ port: 5432 });
    console.log(JSON.stringify((sql.options as { path?: unknown }).path));
    await sql.end();
  } else {
    const socket = postgres({ host: "/run/postgresql" });
    const url = postgres(
      "postgres://relayer@localhost/payments?sslmode=disable",
      { host: "/run/postgresql" },
    );
    console.log(JSON.stringify([refusal(socket), refusal(url)]));
    await socket.end();
    await url.end();
  }
}
