import assert from "node:assert/strict";
import {
  createRelayer,
  type Job,
  MemoryStore,
  notSent,
  poison,
  type Relayer,
  ScriptedSender,
  type Sender,
  type Store,
} from "../../mod.ts";
import {
  createQueueHandler,
  type QueueHandlerOptions,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";

const golden = await Deno.readTextFile(
  new URL("../../testdata/poison_job.golden.txt", import.meta.url),
);

/** A fake message that records what the handler did with it. */
function fakeMessage(
  body: unknown,
  attempts = 1,
  id = `m${attempts}`,
): QueueMessage & { calls: string[] } {
  const calls: string[] = [];
  return {
    id,
    body,
    attempts,
    calls,
    ack: () => calls.push("ack"),
    retry: (options) =>
      calls.push(
        options?.delaySeconds === undefined
          ? "retry"
          : `retry ${options.delaySeconds}`,
      ),
  };
}

const job: Job = { intentId: "pi_0001", kind: "settle" };

function relayerOn(
  store: Store = new MemoryStore(),
  policy: Parameters<typeof createRelayer>[0]["policy"] = {},
  sender: Sender = new ScriptedSender({}),
): Relayer {
  return createRelayer({ store, sender, policy, random: () => 0 });
}

Deno.test("createQueueHandler() retries with delaySeconds rounded up, and counts deliveries by message.attempts", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 10 }),
    maxRetries: 9,
    log: (line) => lines.push(line),
  });
  const first = fakeMessage(job, 1);
  const third = fakeMessage(JSON.stringify(job), 3); // a text body is read as JSON
  await queue({ queue: "jobs", messages: [first, third] });
  assert.deepEqual(first.calls, ["retry 3"]); // 2.5 s at the floor: 3 s, never 2
  assert.deepEqual(third.calls, ["retry 10"]); // 10 s after the third delivery
  assert.ok(lines.some((line) => line.includes("#3  retry")));
});

Deno.test("createQueueHandler() caps delaySeconds at 12 hours", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const day = 86_400_000;
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, {
      maxDeliveries: 3,
      baseMs: day,
      capMs: day,
      jitter: "none",
    }),
    maxRetries: 2,
    // Two waits of 12 h, and a busy give-up's 12 h on the dead-letter
    // queue: a paid plan's 4 days hold them, not the 24 h counted for a
    // retention not given.
    messageRetentionMs: 4 * day,
    deadLetterMessageRetentionMs: 4 * day,
  });
  const message = fakeMessage(job, 1);
  await queue({ queue: "jobs", messages: [message] });
  assert.deepEqual(message.calls, ["retry 43200"]);
});

Deno.test("createQueueHandler() waits at least 1 s: a 0 ms delay (a full-jitter draw of 0) would redeliver at once, in a tight loop", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3, jitter: "full" }),
    maxRetries: 2,
  });
  const message = fakeMessage(job, 1);
  await queue({ queue: "jobs", messages: [message] });
  assert.deepEqual(message.calls, ["retry 1"]);
});

Deno.test("createQueueHandler() acks a poisoned job and a finished one", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({ id: "pi_0002", state: "created" });
  const sender = new ScriptedSender({
    pi_0001: { sends: [{ error: poison(notSent(new Error("bad chain"))) }] },
  });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }, sender),
    maxRetries: 2,
  });
  const poisoned = fakeMessage(job, 1);
  const exhausted = fakeMessage({ intentId: "pi_0002", kind: "settle" }, 3);
  await queue({ queue: "jobs", messages: [poisoned, exhausted] });
  assert.deepEqual(poisoned.calls, ["ack"]);
  assert.deepEqual(exhausted.calls, ["ack"]);
  assert.equal((await store.getIntent("pi_0001"))?.state, "failed");
  const done = fakeMessage(job, 2); // the intent is failed now: nothing to do
  await queue({ queue: "jobs", messages: [done] });
  assert.deepEqual(done.calls, ["ack"]);
});

