/**
 * The portable entry points (`mod.ts`, `webhook/app.ts`,
 * `cloudflare/queue_handler.ts`) run on Node, Bun and Workers, so nothing
 * in their module graph may reach a runtime's own API: no `Deno`, no
 * `node:*` import, and none of Node's globals (`Buffer`, `process`,
 * `global`, `setImmediate`, `require`, `__dirname`, `__filename`), which a
 * Worker without `nodejs_compat` and a browser lack. `deno info` gives the
 * graph, and lint rules over each of our files' syntax tree find the names
 * in code (not in a comment, nor in a string) and the imports. `Deno.*`
 * belongs in `main.ts` and the tools, Node's APIs in the adapters and
 * tools, none of which are in these graphs. The stores' own entry points
 * (`store/kv.ts` over `@deno/kv`, `store/postgres.ts`,
 * `store/postgres_socket.ts`, `store/kv_to_postgres.ts`) and
 * `testing/store_contract.ts` run on Node
 * and Bun too (and PostgresStore on Workers), so their graphs name no
 * `Deno` either: the runtime checks run the store contract there, which
 * reaches neither a refusal's message nor a lost connection's handling.
 * Cheap, and it fails before a runtime check would, or where none looks.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = new URL("../", import.meta.url);
const ENTRIES = ["mod.ts", "webhook/app.ts", "cloudflare/queue_handler.ts"];

/** What each rule forbids, as a failure names it. */
const RULES = {
  "no-deno": "the portable core names no Deno",
  "no-node-global": "the portable core uses none of Node's globals",
  "no-node-import": "the portable core imports no node:* module",
  "no-late-url":
    "the portable core calls no URL.canParse or URL.parse, which workerd on older compatibility dates lacks",
} as const;
type Rule = keyof typeof RULES;

/** Node's globals that Workers (without `nodejs_compat`) and browsers lack. */
const NODE_GLOBALS = new Set([
  "Buffer",
  "process",
  "global",
  "setImmediate",
  "require",
  "__dirname",
  "__filename",
]);
/**
 * `URL`'s statics that came late to the platforms: a Worker on an older
 * compatibility date (the example Worker's checks run one on 2022-01-01)
 * failed to load with "URL.canParse is not a function".
 */
const LATE_URL_STATICS = new Set(["canParse", "parse"]);
/** The names through which code reaches a global as a property. */
const GLOBAL_OBJECTS = new Set(["globalThis", "self", "window"]);

type Node = Deno.lint.Node;

const sameNode = (a: Node | null | undefined, b: Node) =>
  a !== null && a !== undefined && a.type === b.type &&
  a.range[0] === b.range[0] && a.range[1] === b.range[1];

/**
 * Whether an identifier named like one of Node's globals stands for a
 * property or a key (`job.process`, `{ process: 1 }`, `process() {}` in a
 * class) rather than the global; `globalThis.process` is the global.
 */
function isKey(node: Deno.lint.Identifier): boolean {
  const parent = node.parent;
  switch (parent.type) {
    case "MemberExpression":
      return !parent.computed && sameNode(parent.property, node) &&
        !(parent.object.type === "Identifier" &&
          GLOBAL_OBJECTS.has(parent.object.name));
    case "Property":
      return !parent.computed && !parent.shorthand &&
        sameNode(parent.key, node);
    case "MethodDefinition":
    case "PropertyDefinition":
    case "TSPropertySignature":
    case "TSMethodSignature":
    case "TSAbstractMethodDefinition":
    case "TSAbstractPropertyDefinition":
      return !("computed" in parent && parent.computed) &&
        sameNode(parent.key, node);
    case "TSEnumMember":
      return sameNode(parent.id, node);
    case "TSQualifiedName":
      return sameNode(parent.right, node);
    default:
      return false;
  }
}

/** A string the expression is, if it is one: `"node:fs"`, `` `node:fs` ``. */
function literal(node: Node | null): string | undefined {
  if (node?.type === "TSLiteralType") return literal(node.literal);
  if (node?.type === "Literal" && typeof node.value === "string") {
    return node.value;
  }
  if (node?.type === "TemplateLiteral" && node.expressions.length === 0) {
    return node.quasis[0]?.cooked ?? undefined;
  }
  return undefined;
}

