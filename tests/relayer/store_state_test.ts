import assert from "node:assert/strict";
import {
  createRelayer,
  type Intent,
  MemoryStore,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { deadLetter } from "../../testing/_fixtures.ts";

// A Store of one's own that maps its rows' states wrongly ("Authorized",
// "AUTHORIZED" from a SQL enum) answered every delivery "done (intent
// already Authorized)": the queue acked the job, no dead letter was kept,
// and the payment sat authorized with no job, stranded in silence. The
// relayer now refuses such a read as the store failing: the delivery
// throws, nothing is acked, and the message says what to fix.

/**
 * A MemoryStore whose reads of an intent return `change(intent)` in place
 * of what it holds (`null` as `null`).
 */
function readingAs(
  change: (intent: Intent) => unknown,
): { store: Store; inner: MemoryStore } {
  const inner = new MemoryStore();
  const store = new Proxy(inner, {
    get(target, key) {
      if (key === "getIntent") {
        return async (id: string) => {
          const intent = await target.getIntent(id);
          return intent && (change(intent) as Intent);
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store, inner };
}

/** A MemoryStore whose reads return `state` in place of the real one. */
function misreading(state: string): { store: Store; inner: MemoryStore } {
  return readingAs((intent) => ({ ...intent, state }));
}

/**
 * Delivers `job` for a settling intent whose tx was sent, through a
 * relayer on `store` (a {@linkcode readingAs} of `inner`), and asserts the
 * delivery is refused naming the store and `field`.
 */
async function refusedWithout(
  { store, inner }: { store: Store; inner: MemoryStore },
  field: string,
): Promise<void> {
  await inner.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: "0xa", at: 0 },
  });
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  await assert.rejects(
    relayer.deliver(job, 1),
    (error: Error) =>
      new RegExp(
        `the store returned intent pi_0001 without '${field}' \\(`,
      ).test(`${error.message} ${(error.cause as Error)?.message}`),
  );
}

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("createRelayer() refuses an intent whose state the store made up, and acks nothing", async () => {
  const { store, inner } = misreading("Authorized");
  await inner.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 2 },
  });
  for (const delivery of [1, 2]) {
    await assert.rejects(
      relayer.deliver(job, delivery),
      (error: Error) =>
        /the store returned intent pi_0001 in state "Authorized", which is not an intent state/
          .test(`${error.message} ${(error.cause as Error)?.message}`),
    );
  }
  assert.equal((await inner.getIntent("pi_0001"))?.state, "authorized");
});

Deno.test("createRelayer() refuses a give-up on an intent whose state the store made up", async () => {
  const { store, inner } = misreading("SETTLING");
  await inner.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  await assert.rejects(
    relayer.giveUp(job, {
      deliveries: 3,
      queue: { queue: "qstash", messageId: "msg_1" },
    }),
    (error: Error) =>
      /not an intent state/.test(
        `${error.message} ${(error.cause as Error)?.message}`,
      ),
  );
  assert.equal(await inner.getDeadLetter("pi_0001/settle"), null);
});

// The same store leaving lastBroadcast out of what it reads: every
// delivery and give-up of a settling intent failed on "Cannot read
// properties of undefined (reading 'outcome')", naming neither the store
// nor the field. (A store that leaves out mayHaveSent, broadcasting or
// txHashes still reaches review, and is left to.)
for (
  const field of ["lastBroadcast"] as const
) {
  Deno.test(`createRelayer() refuses an intent read without '${field}', naming it`, () =>
    refusedWithout(
      readingAs((intent) => {
        const { [field]: _, ...rest } = intent;
        return rest;
      }),
      field,
    ));
}

// A store that reads lastBroadcast as its JSON text (a jsonb column mapped
// as text) hands the relayer a string where a broadcast is: refused as
// one that left it out, naming it, not read as "no outcome".
Deno.test("createRelayer() refuses an intent whose lastBroadcast the store read as text, naming it", () =>
  refusedWithout(
    readingAs((intent) => ({
      ...intent,
      lastBroadcast: JSON.stringify(intent.lastBroadcast),
    })),
    "lastBroadcast",
  ));

