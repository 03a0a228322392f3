/**
 * `main.ts` opening a Deno KV file that another handle holds locked as the
 * start opens it: two instances making one new store at once (the second's
 * `PRAGMA journal_mode=wal` meets the first's lock, and Deno KV does not
 * wait for it), or another program in a transaction on it. The start waits
 * the lock out as a commit does, and only a lock that outlasts that wait
 * is refused, in words that do not send the operator to a new file.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { assertOneLine, startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

/**
 * A new SQLite file at `path` held the way the first of two instances
 * holds it while it makes the store: its journal not yet WAL, a write
 * transaction open. Deno KV's open of it fails at once with "database is
 * locked". Rolled back, the file is as new.
 */
function holdNewFile(path: string): { release(): void } {
  const db = new DatabaseSync(path);
  db.exec("BEGIN IMMEDIATE; CREATE TABLE making (x)");
  return {
    release() {
      if (!db.isOpen) return;
      db.exec("ROLLBACK");
      db.close();
    },
  };
}

/** `main.ts` started on a new Deno KV file in a new folder, the file held by {@linkcode holdNewFile}. */
async function startLocked() {
  const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
  const path = `${dir}/relayer.kv`;
  const lock = holdNewFile(path);
  const service = startMain({ ...SETTINGS, KV_PATH: path }, { writeDir: dir });
  return { dir, path, lock, service };
}

Deno.test(
  "main.ts waits out a Deno KV file another instance holds locked as it makes it, then serves on it",
  timeout(60_000, async () => {
    const { dir, lock, service } = await startLocked();
    const released = setTimeout(() => lock.release(), 1_000);
    try {
      const base = await service.base();
      if (base === null) {
        const { code, stderr } = await service.ended();
        assert.fail(`main.ts ended (code ${code}) before it served: ${stderr}`);
      }
      const res = await fetch(`${base}/readyz`);
      await res.body?.cancel();
      assert.equal(res.status, 200);
    } finally {
      clearTimeout(released);
      lock.release();
      service.kill();
      await service.ended();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refuses a Deno KV file still locked after its wait in one line that names the lock, not a new file",
  timeout(60_000, async () => {
    const { dir, path, lock, service } = await startLocked();
    try {
      const started = Date.now();
      const { code, stderr } = await service.ended();
      const waited = Date.now() - started;
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        new RegExp(
          `^relayer: cannot start: KV_PATH: ${path} stayed locked by another handle for 5s \\(Error: database is locked\\): `,
        ),
      );
      assert.doesNotMatch(stderr, /new file/);
      assert.ok(waited >= 4_000, `refused after ${waited} ms, before the wait`);
    } finally {
      lock.release();
      service.kill();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
