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
