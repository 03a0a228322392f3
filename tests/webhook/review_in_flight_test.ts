/**
 * `POST /v1/intents/:id/resolve` failing a payment in review must not race
 * a send of it that is still running, nor take a receipt it cannot read
 * for one that says the tx cannot land; and the edges of those refusals
 * and of the redrive loser's answer: odd receipts are unread, a settle is
 * the operator's word even while a send runs, a send the Cloudflare
 * consumer starts on `app.relayer` counts, and a redrive's ConflictError
 * keeps `refused` and says "published" only when it published.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import {
  ConflictError,
  createRelayer,
  MemoryStore,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import {
  authorizedIntent,
  failByHand,
  giveUpMidSend,
  leasedApp,
  readIntent,
} from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-in-flight-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

/**
 * `pi_1` authorized on a MemoryStore, and an app whose Sender's send
 * hangs until `finish` (`sending` settles once it began); receipts answer
 * `receipt`, and the app's clock is `clock.now` (its monotonic clock
 * `clock.mono`).
 */
async function heldSend(receipt: ReceiptStatus, maxDeliveries: number) {
  const store = new MemoryStore();
  await authorizedIntent(store);
  const clock = { now: 1_000_000, mono: 0 };
  let finish!: (sent: { txHash: string }) => void;
  let began!: () => void;
  const sending = new Promise<void>((resolve) => began = resolve);
  const sender: Sender = {
    send: () => {
      began();
      return new Promise((resolve) => finish = resolve);
    },
    receipt: () => Promise.resolve(status),
  };
  let status = receipt;
  const app = leasedApp(store, {
    clock,
    opsToken: OPS,
    sender,
    maxDeliveries,
    monotonicNow: () => clock.mono,
  });
  return {
    store,
    app,
    clock,
    sending,
    finish: (sent: { txHash: string }) => finish(sent),
    receiptsAnswer: (next: ReceiptStatus) => status = next,
  };
}