Deno.test("createQueueHandler() retries and logs a failing delivery, and the batch goes on; a message it could not settle fails the batch at the end", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0002", state: "created" });
  const relayer = relayerOn(store, { maxDeliveries: 3 });
  const broken: Relayer = {
    ...relayer,
    policy: relayer.policy,
    deliver: (j, delivery) =>
      j.intentId === "pi_0001"
        ? Promise.reject(new Error("connection to db:5432 refused"))
        : relayer.deliver(j, delivery),
  };
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: broken,
    maxRetries: 2,
    log: (line) => lines.push(line),
  });
  const failing = fakeMessage(job, 1);
  const fine = fakeMessage({ intentId: "pi_0002", kind: "settle" }, 1);
  const malformed = fakeMessage({ intentId: "" }, 1, "m-bad");
  const throwing = fakeMessage(job, 1, "m-throws");
  throwing.retry = () => {
    throw new Error("retry() failed");
  };
  // Every message is handled; then the batch fails, since one message is
  // neither acked nor retried, and Cloudflare would take it as acked.
  await assert.rejects(
    queue({ queue: "jobs", messages: [failing, fine, malformed, throwing] }),
    /ack\(\) or retry\(\) failed for 1 message\(s\) \(m-throws\)/,
  );
  // After the policy's base delay (5 s) at the first attempt, not at once.
  assert.deepEqual(failing.calls, ["retry 5"]);
  assert.deepEqual(fine.calls, ["retry 3"]);
  assert.deepEqual(malformed.calls, ["ack"]); // no retry can fix a malformed job
  assert.ok(
    lines.some((line) =>
      line.includes("pi_0001/settle") && line.includes("failed unexpectedly")
    ),
  );
  assert.ok(
    lines.some((line) =>
      line.includes("m-bad") &&
      line.includes("acked unread and kept as cloudflare/m-bad/unreadable")
    ),
  );
  assert.ok(lines.some((line) => line.includes("m-throws")));
});

Deno.test("createQueueHandler() settles a message once when ack() or retry() itself throws: no retry on top, and the batch fails", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  await store.createIntent({
    id: "pi_0002",
    state: "failed",
    hold: "voided",
  });
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
    log: (line) => lines.push(line),
  });
  const retrying = fakeMessage(job, 1, "m-retry");
  retrying.retry = (options) => {
    retrying.calls.push(`retry ${options?.delaySeconds}`);
    throw new Error("retry() failed");
  };
  const done = fakeMessage({ intentId: "pi_0002", kind: "settle" }, 1, "m-ack");
  done.ack = () => {
    done.calls.push("ack");
    throw new Error("ack() failed");
  };
  await assert.rejects(
    queue({ queue: "jobs", messages: [retrying, done] }),
    /ack\(\) or retry\(\) failed for 2 message\(s\)/,
  );
  assert.deepEqual(retrying.calls, ["retry 3"]); // the policy's delay, once
  assert.deepEqual(done.calls, ["ack"]);
  assert.ok(!lines.some((line) => line.includes("failed unexpectedly")));
});

Deno.test("createQueueHandler() settles every message when its log throws: a job, an unreadable message, a store failure", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const relayer = relayerOn(store, { maxDeliveries: 3 });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: {
      ...relayer,
      policy: relayer.policy,
      deliver: (j, n) =>
        j.intentId === "pi_0009"
          ? Promise.reject(new Error("store down"))
          : relayer.deliver(j, n),
    },
    maxRetries: 2,
    log: () => {
      throw new Error("log sink down");
    },
  });
  const message = fakeMessage(job, 1, "m-job");
  const unreadable = fakeMessage("not json", 1, "m-bad");
  const failing = fakeMessage(
    { intentId: "pi_0009", kind: "settle" },
    1,
    "m-down",
  );
  await queue({ queue: "jobs", messages: [message, unreadable, failing] });
  assert.deepEqual(message.calls, ["retry 3"]);
  assert.deepEqual(unreadable.calls, ["ack"]);
  assert.deepEqual(failing.calls, ["retry 5"]);
});

Deno.test("createQueueHandler() keeps a message that is not a job as a dead letter before it acks it, and retries it when the store fails", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const relayer = relayerOn(store, { maxDeliveries: 3 });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer,
    maxRetries: 2,
  });
  // A producer that left out the kind: the intent's only job, unreadable.
  const noKind = fakeMessage({ intentId: "pi_0002" }, 1, "m-nokind");
  const text = fakeMessage("not json", 2, "m-text");
  await queue({ queue: "jobs", messages: [noKind, text] });
  assert.deepEqual(noKind.calls, ["ack"]);
  assert.deepEqual(text.calls, ["ack"]);
  const letter = await store.getDeadLetter("cloudflare/m-nokind/unreadable");
  assert.equal(letter?.intentId, "pi_0002");
  assert.match(
    letter!.reason,
    /^unreadable Cloudflare Queues message: .*'kind' must be "settle"/,
  );
  assert.equal(
    letter!.resolution,
    "message acked unread; nothing else was touched",
  );
  assert.equal(
    (await store.getDeadLetter("cloudflare/m-text/unreadable"))?.deliveries,
    2,
  );
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
  // The store is down: not acked unseen, but retried later.
  const down: Relayer = {
    ...relayer,
    keepUnreadable: () => Promise.reject(new Error("store down")),
  };
  const again = fakeMessage({ intentId: "pi_0002" }, 1, "m-again");
  await createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: down,
    maxRetries: 2,
  })({
    queue: "jobs",
    messages: [again],
  });
  assert.deepEqual(again.calls, ["retry 5"]);
});

