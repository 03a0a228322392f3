/**
 * KvStore on one SQLite file opened by more than one handle: two
 * processes, or `deno serve --parallel`'s workers, each with its own
 * `Deno.openKv(path)` and its own KvStore. Deno KV's SQLite back-end
 * refuses a commit with checks, "database is locked" (SQLite's
 * SQLITE_BUSY), when another handle wrote between the commit's reads of
 * its checks and its first write; nothing of it was written. A store
 * whose commits fail so, half of them on a busy pair of processes, fails
 * every delivery that meets one. Here every write must land as it would
 * on one handle.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ReplayError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { kvSharedFileTests } from "./_kv_shared_file.ts";

const NOW = 1_790_000_000_000;

/** `handles` KvStores over one temporary SQLite file, each on its own handle. */
async function sharedFile(handles: number) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_kv_shared_" });
  const kvs = await Promise.all(
    Array.from({ length: handles }, () => Deno.openKv(`${dir}/relayer.kv`)),
  );
  return {
    stores: kvs.map((kv) => new KvStore(kv)),
    async [Symbol.asyncDispose]() {
      for (const kv of kvs) kv.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("KvStore: two handles on one SQLite file each write ahead and record their own intents, none refused as a locked database", async () => {
  await using shared = await sharedFile(2);
  const INTENTS = 40;
  const [a, b] = shared.stores as [KvStore, KvStore];
  for (let i = 0; i < 2 * INTENTS; i++) {
    await a.createIntent({
      id: `pi_${i}`,
      state: "authorized",
      hold: "pending",
    });
  }
  const errors: string[] = [];
  // Each store its own intents: no race between them, only the file.
  await Promise.all(
    [a, b].map((store, s) =>
      Promise.all(Array.from({ length: INTENTS }, async (_, i) => {
        const id = `pi_${2 * i + s}`;
        const lease = { owner: `d${s}`, ttlMs: 30_000, now: NOW };
        try {
          const seen = (await store.getIntent(id))!;
          const settling = await store.transition(id, {
            from: "authorized",
            to: "settling",
            version: seen.version,
            at: NOW,
          }, { lease: { ...lease, keep: true } });
          const ahead = await store.beginBroadcast(id, settling.version, NOW, {
            lease: { ...lease, keep: true },
          });
          await store.recordBroadcast(id, ahead.version, {
            outcome: "sent",
            txHash: `0x${i}`,
            at: NOW,
          }, { lease });
        } catch (error) {
          errors.push(String(error));
        }
      }))
    ),
  );
  assert.deepEqual(errors.slice(0, 3), [], `${errors.length} refused`);
  for (let i = 0; i < 2 * INTENTS; i++) {
    const intent = await b.getIntent(`pi_${i}`);
    assert.equal(intent?.lastBroadcast?.outcome, "sent");
  }
});

Deno.test("KvStore: one signed request delivered at once through two handles on one SQLite file is admitted once, its copies refused as replays", async () => {
  await using shared = await sharedFile(2);
  const [a, b] = shared.stores as [KvStore, KvStore];
  for (let round = 0; round < 20; round++) {
    const claim = {
      key: `generic/${round}`,
      now: NOW,
      expiresAt: NOW + 360_000,
    };
    const answers = await Promise.allSettled(
      Array.from(
        { length: 8 },
        (_, i) =>
          (i % 2 === 0 ? a : b).admit({
            count: `pi_${round}/settle`,
            claim,
            now: NOW,
          }),
      ),
    );
    const admitted = answers.filter((answer) => answer.status === "fulfilled");
    const refused = answers.flatMap((answer) =>
      answer.status === "rejected" ? [answer.reason] : []
    );
    assert.equal(admitted.length, 1, `round ${round}: ${refused.join("; ")}`);
    assert.ok(refused.every((error) => error instanceof ReplayError));
    assert.equal(await a.deliveries(`pi_${round}/settle`), 1);
  }
});

kvSharedFileTests(
  "KvStore on Deno KV",
  (path) => Deno.openKv(path),
  Deno.test,
  25,
);
