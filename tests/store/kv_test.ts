import {
  type KvAtomic,
  type KvEnqueueOptions,
  type KvKey,
  type KvLike,
  KvStore,
} from "../../store/kv.ts";
import assert from "node:assert/strict";
import { BusyError } from "../../store/busy_error.ts";
import { ConflictError } from "../../store/conflict_error.ts";
import type { Intent } from "../../store/store.ts";
import { deadLetter, storeContract } from "./_contract.ts";
import { CountingKv } from "../../support/counting_kv.ts";
import {
  beforeEachCommit,
  hookedKvStore,
  recordingSets,
} from "./_hooked_kv.ts";
import {
  losingOnce,
  lostBesideRedrive,
  redriveKept,
  resendingKv,
  sentTwiceKv,
} from "./_resending_kv.ts";
import { CLAIM_GRACE_MS } from "../../store/_rules.ts";

storeContract("KvStore", async () => {
  const kv = await Deno.openKv(":memory:");
  return { ...hookedKvStore(kv), close: () => kv.close() };
}, { test: Deno.test, commitGap: true });

// Every commit lands, and is answered as a race lost: what a KV Connect
// client that sent it again (its answer lost) returns. The store must
// still do what the contract says, as if each commit had been answered.
storeContract("KvStore over a KV that re-sends its commits", async () => {
  const kv = await Deno.openKv(":memory:");
  return { ...hookedKvStore(resendingKv(kv)), close: () => kv.close() };
}, { test: Deno.test, commitGap: true });

/**
 * Creates `pi_1` settling and has `store` write ahead for `owner` at `now`,
 * keeping the lease for 60 s: a delivery in the middle of its send (or one
 * that died there).
 */
async function sending(
  store: KvStore,
  owner: string,
  now: number,
): Promise<Intent> {
  const created = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  return await store.beginBroadcast("pi_1", created.version, now, {
    lease: { owner, ttlMs: 60_000, now, keep: true },
  });
}

Deno.test("KvStore: a look reads two keys, the intent and its hold, in one getMany; a write on it then needs no read", async () => {
  using kv = await Deno.openKv(":memory:");
  const asked: number[] = [];
  const counted: KvLike = {
    getMany: (keys) => {
      asked.push(keys.length);
      return kv.getMany(keys as Deno.KvKey[]);
    },
    list: (selector, options) =>
      kv.list(selector as { prefix: Deno.KvKey }, options),
    atomic: () => kv.atomic() as unknown as KvAtomic,
  };
  const store = new KvStore(counted);
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  asked.length = 0;
  const seen = (await store.getIntent("pi_1"))!;
  assert.deepEqual(asked, [2]);
  // The write commits on what the look saw, the lease taken as absent.
  await store.transition("pi_1", {
    from: "authorized",
    to: "settling",
    version: seen.version,
    at: 1,
  }, { lease: { owner: "a", ttlMs: 60_000, now: 1, keep: true } });
  assert.deepEqual(asked, [2]);
});

Deno.test("KvStore: a hold voided after a look refuses the move to settling on what the look saw, though the intent's own key is unchanged: nothing is sent without reserved funds", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
    mayHaveSent: false,
  });
  // The delivery's look, then a cancel voids the hold: only the hold's key
  // is written, so the look's version is stale by its hold part alone.
  const seen = (await store.getIntent("pi_1"))!;
  assert.equal(await store.voidHold("pi_1"), "voided");
  await assert.rejects(
    store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: seen.version,
      at: 1,
    }, { lease: { owner: "a", ttlMs: 60_000, now: 1, keep: true } }),
    ConflictError,
  );
  const after = (await store.getIntent("pi_1"))!;
  assert.deepEqual([after.state, after.hold], ["authorized", "voided"]);
});

