/**
 * The package's files a Worker imports, and the example Workers (and so
 * the README's), compile with `tsc` in a Worker's own TypeScript project:
 * under `@cloudflare/workers-types` (pinned, installed into the cache
 * outside the repository, `tools/_worker_tsc.ts`), whose globals are not
 * Deno's, with `cloudflare:workers` typed by it and `env` as
 * `wrangler types` writes it for `examples/cloudflare/wrangler.toml`.
 * `deno task check` sees neither: Deno's globals, and `cloudflare:workers`
 * taken as `any`. Two copies of worker.ts, each with one wrong use of
 * `env` (a `workerConfig` that takes only text, a `JOBS.send()` taken as
 * answering nothing), must each fail with its own error, which `env` as
 * `any` would let through.
 *
 * Where the pinned packages cannot be installed (no Node or npm, no
 * registry), the suite is skipped with one loud line; under `CI=true` that
 * is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import { installTsc, workerTsc } from "../../tools/_worker_tsc.ts";
import { tscOrSkip } from "../_tsc_install.ts";

const ROOT = new URL("../../", import.meta.url);

const tsc = await tscOrSkip(installTsc, {
  types: "Cloudflare's",
  check: "the Worker type checks",
  pkg: "@cloudflare/workers-types",
});

/**
 * `Env` as `wrangler types` writes it for wrangler.toml: each `[vars]`
 * value as its literal type (text quoted, a number or boolean as itself),
 * each queue producer a `Queue`.
 */
async function wranglerEnv(): Promise<string> {
  const toml = await Deno.readTextFile(
    new URL("examples/cloudflare/wrangler.toml", ROOT),
  );
  const fields: string[] = [];
  let table = "";
  for (const raw of toml.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "").trim();
    const header = /^\[\[?([\w.]+)\]\]?$/.exec(line);
    if (header) {
      table = header[1]!;
      continue;
    }
    const pair = /^(\w+)\s*=\s*(.+)$/.exec(line);
    if (pair === null) continue;
    if (table === "vars") fields.push(`${pair[1]}: ${pair[2]};`);
    if (table === "queues.producers" && pair[1] === "binding") {
      fields.push(`${JSON.parse(pair[2]!)}: Queue;`);
    }
  }
  assert.ok(fields.some((field) => field.endsWith(": Queue;")), "no producer");
  return `declare namespace Cloudflare {\n  interface Env {\n    ${
    fields.join("\n    ")
  }\n  }\n}\ninterface Env extends Cloudflare.Env {}\n`;
}

/**
 * A file that takes an example's default export as Cloudflare's
 * `ExportedHandler<Env>`, as workerd calls it: its `fetch` with a
 * `Request`, its `queue` with a `MessageBatch`.
 */
function exportedHandler(example: string): string {
  return `import worker from "./examples/cloudflare/${example}";\nexport const handler: ExportedHandler<Env> = worker;\n`;
}

/** worker.ts with `from` replaced, and the 1-based line it is on. */
async function workerMutant(from: string, to: string, tail = "") {
  const source = await Deno.readTextFile(
    new URL("examples/cloudflare/worker.ts", ROOT),
  );
  const at = source.indexOf(from);
  assert.notEqual(at, -1, `worker.ts no longer has ${from}`);
  return {
    text: source.replace(from, to) + tail,
    line: source.slice(0, at).split("\n").length,
  };
}

Deno.test({
  name:
    "mod.ts, cloudflare/queue_handler.ts, webhook/app.ts and examples/cloudflare/worker.ts compile with tsc under Cloudflare's types, declarations checked (skipLibCheck: false), its default export an ExportedHandler<Env>; worker.ts with a workerConfig that takes only text, or with env.JOBS.send() taken as answering nothing, does not",
  ignore: tsc === null,
  fn: async () => {
    // env holds the JOBS queue beside the text settings: workerConfig must
    // take any value (a [vars] JSON value is a number or an object too).
    const narrow = await workerMutant(
      "workerConfig(env)",
      "textOnly({ ...env })",
      "declare function textOnly(\n  variables: Readonly<Record<string, string>>,\n): ReturnType<typeof workerConfig>;\n",
    );
    // send() answers the queue's metrics, not nothing: a type of the
    // package's that wants Promise<void> would refuse it.
    const voidSend = await workerMutant(
      "enqueue: (job) => env.JOBS.send(job),",
      "enqueue: (job): Promise<void> => env.JOBS.send(job),",
    );
    // One run for all (tsc's start and the declarations' check dominate).
    const errors = await workerTsc(tsc!, {
      files: [
        "mod.ts",
        "cloudflare/queue_handler.ts",
        "webhook/app.ts",
        "examples/cloudflare/worker.ts",
        "worker_env.d.ts",
        "handler.ts",
        "narrow.ts",
        "void_send.ts",
      ],
      extra: {
        "worker_env.d.ts": await wranglerEnv(),
        "handler.ts": exportedHandler("worker.ts"),
        "narrow.ts": narrow.text,
        "void_send.ts": voidSend.text,
      },
    });
    const mutants = /^(narrow|void_send)\.ts\(/;
    assert.deepEqual(errors.filter((error) => !mutants.test(error)), []);
    const caught = errors.filter((error) => mutants.test(error));
    assert.equal(caught.length, 2, caught.join("\n"));
    assert.match(
      caught[0]!,
      new RegExp(
        `^narrow\\.ts\\(${narrow.line},\\d+\\): error TS2345: [^]*'JOBS'[^]*'Queue<unknown>' is not assignable to type 'string'`,
      ),
    );
    assert.match(
      caught[1]!,
      new RegExp(
        `^void_send\\.ts\\(${voidSend.line},\\d+\\): error TS2322: Type 'Promise<QueueSendResponse>' is not assignable to type 'Promise<void>'`,
      ),
    );
  },
});

Deno.test({
  name:
    "store/postgres.ts compiles with tsc under Cloudflare's types alone, and with examples/cloudflare/postgres_worker.ts, its default export an ExportedHandler<Env>, beside Node's",
  ignore: tsc === null,
  fn: async () => {
    // postgres.js's declarations name Node's Buffer, and Node's types
    // declare Cloudflare's globals again: both need skipLibCheck, which
    // still checks every .ts file. The Worker on PostgreSQL runs with
    // nodejs_compat, whose project has Node's types (node:async_hooks).
    const [alone, withNode] = await Promise.all([
      workerTsc(tsc!, { files: ["store/postgres.ts"], skipLibCheck: true }),
      workerTsc(tsc!, {
        files: [
          "store/postgres.ts",
          "examples/cloudflare/postgres_worker.ts",
          "worker_env.d.ts",
          "handler.ts",
        ],
        node: true,
        skipLibCheck: true,
        extra: {
          "worker_env.d.ts": await wranglerEnv(),
          "handler.ts": exportedHandler("postgres_worker.ts"),
        },
      }),
    ]);
    assert.deepEqual(alone, [], "under @cloudflare/workers-types");
    assert.deepEqual(withNode, [], "beside @types/node");
  },
});
