/**
 * The queues' give-up routes: QStash's failure callback and a push
 * subscription on Pub/Sub's dead-letter topic. A job the queue stopped
 * delivering is still resolved, exactly once.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  MemoryStore,
  type NewIntent,
  type ReceiptStatus,
  type Sender,
} from "../../mod.ts";
import { slowClaims } from "../_stores.ts";
import {
  DEAD_LETTER_AUDIENCE,
  genericRequest,
  makeApp,
  NOW,
  OPS,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";
import { outage } from "../_outage.ts";
import { failedRequest, PUBSUB, QSTASH, signQStash } from "./_signing.ts";

/** QStash's failure-callback body, around `job`. */
function callback(
  job: unknown,
  fields: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    status: 503,
    header: { "Retry-After": ["5"] },
    body: btoa(JSON.stringify({ outcome: "retry" })),
    retried: 5,
    maxRetries: 5,
    dlqId: "dlq_1731",
    sourceMessageId: "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ",
    topicName: "",
    endpointName: "",
    url: QSTASH.url,
    method: "POST",
    sourceHeader: { "Content-Type": ["application/json"] },
    sourceBody: btoa(JSON.stringify(job)),
    notBefore: 0,
    createdAt: 0,
    ...fields,
  });
}

const job = { intentId: "pi_0002", kind: "settle" } as const;
const settling: NewIntent = {
  id: "pi_0002",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
};

function deadLetterEnvelope(
  body: unknown,
  attributes: Record<string, string> = {
    CloudPubSubDeadLetterSourceDeliveryCount: "5",
  },
  messageId = "9182736450",
): string {
  return JSON.stringify({
    message: {
      data: btoa(typeof body === "string" ? body : JSON.stringify(body)),
      messageId,
      publishTime: "2026-11-30T12:00:00.000Z",
      attributes,
    },
    subscription: "projects/p/subscriptions/relayer-dead-letter",
  });
}

Deno.test("POST /v1/qstash/failed resolves a settling payment QStash gave up on, and keeps the queue's ids", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job)),
  );
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    outcome: "poison",
    job: "pi_0002/settle",
    delivery: 6,
    reason: "the queue gave up after 6 deliveries",
    resolution: "last broadcast unknown, needs review",
  });
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.equal(letter?.cause, "exhausted");
  assert.deepEqual(letter?.queue, {
    queue: "qstash",
    messageId: "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ",
    dlqId: "dlq_1731",
  });
});

Deno.test("POST /v1/qstash/failed is idempotent: a repeat changes nothing and answers 200", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0002", state: "authorized", hold: "pending" }],
  });
  const first = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job)),
  );
  assert.equal(first.status, 200);
  const kept = await store.getDeadLetter("pi_0002/settle");
  assert.equal(kept?.resolution, "job dropped, intent still authorized");
  const again = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job, { retried: 7 })),
  );
  assert.equal(again.status, 200);
  assert.deepEqual(await store.getDeadLetter("pi_0002/settle"), kept);
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
});

