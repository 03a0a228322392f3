/**
 * The service on PostgreSQL that docs/api.md ("From Bun") gives a Bun
 * user, bundled with `deno bundle --platform node` and run by the pinned
 * Bun (`tools/bun_check.ts`'s, installed into the cache outside the
 * repository), stops a start it cannot make with one line that says what
 * was wrong, as `main.ts` and the Node service do: a setting `loadConfig`
 * refuses, a database nothing answers on, and a port another process
 * holds. No stack trace, and the password of `DATABASE_URL` nowhere. It
 * says what it serves in two lines, listens on 127.0.0.1 only and exits
 * 0 on SIGTERM. The checks are
 * `_docs_service.ts`'s, shared with the Node service.
 *
 * Where Bun cannot be installed (no npm, no registry), the suite is
 * skipped with one loud line; under `CI=true` that is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import { cacheRoot, npmInstall } from "../tools/_npm_cache.ts";
import { BUN_VERSION } from "../tools/bun_check.ts";
import { apiBlocks, docsServiceTests } from "./_docs_service.ts";

/** The pinned Bun, or `null` (with a line saying so) where it cannot be installed outside CI. */
async function pinnedBun(): Promise<string | null> {
  try {
    const cache = await npmInstall("bun", BUN_VERSION);
    return `${cache}/node_modules/.bin/bun`;
  } catch (error) {
    const why = (error as Error).message;
    if (Deno.env.get("CI") === "true") {
      throw new Error(
        `CI=true and Bun ${BUN_VERSION} cannot be installed (${why}); the Bun service's check must run in CI`,
      );
    }
    // deno-lint-ignore no-console -- the skip must show in the run's output
    console.error(
      `\n!!! SKIPPING docs/api.md's Bun service under Bun ${BUN_VERSION}: ${why} !!!\n`,
    );
    return null;
  }
}

const BUN = await pinnedBun();

docsServiceTests({
  runtime: "Bun",
  ignore: BUN === null,
  /** The one `ts` block of docs/api.md's "From Bun": the service. */
  service: async () => {
    const blocks = await apiBlocks("From Bun");
    assert.equal(blocks.length, 1, "From Bun has one ts block");
    return blocks[0]!;
  },
  command: (dir, env) =>
    new Deno.Command(BUN!, {
      args: ["run", "service.mjs"],
      cwd: dir,
      env: {
        ...env,
        PATH: Deno.env.get("PATH") ?? "",
        // Bun's own caches stay out of the repository, as in bun-check.
        BUN_INSTALL_CACHE_DIR: `${cacheRoot()}/bun-install-cache`,
        BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
        NO_COLOR: "1",
      },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }),
  inUse: /EADDRINUSE|in use/,
  localRun: "bun service.ts",
});