Deno.test("createQueueHandler() backs off on message.attempts after an unexpected failure: to the policy's cap on the jobs queue, to 12 h on the dead-letter queue", async () => {
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 3 });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const broken: Relayer = { ...relayer, deliver: down, giveUp: down };
  const queue = createQueueHandler({
    relayer: broken,
    maxRetries: 100,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  const delays = async (name: string, attempts: number[]) => {
    const messages = attempts.map((n) => fakeMessage(job, n, `m${n}`));
    await queue({ queue: name, messages });
    return messages.map((m) => m.calls.join());
  };
  // 5 s doubling, capped at the policy's 2 min: running out here moves the
  // message to the dead-letter queue, which resolves it.
  assert.deepEqual(await delays("jobs", [1, 2, 3, 5, 6, 50]), [
    "retry 5",
    "retry 10",
    "retry 20",
    "retry 80",
    "retry 120",
    "retry 120",
  ]);
  // On the dead-letter queue running out deletes the message, so the wait
  // keeps doubling to Cloudflare's 12 h: 100 retries outlast the queue's
  // longest retention (14 days), not only a few minutes of outage.
  assert.deepEqual(await delays("jobs-dlq", [1, 2, 6, 14, 15, 101]), [
    "retry 5",
    "retry 10",
    "retry 160",
    "retry 40960",
    "retry 43200",
    "retry 43200",
  ]);
  // Cloudflare always counts from 1; anything else waits the base delay.
  assert.deepEqual(await delays("jobs-dlq", [0, Number.NaN]), [
    "retry 5",
    "retry 5",
  ]);
});

Deno.test("createQueueHandler() refuses a misspelt option, which would have taken the dead-letter queue's give-ups for deliveries", () => {
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 3 });
  const misspelt = { relayer, maxRetries: 2, deadLetterQeue: "jobs-dlq" };
  assert.throws(
    () => createQueueHandler(misspelt as unknown as QueueHandlerOptions),
    {
      name: "TypeError",
      message:
        'Cannot create queue handler as "deadLetterQeue" is not one of its options (relayer, maxRetries, deadLetterQueue, deadLetterMaxRetries, messageRetentionMs, deadLetterMessageRetentionMs, deliveryDelayMs, concurrency, log): check its spelling',
    },
  );
  for (const options of [null, undefined, "jobs-dlq"]) {
    assert.throws(
      () => createQueueHandler(options as unknown as QueueHandlerOptions),
      { name: "TypeError", message: /its options must be an object/ },
    );
  }
  // Spelt right, the same options make a handler.
  const handler = createQueueHandler({
    relayer,
    maxRetries: 2,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  assert.equal(typeof handler, "function");
});

Deno.test("createQueueHandler() refuses a jobs queue with no dead-letter queue named: Cloudflare deletes a message at its retry limit, and an intent whose last delivery was busy or met the store down is stranded with no dead letter", async () => {
  // "Without a DLQ configured, messages that reach the retry limit are
  // deleted permanently."
  // (https://developers.cloudflare.com/queues/configuration/dead-letter-queues/)
  // So the last delivery's retry is the job's end. On workerd (Miniflare's
  // queues, max_retries 2, no dead_letter_queue, the store down through the
  // three deliveries): three "failed unexpectedly" lines, then nothing; the
  // intent authorized, no dead letter. The same on this fake queue:
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 3 });
  const down = () => Promise.reject(new Error("connection to db:5432 refused"));
  const broken: Relayer = { ...relayer, deliver: down, giveUp: down };
  assert.throws(() =>
    createQueueHandler(
      { relayer: broken, maxRetries: 2 } as unknown as QueueHandlerOptions,
    ), {
    name: "TypeError",
    message:
      "Cannot create queue handler as 'deadLetterQueue' is missing: without a dead-letter queue Cloudflare deletes a message at its retry limit, and a job whose last delivery was busy or met the store down leaves its intent with no job and no dead letter. Set the consumer's dead_letter_queue in wrangler.toml, consume that queue with this handler (or another), and name it here",
  });
  // Named, the queue's last answer (a retry) moves the job to that queue,
  // whose give-up resolves it.
  const queue = createQueueHandler({
    relayer: broken,
    maxRetries: 2,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  const last = fakeMessage(job, 3);
  await queue({ queue: "jobs", messages: [last] });
  assert.deepEqual(last.calls, ["retry 20"]);
});

