// KvStore reads a bounded number of keys per call, whatever the database
// holds: no call lists without a tight prefix and a limit, and a page of
// dead letters deep in the list reads what the first page does
// (`bench/kv_scale.ts` times the same at 1M intents).

import assert from "node:assert/strict";
import { KvStore } from "../../store/kv.ts";
import { countingKv } from "../../bench/_store_ops.ts";

const NOW = 1_790_000_000_000;

const letter = (i: number) => ({
  jobId: `job_${String(i).padStart(5, "0")}`,
  intentId: `pi_${i}`,
  deliveries: 10,
  cause: "exhausted" as const,
  reason: "gave up after 10 deliveries",
  resolution: "intent failed, hold voided",
  lastError: "signer answered 500",
  poisonedAt: NOW - i * 1000,
});

Deno.test("KvStore: every page of dead letters reads at most its own keys, however deep", async () => {
  using kv = await Deno.openKv(":memory:");
  const { handle, read, lists } = countingKv(kv);
  const store = new KvStore(handle);
  const LETTERS = 1_500;
  for (let i = 0; i < LETTERS; i += 100) {
    await Promise.all(
      Array.from({ length: 100 }, (_, j) => store.putDeadLetter(letter(i + j))),
    );
  }
  let cursor: string | null = null;
  let seen = 0;
  const pages: number[] = [];
  do {
    const before = read.keys;
    const listed = lists.length;
    const page: Awaited<ReturnType<KvStore["listDeadLetters"]>> = await store
      .listDeadLetters({ limit: 100, cursor });
    seen += page.items.length;
    pages.push(read.keys - before);
    // One list a page, under the index's prefix, from the cursor, with a
    // limit: what it asks of Deno KV does not grow with the depth.
    assert.deepEqual(lists.length, listed + 1);
    const list = lists.at(-1)!;
    assert.deepEqual(list.prefix, ["relayer", "dead_by_time"]);
    assert(
      list.limit !== undefined && list.limit <= 102,
      `limit ${list.limit}`,
    );
    assert.deepEqual(list.start === undefined, cursor === null);
    cursor = page.cursor;
  } while (cursor !== null);
  assert.deepEqual(seen, LETTERS);
  // The page's index entries (and the next, and the cursor's own), then
  // its letters in getMany of 10.
  for (const keys of pages) assert(keys <= 202, `a page read ${keys} keys`);
});

Deno.test("KvStore: the delivery path, the probes and the admin calls read a few keys and list nothing", async () => {
  using kv = await Deno.openKv(":memory:");
  const { handle, read, lists } = countingKv(kv);
  const store = new KvStore(handle);
  // Some of everything, so a scan would have keys to read.
  for (let i = 0; i < 200; i++) {
    await store.createIntent({
      id: `pi_${i}`,
      state: "authorized",
      hold: "pending",
    });
    await store.admit({
      count: `job_${i}`,
      claim: { key: `k_${i}`, now: NOW, expiresAt: NOW + 600_000 },
      now: NOW,
    });
    await store.putDeadLetter(letter(i));
  }
  const keysOf = async (call: () => Promise<unknown>) => {
    const before = read.keys;
    await call();
    return read.keys - before;
  };
  const settling = await store.createIntent({
    id: "pb",
    state: "settling",
    hold: "pending",
    settlingSince: NOW,
  });
  const lease = { owner: "o", ttlMs: 30_000, now: NOW };
  let version = settling.version;
  const calls: [string, () => Promise<unknown>][] = [
    ["getIntent", () => store.getIntent("pi_7")],
    ["getIntent (/readyz)", () => store.getIntent("readyz")],
    [
      "admit (/readyz)",
      () => store.admit({ count: "relayer/write-probe", now: NOW }),
    ],
    ["deliveries", () => store.deliveries("job_7", NOW)],
    ["recordHold", () => store.recordHold("pi_8")],
    ["beginBroadcast", async () => {
      version = (await store.beginBroadcast("pb", version, NOW, {
        lease: { ...lease, keep: true },
        claim: { key: "c", now: NOW, expiresAt: NOW + 600_000 },
      })).version;
    }],
    ["recordBroadcast", async () => {
      version = (await store.recordBroadcast("pb", version, {
        outcome: "sent",
        txHash: "0xabc",
        at: NOW,
      }, { lease })).version;
    }],
    ["getDeadLetter", () => store.getDeadLetter("job_00007")],
    ["redrive", async () => {
      const got = (await store.getDeadLetter("job_00008"))!;
      await store.redrive(got.jobId, got.version);
    }],
  ];
  for (const [name, call] of calls) {
    const keys = await keysOf(call);
    assert(keys <= 10, `${name} read ${keys} keys`);
  }
  assert.deepEqual(lists, []);
});
