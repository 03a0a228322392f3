/**
 * Every symbol an entry point exports has an `@example` in its JSDoc, as
 * the house style asks: `deno doc --lint` asks for the JSDoc only, so a
 * type exported with a line of prose and no example passed it.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** What `deno doc --json` says of a symbol, as far as this test reads it. */
interface DocSymbol {
  readonly name: string;
  readonly declarations: readonly {
    readonly jsDoc?: { readonly tags?: readonly { readonly kind: string }[] };
  }[];
}

Deno.test("every symbol deno.json's entry points export has an example in its JSDoc", async () => {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", ROOT)),
  ) as { exports: Record<string, string> };
  const entries = Object.values(config.exports);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", ...entries],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  const { nodes } = JSON.parse(new TextDecoder().decode(stdout)) as {
    nodes: Record<string, { symbols: readonly DocSymbol[] }>;
  };
  const modules = Object.entries(nodes);
  assert.equal(modules.length, entries.length, Object.keys(nodes).join(", "));
  const missing: string[] = [];
  let symbols = 0;
  for (const [module, { symbols: exported }] of modules) {
    for (const symbol of exported) {
      symbols++;
      const example = symbol.declarations.some((declaration) =>
        declaration.jsDoc?.tags?.some((tag) => tag.kind === "example")
      );
      if (!example) {
        missing.push(`${module.slice(ROOT.href.length)}: ${symbol.name}`);
      }
    }
  }
  // The entry points export well over a hundred symbols: a shape of the
  // JSON this test no longer reads would find none, and pass.
  assert.ok(symbols > 100, `${symbols} symbols`);
  assert.deepEqual(missing, [], "exported with no @example in its JSDoc");
});
