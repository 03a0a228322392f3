/**
 * Pub/Sub pushes at the envelope routes' body limit. Pub/Sub redelivers
 * any push not answered 2xx until its retention ends (7 days by default,
 * up to 31), so a dead-letter copy refused for its size (413) never
 * resolves its job.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { makeApp, theGoogle } from "./_app.ts";
import { PUBSUB } from "./_signing.ts";

const DEAD_LETTER_AUDIENCE =
  "https://relayer.example.test/v1/pubsub/dead-letter";

/** What the envelope routes take with the default limit (64 KiB). */
const ENVELOPE_BYTES = Math.ceil(65_536 / 3) * 4 + 16 * 1024;

const settling: NewIntent = {
  id: "pi_0002",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
};

async function withBothRoutes(
  intents: NewIntent[],
  deps: Record<string, unknown> = {},
) {
  const g = await theGoogle();
  return await makeApp({
    intents,
    deps: {
      pubsubDeadLetter: {
        audience: DEAD_LETTER_AUDIENCE,
        jwks: g.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
      ...deps,
    },
  });
}

/** A push as Pub/Sub makes it (its attributes first), `note` padding the job. */
function push(
  note: string,
  options: {
    attributes?: Record<string, string>;
    subscription?: string;
    messageId?: string;
  } = {},
): string {
  const data = btoa(
    JSON.stringify({ intentId: "pi_0002", kind: "settle", note }),
  );
  const messageId = options.messageId ?? "17000000000001";
  return JSON.stringify({
    message: {
      attributes: options.attributes ?? {},
      data,
      messageId,
      message_id: messageId,
      publishTime: "2026-11-30T12:00:00.000Z",
      publish_time: "2026-11-30T12:00:00.000Z",
    },
    subscription: options.subscription ??
      "projects/my-project/subscriptions/relayer-jobs",
    deliveryAttempt: 1,
  });
}

/** The dead-letter copy Pub/Sub forwards of `push(note)`. */
function deadLetterCopy(note: string): string {
  return push(note, {
    attributes: {
      CloudPubSubDeadLetterSourceDeliveryCount: "5",
      CloudPubSubDeadLetterSourceSubscription: "relayer-jobs",
      CloudPubSubDeadLetterSourceSubscriptionProject: "my-project",
      CloudPubSubDeadLetterSourceTopicPublishTime: "2026-11-30T12:00:00.000Z",
    },
    subscription: "projects/my-project/subscriptions/relayer-jobs-dead-letter",
    messageId: "17000000000999",
  });
}

const bytes = (text: string) => new TextEncoder().encode(text).byteLength;

async function pushed(
  app: {
    request: (path: string, init: RequestInit) => Response | Promise<Response>;
  },
  path: string,
  body: string,
  audience: string,
  framing: "length" | "chunked" = "length",
): Promise<Response> {
  const g = await theGoogle();
  const encoded = new TextEncoder().encode(body);
  return await app.request(path, {
    method: "POST",
    body: framing === "length" ? body : new ReadableStream<Uint8Array>({
      start(controller) {
        // In chunks of 16 KiB, as a socket hands them over.
        for (let at = 0; at < encoded.length; at += 16_384) {
          controller.enqueue(encoded.subarray(at, at + 16_384));
        }
        controller.close();
      },
    }),
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${await g.token({ aud: audience })}`,
      ...(framing === "length"
        ? { "content-length": String(encoded.byteLength) }
        : { "transfer-encoding": "chunked" }),
    },
  });
}

Deno.test("POST /v1/pubsub/dead-letter takes the dead-letter copy of any push /v1/pubsub read: the attributes Pub/Sub adds fit", async () => {
  const { app, store } = await withBothRoutes([settling]);
  // A push just under the limit of /v1/pubsub.
  let note = "";
  note = "x".repeat(
    Math.floor((ENVELOPE_BYTES - bytes(push(""))) * 3 / 4) - 8,
  );
  while (bytes(push(note)) > ENVELOPE_BYTES) note = note.slice(1);
  assert.ok(ENVELOPE_BYTES - bytes(push(note)) < 16);
  const direct = await pushed(app, "/v1/pubsub", push(note), PUBSUB.audience);
  assert.notEqual(direct.status, 413);
  await direct.body?.cancel();
  // Pub/Sub gives up: the copy it forwards carries four attributes more.
  const copy = deadLetterCopy(note);
  assert.ok(bytes(copy) > ENVELOPE_BYTES, `${bytes(copy)}`);
  const res = await pushed(
    app,
    "/v1/pubsub/dead-letter",
    copy,
    DEAD_LETTER_AUDIENCE,
  );
  assert.equal(res.status, 204, await res.clone().text());
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
  assert.equal(
    (await store.getDeadLetter("pi_0002/settle"))?.cause,
    "exhausted",
  );
});
