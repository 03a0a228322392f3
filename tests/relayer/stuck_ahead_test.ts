/**
 * An instance whose clock runs behind the one that moved a payment to
 * settling (or recorded its last broadcast) reads those times ahead of its
 * own clock. Its "waiting" reason (the delivery's reason, and a dead
 * letter's `lastError` on the last delivery) said the payment had been
 * settling for a negative time ("settling for -1m0s without tx hash"),
 * which reads as a bug and says nothing of the clocks. It says 0s, and
 * how far ahead of this clock the intent's time is, on every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const T = 1_800_000_000_000;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a settling payment whose last broadcast is timed ahead of this clock waits, saying how far ahead, never a negative time`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "settling",
        hold: "pending",
        settlingSince: T + 60_000,
        lastBroadcast: { outcome: "unknown", error: "timeout", at: T + 60_000 },
      });
      const sender = new ScriptedSender({ pi_0001: { sends: [] } });
      const relayer = createRelayer({
        store,
        sender,
        now: () => T,
        random: () => 0,
        clockSkewMs: 120_000,
        policy: { maxDeliveries: 3 },
      });
      const first = await relayer.deliver(JOB, 1);
      assert.equal(first.action, "retry");
      assert.equal(
        first.reason,
        "settling for 0s without tx hash, waiting (its time is 1m0s ahead of this clock)",
      );
      const last = await relayer.deliver(JOB, 3);
      assert.equal(last.action, "poison");
      assert.equal(
        (await store.getDeadLetter("pi_0001/settle"))?.lastError,
        "settling for 0s without tx hash, waiting (its time is 1m0s ahead of this clock)",
      );
      assert.deepEqual(sender.calls, []);
    } finally {
      await close();
    }
  });
}

Deno.test("MemoryStore: within this clock, the waiting reason is as before", async () => {
  const { store, close } = await BACKENDS[0]!.open();
  try {
    await store.createIntent({
      id: JOB.intentId,
      state: "settling",
      hold: "pending",
      settlingSince: T - 5_000,
      lastBroadcast: { outcome: "unknown", error: "timeout", at: T - 5_000 },
    });
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({ pi_0001: { sends: [] } }),
      now: () => T,
    });
    assert.equal(
      (await relayer.deliver(JOB, 1)).reason,
      "settling for 5s without tx hash, waiting",
    );
  } finally {
    await close();
  }
});

Deno.test("MemoryStore: a broadcast timed at this clock's very millisecond is no time ahead; one a millisecond later is", async () => {
  const reasons: Record<string, string | undefined> = {};
  for (const ahead of [0, 1]) {
    const { store, close } = await BACKENDS[0]!.open();
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "settling",
        hold: "pending",
        settlingSince: T + ahead,
        lastBroadcast: { outcome: "unknown", error: "timeout", at: T + ahead },
      });
      const relayer = createRelayer({
        store,
        sender: new ScriptedSender({ pi_0001: { sends: [] } }),
        now: () => T,
      });
      reasons[ahead] = (await relayer.deliver(JOB, 1)).reason;
    } finally {
      await close();
    }
  }
  assert.deepEqual(reasons, {
    0: "settling for 0s without tx hash, waiting",
    1: "settling for 0s without tx hash, waiting (its time is 1ms ahead of this clock)",
  });
});
