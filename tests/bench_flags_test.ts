/**
 * Every script under `bench/` that reads flags refuses one it does not
 * know in one line, named for the script (a script a task runs adds one
 * line of the flags it takes), and exits 2: no stack trace,
 * nothing started (no server, no file written) before the refusal.
 *
 * @module
 */

import assert from "node:assert/strict";

const SCRIPTS = [
  "app_bench",
  "cpu_per_request",
  "decide_forms",
  "http_bench",
  "kv_commits",
  "kv_scale",
  "kv_to_postgres",
  "postgres_closes",
  "postgres_concurrent",
  "postgres_partition",
  "postgres_scale",
  "simulate",
];

const bench = new URL("../bench/", import.meta.url);

/**
 * Runs `bench/<name>.ts` with `args` and no permission (flags are read,
 * and refused, before anything runs: none is asked).
 */
async function runBench(name: string, args: string[]) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      new URL(`${name}.ts`, bench).pathname,
      ...args,
    ],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code, stdout: text.decode(stdout), err: text.decode(stderr) };
}

Deno.test("bench scripts refuse an unknown flag in one line, exit 2, no stack trace", async () => {
  const found = [];
  for await (const entry of Deno.readDir(bench)) {
    if (!entry.name.endsWith(".ts") || entry.name.startsWith("_")) continue;
    const text = await Deno.readTextFile(new URL(entry.name, bench));
    if (text.includes("parseArgs(")) found.push(entry.name.slice(0, -3));
  }
  // A new script that reads flags joins the list below.
  assert.deepEqual(found.sort(), SCRIPTS);
  await Promise.all(SCRIPTS.map(async (name) => {
    const { code, stdout, err } = await runBench(name, ["--no-such-flag"]);
    assert.equal(code, 2, `${name}: exit ${code}: ${err}`);
    assert.equal(stdout, "", name);
    assert.match(
      err,
      // The refusal, then (for a script a task runs) the flags it takes.
      /^[\w/:.-]+: Unknown option '--no-such-flag'\n(?:usage: deno task [\w:-]+(?: \[[^\]\n]+\])*\n)?$/,
      `${name}: ${err}`,
    );
  }));
});

Deno.test("bench scripts refuse a flag's bad value in one line, exit 2, no stack trace, before they run anything", async () => {
  const cases: [string, string[], string][] = [
    [
      "kv_scale",
      ["--intents", "9999"],
      "bench/kv_scale.ts: --intents must be a whole number of at least 10000",
    ],
    [
      "kv_to_postgres",
      ["--intents", "0"],
      "bench/kv_to_postgres.ts: --intents must be a whole number of at least 1",
    ],
    [
      "postgres_concurrent",
      ["--workers", "0"],
      "bench/postgres_concurrent.ts: --workers must be a whole number of at least 1",
    ],
    [
      "postgres_concurrent",
      ["--workers", "4", "--writes", "3"],
      "bench/postgres_concurrent.ts: --writes must be a whole number of at least --workers",
    ],
    [
      "postgres_partition",
      ["--seconds", "0.5"],
      "bench/postgres_partition.ts: --seconds must be a number of at least 1",
    ],
    [
      "postgres_scale",
      ["--intents", "9999"],
      "bench/postgres_scale.ts: --intents must be a whole number of at least 10000",
    ],
    ["simulate", ["--seed", "x"], "simulate: --seed must be an integer: x"],
    [
      "simulate",
      ["--seed", "7", "--out", "seed7.csv"],
      "simulate: --out seed7.csv: this run may not write there (deno task simulate writes under docs/ only): give a path in docs/, such as docs/seed7.csv",
    ],
  ];
  await Promise.all(cases.map(async ([name, args, said]) => {
    const { code, stdout, err } = await runBench(name, args);
    assert.equal(code, 2, `${name}: exit ${code}: ${err}`);
    assert.equal(stdout, "", name);
    assert.equal(err, `${said}\n`, name);
  }));
});
