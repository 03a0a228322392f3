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
import {
  createRelayer,
  definePolicy,
  MemoryStore,
  type Relayer,
} from "../../mod.ts";
import {
  createQueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";
import { cloudflareDeadLetterWaitSeconds } from "../../policy/_cloudflare_retention.ts";
import { busyGiveUp } from "./_busy_give_up.ts";
import { modelOf } from "../_queue_sim.ts";

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

/**
 * The fewest deadLetterMaxRetries `createQueueHandler` takes with `relayer`
 * and `maxRetries` (each fewer refused with a RangeError), and the handler
 * it makes with them; it throws where none up to 100 is taken.
 */
function fewestTaken(
  relayer: Relayer,
  maxRetries: number,
): { fewest: number; queue: ReturnType<typeof createQueueHandler> } {
  const handler = (deadLetterMaxRetries: number) =>
    createQueueHandler({
      relayer,
      maxRetries,
      deadLetterQueue: "relayer-jobs-dlq",
      deadLetterMaxRetries,
    });
  let fewest = 0;
  while (fewest <= 100) {
    try {
      handler(fewest);
      break;
    } catch (error) {
      assert.ok(error instanceof RangeError, String(error));
      fewest++;
    }
  }
  return { fewest, queue: handler(fewest) };
}

const sender = {
  send: () => Promise.reject(new Error("no send expected")),
  receipt: () => Promise.resolve("pending" as const),
};

Deno.test("createQueueHandler() asks the same bounded wait of a dead-letter message's first delivery whether Cloudflare kept its attempts (10, 11) or started them again (1)", async () => {
  // A give-up answered busy (another session's lock holds the intent).
  const { relayer: busy } = await busyGiveUp();
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

Deno.test("createQueueHandler() takes a deadLetterMaxRetries only where the waits it asks of a give-up that keeps meeting the store down span 14 days, attempts counted from 1 on the dead-letter queue", async () => {
  const down: Relayer = {
    ...createRelayer({
      store: new MemoryStore(),
      sender,
      policy: { maxDeliveries: 1 },
    }),
    giveUp: () => Promise.reject(new Error("connection to db:5432 refused")),
  };
  for (const maxRetries of [0, 9, 20, 100]) {
    const { fewest, queue } = fewestTaken(down, maxRetries);
    // Its retries: deliveries 1 to fewest, each retried; the next is its last.
    let spanS = 0;
    for (let attempts = 1; attempts <= fewest; attempts++) {
      const message: QueueMessage = {
        id: "m1",
        body: { intentId: "pi_0001", kind: "settle" },
        attempts,
        ack: () => {},
        retry: (options) => spanS += options?.delaySeconds ?? 0,
      };
      await queue({ queue: "relayer-jobs-dlq", messages: [message] });
    }
    assert.ok(
      spanS >= 14 * 24 * 60 * 60,
      `maxRetries ${maxRetries}: deadLetterMaxRetries ${fewest} taken, its retries span ${spanS}s, less than 14 days`,
    );
  }
});

Deno.test("the queue simulation's Cloudflare dead-letter queue waits what the handler asks of a give-up that meets the store down, for as many retries as the fewest deadLetterMaxRetries the handler takes", async () => {
  const policy = definePolicy({ maxDeliveries: 1 });
  const down: Relayer = {
    ...createRelayer({ store: new MemoryStore(), sender, policy }),
    giveUp: () => Promise.reject(new Error("connection to db:5432 refused")),
  };
  for (const maxRetries of [0, 9, 20]) {
    const { fewest, queue } = fewestTaken(down, maxRetries);
    const model = modelOf({ kind: "cloudflare", maxRetries }, policy);
    for (let k = 1; k <= fewest + 1; k++) {
      let askedMs: number | undefined;
      const message: QueueMessage = {
        id: "m1",
        body: { intentId: "pi_0001", kind: "settle" },
        attempts: k,
        ack: () => {},
        retry: (options) => askedMs = (options?.delaySeconds ?? 0) * 1000,
      };
      await queue({ queue: "relayer-jobs-dlq", messages: [message] });
      // The handler's last retry is Cloudflare's delete: the model's none.
      assert.equal(
        model.giveUpRetry!(k, 0, 0, () => 0.5),
        k <= fewest ? askedMs : undefined,
        `maxRetries ${maxRetries}, dead-letter attempt ${k} of ${fewest} retries`,
      );
    }
  }
});
