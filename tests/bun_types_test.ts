/**
 * The package's entry points a Bun project imports, and the service of
 * docs/api.md#from-bun, compile with `tsc` as a Bun project compiles them:
 * under `@types/bun` (pinned, installed into the cache outside the
 * repository, `tools/_worker_tsc.ts`), whose globals are not Deno's (its
 * `ReadableStreamDefaultReader.read()` answers a
 * `ReadableStreamDefaultReadResult`, not the DOM's
 * `ReadableStreamReadResult`), with the compiler options `bun init`
 * writes and the DOM's lib the docs ask for. `deno task check` sees only
 * Deno's globals; bun-check runs bundles, whose types no one checks.
 *
 * Where the pinned packages cannot be installed (no Node or npm, no
 * registry), the suite is skipped with one loud line; under `CI=true` that
 * is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import { installBunTsc, workerTsc } from "../tools/_worker_tsc.ts";
import { tscOrSkip } from "./_tsc_install.ts";

const ROOT = new URL("../", import.meta.url);

const tsc = await tscOrSkip(installBunTsc, {
  types: "Bun's",
  check: "the Bun type check",
  pkg: "@types/bun",
});

/** The one `ts` block of docs/api.md's "From Bun" section: the service. */
async function bunService(): Promise<string> {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const section = api.slice(api.indexOf("\n## From Bun\n"));
  const blocks = [...section.matchAll(/```ts[^\n]*\n([\s\S]*?)```/g)];
  assert.equal(blocks.length, 1, "From Bun has one ts block");
  return blocks[0]![1]!;
}

Deno.test({
  name:
    "mod.ts, webhook/app.ts, store/postgres.ts, store/postgres_socket.ts, testing/store_contract.ts and docs/api.md's Bun service compile with tsc under @types/bun, with bun init's compiler options and the DOM's lib",
  ignore: tsc === null,
  fn: async () => {
    const errors = await workerTsc(tsc!, {
      bun: true,
      // bun init's tsconfig skips them (postgres.js's name Node's Buffer,
      // bun-types and the DOM's lib declare some globals twice).
      skipLibCheck: true,
      files: [
        "mod.ts",
        "webhook/app.ts",
        "store/postgres.ts",
        "store/postgres_socket.ts",
        "testing/store_contract.ts",
        "service.ts",
      ],
      extra: { "service.ts": await bunService() },
    });
    assert.deepEqual(errors, []);
  },
});
