/**
 * A late copy of a message the queue gave up on, arriving at its
 * delivery limit while a job published since (a redrive, say) is settling
 * the intent: it must leave the intent to that job. Its write ahead of a
 * send was already refused by the give-up's marks; its poison decision
 * (a "waiting" failure at a number past `maxDeliveries`) must be too, or
 * it resolves a payment the other job is still following to review.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import {
  authorizedApp,
  deadLetterPush,
  LATER_MS,
  pubsubPush,
  qstash,
  qstashFailed,
  sends,
} from "./_late_copy.ts";

Deno.test("a late QStash copy at its delivery limit leaves a payment that a job published since is settling to that job", async () => {
  const { app, clock, sender, store } = await authorizedApp(new MemoryStore());
  const gaveUp = await app.request(
    "/v1/qstash/failed",
    await qstashFailed("msg_1"),
  );
  assert.equal(gaveUp.status, 200);
  clock.now += LATER_MS;
  // A job published since (another message) sends, and waits for its receipt.
  const fresh = await app.request("/v1/qstash", await qstash("msg_2", "0"));
  assert.equal(fresh.status, 503);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  // The late copy of the message given up on, numbered past maxDeliveries.
  const late = await app.request("/v1/qstash", await qstash("msg_1", "4"));
  assert.equal(late.status, 200);
  assert.deepEqual(await late.json(), {
    outcome: "done",
    job: "pi_0002/settle",
    delivery: 5,
    reason:
      "the queue gave up on this message before: a late copy, nothing sent",
  });
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  assert.equal(sends(sender), 1);
  // The letter still records the give-up, not a review.
  assert.equal(
    (await store.getDeadLetter("pi_0002/settle"))?.resolution,
    "job dropped, intent still authorized",
  );
});

Deno.test("a late Pub/Sub copy of a dead-lettered message leaves a payment that a job published since is settling to that job", async () => {
  const { app, clock, store } = await authorizedApp(new MemoryStore());
  const gaveUp = await app.request(
    "/v1/pubsub/dead-letter",
    await deadLetterPush(),
  );
  assert.equal(gaveUp.status, 204);
  clock.now += LATER_MS;
  const push = async (
    messageId: string,
    publishTime: string,
    attempt: number,
  ) =>
    await app.request(
      "/v1/pubsub",
      await pubsubPush(messageId, publishTime, attempt),
    );
  // A job published since sends, and waits for its receipt.
  assert.equal((await push("3000", "2026-11-30T12:30:00.000Z", 1)).status, 503);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  // Pub/Sub pushes the dead-lettered source message once more.
  const late = await push("2070443601311540", "2026-11-30T11:00:00.123Z", 6);
  assert.equal(late.status, 204);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});
