import assert from "node:assert/strict";
import {
  createRelayer,
  definePolicy,
  formatDuration,
  type Job,
  MemoryStore,
  type Relayer,
  ScriptedSender,
} from "../../mod.ts";
import {
  createQueueHandler,
  type QueueHandlerOptions,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";

// A queue's message retention is 60 s to 14 days, 4 days unless set
// (`--message-retention-period-secs`, "Must be between 60 and 1209600 (14
// days)": https://developers.cloudflare.com/queues/configuration/configure-queues/#queue-configuration),
// and "messages in a queue that reach the maximum message retention are
// deleted from the queue" (https://developers.cloudflare.com/queues/platform/limits/):
// deleted, not moved to the dead-letter queue, which takes only a message
// at its retry limit. A job deleted so leaves its intent with no job and no
// dead letter: stranded.

const job: Job = { intentId: "pi_0001", kind: "settle" };
const DAY_MS = 86_400_000;

/** A message that adds up the waits the handler asks for. */
function waited(attempts: number, into: { s: number }): QueueMessage {
  return {
    id: "m1",
    body: job,
    attempts,
    ack: () => {
      throw new Error("not acked: the store is down");
    },
    retry: (options) => {
      into.s += options?.delaySeconds ?? 0;
    },
  };
}

function handler(
  relayer: Relayer,
  more: Partial<QueueHandlerOptions> = {},
) {
  return createQueueHandler({
    relayer,
    maxRetries: 9,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: 100,
    ...more,
  });
}

Deno.test("createQueueHandler() refuses a jobs queue whose message retention ends while the handler may still be retrying a message: Cloudflare deletes it with no dead letter, and its intent is stranded", async () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  // The store down at every delivery: the handler's own waits, 5 s
  // doubling to the policy's 2 min, span 635 s over the 9 retries; a busy
  // intent's (up to LEASE + 2 × CLOCK_SKEW, 40 s) raise the first four.
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const queue = handler({ ...relayer, deliver: down, giveUp: down });
  const span = { s: 0 };
  for (let attempts = 1; attempts <= 9; attempts++) {
    await queue({ queue: "relayer-jobs", messages: [waited(attempts, span)] });
  }
  assert.equal(span.s, 635);

  assert.throws(() => handler(relayer, { messageRetentionMs: 600_000 }), {
    name: "RangeError",
    message:
      "Cannot create queue handler as 'messageRetentionMs' is 10m0s: the waits this handler asks between a message's 10 deliveries (max_retries = 9) span up to 12m0s (the policy's backoff, or a busy intent's lease), and Cloudflare deletes a message whose retention ends, with no dead letter: a job still being retried would be lost and its intent stranded. Set the jobs queue's message retention above 12m0s (the least this check takes is 12m1s), with room: up to 15m0s for each of the 10 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update <queue> --message-retention-period-secs 86400 (1 day, which every plan allows: the Workers Free plan keeps messages 24 h, fixed; a paid plan 4 days unless set), and pass the period set, in milliseconds, as messageRetentionMs (86400000 for 86400 s; the example Worker reads it from CLOUDFLARE_MESSAGE_RETENTION as a duration, 24h0m0s)",
  });
  // Cloudflare's shortest, 60 s: refused; the bound itself: refused (a
  // message retried at the last second is gone); one second past it: taken.
  assert.throws(
    () => handler(relayer, { messageRetentionMs: 60_000 }),
    /'messageRetentionMs' is 1m0s: /,
  );
  assert.throws(
    () => handler(relayer, { messageRetentionMs: 720_000 }),
    /'messageRetentionMs' is 12m0s: /,
  );
  handler(relayer, { messageRetentionMs: 721_000 });
  handler(relayer, { messageRetentionMs: 4 * DAY_MS }); // Cloudflare's default
  handler(relayer); // not given: not checked

  // More retries, and a longer lease, need more: 4 × 40 s + 80 s + 95 × 2 min.
  assert.throws(
    () => handler(relayer, { maxRetries: 100, messageRetentionMs: 3_600_000 }),
    /between a message's 101 deliveries \(max_retries = 100\) span up to 3h14m0s/,
  );
  const leased = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    leaseMs: 300_000,
  });
  assert.throws(
    () => handler(leased, { messageRetentionMs: 1_800_000 }),
    /span up to 46m30s/, // 9 × (5 min + 2 × 5 s)
  );
  handler(leased, { messageRetentionMs: 2_791_000 });
  // A span that is no whole minute is checked to the second: 46m30s itself
  // is refused.
  assert.throws(
    () => handler(leased, { messageRetentionMs: 2_790_000 }),
    /'messageRetentionMs' is 46m30s: .*span up to 46m30s/,
  );
  // A wider clock skew too: 9 × (30 s + 2 × 1 min).
  const skewed = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    clockSkewMs: 60_000,
  });
  assert.throws(
    () => handler(skewed, { messageRetentionMs: 1_350_000 }),
    /'messageRetentionMs' is 22m30s: .*span up to 22m30s/,
  );
  handler(skewed, { messageRetentionMs: 1_351_000 });
  // Waits no retention spans: 100 retries of up to 12 h (a CAP of 12 h).
  const slow = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: { capMs: 43_200_000 },
  });
  assert.throws(
    () => handler(slow, { maxRetries: 100, messageRetentionMs: 14 * DAY_MS }),
    /span up to 1054h46m40s .*No retention Cloudflare allows \(14 days at most\) is longer: lower the consumer's max_retries \(and maxRetries\), the policy's CAP or the LEASE$/,
  );
});

