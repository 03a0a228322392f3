/**
 * QStash's failure callback after a message's only delivery (`retried: 0`,
 * a message published with `Upstash-Retries: 0`): still a give-up, counted
 * as one delivery; and a callback whose `retried` cannot be read is still
 * resolved, with the deliveries the store counted.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { makeApp } from "./_app.ts";
import { failedRequest, QSTASH, signQStash } from "./_signing.ts";

const job = { intentId: "pi_0002", kind: "settle" } as const;
const settling: NewIntent = {
  id: "pi_0002",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
};

/** A signed failure callback for `job`, `retried` as given (left out if undefined). */
async function failed(retried: unknown): Promise<RequestInit> {
  const body = JSON.stringify({
    status: 503,
    ...(retried === undefined ? {} : { retried }),
    maxRetries: 0,
    dlqId: "dlq_0",
    sourceMessageId: "msg_only_delivery",
    url: QSTASH.url,
    method: "POST",
    sourceBody: btoa(JSON.stringify(job)),
  });
  return await failedRequest(body);
}

Deno.test("POST /v1/qstash/failed with retried 0 (no retries) resolves the job as given up after its one delivery", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const res = await app.request("/v1/qstash/failed", await failed(0));
  assert.equal(res.status, 200, await res.clone().text());
  const answer = await res.json();
  assert.equal(answer.outcome, "poison");
  assert.equal(answer.delivery, 1);
  assert.equal(answer.reason, "the queue gave up after 1 delivery");
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  assert.equal((await store.getDeadLetter("pi_0002/settle"))?.deliveries, 1);
});

Deno.test("POST /v1/qstash/failed without a usable 'retried' (missing, not a number, negative, fractional, past 2^53) resolves the give-up with the store's count, as a Pub/Sub dead letter without its count does: QStash has given up, and a refusal would strand the intent", async () => {
  for (const retried of [undefined, "3", null, -1, 1.5, 2 ** 53]) {
    const { app, store } = await makeApp({ intents: [settling] });
    const res = await app.request("/v1/qstash/failed", await failed(retried));
    const what = JSON.stringify(retried) ?? "undefined";
    assert.equal(res.status, 200, `${what}: ${await res.clone().text()}`);
    const answer = await res.json();
    assert.equal(answer.outcome, "poison", what);
    assert.equal(answer.delivery, 1, what);
    assert.equal(answer.reason, "the queue gave up after 1 delivery", what);
    assert.equal(answer.resolution, "last broadcast unknown, needs review");
    assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
    const letter = await store.getDeadLetter("pi_0002/settle");
    assert.equal(letter?.cause, "exhausted", what);
    assert.equal(letter?.queue?.messageId, "msg_only_delivery", what);
  }
});

Deno.test("POST /v1/qstash/failed without 'retried' takes the deliveries the store counted for a job QStash delivered without Upstash-Retried", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0002", state: "created" }],
  });
  const body = JSON.stringify(job);
  for (let i = 0; i < 2; i++) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: { "upstash-signature": await signQStash(body) },
    });
    assert.equal(res.status, 503, await res.text());
  }
  const res = await app.request("/v1/qstash/failed", await failed(undefined));
  assert.equal(res.status, 200, await res.clone().text());
  assert.deepEqual(await res.json(), {
    outcome: "poison",
    job: "pi_0002/settle",
    delivery: 2,
    reason: "the queue gave up after 2 deliveries",
    resolution: "job dropped, intent still created",
  });
  assert.equal((await store.getDeadLetter("pi_0002/settle"))?.deliveries, 2);
  assert.equal((await store.getIntent("pi_0002"))?.state, "created");
});
