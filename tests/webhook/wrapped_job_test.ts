/**
 * A job sent as POST /v1/deliveries takes it, `{"job": …}`, to a route
 * that takes the job itself is refused saying so, not as a job without an
 * intent id.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, OPS, pubsubRequest } from "./_app.ts";
import { signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const wrapped = { job };
const SAYS =
  'Cannot read job as it is wrapped in {"job": …}, the body POST /v1/deliveries takes: send the job itself, such as {"intentId":"pi_0001","kind":"settle"}';

Deno.test("createApp() refuses a job wrapped in {job} on /v1/qstash, /v1/pubsub and /v1/jobs saying to send the job itself", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0001", state: "authorized", hold: "pending" }],
    deps: { enqueue: () => Promise.resolve() },
  });
  const body = JSON.stringify(wrapped);
  const qstash = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": await signQStash(body) },
  });
  assert.equal(qstash.status, 489);
  assert.equal((await qstash.json()).detail, SAYS);

  await app.request("/v1/pubsub", await pubsubRequest(wrapped, "m-1"));
  const { items } = await store.listDeadLetters();
  assert.deepEqual(
    items.map((letter) => letter.lastError),
    [SAYS, SAYS],
    "the kept letters say why",
  );
  // And name the intent of the job inside, as a job encoded twice does.
  assert.deepEqual(items.map((letter) => letter.intentId), [
    "pi_0001",
    "pi_0001",
  ]);

  const jobs = await app.request("/v1/jobs", {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${OPS}` },
  });
  assert.equal(jobs.status, 400);
  assert.equal((await jobs.json()).detail, SAYS);
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
});