Deno.test("POST /v1/qstash/failed changes nothing for a settled intent, nor for a job the relayer poisoned itself", async () => {
  const { app, store, writes } = await makeApp({
    intents: [
      { id: "pi_0002", state: "settled", hold: "captured" },
      { id: "pi_0003", state: "created" },
    ],
  });
  const before = writes();
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job)),
  );
  assert.equal(res.status, 200);
  assert.equal(
    writes(),
    before + 1,
    "a settled intent: only the callback's replay record is written",
  );
  assert.equal((await res.json()).outcome, "done");
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);

  // The relayer poisoned pi_0003's job itself (its third delivery); the
  // queue's callback afterwards (that answer lost) must not overwrite that
  // record. It is written again as it was, with the callback's ids and a
  // new version: the letter might be another message's, left by a
  // redrive whose answer was lost, and redriven again under its old
  // version, QStash would drop the job as that redrive's duplicate.
  const { app: app3, store: store3 } = await makeApp({
    intents: [{ id: "pi_0003", state: "created" }],
  });
  const job3 = { intentId: "pi_0003", kind: "settle" } as const;
  const body = JSON.stringify(job3);
  await app3.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body),
      "upstash-retried": "2",
    },
  });
  const own = await store3.getDeadLetter("pi_0003/settle");
  assert.equal(own?.reason, "no luck after 3 deliveries");
  const res3 = await app3.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job3, { retried: 2 })),
  );
  assert.equal(res3.status, 200);
  const rewritten = await store3.getDeadLetter("pi_0003/settle");
  assert.ok(own && rewritten);
  assert.notEqual(rewritten.version, own.version);
  assert.equal(
    rewritten.queue?.messageId,
    "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ",
  );
  const { version: _1, ...first } = own;
  const { version: _2, queue: _3, ...kept } = rewritten;
  assert.deepEqual(kept, first);
  // Repeated, the callback changes nothing now.
  const res4 = await app3.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job3, { retried: 2 })),
  );
  assert.equal(res4.status, 200);
  assert.deepEqual(await store3.getDeadLetter("pi_0003/settle"), rewritten);
});

Deno.test("POST /v1/qstash/failed refuses a callback signed for another URL (401), touching nothing, and an unreadable job (489), keeping only its dead letter", async () => {
  const { app, store, writes } = await makeApp({ intents: [settling] });
  const before = writes();
  const wrongUrl = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job), QSTASH.url),
  );
  assert.equal(wrongUrl.status, 401);
  const unsigned = await app.request("/v1/qstash/failed", {
    method: "POST",
    body: callback(job),
  });
  assert.equal(unsigned.status, 401);
  const unreadable = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job, { sourceBody: "not base64!" })),
  );
  assert.equal(unreadable.status, 489);
  assert.equal(unreadable.headers.get("upstash-nonretryable-error"), "true");
  const badJob = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback({ intentId: "" })),
  );
  assert.equal(badJob.status, 489);
  // Each kept as the message's dead letter (one name: one message), and
  // nothing else touched.
  assert.equal(writes(), before + 2);
  const kept = await store.getDeadLetter(
    "qstash/msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ/unreadable",
  );
  assert.match(kept?.reason ?? "", /unreadable QStash message/);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});

Deno.test("POST /v1/pubsub/dead-letter resolves the job with the source's delivery count, and answers 204", async () => {
  const { app, store } = await withDeadLetterRoute([settling]);
  const g = await theGoogle();
  const res = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: deadLetterEnvelope(job),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  });
  assert.equal(res.status, 204);
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.equal(letter?.reason, "the queue gave up after 5 deliveries");
  assert.equal(letter?.deliveries, 5);
  assert.deepEqual(letter?.queue, { queue: "pubsub", messageId: "9182736450" });
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
});

Deno.test("POST /v1/pubsub/dead-letter takes a source delivery count under 1 or unreadable as missing: resolved with the store's count, never refused for good", async () => {
  for (const count of ["0", "-3", "1.5", "five"]) {
    const { app, store } = await withDeadLetterRoute([settling]);
    const g = await theGoogle();
    const res = await app.request("/v1/pubsub/dead-letter", {
      method: "POST",
      body: deadLetterEnvelope(job, {
        CloudPubSubDeadLetterSourceDeliveryCount: count,
      }),
      headers: {
        authorization: `Bearer ${await g.token({
          aud: DEAD_LETTER_AUDIENCE,
        })}`,
      },
    });
    // A 503 here would come back on every push of the dead-letter
    // topic: the give-up never resolved, the payment left settling.
    assert.equal(res.status, 204, count);
    const letter = await store.getDeadLetter("pi_0002/settle");
    assert.equal(letter?.reason, "the queue gave up after 1 delivery", count);
    assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  }
});

