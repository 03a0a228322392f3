/**
 * `deno task kv-to-postgres` refuses any argument, as it reads none: given
 * `--dry-run` it moved at once, and given `--kv-path x.kv` it moved the
 * store `KV_PATH` names (or `./data/relayer.kv`), with nothing said. A flag
 * is named up to its `=`; any other argument, which may be a URL with its
 * password, only counted.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runTool } from "./_run_tool.ts";

Deno.test("kv-to-postgres given arguments refuses them, naming the flags and counting the rest, before it reads a setting or a store", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_move_args_" });
  try {
    const { code, stdout, stderr } = await runTool("kv_to_postgres.ts", [
      "--dry-run",
      "--kv-path=./other.kv",
      "postgres://relayer:hunter2@db.internal/payments",
      // A password given as -p<password>, as psql's and mysql's habit is.
      "-pHunter3Secret",
    ], {
      permissions: [
        "--allow-net",
        "--allow-env",
        "--allow-read",
        `--allow-write=${dir}`,
      ],
      env: {
        // Nothing answers there, and there is no store: a run that read
        // either would have said so instead.
        DATABASE_URL: "postgres://relayer@127.0.0.1:9/payments",
        KV_PATH: `${dir}/relayer.kv`,
      },
    });
    assert.equal(code, 2, stderr);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      "kv-to-postgres reads no arguments, so it refuses --dry-run, --kv-path and 2 other arguments (not shown): it has no dry run, and its settings are environment variables (KV_PATH, or KV_URL and DENO_KV_ACCESS_TOKEN; DATABASE_URL; CLOCK_SKEW), as docs/stores.md#moving-from-deno-kv-to-postgresql shows. Nothing was moved.\n",
    );
    assert.doesNotMatch(stderr, /Hunter3|hunter2/);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kv-to-postgres names a flag of at most 40 characters up to its '=', and only counts a longer one or an argument not of a flag's shape", async () => {
  const long = `--${"a".repeat(60)}`;
  const { code, stdout, stderr } = await runTool("kv_to_postgres.ts", [
    "--dry-run=yes",
    `${long}=value`,
    "-p@ssw0rd",
  ], { permissions: ["--allow-env"], env: {} });
  assert.equal(code, 2, stderr);
  assert.equal(stdout, "");
  assert.ok(
    stderr.startsWith(
      "kv-to-postgres reads no arguments, so it refuses --dry-run and 2 other arguments (not shown): ",
    ),
    stderr,
  );
  assert.ok(!stderr.includes("aaaa") && !stderr.includes("ssw0rd"), stderr);
});

Deno.test("kv-to-postgres given --dry-run alone refuses it, as it would move at once", async () => {
  const { code, stdout, stderr } = await runTool("kv_to_postgres.ts", [
    "--dry-run",
  ], { permissions: ["--allow-env"], env: {} });
  assert.equal(code, 2, stderr);
  assert.equal(stdout, "");
  assert.ok(
    stderr.startsWith(
      "kv-to-postgres reads no arguments, so it refuses --dry-run: it has no dry run, ",
    ),
    stderr,
  );
});
