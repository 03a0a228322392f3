/**
 * Two push subscriptions on one Pub/Sub topic each get every message,
 * under the same message id (an id is the topic's): a relayer and an
 * audit consumer, or two deployments of the relayer. Without a
 * dead-letter policy a push carries no `deliveryAttempt`, and the store
 * counts its deliveries: per subscription, or one subscription's failures
 * would spend the other's deliveries. Likewise two dead-letter topics
 * pushing to one service may each give a copy the same id: one's give-up
 * is not the other's.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ScriptedSender, type Store } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { BACKENDS, kvBackend, memoryBackend } from "../_stores.ts";
import { theGoogle } from "./_app.ts";
import { PUBSUB } from "./_signing.ts";
import {
  authorizedApp,
  DEAD_LETTER_AUDIENCE,
  deadLetterPush,
  LATER_MS,
  pubsubPush,
  sends,
} from "./_late_copy.ts";

const job = { intentId: "pi_0003", kind: "settle" } as const;

/** An app on `store` whose intent `pi_0003` is `created`: each delivery waits, the third is poisoned. */
async function createdApp(store: Store) {
  await store.createIntent({ id: "pi_0003", state: "created" });
  const g = await theGoogle();
  return createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 3 },
    now: () => 1_000_000,
    random: () => 0,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });
}

/** Pub/Sub's push of the job as `messageId` through `subscription` (none if `undefined`), with no dead-letter policy (no `deliveryAttempt`). */
async function push(subscription: string | undefined, messageId: string) {
  const g = await theGoogle();
  return {
    method: "POST",
    body: JSON.stringify({
      message: {
        data: btoa(JSON.stringify(job)),
        messageId,
        publishTime: "2026-11-30T11:00:00.123Z",
      },
      subscription,
    }),
    headers: { authorization: `Bearer ${await g.token()}` },
  };
}

for (const { name, open } of [memoryBackend, kvBackend]) {
  Deno.test(`a message pushed through two subscriptions is counted per subscription: one's failures do not spend the other's deliveries [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const app = await createdApp(store);
      const audit = "projects/p/subscriptions/audit";
      const relayer = "projects/p/subscriptions/relayer";
      for (const n of [1, 2]) {
        const res = await app.request("/v1/pubsub", await push(audit, "42"));
        assert.equal(res.status, 503);
        assert.equal((await res.json()).delivery, n);
      }
      // The relayer's subscription's first push of the same message is its delivery 1,
      // not 3 (which would poison the job before its subscription retried once).
      const first = await app.request("/v1/pubsub", await push(relayer, "42"));
      assert.equal(first.status, 503);
      assert.equal((await first.json()).delivery, 1);
      assert.equal(await store.getDeadLetter("pi_0003/settle"), null);
      // The audit subscription's count went on where it was.
      const third = await app.request("/v1/pubsub", await push(audit, "42"));
      assert.equal(third.status, 204);
      assert.equal(
        (await store.getDeadLetter("pi_0003/settle"))?.deliveries,
        3,
      );
    } finally {
      await close();
    }
  });
}

// Google's limits: a project id is at most 30 characters, a subscription's
// name at most 255; a message id is kept up to 200 characters (`idFrom`).
const PROJECT = `p${"r".repeat(28)}9`;
const LONGEST = (last: string) => `s${"u".repeat(253)}${last}`;
const LONGEST_ID = "7".repeat(200);

for (const { name, open } of BACKENDS) {
  Deno.test(`a push through a subscription named at Google's limit (255 characters, a 30-character project, a 200-character message id) is counted in the store, per subscription [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const app = await createdApp(store);
      const a = `projects/${PROJECT}/subscriptions/${LONGEST("a")}`;
      const b = `projects/${PROJECT}/subscriptions/${LONGEST("b")}`;
      for (const [subscription, n] of [[a, 1], [a, 2], [b, 1]] as const) {
        const res = await app.request(
          "/v1/pubsub",
          await push(subscription, LONGEST_ID),
        );
        assert.equal(res.status, 503);
        assert.equal((await res.json()).delivery, n);
      }
      // The count of `a` ends with its poison; `b`'s goes on.
      const poisoned = await app.request(
        "/v1/pubsub",
        await push(a, LONGEST_ID),
      );
      assert.equal(poisoned.status, 204);
      assert.equal(
        (await store.getDeadLetter("pi_0003/settle"))?.deliveries,
        3,
      );
      assert.equal(
        await store.deliveries(
          `pubsub/${PROJECT}/${LONGEST("a")}/${LONGEST_ID}`,
        ),
        0,
      );
      assert.equal(
        await store.deliveries(
          `pubsub/${PROJECT}/${LONGEST("b")}/${LONGEST_ID}`,
        ),
        1,
      );
    } finally {
      await close();
    }
  });
}