Deno.test("createQueueHandler() refuses a queue that stops before the policy does", () => {
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 10 });
  assert.throws(
    () =>
      createQueueHandler({
        deadLetterQueue: "jobs-dlq",
        deadLetterMaxRetries: 100,
        relayer,
      }), // Cloudflare's default max_retries is 3
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'maxRetries' must be at least maxDeliveries - 1 = 9, or the queue stops before the policy does: current value is 3, Cloudflare's default when max_retries is not set. Set the consumer's max_retries in wrangler.toml to at least 9 and pass the same number as maxRetries (the example Worker reads it from CLOUDFLARE_MAX_RETRIES)",
    },
  );
  assert.throws(
    () =>
      createQueueHandler({
        deadLetterQueue: "jobs-dlq",
        deadLetterMaxRetries: 100,
        relayer,
        maxRetries: 8,
      }),
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'maxRetries' must be at least maxDeliveries - 1 = 9, or the queue stops before the policy does: current value is 8. Set the consumer's max_retries in wrangler.toml to at least 9 and pass the same number as maxRetries (the example Worker reads it from CLOUDFLARE_MAX_RETRIES)",
    },
  );
  assert.throws(
    () =>
      createQueueHandler({
        deadLetterQueue: "jobs-dlq",
        deadLetterMaxRetries: 100,
        relayer,
        maxRetries: 9.5,
      }),
    RangeError,
  );
  assert.throws(
    () =>
      createQueueHandler({
        deadLetterQueue: "jobs-dlq",
        deadLetterMaxRetries: 100,
        relayer,
        maxRetries: 101,
      }),
    RangeError,
  );
  createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer,
    maxRetries: 9,
  });
  createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer,
    maxRetries: 100,
  });
});

Deno.test("createQueueHandler() refuses a dead-letter queue whose retries would delete a failing give-up before 14 days (Cloudflare's longest retention), naming how many it needs", () => {
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 10 });
  const dlq = (deadLetterMaxRetries: number) =>
    createQueueHandler({
      relayer,
      maxRetries: 9,
      deadLetterQueue: "jobs-dlq",
      deadLetterMaxRetries,
    });
  assert.throws(() => dlq(3), {
    name: "RangeError",
    message:
      "Cannot create queue handler as 'deadLetterMaxRetries' is 3: a give-up that fails while the store is down would be retried for only 35s (less than 14 days, Cloudflare's longest retention) before Cloudflare deletes it, and its intent would be stranded. Set the dead-letter queue consumer's max_retries in wrangler.toml to at least 41 (100 is safe), and pass the same number as deadLetterMaxRetries (the example Worker reads it from CLOUDFLARE_DLQ_MAX_RETRIES)",
  });
  // 40 retries: 5 s doubling to 12 h spans 13 days 22 h 45 min.
  assert.throws(
    () => dlq(40),
    /retried for only 334h45m15s \(less than 14 days.* at least 41/,
  );
  dlq(41);
  dlq(100);
  assert.throws(() => dlq(101), RangeError);
  assert.throws(() => dlq(2.5), RangeError);
  // A longer base spans 14 days with fewer retries.
  createQueueHandler({
    relayer: relayerOn(new MemoryStore(), {
      maxDeliveries: 10,
      baseMs: 60_000,
      capMs: 120_000,
    }),
    maxRetries: 9,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 37,
  });
  // Without the dead-letter queue it counts for, refused as any handler
  // without one is.
  assert.throws(
    () =>
      createQueueHandler(
        {
          relayer,
          maxRetries: 9,
          deadLetterMaxRetries: 100,
        } as unknown as QueueHandlerOptions,
      ),
    { name: "TypeError", message: /'deadLetterQueue' is missing/ },
  );
});

