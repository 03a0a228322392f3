/**
 * A clock whose readings are whole milliseconds, but no time `Date.now()`
 * can return: before 1970 (a negative number) or past the last instant a
 * `Date` can hold (8.64 × 10^15 ms). Taken as it was, such a reading went
 * into every store as a write-ahead's time, a lease and a dead letter's
 * `poisonedAt` that no `Date` can show (`new Date(t).toISOString()` throws),
 * so an operator's answer that names the time failed later, far from the
 * cause. It is refused as a fraction or `NaN` is: naming the clock, on
 * every store, before anything is written or sent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const PAST_DATE = 8_640_000_000_000_000 + 1;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a clock reading before 1970 or past what a Date can hold fails the delivery and the give-up naming 'now', and nothing is written or sent`, async () => {
    for (const reading of [-1, -1_000_000_000_000, PAST_DATE, 2 ** 53 - 1]) {
      const { store, close } = await backend.open();
      try {
        await store.createIntent({
          id: JOB.intentId,
          state: "authorized",
          hold: "pending",
        });
        const before = await store.getIntent(JOB.intentId);
        const sender = new ScriptedSender({
          pi_0001: { sends: [{ txHash: "0xabc" }] },
        });
        const relayer = createRelayer({
          store,
          sender,
          now: () => reading,
          random: () => 0,
          policy: { maxDeliveries: 3 },
        });
        const refused = {
          name: "TypeError",
          message:
            `Cannot run a delivery as 'now' must return a time a Date can hold, in whole milliseconds from 0 (1970) to 8640000000000000, as Date.now() does: it returned ${reading}`,
        };
        for (const n of [1, 3, undefined]) {
          await assert.rejects(
            relayer.deliver(JOB, n),
            refused,
            `${reading} at ${n}`,
          );
        }
        await assert.rejects(
          relayer.giveUp(JOB, { deliveries: 3, queue: { queue: "mine" } }),
          refused,
          `${reading} at the give-up`,
        );
        assert.deepEqual(sender.calls, []);
        assert.deepEqual(await store.getIntent(JOB.intentId), before);
        assert.equal(await store.getDeadLetter(`${JOB.intentId}/settle`), null);
        assert.equal(await store.deliveries(`${JOB.intentId}/settle`, 0), 0);
      } finally {
        await close();
      }
    }
  });
}

Deno.test("MemoryStore: a clock at 0 or at the last instant a Date can hold still runs a delivery", async () => {
  for (const reading of [0, 8_640_000_000_000_000]) {
    const { store, close } = await BACKENDS[0]!.open();
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "authorized",
        hold: "pending",
      });
      const relayer = createRelayer({
        store,
        sender: new ScriptedSender({
          pi_0001: { sends: [{ txHash: "0xabc" }] },
        }),
        now: () => reading,
        random: () => 0,
      });
      const outcome = await relayer.deliver(JOB, 1);
      assert.equal(outcome.reason, "sent 0xabc, waiting for confirmation");
      assert.equal(
        (await store.getIntent(JOB.intentId))?.lastBroadcast?.at,
        reading,
      );
    } finally {
      await close();
    }
  }
});