Deno.test("POST /v1/pubsub/dead-letter refuses the main route's audience (401) and acks an unreadable job (204), kept visible as a dead letter", async () => {
  const { app, store, writes } = await withDeadLetterRoute([settling]);
  const g = await theGoogle();
  const before = writes();
  const wrongAudience = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: deadLetterEnvelope(job),
    headers: { authorization: `Bearer ${await g.token()}` },
  });
  assert.equal(wrongAudience.status, 401);
  const unreadable = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: deadLetterEnvelope("{not json"),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  });
  assert.equal(unreadable.status, 204);
  assert.equal(
    writes(),
    before + 1,
    "only the dead letter that keeps it visible",
  );
  const kept = await store.getDeadLetter("pubsub/9182736450/unreadable");
  assert.match(kept?.reason ?? "", /unreadable Pub\/Sub message/);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});

Deno.test("createApp() refuses one audience for both Pub/Sub routes, as loadConfig does: a token for pushes would open the give-up route", async () => {
  const g = await theGoogle();
  const keys = {
    audience: PUBSUB.audience,
    jwks: g.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  };
  // The push subscription's token, as any push carries it for up to an hour.
  const pushToken = await g.token();
  let app: Awaited<ReturnType<typeof makeApp>>["app"] | undefined;
  let refusal: unknown;
  try {
    ({ app } = await makeApp({
      intents: [settling],
      deps: { pubsub: keys, pubsubDeadLetter: keys },
    }));
  } catch (error) {
    refusal = error;
  }
  if (app !== undefined) {
    // Without the check: the push token poisons the job it names.
    const res = await app.request("/v1/pubsub/dead-letter", {
      method: "POST",
      body: deadLetterEnvelope(job),
      headers: { authorization: `Bearer ${pushToken}` },
    });
    assert.fail(
      `built with one audience for both routes; a push token on /v1/pubsub/dead-letter answered ${res.status}`,
    );
  }
  assert.ok(refusal instanceof TypeError);
  assert.equal(
    refusal.message,
    "Cannot create app as 'pubsubDeadLetter.audience' is 'pubsub.audience': a token Google issues for the push subscription would also open POST /v1/pubsub/dead-letter, which poisons the job it names. Give the dead-letter push subscription its own audience (its push endpoint's URL, such as https://relayer.example.com/v1/pubsub/dead-letter)",
  );
});

Deno.test("the give-up routes are refused (503) where their keys are not set", async () => {
  const { app } = await makeApp({ deps: { qstash: undefined } as never });
  const res = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: deadLetterEnvelope(job),
  });
  assert.equal(res.status, 503);
  assert.match(
    (await res.json()).detail,
    /PUBSUB_DEAD_LETTER_AUDIENCE/,
  );
  const failed = await app.request("/v1/qstash/failed", {
    method: "POST",
    body: JSON.stringify(callback(job)),
  });
  assert.equal(failed.status, 503);
  assert.match((await failed.json()).detail, /QSTASH_CURRENT_SIGNING_KEY/);
});

Deno.test("POST /v1/qstash/failed refuses a replayed callback (401): its signature was used", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const init = await failedRequest(callback(job));
  const first = await app.request("/v1/qstash/failed", init);
  assert.equal(first.status, 200);
  await first.body?.cancel();
  const kept = await store.getDeadLetter("pi_0002/settle");
  const replay = await app.request("/v1/qstash/failed", init);
  assert.equal(replay.status, 401);
  await replay.body?.cancel();
  assert.deepEqual(await store.getDeadLetter("pi_0002/settle"), kept);
});

