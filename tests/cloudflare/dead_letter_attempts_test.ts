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
 * either reading, its retry comes before the retention ends. And started
 * again at 1, waits doubled from the base (5 s, 10 s, 20 s …) retry a
 * give-up that met the store down several times within an outage as long
 * as the wait the floor counts, and the retry after those, as old as that
 * makes it, comes after the retention: so no wait there is shorter than
 * that one, and a give-up failing at its arrival is retried once after
 * such an outage, before the retention ends.
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
  definePolicy,
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
  // Started again at 1, the first wait is the relayer's own (the policy's
  // delay after the queue's 10th delivery, 90 s with equal jitter at 0.5)
  // raised to the 2 min the retention's floor counts for it.
  assert.equal(await waitS(queue, FIRST.restarted), 120);
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
  // Started again at 1, no wait is shorter than the 2 min the floor
  // counts after a give-up's arrival (doubled from the base, 5 s, 10 s,
  // 20 s … would retry it within an outage that long, and the next
  // retry, 2 min, would come after the retention ended): at the floor,
  // 2 min each.
  assert.deepEqual(
    await Promise.all([1, 2, 3, 4, 5].map((n) => waitS(queue, n))),
    [120, 120, 120, 120, 120],
  );
});

Deno.test("createQueueHandler() doubles the dead-letter queue's waits to 12 h where the retention leaves room for them, and bounds them by what it leaves", async () => {
  const doubling = [5, 10, 160, 40960, 43200, 43200];
  const attempts = [1, 2, 6, 14, 15, 101];
  const waits = async (queue: QueueHandler) =>
    await Promise.all(attempts.map((n) => waitS(queue, n)));
  // Not given: as before.
  assert.deepEqual(await waits(handlerOf(downRelayer())), doubling);
  // 1 day or 14 days (past 12 min of the jobs queue's waits and 12 h):
  // as before, but none under the 2 min the floor counts after a
  // give-up's arrival.
  for (const retention of [DAY_MS, 14 * DAY_MS]) {
    assert.deepEqual(
      await waits(handlerOf(downRelayer(), retention)),
      [120, 120, 160, 40960, 43200, 43200],
      `retention ${retention}`,
    );
  }
  // 1 hour leaves a message 12 min old 47m59s: the waits stop there.
  assert.deepEqual(await waits(handlerOf(downRelayer(), 3_600_000)), [
    120,
    120,
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

Deno.test("createQueueHandler() calls a give-up that meets the store down on the dead-letter queue again after an outage as long as a busy wait, and before the least retention it takes ends, its attempts started again at 1", async () => {
  // maxRetries 1, BASE 30s, a lease of 208.001 s with 1 s of skew: the
  // jobs queue's waits span up to 211 s, a busy give-up waits up to
  // 211 s, and the least dead-letter retention taken is 7m3s. A job
  // whose send timed out is retried after 19 s and meets the store down
  // at its last delivery, for 210.001 s: its give-up reaches the
  // dead-letter queue 19 s after the send, and the store is up again
  // 229.001 s after it.
  let nowMs = 19_000;
  const downUntil = 19_000 + 210_001;
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({
      maxDeliveries: 2,
      baseMs: 30_000,
      capMs: 172_800_000,
      jitter: "equal",
      stuckAfterMs: 1,
    }),
    leaseMs: 208_001,
    clockSkewMs: 1000,
  });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const queue = createQueueHandler({
    relayer: { ...relayer, giveUp: down },
    maxRetries: 1,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    deadLetterMessageRetentionMs: 423_000,
  });
  assert.throws(
    () =>
      createQueueHandler({
        relayer,
        maxRetries: 1,
        deadLetterQueue: "relayer-jobs-dlq",
        deadLetterMaxRetries: 100,
        deadLetterMessageRetentionMs: 422_000,
      }),
    RangeError,
  );
  // Miniflare's reading: attempts 1 at the first delivery there.
  for (let attempts = 1; nowMs < downUntil; attempts++) {
    const s = await waitS(queue, attempts);
    nowMs += s * 1000;
  }
  assert.ok(
    nowMs < 423_000,
    `the first call after the outage comes ${
      nowMs / 1000
    } s after the send, past the 423 s retention: Cloudflare deleted the give-up, its intent stranded`,
  );
});

Deno.test("createQueueHandler() waits on the dead-letter queue at least the policy's delay after the jobs queue's last delivery, not the one before it, where that delay is the longer", async () => {
  // BASE 5s, CAP 1h, max_retries 9: the policy's delay after delivery 10
  // is 2560 s (5 s doubled 9 times), after delivery 9 only 1280 s; the
  // least dead-letter retention taken counts the first.
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({
      maxDeliveries: 10,
      baseMs: 5_000,
      capMs: 3_600_000,
    }),
  });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const queue = createQueueHandler({
    relayer: { ...relayer, deliver: down, giveUp: down },
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    deadLetterMessageRetentionMs: DAY_MS,
  });
  // Started again at 1 there: no wait under 2560 s.
  assert.deepEqual(
    await Promise.all([1, 2, 9, 10, 11].map((n) => waitS(queue, n))),
    [2560, 2560, 2560, 2560, 5120],
  );
});

