/**
 * The generic route's `Retry-After` was capped at a day, the most QStash
 * honours, while the start-up check counts that route by the policy's own
 * delays, uncapped (its bridge waits ours: DESIGN §14's table). A policy
 * whose delays pass a day so started, and a bridge that waited the
 * `Retry-After` it was told came back sooner than the window the check
 * took: an unknown send was poisoned to review on its last delivery before
 * its rescue could run (DESIGN §4). The route answers the policy's delay;
 * QStash's keeps the cap, which its check counts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { loadConfig } from "../../webhook/config.ts";
import { outage } from "../_outage.ts";
import { genericRequest, makeApp, pubsubRequest, SECRET } from "./_app.ts";
import { signQStash } from "./_signing.ts";

const HOUR = 3_600_000;

Deno.test("POST /v1/deliveries asks the bridge back after the policy's delay past a day, so a send whose outcome is unknown is rescued before its last delivery, as the start-up check counts", async () => {
  // Three deliveries 36 h apart, rescue after 70 h: the start-up check
  // takes it (72 h of delays), counting the generic route by ours.
  const { policy, clockSkewMs } = loadConfig({
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: SECRET,
    MAX_DELIVERIES: "3",
    BASE: "36h",
    CAP: "36h",
    JITTER: "none",
    STUCK_AFTER: "70h",
  });
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  // Every send times out: its outcome is unknown, so only a rescue may
  // follow it before review.
  const sender = new ScriptedSender({
    pi_0001: { sends: [{ error: new Error("rpc timeout") }] },
  });
  let now = 1_000_000;
  const app = createApp({
    store,
    sender,
    policy,
    clockSkewMs,
    now: () => now,
    random: () => 0,
    webhookSecret: SECRET,
  });
  const job = { intentId: "pi_0001", kind: "settle" };
  const waits: string[] = [];
  for (const delivery of [1, 2, 3]) {
    const body = JSON.stringify({ job, delivery });
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS: Math.floor(now / 1000) }),
    );
    const answer = await res.json();
    if (delivery < 3) {
      assert.equal(res.status, 503, JSON.stringify(answer));
      const retryAfter = res.headers.get("retry-after");
      assert.ok(retryAfter !== null);
      waits.push(retryAfter);
      now += Number(retryAfter) * 1000; // a bridge waits what it is told
    } else {
      assert.equal(answer.outcome, "poison", JSON.stringify(answer));
    }
  }
  // The last delivery, 72 h after the first, rescued the send before it
  // poisoned the job: the intent is in review with the rescue on record.
  assert.deepEqual(
    sender.calls.filter((call) => call.method === "send").map((call) =>
      call.method === "send" && call.replace
    ),
    [false, true],
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
  assert.deepEqual(waits, [String(36 * HOUR / 1000), String(36 * HOUR / 1000)]);
});

Deno.test("a delivery the store failed once (a blip) is asked back after the policy's delay past a day on the generic route, after a day on QStash's, and not at all on Pub/Sub's", async () => {
  let failing = 0;
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const { app } = await makeApp({
    deps: {
      store: outage(store, () => failing-- > 0),
      policy: {
        maxDeliveries: 3,
        baseMs: 36 * HOUR,
        capMs: 36 * HOUR,
        jitter: "none",
      },
    },
  });
  const job = { intentId: "pi_0001", kind: "settle" };
  failing = 1; // the delivery's first call fails; the probe's write takes
  const generic = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 2 })),
  );
  assert.equal(generic.status, 503);
  assert.equal(
    (await generic.json()).type,
    "urn:relayer:problem:delivery-failed",
  );
  assert.equal(generic.headers.get("retry-after"), String(36 * HOUR / 1000));
  failing = 1;
  const body = JSON.stringify(job);
  const qstash = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-retried": "1",
      "upstash-signature": await signQStash(body),
    },
  });
  assert.equal(qstash.status, 503);
  await qstash.body?.cancel();
  assert.equal(qstash.headers.get("retry-after"), "86400");
  // Pub/Sub waits as its subscription's retry policy says: no Retry-After.
  failing = 1;
  const pubsub = await app.request(
    "/v1/pubsub",
    await pubsubRequest(job, "msg_1", 2),
  );
  assert.equal(pubsub.status, 503);
  await pubsub.body?.cancel();
  assert.equal(pubsub.headers.get("retry-after"), null);
});
