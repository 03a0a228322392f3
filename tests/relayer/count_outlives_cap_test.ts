/**
 * A delivery count the store keeps (the local Deno KV queue, and the
 * generic route without `delivery`) lived 8 days after its last write,
 * whatever the policy's delays: with a `CAP` past that (the local queue
 * takes up to 720h), the count lapsed between two deliveries, each came
 * as the first again, and the job was never poisoned (DESIGN §3: at most
 * `maxDeliveries`), its intent never resolved (§5). The count now lives
 * 8 days past the longest wait the relayer asks for, on every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const DAY = 86_400_000;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: createRelayer() counts a job's deliveries across waits of a cap past 8 days, and poisons it at maxDeliveries`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({ id: "pi_0001", state: "created" });
      let now = 1_000_000;
      const relayer = createRelayer({
        store,
        sender: new ScriptedSender({}),
        policy: {
          maxDeliveries: 3,
          baseMs: 10 * DAY,
          capMs: 10 * DAY,
          jitter: "none",
          stuckAfterMs: 0,
        },
        now: () => now,
      });
      const job = { intentId: "pi_0001", kind: "settle" } as const;
      const seen: string[] = [];
      for (let i = 0; i < 3; i++) {
        const outcome = await relayer.deliver(job); // counted in the store
        seen.push(`#${outcome.delivery} ${outcome.action}`);
        if (outcome.action !== "retry") break;
        now += outcome.delayMs; // the queue waits what it was asked
      }
      assert.deepEqual(seen, ["#1 retry", "#2 retry", "#3 poison"]);
      const letter = await store.getDeadLetter("pi_0001/settle");
      assert.equal(letter?.deliveries, 3);
      assert.equal(letter?.resolution, "job dropped, intent still created");
    } finally {
      await close();
    }
  });
}

Deno.test("createRelayer() keeps a count 8 days past a busy delivery's longest wait (leaseMs and clockSkewMs twice) where that passes the cap, and at most 1,000 years", async () => {
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  /** The job's count read at each of `at` ms after its first delivery. */
  async function livesAfter(
    policy: { baseMs: number; capMs: number },
    options: { leaseMs?: number; clockSkewMs?: number },
    at: readonly number[],
  ): Promise<number[]> {
    const store = new MemoryStore();
    await store.createIntent({ id: "pi_0001", state: "created" });
    const now = 1_000_000;
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({}),
      policy: { maxDeliveries: 3, ...policy, jitter: "none", stuckAfterMs: 0 },
      now: () => now,
      ...options,
    });
    assert.equal((await relayer.deliver(job)).action, "retry");
    return await Promise.all(
      at.map((ms) => store.deliveries("pi_0001/settle", now + ms)),
    );
  }
  // A minute's cap, a 10-day lease and 5 days of skew: 8 + 10 + 2 × 5 days.
  assert.deepEqual(
    await livesAfter(
      { baseMs: 60_000, capMs: 60_000 },
      { leaseMs: 10 * DAY, clockSkewMs: 5 * DAY },
      [28 * DAY - 1, 28 * DAY],
    ),
    [1, 0],
  );
  // A cap of 2,000 years: the count lives 1,000 years (a safe integer).
  const YEAR = 365 * DAY;
  assert.deepEqual(
    await livesAfter(
      { baseMs: 2_000 * YEAR, capMs: 2_000 * YEAR },
      {},
      [1_000 * YEAR - 1, 1_000 * YEAR],
    ),
    [1, 0],
  );
});
