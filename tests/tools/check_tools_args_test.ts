/**
 * The runtime checks read no arguments, and refuse any before they run
 * anything: `deno task node-check --node 22` (the one Node an adopter wants
 * to try) ran all four Nodes, minutes of work, with the flag ignored and
 * nothing said, as did every other check given a flag of its own guess. A
 * flag is named up to its `=`; any other argument (a value, which may be a
 * secret) only counted. `deno task snippets` given a file that is not there
 * says so, where it said its read failed "unexpectedly" and to report it.
 *
 * Each check runs with an empty `PATH` and an empty cache, so a check that
 * went past its arguments fails at once on the first program it spawns
 * (exit 1), rather than install and run runtimes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runTool } from "./_run_tool.ts";

const CHECKS = [
  ["node_check.ts", "node-check"],
  ["worker_check.ts", "worker-check"],
  ["wrangler_check.ts", "wrangler-check"],
  ["bun_check.ts", "bun-check"],
  ["deploy_check.ts", "deploy-check"],
  ["tsc_options_check.ts", "tsc-options-check"],
] as const;

for (const [file, task] of CHECKS) {
  Deno.test(`${task} given arguments refuses them, naming the flag and counting the value, and runs nothing`, async () => {
    const cache = await Deno.makeTempDir({ prefix: "relayer_args_cache_" });
    const bin = await Deno.makeTempDir({ prefix: "relayer_args_bin_" });
    try {
      const { code, stdout, stderr } = await runTool(file, [
        "--node",
        "22",
      ], {
        permissions: [
          "--allow-run",
          "--allow-read",
          "--allow-write",
          "--allow-env",
          "--allow-net=127.0.0.1",
        ],
        env: { PATH: bin, RELAYER_CACHE: cache, CI: "" },
      });
      assert.equal(code, 2, stderr);
      assert.equal(stdout, "");
      assert.equal(
        stderr,
        `${task}: it reads no arguments, so it refuses --node and 1 other argument (not shown): run deno task ${task} with none; nothing was run\n`,
      );
      assert.deepEqual([...Deno.readDirSync(cache)], []);
    } finally {
      await Deno.remove(cache, { recursive: true });
      await Deno.remove(bin, { recursive: true });
    }
  });
}

Deno.test("snippets given a file that is not there names it and runs nothing, where it called its read unexpected", async () => {
  const { code, stdout, stderr } = await runTool("snippets.ts", [
    "docs/nope.md",
  ], { permissions: ["--allow-read", "--allow-env"] });
  assert.equal(code, 2, stderr);
  assert.equal(stdout, "");
  assert.equal(
    stderr,
    "snippets: there is no file docs/nope.md: give Markdown files by their path from the repository's root (README.md, docs/api.md), or none for README.md and docs/*.md; nothing was run\n",
  );
});

Deno.test("kv-ops given a flag refuses it and prints no table, where --store postgres printed Deno KV's numbers as if they were PostgreSQL's", async () => {
  const { code, stdout, stderr } = await runTool("../bench/kv_ops.ts", [
    "--store",
    "postgres",
  ]);
  assert.equal(code, 2, stderr);
  assert.equal(stdout, "");
  assert.equal(
    stderr,
    "kv-ops: it reads no arguments, so it refuses the 2 arguments given (not shown): it prints KvStore's reads and commits alone (PostgreSQL's costs: docs/stores.md#store-benchmarks, deno task bench:store); nothing was run\n",
  );
});

const BENCH_USAGE = [
  [
    "app_bench.ts",
    "bench:app",
    "[--runs 3] [--deliveries 30000] [--in-flight 50] [--store memory,kv] [--kv-dir DIR]",
  ],
  [
    "cpu_per_request.ts",
    "bench:cpu",
    "[--runs 3] [--requests 20000] [--warmup 3000] [--connections 50] [--intents 20000] [--only a,f,d] [--against DIR]",
  ],
  ["decide_forms.ts", "bench:forms", "[--runs 3] [--file backoff]"],
  [
    "http_bench.ts",
    "bench:http",
    "[--runs 3] [--seconds 8] [--connections 50] [--intents 20000] [--only a,f,b,c,g,d,e] [--kv-dir DIR] [--profile]",
  ],
  ["kv_commits.ts", "kv-commits", "[--runs 3] [--kv-dir DIR]"],
  ["simulate.ts", "simulate", "[--seed N] [--out docs/FILE.csv]"],
] as const;

for (const [file, task, usage] of BENCH_USAGE) {
  Deno.test(`${task} given a flag it does not take names the flags it does, where it said only that the flag was unknown`, async () => {
    const { code, stdout, stderr } = await runTool(`../bench/${file}`, [
      "--help",
    ]);
    assert.equal(code, 2, stderr);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `${task}: Unknown option '--help'\nusage: deno task ${task} ${usage}\n`,
    );
  });
}
