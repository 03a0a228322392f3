/**
 * The store contract suite on Node: `KvStore` over `openKv(":memory:")` from
 * the npm package `@deno/kv`, run by `node --test` after
 * `deno task node-check` bundles this file, and over `openKv` on a SQLite
 * file (what docs/api.md's Node setup opens), which must keep what it wrote
 * across a reopen; then writes carrying give-up marks against `@deno/kv`'s
 * 10 checks a commit; then `KvStore` and the ops routes on a handle
 * closed under them, which `@deno/kv` answers in its own words, not
 * Deno's; and a write on a file another program holds locked.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import { KvStore } from "../../store/kv.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { storeContract } from "../store/_contract.ts";
import { hookedKvStore } from "../store/_hooked_kv.ts";
import { kvMarksTests } from "../store/_kv_marks.ts";
import { kvClosedTests } from "../store/_kv_closed.ts";
import { kvSharedFileTests } from "../store/_kv_shared_file.ts";
import { assertReadNothing } from "../webhook/_closed_store_routes.ts";
import { runner } from "./_runner.ts";
import { lockedBy, sqliteLocker } from "./_sqlite_lock.ts";

const { test } = await runner();
storeContract("KvStore on Node (@deno/kv)", async () => {
  const kv = await openKv(":memory:");
  return { ...hookedKvStore(kv), close: () => kv.close() };
}, { test, commitGap: true });
storeContract("KvStore on Node (@deno/kv), a SQLite file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "relayer_kv_node_"));
  const kv = await openKv(join(dir, "relayer.kv"));
  return {
    ...hookedKvStore(kv),
    close: () => {
      kv.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}, { test, commitGap: true });
test({
  name:
    "KvStore on Node (@deno/kv): a SQLite file keeps what it wrote once closed and opened again",
  ignore: false,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "relayer_kv_node_"));
  try {
    const path = join(dir, "relayer.kv");
    const first = await openKv(path);
    try {
      const store = new KvStore(first);
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      await store.voidHold("pi_0001");
    } finally {
      first.close();
    }
    const again = await openKv(path);
    try {
      const intent = await new KvStore(again).getIntent("pi_0001");
      assert.deepEqual([intent?.state, intent?.hold], ["authorized", "voided"]);
    } finally {
      again.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
kvMarksTests("KvStore on Node (@deno/kv)", () => openKv(":memory:"), test);
kvClosedTests(
  "KvStore on Node (@deno/kv)",
  (path) => openKv(path),
  test,
  // Its addon's, for a commit that met the handle closed as it looked the
  // database up (nothing sent), and one whose database closed under it.
  ["db not found", "Database is closed."],
);
test({
  name:
    "the ops routes on a @deno/kv handle closed under the store say their read read nothing and wrote nothing: nothing changed, try again",
  ignore: false,
}, async () => {
  const kv = await openKv(":memory:");
  const log = await assertReadNothing(new KvStore(kv), () => kv.close());
  // The log says why: the handle is closed.
  assert.match(log, /handle is closed/);
});
// Its addon refuses many more of these commits as locked than Deno does,
// each tried again: 6 rounds meet 100 to 200 refusals in about 2 s, where
// Deno's 25 would take 10 s.
kvSharedFileTests(
  "KvStore on Node (@deno/kv)",
  (path) => openKv(path),
  test,
  6,
);

const locker = sqliteLocker();

// About 6 s: @deno/kv's own wait for the lock (5 s), then the store's
// last try; nothing shorter meets the refusal a caller gets.
test({
  name:
    'KvStore on Node (@deno/kv): a write on a SQLite file another program holds locked is refused in Deno\'s words, "database is locked" (no cause or Rust backtrace after them), marked as nothing written, and lands once the lock is gone',
  ignore: locker === undefined,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "relayer_kv_locked_"));
  const path = join(dir, "relayer.kv");
  const kv = await openKv(path);
  try {
    const store = new KvStore(kv);
    await store.createIntent({ id: "pi_0001", state: "created", hold: null });
    const intent = { id: "pi_0002", state: "created", hold: null } as const;
    const lock = await lockedBy(path, locker!);
    try {
      await assert.rejects(store.createIntent(intent), (error) => {
        assert.equal(String(error), "Error: database is locked");
        // The addon's own error, its cause and backtrace, kept beneath.
        assert.match(
          String((error as Error).cause),
          /^Error: database is locked\n\nCaused by:/,
        );
        assert.ok(isNotWritten(error));
        return true;
      });
    } finally {
      await lock.release();
    }
    assert.equal(await store.getIntent("pi_0002"), null);
    assert.equal((await store.createIntent(intent)).state, "created");
  } finally {
    kv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
