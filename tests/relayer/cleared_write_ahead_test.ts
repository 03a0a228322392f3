/**
 * The automatic resolution after a give-up, on an intent whose first
 * send's write-ahead another instance cleared: its clock past that send's
 * lease and `stuckAfter`, it rescued, its rescue was declared not sent, and
 * its record cleared `broadcasting`, the first send still running. Nothing
 * on record names that send but `mayHaveSent`, set by the rescue's write
 * ahead over it: the poison of the rescuing delivery and a queue's give-up
 * on a third instance send the payment to review, its hold pending, and
 * the first send's tx, returned after, is on record. On every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, type Intent, notSent, type Sender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const JOB = { intentId: "pi_1", kind: "settle" } as const;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a give-up after a rescue's not_sent record cleared a send still running sends the payment to review, its hold pending`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "authorized",
        hold: "pending",
      });
      const clock = { now: 1_000_000 };
      let finish!: (sent: { txHash: string }) => void;
      let began!: () => void;
      const sending = new Promise<void>((resolve) => began = resolve);
      const held: Sender = {
        send: () => {
          began();
          return new Promise((resolve) => finish = resolve);
        },
        receipt: () => Promise.resolve("pending"),
      };
      const refused: Sender = {
        send: (_intent: Intent) =>
          Promise.reject(notSent(new Error("rpc refused it"))),
        receipt: () => Promise.resolve("pending"),
      };
      const relayer = (sender: Sender) =>
        createRelayer({
          store,
          sender,
          policy: { maxDeliveries: 3, jitter: "none", stuckAfterMs: 1_000 },
          now: () => clock.now,
          random: () => 0,
          leaseMs: 200,
          clockSkewMs: 0,
        });
      const first = relayer(held);
      const second = relayer(refused);
      const third = relayer(refused);
      const delivery = first.deliver(JOB, 1).catch((e) => e);
      await sending;
      // The second instance's clock is past the lease and stuckAfter.
      clock.now += 1_000;
      const rescued = await second.deliver(JOB, 3);
      const cleared = await store.getIntent(JOB.intentId);
      assert.deepEqual(
        [
          cleared?.broadcasting,
          cleared?.lastBroadcast?.outcome,
          cleared?.mayHaveSent,
        ],
        [null, "not_sent", true],
        JSON.stringify({ rescued, cleared }),
      );
      const gaveUp = await third.giveUp(JOB, {
        deliveries: 3,
        queue: { queue: "cloudflare", dlqId: "cf_1" },
      });
      const reviewed = await store.getIntent(JOB.intentId);
      assert.deepEqual(
        [reviewed?.state, reviewed?.hold],
        ["needs_review", "pending"],
        JSON.stringify({ rescued, gaveUp }),
      );
      finish({ txHash: "0xfirst" });
      await delivery;
      const after = await store.getIntent(JOB.intentId);
      assert.deepEqual(
        [after?.state, after?.hold, after?.txHashes],
        ["needs_review", "pending", ["0xfirst"]],
      );
    } finally {
      await close();
    }
  });
}