/**
 * The wait, in seconds, the handler asks of a give-up on the dead-letter
 * queue that finds another delivery's send in flight (the Worker that sent
 * it gone), with the relayer `options` give. The send is another
 * relayer's on the same store, as another Worker's is: a send of the
 * handler's own relayer would hold the give-up for its receipts budget
 * (5 s) first.
 */
async function busyGiveUpWaitS(
  options: { policy?: { capMs: number } } = {},
): Promise<{ relayer: Relayer; waitS: number }> {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const sending = new Promise<void>((resolve) => (started = resolve));
  const relayerOver = () =>
    createRelayer({
      store,
      sender: {
        async send() {
          started();
          await released;
          return { txHash: "0xheld" };
        },
        receipt: () => Promise.resolve("pending"),
      },
      random: () => 0.999,
      ...options,
    });
  const relayer = relayerOver();
  const queue = handler(relayer);
  // Another Worker's delivery: its send holds the lease.
  const delivery = relayerOver().deliver(job, 1);
  await sending;
  const wait = { s: 0 };
  const calls: string[] = [];
  await queue({
    queue: "relayer-jobs-dlq",
    messages: [{ ...waited(1, wait), ack: () => calls.push("ack") }],
  });
  release();
  await delivery;
  assert.deepEqual(calls, []);
  return { relayer, waitS: wait.s };
}