Deno.test("KvStore: a delivery of another instance holding the lease refuses a write on what this instance looked at", async () => {
  using kv = await Deno.openKv(":memory:");
  // Two processes on one database: each its own KvStore, its own cache.
  const counting = new CountingKv(kv);
  const a = new KvStore(kv);
  const b = new KvStore(counting);
  // a writes ahead and keeps the lease for its send.
  await sending(a, "a", 1);
  // b looks (the look does not read the lease), then tries the same.
  const seen = (await b.getIntent("pi_1"))!;
  counting.reset();
  await assert.rejects(
    b.beginBroadcast("pi_1", seen.version, 2, {
      lease: { owner: "b", ttlMs: 60_000, now: 2, keep: true },
    }),
    BusyError,
  );
  // The price of a look without the lease: b learns of a's lease from a
  // failed commit, then a fresh read; nothing of b's landed.
  assert.deepEqual(counting.counts, { reads: 1, commits: 1 });
  // Once a's lease has lapsed, b may.
  const later = (await b.getIntent("pi_1"))!;
  await b.beginBroadcast("pi_1", later.version, 60_002, {
    lease: { owner: "b", ttlMs: 60_000, now: 60_002, keep: true },
  });
});

Deno.test("KvStore: a look in the middle of this store's own send keeps the lease it wrote: the holder's record needs no read, another owner is refused before any commit", async () => {
  using kv = await Deno.openKv(":memory:");
  const counting = new CountingKv(kv);
  const store = new KvStore(counting);
  const a = { owner: "a", ttlMs: 60_000, now: 1 };
  const ahead = await sending(store, a.owner, a.now);
  // Another delivery of this process looks while a is sending.
  const seen = (await store.getIntent("pi_1"))!;
  assert.equal(seen.version, ahead.version);
  counting.reset();
  await assert.rejects(
    store.recordBroadcast("pi_1", seen.version, {
      outcome: "sent",
      txHash: "0xb",
      at: 2,
    }, { lease: { owner: "b", ttlMs: 60_000, now: 2 } }),
    BusyError,
  );
  // Refused on what this store knows, then confirmed on a fresh read.
  assert.deepEqual(counting.counts, { reads: 1, commits: 0 });
  counting.reset();
  const recorded = await store.recordBroadcast("pi_1", ahead.version, {
    outcome: "sent",
    txHash: "0xa",
    at: 3,
  }, { lease: { ...a, now: 3 } });
  assert.deepEqual(counting.counts, { reads: 0, commits: 1 });
  // Released: b may act at once, on a look, with no read of its own.
  const after = (await store.getIntent("pi_1"))!;
  assert.equal(after.version, recorded.version);
  counting.reset();
  await store.transition("pi_1", {
    from: "settling",
    to: "settled",
    version: after.version,
    at: 4,
    ledger: "capture",
  }, { lease: { owner: "b", ttlMs: 60_000, now: 4 } });
  assert.deepEqual(counting.counts, { reads: 0, commits: 1 });
});

Deno.test("KvStore: a lease a crash left is cleared by the next delivery that writes without keeping one, so the look after it is right to take the lease as absent", async () => {
  using kv = await Deno.openKv(":memory:");
  const counting = new CountingKv(kv);
  // A process writes ahead, keeps the lease and dies before its record.
  await sending(new KvStore(kv), "dead", 1);
  const store = new KvStore(counting);
  const seen = (await store.getIntent("pi_1"))!;
  counting.reset();
  // Past the lease: the write pays a failed commit and a fresh read once.
  const recorded = await store.recordBroadcast("pi_1", seen.version, {
    outcome: "unknown",
    at: 60_002,
  }, { lease: { owner: "b", ttlMs: 60_000, now: 60_002 } });
  assert.deepEqual(counting.counts, { reads: 1, commits: 2 });
  assert.equal((await kv.get(["relayer", "lease", "pi_1"])).value, null);
  // Cleared: the next look and write cost what they do on a quiet intent.
  const again = new KvStore(counting);
  const next = (await again.getIntent("pi_1"))!;
  assert.equal(next.version, recorded.version);
  counting.reset();
  await again.recordBroadcast("pi_1", next.version, {
    outcome: "sent",
    txHash: "0xc",
    at: 60_003,
  }, { lease: { owner: "c", ttlMs: 60_000, now: 60_003 } });
  assert.deepEqual(counting.counts, { reads: 0, commits: 1 });
});

