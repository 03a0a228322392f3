/**
 * The runbook's queueing again of a job the store's outage held up, on
 * QStash: the held-up message still counts its own deliveries, so one that
 * comes back at its last while the new message's tx is pending puts the
 * payment in review, and so does its failure callback (refused while the
 * signing keys were wrong, and retried by QStash): the runbook says so, and
 * to settle it once its tx confirmed. Before its last, it only reads the
 * receipt.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { authorizedApp, qstash, qstashFailed, sends } from "./_late_copy.ts";

Deno.test("a held-up QStash message back at its last delivery, after the job was queued again and sent, puts the payment in review", async () => {
  const store = new MemoryStore();
  const { app, clock, sender } = await authorizedApp(store);
  // The job queued again by hand: a new message, which sends.
  const first = await app.request("/v1/qstash", await qstash("msg_new", "0"));
  assert.equal(first.status, 503);
  assert.equal(
    (await first.json()).reason,
    "sent 0xabc, waiting for confirmation",
  );
  clock.now += 60_000;
  // The held-up message, back on QStash's backoff at its third delivery of three.
  const last = await app.request("/v1/qstash", await qstash("msg_old", "2"));
  assert.equal(last.status, 200);
  const answer = await last.json();
  assert.equal(answer.outcome, "poison");
  assert.equal(answer.resolution, "last broadcast sent as 0xabc, needs review");
  assert.equal(sends(sender), 1);
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
});

Deno.test("a held-up QStash message back before its last delivery, after the job was queued again and sent, only reads the receipt", async () => {
  const store = new MemoryStore();
  const { app, clock, sender } = await authorizedApp(store);
  await app.request("/v1/qstash", await qstash("msg_new", "0"));
  clock.now += 60_000;
  const back = await app.request("/v1/qstash", await qstash("msg_old", "1"));
  assert.equal(back.status, 503);
  assert.equal((await back.json()).reason, "waiting for 0xabc to confirm");
  assert.equal(sends(sender), 1);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});

Deno.test("a held-up QStash message's failure callback, after the job was queued again and sent, puts the payment in review", async () => {
  const store = new MemoryStore();
  const { app, clock, sender } = await authorizedApp(store);
  await app.request("/v1/qstash", await qstash("msg_new", "0"));
  clock.now += 60_000;
  const gaveUp = await app.request(
    "/v1/qstash/failed",
    await qstashFailed("msg_old"),
  );
  assert.equal(gaveUp.status, 200);
  assert.equal(
    (await gaveUp.json()).resolution,
    "last broadcast sent as 0xabc, needs review",
  );
  assert.equal(sends(sender), 1);
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
});
