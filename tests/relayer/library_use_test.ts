/**
 * What a library user's own code hands the relayer, and how it answers:
 * their queue loop's delivery numbers (one over 2^53 − 1 is refused before
 * anything is sent: past the send, the resolution could not keep it in a
 * dead letter, and the payment was left settling with no letter), their
 * dependencies (checked when the relayer is made), and their Sender's
 * receipts as its docs say to write them.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  formatOutcome,
  jobIdOf,
  MemoryStore,
  parseJob,
  poison,
  ScriptedSender,
} from "../../mod.ts";

Deno.test("deliver() and giveUp() refuse a delivery number the store cannot keep with a RangeError, before anything is sent", async () => {
  for (const delivery of [2 ** 53, 1e300]) {
    const store = new MemoryStore();
    await store.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    let sends = 0;
    const sender = new ScriptedSender({
      pi_0001: { sends: [{ txHash: "0xabc" }] },
    });
    const counted = {
      send: (...args: Parameters<typeof sender.send>) => {
        sends++;
        return sender.send(...args);
      },
      receipt: (hash: string) => sender.receipt(hash),
    };
    const relayer = createRelayer({ store, sender: counted, now: () => 0 });
    const job = { intentId: "pi_0001", kind: "settle" } as const;
    await assert.rejects(
      relayer.deliver(job, delivery),
      (error: Error) =>
        error instanceof RangeError && error.message.includes("'delivery'"),
    );
    await assert.rejects(
      relayer.giveUp(job, { deliveries: delivery, queue: { queue: "mine" } }),
      RangeError,
    );
    assert.equal(sends, 0);
    assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  }
});

Deno.test("createRelayer() refuses a store, Sender, clock or random source it cannot call, naming what is missing, instead of sending every payment to review", async () => {
  const store = new MemoryStore();
  const sender = new ScriptedSender({});
  const cases: [Record<string, unknown>, RegExp][] = [
    [
      { store, sender: undefined },
      /'sender' is not a Sender: it lacks send and receipt/,
    ],
    [
      { store, sender: { send: () => {} } },
      /'sender' is not a Sender: it lacks receipt;/,
    ],
    [
      { store: {}, sender },
      /'store' is not a Store: it lacks createIntent, getIntent, .*redrive;/,
    ],
    [{ store: null, sender }, /'store' is not a Store/],
    [{ store, sender, now: 5 }, /'now' must be a function: current value is 5/],
    [{ store, sender, random: "x" }, /'random' must be a function/],
  ];
  for (const [options, message] of cases) {
    assert.throws(
      () =>
        createRelayer(
          options as unknown as Parameters<typeof createRelayer>[0],
        ),
      (error: unknown) =>
        error instanceof TypeError && message.test(error.message),
    );
  }
  // What it takes still works.
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  assert.ok(createRelayer({ store, sender }));
});

Deno.test("a Sender whose receipt() throws poison for a reverted tx, as the ReceiptStatus docs say, sends the intent to review at once, its hold pending, never settled", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender = {
    send: () => Promise.resolve({ txHash: "0xabc" }),
    receipt: () => Promise.reject(poison(new Error("reverted in block 43"))),
  };
  const relayer = createRelayer({ store, sender });
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  assert.equal((await relayer.deliver(job, 1)).action, "retry"); // sent
  const outcome = await relayer.deliver(job, 2);
  assert.equal(outcome.action, "poison");
  const intent = await store.getIntent("pi_0001");
  assert.equal(intent?.state, "needs_review");
  assert.equal(intent?.hold, "pending");
  assert.match(
    (await store.getDeadLetter("pi_0001/settle"))!.lastError,
    /reverted in block 43/,
  );
});

Deno.test("an earlier tx that confirmed settles the payment even when the last one's receipt fails or is declared poison", async () => {
  for (
    const failure of [
      () => poison(new Error("reverted in block 43")),
      () => new Error("node unreachable"),
    ]
  ) {
    const store = new MemoryStore();
    await store.createIntent({
      id: "pi_0001",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      txHashes: ["0xold", "0xnew"],
      lastBroadcast: { outcome: "sent", txHash: "0xnew", at: 0 },
    });
    const sender = {
      send: () => Promise.reject(new Error("no sends here")),
      receipt: (txHash: string) =>
        txHash === "0xold"
          ? Promise.resolve("confirmed" as const)
          : Promise.reject(failure()),
    };
    const relayer = createRelayer({ store, sender, now: () => 1 });
    const outcome = await relayer.deliver(
      { intentId: "pi_0001", kind: "settle" },
      1,
    );
    assert.equal(outcome.action, "done", outcome.reason);
    assert.equal((await store.getIntent("pi_0001"))?.state, "settled");
  }
});

Deno.test("parseJob() names any intent id or kind it refuses in its own words, cut short, whatever its type", () => {
  const refusals: [unknown, RegExp][] = [
    [{ intentId: 10n }, /'intentId' must be .*: current value is 10n$/],
    [{ intentId: "x".repeat(100_000) }, /…\(100000 characters\)$/],
    [
      { intentId: "pi_1", kind: 10n },
      /'kind' must be "settle": current value is 10n$/,
    ],
    [{ intentId: "pi_1", kind: ["y".repeat(100_000)] }, /…\(\d+ characters\)$/],
  ];
  for (const [job, message] of refusals) {
    assert.throws(() => parseJob(job), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^Cannot read job as /);
      assert.match(error.message, message);
      assert.ok(
        error.message.length < 400,
        `${error.message.length} characters`,
      );
      return true;
    });
  }
});

Deno.test("a clock that does not return whole milliseconds fails the delivery naming 'now', on any delivery (no policy decides on it), and nothing is written or sent, nor a settling payment rescued", async () => {
  for (const reading of [1000.5, Number.NaN, "1000", new Date(1000)]) {
    for (const state of ["authorized", "settling"] as const) {
      const store = new MemoryStore();
      await store.createIntent({
        id: "pi_0001",
        state,
        hold: "pending",
        ...(state === "settling" ? { settlingSince: 0 } : {}),
      });
      const before = await store.getIntent("pi_0001");
      const sender = new ScriptedSender({
        pi_0001: { sends: [{ txHash: "0xabc" }] },
      });
      const relayer = createRelayer({
        store,
        sender,
        now: () => reading as number,
        random: () => 0,
        policy: { maxDeliveries: 3 },
      });
      const job = { intentId: "pi_0001", kind: "settle" } as const;
      for (const n of [1, 3, undefined]) {
        await assert.rejects(
          relayer.deliver(job, n),
          {
            name: "TypeError",
            message:
              /^Cannot run a delivery as 'now' must return a whole number of milliseconds, as Date\.now\(\) does: it returned /,
          },
          `${String(reading)} at ${n}`,
        );
      }
      assert.deepEqual(sender.calls, []);
      assert.deepEqual(await store.getIntent("pi_0001"), before);
    }
  }
});

// A queue loop of one's own that counts deliveries by jobIdOf() of the
// intent id alone, or of a job it has not parsed, got "undefined/undefined"
// for every job: one shared count, and every job poisoned early.
Deno.test("jobIdOf() refuses what is not a job, naming it and what to pass", () => {
  for (
    const [job, shown] of [
      ["pi_0001", '"pi_0001"'],
      [null, "null"],
      [undefined, "undefined"],
      [{ intentId: "pi_0001" }, '{"intentId":"pi_0001"}'],
      [{ intentId: 1n, kind: "settle" }, "[object Object]"],
    ] as const
  ) {
    assert.throws(() => jobIdOf(job as never), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(
        error.message,
        `Cannot make a job id as 'job' must be { intentId, kind } with both strings: current value is ${shown}; pass the job parseJob() read`,
      );
      return true;
    });
  }
  assert.equal(
    jobIdOf({ intentId: "pi_0001", kind: "settle" }),
    "pi_0001/settle",
  );
});

// A log line of one's own given the outcome alone (`formatOutcome(outcome)`)
// or an outcome without its reason failed on "Cannot read properties of
// undefined (reading 'action')" or "(reading 'length')".
Deno.test("formatOutcome() refuses what is not an outcome, naming it and what to pass", () => {
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  for (
    const [outcome, shown] of [
      [undefined, "undefined"],
      [{ action: "retry", delivery: 1 }, '{"action":"retry","delivery":1}'],
      ["done", '"done"'],
    ] as const
  ) {
    assert.throws(
      () => formatOutcome(job, outcome as never),
      (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.equal(
          error.message,
          `Cannot format outcome as 'outcome' must have an action and a reason: current value is ${shown}; pass what deliver() or giveUp() answered`,
        );
        return true;
      },
    );
  }
});

// From JavaScript, an intent id alone was said to lack 'intentId', the one
// thing it held.
Deno.test("parseJob() and deliver() name a job that is no object, with the shape to pass and what came", async () => {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  for (
    const [job, shown] of [
      ["pi_0001", '"pi_0001"'],
      [null, "null"],
      [undefined, "undefined"],
      [42, "42"],
      [["pi_0001", "settle"], '["pi_0001","settle"]'],
    ] as const
  ) {
    const message =
      `Cannot read job as it must be an object such as {"intentId":"pi_0001","kind":"settle"}: current value is ${shown}`;
    assert.throws(() => parseJob(job), new TypeError(message));
    await assert.rejects(
      relayer.deliver(job as never, 1),
      new TypeError(message),
    );
  }
});

Deno.test("parseJob() says a job is wrapped in {\"job\": …} only where it has no intent id and its 'job' is an object: an intent id of the wrong form, or a 'job' of null or text, is named as any other", () => {
  const job = { intentId: "pi_0001", kind: "settle" };
  const wrapped =
    'Cannot read job as it is wrapped in {"job": …}, the body POST /v1/deliveries takes: send the job itself, such as {"intentId":"pi_0001","kind":"settle"}';
  const cases: [unknown, RegExp | string][] = [
    [{ job }, wrapped],
    [{ job, kind: "settle" }, wrapped],
    [{ intentId: "", job }, /'intentId' must be .*: current value is ""$/],
    [{ intentId: null, job }, /'intentId' must be .*: current value is null$/],
    [{ job: null }, /'intentId' must be .*: current value is undefined$/],
    [{ job: "pi_0001" }, /'intentId' must be .*: current value is undefined$/],
  ];
  for (const [value, message] of cases) {
    assert.throws(
      () => parseJob(value),
      (error: Error) => {
        assert.ok(error instanceof TypeError);
        if (typeof message === "string") assert.equal(error.message, message);
        else assert.match(error.message, message);
        return true;
      },
      JSON.stringify(value),
    );
  }
});
