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
import { installTsc, nodeProject, workerTsc } from "../../tools/_worker_tsc.ts";
import { tscOrSkip } from "../_tsc_install.ts";

const tsc = await tscOrSkip(installTsc, {
  types: "Node's",
  check: "the Node type check",
  pkg: "@types/node",
});

Deno.test({
  name:
    "mod.ts, webhook/app.ts, store/kv.ts, store/postgres.ts, store/postgres_socket.ts, testing/store_contract.ts and docs/api.md's two Node services compile with tsc under @types/node, with the options docs/api.md#from-node gives tsc and the stricter ones it says they compile under",
  ignore: tsc === null,
  fn: async () => {
    // The files, and the options docs/api.md#from-node says they compile
    // under, read from that section.
    const { lane } = await nodeProject();
    const errors = await workerTsc(tsc!, lane);
    assert.deepEqual(errors, []);
  },
});
