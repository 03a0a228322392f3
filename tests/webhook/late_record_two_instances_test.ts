/**
 * A send that outlived its settling, seen from another instance: its tx
 * is kept on the intent by the store, so a fail posted to an instance
 * that did not send (another process, another isolate of a Worker) meets
 * it as every instance does, where a memory of the sending process alone
 * let the fail void the hold of a payment that tx made.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, type ReceiptStatus, type Sender } from "../../mod.ts";

const OPS = "ops-token-for-late-record-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

Deno.test("a fail posted to another instance after a send that outlived its settling returned its tx meets that tx: 409, and the hold stays pending", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000 };
  let finish!: (sent: { txHash: string }) => void;
  let began!: () => void;
  const sending = new Promise<void>((resolve) => began = resolve);
  const receipts: Record<string, ReceiptStatus> = { "0xT": "confirmed" };
  const sender = (sends: boolean): Sender => ({
    send: () => {
      if (!sends) {
        return Promise.reject(new Error("this instance sends nothing"));
      }
      began();
      return new Promise((resolve) => finish = resolve);
    },
    receipt: (txHash) => Promise.resolve(receipts[txHash] ?? "dropped"),
  });
  // Two instances over one store, each its own relayer and memory.
  const app = (sends: boolean) =>
    createApp({
      store,
      sender: sender(sends),
      opsToken: OPS,
      now: () => clock.now,
      random: () => 0,
      leaseMs: 200,
      clockSkewMs: 0,
      policy: { maxDeliveries: 3 },
    });
  const sendingApp = app(true);
  const otherApp = app(false);
  const delivery = sendingApp.relayer.deliver(job, 1);
  await sending;
  clock.now += 60_000; // the wall clock steps forward while the send runs
  // The other instance's give-up finds the lease lapsed: review.
  const gaveUp = await otherApp.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  const read = async () =>
    (await (await otherApp.request("/v1/intents/pi_1", { headers })).json())
      .intent;
  const seen = await read();
  assert.equal(seen.state, "needs_review");
  // The operator looked the nonce up while the send ran; then it ends.
  finish({ txHash: "0xT" });
  await delivery;
  const fail = (version: string) =>
    otherApp.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({ to: "failed", version, nonceChecked: true }),
    });
  const first = await fail(seen.version);
  const firstBody = await first.json();
  assert.equal(first.status, 409, JSON.stringify(firstBody));
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Read again, the tx is on record, and its receipt answers.
  const now = await read();
  assert.deepEqual(now.txHashes, ["0xT"]);
  const second = await fail(now.version);
  const secondBody = await second.json();
  assert.equal(second.status, 409, JSON.stringify(secondBody));
  assert.match(secondBody.type, /tx-confirmed$/);
  const after = await store.getIntent("pi_1");
  assert.equal(`${after?.state}/${after?.hold}`, "needs_review/pending");
});
