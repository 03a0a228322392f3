/**
 * The portable entry points (`mod.ts`, `webhook/app.ts`,
 * `cloudflare/queue_handler.ts`) run on Node, Bun and Workers, so nothing
 * in their module graph may name `Deno`: `deno info` gives the graph, and
 * a lint rule over each of our files' syntax tree finds the name in code
 * (not in a comment, nor in a string). `Deno.*` belongs in `store/kv.ts`
 * and `main.ts` only, which are not in these graphs. Cheap, and it fails
 * before a runtime check would.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = new URL("../", import.meta.url);
const ENTRIES = ["mod.ts", "webhook/app.ts", "cloudflare/queue_handler.ts"];

/** Reports every `Deno` identifier: `Deno.env`, `globalThis.Deno`, `typeof Deno`. */
const portable: Deno.lint.Plugin = {
  name: "portable",
  rules: {
    "no-deno": {
      create(context) {
        return {
          Identifier(node) {
            if (node.name === "Deno") {
              context.report({ node, message: "names Deno" });
            }
          },
        };
      },
    },
  },
};

/** `file:line: the line` for each `Deno` in `source`'s code. */
function denoIn(path: string, source: string): string[] {
  return Deno.lint.runPlugin(portable, path, source).map(({ range }) => {
    const line = source.slice(0, range[0]).split("\n").length;
    return `${path}:${line}: ${source.split("\n")[line - 1]!.trim()}`;
  });
}

/** Our files in `entry`'s module graph (npm packages left out), as paths from the root. */
async function localGraph(entry: string): Promise<string[]> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: fileURLToPath(ROOT),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  const graph = JSON.parse(new TextDecoder().decode(stdout)) as {
    modules: { specifier: string }[];
  };
  return graph.modules.map((m) => m.specifier)
    .filter((s) => s.startsWith(ROOT.href))
    .map((s) => s.slice(ROOT.href.length));
}

Deno.test("the module graphs of mod.ts, webhook/app.ts and cloudflare/queue_handler.ts name Deno nowhere in code", async () => {
  for (const entry of ENTRIES) {
    const files = await localGraph(entry);
    assert.ok(files.includes(entry), `${entry}'s graph: ${files}`);
    assert.ok(files.includes("policy/decide.ts"), `${entry}'s graph: ${files}`);
    assert.ok(!files.includes("store/kv.ts") && !files.includes("main.ts"));
    const found: string[] = [];
    for (const file of files) {
      found.push(
        ...denoIn(file, await Deno.readTextFile(new URL(file, ROOT))),
      );
    }
    assert.deepEqual(found, [], `${entry} reaches Deno's own APIs`);
  }
});

Deno.test("the portable rule finds Deno in code, and only there", () => {
  const source = [
    "// Deno.serve in a comment, and /** Deno.env in JSDoc */",
    'const s = "Deno.exit()"; const r = /^https?:\\/\\/Deno\\./;',
    "const env = Deno.env.get('X');",
    "const g = globalThis.Deno;",
    "type T = typeof Deno;",
  ].join("\n");
  assert.deepEqual(denoIn("x.ts", source), [
    "x.ts:3: const env = Deno.env.get('X');",
    "x.ts:4: const g = globalThis.Deno;",
    "x.ts:5: type T = typeof Deno;",
  ]);
});
