/**
 * The files of a parallel run (`deno task test`) share one process: its
 * environment and its working folder. A variable one file sets, deletes or
 * sets back is what every other file reads meanwhile, and what each child
 * another file starts without `clearEnv` begins with. postgres.js 3.4.9
 * reads each option a client is not given from `PG<OPTION>` as the client
 * is made: `PGSSL=require` made another file's clients start TLS with the
 * run's server, which serves none ("Client network socket disconnected
 * before secure TLS connection was established"). `Deno.openKv(url)`
 * reads `DENO_KV_ACCESS_TOKEN` as it opens and each time KV Connect's
 * metadata expires, and `openService()` reads it for what it masks: one
 * file's token, or its deletion on the way out, reached another file's
 * open. `Deno.openKv()` opens what `DENO_KV_DEFAULT_PATH` names. A working
 * folder changed in one file is where another's relative paths go, and
 * each child it starts without a `cwd`. Such a test runs in a process of
 * its own (tests/_pg_env.ts, tests/_own_process.ts).
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * The lines that may change the run's own process, each with why nothing
 * else in the run reads what they change.
 */
const HARMLESS: Readonly<Record<string, string>> = {
  'tests/_postgres.ts: Deno.env.set(said, "1");':
    "POISON_TESTS_SKIP_SAID_*: says a skip line once for all the files; read by suitesAvailable() alone, and named so that the service a tool starts with the run's environment does not name it (tests/skip_said_test.ts)",
  'tests/_small_disk.ts: Deno.env.set(said, "1");':
    "POISON_TESTS_SKIP_SAID_THE_FULL_DISK_SUITES: as above, read by smallDiskAvailable alone",
  "tests/_memory_store_cwd.ts: Deno.chdir(dir);":
    "run only in a process of its own, by tests/start_memory_store_test.ts",
};

const ROOT = new URL("../", import.meta.url).pathname;

/** Folders no test, bench or tool of the run loads code from. */
const SKIPPED = new Set([".git", "node_modules", "data", "coverage"]);

/**
 * A set, a delete or an assignment of the environment, in Deno or Node,
 * and a change of the working folder or the file mode mask.
 */
const SETTING =
  /\bDeno\.env\.(?:set|delete)\s*\(|\bprocess\.env(?:\.\w+|\[[^\]]+\])\s*(?:=[^=]|\?\?=|\|\|=)|\bdelete\s+process\.env\b|Object\.assign\(\s*process\.env\b|\b(?:Deno|process)\.chdir\s*\(|\b(?:Deno|process)\.umask\s*\(\s*[^)\s]/;

Deno.test("no test, helper, bench or tool sets a variable or the working folder in the run's own process, which every other file reads meanwhile", async () => {
  const found: string[] = [];
  for await (const path of codeFiles(ROOT)) {
    const file = path.slice(ROOT.length);
    // This file's own lines show the forms it finds.
    if (file === "tests/env_shared_test.ts") continue;
    const lines = (await Deno.readTextFile(path)).split("\n");
    lines.forEach((line, i) => {
      if (!SETTING.test(line)) return;
      if (`${file}: ${line.trim()}` in HARMLESS) return;
      found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, []);
});

Deno.test("the guard finds each form of setting a variable or the working folder, and no read of one", () => {
  for (
    const line of [
      'Deno.env.set("PGSSL", "require");',
      'Deno.env.delete("DENO_KV_ACCESS_TOKEN");',
      'process.env.TZ = "UTC";',
      'process.env["NO_COLOR"] = "1";',
      "process.env.HOME ??= dir;",
      "delete process.env.PGHOST;",
      "Object.assign(process.env, { PGSSL: 'require' });",
      "Deno.chdir(dir);",
      "process.chdir('/tmp');",
      "Deno.umask(0o077);",
    ]
  ) assert.match(line, SETTING, line);
  for (
    const line of [
      'Deno.env.get("DENO_KV_ACCESS_TOKEN")',
      "const url = process.env.DATABASE_URL;",
      'if (process.env.CI === "true") {}',
      "new Deno.Command(deno, { env: { PGSSL: 'require' } })",
      "const cwd = Deno.cwd();",
      "const mask = Deno.umask();",
    ]
  ) assert.doesNotMatch(line, SETTING, line);
});

/** The code files under `dir`, at any depth. */
async function* codeFiles(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir.replace(/\/$/, "")}/${entry.name}`;
    if (entry.isDirectory && !SKIPPED.has(entry.name)) yield* codeFiles(path);
    else if (entry.isFile && /\.(?:[cm]?[jt]s|tsx)$/.test(entry.name)) {
      yield path;
    }
  }
}
