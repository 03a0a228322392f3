/**
 * KvStore beside an older revision of itself on one Deno KV, as during a
 * rolling deploy. Revisions before write ids copy every field they read
 * into what they write, the write id `w` included; a write answered
 * `{ ok: false }` (a KV Connect client's re-send) must not take such a
 * record for its own, and answer another writer's intent as if it were.
 */
import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import { type KvLike, KvStore } from "../../store/kv.ts";
import { resendingKv } from "./_resending_kv.ts";

const T = 1_000_000;
const lease = (keep: boolean) => ({
  owner: "new:1",
  ttlMs: 30_000,
  now: T,
  keep,
});

/** Deno KV whose next commit, once armed, lands, lets `after` run, and is answered `{ ok: false }`. */
function answeredLost(kv: Deno.Kv) {
  let after: (() => Promise<void>) | null = null;
  const handle = {
    getMany: kv.getMany.bind(kv),
    list: kv.list.bind(kv),
    atomic() {
      const atomic = kv.atomic();
      const commit = atomic.commit.bind(atomic);
      atomic.commit = async () => {
        const result = await commit();
        if (!result.ok || after === null) return result;
        const run = after;
        after = null;
        await run();
        return { ok: false } as const;
      };
      return atomic;
    },
  };
  return { handle, arm: (run: () => Promise<void>) => after = run };
}

/** What a revision before write ids stores over the intent: every field it read, `w` included, and its own lease. */
async function oldRevisionWrites(kv: Deno.Kv, id: string): Promise<void> {
  const key = ["relayer", "intent", id];
  const entry = await kv.get<Record<string, unknown>>(key);
  assert.ok(typeof entry.value?.w === "string", "the new write's id is there");
  const done = await kv.atomic().check(entry)
    .set(key, { ...entry.value, broadcasting: T + 5 })
    .set(["relayer", "lease", id], { owner: "old:1", expiresAt: T + 30_005 })
    .commit();
  assert.ok(done.ok);
}

Deno.test("KvStore: a write answered { ok: false } does not take an older revision's record, which copied its id, for its own", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const { handle, arm } = answeredLost(kv);
    const store = new KvStore(handle);
    await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: T,
    });
    const read = await store.getIntent("pi_1");
    const ahead = await store.beginBroadcast("pi_1", read!.version, T, {
      lease: lease(true),
    });
    arm(() => oldRevisionWrites(kv, "pi_1"));
    let answered: Awaited<ReturnType<KvStore["recordBroadcast"]>> | null = null;
    try {
      answered = await store.recordBroadcast("pi_1", ahead.version, {
        outcome: "sent",
        txHash: "0xN",
        at: T + 1,
      }, { lease: lease(false) });
    } catch (error) {
      assert.ok(error instanceof ConflictError, String(error));
    }
    const now = await store.getIntent("pi_1");
    if (answered !== null) {
      // Answered as landed: then at a version whose record it wrote.
      assert.notEqual(answered.version, now!.version);
    }
    assert.equal(now?.broadcasting, T + 5, "the older revision's write stands");
  } finally {
    kv.close();
  }
});

Deno.test("KvStore: a create answered { ok: false } that an older revision then changed is not answered with that revision's version", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const { handle, arm } = answeredLost(kv);
    const store = new KvStore(handle);
    arm(() => oldRevisionWrites(kv, "pi_2"));
    let created: Awaited<ReturnType<KvStore["createIntent"]>> | null = null;
    try {
      created = await store.createIntent({
        id: "pi_2",
        state: "settling",
        hold: "pending",
        settlingSince: T,
      });
    } catch (error) {
      assert.ok(error instanceof ConflictError, String(error));
    }
    const now = await store.getIntent("pi_2");
    if (created !== null) {
      // KvStore's version is the intent's versionstamp, then the hold's:
      // the answer's record is not the one the older revision wrote.
      assert.notEqual(
        created.version.split(":")[0],
        now!.version.split(":")[0],
      );
    }
  } finally {
    kv.close();
  }
});

/** A Deno KV whose values come back with their keys in another order (a JSONB-backed adapter, say). */
function reordering(kv: Deno.Kv): KvLike {
  const sorted = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sorted)
      : value !== null && typeof value === "object"
      ? Object.fromEntries(
        Object.keys(value).sort().map((key) => [
          key,
          sorted((value as Record<string, unknown>)[key]),
        ]),
      )
      : value;
  return {
    getMany: async (keys: Parameters<KvLike["getMany"]>[0]) =>
      (await kv.getMany(keys)).map((entry) => ({
        ...entry,
        value: sorted(entry.value),
      })) as never,
    list: kv.list.bind(kv) as KvLike["list"],
    atomic: kv.atomic.bind(kv) as KvLike["atomic"],
  } as KvLike;
}

Deno.test("KvStore: a write answered { ok: false } that landed is known in any key order, and with odd values", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(resendingKv(reordering(kv)));
    const made = await store.createIntent({
      id: "pi_3",
      state: "settling",
      hold: "pending",
      settlingSince: -0,
      mayHaveSent: true,
      txHashes: [`0x${"f".repeat(64)}`],
      lastBroadcast: {
        outcome: "unknown",
        at: Number.MAX_SAFE_INTEGER - 1,
        error: `${"x".repeat(300)}\u0000é😀`,
      },
    });
    const ahead = await store.beginBroadcast("pi_3", made.version, T, {
      lease: lease(true),
    });
    const sent = await store.recordBroadcast("pi_3", ahead.version, {
      outcome: "sent",
      txHash: "0x1",
      at: T + 2,
    }, { lease: lease(false) });
    assert.equal(sent.lastBroadcast?.txHash, "0x1");
    assert.equal((await store.getIntent("pi_3"))?.version, sent.version);
  } finally {
    kv.close();
  }
});

Deno.test("KvStore: a dead letter answered { ok: false } that landed, then replaced by another's, is known as landed by its claim", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const { handle, arm } = answeredLost(kv);
    const store = new KvStore(handle);
    const other = new KvStore(kv);
    const intent = await store.createIntent({
      id: "pi_4",
      state: "authorized",
      hold: "pending",
    });
    const letter = {
      jobId: "pi_4/settle",
      intentId: "pi_4",
      deliveries: 3,
      cause: "exhausted",
      reason: "the queue gave up after 3 deliveries",
      resolution: "job dropped, intent still authorized",
      lastError: "the qstash queue gave up",
      poisonedAt: T,
    } as const;
    // Once the letter landed, another writer's letter replaces it.
    arm(() => other.putDeadLetter({ ...letter, poisonedAt: T + 1 }));
    const claim = { key: "sig-4", now: T, expiresAt: T + 360_000 };
    await store.putDeadLetter(letter, {
      intentVersion: intent.version,
      claim,
    });
    assert.equal((await store.getDeadLetter("pi_4/settle"))?.poisonedAt, T + 1);
  } finally {
    kv.close();
  }
});
