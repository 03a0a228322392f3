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
import { MemoryStore } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";
import {
  authorizedIntent,
  failByHand,
  giveUpMidSend,
  heldSends,
  leasedApp,
  readIntent,
  refusedWhileSending,
} from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-fail-mid-send-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

for (const backend of BACKENDS) {
  for (const nonceChecked of [true, false, undefined]) {
    Deno.test(`${backend.name}: a fail posted to another instance while a send still runs (nonceChecked ${nonceChecked}) is refused, and the hold stays pending`, async () => {
      const { store, close } = await backend.open();
      try {
        await authorizedIntent(store);
        const clock = { now: 1_000_000 };
        const { sender, sending, finish } = heldSends("0xT");
        const app = (sends: boolean) =>
          leasedApp(store, { clock, opsToken: OPS, sender: sender(sends) });
        const sendingApp = app(true);
        const giveUpApp = app(false);
        const failApp = app(false);
        const { delivery } = await giveUpMidSend(sendingApp, {
          job,
          clock,
          sending,
          giving: giveUpApp,
        });
        const seen = await readIntent(failApp, headers);
        assert.equal(seen.state, "needs_review");
        // The operator looks the nonce up: unused, the tx has not left.
        const answer = await failByHand(
          failApp,
          headers,
          seen.version,
          nonceChecked,
        );
        // Then the send leaves and lands.
        const { body, after, what } = await refusedWhileSending(
          store,
          answer,
          { delivery, leaves: () => finish({ txHash: "0xT" }) },
        );
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
  const fail = async (instance: ReturnType<typeof app>) =>
    failByHand(
      instance,
      headers,
      (await readIntent(instance, headers)).version,
      true,
    );
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