Deno.test("createQueueHandler() takes a dead-letter queue whose max_retries is not given for Cloudflare's default of 3, and refuses it: its give-up would be deleted after 35 s of an outage, the intent stranded", () => {
  // A consumer's max_retries is 3 unless set: "after retrying delivery (by
  // default, 3 times)"
  // (https://developers.cloudflare.com/queues/configuration/dead-letter-queues/).
  // On workerd (Miniflare's queues: the dead-letter consumer on Miniflare's
  // default max_retries, 2, the handler not told, the store down 25 s, then
  // back): 3
  // deliveries on the jobs queue and 3 on the dead-letter queue, six
  // "failed unexpectedly" lines, then nothing; the intent authorized, no
  // dead letter.
  const relayer = relayerOn(new MemoryStore(), { maxDeliveries: 10 });
  assert.throws(
    () =>
      createQueueHandler({
        relayer,
        maxRetries: 9,
        deadLetterQueue: "jobs-dlq",
      }),
    {
      name: "RangeError",
      message:
        "Cannot create queue handler as 'deadLetterMaxRetries' is 3, Cloudflare's default when max_retries is not set: a give-up that fails while the store is down would be retried for only 35s (less than 14 days, Cloudflare's longest retention) before Cloudflare deletes it, and its intent would be stranded. Set the dead-letter queue consumer's max_retries in wrangler.toml to at least 41 (100 is safe), and pass the same number as deadLetterMaxRetries (the example Worker reads it from CLOUDFLARE_DLQ_MAX_RETRIES)",
    },
  );
  createQueueHandler({
    relayer,
    maxRetries: 9,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  });
});

Deno.test("createQueueHandler({ deadLetterQueue }) gives a dead-letter message up with the queue's delivery count, then acks", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  await store.createIntent({ id: "pi_0002", state: "created" });
  const lines: string[] = [];
  const queue = createQueueHandler({
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    log: (line) => lines.push(line),
  });
  const message = fakeMessage(job, 1, "dlq-1");
  await queue({ queue: "jobs-dlq", messages: [message] });
  assert.deepEqual(message.calls, ["ack"]);
  assert.deepEqual(lines, [
    "worker  pi_0001/settle   #3  poison       (the queue gave up after 3 deliveries; job dropped, intent still created)",
  ]);
  const dead = await store.getDeadLetter("pi_0001/settle");
  assert.equal(dead?.reason, "the queue gave up after 3 deliveries");
  assert.deepEqual(dead?.queue, { queue: "cloudflare", dlqId: "dlq-1" });

  const again = fakeMessage(job, 2, "dlq-1"); // delivered twice: resolved once
  await queue({ queue: "jobs-dlq", messages: [again] });
  assert.deepEqual(again.calls, ["ack"]);

  const delivery = fakeMessage({ intentId: "pi_0002", kind: "settle" }, 1);
  await queue({ queue: "jobs", messages: [delivery] }); // the queue itself: a delivery
  assert.deepEqual(delivery.calls, ["retry 3"]);
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
});

Deno.test("createQueueHandler() on a fake queue ends the seed's three payments as the golden says", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({ id: "pi_0003", state: "created" });
  const sender = new ScriptedSender({
    pi_0001: {
      sends: [{
        error: poison(notSent(new Error("signer: chain id mismatch"))),
      }],
    },
    pi_0002: { sends: [{ error: new Error("rpc: connection refused") }] },
  });
  let clock = 0;
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 3, jitter: "none" },
    now: () => clock,
  });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer,
    maxRetries: 2,
  });
  // A queue of one message per job: deliver, and on retry wait and redeliver.
  let pending = ["pi_0001", "pi_0002", "pi_0003"].map((intentId) => ({
    intentId,
    attempts: 1,
  }));
  while (pending.length > 0) {
    const messages = pending.map(({ intentId, attempts }) =>
      fakeMessage({ intentId, kind: "settle" }, attempts, intentId)
    );
    await queue({ queue: "jobs", messages });
    const next: typeof pending = [];
    for (const message of messages) {
      const [call] = message.calls;
      if (call?.startsWith("retry")) {
        assert.ok(message.attempts < 3, "the queue stops after max_retries");
        clock += Number(call.split(" ")[1]) * 1000;
        next.push({ intentId: message.id, attempts: message.attempts + 1 });
      }
    }
    pending = next;
  }
  const states: string[] = [];
  for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
    const intent = await store.getIntent(id);
    states.push(
      `${id} ${(intent?.state ?? "missing").padEnd(13)}hold ${
        intent?.hold ?? "-"
      }`,
    );
  }
  assert.deepEqual(states, golden.trimEnd().split("\n").slice(-3));
});