/**
 * Reports `Deno` anywhere in code (`Deno.env`, `globalThis.Deno`,
 * `typeof Deno`), Node's globals where they stand for the global, and
 * every import of a `node:*` module.
 */
const portable: Deno.lint.Plugin = {
  name: "portable",
  rules: {
    "no-deno": {
      create(context) {
        return {
          Identifier(node) {
            if (node.name === "Deno") {
              context.report({ node, message: "Deno" });
            }
          },
        };
      },
    },
    "no-node-global": {
      create(context) {
        return {
          Identifier(node) {
            if (NODE_GLOBALS.has(node.name) && !isKey(node)) {
              context.report({ node, message: node.name });
            }
          },
          MemberExpression(node) {
            // globalThis["process"]
            const name = node.computed ? literal(node.property) : undefined;
            if (
              name !== undefined && NODE_GLOBALS.has(name) &&
              node.object.type === "Identifier" &&
              GLOBAL_OBJECTS.has(node.object.name)
            ) {
              context.report({ node: node.property, message: name });
            }
          },
        };
      },
    },
    "no-late-url": {
      create(context) {
        return {
          MemberExpression(node) {
            const name = node.computed
              ? literal(node.property)
              : node.property.type === "Identifier"
              ? node.property.name
              : undefined;
            if (
              name !== undefined && LATE_URL_STATICS.has(name) &&
              node.object.type === "Identifier" && node.object.name === "URL"
            ) {
              context.report({ node, message: `URL.${name}` });
            }
          },
        };
      },
    },
    "no-node-import": {
      create(context) {
        const check = (source: Node | null) => {
          const specifier = literal(source);
          if (source && specifier?.startsWith("node:")) {
            context.report({ node: source, message: specifier });
          }
        };
        return {
          ImportDeclaration: (node) => check(node.source),
          ExportAllDeclaration: (node) => check(node.source),
          ExportNamedDeclaration: (node) => check(node.source),
          ImportExpression: (node) => check(node.source),
          TSImportType: (node) => check(node.argument),
          TSExternalModuleReference: (node) => check(node.expression),
        };
      },
    },
  },
};

/** `file:line: rule (what it forbids): the line`, one finding's message. */
function finding(
  path: string,
  source: string,
  line: number,
  rule: Rule,
): string {
  const text = source.split("\n")[line - 1]!.trim();
  return `${path}:${line}: ${rule} (${RULES[rule]}): ${text}`;
}

/** Every finding of the portable rules in `source`'s code. */
function nonPortableIn(path: string, source: string): string[] {
  // A shorthand `{ process }` and `import { Buffer }` hold one name twice.
  const seen = new Set<string>();
  return Deno.lint.runPlugin(portable, path, source)
    .filter(({ id, range }) => {
      const key = `${id}@${range[0]}-${range[1]}`;
      return !seen.has(key) && seen.add(key);
    })
    .map(({ id, range }) =>
      finding(
        path,
        source,
        source.slice(0, range[0]).split("\n").length,
        id.slice("portable/".length) as Rule,
      )
    );
}

type Graph = {
  modules: {
    specifier: string;
    dependencies?: {
      specifier: string;
      code?: { specifier?: string; span: { start: { line: number } } };
      type?: { specifier?: string; span: { start: { line: number } } };
    }[];
  }[];
};

/** `entry`'s module graph from `deno info`. */
async function graphOf(entry: string): Promise<Graph> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: fileURLToPath(ROOT),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  return JSON.parse(new TextDecoder().decode(stdout)) as Graph;
}

/** Our files in `graph` (npm packages left out), as paths from the root. */
function localFiles(graph: Graph): string[] {
  return graph.modules.map((m) => m.specifier)
    .filter((s) => s.startsWith(ROOT.href))
    .map((s) => s.slice(ROOT.href.length));
}

