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
import { createRelayer, ScriptedSender } from "../../mod.ts";
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
