/**
 * A queue's late copy of a message it already gave up on: the give-up
 * dropped the job of an authorized intent (nothing sent) and held its
 * lease for `leaseMs` + `clockSkewMs`; a copy of that message arriving
 * after that must send nothing either, or the payment is sent under a
 * dead letter that says "job dropped, intent still authorized". A job
 * published since (another message) still settles the intent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender, type Store } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { KvStore } from "../../store/kv.ts";
import { theGoogle } from "./_app.ts";
import { overriding } from "../_stores.ts";
import { PUBSUB, QSTASH, signQStash } from "./_signing.ts";

const DEAD_LETTER_AUDIENCE =
  "https://relayer.example.test/v1/pubsub/dead-letter";
const job = { intentId: "pi_0002", kind: "settle" } as const;
/** Past the give-up's lease: `leaseMs` + `clockSkewMs` (defaults), and a second. */
const LATER_MS = 30_000 + 5_000 + 1_000;

const STORES: readonly {
  name: string;
  open: () => Promise<{ store: Store; close(): void }>;
}[] = [
  {
    name: "MemoryStore",
    open: () => Promise.resolve({ store: new MemoryStore(), close() {} }),
  },
  {
    name: "KvStore",
    open: async () => {
      const kv = await Deno.openKv(":memory:");
      return { store: new KvStore(kv), close: () => kv.close() };
    },
  },
];

function sends(sender: ScriptedSender): number {
  return sender.calls.filter((call) => call.method === "send").length;
}

async function authorizedApp(store: Store) {
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000 };
  const sender = new ScriptedSender({
    pi_0002: { sends: [{ txHash: "0xabc" }] },
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
  return { app, clock, sender };
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

async function qstashFailed(sourceMessageId: string, key = "sourceMessageId") {
  const url = `${QSTASH.url}/failed`;
  const body = JSON.stringify({
    status: 503,
    retried: 4,
    maxRetries: 4,
    dlqId: `dlq_${sourceMessageId}`,
    [key]: sourceMessageId,
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

for (const { name, open } of STORES) {
  Deno.test(`a late QStash copy of a message its failure callback gave up on sends nothing; another message's job still sends [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
      const gaveUp = await app.request(
        "/v1/qstash/failed",
        await qstashFailed("msg_1"),
      );
      assert.equal(gaveUp.status, 200);
      assert.equal(
        (await gaveUp.json()).resolution,
        "job dropped, intent still authorized",
      );
      clock.now += LATER_MS;
      const late = await app.request("/v1/qstash", await qstash("msg_1", "4"));
      assert.equal(late.status, 200);
      assert.deepEqual(await late.json(), {
        outcome: "done",
        job: "pi_0002/settle",
        delivery: 5,
        reason:
          "the queue gave up on this message before: a late copy, nothing sent",
      });
      assert.equal(sends(sender), 0);
      assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
      // The letter still says what is true.
      assert.equal(
        (await store.getDeadLetter("pi_0002/settle"))?.resolution,
        "job dropped, intent still authorized",
      );
      // A job published since is another message: it settles the intent.
      const fresh = await app.request("/v1/qstash", await qstash("msg_2", "0"));
      assert.equal(fresh.status, 503);
      assert.equal(sends(sender), 1);
      assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
    } finally {
      close();
    }
  });

  Deno.test(`a late Pub/Sub copy of a message its dead-letter topic gave up on sends nothing [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
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
          authorization: `Bearer ${await g.token({
            aud: DEAD_LETTER_AUDIENCE,
          })}`,
        },
      });
      assert.equal(gaveUp.status, 204);
      clock.now += LATER_MS;
      // The source message itself, pushed again after it was dead-lettered.
      const late = await app.request("/v1/pubsub", {
        method: "POST",
        body: JSON.stringify({
          message: {
            data,
            messageId: "2070443601311540",
            publishTime: "2026-11-30T11:00:00.123Z",
          },
          subscription: "projects/p/subscriptions/relayer",
          deliveryAttempt: 5,
        }),
        headers: { authorization: `Bearer ${await g.token()}` },
      });
      assert.equal(late.status, 204);
      assert.equal(sends(sender), 0);
      assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
    } finally {
      close();
    }
  });
}

Deno.test("a Pub/Sub push's write ahead of its send carries one give-up mark, its source with the time in milliseconds: two such writes fit a commit of 10 checks", async () => {
  const memory = new MemoryStore();
  const marks: (readonly string[] | undefined)[] = [];
  const store = overriding(memory, {
    transition: (id, change, options) => {
      marks.push(options?.unlessCounted);
      return memory.transition(id, change, options);
    },
  });
  const { app, sender } = await authorizedApp(store);
  const g = await theGoogle();
  const res = await app.request("/v1/pubsub", {
    method: "POST",
    body: JSON.stringify({
      message: {
        data: btoa(JSON.stringify(job)),
        messageId: "2070443601311540",
        publishTime: "2026-11-30T11:00:00.123Z",
      },
      subscription: "projects/p/subscriptions/relayer",
      deliveryAttempt: 1,
    }),
    headers: { authorization: `Bearer ${await g.token()}` },
  });
  assert.equal(res.status, 503); // sent, waiting for its receipt
  assert.equal(sends(sender), 1);
  assert.deepEqual(marks, [[
    `givingup/pubsub/source/p/relayer@${
      Date.parse("2026-11-30T11:00:00.123Z")
    }#pi_0002`,
  ]]);
});

Deno.test("a late QStash copy is known when the failure callback spells the source message's id as QStash's docs have, sourceMessasgeId", async () => {
  const { app, clock, sender } = await authorizedApp(new MemoryStore());
  const gaveUp = await app.request(
    "/v1/qstash/failed",
    await qstashFailed("msg_1", "sourceMessasgeId"),
  );
  assert.equal(gaveUp.status, 200);
  clock.now += LATER_MS;
  const late = await app.request("/v1/qstash", await qstash("msg_1", "4"));
  assert.equal(late.status, 200);
  assert.equal((await late.json()).outcome, "done");
  assert.equal(sends(sender), 0);
});
