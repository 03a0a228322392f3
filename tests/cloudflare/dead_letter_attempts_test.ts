/**
 * Cloudflare does not say whether a message it moves to the dead-letter
 * queue keeps its `attempts` or starts them again at 1 ("the number of
 * times the consumer has attempted to process this message. Starts at
 * 1", its JavaScript APIs page; its dead-letter queues page says nothing
 * of them). Miniflare's queue starts them again at 1 (`deno task
 * worker-check` prints them). Kept, the first delivery there says
 * `maxRetries + 2` (or `+ 1`), and a wait doubled from that asks up to
 * 12 h of a give-up whose store was busy or down for a moment, which the
 * dead-letter retention rule counts as at most the policy's delay or a
 * lease: a retention at the rule's floor deletes the give-up before that
 * retry, and its intent is stranded.
 *
 * No count the handler sees is the same under both readings, so the
 * handler bounds each wait on the dead-letter queue by what the retention
 * it is given leaves a message as old as the jobs queue can make it: under
 * either reading, its retry comes before the retention ends.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createQueueHandler,
  type QueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";
import {
  createRelayer,
  MemoryStore,
  type Relayer,
  ScriptedSender,
} from "../../mod.ts";
import { heldWrites } from "../_held_writes.ts";

const DAY_MS = 86_400_000;
/** The jobs queue's waits with the default policy and lease, max_retries 9. */
const JOBS_SPAN_S = 720;
/** The least dead-letter retention the handler takes with those: 14m1s. */
const FLOOR_MS = 841_000;
/** The attempts of a first delivery on the dead-letter queue: restarted, or kept. */
const FIRST = { restarted: 1, kept: 11, keptAsLast: 10 } as const;

/**
 * A relayer whose every write on the authorized intent `pi_0001` is
 * refused busy (another session's lock): a give-up there is answered busy.
 */
async function busyRelayer(): Promise<Relayer> {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  return createRelayer({
    store: heldWrites(memory),
    sender: {
      send: () => Promise.reject(new Error("no send expected")),
      receipt: () => Promise.resolve("pending"),
    },
    random: () => 0.5,
  });
}

/** A relayer whose store is down: every give-up fails unexpectedly. */
function downRelayer(): Relayer {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  return { ...relayer, deliver: down, giveUp: down };
}

/** The handler of the default policy's queues: max_retries 9, and 100 there. */
function handlerOf(
  relayer: Relayer,
  deadLetterMessageRetentionMs?: number,
): QueueHandler {
  return createQueueHandler({
    relayer,
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    ...(deadLetterMessageRetentionMs === undefined
      ? {}
      : { deadLetterMessageRetentionMs }),
  });
}

/** The `delaySeconds` the handler asks of a give-up with these attempts. */
async function waitS(queue: QueueHandler, attempts: number): Promise<number> {
  const asked: (number | undefined)[] = [];
  const message: QueueMessage = {
    id: "m1",
    body: { intentId: "pi_0001", kind: "settle" },
    attempts,
    ack: () => assert.fail(`attempts ${attempts}: acked, not retried`),
    retry: (options) => asked.push(options?.delaySeconds),
  };
  await queue({ queue: "relayer-jobs-dlq", messages: [message] });
  assert.equal(asked.length, 1, `attempts ${attempts}: retried once`);
  assert.equal(typeof asked[0], "number", `attempts ${attempts}: a delay`);
  return asked[0]!;
}

Deno.test("createQueueHandler() retries a busy give-up on the dead-letter queue before its retention ends whether Cloudflare kept the message's attempts or started them again", async () => {
  const queue = handlerOf(await busyRelayer(), FLOOR_MS);
  // A message as old as the jobs queue's waits make it (12 min) has 2m1s
  // of a retention of 14m1s left: its wait must end within it.
  const left = FLOOR_MS / 1000 - JOBS_SPAN_S - 1;
  for (const attempts of [...Object.values(FIRST), 12, 15, 24, 111]) {
    const s = await waitS(queue, attempts);
    assert.ok(
      s <= left,
      `attempts ${attempts}: a busy give-up waits ${s} s, past the ${left} s a retention of 14m1s leaves it (${JOBS_SPAN_S} s old): Cloudflare deletes it first`,
    );
  }
  // Started again at 1, the first wait is the relayer's own, as before:
  // the policy's delay after the queue's 10th delivery (2 min, equal
  // jitter at 0.5).
  assert.equal(await waitS(queue, FIRST.restarted), 90);
});

Deno.test("createQueueHandler() retries a give-up that met the store down on the dead-letter queue before its retention ends whether Cloudflare kept the message's attempts or started them again", async () => {
  const queue = handlerOf(downRelayer(), FLOOR_MS);
  const left = FLOOR_MS / 1000 - JOBS_SPAN_S - 1;
  for (const attempts of [...Object.values(FIRST), 12, 15, 24, 111]) {
    const s = await waitS(queue, attempts);
    assert.ok(
      s <= left,
      `attempts ${attempts}: a give-up that met the store down waits ${s} s, past the ${left} s a retention of 14m1s leaves it: Cloudflare deletes it first`,
    );
  }
  // Started again at 1, the doubling from the base is as before.
  assert.deepEqual(
    await Promise.all([1, 2, 3, 4, 5].map((n) => waitS(queue, n))),
    [5, 10, 20, 40, 80],
  );
});

Deno.test("createQueueHandler() doubles the dead-letter queue's waits to 12 h where the retention leaves room for them, and bounds them by what it leaves", async () => {
  const doubling = [5, 10, 160, 40960, 43200, 43200];
  const attempts = [1, 2, 6, 14, 15, 101];
  const waits = async (queue: QueueHandler) =>
    await Promise.all(attempts.map((n) => waitS(queue, n)));
  // Not given, and 1 day or 14 days (past 12 min of the jobs queue's waits
  // and 12 h): as before.
  for (const retention of [undefined, DAY_MS, 14 * DAY_MS]) {
    assert.deepEqual(
      await waits(handlerOf(downRelayer(), retention)),
      doubling,
      `retention ${retention}`,
    );
  }
  // 1 hour leaves a message 12 min old 47m59s: the waits stop there.
  assert.deepEqual(await waits(handlerOf(downRelayer(), 3_600_000)), [
    5,
    10,
    160,
    2879,
    2879,
    2879,
  ]);
  // A busy give-up's wait too, whose first at a kept count would be 85 min.
  assert.equal(
    await waitS(handlerOf(await busyRelayer(), 3_600_000), FIRST.kept),
    2879,
  );
  // The check of deadLetterMaxRetries still counts 12 h waits: unchanged.
  assert.throws(
    () =>
      createQueueHandler({
        relayer: downRelayer(),
        maxRetries: 9,
        deadLetterQueue: "relayer-jobs-dlq",
        deadLetterMaxRetries: 40,
        deadLetterMessageRetentionMs: 3_600_000,
      }),
    /to at least 41 /,
  );
});