Deno.test("KvStore reads an intent stored before it kept tx hashes with its last sent hash, and can capture its hold", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // As 0.1 wrote it: no `txHashes`.
    await kv.set(["relayer", "intent", "pi_old"], {
      id: "pi_old",
      state: "settling",
      lastBroadcast: { outcome: "sent", txHash: "0xold", at: 1 },
      broadcasting: null,
      mayHaveSent: true,
      settlingSince: 0,
    });
    await kv.set(["relayer", "hold", "pi_old"], "pending");
    const store = new KvStore(kv);
    assert.deepEqual((await store.getIntent("pi_old"))?.txHashes, ["0xold"]);
    assert.equal(await store.captureHold("pi_old"), "captured");
  } finally {
    kv.close();
  }
});

Deno.test("KvStore reads an intent stored without mayHaveSent as one that may have sent: its hold is not voided, nor is it failed", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // No `mayHaveSent` on record: only an explicit false says every
    // broadcast stayed home, whatever the last outcome says.
    await kv.set(["relayer", "intent", "pi_old"], {
      id: "pi_old",
      state: "settling",
      lastBroadcast: { outcome: "not_sent", at: 1 },
      broadcasting: null,
      settlingSince: 0,
    });
    await kv.set(["relayer", "hold", "pi_old"], "pending");
    const store = new KvStore(kv);
    await assert.rejects(
      store.voidHold("pi_old"),
      (error) =>
        error instanceof ConflictError && error.refused &&
        error.message.includes("money may have moved"),
    );
    const read = (await store.getIntent("pi_old"))!;
    await assert.rejects(
      store.transition("pi_old", {
        from: "settling",
        to: "failed",
        version: read.version,
        at: 2,
        ledger: "void",
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    const after = await store.getIntent("pi_old");
    assert.equal(after?.state, "settling");
    assert.equal(after?.hold, "pending");
  } finally {
    kv.close();
  }
});

Deno.test("KvStore has Deno KV expire a replay record when it lapses and a delivery count 8 days after its last write, so neither outlives its use nor goes early", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // What each set asks of Deno KV: the key's last part and its expireIn.
    const sets = recordingSets(kv);
    const store = new KvStore(sets.kv);
    const day = 24 * 60 * 60 * 1000;
    // A claim alone, a count alone, and both in one admission.
    await store.admit({
      claim: { key: "sig-1", now: 1000, expiresAt: 361_000 },
      now: 1000,
    });
    await store.admit({ count: "pi_1/settle", now: 2000 });
    await store.admit({
      count: "pi_1/settle",
      claim: { key: "sig-2", now: 3000, expiresAt: 63_000 },
      now: 3000,
    });
    // A claim that rides in a delivery's write.
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    await store.beginBroadcast("pi_1", i.version, 4000, {
      claim: { key: "sig-3", now: 4000, expiresAt: 304_000 },
    });
    assert.deepEqual(
      sets.seen.filter(([, expireIn]) => expireIn !== undefined).map((
        [key, expireIn],
      ) => [key.at(-1), expireIn]),
      [
        // A replay record waits CLAIM_GRACE_MS past its expiry: the
        // writer's clock may run ahead of another instance's that needs it.
        ["sig-1", 360_000 + CLAIM_GRACE_MS],
        ["pi_1/settle", 8 * day],
        ["sig-2", 60_000 + CLAIM_GRACE_MS],
        ["pi_1/settle", 8 * day],
        ["sig-3", 300_000 + CLAIM_GRACE_MS],
      ],
    );
  } finally {
    kv.close();
  }
});