Deno.test("POST /v1/qstash/failed whose replay record answers after the give-up's receipts budget settles the paid payment (200), never a 401 of itself", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({ ...settling, txHashes: ["0xabc"] });
  const confirmed: Sender = {
    send: () => Promise.reject(new Error("a give-up sends nothing")),
    receipt: (): Promise<ReceiptStatus> => Promise.resolve("confirmed"),
  };
  // A lease of 100 ms: the receipts' budget is 50 ms, the record 300 ms.
  const { app } = await makeApp({
    deps: { store: slowClaims(memory, 300), sender: confirmed, leaseMs: 100 },
  });
  const init = await failedRequest(callback(job));
  const res = await app.request("/v1/qstash/failed", init);
  assert.equal(res.status, 200, await res.clone().text());
  await res.body?.cancel();
  assert.equal((await memory.getIntent("pi_0002"))?.state, "settled");
  const replay = await app.request("/v1/qstash/failed", init);
  assert.equal(replay.status, 401);
  await replay.body?.cancel();
});

Deno.test("POST /v1/deliveries takes a bridge's give-up of any job it took as a delivery: its gaveUp fits past the limit, and a delivery still gets MAX_BODY_BYTES", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  // A delivery of exactly the limit, 64 KiB, a message id of 200
  // characters: taken (a retry, as it waits for the send's receipt).
  const id = "m".repeat(200);
  const padded = (bytes: number, rest: Record<string, unknown>) => {
    const bare = JSON.stringify({ job: { ...job, note: "" }, ...rest });
    return JSON.stringify({
      job: { ...job, note: "x".repeat(bytes - bare.length) },
      ...rest,
    });
  };
  const delivery = padded(64 * 1024, { messageId: id });
  assert.equal(delivery.length, 64 * 1024);
  const direct = await app.request(
    "/v1/deliveries",
    await genericRequest(delivery),
  );
  assert.notEqual(direct.status, 413, await direct.clone().text());
  await direct.body?.cancel();
  // Its give-up, the same job and id, with the queue's count: resolved.
  const giveUp = JSON.stringify(
    {
      job: JSON.parse(delivery).job,
      gaveUp: { deliveries: 123_456_789_012_345, messageId: id },
    },
    null,
    2,
  );
  assert.ok(giveUp.length > 64 * 1024, `${giveUp.length}`);
  const res = await app.request("/v1/deliveries", await genericRequest(giveUp));
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  // A delivery one byte past the limit is refused as before.
  const over = await app.request(
    "/v1/deliveries",
    await genericRequest(padded(64 * 1024 + 1, { delivery: 1 })),
  );
  assert.equal(over.status, 413);
  assert.equal(
    (await over.json()).detail,
    "A request body may be at most 65536 bytes.",
  );
});

Deno.test("POST /v1/qstash/failed takes the callback of any job /v1/qstash takes: the base64 source body fits", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  // A job with an extra field, just under the direct routes' 64 KiB.
  const big = { ...job, note: "x".repeat(60_000) };
  const direct = await app.request(
    "/v1/qstash",
    await failedRequest(JSON.stringify(big), QSTASH.url),
  );
  assert.notEqual(direct.status, 413);
  const body = callback(big);
  assert.ok(body.length > 64 * 1024, `${body.length}`);
  const res = await app.request("/v1/qstash/failed", await failedRequest(body));
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
});