Deno.test("createQueueHandler() refuses a dead-letter queue whose message retention ends before a give-up answered busy is tried again", async () => {
  // A give-up busy behind another's send waits out the policy's delay
  // after the queue's last delivery, up to the cap: 2 min with the
  // default policy.
  const { relayer, waitS } = await busyGiveUpWaitS();
  assert.equal(waitS, 120);

  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 60_000 }),
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'deadLetterMessageRetentionMs' is 1m0s: a message the queue gives up on may reach the dead-letter queue with its age (counted from its send, as Miniflare's keeps it): the waits this handler asks between its 10 deliveries on the jobs queue (max_retries = 9) span up to 12m0s, and a give-up answered busy there (another delivery's lease, such as one whose Worker died mid-send) waits up to 2m0s before it is tried again, so it may be 14m0s old, and Cloudflare deletes a message whose retention ends: the give-up would be lost and its intent stranded. Set the dead-letter queue's message retention above 14m0s (the least this check takes is 14m1s), with room: up to 15m0s for each of the 12 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update relayer-jobs-dlq --message-retention-period-secs 86400 (1 day, which every plan allows: the Workers Free plan keeps messages 24 h, fixed; a paid plan 4 days unless set); on a paid plan, 14 days (1209600) outlasts a longer outage, and pass the period set, in milliseconds, as deadLetterMessageRetentionMs (86400000 for 86400 s; the example Worker reads it from CLOUDFLARE_DLQ_MESSAGE_RETENTION as a duration, 24h0m0s)",
    },
  );
  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 120_000 }),
    /is 2m0s: /,
  );
  // The give-up's 2 min come on top of the jobs queue's 12 min.
  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 121_000 }),
    /is 2m1s: /,
  );
  handler(relayer, { deadLetterMessageRetentionMs: 841_000 });
  handler(relayer, { deadLetterMessageRetentionMs: 14 * DAY_MS });
});

Deno.test("createQueueHandler() counts a busy give-up's wait at the delay after the queue's last delivery, the 10th of max_retries 9, where the cap does not end the doubling first", async () => {
  // A CAP of 12 h: up to 5 s doubled nine times, 42m40s; past the 9th
  // delivery's delay, half that (random 0.999 of full jitter).
  const { relayer, waitS } = await busyGiveUpWaitS({
    policy: { capMs: 43_200_000 },
  });
  assert.ok(waitS > 1_280 && waitS <= 2_560, `waited ${waitS} s`);
  // On top of the jobs queue's waits, 44 min with this CAP (a message
  // moves to the dead-letter queue with its age): 1h26m40s in all.
  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 5_200_000 }),
    /'deadLetterMessageRetentionMs' is 1h26m40s: .*span up to 44m0s, .*waits up to 42m40s .*so it may be 1h26m40s old/,
  );
  handler(relayer, { deadLetterMessageRetentionMs: 5_201_000 });
});

Deno.test("createQueueHandler() refuses a message retention Cloudflare does not allow: whole seconds from 60 s to 14 days", () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  for (const name of ["messageRetentionMs", "deadLetterMessageRetentionMs"]) {
    for (
      const value of [59_000, 14 * DAY_MS + 1000, 3_600_500, Number.NaN, "4d"]
    ) {
      assert.throws(
        () => handler(relayer, { [name]: value } as never),
        {
          name: "RangeError",
          message:
            `Cannot create queue handler as '${name}' must be whole seconds from 1m0s to 336h0m0s (a Cloudflare queue's message retention, 4 days unless set): current value is ${
              // Text quoted: "4d", not 4d; and said to be text, with
              // what reads a duration's text.
              typeof value === "string"
                ? `${
                  JSON.stringify(value)
                }, a text: give a number of milliseconds (parseDuration reads a duration's text into one; workerConfig(env).config.cloudflareRetentions reads ${
                  name === "messageRetentionMs"
                    ? "CLOUDFLARE_MESSAGE_RETENTION"
                    : "CLOUDFLARE_DLQ_MESSAGE_RETENTION"
                } into one)`
                : String(value)}`,
        },
      );
    }
  }
});

