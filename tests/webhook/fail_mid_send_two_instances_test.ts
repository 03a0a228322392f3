/**
 * A fail posted to one instance while another instance's send of the
 * payment still runs: the give-up put the payment in review (the send
 * outlived its lease), the operator looked the nonce up (unused: the tx
 * has not left), and the fail reaches an instance whose process memory
 * knows nothing of that send. The intent in review still carries the
 * send's write-ahead (`broadcasting`), which every instance reads: the
 * fail is refused (409 `send-in-flight`), the hold stays pending, and
 * once the send lands its tx is on record for the next fail to meet. On
 * every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, type ReceiptStatus, type Sender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-fail-mid-send-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

/** Senders for two instances: the sending one's send hangs until `finish`. */
function heldSends() {
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
  return {
    sender,
    sending,
    finish: (sent: { txHash: string }) => finish(sent),
  };
}

for (const backend of BACKENDS) {
  for (const nonceChecked of [true, false, undefined]) {
    Deno.test(`${backend.name}: a fail posted to another instance while a send still runs (nonceChecked ${nonceChecked}) is refused, and the hold stays pending`, async () => {
      const { store, close } = await backend.open();
      try {
        await store.createIntent({
          id: "pi_1",
          state: "authorized",
          hold: "pending",
        });
        const clock = { now: 1_000_000 };
        const { sender, sending, finish } = heldSends();
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
        const giveUpApp = app(false);
        const failApp = app(false);
        const delivery = sendingApp.relayer.deliver(job, 1);
        await sending;
        clock.now += 60_000; // the wall clock steps forward mid-send
        const gaveUp = await giveUpApp.relayer.giveUp(job, {
          deliveries: 3,
          queue: { queue: "qstash", messageId: "msg_1" },
        });
        assert.equal(gaveUp.action, "poison");
        const seen = (await (await failApp.request("/v1/intents/pi_1", {
          headers,
        })).json()).intent;
        assert.equal(seen.state, "needs_review");
        // The operator looks the nonce up: unused, the tx has not left.
        const answer = await failApp.request("/v1/intents/pi_1/resolve", {
          method: "POST",
          headers,
          body: JSON.stringify({
            to: "failed",
            version: seen.version,
            ...(nonceChecked === undefined ? {} : { nonceChecked }),
          }),
        });
        const body = await answer.json();
        // Then the send leaves and lands.
        finish({ txHash: "0xT" });
        await delivery;
        const after = await store.getIntent("pi_1");
        const what = `${answer.status} ${
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
        assert.match(body.type, /send-in-flight$/, what);
        assert.ok(answer.headers.get("retry-after"), what);
        assert.deepEqual(after?.txHashes, ["0xT"], what);
      } finally {
        await close();
      }
    });
  }
}

Deno.test("a review carrying the write-ahead of a send that crashed is failed once this instance has seen it unrecorded for a lease; a restarted instance waits again", async () => {
  const store = new MemoryStore();
  // A send written ahead, its process gone: the give-up put it in review.
  await store.createIntent({
    id: "pi_1",
    state: "needs_review",
    hold: "pending",
    settlingSince: 1_000_000,
    broadcasting: 1_000_000,
  });
  const app = () =>
    createApp({
      store,
      sender: {
        send: () => Promise.reject(new Error("sends nothing")),
        receipt: () => Promise.resolve("dropped"),
      },
      opsToken: OPS,
      now: () => 9_000_000, // long past any lease by the wall clock
      random: () => 0,
      leaseMs: 200,
      clockSkewMs: 0,
    });
  const fail = async (instance: ReturnType<typeof app>) => {
    const { version } = (await (await instance.request("/v1/intents/pi_1", {
      headers,
    })).json()).intent;
    return instance.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({ to: "failed", version, nonceChecked: true }),
    });
  };
  const first = app();
  const refused = await fail(first);
  const body = await refused.json();
  assert.equal(refused.status, 409, JSON.stringify(body));
  assert.match(body.type, /send-in-flight$/);
  assert.equal(refused.headers.get("retry-after"), "1");
  assert.match(body.detail, /may still be running in some instance/);
  // Another instance (or this one restarted) has not seen it in a fail:
  // it waits, though the operator read the intent there a lease ago (the
  // look at the nonce after that read may have come before the tx left).
  const restarted = app();
  await restarted.request("/v1/intents/pi_1", { headers });
  await new Promise((resolve) => setTimeout(resolve, 250));
  const again = await fail(restarted);
  assert.equal(again.status, 409, await again.clone().text());
  // The first has seen it for a lease: the send has ended, wherever it ran.
  const taken = await fail(first);
  assert.equal(taken.status, 200, await taken.clone().text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});