Deno.test("createQueueHandler() bounds the wait of an unreadable message on the dead-letter queue whose dead letter failed as a give-up's there, not by the jobs queue's cap", async () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const queue = handlerOf({ ...relayer, keepUnreadable: down }, 3_600_000);
  const waits: number[] = [];
  for (const attempts of [1, 14]) {
    const asked: (number | undefined)[] = [];
    await queue({
      queue: "relayer-jobs-dlq",
      messages: [{
        id: "m1",
        body: "not a job",
        attempts,
        ack: () => assert.fail(`attempts ${attempts}: acked, not retried`),
        retry: (options) => asked.push(options?.delaySeconds),
      }],
    });
    assert.equal(asked.length, 1, `attempts ${attempts}: retried once`);
    waits.push(asked[0]!);
  }
  // At least the 2 min the retention's floor counts, at most the 47m59s
  // a retention of 1 h leaves a message 12 min old: the jobs queue's cap
  // (2 min after 5 s at attempts 1) would run the dead-letter queue's 100
  // retries out in hours.
  assert.deepEqual(waits, [120, 2879]);
});

Deno.test("createQueueHandler() counts the jobs queue's delivery delay in a message's age when it bounds the dead-letter queue's waits", async () => {
  // A delivery delay of 1 h and the jobs queue's 12 min of waits: a give-up
  // reaches the dead-letter queue up to 1h12m old, and a retention of 2 h
  // leaves it 47m59s, not the 1h47m59s the waits alone would.
  const queue = createQueueHandler({
    relayer: downRelayer(),
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    deliveryDelayMs: 3_600_000,
    deadLetterMessageRetentionMs: 7_200_000,
  });
  assert.deepEqual(
    await Promise.all([1, 14, 101].map((n) => waitS(queue, n))),
    [120, 2879, 2879],
  );
});

Deno.test("createQueueHandler() bounds the dead-letter queue's waits by what 24 h leaves where its retention is not given, as the check counts it: a give-up that met the store down is retried before the Workers Free plan deletes it", async () => {
  // BASE 1h, CAP 6h, max_retries 4: the jobs queue's waits span up to
  // 1 + 2 + 4 + 6 = 13 h, a busy give-up waits up to 6 h there, 19 h in
  // all, which the 24 h counted for a retention not given takes. A
  // message 13 h old has 11 h of it left (less a second).
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({
      maxDeliveries: 5,
      baseMs: 3_600_000,
      capMs: 21_600_000,
      jitter: "equal",
      stuckAfterMs: 1,
    }),
  });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const queue = createQueueHandler({
    relayer: { ...relayer, deliver: down, giveUp: down },
    maxRetries: 4,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  const left = DAY_MS / 1000 - 13 * 3600 - 1;
  // Kept attempts (6 at the first delivery there) and later ones double
  // to 12 h, which would come after the 24 h ended.
  for (const attempts of [5, 6, 7, 20, 101]) {
    const s = await waitS(queue, attempts);
    assert.ok(
      s <= left,
      `attempts ${attempts}: a give-up that met the store down waits ${s} s, past the ${left} s 24 h leaves a message 13 h old: Cloudflare deletes it first`,
    );
  }
  // Started again at 1, doubled from the base as before: 1 h, then 2 h.
  assert.deepEqual([await waitS(queue, 1), await waitS(queue, 2)], [
    3600,
    7200,
  ]);
});