Deno.test("createQueueHandler() counts a queue's delivery delay in the jobs queue's retention, counted from the send", () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  // 721 s holds the 12 min of waits alone; a message held back 1 min
  // before its first delivery is 13 min old at its last.
  handler(relayer, { messageRetentionMs: 721_000 });
  assert.throws(
    () =>
      handler(relayer, {
        messageRetentionMs: 721_000,
        deliveryDelayMs: 60_000,
      }),
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'messageRetentionMs' is 12m1s: a message's delivery delay (1m0s) and the waits this handler asks between a message's 10 deliveries (max_retries = 9) span up to 13m0s (the policy's backoff, or a busy intent's lease), and Cloudflare deletes a message whose retention ends, with no dead letter: a job still being retried would be lost and its intent stranded. Set the jobs queue's message retention above 13m0s (the least this check takes is 13m1s), with room: up to 15m0s for each of the 10 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update <queue> --message-retention-period-secs 86400 (1 day, which every plan allows: the Workers Free plan keeps messages 24 h, fixed; a paid plan 4 days unless set), and pass the period set, in milliseconds, as messageRetentionMs (86400000 for 86400 s; the example Worker reads it from CLOUDFLARE_MESSAGE_RETENTION as a duration, 24h0m0s)",
    },
  );
  handler(relayer, { messageRetentionMs: 781_000, deliveryDelayMs: 60_000 });
  // Counted against the dead-letter queue too, where a message moves with
  // its age: 24 h, 12 min and a busy give-up's 2 min. Whole seconds, as
  // Cloudflare delays. (The jobs queue's, not given, would be counted as
  // 24 h, which that delay and those waits outlast: given.)
  assert.throws(
    () =>
      handler(relayer, {
        messageRetentionMs: 4 * DAY_MS,
        deadLetterMessageRetentionMs: 87_240_000,
        deliveryDelayMs: 86_400_000,
      }),
    /'deadLetterMessageRetentionMs' is 24h14m0s: .*so it may be 24h14m0s old/,
  );
  handler(relayer, {
    messageRetentionMs: 4 * DAY_MS,
    deadLetterMessageRetentionMs: 87_241_000,
    deliveryDelayMs: 86_400_000,
  });
  for (const value of [-1000, 1500, 86_401_000, Number.NaN, "1m"]) {
    assert.throws(() => handler(relayer, { deliveryDelayMs: value } as never), {
      name: "RangeError",
      message:
        `Cannot create queue handler as 'deliveryDelayMs' must be whole seconds from 0 to 24h0m0s (the queue's delivery delay, or the longest delaySeconds a producer sends with): current value is ${
          typeof value === "string"
            ? `${
              JSON.stringify(value)
            }, a text: give a number of milliseconds (parseDuration reads a duration's text into one; workerConfig(env).config.cloudflareRetentions reads CLOUDFLARE_DELIVERY_DELAY into one)`
            : String(value)
        }`,
    });
  }
});

Deno.test("createQueueHandler() counts a dead-letter message's retention from its send: the queue moves a message it gives up on with its age, so the jobs queue's waits and delivery delay come before the give-up's", () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  // Miniflare's queue moves the message with its id and its timestamp
  // (the send's), and Cloudflare does not say it starts a new one: a
  // give-up arrives up to 12 min old (the jobs queue's waits), and one
  // answered busy is tried again up to 2 min later, at up to 14 min.
  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 121_000 }),
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'deadLetterMessageRetentionMs' is 2m1s: a message the queue gives up on may reach the dead-letter queue with its age (counted from its send, as Miniflare's keeps it): the waits this handler asks between its 10 deliveries on the jobs queue (max_retries = 9) span up to 12m0s, and a give-up answered busy there (another delivery's lease, such as one whose Worker died mid-send) waits up to 2m0s before it is tried again, so it may be 14m0s old, and Cloudflare deletes a message whose retention ends: the give-up would be lost and its intent stranded. Set the dead-letter queue's message retention above 14m0s (the least this check takes is 14m1s), with room: up to 15m0s for each of the 12 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update relayer-jobs-dlq --message-retention-period-secs 86400 (1 day, which every plan allows: the Workers Free plan keeps messages 24 h, fixed; a paid plan 4 days unless set); on a paid plan, 14 days (1209600) outlasts a longer outage, and pass the period set, in milliseconds, as deadLetterMessageRetentionMs (86400000 for 86400 s; the example Worker reads it from CLOUDFLARE_DLQ_MESSAGE_RETENTION as a duration, 24h0m0s)",
    },
  );
  assert.throws(
    () => handler(relayer, { deadLetterMessageRetentionMs: 840_000 }),
    /is 14m0s: /,
  );
  handler(relayer, { deadLetterMessageRetentionMs: 841_000 });
  // A delivery delay is part of its age too.
  assert.throws(
    () =>
      handler(relayer, {
        deadLetterMessageRetentionMs: 841_000,
        deliveryDelayMs: 60_000,
      }),
    /is 14m1s: a message the queue gives up on .*: a message's delivery delay \(1m0s\) and the waits .* so it may be 15m0s old/,
  );
  handler(relayer, {
    deadLetterMessageRetentionMs: 901_000,
    deliveryDelayMs: 60_000,
  });
  // Named from its least, 1 s, on either queue.
  for (
    const [option, retention] of [
      ["messageRetentionMs", 721_000],
      ["deadLetterMessageRetentionMs", 841_000],
    ] as const
  ) {
    assert.throws(
      () => handler(relayer, { [option]: retention, deliveryDelayMs: 1_000 }),
      /: a message's delivery delay \(1s\) and the waits /,
      option,
    );
  }
  // Waits no retention spans: none Cloudflare allows is longer, on the
  // jobs queue first (its retention not given, counted as 24 h), where the
  // 1054h46m40s of waits come before the give-up's.
  const slow = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: { capMs: 43_200_000 },
  });
  assert.throws(
    () =>
      handler(slow, {
        maxRetries: 100,
        deadLetterMessageRetentionMs: 14 * DAY_MS,
      }),
    /'messageRetentionMs' is not given, so it is counted as 24h0m0s, .* span up to 1054h46m40s .*No retention Cloudflare allows \(14 days at most\) is longer: lower the consumer's max_retries \(and maxRetries\), the policy's CAP or the LEASE$/,
  );
});

Deno.test("createQueueHandler()'s retention rule at its edges: a wait of a fraction of a second rounds up, a span of exactly 14 days fits no retention, and a busy give-up waits the policy's delay after the delivery past the queue's last", async () => {
  // A lease of 30.4 s: a busy answer waits up to 40.4 s, asked as 41 s.
  const leased = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    leaseMs: 30_400,
  });
  assert.throws(
    () => handler(leased, { messageRetentionMs: 724_000 }),
    /span up to 12m4s /, // 4 × 41 s + 80 s + 4 × 2 min
  );
  handler(leased, { messageRetentionMs: 725_000 });

  // 28 retries of 12 h each span 14 days to the second: no retention
  // Cloudflare allows is longer, so no command to raise it is offered.
  const slow = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 27, baseMs: 43_200_000, capMs: 43_200_000 },
  });
  assert.throws(
    () => handler(slow, { maxRetries: 28, messageRetentionMs: 14 * DAY_MS }),
    /span up to 336h0m0s .*No retention Cloudflare allows \(14 days at most\) is longer/,
  );
  // The jobs queue's 324 h fit in 14 days; a give-up answered busy on
  // the dead-letter queue then waits 12 h, and no retention there, given
  // or not, holds the 336 h.
  assert.throws(
    () => handler(slow, { maxRetries: 27, messageRetentionMs: 14 * DAY_MS }),
    /'deadLetterMessageRetentionMs' is not given, so it is counted as 24h0m0s, .*so it may be 336h0m0s old, /,
  );
  // On the dead-letter queue, 27 retries and a busy give-up's 12 h.
  assert.throws(
    () =>
      handler(slow, {
        maxRetries: 27,
        messageRetentionMs: 14 * DAY_MS,
        deadLetterMessageRetentionMs: 14 * DAY_MS,
      }),
    /so it may be 336h0m0s old, .*No retention Cloudflare allows \(14 days at most\) is longer/,
  );
  handler(slow, {
    maxRetries: 26,
    messageRetentionMs: 14 * DAY_MS,
    deadLetterMessageRetentionMs: 14 * DAY_MS,
  });

  // A queue of 4 deliveries and a short lease: the give-up is answered
  // busy with the policy's delay after delivery 4 (40 s), longer than the
  // lease's 10 s and the delay after delivery 3 (20 s). The jobs queue's
  // waits: 10 s, 10 s, 20 s.
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  let started!: () => void;
  const sending = new Promise<void>((resolve) => (started = resolve));
  const shortOver = () =>
    createRelayer({
      store,
      sender: {
        send() {
          started();
          return new Promise<never>(() => {}); // a Worker that died mid-send
        },
        receipt: () => Promise.resolve("pending"),
      },
      policy: { maxDeliveries: 4 },
      leaseMs: 10_000,
      clockSkewMs: 0,
      random: () => 0.999,
    });
  const short = shortOver();
  void shortOver().deliver(job, 1); // another Worker's: its send holds the lease
  await sending;
  const wait = { s: 0 };
  await handler(short, { maxRetries: 3 })({
    queue: "relayer-jobs-dlq",
    messages: [waited(1, wait)],
  });
  assert.equal(wait.s, 40);
  assert.throws(
    () =>
      handler(short, { maxRetries: 3, deadLetterMessageRetentionMs: 80_000 }),
    /is 1m20s: .*span up to 40s, and a give-up answered busy there .* waits up to 40s/,
  );
  handler(short, { maxRetries: 3, deadLetterMessageRetentionMs: 81_000 });
});

Deno.test("createQueueHandler()'s retention refusals suggest a retention with room for a batch's run time at each delivery, one every Cloudflare plan allows where one does", () => {
  // The check is a floor: it counts the handler's own waits, not the time
  // a batch runs. A batch of 10 on 4 lanes whose signer times out at 10 s
  // twice per delivery runs about 60 s a delivery, so with the defaults the
  // 10th delivery comes at about 720 + 9 × 60 = 1260 s, and the floor's
  // 721 s would delete a payment still being retried. A delivery runs up
  // to a consumer invocation's wall-clock limit, 15 min: the suggestion
  // leaves that much room per delivery (on the dead-letter queue, the jobs
  // queue's deliveries and the two of a busy give-up there), and takes 1
  // day where that is more: the Workers Free plan's retention (24 h, fixed;
  // Wrangler takes 60 to 86400 s there), which a paid plan allows too
  // (60 s to 14 days). Where the floor and its room pass a day, the text
  // says the Workers Free plan cannot hold it.
  const ALLOWANCE_S = 900;
  const FREE_S = 86_400;
  const MAX_S = 1_209_600;
  let checked = 0;
  for (const capMs of [120_000, 3_600_000, 43_200_000]) {
    for (const maxRetries of [0, 3, 9, 39, 40, 100]) {
      for (const deliveryDelayMs of [0, 60_000, 3_600_000, 86_400_000]) {
        const relayer = createRelayer({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          policy: definePolicy({
            maxDeliveries: maxRetries + 1,
            capMs,
            stuckAfterMs: 1000,
          }),
        });
        for (
          const [option, extra] of [
            ["messageRetentionMs", 1],
            ["deadLetterMessageRetentionMs", 3],
          ] as const
        ) {
          const takes = (seconds: number) => {
            try {
              handler(relayer, {
                maxRetries,
                deliveryDelayMs,
                [option]: seconds * 1000,
              });
              return true;
            } catch {
              return false;
            }
          };
          if (!takes(MAX_S)) continue; // no retention is long enough
          if (takes(60)) continue; // nothing to refuse
          let low = 60;
          let high = MAX_S;
          while (high - low > 1) {
            const mid = Math.floor((low + high) / 2);
            if (takes(mid)) high = mid;
            else low = mid;
          }
          const least = high; // the least the check takes
          let text = "";
          try {
            handler(relayer, { maxRetries, deliveryDelayMs, [option]: 60_000 });
          } catch (error) {
            text = (error as Error).message;
          }
          const where =
            `${option}, CAP ${capMs} ms, max_retries ${maxRetries}, delay ${deliveryDelayMs} ms: ${text}`;
          const n = Number(
            /--message-retention-period-secs (\d+)/.exec(text)?.[1],
          );
          assert.ok(Number.isInteger(n), where);
          assert.ok(takes(n), where);
          assert.ok(n <= MAX_S, where);
          const room = least + (maxRetries + extra) * ALLOWANCE_S;
          assert.ok(n >= Math.min(MAX_S, room), where);
          if (room <= FREE_S) assert.ok(n <= FREE_S, where);
          else assert.match(text, /Workers Free plan/, where);
          // It says the room is short only where 14 days cannot hold it.
          assert.equal(
            text.includes("the most Cloudflare allows"),
            room > MAX_S,
            where,
          );
          // 14 days is offered on top only where it is not the suggestion.
          assert.equal(
            text.includes("on a paid plan, 14 days (1209600)"),
            option === "deadLetterMessageRetentionMs" && n < MAX_S,
            where,
          );
          // The text still names the least the check takes.
          assert.ok(
            text.includes(`above ${formatDuration((least - 1) * 1000)}`),
            where,
          );
          checked++;
        }
      }
    }
  }
  assert.ok(checked > 40, String(checked));
});

Deno.test("docs/queues.md quotes the jobs queue's retention refusal as createQueueHandler gives it with the defaults", async () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  const docs = await Deno.readTextFile(
    new URL("../../docs/queues.md", import.meta.url),
  );
  const quoted = /^… (Set the jobs queue's message retention .*) …\)$/m.exec(
    docs,
  )?.[1];
  assert.ok(quoted, "docs/queues.md quotes the refusal's advice");
  assert.throws(
    () => handler(relayer, { messageRetentionMs: 600_000 }),
    (error: Error) => error.message.includes(quoted),
  );
});

Deno.test("createQueueHandler()'s dead-letter retention refusal counts a jobs queue of max_retries 0 as its one delivery, in the singular", () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({ maxDeliveries: 1 }),
    leaseMs: 300_000,
  });
  assert.throws(
    () =>
      handler(relayer, {
        maxRetries: 0,
        deadLetterMessageRetentionMs: 60_000,
      }),
    (error: Error) => {
      assert.match(error.message, /between its 1 delivery on the jobs queue/);
      assert.doesNotMatch(error.message, /\b1 deliveries\b/);
      return true;
    },
  );
});

Deno.test("createQueueHandler() names the delivery delay among what to lower when only its day makes the waits outlast every retention Cloudflare allows", () => {
  // 39 retries of up to 12 h (a CAP of 12 h) span 13d10h46m40s, under 14
  // days; a delivery delay of 24 h on top passes them.
  const slow = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: { capMs: 43_200_000 },
  });
  handler(slow, {
    maxRetries: 39,
    messageRetentionMs: 14 * DAY_MS,
    deadLetterMessageRetentionMs: 14 * DAY_MS,
  });
  assert.throws(
    () =>
      handler(slow, {
        maxRetries: 39,
        messageRetentionMs: 14 * DAY_MS,
        deliveryDelayMs: 86_400_000,
      }),
    /delivery delay \(24h0m0s\) and .*No retention Cloudflare allows \(14 days at most\) is longer: lower the consumer's max_retries \(and maxRetries\), the policy's CAP, the LEASE or the delivery delay \(deliveryDelayMs, CLOUDFLARE_DELIVERY_DELAY\)$/,
  );
  // Without a delay, the advice leaves it out.
  assert.throws(
    () => handler(slow, { maxRetries: 100, messageRetentionMs: 14 * DAY_MS }),
    /the policy's CAP or the LEASE$/,
  );
});

Deno.test("createQueueHandler() counts a queue's message retention not given, the jobs queue's and the dead-letter queue's, as 24 h, the least a plan keeps unless set (the Workers Free plan's, fixed): waits that span more are refused, saying so", () => {
  // BASE 1h, CAP 12h: 1h, 2h, 4h, 8h, then 12 h (the most a retry is
  // delayed) five times, 75 h over 9 retries. On the Workers Free plan the
  // message is deleted after 24 h while it is still retried.
  const slow = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({ baseMs: 3_600_000, capMs: 43_200_000 }),
  });
  assert.throws(() => handler(slow), {
    name: "RangeError",
    message:
      "Cannot create queue handler as 'messageRetentionMs' is not given, so it is counted as 24h0m0s, the Workers Free plan's (fixed there; a paid plan keeps messages 4 days unless set): the waits this handler asks between a message's 10 deliveries (max_retries = 9) span up to 75h0m0s (the policy's backoff, or a busy intent's lease), and Cloudflare deletes a message whose retention ends, with no dead letter: a job still being retried would be lost and its intent stranded. Set the jobs queue's message retention above 75h0m0s (the least this check takes is 75h0m1s), with room: up to 15m0s for each of the 10 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update <queue> --message-retention-period-secs 279001 (77h30m1s; only a paid plan allows it: the Workers Free plan keeps messages 24 h, fixed), and pass the period set, in milliseconds, as messageRetentionMs (279001000 for 279001 s; the example Worker reads it from CLOUDFLARE_MESSAGE_RETENTION as a duration, 77h30m1s)",
  });
  // A paid plan's default, 4 days, given for both queues: taken.
  handler(slow, {
    messageRetentionMs: 4 * DAY_MS,
    deadLetterMessageRetentionMs: 4 * DAY_MS,
  });
  // The dead-letter queue's not given is counted so too: 1h, 2h, 4h, 8h
  // (15 h) over 4 retries fit in 24 h on the jobs queue, but a give-up
  // answered busy on the dead-letter queue waits the 12 h after delivery 5
  // and is 27 h old when it is tried again.
  const five = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({
      maxDeliveries: 5,
      baseMs: 3_600_000,
      capMs: 43_200_000,
    }),
  });
  assert.throws(() => handler(five, { maxRetries: 4 }), {
    name: "RangeError",
    message:
      "Cannot create queue handler as 'deadLetterMessageRetentionMs' is not given, so it is counted as 24h0m0s, the Workers Free plan's (fixed there; a paid plan keeps messages 4 days unless set): a message the queue gives up on may reach the dead-letter queue with its age (counted from its send, as Miniflare's keeps it): the waits this handler asks between its 5 deliveries on the jobs queue (max_retries = 4) span up to 15h0m0s, and a give-up answered busy there (another delivery's lease, such as one whose Worker died mid-send) waits up to 12h0m0s before it is tried again, so it may be 27h0m0s old, and Cloudflare deletes a message whose retention ends: the give-up would be lost and its intent stranded. Set the dead-letter queue's message retention above 27h0m0s (the least this check takes is 27h0m1s), with room: up to 15m0s for each of the 7 batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update relayer-jobs-dlq --message-retention-period-secs 103501 (28h45m1s; only a paid plan allows it: the Workers Free plan keeps messages 24 h, fixed); on a paid plan, 14 days (1209600) outlasts a longer outage, and pass the period set, in milliseconds, as deadLetterMessageRetentionMs (103501000 for 103501 s; the example Worker reads it from CLOUDFLARE_DLQ_MESSAGE_RETENTION as a duration, 28h45m1s)",
  });
  handler(five, { maxRetries: 4, deadLetterMessageRetentionMs: 14 * DAY_MS });
  // 24 h itself is refused, as a retention given as long is.
  const day = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy: definePolicy({
      maxDeliveries: 3,
      baseMs: 43_200_000,
      capMs: 43_200_000,
    }),
  });
  assert.throws(() => handler(day, { maxRetries: 2 }), /span up to 24h0m0s/);
  assert.throws(
    () => handler(day, { maxRetries: 2, messageRetentionMs: DAY_MS }),
    /'messageRetentionMs' is 24h0m0s: /,
  );
});
