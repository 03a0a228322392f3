/**
 * A queue's give-up for a job published again, on an authorized intent
 * whose dead letter records an earlier life of the job (a drop while it was
 * created, or an earlier message's give-up): the give-up must hold the
 * intent's lease as any drop of an authorized intent's job does, or a
 * delivery of the new job still at work sends behind it and leaves the
 * intent settling with no job (found by the crash test, extended with
 * give-ups beside their last delivery and jobs published again).
 */
import assert from "node:assert/strict";
import type { Intent, ReceiptStatus, Sender } from "../../mod.ts";
import { BACKENDS, openAuthorized } from "../_stores.ts";
import { giveUpBehindDelivery } from "./_give_up_behind.ts";

/** A signer that counts sends and leaves every tx pending. */
class CountingSigner implements Sender {
  sends = 0;
  send(_intent: Intent): Promise<{ txHash: string }> {
    this.sends++;
    return Promise.resolve({ txHash: `0x${this.sends}` });
  }
  receipt(): Promise<ReceiptStatus> {
    return Promise.resolve("pending");
  }
}

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const policy = { maxDeliveries: 3, jitter: "none" } as const;

const EARLIER = [
  {
    what: "a drop while the intent was created",
    letter: {
      deliveries: 3,
      cause: "exhausted",
      reason: "no luck after 3 deliveries",
      resolution: "job dropped, intent still created",
      lastError: "not authorized yet",
    },
  },
  {
    what: "an earlier message's give-up",
    letter: {
      deliveries: 3,
      cause: "exhausted",
      reason: "the queue gave up after 3 deliveries",
      resolution: "job dropped, intent still authorized",
      lastError: "the pubsub queue gave up",
      queue: { queue: "pubsub", messageId: "m-0" },
    },
  },
] as const;

for (const backend of BACKENDS) {
  for (const { what, letter } of EARLIER) {
    Deno.test(`${backend.name}: a give-up of a job published again after ${what} keeps a delivery that looked before it from sending`, async () => {
      const { store, close } = await openAuthorized(backend, JOB.intentId);
      try {
        // The letter of the job's earlier life, long enough ago that its
        // lease (if any) has lapsed; the job is then published again (as
        // the redrive route advises for a queue of one's own, or by the
        // payments API once it authorized the intent).
        await store.putDeadLetter({
          jobId: `${JOB.intentId}/settle`,
          intentId: JOB.intentId,
          poisonedAt: Date.now() - 3_600_000,
          ...letter,
        });
        // The new job's delivery reads the intent, then its write-ahead
        // waits until the new message's give-up has landed.
        const sender = new CountingSigner();
        const { gaveUp, outcome } = await giveUpBehindDelivery(store, {
          job: JOB,
          sender,
          policy,
        });
        assert.equal(gaveUp.action, "poison");
        assert.match(gaveUp.resolution ?? "", /^job dropped/);
        assert.equal(
          sender.sends,
          0,
          `nothing sent behind the give-up (the delivery answered ${outcome.action}: ${outcome.reason})`,
        );
        assert.equal(
          (await store.getIntent(JOB.intentId))?.state,
          "authorized",
        );
      } finally {
        await close();
      }
    });
  }
}
