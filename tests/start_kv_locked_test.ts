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

/** Waits for `main.ts` to end within 20 s: its exit code, its stderr and how long it ran. */
async function refusal(
  service: ReturnType<typeof startMain>,
): Promise<{ code: number; stderr: string; waited: number }> {
  const started = Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const ended = await Promise.race([
      service.ended(),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), 20_000);
      }),
    ]);
    if (ended === null) {
      assert.fail("main.ts said nothing and did not end within 20s");
    }
    return { ...ended, waited: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

/** A store at `path`, made and closed (no WAL left). */
async function makeStore(path: string): Promise<void> {
  const kv = await Deno.openKv(path);
  await kv.set(["relayer", "made"], 1);
  kv.close();
}

/**
 * How another program holds a store: `sqlite3` with a write transaction
 * left open (the store in WAL mode: Deno KV opens it, then its first write
 * waits with no end), and one that switched the file to a rollback journal
 * and holds it exclusively (each open of Deno KV waits 5 s, then fails).
 */
const HOLDS: [string, string][] = [
  [
    "a write transaction left open on the store",
    "BEGIN IMMEDIATE; DELETE FROM kv",
  ],
  [
    "an exclusive lock in rollback-journal mode",
    "PRAGMA journal_mode=delete; BEGIN EXCLUSIVE; SELECT count(*) FROM kv",
  ],
];

/**
 * Holds that `service` refused to start once the start's 5 s wait on
 * `path`'s lock had passed, in one line, `cause` (a pattern's source) after
 * the lock's words, and never calling it a new file.
 */
async function refusedLocked(
  service: ReturnType<typeof startMain>,
  path: string,
  cause: string,
): Promise<void> {
  const { code, stderr, waited } = await refusal(service);
  assert.equal(code, 1, stderr);
  assertOneLine(
    stderr,
    new RegExp(
      `^relayer: cannot start: KV_PATH: ${path} stayed locked by another handle for 5s ${cause}`,
    ),
  );
  assert.doesNotMatch(stderr, /new file/);
  assert.ok(waited >= 4_000, `refused after ${waited} ms, before the wait`);
}

/** A new file another instance holds as it makes it, still locked after the start's wait. */
async function newFileStillLocked(): Promise<void> {
  const { dir, path, lock, service } = await startLocked();
  try {
    await refusedLocked(service, path, "\\(Error: database is locked\\): ");
  } finally {
    lock.release();
    service.kill();
    await service.ended();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A store another program holds with `sql` for good. */
async function storeHeld(sql: string): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
  const path = `${dir}/relayer.kv`;
  await makeStore(path);
  const db = new DatabaseSync(path);
  db.exec(sql);
  const service = startMain({ ...SETTINGS, KV_PATH: path }, {
    writeDir: dir,
  });
  try {
    await refusedLocked(
      service,
      path,
      "\\(.*\\): a program holds it in a transaction \\(sqlite3, a backup tool\\)\\. End that transaction, then start again \\(keep KV_PATH: the store holds every payment's record\\)\\.$",
    );
  } finally {
    service.kill();
    await service.ended();
    db.exec("ROLLBACK");
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

// Each case waits out the start's 5 s on the lock: the three run at once,
// each on a file and a process of its own, where they waited one after
// the other.
Deno.test(
  `main.ts refuses in one line that names the lock, not a new file, once its 5 s wait has passed: a new file still locked by the instance making it, and a store another program holds locked (${
    HOLDS.map(([hold]) => hold).join("; ")
  })`,
  timeout(30_000, async () => {
    const cases: [string, Promise<void>][] = [
      ["a new file still locked", newFileStillLocked()],
      ...HOLDS.map(([hold, sql]): [string, Promise<void>] => [
        hold,
        storeHeld(sql),
      ]),
    ];
    const results = await Promise.allSettled(cases.map(([, done]) => done));
    const failed = results.flatMap((result, i) =>
      result.status === "rejected"
        ? [`${cases[i]![0]}: ${String(result.reason)}`]
        : []
    );
    assert.deepEqual(failed, []);
  }),
);
