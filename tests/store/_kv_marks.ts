/**
 * `KvStore`'s writes that carry a queue's give-up marks
 * (`WriteOptions.unlessCounted`), and a dead letter that counts them
 * (`putDeadLetter`'s `marks`), against the limits of every Deno KV
 * back-end: one `getMany` reads at most 10 keys, and `@deno/kv` on Node and
 * a self-hosted `denokv` take at most 10 checks a commit (Deno's own, 100).
 * Run on Deno (`kv_limits_test.ts`) and on Node over `@deno/kv`
 * (`tests/node/kv_contract_node.ts`); every commit is counted and must stay
 * within 10 checks on either.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import { ConflictError } from "../../store/conflict_error.ts";
import type { RegisterTest } from "./_contract.ts";

/** A Deno KV handle as `Deno.openKv` and `@deno/kv`'s `openKv` give it. */
type Opened = KvLike & { close(): void };

/** `kv`, recording how many checks each commit holds, and keys each read. */
function counting(
  kv: KvLike,
): { handle: KvLike; checks: number[]; reads: number[] } {
  const checks: number[] = [];
  const reads: number[] = [];
  const handle: KvLike = {
    getMany: (keys) => {
      reads.push(keys.length);
      return kv.getMany(keys);
    },
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      let n = 0;
      const check = atomic.check.bind(atomic);
      atomic.check = (...entries) => {
        n += entries.length;
        return check(...entries);
      };
      const commit = atomic.commit.bind(atomic);
      atomic.commit = () => {
        checks.push(n);
        return commit();
      };
      return atomic;
    },
  };
  return { handle, checks, reads };
}

/** The write ahead of a send, with its lease, a claim and `marks`. */
function aheadOf(
  store: KvStore,
  id: string,
  version: string,
  marks: readonly string[],
) {
  return store.transition(id, {
    from: "authorized",
    to: "settling",
    version,
    at: 1,
  }, {
    lease: { owner: `d_${id}`, ttlMs: 1000, now: 0, keep: true },
    claim: { key: `sig_${id}`, now: 0, expiresAt: 60_000 },
    unlessCounted: marks,
  });
}

/** `n` give-up marks of the message delivered to `id`. */
function marksOf(id: string, n: number): string[] {
  return Array.from({ length: n }, (_, k) => `gaveup/q${k}/message/${id}`);
}

/**
 * Registers the tests for `KvStore` over the handles `open` gives.
 *
 * @param name What the tests' names start with.
 * @param open Opens an empty database.
 * @param test Registers one test (`Deno.test`, or Node's runner).
 */