/**
 * A Sender whose first send waits until `release()`, then answers
 * `0xbusy`; every receipt answers `receipt`.
 */
function heldSender(receipt: "pending" | "confirmed") {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let sends = 0;
  let started!: () => void;
  const sending = new Promise<void>((resolve) => (started = resolve));
  return {
    release,
    sending,
    get sends() {
      return sends;
    },
    sender: {
      async send() {
        sends++;
        started();
        await released;
        return { txHash: "0xbusy" };
      },
      receipt: () => Promise.resolve(receipt),
    },
  };
}

Deno.test("createQueueHandler() retries a busy copy with a delay, never acks it, even on the queue's last delivery: an acked copy may be the job's only one", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const held = heldSender("confirmed");
  const relayer = relayerOn(store, { maxDeliveries: 3 }, held.sender);
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer,
    maxRetries: 2,
  });
  const first = fakeMessage(job, 1, "a");
  const sending = queue({ queue: "jobs", messages: [first] });
  await held.sending; // the first copy's send is in flight, its lease held
  // A copy on the queue's last delivery (max_retries 2 + 1), past the
  // policy's maxDeliveries: busy is not failure, so no poison and no ack.
  const copy = fakeMessage(job, 3, "b");
  await queue({ queue: "jobs", messages: [copy] });
  assert.equal(copy.calls.length, 1);
  assert.match(copy.calls[0]!, /^retry [1-9][0-9]*$/);
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  held.release();
  await sending;
  assert.deepEqual(first.calls, ["retry 3"]); // sent, waiting for confirmation
  assert.equal(held.sends, 1);
});

Deno.test("createQueueHandler({ deadLetterQueue }) retries a give-up that finds a send in flight, never acks it: acked, a give-up that was the job's last message would leave its intent settling with no job and no dead letter", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const held = heldSender("confirmed");
  const relayer = relayerOn(store, { maxDeliveries: 3 }, held.sender);
  const lines: string[] = [];
  const queue = createQueueHandler({
    relayer,
    maxRetries: 2,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    log: (line) => lines.push(line),
  });
  // A delivery of the job sends; the queue meanwhile gives up on another
  // copy of it (published twice, or redriven), which was busy to the end.
  const delivery = fakeMessage(job, 1, "a");
  const sending = queue({ queue: "jobs", messages: [delivery] });
  await held.sending;
  const giveUp = fakeMessage(job, 1, "dlq-1");
  await queue({ queue: "jobs-dlq", messages: [giveUp] });
  assert.equal(giveUp.calls.length, 1);
  assert.match(giveUp.calls[0]!, /^retry [1-9][0-9]*$/);
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  held.release();
  await sending;
  assert.deepEqual(delivery.calls, ["retry 3"]); // sent, waiting for confirmation
  // The give-up comes back: the tx confirmed, so it settles and acks.
  const again = fakeMessage(job, 2, "dlq-1");
  await queue({ queue: "jobs-dlq", messages: [again] });
  assert.deepEqual(again.calls, ["ack"]);
  assert.equal((await store.getIntent("pi_0001"))?.state, "settled");
  assert.equal(held.sends, 1);
});

Deno.test("createQueueHandler() handles at most `concurrency` messages of a batch at once (4 by default), so its sends and a store's connections stay within a Worker's 6, and refuses a concurrency outside 1..6", async () => {
  for (const [concurrency, expected] of [[undefined, 4], [2, 2], [6, 6]]) {
    const store = new MemoryStore();
    let inFlight = 0;
    let most = 0;
    const ids = Array.from({ length: 10 }, (_, n) => `pi_${n}`);
    for (const id of ids) {
      await store.createIntent({ id, state: "authorized", hold: "pending" });
    }
    const sender = {
      async send() {
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        return { txHash: `0x${crypto.randomUUID().slice(0, 8)}` };
      },
      receipt: () => Promise.resolve("pending" as const),
    };
    const queue = createQueueHandler({
      deadLetterQueue: "jobs-dlq",
      deadLetterMaxRetries: 100,
      relayer: createRelayer({ store, sender, random: () => 0 }),
      maxRetries: 9,
      ...(concurrency === undefined ? {} : { concurrency }),
    });
    const messages = ids.map((id, n) =>
      fakeMessage({ intentId: id, kind: "settle" }, 1, `m-${n}`)
    );
    await queue({ queue: "jobs", messages });
    assert.equal(most, expected, `concurrency ${concurrency}`);
    // Every message settled, each once.
    assert.ok(messages.every((m) => m.calls.length === 1), "all settled");
  }
  for (const concurrency of [0, 7, 1.5, Number.NaN]) {
    assert.throws(
      () =>
        createQueueHandler({
          deadLetterQueue: "jobs-dlq",
          deadLetterMaxRetries: 100,
          relayer: relayerOn(),
          maxRetries: 9,
          concurrency,
        }),
      /'concurrency' must be an integer in 1\.\.6/,
    );
  }
});