Deno.test("KvStore has Deno KV expire a dead letter's marks as their ttlMs says (8 days unless told), so a give-up's 32-day mark does not go with a delivery count's 8", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const sets = recordingSets(kv);
    const store = new KvStore(sets.kv);
    const day = 24 * 60 * 60 * 1000;
    const [m1, m2] = [
      "givingup/qstash/message/m1",
      "givingup/qstash/message/m2",
    ];
    await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
      marks: { keys: [m1], now: 10, ttlMs: 32 * day },
    });
    await store.putDeadLetter(deadLetter("pi_2/settle", 10), {
      marks: { keys: [m2], now: 10 },
    });
    assert.deepEqual(
      sets.seen.filter(([key]) => key.includes("deliveries")).map((
        [key, expireIn],
      ) => [key.at(-1), expireIn]),
      [[m1, 32 * day], [m2, 8 * day]],
    );
    assert.equal(await store.deliveries(m1, 10 + 32 * day - 1), 1);
  } finally {
    kv.close();
  }
});

Deno.test("KvStore has Deno KV expire a lease key an hour after the lease lapses, so one a crashed delivery left does not stay until the intent's next write", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const sets = recordingSets(kv);
    const store = new KvStore(sets.kv);
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    // A delivery writes ahead with a 30 s lease, and dies holding it.
    await store.beginBroadcast("pi_1", i.version, 4000, {
      lease: { owner: "a", ttlMs: 30_000, now: 4000, keep: true },
    });
    assert.deepEqual(
      sets.seen.filter(([key]) => key.at(-2) === "lease").map(([, e]) => e),
      [30_000 + 60 * 60 * 1000],
    );
  } finally {
    kv.close();
  }
});

Deno.test("KvStore refuses a cursor whose job id no key of its can hold, in its own words rather than Deno KV's, whatever its prefix", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const refusal = (error: unknown) =>
      error instanceof TypeError &&
      error.message.startsWith(
        "Cannot list dead letters as 'cursor' is not one this store returned",
      );
    const store = new KvStore(kv);
    await assert.rejects(
      store.listDeadLetters({ cursor: `1000|${"x".repeat(3000)}` }),
      refusal,
    );
    // A long prefix leaves less room for the job id.
    const long = new KvStore(kv, { prefix: ["t".repeat(1500)] });
    await assert.rejects(
      long.listDeadLetters({ cursor: `1000|${"x".repeat(560)}` }),
      refusal,
    );
    // A job id that fits is listed after, as on every store.
    const id = `${"y".repeat(400)}/settle`;
    await long.putDeadLetter(deadLetter(id, 5));
    assert.deepEqual(
      (await long.listDeadLetters({ cursor: `6|${"x".repeat(400)}` })).items
        .map((d) => d.jobId),
      [id],
    );
  } finally {
    kv.close();
  }
});

Deno.test("KvStore takes back its own cursor when its keys are near Deno KV's 2 KiB, and refuses one that cannot be its own under a bigint prefix", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // [prefix, "dead_by_time", inverted time, "pi_N/settle"]: 2,048 bytes.
    const store = new KvStore(kv, { prefix: ["t".repeat(2010)] });
    for (const n of [1, 2, 3]) {
      await store.putDeadLetter(deadLetter(`pi_${n}/settle`, n));
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<KvStore["listDeadLetters"]>> = await store
        .listDeadLetters({ limit: 1, cursor });
      seen.push(...page.items.map((d) => d.jobId));
      cursor = page.cursor;
    } while (cursor !== null);
    assert.deepEqual(seen, ["pi_3/settle", "pi_2/settle", "pi_1/settle"]);
    // A small bigint takes a byte and its magnitude's: its cursors too are
    // taken back. [0n or 1n, prefix, "dead_by_time", time, job id]: 2,048 bytes.
    for (const [first, length] of [[0n, 2009], [1n, 2008]] as const) {
      const small = new KvStore(kv, { prefix: [first, "t".repeat(length)] });
      for (const n of [1, 2]) {
        await small.putDeadLetter(deadLetter(`pi_${n}/settle`, n));
      }
      const page = await small.listDeadLetters({ limit: 1 });
      const rest = await small.listDeadLetters({ cursor: page.cursor });
      assert.deepEqual(rest.items.map((d) => d.jobId), ["pi_1/settle"]);
    }
    // A large bigint takes its magnitude's bytes and a length byte: no key
    // of this store could be this long, and the refusal is the store's,
    // not Deno KV's.
    const big = new KvStore(kv, { prefix: [2n ** 1000n] });
    await assert.rejects(
      big.listDeadLetters({ cursor: `5|${"a".repeat(1900)}` }),
      (error) =>
        error instanceof TypeError && error.message.includes("'cursor'"),
    );
  } finally {
    kv.close();
  }
});