Deno.test("POST /v1/pubsub/dead-letter knows a second dead-lettered copy of a message by its source, though Pub/Sub gives the copy a new id: after a redrive it changes nothing", async () => {
  const g = await theGoogle();
  const clock = { now: NOW };
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0002", state: "authorized", hold: "pending" }],
    scripts: { pi_0002: { sends: [{ txHash: "0xabc" }] } },
    deps: {
      now: () => clock.now,
      pubsubDeadLetter: {
        audience: DEAD_LETTER_AUDIENCE,
        jwks: g.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
      redriveTo: { publish: () => Promise.resolve() },
    },
  });
  // What Pub/Sub sets on each copy of the source message it forwards.
  const source = {
    CloudPubSubDeadLetterSourceDeliveryCount: "5",
    CloudPubSubDeadLetterSourceSubscription: "relayer",
    CloudPubSubDeadLetterSourceSubscriptionProject: "p",
    CloudPubSubDeadLetterSourceTopicPublishTime:
      "2026-11-30T11:00:00.123+00:00",
  };
  const copy = async (messageId: string) =>
    await app.request("/v1/pubsub/dead-letter", {
      method: "POST",
      body: deadLetterEnvelope(job, source, messageId),
      headers: {
        authorization: `Bearer ${await g.token({
          aud: DEAD_LETTER_AUDIENCE,
        })}`,
      },
    });
  assert.equal((await copy("copy-1")).status, 204);
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.equal(letter?.resolution, "job dropped, intent still authorized");
  assert.deepEqual(letter?.queue, {
    queue: "pubsub",
    messageId: "copy-1",
    dlqId: "p/relayer@2026-11-30T11:00:00.123+00:00#pi_0002",
  });
  // The operator redrives; the new job sends and waits for its receipt.
  const redriven = await app.request(
    "/v1/dead-letters/pi_0002/settle/redrive",
    {
      method: "POST",
      headers: { authorization: `Bearer ${OPS}` },
    },
  );
  assert.equal(redriven.status, 202);
  clock.now += 35_000; // past the lease the give-up held (30 s), and the clock skew (5 s)
  const sent = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal(sent.status, 503);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  // Pub/Sub dead-letters the old message again, as a new message: the
  // settling payment is not sent to review.
  assert.equal((await copy("copy-2")).status, 204);
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
});

Deno.test("POST /v1/deliveries with gaveUp is a bridge's give-up: resolved as QStash's failure callback is, nothing sent, its ids kept; a repeat changes nothing, a replay is refused", async () => {
  const { app, store, sender } = await makeApp({
    intents: [settling, {
      id: "pi_0003",
      state: "authorized",
      hold: "pending",
    }],
    scripts: { pi_0003: { sends: [{ txHash: "0xabc" }] } },
  });
  const gaveUp = (intentId: string, messageId: string) =>
    JSON.stringify({
      job: { intentId, kind: "settle" },
      gaveUp: { deliveries: 7, messageId },
    });
  const init = await genericRequest(gaveUp("pi_0002", "m-1"));
  const res = await app.request("/v1/deliveries", init);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    outcome: "poison",
    job: "pi_0002/settle",
    delivery: 7,
    reason: "the queue gave up after 7 deliveries",
    resolution: "last broadcast unknown, needs review",
  });
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.equal(letter?.cause, "exhausted");
  assert.deepEqual(letter?.queue, { queue: "generic", messageId: "m-1" });
  // The same signed request again: a replay.
  const replay = await app.request("/v1/deliveries", init);
  assert.equal(replay.status, 401);
  await replay.body?.cancel();
  // A repeat of the give-up, signed afresh: nothing changes.
  const repeat = await app.request(
    "/v1/deliveries",
    await genericRequest(gaveUp("pi_0002", "m-1"), { timeS: NOW / 1000 - 1 }),
  );
  assert.equal(repeat.status, 200);
  await repeat.body?.cancel();
  assert.deepEqual(await store.getDeadLetter("pi_0002/settle"), letter);
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  // An authorized intent: the job is dropped, and nothing is sent, where a
  // delivery would have sent it.
  const dropped = await app.request(
    "/v1/deliveries",
    await genericRequest(gaveUp("pi_0003", "m-2")),
  );
  assert.equal(dropped.status, 200);
  assert.match((await dropped.json()).resolution, /^job dropped/);
  assert.equal((await store.getIntent("pi_0003"))?.state, "authorized");
  assert.deepEqual(sender.calls, []);
});

