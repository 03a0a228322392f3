/**
 * The parts of `deno task wrangler-check` that need no Wrangler: its schema
 * reader, and what it takes from the docs and the example config.
 */
import assert from "node:assert/strict";
import { schemaErrors } from "../../tools/_json_schema.ts";
import { workerConfig } from "../../webhook/_settings.ts";
import {
  devVars,
  docsHyperdriveTable,
  docsPackageJson,
  npmWarningVerdict,
  postgresConfig,
  readyUrl,
  refusalUnseen,
  wranglerProblems,
} from "../../tools/wrangler_check.ts";

const ROOT = new URL("../../", import.meta.url);
const read = (path: string) => Deno.readTextFile(new URL(path, ROOT));

/** The shape of Wrangler 4.116.0's `config-schema.json`, cut down to queues. */
const schema = {
  $ref: "#/definitions/RawConfig",
  definitions: {
    RawConfig: {
      type: "object",
      properties: {
        name: { type: "string" },
        compatibility_flags: { type: "array", items: { type: "string" } },
        legacy_env: { type: "boolean", deprecated: "use environments" },
        queues: { $ref: "#/definitions/Queues" },
      },
      additionalProperties: false,
    },
    Queues: {
      type: "object",
      properties: {
        consumers: {
          type: "array",
          items: {
            type: "object",
            properties: {
              queue: { type: "string" },
              type: { type: "string", const: "worker" },
              max_retries: { type: "number" },
              max_concurrency: { type: ["number", "null"] },
              retry_delay: { type: "number" },
            },
            required: ["queue"],
            additionalProperties: false,
          },
        },
      },
      additionalProperties: false,
    },
  },
};

Deno.test("schemaErrors passes a config that conforms", () => {
  assert.deepEqual(
    schemaErrors(schema, {
      name: "relayer",
      compatibility_flags: ["nodejs_compat"],
      queues: {
        consumers: [{ queue: "jobs", max_retries: 9, max_concurrency: null }],
      },
    }),
    [],
  );
});

Deno.test("schemaErrors names each departure by its path", () => {
  assert.deepEqual(
    schemaErrors(schema, {
      compatibility_flags: "nodejs_compat",
      legacy_env: true,
      queues: {
        consumers: [
          { queue: "jobs", retry_delay_secs: 120 },
          { max_retries: "9", type: "http" },
        ],
        producer: [],
      },
    }),
    [
      "compatibility_flags: a string, where the schema wants array",
      "legacy_env: deprecated (use environments)",
      "queues.consumers[0].retry_delay_secs: not a key the schema has",
      "queues.consumers[1]: lacks the required key queue",
      "queues.consumers[1].max_retries: a string, where the schema wants number",
      'queues.consumers[1].type: must be "worker"',
      "queues.producer: not a key the schema has",
    ],
  );
});

Deno.test("schemaErrors tries each anyOf form", () => {
  const either = {
    anyOf: [{ type: "string" }, {
      type: "object",
      properties: { pattern: { type: "string" } },
      additionalProperties: false,
    }],
  };
  assert.deepEqual(schemaErrors(either, "example.com/*"), []);
  assert.deepEqual(schemaErrors(either, { pattern: "example.com/*" }), []);
  assert.deepEqual(schemaErrors(either, { zone: "x" }), [
    "(top level): fits none of the forms the schema allows",
  ]);
});

Deno.test("schemaErrors refuses a $ref the schema does not define", () => {
  assert.throws(
    () => schemaErrors({ $ref: "#/definitions/Missing" }, {}),
    /refers to #\/definitions\/Missing, which it does not define/,
  );
});

Deno.test("the tarball's package.json is docs/api.md's, naming files the repository has", async () => {
  const manifest = docsPackageJson(await read("docs/api.md"));
  assert.equal(manifest.name, "@relayer/poison");
  for (const file of manifest.files as string[]) {
    await Deno.stat(new URL(file, ROOT)); // throws where it is missing
  }
});

Deno.test("the PostgreSQL Worker's config is wrangler.toml with step 3's main, flag and Hyperdrive table", async () => {
  const table = docsHyperdriveTable(await read("docs/queues.md"));
  assert.match(table, /^\[\[hyperdrive\]\]\nbinding = "HYPERDRIVE"\nid = /);
  const config = postgresConfig(
    await read("examples/cloudflare/wrangler.toml"),
    table,
  );
  assert.match(
    config,
    /^main = "postgres_worker\.ts"\ncompatibility_flags = \["nodejs_compat"\]$/m,
  );
  assert.doesNotMatch(config, /^main = "worker\.ts"$/m);
  assert.ok(config.endsWith(table));
  assert.throws(() => postgresConfig('main = "src/index.ts"\n', table), {
    message: /no main = "worker\.ts" line/,
  });
});

Deno.test("wranglerProblems keeps Wrangler's warnings and errors, colors removed", () => {
  const out = [
    "\x1b[33m▲ \x1b[43;33m[\x1b[43;30mWARNING\x1b[43;33m]\x1b[0m \x1b[1mProcessing wrangler.toml configuration:\x1b[0m",
    "",
    '    - Unexpected fields found in queues.consumers[0] field: "retry_delay_secs"',
    "",
    "Total Upload: 460.79 KiB / gzip: 113.86 KiB",
    "\x1b[31m✘ \x1b[41;31m[\x1b[41;97mERROR\x1b[41;31m]\x1b[0m \x1b[1mWhen developing locally, you should use a local Postgres connection string\x1b[0m",
  ].join("\n");
  assert.deepEqual(wranglerProblems(out), [
    '▲ [WARNING] Processing wrangler.toml configuration: - Unexpected fields found in queues.consumers[0] field: "retry_delay_secs"',
    "✘ [ERROR] When developing locally, you should use a local Postgres connection string",
  ]);
});

