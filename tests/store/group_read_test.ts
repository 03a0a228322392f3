import assert from "node:assert/strict";
import fc from "fast-check";
import { catchesAsync } from "../_fc.ts";
import { GroupRead, READS_IN_FLIGHT } from "../../store/_group_read.ts";
import { type KvEntryMaybe, type KvKey, KvStore } from "../../store/kv.ts";
import { CountingKv } from "../../support/counting_kv.ts";

async function opened() {
  const kv = await Deno.openKv(":memory:");
  return { kv, [Symbol.dispose]: () => kv.close() };
}

/**
 * A handle on `kv` that records every `getMany` and holds each one's
 * answer until `release()`: so a test decides what is in flight.
 */
function held(kv: Deno.Kv) {
  const calls: KvKey[][] = [];
  const waiting: { open: () => void; answered: Promise<unknown> }[] = [];
  return {
    calls,
    getMany(keys: readonly KvKey[]): Promise<KvEntryMaybe<unknown>[]> {
      calls.push([...keys]);
      let open!: () => void;
      const gate = new Promise<void>((resolve) => open = resolve);
      const answer = gate.then(() => kv.getMany(keys as Deno.KvKey[]));
      waiting.push({ open, answered: answer.catch(() => {}) });
      return answer;
    },
    /**
     * Lets every read asked for so far answer, waits for Deno KV's answers,
     * then for what they set going (the reads sent next) to settle.
     */
    async release(): Promise<void> {
      const now = waiting.splice(0);
      for (const { open } of now) open();
      await Promise.all(now.map(({ answered }) => answered));
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
  };
}

/** As many reads of `["a"]` as may be in flight: the next read must wait. */
function fillInFlight(reads: GroupRead): Promise<KvEntryMaybe<unknown>[]>[] {
  return Array.from({ length: READS_IN_FLIGHT }, () => reads.getMany([["a"]]));
}

const values = (entries: KvEntryMaybe<unknown>[]) =>
  entries.map((entry) => entry.value);

Deno.test("group read: a lone read goes at once, alone", async () => {
  using db = await opened();
  await db.kv.set(["a"], 1);
  const handle = held(db.kv);
  const reads = new GroupRead(handle);
  const read = reads.getMany([["a"], ["b"]]);
  // Sent within the call itself: no timer, no waiting for company.
  assert.deepEqual(handle.calls, [[["a"], ["b"]]]);
  await handle.release();
  assert.deepEqual(values(await read), [1, null]);
});

Deno.test(
  `group read: reads that come while ${READS_IN_FLIGHT} are in flight go out as one getMany, each answered with its own keys`,
  async () => {
    using db = await opened();
    await db.kv.atomic().set(["a"], 1).set(["b"], 2).set(["c"], 3).commit();
    const handle = held(db.kv);
    const reads = new GroupRead(handle);
    const first = fillInFlight(reads);
    const waiting = [
      reads.getMany([["b"], ["a"]]),
      reads.getMany([["c"]]),
      reads.getMany([["x"], ["c"], ["b"]]),
    ];
    assert.equal(handle.calls.length, READS_IN_FLIGHT);
    await handle.release();
    assert.deepEqual(handle.calls.slice(READS_IN_FLIGHT), [
      [["b"], ["a"], ["c"], ["x"], ["c"], ["b"]],
    ]);
    await handle.release();
    for (const read of first) assert.deepEqual(values(await read), [1]);
    assert.deepEqual(
      (await Promise.all(waiting)).map(values),
      [[2, 1], [3], [null, 3, 2]],
    );
  },
);

Deno.test("group read: queued reads that fill a getMany go at once, whatever is in flight", async () => {
  using db = await opened();
  const handle = held(db.kv);
  const reads = new GroupRead(handle);
  const all = fillInFlight(reads);
  // Five reads of two keys fill Deno KV's ten: they go without waiting
  // for a read in flight to return.
  for (let i = 0; i < 5; i++) {
    all.push(reads.getMany([["k", i], ["j", i]]));
    assert.equal(handle.calls.length, READS_IN_FLIGHT + (i === 4 ? 1 : 0));
  }
  assert.equal(handle.calls.at(-1)!.length, 10);
  // A read that does not fit what is queued waits for the next batch.
  all.push(reads.getMany([["k", 9]]));
  assert.equal(handle.calls.length, READS_IN_FLIGHT + 1);
  await handle.release();
  assert.deepEqual(handle.calls.at(-1), [["k", 9]]);
  await handle.release();
  assert.equal((await Promise.all(all)).length, READS_IN_FLIGHT + 6);
});

Deno.test("group read: queued reads that hold ten keys but do not pack into one getMany go as they pack, whatever is in flight", async () => {
  using db = await opened();
  const handle = held(db.kv);
  const reads = new GroupRead(handle);
  const all = fillInFlight(reads);
  const six = (i: number) =>
    Array.from({ length: 6 }, (_, k): KvKey => ["s", i, k]);
  // One read of six keys waits: fewer than ten keys are queued.
  all.push(reads.getMany(six(0)));
  assert.equal(handle.calls.length, READS_IN_FLIGHT);
  // A second makes twelve: more than one getMany can take, so the first
  // goes alone (six and six do not fit in ten), and the second waits.
  all.push(reads.getMany(six(1)));
  assert.equal(handle.calls.length, READS_IN_FLIGHT + 1);
  assert.deepEqual(handle.calls.at(-1), six(0));
  await handle.release();
  assert.deepEqual(handle.calls.at(-1), six(1));
  await handle.release();
  assert.equal((await Promise.all(all)).length, READS_IN_FLIGHT + 2);
});

Deno.test("group read: a read of more than ten keys, or of none, goes at once, alone, and gets Deno KV's own answer", async () => {
  using db = await opened();
  const handle = held(db.kv);
  const reads = new GroupRead(handle);
  const inFlight = fillInFlight(reads);
  const eleven = Array.from({ length: 11 }, (_, i): KvKey => ["k", i]);
  const tooMany = reads.getMany(eleven).catch((error: Error) => error);
  const none = reads.getMany([]);
  assert.deepEqual(handle.calls.slice(READS_IN_FLIGHT), [eleven, []]);
  await handle.release();
  const direct = await db.kv.getMany(eleven).catch((error: Error) => error);
  assert.ok(direct instanceof TypeError);
  const refused = await tooMany;
  assert.ok(refused instanceof TypeError);
  assert.equal(refused.message, direct.message);
  assert.deepEqual(await none, []);
  await Promise.all(inFlight);
});

Deno.test("group read: a handle that throws at once fails each read with its error", async () => {
  const broken = new Error("no handle");
  const reads = new GroupRead({
    getMany() {
      throw broken;
    },
  });
  // Alone, then four that queue behind the first two and go as a group.
  const results = await Promise.allSettled(
    Array.from({ length: 6 }, (_, i) => reads.getMany([["k", i]])),
  );
  for (const result of results) {
    assert.equal(result.status, "rejected");
    assert.equal((result as PromiseRejectedResult).reason, broken);
  }
});

Deno.test("group read: a key Deno KV refuses fails only the read that asked for it", async () => {
  using db = await opened();
  await db.kv.set(["a"], 1);
  const handle = held(db.kv);
  const reads = new GroupRead(handle);
  const inFlight = fillInFlight(reads);
  const good = reads.getMany([["a"]]);
  const tooLong = reads.getMany([["x".repeat(3000)]]).catch((e: Error) => e);
  const alsoGood = reads.getMany([["b"], ["a"]]);
  await handle.release(); // the group goes, and is refused
  await handle.release(); // each of its reads again, alone
  await handle.release();
  assert.deepEqual(values(await good), [1]);
  const refused = await tooLong;
  assert.ok(refused instanceof TypeError);
  assert.match(refused.message, /Key too large/);
  assert.deepEqual(values(await alsoGood), [null, 1]);
  for (const read of inFlight) assert.deepEqual(values(await read), [1]);
});

Deno.test("group read: on a closed handle every read of a group gets the error", async () => {
  const kv = await Deno.openKv(":memory:");
  const handle = held(kv);
  const reads = new GroupRead(handle);
  const results = Promise.allSettled(
    Array.from({ length: 6 }, (_, i) => reads.getMany([["k", i]])),
  );
  kv.close();
  for (let i = 0; i < 3; i++) await handle.release();
  assert.deepEqual(
    (await results).map((r) => r.status),
    Array(6).fill("rejected"),
  );
  assert.equal(handle.calls.length, READS_IN_FLIGHT + 1 + 4);
});

type GetMany = (keys: readonly KvKey[]) => Promise<KvEntryMaybe<unknown>[]>;

/**
 * Any writes, then any reads at once through `make`'s reader: each answers
 * as it would alone, in no more round trips than reads.
 */
function answersAsAlone(kv: Deno.Kv, make: (kv: CountingKv) => GetMany) {
  const key = fc.tuple(fc.constantFrom("a", "b", "c", "d"), fc.nat(5));
  // Sometimes a key Deno KV refuses to read, and reads of up to 12 keys:
  // a refused read and one over the limit must fail alone.
  const asked = fc.oneof(
    { arbitrary: key, weight: 30 },
    { arbitrary: fc.constant(["x".repeat(3000)] as [string]), weight: 1 },
  );
  return fc.asyncProperty(
    fc.array(fc.tuple(key, fc.integer())),
    fc.array(fc.array(asked, { maxLength: 12, size: "max" }), {
      maxLength: 40,
      size: "max",
    }),
    async (writes, asked) => {
      const atomic = kv.atomic();
      for (const [k, v] of writes) atomic.set(k, v);
      await atomic.commit();
      const counting = new CountingKv(kv);
      const read = make(counting);
      const answer = (r: PromiseSettledResult<KvEntryMaybe<unknown>[]>) =>
        r.status === "fulfilled" ? values(r.value) : "refused";
      const grouped = await Promise.allSettled(asked.map((keys) => read(keys)));
      const alone = await Promise.allSettled(
        asked.map((keys) => kv.getMany(keys)),
      );
      assert.deepEqual(grouped.map(answer), alone.map(answer));
      // A refused group costs a retry of each of its reads; else a read
      // costs at most one trip.
      if (alone.every((r) => r.status === "fulfilled")) {
        assert.ok(counting.counts.reads <= asked.length);
      }
    },
  );
}

/**
 * A broken twin: sends the reads of one tick in groups of up to ten keys,
 * but answers each read from the start of its group's entries.
 */
function misSliced(kv: CountingKv): GetMany {
  type Read = {
    keys: readonly KvKey[];
    resolve: (entries: KvEntryMaybe<unknown>[]) => void;
    reject: (error: unknown) => void;
  };
  let queue: Read[] = [];
  const send = async (group: Read[]) => {
    try {
      const entries = await kv.getMany(group.flatMap((read) => read.keys));
      for (const read of group) {
        read.resolve(entries.slice(0, read.keys.length));
      }
    } catch (error) {
      for (const read of group) read.reject(error);
    }
  };
  return (keys) =>
    new Promise((resolve, reject) => {
      queue.push({ keys, resolve, reject });
      if (queue.length > 1) return;
      queueMicrotask(() => {
        let group: Read[] = [];
        let size = 0;
        for (const read of queue) {
          if (size + read.keys.length > 10 && group.length > 0) {
            send(group);
            group = [];
            size = 0;
          }
          group.push(read);
          size += read.keys.length;
        }
        send(group);
        queue = [];
      });
    });
}

Deno.test("group read: any reads at once answer as each would alone", async () => {
  using db = await opened();
  await fc.assert(answersAsAlone(db.kv, (kv) => {
    const reads = new GroupRead(kv);
    return (keys) => reads.getMany(keys);
  }));
  assert.ok(await catchesAsync(answersAsAlone(db.kv, misSliced)));
});

Deno.test("KvStore: concurrent looks share getMany calls", async () => {
  using db = await opened();
  const counting = new CountingKv(db.kv);
  const store = new KvStore(counting);
  for (let i = 0; i < 50; i++) {
    await store.createIntent({ id: `pi_${i}`, hold: "pending" });
  }
  const fresh = new KvStore(counting);
  counting.reset();
  const intents = await Promise.all(
    Array.from({ length: 50 }, (_, i) => fresh.getIntent(`pi_${i}`)),
  );
  assert.deepEqual(intents.map((intent) => intent?.id), [
    ...Array.from({ length: 50 }, (_, i) => `pi_${i}`),
  ]);
  // Two keys a look: five looks to a getMany once two are in flight.
  assert.ok(
    counting.counts.reads <= READS_IN_FLIGHT + 10,
    `50 looks took ${counting.counts.reads} reads`,
  );
});
