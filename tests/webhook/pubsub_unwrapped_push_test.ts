/**
 * A push subscription with payload unwrapping (`--push-no-wrapper`, the
 * API's `pushConfig.noWrapper`) delivers the message's data itself as the
 * HTTP body, with no envelope: on a Pub/Sub route, the job alone. Such a
 * push is acked (204) and kept as a dead letter, as a push that cannot be
 * read is, and that letter names the job's intent, with a reason that says
 * to turn payload unwrapping off: it named none, and, acked, every job of
 * such a subscription ended in a letter no one could find its payment from.
 * On the dead-letter route such a push is still the queue giving up, and is
 * resolved as one (its count and ids from the headers write metadata sets,
 * else the store's): kept as a letter only, its intent was left unresolved.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  DEAD_LETTER_AUDIENCE,
  makeApp,
  SENT_WAITING,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";
import { PUBSUB } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" };

/**
 * An unwrapped push of `body` (the job itself, as JSON): a POST with the
 * fake Google's token for `audience` (none: the token's default) and
 * `headers` besides.
 */
async function unwrapped(
  body: unknown,
  audience?: string,
  headers: Record<string, string> = {},
): Promise<RequestInit> {
  const g = await theGoogle();
  return {
    method: "POST",
    body: JSON.stringify(body),
    headers: {
      authorization: `Bearer ${await g.token(
        audience === undefined ? {} : { aud: audience },
      )}`,
      "content-type": "application/json",
      ...headers,
    },
  };
}

Deno.test("POST /v1/pubsub keeps an unwrapped push (the job itself, no envelope) as a dead letter naming its intent, saying to turn payload unwrapping off, and acks it (204); so does its dead-letter route one whose job cannot be read", async () => {
  for (
    const [route, audience, body] of [
      ["/v1/pubsub", undefined, job],
      ["/v1/pubsub/dead-letter", DEAD_LETTER_AUDIENCE, {
        ...job,
        kind: "Settle",
      }],
    ] as const
  ) {
    const intents = [{ id: "pi_0001", state: "authorized" as const }];
    const { app, store } = route === "/v1/pubsub"
      ? await makeApp({ intents })
      : await withDeadLetterRoute(intents);
    const res = await app.request(route, await unwrapped(body, audience));
    assert.equal(res.status, 204, route);
    const letters = (await store.listDeadLetters({ limit: 10 })).items;
    assert.equal(letters.length, 1, route);
    assert.equal(
      letters[0]!.intentId,
      "pi_0001",
      `${route}: ${letters[0]!.reason}`,
    );
    assert.match(letters[0]!.reason, /payload unwrapping/, route);
    assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  }
});

Deno.test("POST /v1/pubsub/dead-letter resolves an unwrapped push (the job itself) as the give-up it is, its count from the attributes written as headers (write metadata), else the store's, and acks it (204)", async () => {
  for (
    const [headers, deliveries, messageId] of [
      [
        {
          "x-goog-pubsub-message-id": "dl-42",
          "x-goog-pubsub-subscription-name":
            "projects/p/subscriptions/relayer-dead",
          "x-goog-pubsub-publish-time": "2026-12-08T01:00:00.000Z",
          "CloudPubSubDeadLetterSourceDeliveryCount": "5",
          "CloudPubSubDeadLetterSourceSubscription": "relayer-jobs",
          "CloudPubSubDeadLetterSourceSubscriptionProject": "p",
        },
        5,
        "dl-42",
      ],
      [{}, 1, undefined],
    ] as const
  ) {
    const { app, store } = await withDeadLetterRoute([
      { id: "pi_0001", state: "authorized", hold: "pending" },
    ]);
    const res = await app.request(
      "/v1/pubsub/dead-letter",
      await unwrapped(job, DEAD_LETTER_AUDIENCE, headers),
    );
    assert.equal(res.status, 204);
    const letters = (await store.listDeadLetters({ limit: 10 })).items;
    assert.deepEqual(
      letters.map((l) => [l.jobId, l.cause, l.deliveries]),
      [["pi_0001/settle", "exhausted", deliveries]],
      letters[0]?.reason,
    );
    assert.equal(letters[0]!.queue?.messageId, messageId);
    // A repeat changes nothing. (One that names no message nor source is
    // answered busy within the first's lease, as an envelope's is.)
    if (messageId === undefined) continue;
    const again = await app.request(
      "/v1/pubsub/dead-letter",
      await unwrapped(job, DEAD_LETTER_AUDIENCE, headers),
    );
    assert.equal(again.status, 204);
    assert.deepEqual(
      (await store.listDeadLetters({ limit: 10 })).items,
      letters,
    );
  }
});

Deno.test("POST /v1/pubsub/dead-letter settles a payment whose tx confirmed when its give-up comes unwrapped: kept as a letter only, it stayed settling, its hold pending", async () => {
  const g = await theGoogle();
  const { app, store } = await makeApp({
    intents: [SENT_WAITING],
    scripts: {
      pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
    },
    deps: {
      pubsubDeadLetter: {
        audience: DEAD_LETTER_AUDIENCE,
        jwks: g.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
    },
  });
  const res = await app.request(
    "/v1/pubsub/dead-letter",
    await unwrapped(job, DEAD_LETTER_AUDIENCE),
  );
  assert.equal(res.status, 204);
  const intent = await store.getIntent("pi_0001");
  assert.deepEqual([intent?.state, intent?.hold], ["settled", "captured"]);
});
