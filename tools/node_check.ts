/**
 * Proves the module runs on Node 20, not only on Deno: bundles `mod.ts`
 * with `deno bundle` and runs a smoke test of the policy and the relayer
 * with `node --test`; then runs the store contract suite on Node against
 * `KvStore` over `openKv(":memory:")` from the npm package `@deno/kv`.
 * (The webhook under `@hono/node-server` is `tests/node/webhook_node_test.ts`,
 * part of `deno task test`.)
 *
 * `deno task node-check`; exits non-zero if anything fails or Node is missing.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { nodeVersion } from "../tests/node/_node.ts";
import { bundle, run } from "./_npm_cache.ts";

const ROOT = new URL("..", import.meta.url).pathname;
/** Runs `node --test` and prints its summary; returns whether it passed. */
async function nodeTest(
  title: string,
  file: string,
  cwd: string,
  env: Record<string, string> = {},
): Promise<boolean> {
  const { code, out } = await run("node", [
    "--test",
    "--test-reporter=spec",
    file,
  ], { cwd, env });
  const summary = out.split("\n").filter((line) =>
    /^ℹ (tests|pass|fail|skipped) /.test(line)
  ).map((l) => l.slice(2));
  console.log(`${title}: ${summary.join(", ")}`);
  if (code !== 0) console.log(out);
  return code === 0;
}

if (import.meta.main) {
  const version = await nodeVersion();
  if (version === null) {
    console.error(
      "node-check: no Node.js on PATH (Deno's own `node` shim does not count)",
    );
    Deno.exit(1);
  }
  console.log(`node-check: Node ${version}`);
  const dir = await Deno.makeTempDir({ prefix: "relayer_node_check_" });
  let ok = true;
  try {
    await bundle("mod.ts", `${dir}/relayer.mjs`, { platform: "node" });
    ok = await nodeTest(
      "mod.ts on Node (node --test)",
      `${ROOT}tests/node/smoke_node.mjs`,
      ROOT,
      {
        RELAYER_BUNDLE: `${dir}/relayer.mjs`,
      },
    ) && ok;

    await Deno.writeTextFile(
      `${dir}/package.json`,
      JSON.stringify({ private: true, type: "module" }),
    );
    const install = await run("npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--silent",
      "@deno/kv@0.14.0",
    ], { cwd: dir });
    if (install.code !== 0) {
      throw new Error(`npm install @deno/kv failed:\n${install.out}`);
    }
    // @deno/kv ships a native addon per platform: npm installs it for this
    // machine, and the bundle imports it from there.
    await bundle("tests/node/kv_contract_node.ts", `${dir}/kv_contract.mjs`, {
      platform: "node",
      external: ["@deno/kv"],
    });
    ok = await nodeTest(
      "KvStore contract on Node over @deno/kv (node --test)",
      `${dir}/kv_contract.mjs`,
      dir,
    ) && ok;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  if (!ok) Deno.exit(1);
}