Deno.test("POST /v1/deliveries: a bridge's message id marks its give-up for that job only (a bridge may use an id again for another job), and a give-up with no count takes the store's", async () => {
  const { app, store } = await makeApp({
    intents: [
      { id: "pi_0003", state: "authorized", hold: "pending" },
      { id: "pi_0004", state: "authorized", hold: "pending" },
    ],
  });
  await store.admit({ count: "pi_0004/settle", now: NOW });
  await store.admit({ count: "pi_0004/settle", now: NOW });
  for (
    const [intentId, deliveries] of [["pi_0003", 4], ["pi_0004", 2]] as const
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify({
        job: { intentId, kind: "settle" },
        gaveUp: intentId === "pi_0003" ? { deliveries, messageId: "7" } : {
          messageId: "7",
        },
      })),
    );
    assert.equal(res.status, 200, intentId);
    const answer = await res.json();
    assert.equal(answer.outcome, "poison", JSON.stringify(answer));
    assert.equal(answer.delivery, deliveries);
    const letter = await store.getDeadLetter(`${intentId}/settle`);
    assert.equal(letter?.resolution, "job dropped, intent still authorized");
    assert.deepEqual(letter?.queue, { queue: "generic", messageId: "7" });
  }
});

Deno.test("POST /v1/deliveries: a repeated give-up with no count answers as the first did, with the first's count (the letter's write reset the store's)", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0003", state: "authorized", hold: "pending" }],
  });
  await store.admit({ count: "pi_0003/settle", now: NOW });
  await store.admit({ count: "pi_0003/settle", now: NOW });
  const body = JSON.stringify({
    job: { intentId: "pi_0003", kind: "settle" },
    gaveUp: { messageId: "m-9" },
  });
  const answers = [];
  for (const timeS of [NOW / 1000, NOW / 1000 - 1]) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS }),
    );
    assert.equal(res.status, 200);
    answers.push(await res.json());
  }
  assert.equal(answers[0].delivery, 2);
  assert.deepEqual(answers[1], answers[0]);
  assert.equal((await store.getDeadLetter("pi_0003/settle"))?.deliveries, 2);
});

Deno.test("POST /v1/deliveries resolves a give-up whose 'gaveUp.deliveries' cannot be read with the store's count, as one without it: refused, a bridge that takes a 4xx as final drops it, and nothing resolves the intent", async () => {
  // SQS's ApproximateReceiveCount passed on as it comes (a string), and
  // other counts that are not an integer >= 1.
  for (const deliveries of ["5", "", 0, -1, 1.5, 2 ** 53, null, true, {}]) {
    const what = JSON.stringify(deliveries);
    const { app, store } = await makeApp({
      intents: [{ id: "pi_0003", state: "authorized", hold: "pending" }],
    });
    await store.admit({ count: "pi_0003/settle", now: NOW });
    await store.admit({ count: "pi_0003/settle", now: NOW });
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify({
        job: { intentId: "pi_0003", kind: "settle" },
        gaveUp: { deliveries, messageId: "m-1" },
      })),
    );
    assert.equal(res.status, 200, `${what}: ${await res.clone().text()}`);
    assert.deepEqual(await res.json(), {
      outcome: "poison",
      job: "pi_0003/settle",
      delivery: 2,
      reason: "the queue gave up after 2 deliveries",
      resolution: "job dropped, intent still authorized",
    }, what);
    const letter = await store.getDeadLetter("pi_0003/settle");
    assert.equal(letter?.deliveries, 2, what);
    assert.deepEqual(letter?.queue, { queue: "generic", messageId: "m-1" });
  }
});