Deno.test("KvStore: a count answered { ok: false } that landed is not counted again when another copy's count lands before the read-back", async () => {
  using kv = await Deno.openKv(":memory:");
  const other = new KvStore(kv);
  const { lose } = losingOnce(true);
  // The first commit lands and its answer is lost; before the writer reads
  // back, a second copy of the message is counted by another instance.
  const lossy = resendingKv(
    kv,
    lose,
    () => other.admit({ count: "m-1", now: 0 }),
  );
  const store = new KvStore(lossy);
  assert.equal(await store.admit({ count: "m-1", now: 0 }), 1);
  assert.equal(await store.deliveries("m-1"), 2, "two copies, two counts");
  assert.equal(lossy.lost, 1);
});

Deno.test("KvStore: a dead letter answered { ok: false } that landed with its marks is answered as landed when a redrive took it before the read-back", async () => {
  using kv = await Deno.openKv(":memory:");
  // The letter's commit lands and its answer is lost; before the writer
  // reads back, an operator redrives the letter it kept. No claim rides
  // with it (a Cloudflare delivery's drop): only its marks keep its id.
  const { store, lost, loseNext } = lostBesideRedrive(
    kv,
    resendingKv,
    "pi_1/settle",
  );
  const read = await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  const mark = "givingup/cloudflare/dlq/msg_1";
  loseNext();
  await store.putDeadLetter({ ...deadLetter("pi_1/settle", 5) }, {
    intentVersion: read.version,
    lease: { owner: "drop", ttlMs: 1000, now: 5, keep: true },
    marks: { keys: [mark], now: 5 },
  });
  assert.equal(lost(), 1);
  // Landed, and taken: answered as a race lost, its caller would write it
  // again, and bring back the letter the redrive took.
  assert.equal(await store.deliveries(mark, 5), 1);
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
});

Deno.test("KvStore: a dead letter with neither claim nor marks answered { ok: false } that landed is answered as landed when a redrive took it before the read-back, and one that lost its race is still refused", async () => {
  using kv = await Deno.openKv(":memory:");
  const operator = new KvStore(kv);
  const { lose, loseNext } = losingOnce();
  let take = false;
  // As above, for a drop whose delivery names no message (the local
  // queue, a bridge without an id): nothing but the letter keeps its id,
  // and the redrive takes the letter.
  const lossy = resendingKv(
    kv,
    lose,
    async () => {
      if (!take) return;
      take = false;
      await redriveKept(operator, "pi_1/settle");
    },
  );
  let race: (() => Promise<unknown>) | null = null;
  const store = new KvStore(beforeEachCommit(lossy, async () => {
    const before = race;
    race = null;
    await before?.();
  }));
  const read = await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  loseNext();
  take = true;
  await store.putDeadLetter({ ...deadLetter("pi_1/settle", 5) }, {
    intentVersion: read.version,
    lease: { owner: "drop", ttlMs: 1000, now: 5, keep: true },
  });
  assert.equal(lossy.lost, 1);
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
  // Another letter lands between this one's read and its commit, and a
  // redrive takes that one before the read-back: a race lost.
  race = () => operator.putDeadLetter(deadLetter("pi_1/settle", 8));
  take = true;
  await assert.rejects(
    store.putDeadLetter(deadLetter("pi_1/settle", 7)),
    ConflictError,
  );
  assert.equal(lossy.lost, 1);
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
});

