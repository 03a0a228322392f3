/**
 * Every problem `type` the service answers is listed, with its status, in
 * docs/routes.md's table of them: routes.md tells a client the types are
 * stable to switch on, and before the table eight of them (`unauthorized`,
 * `method-not-allowed`, `bad-intent`, `bad-intent-id`, `cannot-discard`,
 * `keys-unavailable`, `no-local-queue`, `shutting-down`) were written
 * nowhere in it. The types are read from the source, so a new one that
 * the table does not name, or a row the code no longer answers, fails here.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** The source files that answer problems: the app, its helpers, main.ts. */
async function sources(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const dir of ["webhook", "cloudflare", "relayer"]) {
    for await (const entry of Deno.readDir(new URL(`${dir}/`, ROOT))) {
      if (!entry.isFile || !entry.name.endsWith(".ts")) continue;
      const path = `${dir}/${entry.name}`;
      files.set(path, await Deno.readTextFile(new URL(path, ROOT)));
    }
  }
  files.set("main.ts", await Deno.readTextFile(new URL("main.ts", ROOT)));
  return files;
}

/** Each type the source answers, with the literal statuses it answers it with. */
async function answered(): Promise<Map<string, Set<number>>> {
  const types = new Map<string, Set<number>>();
  const add = (type: string, status?: number) => {
    const statuses = types.get(type) ?? new Set<number>();
    if (status !== undefined) statuses.add(status);
    types.set(type, statuses);
  };
  for (const source of (await sources()).values()) {
    for (
      const match of source.matchAll(
        /\bproblem\(\s*(\d+|[\w.]+),\s*"([a-z]+(?:-[a-z]+)*)"/g,
      )
    ) {
      const status = /^\d+$/.test(match[1]!) ? Number(match[1]) : undefined;
      add(match[2]!, status);
    }
    // A query parameter given twice is `bad-<its name>`, 400.
    if (source.includes("`bad-${name}`")) {
      for (const match of source.matchAll(/queryOf\(c, \[([^\]]*)\]\)/g)) {
        for (const name of match[1]!.matchAll(/"([a-z]+)"/g)) {
          add(`bad-${name[1]}`, 400);
        }
      }
    }
    // main.ts answers its drain's 503 with no app to build it.
    for (
      const match of source.matchAll(
        /type: "urn:relayer:problem:([a-z]+(?:-[a-z]+)*)",\s*title: "[^"]*",\s*status: (\d+)/g,
      )
    ) add(match[1]!, Number(match[2]));
  }
  return types;
}

/** The table's rows: each type it names, with the statuses its row gives. */
async function table(): Promise<Map<string, string>> {
  const doc = await Deno.readTextFile(new URL("docs/routes.md", ROOT));
  const start = doc.indexOf("Every `type` the service answers");
  assert.ok(
    start >= 0,
    "docs/routes.md has no table of the problem types it says are stable",
  );
  const rows = new Map<string, string>();
  const lines = doc.slice(start).split("\n");
  const body = lines.findIndex((line) => line.startsWith("| ---"));
  assert.ok(body > 0, "docs/routes.md's table of problem types has no header");
  for (const line of lines.slice(body + 1)) {
    if (!line.startsWith("|")) break;
    const cells = /^\| (`.*?`) +\| (.*?) +\|/.exec(line);
    if (!cells) continue;
    for (const type of cells[1]!.matchAll(/`([a-z-]+)`/g)) {
      rows.set(type[1]!, cells[2]!);
    }
  }
  return rows;
}

Deno.test("docs/routes.md's table names every problem type the service answers, and no other", async () => {
  const code = await answered();
  assert.ok(code.size >= 30, `found only ${code.size} types in the source`);
  const doc = await table();
  const unlisted = [...code.keys()].filter((type) => !doc.has(type)).sort();
  const stale = [...doc.keys()].filter((type) => !code.has(type)).sort();
  assert.deepEqual({ unlisted, stale }, { unlisted: [], stale: [] });
});

Deno.test("docs/routes.md's table gives each problem type the statuses it is answered with", async () => {
  const code = await answered();
  const doc = await table();
  const wrong: string[] = [];
  for (const [type, statuses] of code) {
    const cell = doc.get(type);
    if (cell === undefined) continue; // the test above names it
    for (const status of statuses) {
      if (!new RegExp(`\\b${status}\\b`).test(cell)) {
        wrong.push(`${type}: ${status} not in "${cell}"`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});
