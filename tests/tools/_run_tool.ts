/**
 * A tool in `tools/` run as its task runs it, for the tests of the tools'
 * command lines (`_schedule_cli.ts`, `_runtime_tool.ts`, the move's).
 *
 * @module
 */

import { fileURLToPath } from "node:url";

/** The repository root, ending in `/`. */
const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Runs `tools/<file>` with `args` from the repository's root (or from
 * `cwd`), with its deno.json, given `permissions` (none unless given) and
 * `env` added to the environment, its stdin closed. A tool still running
 * after `timeoutMs` (30 s unless given) is killed and the run fails, naming
 * the tool and its arguments: a tool that listens where it should refuse
 * fails its test instead of holding the suite.
 *
 * @returns Its exit code and what it printed.
 *
 * @example The schedule tool's default schedule
 * ```ts ignore
 * const { code, stdout } = await runTool("schedule.ts", []);
 * ```
 */
export async function runTool(
  file: string,
  args: readonly string[],
  options: {
    permissions?: readonly string[];
    env?: Record<string, string>;
    /** The folder it runs in; the repository's root unless given. */
    cwd?: string;
    /** How long it may run before it is killed and the run fails. */
    timeoutMs?: number;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      ...(options.permissions ?? []),
      `${ROOT}tools/${file}`,
      ...args,
    ],
    cwd: options.cwd ?? ROOT,
    ...(options.env === undefined ? {} : { env: options.env }),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
      timedOut = true;
    } catch {
      // It ended as the time ran out: its answer stands.
    }
  }, timeoutMs);
  let output: Deno.CommandOutput;
  try {
    output = await child.output();
  } finally {
    clearTimeout(timer);
  }
  const text = new TextDecoder();
  const stdout = text.decode(output.stdout);
  const stderr = text.decode(output.stderr);
  if (timedOut) {
    throw new Error(
      `tools/${file} ${
        JSON.stringify(args)
      } was still running after ${timeoutMs} ms and was killed; stderr: ${
        JSON.stringify(stderr)
      }`,
    );
  }
  return { code: output.code, stdout, stderr };
}

/**
 * `deno task kv-to-postgres` (`tools/kv_to_postgres.ts`) with `env` added,
 * its flags as deno.json gives them but writing `writable` only; the
 * modules in `preload` run first (a test's stand-ins).
 *
 * @returns Its exit code, its stdout (`out`) and its stderr (`err`).
 *
 * @example A move with no KV_PATH
 * ```ts ignore
 * const { code, err } = await runMove({ DATABASE_URL: url }, dir);
 * ```
 */
export async function runMove(
  env: Record<string, string>,
  writable: string,
  preload: readonly string[] = [],
): Promise<{ code: number; out: string; err: string }> {
  const { code, stdout, stderr } = await runTool("kv_to_postgres.ts", [], {
    permissions: [
      "--allow-net",
      "--allow-env",
      "--allow-read",
      `--allow-write=${writable}`,
      ...preload.map((path) => `--preload=${path}`),
    ],
    env,
  });
  return { code, out: stdout, err: stderr };
}
