/**
 * Every install line of README.md and docs/*.md (`npm install …`,
 * `deno add npm:…`, `bun add …`) names each npm package this repository
 * pins in deno.json at that version: an adopter who copies the line gets
 * the version the checks ran (an unpinned `@hono/node-server` installed
 * whatever npm had last, which node-check never ran). An `npm install`
 * line says `--save-exact` too: npm writes `"postgres": "^3.4.9"` into
 * package.json otherwise, and the next install without the lock file
 * (`npm update`, a fresh CI cache) takes a later 3.x the checks never ran.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** deno.json's npm pins: package name to version. */
async function pins(): Promise<Map<string, string>> {
  const { imports } = JSON.parse(
    await Deno.readTextFile(`${ROOT}deno.json`),
  ) as { imports: Record<string, string> };
  const found = new Map<string, string>();
  for (const target of Object.values(imports)) {
    const m = /^npm:\/?((?:@[^/@]+\/)?[^/@]+)@([^/]+)\/?$/.exec(target);
    if (m) found.set(m[1]!, m[2]!);
  }
  return found;
}

/** The package arguments of each install command in `text`, with its line. */
function installs(
  text: string,
): { line: number; spec: string; command: string; flags: string[] }[] {
  const out: {
    line: number;
    spec: string;
    command: string;
    flags: string[];
  }[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    for (
      const [, command, args] of line.matchAll(
        /(npm install|npm i|bun add|pnpm add|yarn add|deno add)((?: +[^\s`)(;&|#]+)+)/g,
      )
    ) {
      const all = args!.trim().split(/ +/);
      const flags = all.filter((arg) => arg.startsWith("-"));
      for (const arg of all) {
        if (arg.startsWith("-") || arg.includes("<")) continue;
        out.push({
          line: i + 1,
          spec: arg.replace(/^npm:/, ""),
          command: command!,
          flags,
        });
      }
    }
  }
  return out;
}

Deno.test("the docs' install lines pin each npm package at deno.json's version", async () => {
  const pinned = await pins();
  assert.ok(pinned.get("postgres"), "deno.json pins no postgres");
  const files = ["README.md"];
  for await (const entry of Deno.readDir(`${ROOT}docs`)) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  const wrong: string[] = [];
  let checked = 0;
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    for (const { line, spec } of installs(text)) {
      const m = /^((?:@[^/@]+\/)?[^/@]+)(?:@(.+))?$/.exec(spec);
      if (!m || !pinned.has(m[1]!)) continue;
      checked++;
      if (m[2] !== pinned.get(m[1]!)) {
        wrong.push(
          `${file}:${line}: ${spec}, where deno.json pins ${m[1]}@${
            pinned.get(m[1]!)
          }`,
        );
      }
    }
  }
  assert.ok(checked > 0, "no install line checked");
  assert.deepEqual(wrong, []);
});

Deno.test("the docs' npm install lines of a pinned package save it exact (--save-exact)", async () => {
  const pinned = await pins();
  const files = ["README.md"];
  for await (const entry of Deno.readDir(`${ROOT}docs`)) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  const ranged: string[] = [];
  let checked = 0;
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    for (const { line, spec, command, flags } of installs(text)) {
      const name = /^((?:@[^/@]+\/)?[^/@]+)/.exec(spec)?.[1];
      if (!command.startsWith("npm ") || !pinned.has(name ?? "")) continue;
      checked++;
      if (!flags.includes("--save-exact") && !flags.includes("-E")) {
        ranged.push(`${file}:${line}: ${command} ${spec}`);
      }
    }
  }
  assert.ok(checked > 0, "no npm install line checked");
  assert.deepEqual(ranged, []);
});

Deno.test("docs/queues.md's first Cloudflare deploy installs the Wrangler wrangler-check runs, exact, before its steps run wrangler", async () => {
  const check = await Deno.readTextFile(`${ROOT}tools/wrangler_check.ts`);
  const version = /WRANGLER_VERSION = "([^"]+)"/.exec(check)?.[1];
  assert.ok(version, "tools/wrangler_check.ts pins no WRANGLER_VERSION");
  const text = await Deno.readTextFile(`${ROOT}docs/queues.md`);
  const start = text.indexOf("### Deploying to Cloudflare the first time");
  assert.ok(start >= 0, "docs/queues.md lost its first-deploy heading");
  const section = text.slice(start).split(/\n#{2,3} /)[0]!;
  const wrangler = installs(section).filter(({ spec }) =>
    /^wrangler(?:@|$)/.test(spec)
  );
  assert.deepEqual(
    wrangler.map(({ spec, flags }) => ({
      spec,
      exact: flags.includes("--save-exact") || flags.includes("-E"),
    })),
    [{ spec: `wrangler@${version}`, exact: true }],
    "the steps run wrangler, so they must install the one the checks ran",
  );
  const firstRun = section.search(/`(?:npx )?wrangler (?!@)[a-z]/);
  const install = section.indexOf(`wrangler@${version}`);
  assert.ok(
    install >= 0 && install < firstRun,
    "Wrangler is installed after a step runs it",
  );
});
