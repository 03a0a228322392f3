/**
 * A late copy of a message the queue gave up on sends nothing, even when
 * it loses the race for the first send to a job published since: planned
 * again on the settling intent, its rescue's write ahead carries the
 * message's give-up marks too.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender, type Store } from "../../mod.ts";
import {
  gateTransitions,
  kvBackend,
  memoryBackend,
  openAuthorized,
} from "../_stores.ts";

const LEASE_MS = 10_000;
const SKEW_MS = 2_000;
const T0 = 1_000_000;
/** Past a give-up's lease, on every instance's clock. */
const PAST_LEASE_MS = LEASE_MS + 2 * SKEW_MS + 1;
const LATE_COPY =
  "the queue gave up on this message before: a late copy, nothing sent";

for (const backend of [memoryBackend, kvBackend]) {
  Deno.test(`a late copy that loses the race for the first send to a job published since sends no rescue beside it [${backend.name}]`, async () => {
    // Found by the money race (tests/relayer/money_race_test.ts, seed
    // 1147943205, path "534:3:2:4:4:5:5:5:5:5:5:6"): the queue
    // gave up on pubsub/m1 (job dropped, intent authorized); past the
    // give-up's lease a job published afresh and a late copy of m1 both
    // read the intent authorized. The fresh job wrote ahead first and sent
    // 0x1; the copy's write-ahead, a lost race and not the marks' refusal,
    // planned again on settling and, 0x1 dropped, rescued it: a second
    // send, by a message the queue had given up on.
    const { store, close } = await openAuthorized(backend, "pi_1");
    try {
      const clock = { t: T0 };
      const sender = new ScriptedSender({
        pi_1: {
          sends: [{ txHash: "0x1" }, { txHash: "0x2" }],
          receipts: ["dropped"],
        },
      });
      const relayerOn = (on: Store) =>
        createRelayer({
          store: on,
          sender,
          policy: { maxDeliveries: 2, jitter: "none" },
          now: () => clock.t,
          leaseMs: LEASE_MS,
          clockSkewMs: SKEW_MS,
        });
      const job = { intentId: "pi_1", kind: "settle" } as const;
      const m1 = { queue: "pubsub", messageId: "m1" } as const;
      const gaveUp = await relayerOn(store).giveUp(job, {
        deliveries: 2,
        queue: m1,
      });
      assert.equal(gaveUp.action, "poison");
      clock.t += PAST_LEASE_MS;
      const gate = gateTransitions(store);
      const late = relayerOn(gate.store).deliver(job, undefined, {
        message: m1,
        countAs: "pubsub/m1",
      });
      await gate.reached; // the copy read the intent authorized
      const fresh = await relayerOn(store).deliver(job, 1, {
        message: { queue: "qstash", messageId: "fresh" },
      });
      assert.equal(fresh.reason, "sent 0x1, waiting for confirmation");
      gate.release();
      assert.deepEqual(await late, {
        action: "done",
        delivery: 1,
        reason: LATE_COPY,
      });
      assert.equal(
        sender.calls.filter((call) => call.method === "send").length,
        1,
      );
      const intent = await store.getIntent("pi_1");
      assert.equal(intent?.broadcasting, null);
      assert.deepEqual(intent?.txHashes, ["0x1"]);
    } finally {
      await close();
    }
  });
}
