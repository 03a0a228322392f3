/**
 * The package's entry points a Node project imports, and both services of
 * docs/api.md#from-node, compile with `tsc` as a Node project that
 * installed the package's tarball compiles them: under `@types/node`
 * (pinned, installed into the cache outside the repository,
 * `tools/_worker_tsc.ts`) alone, with the compiler options that section
 * gives `tsc`, the package's strict ones and the stricter ones it names
 * (`noUnusedLocals`, `noUnusedParameters`, `verbatimModuleSyntax`,
 * `isolatedModules`). `deno task check` sees only
 * Deno's globals; node-check runs bundles, whose types no one checks.
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
  types: "Node's",
  check: "the Node type check",
  pkg: "@types/node",
});

/**
 * The `ts` blocks of docs/api.md's "From Node" section, its two services,
 * and the compiler options it says the sources compile under ("they
 * compile under `strict` with `…`, … but not under …"), each set.
 */
async function nodeServices(): Promise<
  { services: string[]; strictest: Record<string, true> }
> {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const start = api.indexOf("\n## From Node\n");
  const section = api.slice(start, api.indexOf("\n## ", start + 1));
  const blocks = [...section.matchAll(/```ts[^\n]*\n([\s\S]*?)```/g)];
  assert.equal(blocks.length, 2, "From Node has two ts blocks");
  const claim = /they compile under ([\s\S]*?), but not under/.exec(section);
  assert.ok(claim, "From Node says which options the sources compile under");
  const strictest = Object.fromEntries(
    [...claim[1]!.matchAll(/`(\w+)`/g)].map((m) => [m[1]!, true] as const),
  );
  assert.ok(Object.keys(strictest).length >= 8, claim[1]);
  return { services: blocks.map((block) => block[1]!), strictest };
}

Deno.test({
  name:
    "mod.ts, webhook/app.ts, store/kv.ts, store/postgres.ts, store/postgres_socket.ts, testing/store_contract.ts and docs/api.md's two Node services compile with tsc under @types/node, with the options docs/api.md#from-node gives tsc and the stricter ones it says they compile under",
  ignore: tsc === null,
  fn: async () => {
    const { services: [kvApp, postgresService], strictest } =
      await nodeServices();
    const errors = await workerTsc(tsc!, {
      nodeProject: true,
      // @types/node 20's declarations and the DOM's lib declare some
      // globals twice; Node projects skip them, as the section's do.
      skipLibCheck: true,
      files: [
        "mod.ts",
        "webhook/app.ts",
        "store/kv.ts",
        "store/postgres.ts",
        "store/postgres_socket.ts",
        "testing/store_contract.ts",
        "kv_app.ts",
        "postgres_service.ts",
      ],
      extra: { "kv_app.ts": kvApp!, "postgres_service.ts": postgresService! },
      // Those docs/api.md#from-node says they compile under, beside the
      // package's own (deno.json's strict ones).
      compilerOptions: strictest,
      // @hono/node-server and @deno/kv, which the services import.
      npmFrom: [
        "tests/node/webhook_node_entry.ts",
        "tests/node/kv_contract_node.ts",
      ],
    });
    assert.deepEqual(errors, []);
  },
});
