/**
 * A fail posted while a send still runs in one instance, after another
 * instance rescued the payment (the wall clock stepped past the first
 * send's lease): the rescue's write-ahead replaced the first send's on the
 * intent, and its record cleared it, so the review carries no
 * `broadcasting` while the first send may still leave its tx.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { notSent, type ReceiptStatus, type Sender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-fail-mid-send-rescued-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

for (const backend of BACKENDS) {
  for (const rescue of ["not_sent", "sent"] as const) {
    Deno.test(`${backend.name}: a fail while a send still runs, after another instance's rescue (${rescue}), is refused and the hold stays pending`, async () => {
      const { store, close } = await backend.open();
      try {
        await store.createIntent({
          id: "pi_1",
          state: "authorized",
          hold: "pending",
        });
        const clock = { now: 1_000_000 };
        let finish!: (sent: { txHash: string }) => void;
        let began!: () => void;
        const sending = new Promise<void>((resolve) => began = resolve);
        const receipts: Record<string, ReceiptStatus> = { "0xA": "confirmed" };
        const held: Sender = {
          send: () => {
            began();
            return new Promise((resolve) => finish = resolve);
          },
          receipt: (txHash) => Promise.resolve(receipts[txHash] ?? "dropped"),
        };
        const rescuer: Sender = {
          send: () =>
            rescue === "sent"
              ? Promise.resolve({ txHash: "0xB" })
              : Promise.reject(notSent(new Error("rejected by the node"))),
          receipt: (txHash) => Promise.resolve(receipts[txHash] ?? "dropped"),
        };
        const idle: Sender = {
          send: () => Promise.reject(new Error("this instance sends nothing")),
          receipt: (txHash) => Promise.resolve(receipts[txHash] ?? "dropped"),
        };
        const app = (sender: Sender) =>
          createApp({
            store,
            sender,
            opsToken: OPS,
            now: () => clock.now,
            random: () => 0,
            leaseMs: 200,
            clockSkewMs: 0,
            policy: { maxDeliveries: 3, stuckAfterMs: 1_000 },
          });
        const sendingApp = app(held);
        const rescueApp = app(rescuer);
        const failApp = app(idle);
        const delivery = sendingApp.relayer.deliver(job, 1);
        await sending;
        clock.now += 60_000; // the wall clock steps forward mid-send
        const rescued = await rescueApp.relayer.deliver(job, 2);
        const mid = await store.getIntent("pi_1");
        const gaveUp = await failApp.relayer.giveUp(job, {
          deliveries: 3,
          queue: { queue: "qstash", messageId: "msg_1" },
        });
        const seen = (await (await failApp.request("/v1/intents/pi_1", {
          headers,
        })).json()).intent;
        assert.equal(
          seen.state,
          "needs_review",
          `${JSON.stringify(rescued)} ${JSON.stringify(gaveUp)} ${
            JSON.stringify(mid)
          }`,
        );
        // The operator looks the nonce up: unused, the first tx has not left.
        const answer = await failApp.request("/v1/intents/pi_1/resolve", {
          method: "POST",
          headers,
          body: JSON.stringify({
            to: "failed",
            version: seen.version,
            nonceChecked: true,
          }),
        });
        const body = await answer.json();
        // Then the first send leaves, and its tx confirms.
        finish({ txHash: "0xA" });
        await delivery;
        const after = await store.getIntent("pi_1");
        const what = `review ${JSON.stringify(seen)}; ${answer.status} ${
          JSON.stringify(body)
        }; ${after?.state}/${after?.hold} txs ${
          JSON.stringify(after?.txHashes)
        }`;
        assert.equal(
          `${after?.state}/${after?.hold}`,
          "needs_review/pending",
          what,
        );
        assert.equal(answer.status, 409, what);
      } finally {
        await close();
      }
    });
  }
}
