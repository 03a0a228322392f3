/**
 * The example Workers (and so the README's) type-check in a Worker's own
 * TypeScript project, where `cloudflare:workers` is typed: Deno takes the
 * import it cannot resolve as `any`, so `deno task check` never saw `env`'s
 * bindings. `_workers_env.ts` stands in for Cloudflare's types: a queue
 * binding beside the settings in `env`, a `[vars]` number, and a
 * `send()` that answers a `QueueSendResponse`.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

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
