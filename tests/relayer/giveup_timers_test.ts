import assert from "node:assert/strict";
import {
  createRelayer,
  type Intent,
  MemoryStore,
  type ReceiptStatus,
  type Sender,
} from "../../mod.ts";

// Deno's op sanitizer is off by default: these tests turn it on, so that a
// give-up's wait (for the receipts of its txs, for this relayer's own send
// in flight) whose timer outlives the give-up fails them. The waits are
// bounded by the lease: 100 ms here, a budget of 50 ms.

const sanitized = { sanitizeOps: true, sanitizeResources: true } as const;
const LEASE_MS = 100;
const job = { intentId: "pi_1", kind: "settle" } as const;
const queue = { queue: "qstash", messageId: "msg_1" } as const;

/** A Sender whose sends and receipts answer when the test says. */
function heldSender() {
  const held: Array<() => void> = [];
  const hold = () => new Promise<void>((resolve) => held.push(resolve));
  let receipt: (
    options?: { readonly signal?: AbortSignal },
  ) => Promise<ReceiptStatus> = () => Promise.resolve("confirmed");
  const sendStarted = Promise.withResolvers<void>();
  const sender: Sender = {
    async send(intent: Intent) {
      sendStarted.resolve();
      await hold();
      return { txHash: `0x${intent.id}` };
    },
    receipt: (_txHash, options) => receipt(options),
  };
  return {
    sender,
    sendStarted: sendStarted.promise,
    receipts(
      answer: (
        options?: { readonly signal?: AbortSignal },
      ) => Promise<ReceiptStatus>,
    ) {
      receipt = answer;
    },
    hold,
    release() {
      for (const resolve of held.splice(0)) resolve();
    },
  };
}

/** A settling intent with a tx on record, and a relayer over it whose Sender the test holds. */
async function settlingWithTx() {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    txHashes: ["0xpi_1"],
  });
  const s = heldSender();
  const relayer = createRelayer({ store, sender: s.sender, leaseMs: LEASE_MS });
  return { store, s, relayer };
}

Deno.test({
  name:
    "a give-up whose receipt answers confirmed (settled) leaves no timer behind",
  ...sanitized,
  fn: async () => {
    const { store, relayer } = await settlingWithTx();
    const outcome = await relayer.giveUp(job, { deliveries: 4, queue });
    assert.equal(outcome.action, "done");
    assert.equal((await store.getIntent("pi_1"))?.state, "settled");
  },
});

Deno.test({
  name: "a give-up whose receipt fails (to review) leaves no timer behind",
  ...sanitized,
  fn: async () => {
    const { store, s, relayer } = await settlingWithTx();
    s.receipts(() => Promise.reject(new Error("node down")));
    const outcome = await relayer.giveUp(job, { deliveries: 4, queue });
    assert.equal(outcome.action, "poison");
    assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
  },
});

Deno.test({
  name:
    "a give-up whose receipt does not answer within its budget (to review) leaves no timer behind",
  ...sanitized,
  fn: async () => {
    const { store, s, relayer } = await settlingWithTx();
    s.receipts(async () => {
      await s.hold();
      return "confirmed";
    });
    const outcome = await relayer.giveUp(job, { deliveries: 4, queue });
    assert.equal(outcome.action, "poison");
    assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
    // The receipt the give-up stopped waiting for ends now; a Sender's
    // own timer, if it has one, is its to clear.
    s.release();
  },
});

Deno.test({
  name:
    "a give-up that stops waiting for a receipt aborts the signal it gave the Sender, so a request that honours it ends with the give-up",
  ...sanitized,
  fn: async () => {
    const { store, s, relayer } = await settlingWithTx();
    const signals: (AbortSignal | undefined)[] = [];
    s.receipts((options) => {
      signals.push(options?.signal);
      // A request that ends only when its signal aborts.
      return new Promise<ReceiptStatus>((_, reject) =>
        options?.signal?.addEventListener(
          "abort",
          () => reject(options.signal?.reason),
        )
      );
    });
    const outcome = await relayer.giveUp(job, { deliveries: 4, queue });
    assert.equal(outcome.action, "poison");
    assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
    assert.equal(signals.length, 1);
    assert.equal(signals[0]?.aborted, true);
    assert.equal(
      (signals[0]?.reason as Error).message,
      "The give-up stopped waiting for receipts after 50ms.",
    );
  },
});

Deno.test({
  name:
    "a give-up whose receipts answer within the budget leaves the signal it gave the Sender unaborted",
  ...sanitized,
  fn: async () => {
    const { s, relayer } = await settlingWithTx();
    const signals: (AbortSignal | undefined)[] = [];
    s.receipts((options) => {
      signals.push(options?.signal);
      return Promise.resolve("pending");
    });
    const outcome = await relayer.giveUp(job, { deliveries: 4, queue });
    assert.equal(outcome.action, "poison");
    assert.deepEqual(signals.map((signal) => signal?.aborted), [false]);
  },
});

for (const sendEnds of ["within the budget", "after it"] as const) {
  Deno.test({
    name:
      `a give-up that waits for this relayer's own send in flight, which ends ${sendEnds}, leaves no timer behind`,
    ...sanitized,
    fn: async () => {
      const store = new MemoryStore();
      await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      const s = heldSender();
      s.receipts(() => Promise.resolve("pending"));
      const relayer = createRelayer({
        store,
        sender: s.sender,
        leaseMs: LEASE_MS,
      });
      const delivering = relayer.deliver(job, 1);
      await s.sendStarted;
      const givingUp = relayer.giveUp(job, { deliveries: 4, queue });
      if (sendEnds === "within the budget") s.release();
      const outcome = await givingUp;
      s.release();
      await delivering;
      // Past the budget the lease is still the send's: the queue is
      // asked to come back (busy), and the send's own delivery goes on.
      assert.deepEqual(
        [outcome.action, (await store.getIntent("pi_1"))?.state],
        sendEnds === "within the budget"
          ? ["poison", "needs_review"]
          : ["retry", "settling"],
      );
    },
  });
}
