/**
 * Cloudflare does not say whether a message moved to the dead-letter queue
 * keeps its `attempts` (Miniflare's starts it again at 1). Kept, the
 * dead-letter queue's first delivery of a job the queue gave up on after
 * `max_retries = 9` says 10 (or 11), and a wait doubled from there asked
 * 43 min (or 85) of a give-up answered busy, where the retention rule
 * counts at most the policy's delay or a lease (2 min with the defaults).
 * The first waits on the dead-letter queue are the same either way.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, type Relayer } from "../../mod.ts";
import {
  createQueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";
import { cloudflareDeadLetterWaitSeconds } from "../../policy/_cloudflare_retention.ts";
import { heldWrites } from "../_held_writes.ts";

/** What the handler asked of one dead-letter message with `attempts`. */
async function asked(relayer: Relayer, attempts: number): Promise<string> {
  const queue = createQueueHandler({
    relayer,
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  const calls: string[] = [];
  const message: QueueMessage = {
    id: "m1",
    body: { intentId: "pi_0001", kind: "settle" },
    attempts,
    ack: () => calls.push("ack"),
    retry: (options) => calls.push(`retry ${options?.delaySeconds}`),
  };
  await queue({ queue: "relayer-jobs-dlq", messages: [message] });
  return calls.join();
}

const sender = {
  send: () => Promise.reject(new Error("no send expected")),
  receipt: () => Promise.resolve("pending" as const),
};

Deno.test("createQueueHandler() asks the same bounded wait of a dead-letter message's first delivery whether Cloudflare kept its attempts (10, 11) or started them again (1)", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  // A give-up answered busy (another session's lock holds the intent).
  const busy = createRelayer({
    store: heldWrites(memory),
    sender,
    random: () => 0.5,
  });
  const limits = {
    baseMs: busy.policy.baseMs,
    capMs: busy.policy.capMs,
    maxRetries: 9,
  };
  const counted = cloudflareDeadLetterWaitSeconds(limits); // 120 s
  const restarted = await asked(busy, 1);
  for (const attempts of [10, 11]) {
    assert.equal(
      await asked(busy, attempts),
      restarted,
      `attempts ${attempts}`,
    );
  }
  const seconds = Number(restarted.replace("retry ", ""));
  assert.ok(
    seconds >= 1 && seconds <= counted,
    `a busy give-up asked ${restarted}, more than the ${counted} s the retention rule counts`,
  );
  // A give-up that met the store down: the outage's first wait, the base.
  const down: Relayer = {
    ...busy,
    giveUp: () => Promise.reject(new Error("connection to db:5432 refused")),
  };
  for (const attempts of [1, 10, 11]) {
    assert.equal(
      await asked(down, attempts),
      "retry 5",
      `attempts ${attempts}`,
    );
  }
});
