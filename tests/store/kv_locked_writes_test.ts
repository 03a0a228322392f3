/**
 * KvStore on a SQLite file another program holds a write transaction on
 * (`sqlite3` with `BEGIN IMMEDIATE` and a write left open, a backup
 * tool): every commit meets SQLITE_BUSY, "database is locked", which
 * Deno KV's SQLite back-end answers from the first write of its deferred
 * transaction, before anything of the commit is written. Once the
 * store's tries run out (about 5 s), an operator's write answers 503
 * "was not written": nothing changed, which holds once the lock is gone,
 * and the same write then lands.
 *
 * The lock is taken by another program, as in the field: a process of its
 * own holding it through `node:sqlite` (two SQLite handles of one process
 * do not meet as two programs do), and each request runs on its own
 * handle, so all of them wait out one lock of about 5 s at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { countingApp, NOW, OPS, STACK } from "../webhook/_app.ts";

/**
 * Holds a write transaction open on the SQLite file at `path` from a
 * process of its own (`BEGIN IMMEDIATE` and a write, as `sqlite3` would),
 * once it answers; `release()` rolls it back and ends the process.
 */
async function lockedBy(path: string): Promise<{ release(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { DatabaseSync } from "node:sqlite";
const db = new DatabaseSync(${JSON.stringify(path)});
db.exec("BEGIN IMMEDIATE; UPDATE kv SET v = v");
console.log("locked");
for await (const _ of Deno.stdin.readable);
db.exec("ROLLBACK");
db.close();`,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let said = "";
  while (!said.includes("locked\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the locking process ended first: ${said}`);
    said += value;
  }
  reader.releaseLock();
  let released: Promise<void> | undefined;
  return {
    release: () =>
      released ??= (async () => {
        await child.stdin.close();
        const { code } = await child.status;
        await child.stdout.cancel().catch(() => {});
        assert.equal(code, 0, "the locking process failed to roll back");
      })(),
  };
}

const NOT_WRITTEN =
  /was not written \(the relayer's log says why\): nothing changed; try again\.$/;

Deno.test("createApp() over KvStore on a file another program holds locked: an operator's write answers 503 that it was not written, nothing changed once the lock is gone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_kv_locked_" });
  const path = `${dir}/relayer.kv`;
  const handles: Deno.Kv[] = [];
  const open = async () => {
    const kv = await Deno.openKv(path);
    handles.push(kv);
    return new KvStore(kv);
  };
  let lock: { release(): Promise<void> } | undefined;
  try {
    const seed = await open();
    const settling = await seed.createIntent({
      id: "pi_0002",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const review = await seed.transition("pi_0002", {
      from: "settling",
      to: "needs_review",
      version: settling.version,
      at: 1,
    });
    // One handle per request: each waits out the lock at once.
    const creating = countingApp(await open(), () => NOW);
    const resolving = countingApp(await open(), () => NOW);
    const headers = {
      authorization: `Bearer ${OPS}`,
      "content-type": "application/json",
    };
    const create = () =>
      creating.app.request("/v1/intents", {
        method: "POST",
        headers,
        body: '{"id":"pi_0003","state":"authorized"}',
      });

    lock = await lockedBy(path);
    const [created, resolved] = await Promise.all([
      create(),
      resolving.app.request("/v1/intents/pi_0002/resolve", {
        method: "POST",
        headers,
        body: JSON.stringify({ to: "settled", version: review.version }),
      }),
    ]);
    await lock.release();

    for (
      const [what, res] of [["create", created], ["resolve", resolved]] as const
    ) {
      assert.equal(res.status, 503, what);
      const problem = await res.json();
      assert.equal(problem.type, "urn:relayer:problem:store-failed");
      assert.match(problem.detail, NOT_WRITTEN, `${what}: ${problem.detail}`);
    }
    const lines = [...creating.lines, ...resolving.lines];
    for (const line of lines) assert.doesNotMatch(line, STACK);
    assert.ok(
      lines.some((line) =>
        /creation of intent pi_0003 failed: .*database is locked/.test(line)
      ),
      lines.join("\n"),
    );

    // Nothing changed, read on a fresh handle.
    const fresh = await open();
    assert.equal(await fresh.getIntent("pi_0003"), null);
    assert.deepEqual(await fresh.getIntent("pi_0002"), review);
    // The lock gone, the same write on the same handle lands.
    const again = await create();
    assert.equal(again.status, 201, await again.clone().text());
    await again.body?.cancel();
    assert.equal((await fresh.getIntent("pi_0003"))?.state, "authorized");
  } finally {
    await lock?.release();
    for (const kv of handles) kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("KvStore: writes that wait behind a commit and meet a file another program holds locked, as one group, each get the locked error marked as nothing written, the group never halved", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_kv_locked_" });
  const path = `${dir}/relayer.kv`;
  const kv = await Deno.openKv(path);
  let lock: { release(): Promise<void> } | undefined;
  // The first commit is held until `release()`, and takes the lock once it
  // landed: the writes queued behind it go out as one group, into the lock.
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  let commits = 0;
  const lockedSizes: number[] = [];
  const gated: KvLike = {
    getMany: (keys) => kv.getMany(keys),
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      const set = atomic.set.bind(atomic);
      let sets = 0;
      atomic.set = (...args: Parameters<typeof set>) => (sets++, set(...args));
      const commit = atomic.commit.bind(atomic);
      atomic.commit = async () => {
        const n = ++commits;
        if (n === 1) await held;
        if (lock !== undefined) lockedSizes.push(sets);
        const result = await commit();
        if (n === 1) lock = await lockedBy(path);
        return result;
      };
      return atomic;
    },
  };
  try {
    const store = new KvStore(gated);
    const first = store.createIntent({ id: "pi_1", state: "created" });
    const queued = ["pi_2", "pi_3", "pi_4"].map((id) =>
      store.createIntent({ id, state: "created" })
    );
    release();
    await first;
    const answers = await Promise.allSettled(queued);
    await lock!.release();
    for (const answer of answers) {
      assert.equal(answer.status, "rejected");
      const error = (answer as PromiseRejectedResult).reason;
      assert.match(String(error), /^TypeError: database is locked\b/);
      assert.equal(isNotWritten(error), true, String(error));
    }
    // Every try carried the whole group: never a half, never one alone.
    assert.ok(lockedSizes.length > 1, `${lockedSizes.length} tries`);
    assert.deepEqual(
      new Set(lockedSizes),
      new Set([lockedSizes[0]]),
      `sets per commit: ${[...new Set(lockedSizes)].join(", ")}`,
    );
    assert.equal(lockedSizes[0]! % 3, 0);
    for (const id of ["pi_2", "pi_3", "pi_4"]) {
      assert.equal(await store.getIntent(id), null, id);
    }
    assert.equal((await store.getIntent("pi_1"))?.state, "created");
  } finally {
    await lock?.release();
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});
