/**
 * Who can give up a job (docs/queues.md, "Who can give up a job"): a give-up
 * route takes what its queue's own credentials sign, and cannot tell the
 * queue's give-up from a message its publisher sent there. QStash signs
 * whatever its account publishes, to any URL, so a publish straight to
 * `/v1/qstash/failed` is a failure callback; Pub/Sub pushes whatever is
 * published to the dead-letter topic, its forward attributes or none. Each
 * poisons a job no queue gave up on, at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import {
  DEAD_LETTER_AUDIENCE,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";
import { targetApp } from "./_forged.ts";
import { failedRequest, failureCallback } from "./_signing.ts";

/** `pi_0001`, whose last broadcast the signer declared not sent: its next delivery would send again. */
const NOT_SENT: NewIntent = {
  id: "pi_0001",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "not_sent", at: 0, error: "refused" },
};

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("a failure callback published straight to /v1/qstash/failed with the account's QStash token gives up a job no delivery reached: dropped unsent, its letter kept", async () => {
  const { app, store, sender } = await targetApp();
  // What QStash delivers for a publish of this body to the callback's URL:
  // its signature names that URL, as a failure callback's does.
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(failureCallback(job)),
  );
  assert.equal(res.status, 200);
  assert.equal((await res.json()).outcome, "poison");
  assert.equal(sender.calls.length, 0);
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  const [letter] = (await store.listDeadLetters({})).items;
  assert.equal(letter?.cause, "exhausted");
  assert.equal(letter?.jobId, "pi_0001/settle");
});

Deno.test("a message published straight to Pub/Sub's dead-letter topic, with none of the forward's attributes, gives up a live job: a payment its signer declared not sent fails, its hold voided", async () => {
  const { app, store, sender } = await withDeadLetterRoute([NOT_SENT]);
  const g = await theGoogle();
  // Pushed by the dead-letter subscription as any message on its topic is:
  // Google's token for the route, the data the publisher's.
  const body = JSON.stringify({
    message: {
      data: btoa(JSON.stringify(job)),
      messageId: "direct-1",
      publishTime: "2026-11-30T12:00:09.000Z",
    },
    subscription: "projects/p/subscriptions/relayer-dead-letter",
  });
  const res = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body,
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  });
  assert.equal(res.status, 204);
  assert.equal(sender.calls.length, 0);
  const intent = await store.getIntent("pi_0001");
  assert.equal(intent?.state, "failed");
  assert.equal(intent?.hold, "voided");
  const [letter] = (await store.listDeadLetters({})).items;
  assert.equal(letter?.reason, "the queue gave up after 1 delivery");
});
