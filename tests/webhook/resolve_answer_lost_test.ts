/**
 * An ops write whose answer the store lost may have landed: the route's
 * 503 must not tell the operator the store was never reached. A
 * resolution that failed a payment (its hold voided) and then lost its
 * answer said "could not reach the store: try again".
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender, type Store } from "../../mod.ts";

const OPS = "ops-token-for-answer-lost-tests";
const headers = { authorization: `Bearer ${OPS}` };

/** `store` whose `method` lands, then answers with a lost connection. */
function answerLost(store: Store, method: keyof Store): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== method) return value.bind(target);
      return async (...args: unknown[]) => {
        await value.apply(target, args);
        throw new Error("connection reset by peer");
      };
    },
  });
}

Deno.test("POST /v1/intents/:id/resolve whose write landed and lost its answer says it may have landed, not that the store was unreachable", async () => {
  const memory = new MemoryStore();
  const { version } = await memory.createIntent({
    id: "pi_1",
    state: "needs_review",
    hold: "pending",
    mayHaveSent: false,
  });
  const app = createApp({
    store: answerLost(memory, "transition"),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const res = await app.request("/v1/intents/pi_1/resolve", {
    method: "POST",
    headers,
    body: JSON.stringify({ to: "failed", version }),
  });
  const body = await res.json();
  assert.equal(res.status, 503, JSON.stringify(body));
  assert.equal(body.type, "urn:relayer:problem:store-failed");
  // It landed: the payment failed, its hold voided.
  const intent = await memory.getIntent("pi_1");
  assert.equal(intent?.state, "failed");
  assert.equal(intent?.hold, "voided");
  assert.doesNotMatch(body.detail, /could not reach the store/);
  assert.match(body.detail, /may have landed/);
  assert.match(body.detail, /GET \/v1\/intents\/pi_1/);
});

Deno.test("POST /v1/intents and DELETE /v1/dead-letters whose write landed and lost its answer say it may have landed", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({ id: "pi_2", state: "failed", hold: "voided" });
  await memory.putDeadLetter({
    jobId: "pi_2/settle",
    intentId: "pi_2",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "nothing was sent, so the intent failed",
    lastError: "send: refused",
    poisonedAt: 0,
  });
  const create = createApp({
    store: answerLost(memory, "createIntent"),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const created = await create.request("/v1/intents", {
    method: "POST",
    headers,
    body: '{"id":"pi_3","state":"authorized"}',
  });
  assert.equal(created.status, 503);
  assert.equal((await memory.getIntent("pi_3"))?.state, "authorized");
  assert.match((await created.json()).detail, /may have landed/);
  const discard = createApp({
    store: answerLost(memory, "redrive"),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const discarded = await discard.request("/v1/dead-letters/pi_2/settle", {
    method: "DELETE",
    headers,
  });
  assert.equal(discarded.status, 503);
  assert.equal(await memory.getDeadLetter("pi_2/settle"), null);
  assert.match((await discarded.json()).detail, /may have landed/);
});