// A queue's give-up waits a bounded time for this process's own send of
// the intent, then resolves: a send that outlived its lease (the wall
// clock stepped forward mid-send, a VM resumed, a Sender slower than the
// lease) leaves the payment in review while its tx is about to leave. The
// operator's nonce check then sees nothing, and the fail voided the hold
// of a payment the send then made.
Deno.test("POST /v1/intents/:id/resolve will not fail a payment while this process still has a send of it in flight, even with nonceChecked", async () => {
  const { store, app, clock, sending, finish, receiptsAnswer } = await heldSend(
    "pending",
    3,
  );
  const { delivery } = await giveUpMidSend(app, { job, clock, sending });
  const intent = await readIntent(app, headers);
  assert.equal(intent.state, "needs_review");
  const fail = () => failByHand(app, headers, intent.version, true);
  const refused = await fail();
  const body = await refused.json();
  assert.equal(refused.status, 409, JSON.stringify(body));
  assert.match(body.type, /send-in-flight$/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // The send ends: its tx left, and the nonce now shows it.
  finish({ txHash: "0xlanded" });
  await delivery;
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Its record kept its tx on the intent in review (the store takes the
  // record of a send that outlived its settling), and moved the version:
  // a fail decided on the look made while it ran is a race lost.
  const changed = await fail();
  const changedBody = await changed.json();
  assert.equal(changed.status, 409, JSON.stringify(changedBody));
  assert.match(changedBody.type, /changed$/);
  const now = (await store.getIntent("pi_1"))!;
  assert.deepEqual(now.txHashes, ["0xlanded"]);
  const failNow = () => failByHand(app, headers, now.version, true);
  // Read again, its tx is read as every tx on record is: pending, it may
  // still land, whatever the operator saw of the nonce before.
  const pending = await failNow();
  const pendingBody = await pending.json();
  assert.equal(pending.status, 409, JSON.stringify(pendingBody));
  assert.match(pendingBody.type, /tx-pending$/);
  assert.doesNotMatch(pendingBody.detail, /on no record/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Dropped, the fail on the version read after the send ended is taken,
  // once a send that may still run in another instance (the payment may
  // have sent) has had its lease from the first fail that met none
  // pending: 409 send-in-flight first.
  receiptsAnswer("dropped");
  const waited = await failNow();
  const waitedBody = await waited.json();
  assert.equal(waited.status, 409, JSON.stringify(waitedBody));
  assert.match(waitedBody.type, /send-in-flight$/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  clock.mono += 200; // the lease
  assert.equal((await failNow()).status, 200);
});

// The wait for a send that may run in another instance ends with its
// lease, counted on the monotonic clock; this process's own send is still
// running past it (a Sender slower than the lease), and only this
// process's memory of it stands between the fail and the void.
Deno.test("POST /v1/intents/:id/resolve still refuses a fail while this process's own send runs past the lease the wait for other instances counts, and voids nothing", async () => {
  const { store, app, clock, sending, finish } = await heldSend("dropped", 3);
  const { delivery } = await giveUpMidSend(app, { job, clock, sending });
  const intent = await readIntent(app, headers);
  assert.equal(intent.state, "needs_review");
  const fail = () => failByHand(app, headers, intent.version, true);
  assert.equal((await fail()).status, 409);
  clock.mono += 10 * 200; // far past the lease (200 ms) the wait counts
  const refused = await fail();
  const body = await refused.json();
  assert.equal(refused.status, 409, JSON.stringify(body));
  assert.match(body.type, /send-in-flight$/);
  assert.match(body.detail, /still running in this process/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  finish({ txHash: "0xlanded" });
  await delivery;
  assert.deepEqual((await store.getIntent("pi_1"))?.txHashes, ["0xlanded"]);
});

/** `pi_1` in review on `store` with `txHashes` on record; its version. */
async function inReview(store: Store, txHashes: string[]) {
  const created = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    txHashes,
  });
  return (await store.transition("pi_1", {
    from: "settling",
    to: "needs_review",
    version: created.version,
    at: 1,
  })).version;
}

// The relayer takes a receipt that is none of "confirmed", "pending" and
// "dropped" for an error ("sender returned an unknown receipt status"); the
// route took it for dropped, and failed the payment, its hold voided, on a
// Sender that said "Confirmed" or handed back its node's JSON.
Deno.test("POST /v1/intents/:id/resolve answers 503 receipts-unread for a receipt status it does not know, and fails nothing", async () => {
  for (
    const status of ["Confirmed", "success", undefined, null, {
      status: "confirmed",
    }]
  ) {
    const store = new MemoryStore();
    const version = await inReview(store, ["0xa"]);
    const lines: string[] = [];
    const sender = {
      send: () => Promise.reject(new Error("no sends here")),
      receipt: () => Promise.resolve(status),
    } as unknown as Sender;
    const app = createApp({
      store,
      sender,
      opsToken: OPS,
      log: (line) => void lines.push(line),
    });
    const res = await failByHand(app, headers, version, true);
    const body = await res.json();
    assert.equal(
      res.status,
      503,
      `${JSON.stringify(status)}: ${JSON.stringify(body)}`,
    );
    assert.match(body.type, /receipts-unread$/);
    assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
    assert.ok(
      lines.some((line) => line.includes("unknown receipt status")),
      lines.join("\n"),
    );
  }
});

Deno.test("POST /v1/intents/:id/resolve reads a String object, a toString, a throwing toJSON, the text 'late' and one unknown beside a dropped as unread", async () => {
  const odd: [string, (txHash: string) => unknown][] = [
    ["String object", () => new String("dropped")],
    ["toString", () => ({ toString: () => "dropped" })],
    ["throwing toJSON", () => ({
      toJSON() {
        throw new Error("no");
      },
    })],
    ["late", () => "late"],
    ["dropped + Dropped", (h) => h === "0xa" ? "dropped" : "Dropped"],
  ];
  for (const [name, answer] of odd) {
    const store = new MemoryStore();
    const version = await inReview(store, ["0xa", "0xb"]);
    const sender = {
      send: () => Promise.reject(new Error("no sends here")),
      receipt: (txHash: string) => Promise.resolve(answer(txHash)),
    } as unknown as Sender;
    const app = createApp({ store, sender, opsToken: OPS });
    const res = await failByHand(app, headers, version, true);
    const body = await res.json();
    assert.equal(res.status, 503, `${name}: ${JSON.stringify(body)}`);
    assert.equal((await store.getIntent("pi_1"))?.hold, "pending", name);
  }
});

Deno.test("a send the Cloudflare consumer starts on app.relayer is in flight for the resolve route: the fail is refused, the settle (the operator's word) is not", async () => {
  const { store, app, clock, sending, finish } = await heldSend("dropped", 4);
  const queue = createQueueHandler({
    relayer: app.relayer,
    maxRetries: 3,
    deadLetterQueue: "dlq",
    deadLetterMaxRetries: 100,
  });
  const message = (attempts: number) => ({
    id: "m1",
    body: job,
    attempts,
    ack: () => {},
    retry: () => {},
  });
  const batch = queue({ queue: "jobs", messages: [message(1)] });
  await sending;
  clock.now += 60_000; // the wall clock steps forward while the send runs
  await queue({ queue: "dlq", messages: [message(1)] });
  const intent = await readIntent(app, headers);
  assert.equal(intent.state, "needs_review");
  const resolve = (body: Record<string, unknown>) =>
    app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({ version: intent.version, ...body }),
    });
  const failed = await resolve({ to: "failed", nonceChecked: true });
  assert.equal(failed.status, 409);
  assert.match((await failed.json()).type, /send-in-flight$/);
  // Settled on the operator's word: the send in flight shares the nonce of
  // the tx the operator saw confirm, so it cannot pay a second time.
  assert.equal((await resolve({ to: "settled" })).status, 200);
  finish({ txHash: "0xlanded" });
  await batch;
  const after = await store.getIntent("pi_1");
  assert.equal(`${after?.state}/${after?.hold}`, "settled/captured");
});

Deno.test("relayer.redrive: a store's ConflictError keeps its refused flag, and says the job was published only when a publish ran", async () => {
  for (const publishes of [true, false]) {
    for (const refused of [true, false]) {
      const store = new MemoryStore();
      await store.createIntent({ id: "pi_1", state: "created" });
      const relayer = createRelayer({
        store,
        sender: {
          send: () => Promise.reject(new Error("no sends here")),
          receipt: () => Promise.resolve("pending"),
        },
        policy: { maxDeliveries: 1 },
      });
      await relayer.deliver(job, 1);
      assert.ok(await store.getDeadLetter("pi_1/settle"));
      store.redrive = () =>
        Promise.reject(new ConflictError("the store says no", { refused }));
      let published = 0;
      const error = await relayer.redrive(
        "pi_1/settle",
        publishes ? { publish: () => Promise.resolve(void published++) } : {},
      ).then(() => undefined, (e: unknown) => e);
      assert.ok(error instanceof ConflictError);
      assert.equal(error.refused, refused);
      assert.equal(published, publishes ? 1 : 0);
      if (publishes) assert.match(error.message, /published all the same/);
      else assert.equal(error.message, "the store says no");
    }
  }
});
