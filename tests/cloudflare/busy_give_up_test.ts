/**
 * A give-up on the dead-letter queue whose store is busy (another
 * database session's lock, its statements cancelled): not a lease that
 * lapses within seconds, so it can last as long as an outage. Retried at
 * the policy's pace (at most its cap, 2 min by default), the dead-letter
 * queue's 100 retries ran out within hours, and Cloudflare deleted the
 * message: the intent was left with no job and no dead letter. A retry on
 * the dead-letter queue waits at least what a give-up that met the store
 * down waits, so its retries span Cloudflare's retention either way.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createQueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";
import { createRelayer, MemoryStore, type Relayer } from "../../mod.ts";
import { heldWrites } from "../_held_writes.ts";

/**
 * `memory` holding an authorized intent `pi_0001` with its hold pending,
 * and a relayer (jitter 0.5, no send expected) whose every write on it is
 * refused busy, as another session's lock holds its row.
 */
async function busyGiveUp(): Promise<
  { memory: MemoryStore; relayer: Relayer }
> {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store: heldWrites(memory),
    sender: {
      send: () => Promise.reject(new Error("no send expected")),
      receipt: () => Promise.resolve("pending"),
    },
    random: () => 0.5,
  });
  return { memory, relayer };
}

Deno.test("createQueueHandler() retries a give-up its store answers busy on the dead-letter queue as long as one that met the store down: its 100 retries outlast 14 days", async () => {
  const { memory, relayer } = await busyGiveUp();
  const queue = createQueueHandler({
    relayer,
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  let spanS = 0;
  for (let attempts = 1; attempts <= 100; attempts++) {
    const calls: string[] = [];
    const message: QueueMessage = {
      id: "m1",
      body: { intentId: "pi_0001", kind: "settle" },
      attempts,
      ack: () => calls.push("ack"),
      retry: (options) => {
        calls.push("retry");
        spanS += options?.delaySeconds ?? 0;
      },
    };
    await queue({ queue: "relayer-jobs-dlq", messages: [message] });
    assert.deepEqual(calls, ["retry"], `attempt ${attempts}`);
  }
  assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
  assert.ok(
    spanS >= 14 * 24 * 60 * 60,
    `the dead-letter queue's retries of a busy give-up span ${spanS}s, less than 14 days`,
  );
});
