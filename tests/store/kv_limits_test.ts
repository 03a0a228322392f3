/**
 * KvStore against Deno KV's own limits (Deno 2, `ext/kv/config.rs`): a key
 * of at most 2,048 bytes written (2,049 read), and an `expireIn` Deno KV
 * can add to its clock. What a caller passes that Deno KV cannot keep is
 * refused in the store's words before anything is read or written, or
 * kept as the other stores keep it.
 *
 * @module
 */

import { KvStore } from "../../store/kv.ts";
import { MemoryStore } from "../../store/memory.ts";
import { ConflictError } from "../../store/conflict_error.ts";
import { ReplayError } from "../../store/replay_error.ts";
import type { Store } from "../../store/store.ts";
import assert from "node:assert/strict";
import { deadLetter } from "./_contract.ts";
import { kvMarksTests } from "./_kv_marks.ts";

/** Every key of `kv`, encoded as text, to show that nothing was written. */
async function keysOf(kv: Deno.Kv): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of kv.list({ prefix: [] })) {
    keys.push(JSON.stringify(entry.key));
  }
  return keys;
}

/** A refusal in the store's words, naming the field and Deno KV's limit. */
function overLimit(field: string) {
  return (error: unknown) =>
    error instanceof TypeError &&
    error.message.includes(`'${field}' makes a Deno KV key of `) &&
    error.message.includes("over Deno KV's limit of 2048") &&
    error.message.endsWith("Nothing was written.");
}

Deno.test("KvStore refuses a count, claim or job id too long for a Deno KV key in its own words, before it writes anything", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  const long = "x".repeat(3000);
  const intent = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  const before = await keysOf(kv);
  await assert.rejects(
    store.admit({ count: long, now: 0 }),
    overLimit("count"),
  );
  await assert.rejects(
    store.admit({ claim: { key: long, now: 0, expiresAt: 10 }, now: 0 }),
    overLimit("claim.key"),
  );
  await assert.rejects(
    store.putDeadLetter(deadLetter(`${long}/settle`, 5)),
    overLimit("jobId"),
  );
  await assert.rejects(
    store.putDeadLetter(deadLetter("pi_1/settle", 5), { resetCount: long }),
    overLimit("resetCount"),
  );
  // A dead letter's marks are counts of its commit.
  await assert.rejects(
    store.putDeadLetter(deadLetter("pi_1/settle", 5), {
      marks: { keys: ["givingup/qstash/message/m1", long], now: 5 },
    }),
    overLimit("marks.keys"),
  );
  // The poison resolution's one commit: the intent stays as it was.
  await assert.rejects(
    store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: intent.version,
      at: 5,
      deadLetter: { ...deadLetter("pi_1/settle", 5), jobId: long },
    }),
    overLimit("jobId"),
  );
  await assert.rejects(
    store.beginBroadcast("pi_1", intent.version, 5, {
      claim: { key: long, now: 5, expiresAt: 10 },
    }),
    overLimit("claim.key"),
  );
  assert.deepEqual(await keysOf(kv), before);
  assert.equal((await store.getIntent("pi_1"))?.version, intent.version);
  // A prefix takes its share of every key: the refusal says so.
  const tenant = new KvStore(kv, { prefix: ["t".repeat(1900)] });
  await assert.rejects(
    tenant.admit({ count: "y".repeat(200), now: 0 }),
    (error) =>
      overLimit("count")(error) &&
      (error as Error).message.includes("or the store's prefix (1902 bytes"),
  );
});

Deno.test("KvStore refuses a dead letter whose index key is over 2,048 bytes though its letter key, read first, is not", async () => {
  // Deno KV reads a key of 2,049 bytes and writes none over 2,048. The
  // letter's key is 14 bytes shorter than its index by time: a job id
  // between the two was read, then refused by Deno KV at the commit.
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  // ["relayer", "dead_by_time", n, jobId]: 9 + 14 + 9 + 2 + length.
  const jobId = "j".repeat(2048 - 34 + 1);
  await assert.rejects(
    store.putDeadLetter(deadLetter(jobId, 5)),
    overLimit("jobId"),
  );
  assert.deepEqual(await keysOf(kv), []);
});

Deno.test("KvStore reads an id too long for any of its keys as absent, as every store does", async () => {
  using kv = await Deno.openKv(":memory:");
  const long = "x".repeat(3000);
  for (const store of [new KvStore(kv), new MemoryStore()] as Store[]) {
    assert.equal(await store.getIntent(long), null);
    assert.equal(await store.getDeadLetter(long), null);
    assert.equal(await store.deliveries(long), 0);
    await assert.rejects(
      store.recordHold(long),
      (error) => error instanceof ConflictError && error.refused,
    );
    await assert.rejects(store.redrive(long, "v"), ConflictError);
  }
});

Deno.test("KvStore keeps a count, claim or lease whose time to live runs past Deno KV's calendar, as the other stores do", async () => {
  using kv = await Deno.openKv(":memory:");
  for (const store of [new KvStore(kv), new MemoryStore()] as Store[]) {
    const max = Number.MAX_SAFE_INTEGER;
    assert.equal(await store.admit({ count: "j", now: 0, ttlMs: max }), 1);
    assert.equal(await store.deliveries("j", 10 ** 15), 1);
    const claim = { key: "c", now: 0, expiresAt: max };
    assert.equal(await store.admit({ claim, now: 0 }), null);
    await assert.rejects(store.admit({ claim, now: 1 }), ReplayError);
    const created = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const taken = await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: created.version,
      at: 0,
    }, { lease: { owner: "d1", ttlMs: max - 3_600_000, now: 0, keep: true } });
    assert.equal(taken.state, "settling");
  }
});

Deno.test("KvStore under a long prefix: a group of writes over Deno KV's 80 KiB of keys set is refused whole and halved, and every write lands", async () => {
  using kv = await Deno.openKv(":memory:");
  // Each create sets two keys of about 1,520 bytes: 64 of them, 190 KiB.
  const store = new KvStore(kv, { prefix: ["t".repeat(1500)] });
  const created = await Promise.all(
    Array.from(
      { length: 65 },
      (_, i) => store.createIntent({ id: `pi_${i}`, hold: "pending" }),
    ),
  );
  assert.equal(created.length, 65);
  assert.equal((await keysOf(kv)).length, 130);
});

kvMarksTests(
  "KvStore on Deno KV",
  () => Deno.openKv(":memory:"),
  Deno.test,
);