Deno.test("KvStore: a dead letter with neither claim, marks nor lease, its answer lost and the letter redriven before its commit was sent again, is not kept again by the second commit", async () => {
  using kv = await Deno.openKv(":memory:");
  // The letter's commit lands and its answer is lost; an operator
  // redrives the letter before the client sends the commit again. Its
  // checks (the letter absent, the intent as read) hold once more.
  const { store, lost, loseNext } = lostBesideRedrive(
    kv,
    sentTwiceKv,
    "pi_1/settle",
  );
  const read = await store.createIntent({ id: "pi_1" });
  loseNext();
  await store.putDeadLetter(deadLetter("pi_1/settle", 5), {
    intentVersion: read.version,
  });
  assert.equal(lost(), 1);
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
});

Deno.test("KvStore refuses a prefix that is not an array of key parts, and keeps a copy of the one it is given", async () => {
  using kv = await Deno.openKv(":memory:");
  // null too: from a JSON config (a tenant's prefix not filled in), it put
  // that tenant's intents under the default prefix, beside another's.
  for (const prefix of ["relayer", 5, [{}], [null], null]) {
    assert.throws(
      () => new KvStore(kv, { prefix: prefix as unknown as KvKey }),
      (error: Error) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /'prefix' must be an array of key parts/);
        return true;
      },
    );
  }
  assert.throws(
    () =>
      new KvStore(kv, {
        enqueueOptions: { delay: 0 } as unknown as () => KvEnqueueOptions,
      }),
    /'enqueueOptions' must be a function/,
  );
  // A caller building the next tenant's prefix in the same array does not
  // move this store's keys: its intent is still found.
  const prefix = ["tenants", "a"];
  const store = new KvStore(kv, { prefix });
  await store.createIntent({ id: "pi_0001", state: "authorized" });
  prefix[1] = "b";
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.notEqual(
    (await kv.get(["tenants", "a", "intent", "pi_0001"])).versionstamp,
    null,
  );
});

Deno.test("KvStore.releaseLease() throws a BusyError, the lease still held, when another writer's commit to the intent lands before each of its own", async () => {
  using kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv, { prefix: ["t"] });
  const read = await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
    intentVersion: read.version,
    lease: { owner: "drop", ttlMs: 1000, now: 10, keep: true },
  });
  // Another writer rewrites the intent's record right before every commit
  // of the release: each commit is a race lost.
  let commits = 0;
  const racing = beforeEachCommit(kv, async () => {
    commits++;
    const intent = await kv.get(["t", "intent", "pi_1"]);
    await kv.set(intent.key, intent.value);
  });
  const released = new KvStore(racing, { prefix: ["t"] });
  await assert.rejects(
    released.releaseLease("pi_1", "drop"),
    (error: Error) =>
      error instanceof BusyError &&
      /Cannot release the lease of pi_1: \d+ concurrent writers won the race; it lapses by itself/
        .test(error.message),
  );
  assert.ok(commits > 1, `${commits} commit(s) tried`);
  // Nothing landed: the drop's lease holds another owner off.
  const held = (await store.getIntent("pi_1"))!;
  await assert.rejects(
    store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: held.version,
      at: 20,
    }, { lease: { owner: "next", ttlMs: 1000, now: 20 } }),
    (error) => error instanceof BusyError,
  );
});

