/**
 * A push subscription with payload unwrapping (`--push-no-wrapper`, the
 * API's `pushConfig.noWrapper`) delivers the message's data itself as the
 * HTTP body, with no envelope: on a Pub/Sub route, the job alone. Such a
 * push is acked (204) and kept as a dead letter, as a push that cannot be
 * read is, and that letter names the job's intent, with a reason that says
 * to turn payload unwrapping off: it named none, and, acked, every job of
 * such a subscription ended in a letter no one could find its payment from.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  DEAD_LETTER_AUDIENCE,
  makeApp,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";

const job = { intentId: "pi_0001", kind: "settle" };

Deno.test("POST /v1/pubsub and its dead-letter route keep an unwrapped push (the job itself, no envelope) as a dead letter naming its intent, saying to turn payload unwrapping off, and ack it (204)", async () => {
  const g = await theGoogle();
  for (
    const [route, audience] of [
      ["/v1/pubsub", undefined],
      ["/v1/pubsub/dead-letter", DEAD_LETTER_AUDIENCE],
    ] as const
  ) {
    const intents = [{ id: "pi_0001", state: "authorized" as const }];
    const { app, store } = route === "/v1/pubsub"
      ? await makeApp({ intents })
      : await withDeadLetterRoute(intents);
    const res = await app.request(route, {
      method: "POST",
      body: JSON.stringify(job),
      headers: {
        authorization: `Bearer ${await g.token(
          audience === undefined ? {} : { aud: audience },
        )}`,
        "content-type": "application/json",
      },
    });
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
