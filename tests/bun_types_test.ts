/**
 * The package's entry points a Bun project imports, and the service of
 * docs/api.md#from-bun, compile with `tsc` as a Bun project compiles them:
 * under `@types/bun` (pinned, installed into the cache outside the
 * repository, `tools/_worker_tsc.ts`), whose globals are not Deno's (its
 * `ReadableStreamDefaultReader.read()` answers a
 * `ReadableStreamDefaultReadResult`, not the DOM's
 * `ReadableStreamReadResult`), with the compiler options `bun init`
 * writes and the DOM's lib the docs ask for; by TypeScript 6.0.3, and by
 * 7.0.2, which `bun init` on Bun 1.4.5 installs (`^7`), with the service's
 * `declare const Bun` kept and left out, as the docs say. `deno task check`
 * sees only Deno's globals; bun-check runs bundles, whose types no one
 * checks.
 *
 * Where the pinned packages cannot be installed (no Node or npm, no
 * registry), the suite is skipped with one loud line; under `CI=true` that
 * is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BUN_INIT_TYPESCRIPT_VERSION,
  installBunTsc,
  type TscLane,
  workerTsc,
} from "../tools/_worker_tsc.ts";
import { tscOrSkip } from "./_tsc_install.ts";

const ROOT = new URL("../", import.meta.url);

const tsc = await tscOrSkip(installBunTsc, {
  types: "Bun's",
  check: "the Bun type check",
  pkg: "@types/bun",
});

const tsc7 = await tscOrSkip(
  () => installBunTsc(BUN_INIT_TYPESCRIPT_VERSION),
  {
    types: `Bun's (TypeScript ${BUN_INIT_TYPESCRIPT_VERSION})`,
    check: `the Bun type check under TypeScript ${BUN_INIT_TYPESCRIPT_VERSION}`,
    pkg: "@types/bun",
  },
);

/** The files a Bun project compiles, `service.ts` the docs' service. */
const FILES = [
  "mod.ts",
  "webhook/app.ts",
  "store/postgres.ts",
  "store/postgres_socket.ts",
  "testing/store_contract.ts",
  "service.ts",
];

/** A Bun lane of `tsc` with `service` as `service.ts`. */
function bunLane(service: string): TscLane {
  return {
    bun: true,
    // bun init's tsconfig skips them (postgres.js's name Node's Buffer,
    // bun-types and the DOM's lib declare some globals twice).
    skipLibCheck: true,
    files: FILES,
    extra: { "service.ts": service },
  };
}

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
    const errors = await workerTsc(tsc!, bunLane(await bunService()));
    assert.deepEqual(errors, []);
  },
});

Deno.test({
  name:
    `the same compile with TypeScript ${BUN_INIT_TYPESCRIPT_VERSION}, which bun init on Bun 1.4.5 installs, with the service's declare const Bun kept and left out`,
  ignore: tsc7 === null,
  fn: async () => {
    const service = await bunService();
    // The docs' own comment: "@types/bun declares it: leave this out
    // where it is installed".
    const declared = /^declare const Bun: \{ \/\/ @types\/bun[^]*?^\};\n/m;
    assert.match(service, declared);
    for (const text of [service, service.replace(declared, "")]) {
      assert.deepEqual(await workerTsc(tsc7!, bunLane(text)), []);
    }
  },
});
