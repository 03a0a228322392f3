/**
 * What the late-copy tests share: an app whose intent `pi_0002` is
 * authorized, with every queue's route, and the requests each queue sends
 * (QStash's delivery and failure callback, a Pub/Sub push and its
 * dead-letter push), signed as that queue signs them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ScriptedSender, type Store } from "../../mod.ts";
import { type AppDeps, createApp } from "../../webhook/app.ts";
import {
  DEAD_LETTER_AUDIENCE,
  deadLetterRequest,
  SECRET,
  theGoogle,
} from "./_app.ts";
import {
  failedRequest,
  PUBSUB,
  QSTASH,
  signHmac,
  signQStash,
} from "./_signing.ts";

/** The dead-letter route's OIDC audience. */
export { DEAD_LETTER_AUDIENCE };

/** The job every request carries. */
export const job = { intentId: "pi_0002", kind: "settle" } as const;

/** Past the give-up's lease: `leaseMs` + `clockSkewMs` (defaults), and a second. */
export const LATER_MS = 30_000 + 5_000 + 1_000;

/**
 * Puts `pi_0002` authorized on `store`; an app on it whose send is `0xabc`,
 * its receipt pending, with `deps` (a `log`) over the test's own.
 */
export async function authorizedApp(
  store: Store,
  deps: Partial<AppDeps> = {},
) {
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000 };
  const sender = new ScriptedSender({
    pi_0002: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
  });
  const g = await theGoogle();
  const app = createApp({
    store,
    sender,
    policy: { maxDeliveries: 3 },
    now: () => clock.now,
    random: () => 0,
    qstash: QSTASH,
    webhookSecret: SECRET,
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
    ...deps,
  });
  return { app, clock, sender, store };
}

/**
 * Sends `init` on `POST /v1/deliveries` and holds that it was taken as a
 * late copy of a message its queue gave up on: 200, nothing sent, and
 * `pi_0002` still authorized.
 */
export async function assertLateCopy(
  { app, sender, store }: Awaited<ReturnType<typeof authorizedApp>>,
  init: RequestInit,
): Promise<void> {
  const late = await app.request("/v1/deliveries", init);
  assert.equal(late.status, 200);
  assert.equal(
    (await late.json()).reason,
    "the queue gave up on this message before: a late copy, nothing sent",
  );
  assert.equal(sends(sender), 0);
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
}

/** How many sends `sender` was asked for. */
export function sends(sender: ScriptedSender): number {
  return sender.calls.filter((call) => call.method === "send").length;
}

/** QStash's delivery of the job as message `messageId`, `retried` times before. */
export async function qstash(messageId: string, retried: string) {
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

/** QStash's failure callback for message `sourceMessageId`, its id under `key`. */
export async function qstashFailed(
  sourceMessageId: string,
  key = "sourceMessageId",
) {
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
  return await failedRequest(body);
}

/**
 * A push of the job through `subscription` (the jobs subscription by
 * default), with Google's token; without `deliveryAttempt`, as a
 * subscription with no dead-letter policy pushes.
 */
export async function pubsubPush(
  messageId: string,
  publishTime: string,
  deliveryAttempt: number | undefined,
  subscription = "projects/p/subscriptions/relayer",
) {
  const g = await theGoogle();
  return {
    method: "POST",
    body: JSON.stringify({
      message: { data: btoa(JSON.stringify(job)), messageId, publishTime },
      subscription,
      deliveryAttempt,
    }),
    headers: { authorization: `Bearer ${await g.token()}` },
  };
}

/**
 * The dead-letter topic's push of the job's message `2070443601311540`
 * (published 11:00:00.123, given up after 5 deliveries through
 * `subscription` of `project`), with Google's token for the dead-letter
 * route.
 */
export function deadLetterPush(
  subscription = "relayer",
  project = "p",
): Promise<RequestInit> {
  return deadLetterRequest(job, {
    messageId: "dead-letter-copy-1",
    deliveryCount: "5",
    subscription,
    project,
  });
}

/** A bridge's request on the generic route, signed at `nowMs`. */
export function generic(body: unknown, nowMs: number): RequestInit {
  const text = JSON.stringify(body);
  return {
    method: "POST",
    body: text,
    headers: {
      "content-type": "application/json",
      "x-signature": signHmac(SECRET, text, Math.floor(nowMs / 1000)),
    },
  };
}
