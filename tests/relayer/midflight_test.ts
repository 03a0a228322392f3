/**
 * A copy of a job that arrives while the first delivery is still at work:
 * a queue that timed the first out (Pub/Sub's acknowledgement deadline,
 * QStash's timeout) delivers again, or gives up, while it runs.
 */
import assert from "node:assert/strict";
import {
  createRelayer,
  type Intent,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS, openAuthorized } from "../_stores.ts";
import { giveUpBehindDelivery } from "./_give_up_behind.ts";

/** A signer that answers sends and receipts after a pause. */
class SlowSigner implements Sender {
  sends = 0;
  receipts = 0;
  constructor(
    readonly sendMs: number,
    readonly receiptMs: number,
    readonly status: ReceiptStatus,
  ) {}
  async send(_intent: Intent): Promise<{ txHash: string }> {
    this.sends++;
    await new Promise((r) => setTimeout(r, this.sendMs));
    return { txHash: `0x${this.sends}` };
  }
  async receipt(): Promise<ReceiptStatus> {
    this.receipts++;
    await new Promise((r) => setTimeout(r, this.receiptMs));
    return this.status;
  }
}

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const policy = { maxDeliveries: 3, jitter: "none" } as const;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A settling intent whose last send, `0xabc`, left a second ago (`txHashes` all sent). */
async function sentAndWaiting(store: Store, txHashes: string[]): Promise<void> {
  const at = Date.now() - 1_000;
  await store.createIntent({
    id: JOB.intentId,
    state: "settling",
    hold: "pending",
    settlingSince: at,
    mayHaveSent: true,
    txHashes,
    lastBroadcast: { outcome: "sent", txHash: "0xabc", at },
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a copy that finds a send in flight is busy, not failed, even at the last delivery`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const sender = new SlowSigner(400, 0, "pending");
      const relayer = createRelayer({ store, sender, policy });
      const first = relayer.deliver(JOB, 1);
      await sleep(150); // the queue timed it out, and delivers again
      for (const n of [2, 3]) {
        const copy = await relayer.deliver(JOB, n);
        assert.equal(copy.action, "retry");
        assert.match(
          copy.reason,
          /^intent pi_0001 is busy with another delivery/,
        );
      }
      assert.match((await first).reason, /^sent 0x1, waiting for confirmation/);
      assert.equal(sender.sends, 1);
      assert.equal(await store.getDeadLetter(`${JOB.intentId}/settle`), null);
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a give-up while the last delivery reads a confirmed receipt settles, not reviews`, async () => {
    const { store, close } = await backend.open();
    try {
      await sentAndWaiting(store, ["0xabc"]);
      const sender = new SlowSigner(0, 300, "confirmed");
      const relayer = createRelayer({ store, sender, policy });
      const last = relayer.deliver(JOB, 3);
      await sleep(100); // past the queue's deadline: it gives up
      const gaveUp = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: { queue: "pubsub", messageId: "m-1" },
      });
      await last;
      assert.equal(gaveUp.action, "done");
      const intent = await store.getIntent(JOB.intentId);
      assert.equal(intent?.state, "settled");
      assert.equal(intent?.hold, "captured");
      assert.equal(await store.getDeadLetter(`${JOB.intentId}/settle`), null);
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a give-up settles a payment whose tx confirmed since the last delivery`, async () => {
    const { store, close } = await backend.open();
    try {
      await sentAndWaiting(store, ["0xold", "0xabc"]);
      const sender = new SlowSigner(0, 0, "confirmed");
      const relayer = createRelayer({ store, sender, policy });
      const gaveUp = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "m-1" },
      });
      assert.deepEqual(gaveUp, {
        action: "done",
        delivery: 3,
        reason:
          "the queue gave up after 3 deliveries: 0xabc confirmed, intent settled",
      });
      assert.equal((await store.getIntent(JOB.intentId))?.state, "settled");
      // A repeat of the give-up finds it settled: nothing more.
      const again = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "m-1" },
      });
      assert.equal(again.action, "done");
      assert.equal(sender.receipts, 2);
    } finally {
      await close();
    }
  });
}

Deno.test("a give-up whose Sender never answers a receipt resolves without it, after half the lease at most", async () => {
  const { store, close } = await BACKENDS[0]!.open();
  try {
    await sentAndWaiting(store, ["0xabc"]);
    const silent: Sender = {
      send: () => new Promise(() => {}),
      receipt: () => new Promise(() => {}),
    };
    const relayer = createRelayer({
      store,
      sender: silent,
      policy,
      leaseMs: 400,
    });
    const started = performance.now();
    const gaveUp = await relayer.giveUp(JOB, {
      deliveries: 3,
      queue: { queue: "pubsub", messageId: "m-1" },
    });
    const tookMs = performance.now() - started;
    assert.ok(tookMs >= 190 && tookMs < 1_000, `took ${Math.round(tookMs)} ms`);
    assert.equal(gaveUp.action, "poison");
    assert.equal(
      (await store.getIntent(JOB.intentId))?.state,
      "needs_review",
    );
  } finally {
    await close();
  }
});

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a give-up that drops the job of an authorized intent keeps a delivery that looked before it from sending`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      // The delivery reads the intent, then its write-ahead waits until
      // the queue's give-up has landed: a delivery whose store count lags
      // the queue's (a crash before it was counted), still at work when
      // the queue gave up.
      const sender = new SlowSigner(0, 0, "pending");
      const { gaveUp, outcome } = await giveUpBehindDelivery(store, {
        job: JOB,
        sender,
        policy,
      });
      assert.equal(gaveUp.action, "poison");
      assert.match(gaveUp.resolution ?? "", /^job dropped/);
      assert.equal(outcome.action, "retry");
      assert.match(outcome.reason, /busy/);
      assert.equal(sender.sends, 0, "nothing sent behind the give-up");
      assert.equal(
        (await store.getIntent(JOB.intentId))?.state,
        "authorized",
      );
    } finally {
      await close();
    }
  });
}
