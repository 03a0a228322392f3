/**
 * QStash's failure callback after a message's only delivery (`retried: 0`,
 * a message published with `Upstash-Retries: 0`): still a give-up, counted
 * as one delivery, and a negative count is refused.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp } from "./_app.ts";
import { failedRequest, QSTASH } from "./_signing.ts";

const job = { intentId: "pi_0002", kind: "settle" } as const;

/** A signed failure callback for `job`, `retried` as given. */
async function failed(retried: number): Promise<RequestInit> {
  const body = JSON.stringify({
    status: 503,
    retried,
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
  const { app, store } = await makeApp({
    intents: [{
      id: "pi_0002",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
    }],
  });
  const res = await app.request("/v1/qstash/failed", await failed(0));
  assert.equal(res.status, 200, await res.clone().text());
  const answer = await res.json();
  assert.equal(answer.outcome, "poison");
  assert.equal(answer.delivery, 1);
  assert.equal(answer.reason, "the queue gave up after 1 delivery");
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  assert.equal((await store.getDeadLetter("pi_0002/settle"))?.deliveries, 1);
});

Deno.test("POST /v1/qstash/failed refuses a negative retried, resolving nothing", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0002", state: "authorized", hold: "pending" }],
  });
  const res = await app.request("/v1/qstash/failed", await failed(-1));
  assert.equal(res.status >= 400 && res.status < 500, true, String(res.status));
  assert.match(await res.text(), /'retried' must be an integer >= 0/);
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
});
