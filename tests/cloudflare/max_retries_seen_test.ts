/**
 * The handler is told the jobs consumer's `max_retries` (`maxRetries`,
 * `CLOUDFLARE_MAX_RETRIES`) and cannot read wrangler's: a message on the
 * jobs queue delivered more than `maxRetries + 1` times proves the
 * consumer's is higher. Then the give-up records `maxRetries + 1`
 * deliveries where the queue made more, and the retention check counted
 * the waits of too few retries (a retention they outlast deletes the
 * message with no dead letter). The handler says so, once, in the worker
 * log. (A `max_retries` lower than `maxRetries` shows on no message: the
 * dead-letter queue's message carries no count of the jobs queue's, and a
 * retried delivery writes nothing the give-up could read.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import {
  createQueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";

function message(attempts: number, id = `m${attempts}`): QueueMessage {
  return {
    id,
    body: { intentId: "pi_0001", kind: "settle" },
    attempts,
    ack: () => {},
    retry: () => {},
  };
}

Deno.test("createQueueHandler() says once that the consumer's max_retries is higher than maxRetries when a message on the jobs queue is delivered more than maxRetries + 1 times", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const lines: string[] = [];
  const queue = createQueueHandler({
    relayer: createRelayer({
      store,
      sender: new ScriptedSender({}),
      random: () => 0,
    }),
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    log: (line) => lines.push(line),
  });
  const told = () => lines.filter((line) => /max_retries/.test(line));
  // The 10th delivery is the last maxRetries 9 allows: nothing to say.
  await queue({ queue: "relayer-jobs", messages: [message(10)] });
  assert.deepEqual(told(), []);
  // On the dead-letter queue a count says nothing of the jobs queue's.
  await queue({ queue: "relayer-jobs-dlq", messages: [message(12, "d1")] });
  assert.deepEqual(told(), []);
  await queue({ queue: "relayer-jobs", messages: [message(11)] });
  assert.deepEqual(told(), [
    "worker  message m11 on relayer-jobs is its delivery 11, past the 10 maxRetries 9 allows: the consumer's max_retries in wrangler.toml is higher than maxRetries (CLOUDFLARE_MAX_RETRIES), so a give-up records 10 deliveries where the queue made more, and the retention check counted too few retries. Set them to the same number",
  ]);
  // Once: a backlog of such messages does not flood the log.
  await queue({ queue: "relayer-jobs", messages: [message(12), message(13)] });
  assert.equal(told().length, 1);
});
