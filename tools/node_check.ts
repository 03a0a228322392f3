/**
 * Proves the module runs on Node 20, not only on Deno, and refuses to run
 * on any other Node: bundles `mod.ts` with `deno bundle` and runs a smoke
 * test of the policy and the relayer with `node --test`; then every
 * delivery route of the webhook (signed QStash and generic deliveries,
 * QStash's failure callback, a Pub/Sub push, a push from Pub/Sub's
 * dead-letter topic), `HttpSender` and the QStash publisher, served by
 * `@hono/node-server` against a `node:http` stand-in for the signer,
 * Google's keys and QStash's API (`tests/node/webhook_routes_node.ts`);
 * then the store contract suite on Node against `KvStore` over
 * `openKv(":memory:")` and over `openKv` on a SQLite file (kept across a
 * reopen) from the npm package `@deno/kv` (the version
 * `deno.json` pins, installed into the cache outside the repository), and
 * against `PostgresStore` over the npm client `postgres` (bundled in) on a
 * real PostgreSQL server it starts (Debian's `postgresql` binaries; where
 * they are missing it says so, and under `CI=true` it fails).
 *
 * `deno task node-check`; exits non-zero if anything fails or Node is missing.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError, ROOT, runMain } from "./_check.ts";
import { bundle, npmInstall, requireNode, run } from "./_npm_cache.ts";
import { NODE_MAJOR } from "../support/node_version.ts";
import { withPostgres } from "./_postgres_check.ts";

/**
 * Runs `node --test` and prints its summary.
 *
 * @param title What the summary line starts with.
 * @param file The test file.
 * @param cwd Where Node runs.
 * @param env Environment variables added to this process's.
 * @returns Whether it passed.
 * @throws {CheckError} If it runs past its deadline.
 */
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
  ], { cwd, env, label: `node --test ${file.split("/").pop()}` });
  const summary = out.split("\n").filter((line) =>
    /^ℹ (tests|pass|fail|skipped) /.test(line)
  ).map((l) => l.slice(2));
  console.log(`${title}: ${summary.join(", ")}`);
  // Passing means tests ran: at most one may be skipped (the store
  // contract's commit-gap test, which needs a KvStore hook).
  const count = (name: string) =>
    Number(summary.find((line) => line.startsWith(`${name} `))?.split(" ")[1]);
  const ran = count("pass") > 0 && count("skipped") <= 1;
  if (code !== 0 || !ran) console.log(out);
  return code === 0 && ran;
}

/**
 * The version of `@deno/kv` that `deno.json` pins, so Node runs the one
 * Deno resolves.
 *
 * @returns The exact version (`"0.14.0"`).
 * @throws {CheckError} If `deno.json` does not pin `npm:@deno/kv@<version>`.
 */
async function denoKvVersion(): Promise<string> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    imports?: Record<string, string>;
  };
  const pinned = /^npm:@deno\/kv@(\d+\.\d+\.\d+)$/.exec(
    config.imports?.["@deno/kv"] ?? "",
  );
  if (!pinned) {
    throw new CheckError(
      `deno.json's imports do not pin @deno/kv to an exact version: map "@deno/kv" to "npm:@deno/kv@<version>"`,
    );
  }
  return pinned[1]!;
}

/**
 * The check: the bundled core under `node --test`, then the store contract
 * over `@deno/kv`.
 *
 * @returns The exit code: 0 if both passed.
 * @throws {CheckError} If a setup step fails (no Node.js, bundle, install,
 * a deadline).
 */
async function nodeCheck(): Promise<number> {
  const version = await requireNode({ major: NODE_MAJOR });
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

    // The webhook's routes, HttpSender and the QStash publisher, served by
    // @hono/node-server, against a node:http stand-in for what they call.
    await bundle("tests/node/webhook_routes_node.ts", `${dir}/routes.mjs`, {
      platform: "node",
    });
    ok = await nodeTest(
      "the webhook's routes, HttpSender and the QStash publisher on Node (node --test)",
      `${dir}/routes.mjs`,
      dir,
    ) && ok;

    // @deno/kv ships a native addon per platform: npm installs it for this
    // machine, into the cache, and the bundle imports it from there through
    // a link beside it.
    const cache = await npmInstall("@deno/kv", await denoKvVersion());
    await Deno.symlink(`${cache}/node_modules`, `${dir}/node_modules`);
    await bundle("tests/node/kv_contract_node.ts", `${dir}/kv_contract.mjs`, {
      platform: "node",
      external: ["@deno/kv"],
    });
    ok = await nodeTest(
      "KvStore contract on Node over @deno/kv (node --test)",
      `${dir}/kv_contract.mjs`,
      dir,
    ) && ok;

    // PostgresStore over postgres.js (pure JavaScript: bundled in), on a
    // real server, as payment teams run it under Node.
    ok = await postgresContract(dir) && ok;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  return ok ? 0 : 1;
}

/**
 * The store contract on Node against `PostgresStore`, on a server started
 * for it and stopped after.
 *
 * @param dir Where the bundle goes.
 * @returns Whether it passed; `true` with a loud line where there are no
 * server binaries, outside CI.
 * @throws {CheckError} If there are no server binaries under `CI=true`.
 */
function postgresContract(dir: string): Promise<boolean> {
  const title = "PostgresStore contract on Node over postgres.js (node --test)";
  return withPostgres(title, async (url) => {
    await bundle("tests/node/pg_contract_node.ts", `${dir}/pg_contract.mjs`, {
      platform: "node",
    });
    return await nodeTest(title, `${dir}/pg_contract.mjs`, dir, {
      RELAYER_PG_URL: url,
    });
  });
}

if (import.meta.main) await runMain("node-check", nodeCheck);