Deno.test("KvStore refuses to settle, behind a send in flight, an intent stored before contradictory imports were refused (mayHaveSent false beside its tx on record): that send may hold a fresh nonce", async () => {
  // createIntent now refuses such a record; one stored before keeps it,
  // and the capture rule still reads it as its record says.
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(kv);
    for (const mayHaveSent of [true, false]) {
      const id = `pi_old_${mayHaveSent}`;
      await store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "sent", txHash: "0x1", at: 10 },
        broadcasting: 20,
      });
      const key = ["relayer", "intent", id];
      const stored = await kv.get<Record<string, unknown>>(key);
      assert.equal(stored.value?.mayHaveSent, true);
      await kv.set(key, { ...stored.value, mayHaveSent });
      const read = (await store.getIntent(id))!;
      assert.equal(read.mayHaveSent, mayHaveSent);
      const settle = store.transition(id, {
        from: "settling",
        to: "settled",
        version: read.version,
        at: 30,
        ledger: "capture",
        confirmed: "0x1",
      });
      if (mayHaveSent) {
        assert.equal((await settle).state, "settled");
      } else {
        await assert.rejects(
          settle,
          (error) => error instanceof ConflictError && error.refused,
        );
        assert.equal((await store.getIntent(id))?.state, "settling");
      }
    }
  } finally {
    kv.close();
  }
});

Deno.test("KvStore refuses to fail an intent stored before contradictory imports were refused, whose last broadcast is unknown beside mayHaveSent false (I1)", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(kv);
    await store.createIntent({
      id: "pi_old",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: { outcome: "unknown", error: "timeout", at: 10 },
    });
    const key = ["relayer", "intent", "pi_old"];
    const stored = await kv.get<Record<string, unknown>>(key);
    await kv.set(key, { ...stored.value, mayHaveSent: false });
    const read = (await store.getIntent("pi_old"))!;
    assert.equal(read.mayHaveSent, false);
    await assert.rejects(
      store.transition("pi_old", {
        from: "settling",
        to: "failed",
        version: read.version,
        at: 30,
        ledger: "void",
        deadLetter: deadLetter("pi_old/settle", 30),
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    const after = (await store.getIntent("pi_old"))!;
    assert.deepEqual([after.state, after.hold], ["settling", "pending"]);
  } finally {
    kv.close();
  }
});

Deno.test("KvStore answers a late record on a version spelt as its own but never the intent's as a race lost: a third part, a hold's stamp that is not one, a stamp that is not lowercase hex", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(kv);
    const inReview = async (id: string) => {
      const created = await store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      const ahead = await store.beginBroadcast(id, created.version, 1);
      const review = await store.transition(id, {
        from: "settling",
        to: "needs_review",
        version: ahead.version,
        at: 2,
      });
      return { ahead: ahead.version, review };
    };
    const held = await inReview("pi_1");
    const [stamp, holdStamp] = held.ahead.split(":") as [string, string];
    assert.match(stamp, /^[0-9a-f]+$/);
    assert.match(holdStamp, /^[0-9a-f]+$/);
    const never: [string, string, string][] = [
      ["pi_1", "a third part", `${held.ahead}:0`],
      [
        "pi_1",
        "a hold's stamp past any",
        `${stamp}:${"z".repeat(holdStamp.length)}`,
      ],
      ["pi_1", "not lowercase hex", `${"0".repeat(stamp.length - 1)}G:-`],
    ];
    for (const [id, what, version] of never) {
      await assert.rejects(
        store.recordBroadcast(id, version, {
          outcome: "sent",
          txHash: "0xNEVER",
          at: 3,
        }),
        (error) => error instanceof ConflictError && !error.refused,
        what,
      );
    }
    assert.deepEqual(await store.getIntent("pi_1"), held.review);
    // The send's own version, as read: kept.
    const late = await store.recordBroadcast("pi_1", held.ahead, {
      outcome: "sent",
      txHash: "0xT",
      at: 3,
    });
    assert.deepEqual(late.txHashes, ["0xT"]);
  } finally {
    kv.close();
  }
});