export function kvMarksTests(
  name: string,
  open: () => Promise<Opened>,
  test: RegisterTest,
): void {
  test({
    name:
      `${name}: a write with 5 give-up marks fits one read and one commit of at most 10 checks, hot or cold; 6 are refused in the store's words`,
    ignore: false,
  }, async () => {
    const kv = await open();
    try {
      const { handle, checks } = counting(kv);
      const hot = new KvStore(handle);
      const cold = new KvStore(handle); // sees none of hot's reads
      for (const id of ["pi_hot", "pi_cold", "pi_marked", "pi_six"]) {
        await hot.createIntent({ id, state: "authorized", hold: "pending" });
      }
      const version = async (id: string) => (await hot.getIntent(id))!.version;
      // On a version this store saw: no read, one commit.
      const moved = await aheadOf(
        hot,
        "pi_hot",
        await version("pi_hot"),
        marksOf("pi_hot", 5),
      );
      assert.equal(moved.state, "settling");
      // On a version it did not see: the marks read with 5 other keys.
      const also = await aheadOf(
        cold,
        "pi_cold",
        await version("pi_cold"),
        marksOf("pi_cold", 5),
      );
      assert.equal(also.state, "settling");
      // The last of 5 marks on record refuses the write, hot or cold.
      const marks = marksOf("pi_marked", 5);
      await hot.admit({ count: marks[4]!, now: 0, ttlMs: 60_000 });
      for (const store of [hot, cold]) {
        await assert.rejects(
          aheadOf(store, "pi_marked", await version("pi_marked"), marks),
          (error) => error instanceof ConflictError && error.refused,
        );
      }
      assert.equal((await hot.getIntent("pi_marked"))?.state, "authorized");
      assert.ok(
        checks.every((n) => n <= 10),
        `every commit within 10 checks: ${checks}`,
      );
      // Six would pass Deno's own limits on the hot path and no other.
      for (const store of [hot, cold]) {
        await assert.rejects(
          aheadOf(store, "pi_six", await version("pi_six"), marksOf("", 6)),
          (error) =>
            error instanceof TypeError &&
            error.message.includes("'unlessCounted' must be at most 5"),
        );
      }
      assert.equal((await hot.getIntent("pi_six"))?.state, "authorized");
    } finally {
      kv.close();
    }
  });

  test({
    name:
      `${name}: Pub/Sub write-aheads at once, each with its 2 give-up marks, all land (a group over the back-end's checks is split); a marked one alone is refused`,
    ignore: false,
  }, async () => {
    const kv = await open();
    try {
      const store = new KvStore(kv);
      const ids = Array.from({ length: 8 }, (_, i) => `pi_${i}`);
      for (const id of ids) {
        await store.createIntent({ id, state: "authorized", hold: "pending" });
      }
      const read = await Promise.all(ids.map((id) => store.getIntent(id)));
      // As a Pub/Sub push's delivery carries them: its source as given,
      // and as the dead-letter copy's is matched.
      const pubsub = (id: string) => [
        `gaveup/pubsub/dlq/p/s@2026-11-30T12:00:00.000Z#${id}`,
        `gaveup/pubsub/source/p/s@1796040000000#${id}`,
      ];
      await store.admit({ count: pubsub("pi_5")[1]!, now: 0, ttlMs: 60_000 });
      const results = await Promise.allSettled(
        ids.map((id, i) => aheadOf(store, id, read[i]!.version, pubsub(id))),
      );
      assert.deepEqual(
        results.map((result) =>
          result.status === "fulfilled"
            ? result.value.state
            : result.reason instanceof ConflictError && result.reason.refused
            ? "refused"
            : String(result.reason)
        ),
        ids.map((id) => id === "pi_5" ? "refused" : "settling"),
      );
      for (const id of ids) {
        assert.equal(
          (await store.getIntent(id))?.state,
          id === "pi_5" ? "authorized" : "settling",
        );
      }
      // More at once, once the store knows the back-end's limit: each
      // lands.
      const more = ids.map((id) => `${id}_again`);
      for (const id of more) {
        await store.createIntent({ id, state: "authorized", hold: "pending" });
      }
      const again = await Promise.all(more.map((id) => store.getIntent(id)));
      const landed = await Promise.all(
        more.map((id, i) => aheadOf(store, id, again[i]!.version, pubsub(id))),
      );
      assert.deepEqual(
        landed.map((intent) => intent.state),
        more.map(() => "settling"),
      );
    } finally {
      kv.close();
    }
  });

  test({
    name:
      `${name}: a dead letter with 5 marks, a claim or none, a lease and the intent's version fits one read of 10 keys and one commit of 10 checks; a mark counted between the two refuses it whole`,
    ignore: false,
  }, async () => {
    const kv = await open();
    try {
      const { handle, checks, reads } = counting(kv);
      const store = new KvStore(handle);
      const other = new KvStore(kv);
      const marks = marksOf("pi_drop", 5).map((key) =>
        key.replace(/^gaveup/, "givingup")
      );
      const drop = async (owner: string, now: number, claimed = true) => {
        const read = (await store.getIntent("pi_drop"))!;
        checks.length = 0;
        reads.length = 0;
        return store.putDeadLetter({
          jobId: "pi_drop/settle",
          intentId: "pi_drop",
          deliveries: 5,
          cause: "exhausted",
          reason: "no luck after 5 deliveries",
          lastError: "not sent: delivery 5 is the last",
          resolution: "job dropped, intent still authorized",
          poisonedAt: now,
        }, {
          ...(claimed
            ? {
              claim: {
                key: `sig_${owner}_${now}`,
                now,
                expiresAt: now + 60_000,
              },
            }
            : {}),
          intentVersion: read.version,
          lease: { owner, ttlMs: 1000, now, keep: true },
          marks: { keys: marks, now },
          resetCount: "cloudflare/pi_drop",
        });
      };
      await store.createIntent({
        id: "pi_drop",
        state: "authorized",
        hold: "pending",
      });
      await drop("first", 0);
      assert.deepEqual([reads, checks], [[10], [10]]);
      for (const mark of marks) assert.equal(await store.deliveries(mark), 1);
      // The last mark counted by another writer after the read: the
      // letter, its lease and its other marks are refused with it.
      const atomic = handle.atomic;
      handle.atomic = () => {
        const a = atomic();
        const commit = a.commit.bind(a);
        a.commit = async () => {
          await other.admit({ count: marks[4]!, now: 10 });
          return await commit();
        };
        return a;
      };
      await assert.rejects(drop("first", 10), ConflictError);
      handle.atomic = atomic;
      assert.equal(
        (await store.getDeadLetter("pi_drop/settle"))?.poisonedAt,
        0,
      );
      assert.deepEqual(
        await Promise.all(marks.map((mark) => store.deliveries(mark))),
        [1, 1, 1, 1, 2],
      );
      // Without a claim, the job's redrive record is read and checked in
      // its place: still 10 keys and 10 checks.
      await drop("first", 20, false);
      assert.deepEqual([reads, checks], [[10], [10]]);
      assert.equal(
        (await store.getDeadLetter("pi_drop/settle"))?.poisonedAt,
        20,
      );
    } finally {
      kv.close();
    }
  });
}