Deno.test("docsHyperdriveTable refuses docs whose step 3 lost its [[hyperdrive]] table, rather than taking another ```toml block", () => {
  const fence = "`".repeat(3);
  const docs =
    `1. Bind the queue:\n\n   ${fence}toml\n   [[queues.producers]]\n   queue = "relayer-jobs"\n   ${fence}\n\n3. Point the Worker at PostgreSQL.\n`;
  assert.throws(() => docsHyperdriveTable(docs), {
    message: /no \[\[hyperdrive\]\] table/,
  });
});

Deno.test("the Worker takes wrangler.toml's [vars] with the .dev.vars the walk writes, as wrangler dev gives them: its secrets are not the docs' local-run ones, which a PUBLIC_URL off this machine refuses", async () => {
  const toml = await read("examples/cloudflare/wrangler.toml");
  const section = toml.slice(toml.indexOf("\n[vars]\n") + 8);
  const vars: Record<string, string> = {};
  for (const line of section.slice(0, section.indexOf("\n[")).split("\n")) {
    const pair = /^(\w+) = "([^"]*)"/.exec(line);
    if (pair) vars[pair[1]!] = pair[2]!;
  }
  assert.match(vars.PUBLIC_URL ?? "", /^https:\/\//);
  for (const line of devVars("http://127.0.0.1:9000").split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) vars[line.slice(0, at)] = line.slice(at + 1);
  }
  assert.equal(workerConfig(vars).config.webhookSecret, vars.WEBHOOK_SECRET);
});

Deno.test("readyUrl reads the port wrangler dev started on port 0 listens on from its ready line, colored or not, and none before it", () => {
  // Wrangler 4.116.0's output, piped, for `wrangler dev --local --ip
  // 127.0.0.1 --port 0 --inspector-port 0`.
  const piped = [
    "",
    " ⛅️ wrangler 4.116.0",
    "────────────────────",
    "⎔ Starting local server...",
    "[wrangler:info] Ready on http://127.0.0.1:41307",
    "",
  ].join("\n");
  assert.equal(readyUrl(piped), "http://127.0.0.1:41307");
  // Under FORCE_COLOR: the URL in green.
  assert.equal(
    readyUrl(
      "[wrangler:info] Ready on \x1b[32mhttp://127.0.0.1:41307\x1b[39m\n",
    ),
    "http://127.0.0.1:41307",
  );
  assert.equal(readyUrl(piped.split("[wrangler:info]")[0]!), undefined);
  // The origin alone, as the check adds each route's path to it; https
  // where Wrangler serves it (--local-protocol https).
  assert.equal(
    readyUrl("[wrangler:info] Ready on http://127.0.0.1:41307/\n"),
    "http://127.0.0.1:41307",
  );
  assert.equal(
    readyUrl("[wrangler:info] Ready on https://127.0.0.1:41307\n"),
    "https://127.0.0.1:41307",
  );
});

Deno.test("refusalUnseen holds a refusal only where the doc still quotes it, the run failed and said it", async () => {
  const text = await read("docs/api.md");
  const refusal = {
    doc: "docs/api.md",
    text,
    quote: "ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING",
  };
  const said =
    'Error [ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING]: Stripping types is currently unsupported for files under node_modules, for "file:///p/node_modules/@relayer/poison/mod.ts"';
  assert.equal(refusalUnseen(refusal, { code: 1, out: said }), undefined);
  assert.match(
    refusalUnseen(refusal, { code: 0, out: said })!,
    /^it ran \(exit 0\)/,
  );
  assert.match(
    refusalUnseen(refusal, {
      code: 1,
      out:
        'TypeError [ERR_UNKNOWN_FILE_EXTENSION]: Unknown file extension ".ts"',
    })!,
    /^it was refused in other words \(TypeError \[ERR_UNKNOWN_FILE_EXTENSION\]/,
  );
  assert.match(
    refusalUnseen({ ...refusal, text: "Node refuses it." }, {
      code: 1,
      out: said,
    })!,
    /^docs\/api\.md no longer quotes/,
  );
  // A quote the doc wraps across lines is still its quote.
  const wrapped = {
    doc: "docs/queues.md",
    text: "it says `Wrangler requires at least\n   Node.js v22.0.0`",
    quote: "Wrangler requires at least Node.js v22.0.0",
  };
  assert.equal(
    refusalUnseen(wrapped, {
      code: 1,
      out:
        "Wrangler requires at least Node.js v22.0.0. You are using v20.20.2.",
    }),
    undefined,
  );
});

Deno.test("npmWarningVerdict holds docs/api.md's esbuild warning on the npm it names, fails it where that npm did not warn, and skips another npm", async () => {
  const docs = await read("docs/api.md");
  const warned = [
    "added 5 packages in 6s",
    "npm warn install-scripts 1 package has install scripts not yet covered by allowScripts:",
    "npm warn install-scripts   esbuild@0.28.2 (postinstall: node install.js)",
  ].join("\n");
  assert.deepEqual(npmWarningVerdict(docs, "11.19.1\n", warned), {
    held: true,
  });
  const silent = npmWarningVerdict(docs, "11.19.1\n", "added 5 packages in 6s");
  assert.ok("wrong" in silent, JSON.stringify(silent));
  assert.match(silent.wrong, /npm 11\.19\.1 installed tsx without the warning/);
  const other = npmWarningVerdict(docs, "10.9.2\n", "added 5 packages in 6s");
  assert.deepEqual(other, {
    skipped: "npm 10.9.2 is not the 11.19 docs/api.md names",
  });
  assert.ok("wrong" in npmWarningVerdict("tsx runs.", "11.19.1", warned));
});
