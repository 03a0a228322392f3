/**
 * Tests that need a variable of the environment the run's other files
 * read (`DENO_KV_ACCESS_TOKEN`, `DENO_KV_DEFAULT_PATH`, `PG*`), or another
 * working folder, run in a `deno test` of their own, with the variable set
 * there only: the files of a parallel run share one process, its
 * environment and its working folder, and a variable one sets is what
 * another file's `Deno.openKv(url)`, `openService()` or postgres.js client
 * reads meanwhile (tests/env_shared_test.ts).
 *
 * @module
 */

const ROOT = new URL("../", import.meta.url).pathname;

/**
 * Runs the tests of `file` (a path from the repository's root, a module no
 * run picks up on its own: `tests/_name.ts`) as `deno task test` would,
 * in a process whose environment is this one's with `env` added, and
 * throws with what it printed where one of them fails.
 */
export async function testInOwnProcess(
  file: string,
  env: Record<string, string> = {},
): Promise<void> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "test",
      // The run's `deno task check` checks tests/ as a whole.
      "--no-check",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-net=127.0.0.1,localhost",
      file,
    ],
    cwd: ROOT,
    env: { ...env, NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  const said = `${decode(stdout)}${decode(stderr)}`;
  // A run that found no test passes as well: it is no proof.
  const ran = Number(/^ok \| (\d+) passed/m.exec(said)?.[1] ?? 0);
  if (code !== 0 || ran === 0) {
    throw new Error(
      `deno test ${file} (with ${
        Object.keys(env).join(", ") || "nothing"
      } set) exited ${code}, ${ran} passed:\n${said}`,
    );
  }
}