Deno.test("createQueueHandler() takes a bytes body that is not UTF-8 for unreadable, as /v1/qstash does: kept as a dead letter and acked, on the jobs queue and on the dead-letter queue", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const lines: string[] = [];
  const sender = new ScriptedSender({});
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }, sender),
    maxRetries: 2,
    log: (line) => lines.push(line),
  });
  // A job whose JSON is valid but for one string: 0xC3 0x28 is not UTF-8.
  const encoded = new TextEncoder().encode(
    '{"intentId":"pi_0001","kind":"settle","note":"\u0000"}',
  );
  const at = encoded.indexOf(0);
  const bad = new Uint8Array([
    ...encoded.subarray(0, at),
    0xc3,
    0x28,
    ...encoded.subarray(at + 1),
  ]);
  const bodies: [string, unknown][] = [
    ["m-brace", new Uint8Array([0x7b, 0xff, 0x7d])],
    ["m-buffer", new Uint8Array([0x7b, 0xff, 0x7d]).buffer],
    ["m-job", bad],
    ["m-jobbuf", bad.slice().buffer],
  ];
  for (const name of ["jobs", "jobs-dlq"]) {
    const messages = bodies.map(([id, body]) =>
      fakeMessage(body, 1, `${name}-${id}`)
    );
    await queue({ queue: name, messages });
    for (const message of messages) {
      assert.deepEqual(message.calls, ["ack"], message.id);
      const letter = await store.getDeadLetter(
        `cloudflare/${message.id}/unreadable`,
      );
      assert.match(
        letter?.reason ?? "(no letter)",
        /^unreadable Cloudflare Queues message: .*not UTF-8/,
        message.id,
      );
    }
  }
  // Neither delivered nor given up: the intent is as it was, nothing sent.
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.equal(sender.calls.length, 0);
  // The letter of the job names its intent, read as /v1/qstash reads it.
  assert.equal(
    (await store.getDeadLetter("cloudflare/jobs-m-job/unreadable"))?.intentId,
    "pi_0001",
  );
  // One line each, acked unread, with none of the body's text in it.
  assert.equal(lines.length, 8);
  for (const line of lines) {
    assert.match(line, /acked unread and kept as cloudflare\/.*not UTF-8/);
    assert.ok(!line.includes("\uFFFD") && !line.includes("note"), line);
  }
});

Deno.test("createQueueHandler() reads a bytes body that begins with a UTF-8 byte order mark as the job after it, as /v1/qstash does", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0002", state: "created" });
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
    log: (line) => lines.push(line),
  });
  const bytes = new TextEncoder().encode(
    '\uFEFF{"intentId":"pi_0002","kind":"settle"}',
  );
  assert.deepEqual([...bytes.subarray(0, 3)], [0xef, 0xbb, 0xbf]);
  // As the same job without the mark is (a created intent's settle waits
  // for its authorization: retried), never unreadable.
  const plain = fakeMessage(bytes.subarray(3), 1, "m-plain");
  const messages = [
    fakeMessage(bytes, 1, "m-bom"),
    fakeMessage(bytes.slice().buffer, 1, "m-bombuf"),
  ];
  await queue({ queue: "jobs", messages: [plain, ...messages] });
  assert.deepEqual(plain.calls, ["retry 3"]);
  for (const message of messages) {
    assert.deepEqual(message.calls, plain.calls, message.id);
    assert.equal(
      await store.getDeadLetter(`cloudflare/${message.id}/unreadable`),
      null,
      message.id,
    );
  }
  assert.doesNotMatch(lines.join("\n"), /unreadable/);
});

