/**
 * The program the store contract on Node holds a SQLite file locked with
 * (`_sqlite_lock.ts`) cannot hold the suite: a holder that never says it
 * holds the lock is given up within a bound and ended, a release of one
 * that ended by itself returns, and one that outlives the end of its stdin
 * is killed; then a real holder's lock is taken and given back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { lockedBy, sqliteLocker } from "./_sqlite_lock.ts";

const BOUNDS = { readyMs: 300, releaseMs: 300 };

/** Whether process `pid` still runs. */
function running(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

/** How long `body` took, in ms. */
async function took(body: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await body();
  return performance.now() - started;
}

Deno.test("lockedBy() gives up on a holder that never says it holds the lock, within its bound, and ends it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_lock_" });
  try {
    let error: unknown;
    const ms = await took(async () => {
      error = await lockedBy(`${dir}/x.kv`, {
        command: "sh",
        args: ["-c", `echo $$ > ${dir}/pid; exec sleep 30`],
      }, BOUNDS).then(() => null, (e) => e);
    });
    assert.match(
      String(error),
      /^Error: the locking program \(sh\) did not say it held the lock within 300ms: it was ended$/,
    );
    assert.ok(ms < 3_000, `${ms} ms`);
    const pid = Number(await Deno.readTextFile(`${dir}/pid`));
    assert.equal(running(pid), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("lockedBy()'s release of a holder that ended by itself returns", async () => {
  const lock = await lockedBy("x.kv", {
    command: "sh",
    args: ["-c", "echo locked"],
  }, BOUNDS);
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.ok(await took(() => lock.release()) < 3_000);
});

Deno.test("lockedBy()'s release kills a holder that outlives the end of its stdin", async () => {
  const lock = await lockedBy("x.kv", {
    command: "sh",
    args: ["-c", "echo locked; exec sleep 30"],
  }, BOUNDS);
  assert.ok(await took(() => lock.release()) < 3_000);
});

const locker = sqliteLocker();

Deno.test({
  name:
    "lockedBy() holds a SQLite file locked until its release, then it is writable",
  ignore: locker === undefined ||
    spawnSync("sqlite3", ["-version"], { stdio: "ignore" }).status !== 0,
}, async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_lock_" });
  const path = `${dir}/x.kv`;
  const sql = (text: string) =>
    spawnSync("sqlite3", [path, text], { encoding: "utf8" });
  try {
    assert.equal(sql("CREATE TABLE kv (v)").status, 0);
    const lock = await lockedBy(path, locker!);
    try {
      assert.match(sql("INSERT INTO kv VALUES (1)").stderr, /locked/);
    } finally {
      await lock.release();
    }
    assert.equal(sql("INSERT INTO kv VALUES (1)").status, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