/**
 * Our files' imports that resolve to a `node:*` module, whatever they are
 * written as (an import map can turn a bare name into `node:process`).
 */
async function nodeImportsIn(graph: Graph): Promise<string[]> {
  const found: string[] = [];
  for (const module of graph.modules) {
    if (!module.specifier.startsWith(ROOT.href)) continue;
    const path = module.specifier.slice(ROOT.href.length);
    for (const dependency of module.dependencies ?? []) {
      for (const use of [dependency.code, dependency.type]) {
        if (use?.specifier?.startsWith("node:")) {
          const source = await Deno.readTextFile(new URL(path, ROOT));
          found.push(
            finding(path, source, use.span.start.line + 1, "no-node-import"),
          );
        }
      }
    }
  }
  return found;
}

Deno.test("the module graphs of mod.ts, webhook/app.ts and cloudflare/queue_handler.ts reach neither Deno's nor Node's own APIs", async () => {
  for (const entry of ENTRIES) {
    const graph = await graphOf(entry);
    const files = localFiles(graph);
    assert.ok(files.includes(entry), `${entry}'s graph: ${files}`);
    assert.ok(files.includes("policy/decide.ts"), `${entry}'s graph: ${files}`);
    for (const adapter of ["store/kv.ts", "store/postgres.ts", "main.ts"]) {
      assert.ok(!files.includes(adapter), `${entry}'s graph has ${adapter}`);
    }
    const found = new Set(await nodeImportsIn(graph));
    for (const file of files) {
      const source = await Deno.readTextFile(new URL(file, ROOT));
      for (const line of nonPortableIn(file, source)) found.add(line);
    }
    assert.deepEqual(
      [...found],
      [],
      `${entry}'s graph is not portable:\n${[...found].join("\n")}`,
    );
  }
});

/** The entry points that take no `Deno` (Node's APIs they may use). */
const DENO_FREE = [
  "store/kv.ts",
  "store/postgres.ts",
  "store/postgres_socket.ts",
  "store/kv_to_postgres.ts",
  "testing/store_contract.ts",
];

Deno.test("the module graphs of the stores' entry points and testing/store_contract.ts name no Deno: Node, Bun and Workers run them", async () => {
  for (const entry of DENO_FREE) {
    const files = localFiles(await graphOf(entry));
    assert.ok(files.includes(entry), `${entry}'s graph: ${files}`);
    assert.ok(!files.includes("main.ts"), `${entry}'s graph has main.ts`);
    const found: string[] = [];
    for (const file of files) {
      const source = await Deno.readTextFile(new URL(file, ROOT));
      found.push(
        ...nonPortableIn(file, source).filter((line) =>
          line.includes(": no-deno ")
        ),
      );
    }
    assert.deepEqual(
      found,
      [],
      `${entry}'s graph names Deno, which Node and Bun lack:\n${
        found.join("\n")
      }`,
    );
  }
});

Deno.test("store/postgres.ts, which a Worker runs, imports no node:* module: the socket of @relayer/poison/postgres-socket (node:net) stays out of the Worker's graph", async () => {
  const graph = await graphOf("store/postgres.ts");
  const files = localFiles(graph);
  for (
    const socket of ["store/postgres_socket.ts", "store/_postgres_socket.ts"]
  ) {
    assert.ok(
      !files.includes(socket),
      `store/postgres.ts's graph has ${socket}`,
    );
  }
  assert.deepEqual(await nodeImportsIn(graph), []);
});

Deno.test("the portable rules find Deno in code, and only there", () => {
  const source = [
    "// Deno.serve in a comment, and /** Deno.env in JSDoc */",
    'const s = "Deno.exit()"; const r = /^https?:\\/\\/Deno\\./;',
    "const env = Deno.env.get('X');",
    "const g = globalThis.Deno;",
    "type T = typeof Deno;",
  ].join("\n");
  assert.deepEqual(nonPortableIn("x.ts", source), [
    "x.ts:3: no-deno (the portable core names no Deno): const env = Deno.env.get('X');",
    "x.ts:4: no-deno (the portable core names no Deno): const g = globalThis.Deno;",
    "x.ts:5: no-deno (the portable core names no Deno): type T = typeof Deno;",
  ]);
});