Deno.test("createQueueHandler() reads a text body that begins with U+FEFF as the job after it, as it reads the same bytes and as /v1/qstash does", async () => {
  // workerd delivers a `contentType: "text"` message (and a `"json"` or
  // `"v8"` one whose value is a string) as a string with the mark kept,
  // and a `"bytes"` one as an ArrayBuffer that begins EF BB BF: the same
  // text, which must be the same job either way.
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0002", state: "created" });
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
    log: (line) => lines.push(line),
  });
  const text = '\uFEFF{"intentId":"pi_0002","kind":"settle"}';
  const bytes = fakeMessage(new TextEncoder().encode(text), 1, "m-bytes");
  const string = fakeMessage(text, 1, "m-text");
  await queue({ queue: "jobs", messages: [bytes, string] });
  assert.deepEqual(bytes.calls, ["retry 3"]);
  assert.deepEqual(string.calls, bytes.calls);
  assert.equal(await store.getDeadLetter("cloudflare/m-text/unreadable"), null);
  assert.doesNotMatch(lines.join("\n"), /unreadable/);
  // JSON that is no job after the mark: unreadable, its letter naming the
  // intent, as the same bytes' letter does.
  const notJob = '\uFEFF{"intentId":"pi_0002","kind":"refund?"}';
  const notJobs = [
    fakeMessage(notJob, 1, "m-text-nojob"),
    fakeMessage(new TextEncoder().encode(notJob), 1, "m-bytes-nojob"),
  ];
  await queue({ queue: "jobs", messages: notJobs });
  for (const message of notJobs) {
    assert.deepEqual(message.calls, ["ack"], message.id);
    assert.equal(
      (await store.getDeadLetter(`cloudflare/${message.id}/unreadable`))
        ?.intentId,
      "pi_0002",
      message.id,
    );
  }
});

Deno.test("createQueueHandler() keeps a message that wraps its job in {job} as a dead letter saying to send the job itself", async () => {
  const store = new MemoryStore();
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
  });
  const wrapped = fakeMessage({ job }, 1, "m-wrapped");
  await queue({ queue: "jobs", messages: [wrapped] });
  assert.deepEqual(wrapped.calls, ["ack"]);
  assert.equal(
    (await store.getDeadLetter("cloudflare/m-wrapped/unreadable"))?.lastError,
    'TypeError: Cannot read job as it is wrapped in {"job": …}, the body POST /v1/deliveries takes: send the job itself, such as {"intentId":"pi_0001","kind":"settle"}',
  );
});

Deno.test("createQueueHandler() keeps a job encoded as JSON twice (a text body of the JSON of its JSON) as a dead letter naming its intent", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0002", state: "authorized" });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
  });
  // A text body is read as JSON: the job's JSON.stringify is the job, and
  // the JSON.stringify of that is the job encoded twice.
  const json = JSON.stringify({ intentId: "pi_0002", kind: "settle" });
  const twice = fakeMessage(JSON.stringify(json), 1, "m-twice");
  await queue({ queue: "jobs", messages: [twice] });
  assert.deepEqual(twice.calls, ["ack"]);
  const letter = await store.getDeadLetter("cloudflare/m-twice/unreadable");
  assert.equal(letter?.intentId, "pi_0002");
  assert.match(letter!.reason, /encoded as JSON twice/);
});

Deno.test("createQueueHandler() keeps a message that wraps its job in {job} as a dead letter naming the intent of the job inside, as a job encoded twice names its own; a wrapper around no readable job names none", async () => {
  // A producer that sends the body POST /v1/deliveries takes: the job is
  // there to read, and its letter named no intent, the record of a
  // payment no one could find from it.
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0002", state: "authorized" });
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: relayerOn(store, { maxDeliveries: 3 }),
    maxRetries: 2,
  });
  const wrapped = fakeMessage(
    { job: { intentId: "pi_0002", kind: "settle" }, delivery: 1 },
    1,
    "m-wrapped",
  );
  const misspelt = fakeMessage(
    { job: { intentId: "pi_0002", kind: "Settle" } },
    1,
    "m-misspelt",
  );
  await queue({ queue: "jobs", messages: [wrapped, misspelt] });
  assert.deepEqual(wrapped.calls, ["ack"]);
  assert.equal(
    (await store.getDeadLetter("cloudflare/m-wrapped/unreadable"))?.intentId,
    "pi_0002",
  );
  assert.equal(
    (await store.getDeadLetter("cloudflare/m-misspelt/unreadable"))?.intentId,
    "",
  );
});