Deno.test("a give-up route logs a count it cannot read, at most once a minute per route, and not a count left out", async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app } = await withDeadLetterRoute([
    settling,
    { id: "pi_0003", state: "authorized", hold: "pending" },
  ], { log: (line) => lines.push(line), now: () => t });
  const counts = () => lines.filter((line) => / is not a count; /.test(line));
  const generic = async (intentId: string, deliveries: unknown) =>
    await app.request(
      "/v1/deliveries",
      await genericRequest(
        JSON.stringify({
          job: { intentId, kind: "settle" },
          gaveUp: { deliveries, messageId: "m-1" },
        }),
        { timeS: Math.floor(t / 1000) },
      ),
    );
  // Left out: the store's count, and nothing to say.
  let res = await generic("pi_0003", undefined);
  assert.equal(res.status, 200);
  await res.body?.cancel();
  assert.deepEqual(counts(), []);
  res = await generic("pi_0003", "5");
  assert.equal(res.status, 200);
  await res.body?.cancel();
  res = await generic("pi_0003", "6");
  assert.equal(res.status, 200);
  await res.body?.cancel();
  assert.deepEqual(counts(), [
    'relayer POST /v1/deliveries: gaveUp.deliveries "5" is not a count; the give-up takes the count kept here (1); send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
  ]);
  // Another route's line is paced apart.
  res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(job, { retried: "x" })),
  );
  assert.equal(res.status, 200, await res.clone().text());
  await res.body?.cancel();
  const g = await theGoogle();
  res = await app.request("/v1/pubsub/dead-letter", {
    method: "POST",
    body: deadLetterEnvelope(job, {
      CloudPubSubDeadLetterSourceDeliveryCount: "five",
    }),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  });
  assert.equal(res.status, 204);
  assert.deepEqual(counts().slice(1), [
    'relayer POST /v1/qstash/failed: retried "x" is not a count; the give-up takes the count kept here (1)',
    'relayer POST /v1/pubsub/dead-letter: CloudPubSubDeadLetterSourceDeliveryCount "five" is not a count; the give-up takes the count kept here (1)',
  ]);
  // A minute on, the generic route's next one is said.
  t += 60_000;
  res = await generic("pi_0003", 1.5);
  assert.equal(res.status, 200);
  await res.body?.cancel();
  assert.equal(counts().length, 4);
  assert.match(
    counts()[3] ?? "",
    /^relayer POST \/v1\/deliveries: gaveUp.deliveries 1.5 is not a count; /,
  );
});

Deno.test("POST /v1/deliveries refuses a give-up it cannot read (400), saying what it takes, and keeps first a dead letter naming the intent of a job it can read: the give-up is the last word of a job its queue dropped", async () => {
  const { app, writes, store } = await makeApp({ intents: [settling] });
  const job = { intentId: "pi_0002", kind: "settle" };
  for (
    const [body, words] of [
      [
        { job, delivery: 7, gaveUp: { deliveries: 7, messageId: "m-1" } },
        /'delivery' and 'gaveUp' cannot both be given/,
      ],
      [
        { job, messageId: "m-1", gaveUp: { deliveries: 7, messageId: "m-1" } },
        /^'messageId' and 'gaveUp' cannot both be given: a give-up is /,
      ],
      // A malformed id; one left out is resolved as naming no message
      // (deliveries_null_fields_test.ts).
      [
        { job, gaveUp: { deliveries: 7, messageId: 7 } },
        /'gaveUp.messageId' must be your queue's id of the message/,
      ],
      // Not a give-up's object: the bridge's own code sends it so on every
      // give-up, not a count its queue passed on. (A null is one left out,
      // a delivery: deliveries_null_fields_test.ts.)
      [
        { job, gaveUp: true },
        /^'gaveUp' must be an object: current value is true\. A give-up is /,
      ],
      [
        { job, gaveUp: [7, "m-1"] },
        /^'gaveUp' must be an object: current value is \[7,"m-1"\]\./,
      ],
      [
        { job, gaveUp: "m-1" },
        /^'gaveUp' must be an object: current value is "m-1"\./,
      ],
      // No readable job: nothing names the intent to resolve.
      [{ gaveUp: { deliveries: 7, messageId: "m-1" } }, /^'job' is missing/],
      [
        {
          job: { intentId: "pi_0002" },
          gaveUp: { deliveries: 7, messageId: "m-1" },
        },
        /kind/,
      ],
    ] as const
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400, JSON.stringify(body));
    const { detail } = await res.json();
    assert.match(detail, words);
    // Every give-up that names its job keeps a letter, as a job without
    // its kind does (deliveries_unreadable_job_test.ts): refused with
    // nothing kept, a bridge that takes a 4xx as final dropped the queue's
    // last word of the job, and its intent was left with no job and no
    // dead letter.
    if ("job" in body) {
      assert.match(
        detail,
        / Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: /,
        JSON.stringify(body),
      );
    }
  }
  // One letter per job as sent: the readable job's give-ups share one.
  const { items } = await store.listDeadLetters({ limit: 10 });
  assert.deepEqual(items.map((letter) => letter.intentId), [
    "pi_0002",
    "pi_0002",
  ]);
  // Nothing else was touched: the intent is as it was.
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  assert.ok(writes() >= 2);
});

