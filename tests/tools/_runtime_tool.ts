/**
 * What the runtime checks' tests share: running a check as its task does,
 * and a stand-in binary that answers only `--version`.
 *
 * @module
 */

import { lockPath, manifestOf } from "../../support/npm_lock.ts";
import { runTool } from "./_run_tool.ts";

/**
 * Runs `tools/<file>` as its task does (from the root, with the checks'
 * permissions) with `env` added to the environment.
 *
 * @param file The check's file in `tools/`.
 * @param env Variables added to the test's environment.
 * @returns Its exit code and output.
 */
export async function runCheck(
  file: string,
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return await runTool(file, [], {
    permissions: [
      "--allow-run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-net=127.0.0.1",
    ],
    env,
  });
}

/**
 * Writes an executable shell script at `path` that runs `script` for
 * `--version` and fails on anything else, so a check that went past its
 * version check would show.
 */
export async function standIn(path: string, script: string): Promise<void> {
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\n[ "$1" = --version ] && { ${script}; }\necho 'a stand-in: must not run anything' >&2\nexit 3\n`,
  );
  await Deno.chmod(path, 0o755);
}

/**
 * Fills `cache` as `npm ci` leaves `name@version` from its committed lock,
 * with a stand-in ({@linkcode standIn}) running `script` at `bin` (a path
 * in `node_modules`), so a check takes it as installed.
 */
export async function cachedStandIn(
  cache: string,
  name: string,
  version: string,
  bin: string,
  script: string,
): Promise<void> {
  const path = `${cache}/node_modules/${bin}`;
  await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  await Deno.writeTextFile(`${cache}/package.json`, manifestOf(name, version));
  await Deno.copyFile(lockPath(name, version), `${cache}/package-lock.json`);
  await Deno.writeTextFile(`${cache}/node_modules/.package-lock.json`, "{}");
  await standIn(path, script);
}
