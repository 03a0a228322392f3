/**
 * `deno task bun-check` installs the pinned Bun into the cache, then checks
 * that it starts and is the pinned version before it runs anything, as
 * node-check does with its pinned Nodes: a cached Bun that answers another
 * version, or does not start, stops it with one line saying which and what
 * to do.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BUN_VERSION } from "../../tools/bun_check.ts";
import { cachedStandIn, runCheck } from "./_runtime_tool.ts";

/**
 * Runs bun-check as its task does, with a cache that holds the pinned Bun's
 * tree as `npm ci` leaves it, from the committed lock, but whose binary runs
 * `script` for `--version` (and fails on anything else).
 */
async function bunCheckWithCachedBun(script: string) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_bun_pin_" });
  try {
    const cache = `${dir}/cache/bun-${BUN_VERSION}`;
    await cachedStandIn(cache, "bun", BUN_VERSION, ".bin/bun", script);
    const ran = await runCheck("bun_check.ts", {
      RELAYER_CACHE: `${dir}/cache`,
    });
    return { ...ran, cache };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "bun-check refuses a cached Bun that is not the pinned version, saying which and what to do",
  ignore: Deno.build.os === "windows", // the stand-in is a shell script
  fn: async () => {
    const { code, stdout, stderr, cache } = await bunCheckWithCachedBun(
      "echo 1.1.0; exit 0",
    );
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `bun-check: the cached Bun in ${cache} answers "1.1.0", not ${BUN_VERSION}: delete ${cache} and run again\n`,
    );
  },
});

Deno.test({
  name:
    "bun-check says when the cached Bun does not start on this machine, with its error",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    const { code, stdout, stderr, cache } = await bunCheckWithCachedBun(
      "echo 'bun: cannot execute binary file: Exec format error' >&2; exit 126",
    );
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `bun-check: the cached Bun ${BUN_VERSION} does not start here (bun: cannot execute binary file: Exec format error): run bun-check where Bun's official Linux binaries run, or delete ${cache} and run again if it is incomplete\n`,
    );
  },
});
