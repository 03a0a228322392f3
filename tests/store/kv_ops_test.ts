/**
 * How many Deno KV round trips each delivery path costs on `KvStore`,
 * pinned exactly so a change that adds one is seen, and checked against
 * the commit floor: a first delivery at most 2 commits (the write-ahead
 * with the lease, the record with its release), a declared poison at most
 * 3, an exhausted resolution at most 2, a waiting retry none (1 when the
 * store counts it). `deno task kv-ops` prints the same numbers as a table.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ReplayError, ScriptedSender } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { CountingKv, type KvCounts } from "../../support/counting_kv.ts";
import {
  measurePath,
  type PathId,
  pathOf,
  PATHS,
  resolutionCalls,
} from "../../support/store_paths.ts";

// Measured on Deno 2.9.6; a change here is a change in round trips.
const EXPECTED: Readonly<Record<PathId, KvCounts>> = {
  a: { reads: 1, commits: 0 }, // one look: no lease, no write
  b: { reads: 1, commits: 2 }, // look; settling + write-ahead + lease; record + release (both on what was seen)
  c: { reads: 1, commits: 0 }, // one look (and the receipt)
  d: { reads: 1, commits: 1 }, // look; capture + settled, checked against the lease
  e: { reads: 3, commits: 3 }, // b's two commits; re-read; void + failed + dead letter
  f: { reads: 3, commits: 1 }, // look; re-read; the dead letter
  g: { reads: 2, commits: 1 }, // counting the delivery; a
};

const EXPECTED_RESOLUTION: Readonly<
  Partial<Record<PathId, KvCounts & { methods: readonly string[] }>>
> = {
  // The re-read, then the void, the failed state and the dead letter in
  // one commit (its one read fetches the intent, hold, lease and older
  // dead letter). A dead letter is read first only where the job may have
  // been resolved before (an intent past settling, a queue's give-up).
  e: { reads: 2, commits: 1, methods: ["getIntent", "transition"] },
  f: { reads: 2, commits: 1, methods: ["getIntent", "putDeadLetter"] },
};

Deno.test("CountingKv counts getMany and list as reads, and each commit as one", async () => {
  using kv = await Deno.openKv(":memory:");
  const counting = new CountingKv(kv);
  await counting.getMany([["a"], ["b"]]);
  for await (const _ of counting.list({ prefix: [] })) {
    // Draining the iterator is still one list call.
  }
  assert.deepEqual(counting.counts, { reads: 2, commits: 0 });

  await counting.atomic().set(["a"], 1).set(["b"], 2).commit();
  await counting.atomic().check({ key: ["a"], versionstamp: null }).commit();
  assert.deepEqual(counting.counts, { reads: 2, commits: 2 });
});

Deno.test("CountingKv passes a commit's result through with its versionstamp", async () => {
  using kv = await Deno.openKv(":memory:");
  const counting = new CountingKv(kv);
  const result = await counting.atomic().set(["a"], 1).commit();
  assert.equal(result.ok, true);
  assert.ok("versionstamp" in result);
  assert.equal(typeof result.versionstamp, "string");
  const lost = await counting.atomic()
    .check({ key: ["a"], versionstamp: null }).set(["a"], 2).commit();
  assert.equal(lost.ok, false);
  assert.equal(counting.counts.commits, 2);
});

Deno.test("CountingKv.reset() sets both counts back to zero", async () => {
  using kv = await Deno.openKv(":memory:");
  const counting = new CountingKv(kv);
  const store = new KvStore(counting);
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  assert.notDeepEqual(counting.counts, { reads: 0, commits: 0 });
  counting.reset();
  assert.deepEqual(counting.counts, { reads: 0, commits: 0 });
  await store.getIntent("pi_0001");
  assert.deepEqual(counting.counts, { reads: 1, commits: 0 });
});

for (const path of PATHS) {
  const { reads, commits } = EXPECTED[path.id];
  Deno.test(`createRelayer() over KvStore costs ${reads} reads and ${commits} commits for ${path.name} (path ${path.id})`, async () => {
    // measurePath() throws if the delivery took another branch.
    const measured = await measurePath(path);
    assert.deepEqual(measured.total, EXPECTED[path.id]);
  });
}

for (const [id, expected] of Object.entries(EXPECTED_RESOLUTION)) {
  const path = pathOf(id as PathId);
  Deno.test(
    `createRelayer() over KvStore resolves ${path.name} (path ${id}) in ${expected.reads} reads and ${expected.commits} commit${
      expected.commits === 1 ? "" : "s"
    }`,
    async () => {
      const measured = await measurePath(path);
      assert.deepEqual(
        resolutionCalls(measured.calls).map((c) => c.method),
        expected.methods,
      );
      assert.deepEqual(measured.resolution, {
        reads: expected.reads,
        commits: expected.commits,
      });
    },
  );
}

/** The commit floor of each path: what write-ahead needs, and no more. */
const FLOOR: Readonly<Partial<Record<PathId, number>>> = {
  a: 0, // a waiting retry writes nothing
  b: 2, // one commit before the send, one after
  e: 3, // a declared poison: b's two, then the resolution
  f: 2, // an exhausted resolution
  g: 1, // a waiting retry counted in the store
};

for (const [id, floor] of Object.entries(FLOOR)) {
  const path = pathOf(id as PathId);
  Deno.test(`createRelayer() over KvStore stays at the commit floor for ${path.name}: at most ${floor}`, async () => {
    const { total } = await measurePath(path);
    assert.ok(total.commits <= floor, `${total.commits} commits`);
  });
}

Deno.test("createRelayer() over KvStore: a signed delivery's replay record rides in its first commit, or is its one commit when it only looks", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const counting = new CountingKv(kv);
    const store = new KvStore(counting);
    await store.createIntent({
      id: "pi_w",
      state: "authorized",
      hold: "pending",
    });
    await store.createIntent({ id: "pi_l", state: "created" });
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({ pi_w: { sends: [{ txHash: "0x1" }] } }),
      now: () => 0,
      random: () => 0,
    });
    const claim = (key: string) => ({ key, now: 0, expiresAt: 360_000 });
    counting.reset();
    await relayer.deliver({ intentId: "pi_w", kind: "settle" }, 1, {
      claim: claim("sig-w"),
    });
    assert.equal(
      counting.counts.commits,
      2,
      "write-ahead + record, as unsigned",
    );
    counting.reset();
    await relayer.deliver({ intentId: "pi_l", kind: "settle" }, 1, {
      claim: claim("sig-l"),
    });
    assert.deepEqual(
      counting.counts,
      { reads: 1, commits: 1 },
      "the look, and the replay record alone: no read of its own",
    );
    await assert.rejects(
      relayer.deliver({ intentId: "pi_w", kind: "settle" }, 2, {
        claim: claim("sig-w"),
      }),
      ReplayError,
    );
  } finally {
    kv.close();
  }
});