Deno.test("POST /v1/qstash/failed keeps a source message that is not a job as a dead letter: QStash gave up on it while the store was down, so /v1/qstash never kept it, and it may be its intent's only job", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  let down = true;
  const store = outage(memory, () => down);
  const { app } = await makeApp({ deps: { store } });
  // The producer's typo: not a job, but it names its intent.
  const message = { intentId: "pi_0002", kind: "Settle" };
  const body = JSON.stringify(message);
  const messageId = "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ";
  // Every delivery QStash makes while the store is down: the letter that
  // would keep it cannot be written, so each is a 503 QStash retries.
  for (let retried = 0; retried <= 5; retried++) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "upstash-retried": String(retried),
        "upstash-message-id": messageId,
        "upstash-signature": await signQStash(body),
      },
    });
    assert.equal(res.status, 503, `delivery ${retried + 1}`);
    await res.body?.cancel();
  }
  // The store is back; QStash has given up and calls the failure callback.
  down = false;
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(callback(message, { sourceMessageId: messageId })),
  );
  assert.equal(res.status, 489);
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  const kept = await memory.getDeadLetter(`qstash/${messageId}/unreadable`);
  assert.ok(
    kept !== null,
    "the message QStash gave up on is kept, or intent pi_0002 is left authorized with no job and no dead letter",
  );
  assert.equal(kept.intentId, "pi_0002");
  assert.match(kept.reason, /unreadable QStash message/);
  assert.equal(kept.deliveries, 6);
  assert.equal((await memory.getIntent("pi_0002"))?.state, "authorized");
});

Deno.test("POST /v1/deliveries: a bridge's give-up without a count it can read takes the count of its message's deliveries, which the store kept by its id", async () => {
  // The job's deliveries came under the message's id with no count of
  // their own, so the store counted them by that id, not the job's.
  for (
    const gaveUp of [{ messageId: "m-1" }, {
      deliveries: "5",
      messageId: "m-1",
    }]
  ) {
    const what = JSON.stringify(gaveUp);
    const { app, store } = await makeApp({ intents: [settling] });
    for (const n of [1, 2]) {
      const res = await app.request(
        "/v1/deliveries",
        await genericRequest(JSON.stringify({ job, messageId: "m-1" }), {
          timeS: NOW / 1000 - n,
        }),
      );
      assert.equal(res.status, 503, `${what}: ${await res.clone().text()}`);
      assert.equal((await res.json()).delivery, n, what);
    }
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify({ job, gaveUp })),
    );
    assert.equal(res.status, 200, `${what}: ${await res.clone().text()}`);
    const answer = await res.json();
    assert.equal(answer.delivery, 2, what);
    assert.equal(answer.reason, "the queue gave up after 2 deliveries", what);
    const letter = await store.getDeadLetter("pi_0002/settle");
    assert.equal(letter?.deliveries, 2, what);
    assert.equal(letter?.cause, "exhausted", what);
  }
});
