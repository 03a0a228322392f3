/**
 * `POST /v1/intents/:id/resolve` and an intent imported in review: what
 * its record says may have left decides whether a fail needs the nonce
 * looked up (`nonceChecked`), each field on its own.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, type NewIntent, ScriptedSender } from "../../mod.ts";

const OPS = "ops-token-for-review-record-tests";

/** An app over a store holding `pi_1` imported in review as `fields` say. */
async function imported(fields: Partial<NewIntent>) {
  const store = new MemoryStore();
  const intent = await store.createIntent({
    id: "pi_1",
    state: "needs_review",
    hold: "pending",
    ...fields,
  });
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const fail = (nonceChecked?: boolean) =>
    app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers: { authorization: `Bearer ${OPS}` },
      body: JSON.stringify({
        to: "failed",
        version: intent.version,
        ...(nonceChecked === undefined ? {} : { nonceChecked }),
      }),
    });
  return { store, fail };
}

Deno.test("POST /v1/intents/:id/resolve will not fail without the nonce check a payment imported in review with a broadcast in flight, even told nothing left before it", async () => {
  // `mayHaveSent: false` speaks of the sends before; the broadcast in
  // flight may have left since, with no hash kept.
  const { store, fail } = await imported({
    mayHaveSent: false,
    broadcasting: 5,
  });
  const refused = await fail();
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.match(problem.type, /nonce-unchecked$/);
  assert.match(problem.detail, /a broadcast in flight/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  const failed = await fail(true);
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});

Deno.test("POST /v1/intents/:id/resolve fails without the nonce check a payment imported in review whose only send is on record as not sent, told nothing left", async () => {
  const { store, fail } = await imported({
    mayHaveSent: false,
    lastBroadcast: { outcome: "not_sent", error: "chain id mismatch", at: 0 },
  });
  const failed = await fail();
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});
