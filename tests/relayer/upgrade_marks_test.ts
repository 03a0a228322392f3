/**
 * A give-up an earlier version resolved, served by this one
 * (docs/upgrading.md): the earlier version kept the letter and marked the
 * message only once resolved (`gaveup/…`), never with the marks a delivery
 * carries (`givingup/…`). The records are written here by hand, as that
 * version wrote them (the same formats: a review drove it on a KV file
 * and on PostgreSQL and read them back with this one).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { BACKENDS, openAuthorized } from "../_stores.ts";

const T0 = 1_000_000;
const LEASE_MS = 10_000;
/** How long a give-up's marks live (32 days), as the earlier version kept them. */
const MARK_MS = 32 * 24 * 60 * 60 * 1000;
const LATE_COPY =
  "the queue gave up on this message before: a late copy, nothing sent";

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a late copy of a message an earlier version gave up on sends, until the queue's repeat of that give-up reaches this version`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_1");
    try {
      const clock = { t: T0 };
      const sender = new ScriptedSender({
        pi_1: { sends: [{ txHash: "0x1" }], receipts: ["pending"] },
      });
      const relayer = createRelayer({
        store,
        sender,
        policy: { maxDeliveries: 3, jitter: "none" },
        now: () => clock.t,
        leaseMs: LEASE_MS,
      });
      const job = { intentId: "pi_1", kind: "settle" } as const;
      const m1 = { queue: "qstash", messageId: "m1" } as const;
      // What the earlier version's give-up left: the job dropped on its
      // letter, the intent authorized, and the resolved give-up's mark.
      await store.putDeadLetter({
        jobId: "pi_1/settle",
        intentId: "pi_1",
        deliveries: 3,
        cause: "exhausted",
        reason: "the queue gave up after 3 deliveries",
        resolution: "job dropped, intent still authorized",
        lastError: "the qstash queue gave up",
        poisonedAt: T0,
        queue: m1,
      });
      await store.admit({
        count: "gaveup/qstash/message/m1",
        now: T0,
        ttlMs: MARK_MS,
      });
      clock.t += 2 * LEASE_MS;

      // The queue's repeat of that give-up, on this version: answered as
      // the first, and the message marked as a delivery looks for it.
      const repeat = await relayer.giveUp(job, { deliveries: 3, queue: m1 });
      assert.equal(repeat.action, "poison");
      assert.equal(repeat.resolution, "job dropped, intent still authorized");
      const late = await relayer.deliver(job, 4, { message: m1 });
      assert.deepEqual(late, {
        action: "done",
        delivery: 4,
        reason: LATE_COPY,
      });
      assert.equal(
        sender.calls.filter((call) => call.method === "send").length,
        0,
      );

      // Without that repeat, a late copy is not known: it sends, as
      // upgrading.md says, and leaves the intent settling.
      const m2 = { queue: "qstash", messageId: "m2" } as const;
      await store.admit({
        count: "gaveup/qstash/message/m2",
        now: clock.t,
        ttlMs: MARK_MS,
      });
      const sent = await relayer.deliver(job, 2, { message: m2 });
      assert.equal(sent.reason, "sent 0x1, waiting for confirmation");
      assert.equal((await store.getIntent("pi_1"))?.state, "settling");
    } finally {
      await close();
    }
  });
}
