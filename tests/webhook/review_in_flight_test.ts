/**
 * `POST /v1/intents/:id/resolve` failing a payment in review must not race
 * a send of it that is still running, nor take a receipt it cannot read
 * for one that says the tx cannot land.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, type Sender, type Store } from "../../mod.ts";

const OPS = "ops-token-for-in-flight-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

// A queue's give-up waits a bounded time for this process's own send of
// the intent, then resolves: a send that outlived its lease (the wall
// clock stepped forward mid-send, a VM resumed, a Sender slower than the
// lease) leaves the payment in review while its tx is about to leave. The
// operator's nonce check then sees nothing, and the fail voided the hold
// of a payment the send then made.
Deno.test("POST /v1/intents/:id/resolve will not fail a payment while this process still has a send of it in flight, even with nonceChecked", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  let clock = 1_000_000;
  let finish!: (sent: { txHash: string }) => void;
  let began!: () => void;
  const sending = new Promise<void>((resolve) => began = resolve);
  const sender: Sender = {
    send: () => {
      began();
      return new Promise((resolve) => finish = resolve);
    },
    receipt: () => Promise.resolve("pending"),
  };
  const app = createApp({
    store,
    sender,
    opsToken: OPS,
    now: () => clock,
    random: () => 0,
    leaseMs: 200,
    clockSkewMs: 0,
    policy: { maxDeliveries: 3 },
  });
  const delivery = app.relayer.deliver(job, 1);
  await sending;
  clock += 60_000; // the wall clock steps forward while the send runs
  const gaveUp = await app.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  const { intent } = await (await app.request("/v1/intents/pi_1", { headers }))
    .json();
  assert.equal(intent.state, "needs_review");
  const fail = () =>
    app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({
        to: "failed",
        version: intent.version,
        nonceChecked: true,
      }),
    });
  const refused = await fail();
  const body = await refused.json();
  assert.equal(refused.status, 409, JSON.stringify(body));
  assert.match(body.type, /send-in-flight$/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // The send ends: its tx left, and the nonce now shows it.
  finish({ txHash: "0xlanded" });
  await delivery;
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Once it ended, the route decides as before (the operator's word).
  assert.equal((await fail()).status, 200);
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
    const res = await app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({ to: "failed", version, nonceChecked: true }),
    });
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