// An operator's redrive and discard read the intent too: a made-up state
// ("SETTLED" from a SQL enum) is none of the ones they refuse, so the
// redrive would publish a job and take the letter, the record of why, and
// the discard would answer "still SETTLED: redrive it". Both refuse the
// read, naming the store, and keep the letter.
Deno.test("createRelayer()'s redrive and discard refuse an intent whose state the store made up, and keep its letter", async () => {
  const { store, inner } = misreading("SETTLED");
  await inner.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  await inner.putDeadLetter(deadLetter("pi_0001/settle", 0));
  const published: unknown[] = [];
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  const madeUp = (error: Error) =>
    error instanceof TypeError &&
    /the store returned intent pi_0001 in state "SETTLED", which is not an intent state/
      .test(error.message);
  await assert.rejects(
    relayer.redrive("pi_0001/settle", {
      publish: (job) => Promise.resolve(void published.push(job)),
    }),
    madeUp,
  );
  await assert.rejects(relayer.discard("pi_0001/settle"), madeUp);
  assert.deepEqual(published, []);
  assert.notEqual(await inner.getDeadLetter("pi_0001/settle"), null);
});

// A store of one's own that answers an intent with `undefined` (a `Map`'s
// get under the wrong key) or with its row's JSON text: every delivery
// failed on "Cannot read properties of undefined (reading
// 'lastBroadcast')", or was told the intent lacked 'lastBroadcast',
// naming neither the answer nor what to return.
for (
  const [answer, shown] of [
    [undefined, "undefined"],
    ['{"id":"pi_0001"}', '"{\\"id\\":\\"pi_0001\\"}"'],
    [0, "0"],
  ] as const
) {
  Deno.test(`createRelayer() refuses an intent the store read as ${shown}, naming it and what to return`, async () => {
    const { store, inner } = readingAs(() => answer);
    await inner.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
    for (
      const run of [
        () => relayer.deliver(job, 1),
        () =>
          relayer.giveUp(job, {
            deliveries: 3,
            queue: { queue: "qstash", messageId: "msg_1" },
          }),
      ]
    ) {
      await assert.rejects(run(), (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.equal(
          error.message,
          `Cannot read intent pi_0001 as the store returned ${shown}, not an intent or null: fix the Store's getIntent, and run the store contract (@relayer/poison/testing) against it`,
        );
        return true;
      });
    }
    assert.equal((await inner.getIntent("pi_0001"))?.state, "authorized");
    assert.equal(await inner.getDeadLetter("pi_0001/settle"), null);
  });
}

// A store of one's own whose admit() answers the count as its driver read
// it (postgres.js reads an int8 as text, other drivers as a BigInt) or
// not at all: the settle step ran and sent, then every delivery failed on
// "Cannot decide as 'delivery' must be an integer >= 1", a number the
// caller never gave; never poisoned, the payment was rescued again and
// again. Refused now before anything is written or sent.
for (
  const [answer, shown] of [
    ["1", '"1"'],
    [1n, "1n"],
    [null, "null"],
    [0, "0"],
  ] as const
) {
  Deno.test(`createRelayer() refuses a delivery count the store's admit() answered as ${shown}, before anything is sent`, async () => {
    const inner = new MemoryStore();
    await inner.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    const store = new Proxy(inner, {
      get(target, key) {
        if (key === "admit") return () => Promise.resolve(answer);
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as Store;
    const sender = new ScriptedSender({
      pi_0001: { sends: [{ txHash: "0xabc" }] },
    });
    const relayer = createRelayer({ store, sender, now: () => 0 });
    await assert.rejects(relayer.deliver(job), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(
        error.message,
        `Cannot count a delivery of pi_0001/settle as the store's admit() returned ${shown}, not a delivery number (an integer >= 1): fix the Store's admit (a count read as text or as a BigInt must be made a number), and run the store contract (@relayer/poison/testing) against it`,
      );
      return true;
    });
    assert.equal(sender.calls.length, 0);
    assert.equal((await inner.getIntent("pi_0001"))?.state, "authorized");
  });
}
