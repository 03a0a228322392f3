/**
 * The package's files a Worker imports, and the example Workers (and so
 * the README's), compile with `tsc` in a Worker's own TypeScript project:
 * under `@cloudflare/workers-types` (pinned, installed into the cache
 * outside the repository, `tools/_worker_tsc.ts`), whose globals are not
 * Deno's, with `cloudflare:workers` typed by it and `env` as
 * `wrangler types` writes it for `examples/cloudflare/wrangler.toml`.
 * `deno task check` sees neither: Deno's globals, and `cloudflare:workers`
 * taken as `any`.
 *
 * Where the pinned packages cannot be installed (no Node or npm, no
 * registry), the suite is skipped with one loud line; under `CI=true` that
 * is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  installTsc,
  type TscInstall,
  workerTsc,
} from "../../tools/_worker_tsc.ts";

const ROOT = new URL("../../", import.meta.url);

async function install(): Promise<TscInstall | null> {
  try {
    return await installTsc();
  } catch (error) {
    const why = (error as Error).message;
    if (Deno.env.get("CI") === "true") {
      throw new Error(
        `CI=true and tsc under Cloudflare's types cannot be installed (${why}); the Worker type checks must run in CI`,
      );
    }
    // deno-lint-ignore no-console -- the skip must show in the run's output
    console.error(
      `\n!!! SKIPPING the Worker type checks (tsc under @cloudflare/workers-types): ${why} !!!\n`,
    );
    return null;
  }
}

const tsc = await install();

Deno.test({
  name:
    "mod.ts, cloudflare/queue_handler.ts and webhook/app.ts compile with tsc under Cloudflare's types, declarations checked (skipLibCheck: false)",
  ignore: tsc === null,
  fn: async () => {
    assert.deepEqual(
      await workerTsc(tsc!, {
        files: ["mod.ts", "cloudflare/queue_handler.ts", "webhook/app.ts"],
      }),
      [],
    );
  },
});

Deno.test({
  name:
    "store/postgres.ts compiles with tsc under Cloudflare's types alone, and beside Node's",
  ignore: tsc === null,
  fn: async () => {
    // postgres.js's declarations name Node's Buffer, and Node's types
    // declare Cloudflare's globals again: both need skipLibCheck, which
    // still checks every .ts file.
    const files = ["store/postgres.ts"];
    const [alone, withNode] = await Promise.all([
      workerTsc(tsc!, { files, skipLibCheck: true }),
      workerTsc(tsc!, { files, skipLibCheck: true, node: true }),
    ]);
    assert.deepEqual(alone, [], "under @cloudflare/workers-types");
    assert.deepEqual(withNode, [], "beside @types/node");
  },
});

Deno.test("examples/cloudflare/worker.ts and postgres_worker.ts type-check against Cloudflare's types of env and Queue.send", async () => {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", ROOT)),
  ) as {
    name: string;
    imports: Record<string, string>;
    exports: Record<string, string>;
  };
  // An import map replaces deno.json's imports: it carries them, the
  // package's exports by name, and cloudflare:workers typed.
  const imports: Record<string, string> = { ...config.imports };
  for (const [path, file] of Object.entries(config.exports)) {
    imports[`${config.name}${path.slice(1)}`] = new URL(file, ROOT).href;
  }
  imports["cloudflare:workers"] =
    new URL("_workers_env.ts", import.meta.url).href;
  const dir = await Deno.makeTempDir({ prefix: "relayer_worker_types_" });
  try {
    const map = `${dir}/import_map.json`;
    await Deno.writeTextFile(map, JSON.stringify({ imports }));
    const { code, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "check",
        "--quiet",
        "--import-map",
        map,
        "examples/cloudflare/worker.ts",
        "examples/cloudflare/postgres_worker.ts",
      ],
      cwd: ROOT,
      stdout: "null",
      stderr: "piped",
    }).output();
    const errors = new TextDecoder().decode(stderr)
      // deno-lint-ignore no-control-regex
      .replace(/\x1b\[[0-9;]*m/g, "")
      .split("\n")
      .filter((line) => /TS\d+/.test(line));
    assert.deepEqual(errors, [], "deno check");
    assert.equal(code, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