for (const { name, open } of [memoryBackend, kvBackend]) {
  Deno.test(`a late copy of a message its dead-letter topic gave up on is known when its subscription's name is at Google's limit, 255 characters [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
      const subscription = LONGEST("a");
      const gaveUp = await app.request(
        "/v1/pubsub/dead-letter",
        await deadLetterPush(subscription, PROJECT),
      );
      assert.equal(gaveUp.status, 204);
      assert.equal(
        (await store.getDeadLetter("pi_0002/settle"))?.resolution,
        "job dropped, intent still authorized",
      );
      clock.now += LATER_MS;
      // The source message, pushed again through its subscription.
      const late = await app.request(
        "/v1/pubsub",
        await pubsubPush(
          "2070443601311540",
          "2026-11-30T11:00:00.123Z",
          5,
          `projects/${PROJECT}/subscriptions/${subscription}`,
        ),
      );
      assert.equal(late.status, 204);
      assert.equal(sends(sender), 0);
      assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
    } finally {
      await close();
    }
  });
}

for (const { name, open } of [memoryBackend, kvBackend]) {
  Deno.test(`a give-up on one subscription's copy of a message marks that subscription's copy only: another subscription's push of the message still sends [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
      // Pub/Sub gave up on the message through `relayer` (deadLetterPush).
      const gaveUp = await app.request(
        "/v1/pubsub/dead-letter",
        await deadLetterPush(),
      );
      assert.equal(gaveUp.status, 204);
      clock.now += LATER_MS;
      const copy = async (subscription: string) =>
        await app.request(
          "/v1/pubsub",
          await pubsubPush(
            "2070443601311540",
            "2026-11-30T11:00:00.123Z",
            undefined,
            subscription,
          ),
        );
      // Its late copy through that subscription sends nothing.
      assert.equal(
        (await copy("projects/p/subscriptions/relayer")).status,
        204,
      );
      assert.equal(sends(sender), 0);
      // The same message through another subscription is that subscription's
      // live delivery: it sends (and waits for its receipt).
      const other = await copy("projects/p/subscriptions/relayer-second");
      assert.equal(other.status, 503);
      assert.equal((await other.json()).delivery, 1);
      assert.equal(sends(sender), 1);
      assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
    } finally {
      await close();
    }
  });
}

/**
 * A push of the dead-letter topic `deadLetter`'s copy `copyId` of `intentId`'s
 * job, forwarded from subscription `source` (published at `published`).
 */
async function deadLetterCopy(
  intentId: string,
  copyId: string,
  deadLetter: string,
  source: string,
  published: string,
) {
  const g = await theGoogle();
  return {
    method: "POST",
    body: JSON.stringify({
      message: {
        data: btoa(JSON.stringify({ intentId, kind: "settle" })),
        messageId: copyId,
        publishTime: "2026-11-30T12:00:09.000Z",
        attributes: {
          CloudPubSubDeadLetterSourceDeliveryCount: "5",
          CloudPubSubDeadLetterSourceSubscription: source,
          CloudPubSubDeadLetterSourceSubscriptionProject: "p",
          CloudPubSubDeadLetterSourceTopicPublishTime: published,
        },
      },
      subscription: `projects/p/subscriptions/${deadLetter}`,
    }),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  };
}

for (const { name, open } of BACKENDS) {
  Deno.test(`two dead-letter topics pushing to one service may give their copies one id (an id is its topic's): the second give-up still resolves its own intent [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app } = await authorizedApp(store);
      await store.createIntent({
        id: "pi_0004",
        state: "authorized",
        hold: "pending",
      });
      // Jobs topic A's dead-letter topic gives up on pi_0002's message.
      const a = await app.request(
        "/v1/pubsub/dead-letter",
        await deadLetterCopy(
          "pi_0002",
          "1",
          "jobs-a-dead-letter",
          "jobs-a",
          "2026-11-30T11:00:00.123+00:00",
        ),
      );
      assert.equal(a.status, 204);
      // Jobs topic B's gives up on pi_0004's, its copy under the same id.
      const b = await app.request(
        "/v1/pubsub/dead-letter",
        await deadLetterCopy(
          "pi_0004",
          "1",
          "jobs-b-dead-letter",
          "jobs-b",
          "2026-11-30T11:30:00.000+00:00",
        ),
      );
      assert.equal(b.status, 204);
      assert.equal(
        (await store.getDeadLetter("pi_0004/settle"))?.resolution,
        "job dropped, intent still authorized",
      );
    } finally {
      await close();
    }
  });
}

for (const { name, open } of [memoryBackend, kvBackend]) {
  Deno.test(`a push that names no subscription, or one Google could not have named (a part empty, a space, a prefix or suffix, a 256-character name), is counted by its message id [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const app = await createdApp(store);
      const subscriptions = [
        undefined,
        "projects//subscriptions/relayer",
        "projects/p/subscriptions/",
        "projects/p q/subscriptions/relayer",
        "x/projects/p/subscriptions/relayer",
        "projects/p/subscriptions/relayer/x",
        `projects/p/subscriptions/${LONGEST("a")}z`,
      ];
      for (const [i, subscription] of subscriptions.entries()) {
        const res = await app.request(
          "/v1/pubsub",
          await push(subscription, `m${i}`),
        );
        assert.equal(res.status, 503, String(subscription));
        assert.equal((await res.json()).delivery, 1);
        assert.equal(
          await store.deliveries(`pubsub/m${i}`),
          1,
          `${subscription} is counted by its message id`,
        );
      }
    } finally {
      await close();
    }
  });
}
