/**
 * The services of their own the docs show (on Node, on Bun) open
 * PostgreSQL with what `loadConfig` checked and `main.ts` uses:
 * `config.database`'s URL and TLS. `DATABASE_URL` read again as it is
 * skips the checks, and where it is unset postgres.js opens the database
 * `PGHOST` and the others name (localhost, by default) while `loadConfig`
 * chose Deno KV; with no `sslmode` in the URL, postgres.js takes TLS from
 * `PGSSL`, not from what `config.database` says.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** The `ts` blocks of README.md and docs/*.md, each with its file. */
async function tsBlocks(): Promise<{ file: string; code: string }[]> {
  const files = ["README.md"];
  for await (const entry of Deno.readDir(new URL("docs/", ROOT))) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  const blocks: { file: string; code: string }[] = [];
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    for (const match of text.matchAll(/^```ts\b[^\n]*\n([^]*?)^```/gm)) {
      blocks.push({ file, code: match[1]! });
    }
  }
  return blocks;
}

Deno.test("a docs block that reads its settings with loadConfig opens PostgreSQL with config.database's URL and TLS, never DATABASE_URL as it is", async () => {
  const services = (await tsBlocks()).filter(({ code }) =>
    code.includes("loadConfig(") && /\bpostgres\(/.test(code)
  );
  // The Node and the Bun service of docs/api.md at least.
  assert.ok(services.length >= 2, `${services.length} blocks found`);
  for (const { file, code } of services) {
    const where = `${file}: ${code.slice(0, code.indexOf("\n"))}…`;
    assert.doesNotMatch(
      code,
      /(process\.env|Deno\.env\.get\(|\benv)\W*DATABASE_URL/,
      `${where} reads DATABASE_URL itself`,
    );
    assert.match(
      code,
      /\bdatabase\b[^]*\bpostgres\(/,
      `${where}: no config.database`,
    );
    const call = code.slice(code.search(/\bpostgres\(/));
    assert.match(
      call.slice(0, call.indexOf(";")),
      /\.\.\.tls\b|\bssl\b/,
      `${where} passes postgres() no ssl`,
    );
  }
});
