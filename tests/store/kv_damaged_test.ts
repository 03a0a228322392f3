/**
 * KvStore on a Deno KV file damaged under it: pages of the SQLite file
 * overwritten while the handle is open. SQLite answers every read and
 * write "database disk image is malformed" (SQLITE_CORRUPT), or, its
 * header overwritten, "file is not a database" (SQLITE_NOTADB: once
 * another handle's commit has SQLite read the header again); the store
 * words it for an operator (the file is damaged: stop the service, keep
 * the file and its -wal, restore it or recover its rows) and leaves a
 * write's outcome unknown, never "nothing written".
 *
 * @module
 */

import assert from "node:assert/strict";
import { overwrite } from "../_overwrite.ts";
import { KvStore } from "../../store/kv.ts";
import { isNotRead, isNotWritten } from "../../store/_not_written.ts";
import {
  assertNotReadyRetried,
  countingApp,
  NOW,
  STACK,
} from "../webhook/_app.ts";

/** A Deno KV store at `path` holding 200 records of 500 bytes, open. */
async function seeded(path: string): Promise<Deno.Kv> {
  const kv = await Deno.openKv(path);
  for (let i = 0; i < 200; i++) {
    await kv.set(["relayer", "seed", i], "x".repeat(500));
  }
  return kv;
}

const WHAT_TO_DO =
  / Stop the service, keep the file and its -wal as they are, and restore the store from a backup or recover its rows \(sqlite3 <the file> \.recover\)\.$/;

Deno.test("KvStore on a Deno KV file damaged under it: reads and writes say the file is damaged and what to do, and a write's outcome stays unknown", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_damaged_" });
  const path = `${dir}/relayer.kv`;
  try {
    // A store of a few hundred records, closed (its WAL checkpointed into
    // the file), then opened again and its pages overwritten under it.
    const seed = await seeded(path);
    seed.close();
    const kv = await Deno.openKv(path);
    try {
      const store = new KvStore(kv);
      overwrite(path, 2 * 4096, 3 * 4096, 0xab);
      for (
        const read of [
          () => store.getIntent("pi_1"),
          () => store.listDeadLetters({}),
          () => store.getDeadLetter("pi_1/settle"),
          () => store.deliveries("pi_1/settle"),
        ]
      ) {
        await assert.rejects(read(), (error: Error) => {
          assert.match(
            error.message,
            /^Cannot read Deno KV as its SQLite file is damaged \(SQLite: "database disk image is malformed"\): Stop/,
          );
          assert.match(error.message, WHAT_TO_DO);
          // Not a refusal before the data, as a closed handle's is: no
          // route says "nothing read; try again" of a damaged file.
          assert.equal(isNotRead(error), false);
          return true;
        });
      }
      const writes = [
        store.createIntent({ id: "pi_2", state: "authorized" }),
        store.createIntent({ id: "pi_3", state: "authorized" }),
      ];
      for (const write of writes) {
        await assert.rejects(write, (error: Error) => {
          assert.match(
            error.message,
            /^Cannot write to Deno KV as its SQLite file is damaged \(SQLite: "database disk image is malformed"\): the write may have landed, in whole or in part\./,
          );
          assert.match(error.message, WHAT_TO_DO);
          assert.equal(isNotWritten(error), false, "its outcome is unknown");
          return true;
        });
      }
    } finally {
      kv.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("createApp() over KvStore on a Deno KV file damaged under it: /readyz not ready and a delivery 503, nothing sent, each logged whole with what to do", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_damaged_" });
  const path = `${dir}/relayer.kv`;
  try {
    const seed = await seeded(path);
    await new KvStore(seed).createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    seed.close();
    const kv = await Deno.openKv(path);
    try {
      const store = new KvStore(kv);
      const { app, lines, sent } = countingApp(store, () => NOW);
      overwrite(path, 2 * 4096, 3 * 4096, 0xab);
      await assertNotReadyRetried(app);
      assert.equal(sent(), 0);
      assert.ok(
        lines.some((line) =>
          /^relayer not ready: the store failed a read: Error: Cannot read Deno KV as its SQLite file is damaged \(SQLite: "database disk image is malformed"\): Stop the service, .*\(sqlite3 <the file> \.recover\)\.$/
            .test(line)
        ),
        lines.join("\n"),
      );
      assert.ok(
        lines.some((line) =>
          /failed unexpectedly: Error: Cannot (?:read|write to) Deno KV as its SQLite file is damaged .*\(sqlite3 <the file> \.recover\)\.$/
            .test(line)
        ),
        lines.join("\n"),
      );
      for (const line of lines) assert.doesNotMatch(line, STACK);
    } finally {
      kv.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test('KvStore on a Deno KV file whose header is overwritten under it: once another handle on the file writes, its reads and writes say the file is damaged ("file is not a database") and what to do', async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_damaged_" });
  const path = `${dir}/relayer.kv`;
  try {
    const seed = await seeded(path);
    seed.close();
    // Two handles on the file, as two instances on one store. SQLite keeps
    // each handle's pages, the header among them, until another handle's
    // commit: then it reads them again from the file.
    const other = await Deno.openKv(path);
    const kv = await Deno.openKv(path);
    try {
      const store = new KvStore(kv);
      await store.getIntent("pi_1");
      overwrite(path, 0, 100, 0x41);
      await other.set(["relayer", "seed", 0], "y");
      await assert.rejects(store.getIntent("pi_1"), (error: Error) => {
        assert.match(
          error.message,
          /^Cannot read Deno KV as its SQLite file is damaged \(SQLite: "file is not a database"\): Stop/,
        );
        assert.match(error.message, WHAT_TO_DO);
        return true;
      });
      await assert.rejects(
        store.createIntent({ id: "pi_2", state: "authorized" }),
        (error: Error) => {
          assert.match(
            error.message,
            /^Cannot write to Deno KV as its SQLite file is damaged \(SQLite: "file is not a database"\): the write may have landed, in whole or in part\./,
          );
          assert.match(error.message, WHAT_TO_DO);
          assert.equal(isNotWritten(error), false, "its outcome is unknown");
          return true;
        },
      );
    } finally {
      kv.close();
      other.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
