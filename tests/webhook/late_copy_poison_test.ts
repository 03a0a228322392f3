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
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { theGoogle } from "./_app.ts";
import { PUBSUB, QSTASH, signQStash } from "./_signing.ts";

const DEAD_LETTER_AUDIENCE =
  "https://relayer.example.test/v1/pubsub/dead-letter";
const job = { intentId: "pi_0002", kind: "settle" } as const;
/** Past the give-up's lease: `leaseMs` + `clockSkewMs` (defaults), and a second. */
const LATER_MS = 30_000 + 5_000 + 1_000;

async function authorizedApp() {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000 };
  const sender = new ScriptedSender({
    pi_0002: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
  });
  const g = await theGoogle();
  const app = createApp({
    store,
    sender,
    policy: { maxDeliveries: 3 },
    now: () => clock.now,
    random: () => 0,
    qstash: QSTASH,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
    pubsubDeadLetter: {
      audience: DEAD_LETTER_AUDIENCE,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });
  return { app, clock, sender, store };
}

async function qstash(messageId: string, retried: string) {
  const body = JSON.stringify(job);
  return {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "upstash-signature": await signQStash(body),
      "upstash-message-id": messageId,
      "upstash-retried": retried,
    },
  };
}

async function qstashFailed(sourceMessageId: string) {
  const url = `${QSTASH.url}/failed`;
  const body = JSON.stringify({
    status: 503,
    retried: 4,
    maxRetries: 4,
    dlqId: `dlq_${sourceMessageId}`,
    sourceMessageId,
    url: QSTASH.url,
    method: "POST",
    sourceBody: btoa(JSON.stringify(job)),
  });
  return {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "upstash-signature": await signQStash(body, { url }),
    },
  };
}

Deno.test("a late QStash copy at its delivery limit leaves a payment that a job published since is settling to that job", async () => {
  const { app, clock, sender, store } = await authorizedApp();
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
  assert.equal(sender.calls.filter((c) => c.method === "send").length, 1);
  // The letter still records the give-up, not a review.
  assert.equal(
    (await store.getDeadLetter("pi_0002/settle"))?.resolution,
    "job dropped, intent still authorized",
  );
});

Deno.test("a late Pub/Sub copy of a dead-lettered message leaves a payment that a job published since is settling to that job", async () => {
  const { app, clock, store } = await authorizedApp();
  const g = await theGoogle();
  const data = btoa(JSON.stringify(job));
  const gaveUp = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: JSON.stringify({
      message: {
        data,
        messageId: "dead-letter-copy-1",
        publishTime: "2026-11-30T12:00:09.000Z",
        attributes: {
          CloudPubSubDeadLetterSourceDeliveryCount: "5",
          CloudPubSubDeadLetterSourceSubscription: "relayer",
          CloudPubSubDeadLetterSourceSubscriptionProject: "p",
          CloudPubSubDeadLetterSourceTopicPublishTime:
            "2026-11-30T11:00:00.123+00:00",
        },
      },
      subscription: "projects/p/subscriptions/relayer-dead-letter",
    }),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  });
  assert.equal(gaveUp.status, 204);
  clock.now += LATER_MS;
  const push = async (
    messageId: string,
    publishTime: string,
    attempt: number,
  ) =>
    await app.request("/v1/pubsub", {
      method: "POST",
      body: JSON.stringify({
        message: { data, messageId, publishTime },
        subscription: "projects/p/subscriptions/relayer",
        deliveryAttempt: attempt,
      }),
      headers: { authorization: `Bearer ${await g.token()}` },
    });
  // A job published since sends, and waits for its receipt.
  assert.equal((await push("3000", "2026-11-30T12:30:00.000Z", 1)).status, 503);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  // Pub/Sub pushes the dead-lettered source message once more.
  const late = await push("2070443601311540", "2026-11-30T11:00:00.123Z", 6);
  assert.equal(late.status, 204);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});
