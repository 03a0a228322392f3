/**
 * How many Deno KV round trips each delivery path costs on `KvStore`,
 * pinned exactly so a change that adds one is seen, and checked against
 * the targets: a retry delivery at most 2 reads and 2 commits, a
 * poison resolution at most 3 commits. `deno task kv-ops` prints the same
 * numbers as a table.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../store/kv.ts";
import { CountingKv, type KvCounts } from "./_counting_kv.ts";
import {
  measurePath,
  type PathId,
  pathOf,
  PATHS,
  resolutionCalls,
} from "./_paths.ts";

// Measured on Deno 2.9.6; a change here is a change in round trips.
const EXPECTED: Readonly<Record<PathId, KvCounts>> = {
  a: { reads: 1, commits: 0 }, // one look: no lease, no write
  b: { reads: 6, commits: 5 }, // look, lease, re-read, settling, renew, record, release
  c: { reads: 1, commits: 0 }, // one look (and the receipt)
  d: { reads: 4, commits: 3 }, // look, lease, re-read, capture + settle, release
  e: { reads: 8, commits: 6 }, // b's writes + re-read, void and fail
  f: { reads: 4, commits: 3 }, // look, lease, re-read, dead letter, release
  g: { reads: 2, commits: 1 }, // a + counting the delivery
};

const EXPECTED_RESOLUTION: Readonly<
  Partial<Record<PathId, KvCounts & { methods: readonly string[] }>>
> = {
  // The re-read, then the void, the failed state and the dead letter in
  // one commit (its one read fetches the intent, hold and older dead letter).
  e: { reads: 2, commits: 1, methods: ["getIntent", "transition"] },
  f: { reads: 2, commits: 1, methods: ["getIntent", "putDeadLetter"] },
};

const RETRY_TARGET: KvCounts = { reads: 2, commits: 2 };
const RESOLUTION_COMMIT_TARGET = 3;

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

Deno.test("createRelayer() over KvStore keeps a queue-counted retry delivery within 2 reads and 2 commits", async () => {
  const { total } = await measurePath(pathOf("a"));
  assert.ok(total.reads <= RETRY_TARGET.reads, `${total.reads} reads`);
  assert.ok(total.commits <= RETRY_TARGET.commits, `${total.commits} commits`);
});

Deno.test("createRelayer() over KvStore keeps every poison resolution within 3 commits", async () => {
  const poisons = PATHS.filter((p) => p.outcome.action === "poison");
  assert.deepEqual(poisons.map((p) => p.id), ["e", "f"]);
  for (const path of poisons) {
    const { resolution } = await measurePath(path);
    assert.ok(resolution, `path ${path.id} has no resolution`);
    assert.ok(
      resolution.commits <= RESOLUTION_COMMIT_TARGET,
      `path ${path.id}: ${resolution.commits} commits`,
    );
  }
});
