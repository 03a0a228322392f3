/**
 * The files of a parallel run (`deno task test`) share one process's
 * environment, and postgres.js 3.4.9 reads each option a client is not
 * given from `PG<OPTION>` as the client is made (`PGSSL`, `PGHOST`,
 * `PGMAX`, …). A file that sets one in its own process changes every
 * client another file makes meanwhile: `PGSSL=require` made them start TLS
 * with the run's server, which serves none, and a test of another file
 * failed with "Client network socket disconnected before secure TLS
 * connection was established". Such a variable goes to a process of its
 * own (tests/_pg_env.ts).
 *
 * @module
 */

import assert from "node:assert/strict";

Deno.test("no test sets a PG* variable in the run's own environment, which every other file's postgres.js clients read", async () => {
  const setting = /Deno\.env\.set\(\s*["'`]PG|process\.env\.PG\w*\s*=[^=]/;
  const found: string[] = [];
  for await (const path of tsFiles(import.meta.dirname!)) {
    const lines = (await Deno.readTextFile(path)).split("\n");
    lines.forEach((line, i) => {
      if (setting.test(line)) found.push(`${path}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, []);
});

/** The `.ts` files under `dir`, at any depth. */
async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) yield* tsFiles(path);
    else if (entry.isFile && entry.name.endsWith(".ts")) yield path;
  }
}
