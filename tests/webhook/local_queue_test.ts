import assert from "node:assert/strict";
import {
  type Admission,
  createRelayer,
  definePolicy,
  type Job,
  MemoryStore,
  ScriptedSender,
} from "../../mod.ts";
import {
  localQueueConsumer,
  type LocalQueueMessage,
  quietly,
} from "../../webhook/_local_queue.ts";
import { outageDelayMs } from "../../policy/_doubled.ts";

/**
 * A MemoryStore that cannot count a delivery while `down` is true: the
 * first write of a delivery the queue does not number, so `deliver` throws.
 */
class FlakyStore extends MemoryStore {
  down = true;
  override admit(admission: Admission): Promise<number | null> {
    if (this.down) return Promise.reject(new Error("store unreachable"));
    return super.admit(admission);
  }
}

/**
 * A MemoryStore that cannot keep a dead letter while `down` is true; with
 * `once`, it is back after its first refusal.
 */
class NoLetters extends MemoryStore {
  down = true;
  readonly #once: boolean;
  constructor(once = false) {
    super();
    this.#once = once;
  }
  override putDeadLetter(
    ...args: Parameters<MemoryStore["putDeadLetter"]>
  ): Promise<void> {
    if (this.down) {
      if (this.#once) this.down = false;
      return Promise.reject(new Error("store unreachable"));
    }
    return super.putDeadLetter(...args);
  }
}

function consumerOn(store: MemoryStore) {
  const sent: [LocalQueueMessage, number][] = [];
  const lines: string[] = [];
  const consume = localQueueConsumer({
    relayer: createRelayer({
      store,
      sender: new ScriptedSender({}),
      now: () => 0,
      random: () => 0.5,
    }),
    enqueue: (message, delayMs) => {
      sent.push([message, delayMs]);
      return Promise.resolve();
    },
    log: (line) => void lines.push(line),
  });
  return { consume, sent, lines };
}

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("localQueueConsumer() backs off a job that keeps failing unexpectedly, doubling from the policy's base to its cap, and never drops it", async () => {
  const store = new FlakyStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const { consume, sent, lines } = consumerOn(store);
  let message: LocalQueueMessage = { job };
  for (let n = 0; n < 7; n++) {
    await consume(message);
    message = sent.at(-1)![0];
  }
  assert.deepEqual(
    sent.map(([m, delayMs]) => [m.failures, delayMs]),
    [
      [1, 5_000],
      [2, 10_000],
      [3, 20_000],
      [4, 40_000],
      [5, 80_000],
      [6, 120_000],
      [7, 120_000],
    ],
  );
  assert.ok(sent.every(([m]) => m.job.intentId === "pi_0001"));
  assert.equal(
    lines[2],
    "queue   pi_0001/settle   failed unexpectedly (3 in a row), again in 20s: Error: store unreachable",
  );
  // Back up: the next delivery is the policy's, and the count of failures
  // in a row starts again.
  store.down = false;
  await consume(message);
  const [after, delayMs] = sent.at(-1)!;
  assert.deepEqual(after, { job });
  assert.equal(delayMs, 3_750); // created: a retry at delivery 1, 2.5 s + 0.5 × 2.5 s
});

Deno.test("localQueueConsumer() keeps a malformed message as a dead letter with a log line, and reads a bad failure count as the first", async () => {
  const store = new FlakyStore();
  const { consume, sent, lines } = consumerOn(store);
  await consume({ job: { intentId: "pi_0002" } });
  await consume(null);
  assert.equal(sent.length, 0);
  assert.equal(lines.length, 2);
  assert.ok(
    lines.every((line) =>
      line.startsWith("queue   acked a malformed message unread, kept as ") &&
      /kept as local\/sha256-[0-9a-f]{32}\/unreadable: /.test(line)
    ),
  );
  const { items } = await store.listDeadLetters();
  assert.deepEqual(items.map((letter) => letter.intentId).sort(), [
    "",
    "pi_0002",
  ]);
  await consume({ job, failures: -3 });
  await consume({ job, failures: Number.NaN });
  assert.deepEqual(sent.map(([m, d]) => [m.failures, d]), [[1, 5_000], [
    1,
    5_000,
  ]]);
});

Deno.test("localQueueConsumer() puts a malformed message back on the queue, backing off, while its dead letter cannot be written, and keeps it once it can", async () => {
  const store = new NoLetters();
  const { consume, sent, lines } = consumerOn(store);
  await consume({ job: { intentId: "pi_0002" } });
  await consume(sent[0]![0]);
  assert.deepEqual(sent, [
    [{ job: { intentId: "pi_0002" }, failures: 1 }, 5_000],
    [{ job: { intentId: "pi_0002" }, failures: 2 }, 10_000],
  ]);
  assert.ok(lines[0]!.includes("could not be kept (1 in a row), again in 5s"));
  store.down = false;
  await consume(sent[1]![0]);
  assert.equal(sent.length, 2, "kept, not put back");
  const { items } = await store.listDeadLetters();
  assert.deepEqual(items.map((letter) => letter.intentId), ["pi_0002"]);
});

Deno.test("outageDelayMs() doubles from the base up to the cap, waits the base for a count that is not one, and never less than the base", () => {
  assert.deepEqual(
    [1, 2, 3, 5, 6, 100, 2 ** 40].map((n) => outageDelayMs(n, 5_000, 120_000)),
    [5_000, 10_000, 20_000, 80_000, 120_000, 120_000, 120_000],
  );
  assert.deepEqual(
    [0, -3, 1.5, Number.NaN].map((n) => outageDelayMs(n, 5_000, 120_000)),
    [5_000, 5_000, 5_000, 5_000],
  );
  assert.equal(outageDelayMs(3, 5_000, 1_000), 5_000);
});

Deno.test("quietly() lets Deno KV redeliver a message whose handler failed, with one line naming its job on stderr instead of a stack", async () => {
  const lines: string[] = [];
  const failing = quietly(
    () => Promise.reject(new TypeError("database is locked")),
    (line) => lines.push(line),
  );
  await assert.rejects(failing({}), (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.equal(error.stack, "TypeError: database is locked");
    return true;
  });
  assert.deepEqual(lines, [
    "queue   a message could not be handled; Deno KV redelivers it: TypeError: database is locked",
  ]);
  // A job's message is named by its job id, as every other queue line is:
  // on call finds what an outage held up by grepping the log for it.
  await assert.rejects(
    failing({ job: { intentId: "pi_0001", kind: "settle" }, failures: 2 }),
  );
  assert.equal(
    lines[1],
    "queue   pi_0001/settle   could not be handled; Deno KV redelivers it: TypeError: database is locked",
  );
  // On Deno KV itself: the message comes back, and stderr has no stack.
  const module = new URL("../../webhook/_local_queue.ts", import.meta.url);
  const code = `
    import { quietly } from ${JSON.stringify(module.href)};
    const kv = await Deno.openKv(":memory:");
    let n = 0;
    kv.listenQueue(quietly(async () => {
      if (++n === 1) throw new TypeError("database is locked");
      console.log("delivered again");
      kv.close();
    }, () => {}));
    await kv.enqueue({ job: 1 });
  `;
  const { code: status, stdout, stderr } = await new Deno.Command(
    Deno.execPath(),
    {
      args: ["eval", "--unstable-kv", code],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(20_000),
    },
  ).output();
  const err = new TextDecoder().decode(stderr);
  assert.equal(status, 0, err);
  assert.equal(new TextDecoder().decode(stdout), "delivered again\n");
  assert.doesNotMatch(err, /\n\s+at /, err);
  assert.match(err, /database is locked/);
});

Deno.test("localQueueConsumer() on a Deno KV file: a message delivered again while it is being handled (the wall clock stepped) is not handled twice, and ends as the first delivery ends", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_local_queue_" });
  const kv = await Deno.openKv(`${dir}/queue.kv`);
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let began: () => void = () => {};
  const firstBegan = new Promise<void>((resolve) => (began = resolve));
  const deliveries: Job[] = [];
  const followUps: LocalQueueMessage[] = [];
  const lines: string[] = [];
  const ended: string[] = [];
  const consume = localQueueConsumer({
    relayer: {
      policy: definePolicy(),
      keepUnreadable: () => Promise.reject(new Error("not used")),
      async deliver(job: Job) {
        deliveries.push(job);
        began();
        await released;
        return {
          action: "retry",
          delivery: deliveries.length,
          delayMs: 5_000,
          reason: "sent 0x1, waiting for confirmation",
        };
      },
    } as Parameters<typeof localQueueConsumer>[0]["relayer"],
    enqueue: (message) => {
      followUps.push(message);
      return Promise.resolve();
    },
    log: (line) => void lines.push(line),
  });
  const listening = kv.listenQueue(async (message) => {
    await consume(message);
    ended.push((message as LocalQueueMessage).id ?? "");
  });
  try {
    const message: LocalQueueMessage = { job, id: "m-1" };
    await kv.enqueue(message);
    await firstBegan;
    // Deno KV's redelivery of the same message while its handler runs.
    await kv.enqueue(message);
    const deadline = Date.now() + 10_000;
    while (lines.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual(ended, [], "the copy waits for the first delivery");
    release();
    while (ended.length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(deliveries.length, 1, "one delivery of the message");
    assert.deepEqual(followUps, [{ job }], "one retry enqueued, not two");
    assert.deepEqual(ended, ["m-1", "m-1"]);
    assert.equal(
      lines[0],
      "queue   message m-1 delivered again while it is being handled (put back by Deno KV: running 5 s past its due time, or the wall clock stepped): it ends as that delivery ends",
    );
  } finally {
    release();
    kv.close();
    await listening;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("localQueueConsumer(): a message delivered again after its delivery ended (Deno KV put it back when the wall clock stepped, and the first finished before the copy came) is acked, not handled twice; one whose delivery threw is handled again", async () => {
  // Deno KV puts a running message past its deadline back on the queue,
  // 1 s out (denokv's queue_cleanup, then the schedule's first delay), and
  // the first delivery's ack does not remove that copy: a delivery that
  // ends within the second (a look) meets its copy only afterwards.
  const deliveries: Job[] = [];
  const followUps: LocalQueueMessage[] = [];
  const lines: string[] = [];
  let fail = false;
  const consume = localQueueConsumer({
    relayer: {
      policy: definePolicy(),
      keepUnreadable: () => Promise.reject(new Error("not used")),
      deliver(job: Job) {
        deliveries.push(job);
        if (fail) return Promise.reject(new Error("store unreachable"));
        return Promise.resolve({
          action: "retry",
          delivery: deliveries.length,
          delayMs: 5_000,
          reason: "waiting for 0x1 to confirm",
        });
      },
    } as Parameters<typeof localQueueConsumer>[0]["relayer"],
    enqueue: (message) => {
      followUps.push(message);
      if (fail) return Promise.reject(new Error("database is locked"));
      return Promise.resolve();
    },
    log: (line) => void lines.push(line),
  });
  const message: LocalQueueMessage = { job, id: "m-1" };
  await consume(message);
  await consume(message); // the copy
  assert.equal(deliveries.length, 1, "one delivery of the message");
  assert.deepEqual(followUps, [{ job }], "one retry enqueued, not two");
  assert.equal(
    lines.at(-1),
    "queue   message m-1 delivered again after its delivery ended (put back by Deno KV: it ran 5 s past its due time, or the wall clock stepped): acked, as that delivery ended it",
  );
  // A delivery that threw is Deno KV's to deliver again, and is handled.
  fail = true;
  const other: LocalQueueMessage = { job, id: "m-2" };
  await assert.rejects(consume(other), /database is locked/);
  fail = false;
  await consume(other);
  assert.equal(deliveries.length, 3);
});

/** A consumer whose job lines are kept in `kept` (by job id), as main.ts keeps them in Deno KV. */
function linedConsumer(
  deliver: () => Promise<unknown>,
  kept = new Map<
    string,
    { id: string; ended?: boolean; versionstamp: string }
  >(),
) {
  let version = 0;
  const sent: [LocalQueueMessage, number][] = [];
  const lines: string[] = [];
  let delivered = 0;
  let next = 0;
  const consume = localQueueConsumer({
    relayer: {
      policy: definePolicy(),
      keepUnreadable: () => Promise.reject(new Error("not used")),
      deliver() {
        delivered++;
        return deliver();
      },
    } as unknown as Parameters<typeof localQueueConsumer>[0]["relayer"],
    enqueue: (message, delayMs) => {
      const key = `${message.job.intentId}/${message.job.kind}`;
      const id = `r-${++next}`;
      kept.set(key, { id, versionstamp: String(++version) });
      sent.push([{ ...message, id, line: true }, delayMs]);
      return Promise.resolve();
    },
    line: (jobId) => {
      const line = kept.get(jobId);
      return Promise.resolve({
        id: line?.id ?? null,
        ended: line?.ended ?? false,
        versionstamp: line?.versionstamp ?? null,
      });
    },
    endLine: (jobId, id, read) => {
      if ((kept.get(jobId)?.versionstamp ?? null) !== read.versionstamp) {
        return Promise.resolve(false);
      }
      kept.set(jobId, { id, ended: true, versionstamp: String(++version) });
      return Promise.resolve(true);
    },
    log: (line) => void lines.push(line),
  });
  return { consume, kept, sent, lines, delivered: () => delivered };
}

const waiting = () =>
  Promise.resolve({
    action: "retry",
    delivery: 1,
    delayMs: 5_000,
    reason: "waiting for 0x1 to confirm",
  });

Deno.test("localQueueConsumer() with job lines: a message a newer one of its job superseded (queued again, or its retry enqueued before a kill lost its ack) is acked unhandled", async () => {
  const { consume, kept, sent, lines, delivered } = linedConsumer(waiting);
  kept.set("pi_0001/settle", { id: "m-2", versionstamp: "100" });
  await consume({ job, id: "m-1", line: true });
  assert.equal(delivered(), 0);
  assert.deepEqual(sent, []);
  assert.deepEqual(lines, [
    "queue   pi_0001/settle   acked message m-1 unhandled: a newer message of its job (m-2) carries it",
  ]);
  // The line's own message is handled, and its retry takes the line.
  await consume({ job, id: "m-2", line: true });
  assert.equal(delivered(), 1);
  assert.deepEqual(sent, [[{ job, id: "r-1", line: true }, 5_000]]);
  assert.equal(kept.get("pi_0001/settle")?.id, "r-1");
  // A message that took no line (a redrive's, an older version's) is handled.
  await consume({ job, id: "d-1" });
  assert.equal(delivered(), 2);
  assert.equal(kept.get("pi_0001/settle")?.id, "r-2");
});

Deno.test("localQueueConsumer() with job lines: a delivery whose job was queued again while it ran still enqueues its retry (it may have sent), which takes the line: the message queued meanwhile is then acked unhandled", async () => {
  let moved = () => {};
  const harness = linedConsumer(() => {
    moved();
    return waiting();
  });
  const { consume, kept, sent, lines, delivered } = harness;
  kept.set("pi_0001/settle", { id: "m-1", versionstamp: "100" });
  // Queued again by an operator while the delivery runs.
  moved = () => kept.set("pi_0001/settle", { id: "m-2", versionstamp: "101" });
  await consume({ job, id: "m-1", line: true });
  assert.deepEqual(sent, [[{ job, id: "r-1", line: true }, 5_000]]);
  assert.equal(kept.get("pi_0001/settle")?.id, "r-1");
  moved = () => {};
  await consume({ job, id: "m-2", line: true });
  assert.equal(delivered(), 1);
  assert.equal(
    lines.at(-1),
    "queue   pi_0001/settle   acked message m-2 unhandled: a newer message of its job (r-1) carries it",
  );
});

Deno.test("localQueueConsumer() with job lines: a delivery that ends its job marks its line ended, unless a message was queued since; that message delivered again (a kill lost its ack) is acked unhandled, and so is an older one", async () => {
  let moved = () => {};
  const dropped = () =>
    Promise.resolve({
      action: "poison",
      delivery: 3,
      reason: "no luck after 3 deliveries",
      resolution: { action: "drop", reason: "job dropped" },
    });
  const { consume, kept, sent, lines, delivered } = linedConsumer(() => {
    moved();
    return dropped();
  });
  kept.set("pi_0001/settle", { id: "m-1", versionstamp: "100" });
  await consume({ job, id: "m-1", line: true });
  assert.deepEqual(kept.get("pi_0001/settle"), {
    id: "m-1",
    ended: true,
    versionstamp: "1",
  });
  // After a restart (this consumer's memory of m-1 gone), from the line.
  const restarted = linedConsumer(dropped, kept);
  await restarted.consume({ job, id: "m-1", line: true });
  await restarted.consume({ job, id: "m-0", line: true });
  assert.equal(delivered() + restarted.delivered(), 1);
  assert.deepEqual(restarted.lines, [
    "queue   pi_0001/settle   acked message m-1 unhandled: its delivery ended its job",
    "queue   pi_0001/settle   acked message m-0 unhandled: a newer message of its job (m-1) ended it",
  ]);
  // A message queued after the job ended takes the line, and is handled.
  kept.set("pi_0001/settle", { id: "m-2", versionstamp: "200" });
  // Queued again while that delivery ends the job: the line is not marked.
  moved = () => kept.set("pi_0001/settle", { id: "m-3", versionstamp: "201" });
  await consume({ job, id: "m-2", line: true });
  assert.equal(delivered(), 2);
  assert.deepEqual(kept.get("pi_0001/settle"), {
    id: "m-3",
    versionstamp: "201",
  });
  assert.match(
    lines.at(-1)!,
    /its line was not marked ended, as a newer message of its job carries it$/,
  );
  assert.deepEqual(sent, []);
});

Deno.test("localQueueConsumer() names a message with an id to the relayer: a copy of the message whose delivery dropped its job (a kill before its line was marked ended, its ack lost) sends nothing", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
  });
  let clock = 0;
  const open = () => {
    const lines: string[] = [];
    const consume = localQueueConsumer({
      relayer: createRelayer({
        store,
        sender,
        policy: definePolicy({ maxDeliveries: 2, jitter: "none" }),
        now: () => clock,
        random: () => 0.5,
      }),
      enqueue: () => Promise.resolve(),
      log: (line) => void lines.push(line),
    });
    return { consume, lines };
  };
  // The job's last delivery: it drops the job, nothing sent.
  await store.admit({ count: "pi_0001/settle", now: 0 });
  const first = open();
  await first.consume({ job, id: "m-1", line: true });
  assert.match(first.lines.join("\n"), / poison /);
  // After a restart, the same message again, once the drop's lease is
  // over: its count starts at 1 with the letter.
  clock = 120_000;
  const again = open();
  await again.consume({ job, id: "m-1", line: true });
  assert.deepEqual(
    [
      sender.calls.filter((c) => c.method === "send").length,
      (await store.getIntent("pi_0001"))?.state,
    ],
    [0, "authorized"],
    again.lines.join("\n"),
  );
});

Deno.test("localQueueConsumer() keeps a job encoded as JSON twice (enqueued as its JSON.stringify) as a dead letter naming its intent", async () => {
  const store = new MemoryStore();
  const { consume, sent } = consumerOn(store);
  await consume({ job: JSON.stringify(job) } as unknown as LocalQueueMessage);
  assert.equal(sent.length, 0);
  const { items } = await store.listDeadLetters();
  assert.deepEqual(items.map((letter) => letter.intentId), ["pi_0001"]);
  assert.match(items[0]!.reason, /encoded as JSON twice/);
});

Deno.test("localQueueConsumer() keeps a bare job (the job itself enqueued, not wrapped in {job}) as a dead letter naming its intent", async () => {
  const store = new MemoryStore();
  const { consume, sent } = consumerOn(store);
  await consume(job as unknown as LocalQueueMessage);
  await consume(JSON.stringify(job) as unknown as LocalQueueMessage);
  assert.equal(sent.length, 0);
  const { items } = await store.listDeadLetters();
  assert.deepEqual(items.map((letter) => letter.intentId), [
    "pi_0001",
    "pi_0001",
  ]);
});

Deno.test("localQueueConsumer() puts a malformed message back whole while its dead letter cannot be written: what it held is kept once the store is back, not a message with nothing in it", async () => {
  for (
    const message of [
      job,
      JSON.stringify(job),
      { job: { intentId: "pi_0001" }, trace: "t-1" },
    ] as unknown[]
  ) {
    const store = new NoLetters();
    const { consume, sent } = consumerOn(store);
    await consume(message);
    assert.equal(sent.length, 1);
    const [back] = sent[0]!;
    assert.equal(back.failures, 1);
    // What the message held is still on the queue.
    assert.ok(
      JSON.stringify(back).includes(JSON.stringify(message).slice(1, -1)),
      JSON.stringify(back),
    );
    store.down = false;
    await consume(back);
    assert.equal(sent.length, 1, "kept, not put back");
    const { items } = await store.listDeadLetters();
    assert.deepEqual(
      items.map((letter) => letter.intentId),
      ["pi_0001"],
      JSON.stringify(message),
    );
  }
});

Deno.test("localQueueConsumer() on a Deno KV file: a bare job whose dead letter could not be written comes back off the queue whole, and is kept naming its intent", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_local_queue_" });
  const kv = await Deno.openKv(`${dir}/queue.kv`);
  const store = new NoLetters(true); // back for the message's next delivery
  const seen: unknown[] = [];
  const consume = localQueueConsumer({
    relayer: createRelayer({
      store,
      sender: new ScriptedSender({}),
      policy: { baseMs: 10, capMs: 20 },
    }),
    enqueue: async (message, delayMs) => {
      await kv.enqueue(message, { delay: delayMs });
    },
    log: () => {},
  });
  const listening = kv.listenQueue(async (message) => {
    seen.push(message);
    await consume(message);
  });
  try {
    await kv.enqueue(job);
    const deadline = Date.now() + 10_000;
    let letters: string[] = [];
    while (letters.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      letters = (await store.listDeadLetters()).items.map((l) => l.intentId);
    }
    assert.deepEqual(seen, [job, { ...job, failures: 1 }]);
    assert.deepEqual(letters, ["pi_0001"]);
  } finally {
    kv.close();
    await listening;
    await Deno.remove(dir, { recursive: true });
  }
});