Deno.test("the portable rules find URL.canParse and URL.parse in code, and not a URL's own parse or a comment", () => {
  const source = [
    "// URL.canParse(x) in a comment",
    "const ok = URL.canParse(text);",
    'const u = URL["parse"](text);',
    "const v = new URL(text); const p = parser.parse(text);",
  ].join("\n");
  assert.deepEqual(nonPortableIn("x.ts", source), [
    "x.ts:2: no-late-url (the portable core calls no URL.canParse or URL.parse, which workerd on older compatibility dates lacks): const ok = URL.canParse(text);",
    'x.ts:3: no-late-url (the portable core calls no URL.canParse or URL.parse, which workerd on older compatibility dates lacks): const u = URL["parse"](text);',
  ]);
});

Deno.test("the portable rules find Node's globals where they stand for the global, and not in keys, comments or strings", () => {
  const source = [
    "// process.env in a comment; Buffer.from in /** JSDoc */",
    "const s = \"process.env.X, require('fs'), new Buffer(1)\";",
    "const o = { process: 1, global: 2, require() {} };",
    "const p = job.process + job.Buffer + o.global;",
    "class C { process = 1; Buffer() {} }",
    "interface I { process: number; require(): void }",
    "const env = process.env.X;",
    "const b = Buffer.from('x');",
    "const g = globalThis.process;",
    "const h = globalThis['Buffer'];",
    "setImmediate(() => {});",
    "const f = require('fs');",
    "const d = __dirname + __filename;",
    "const w = global.x;",
    "const sh = { process };",
    "type T = typeof Buffer;",
  ].join("\n");
  const rule = "no-node-global (the portable core uses none of Node's globals)";
  assert.deepEqual(nonPortableIn("x.ts", source), [
    `x.ts:7: ${rule}: const env = process.env.X;`,
    `x.ts:8: ${rule}: const b = Buffer.from('x');`,
    `x.ts:9: ${rule}: const g = globalThis.process;`,
    `x.ts:10: ${rule}: const h = globalThis['Buffer'];`,
    `x.ts:11: ${rule}: setImmediate(() => {});`,
    `x.ts:12: ${rule}: const f = require('fs');`,
    `x.ts:13: ${rule}: const d = __dirname + __filename;`,
    `x.ts:13: ${rule}: const d = __dirname + __filename;`,
    `x.ts:14: ${rule}: const w = global.x;`,
    `x.ts:15: ${rule}: const sh = { process };`,
    `x.ts:16: ${rule}: type T = typeof Buffer;`,
  ]);
});

Deno.test("the portable rules find every import of a node:* module, and not one in a doc example", () => {
  const source = [
    "/**",
    " * ```ts",
    ' * import assert from "node:assert/strict";',
    " * ```",
    " */",
    'import process from "node:process";',
    'import type { Buffer } from "node:buffer";',
    'export * from "node:os";',
    'export { join } from "node:path";',
    'const fs = await import("node:fs");',
    "type E = typeof import('node:events');",
    'import { x } from "./node:not-a-builtin.ts";',
    'const s = "node:fs";',
  ].join("\n");
  const rule = "no-node-import (the portable core imports no node:* module)";
  assert.deepEqual(nonPortableIn("x.ts", source), [
    `x.ts:6: ${rule}: import process from "node:process";`,
    `x.ts:6: no-node-global (the portable core uses none of Node's globals): import process from "node:process";`,
    `x.ts:7: ${rule}: import type { Buffer } from "node:buffer";`,
    `x.ts:7: no-node-global (the portable core uses none of Node's globals): import type { Buffer } from "node:buffer";`,
    `x.ts:8: ${rule}: export * from "node:os";`,
    `x.ts:9: ${rule}: export { join } from "node:path";`,
    `x.ts:10: ${rule}: const fs = await import("node:fs");`,
    `x.ts:11: ${rule}: type E = typeof import('node:events');`,
  ]);
});
