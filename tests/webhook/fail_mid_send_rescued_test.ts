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
import {
  MemoryStore,
  notSent,
  type ReceiptStatus,
  type Sender,
} from "../../mod.ts";
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

Deno.test("a fail posted to the instance whose rescue replaced a running send's write-ahead, and whose own record failed, is refused while the first send runs", async () => {
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
  const receipts: Record<string, ReceiptStatus> = { "0xA": "confirmed" };
  const receipt = (txHash: string) =>
    Promise.resolve(receipts[txHash] ?? "dropped");
  const held: Sender = {
    send: () => {
      began();
      return new Promise((resolve) => finish = resolve);
    },
    receipt,
  };
  // The rescuer's store fails the record of its send (its tx left).
  const failingRecords = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key === "recordBroadcast") {
        return () => Promise.reject(new Error("connection reset"));
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const app = (sender: Sender, s: MemoryStore) =>
    createApp({
      store: s,
      sender,
      opsToken: OPS,
      now: () => clock.now,
      random: () => 0,
      leaseMs: 200,
      clockSkewMs: 0,
      policy: { maxDeliveries: 3, stuckAfterMs: 1_000 },
    });
  const sendingApp = app(held, store);
  const rescueApp = app(
    { send: () => Promise.resolve({ txHash: "0xB" }), receipt },
    failingRecords,
  );
  const delivery = sendingApp.relayer.deliver(job, 1);
  await sending;
  clock.now += 60_000; // the wall clock steps forward mid-send
  await rescueApp.relayer.deliver(job, 2);
  clock.now += 1_000; // the rescue's lease is over: its send ended
  await rescueApp.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  // The operator posts the fail until it is taken or refused for a wait.
  const answers: string[] = [];
  for (let i = 0; i < 3; i++) {
    const seen = (await (await rescueApp.request("/v1/intents/pi_1", {
      headers,
    })).json()).intent;
    if (seen.state !== "needs_review") break;
    const answer = await rescueApp.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({
        to: "failed",
        version: seen.version,
        nonceChecked: true,
      }),
    });
    const body = await answer.json();
    answers.push(`${answer.status} ${body.type ?? ""}`);
    if (answer.status === 200 || /send-in-flight$/.test(body.type)) break;
  }
  finish({ txHash: "0xA" });
  await delivery;
  const after = await store.getIntent("pi_1");
  assert.equal(
    `${after?.state}/${after?.hold}`,
    "needs_review/pending",
    `answers ${JSON.stringify(answers)}; ${JSON.stringify(after)}`,
  );
});
