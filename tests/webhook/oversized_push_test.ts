/**
 * Pub/Sub pushes at and over the envelope routes' body limit. Pub/Sub
 * redelivers any push not answered 2xx until its retention ends (7 days by
 * default, up to 31), so a push refused for its size (413) is refused
 * again for days, and a dead-letter copy refused so never resolves its job.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import {
  bodyNeverSent,
  chunkedBody,
  DEAD_LETTER_AUDIENCE,
  endlessBody,
  NOW,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";
import { PUBSUB } from "./_signing.ts";

/** What the envelope routes take with the default limit (64 KiB). */
const ENVELOPE_BYTES = Math.ceil(65_536 / 3) * 4 + 16 * 1024;

const settling: NewIntent = {
  id: "pi_0002",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
};

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
  return await app.request(path, {
    method: "POST",
    body: framing === "length" ? body : chunkedBody(body),
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${await g.token({ aud: audience })}`,
      ...(framing === "length"
        ? {
          "content-length": String(new TextEncoder().encode(body).byteLength),
        }
        : { "transfer-encoding": "chunked" }),
    },
  });
}

Deno.test("POST /v1/pubsub/dead-letter takes the dead-letter copy of any push /v1/pubsub read: the attributes Pub/Sub adds fit", async () => {
  const { app, store } = await withDeadLetterRoute([settling]);
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

Deno.test("an authenticated Pub/Sub push over the limit is acked (204), logged and kept as a dead letter, on either push route and however it is framed: a 413 would be redelivered for days, unseen", async () => {
  const lines: string[] = [];
  const { app, store } = await withDeadLetterRoute([settling], {
    log: (line: string) => lines.push(line),
  });
  const big = "x".repeat(ENVELOPE_BYTES);
  for (
    const [path, body, audience] of [
      ["/v1/pubsub", push(big), PUBSUB.audience],
      ["/v1/pubsub/dead-letter", deadLetterCopy(big), DEAD_LETTER_AUDIENCE],
    ] as const
  ) {
    const named = new Set<string>();
    for (const framing of ["length", "chunked"] as const) {
      lines.length = 0;
      const res = await pushed(app, path, body, audience, framing);
      assert.equal(res.status, 204, `${path} ${framing}: ${await res.text()}`);
      const logged = lines.join("\n").match(
        /pubsub\/sha256-[0-9a-f]{32}\/unreadable/,
      );
      assert.ok(
        logged,
        `${path} ${framing}: not logged (${lines.join(" | ")})`,
      );
      const letter = await store.getDeadLetter(logged[0]);
      assert.ok(letter, `${path} ${framing}: no dead letter ${logged[0]}`);
      assert.match(letter.reason, /^unreadable Pub\/Sub message: /);
      assert.match(letter.reason, /over the limit/);
      assert.equal(letter.poisonedAt, NOW);
      named.add(letter.jobId);
    }
    // Named by its bytes, however framed: a redelivery keeps one letter.
    assert.equal(named.size, 1, path);
  }
  // Nothing was read as a job.
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});

Deno.test("an unauthenticated Pub/Sub push over the limit is refused before its body is read, and keeps nothing", async () => {
  const { app, writes } = await withDeadLetterRoute([settling]);
  for (const path of ["/v1/pubsub", "/v1/pubsub/dead-letter"]) {
    const never = bodyNeverSent();
    const res = await app.request(path, {
      method: "POST",
      body: never.body,
      headers: {
        "content-length": String(10 * ENVELOPE_BYTES),
        authorization: "Bearer not-a-token",
      },
    });
    assert.ok(res.status === 401 || res.status === 413, `${res.status}`);
    await res.body?.cancel();
    assert.equal(never.pulled, false, path);
  }
  assert.equal(writes(), 0);
});

Deno.test("an authenticated Pub/Sub push that never ends is read to 16 MiB at most, then acked and kept as a dead letter", async () => {
  const lines: string[] = [];
  const { app, store } = await withDeadLetterRoute([settling], {
    log: (line: string) => lines.push(line),
  });
  const g = await theGoogle();
  const endless = endlessBody(64 * 1024);
  const res = await app.request("/v1/pubsub", {
    method: "POST",
    body: endless.body,
    headers: {
      authorization: `Bearer ${await g.token()}`,
      "transfer-encoding": "chunked",
    },
  });
  assert.equal(res.status, 204);
  assert.ok(endless.cancelled);
  assert.ok(
    endless.sent <= 16 * 1024 * 1024 + 64 * 1024,
    `${endless.sent}`,
  );
  const logged = lines.join("\n").match(
    /pubsub\/sha256-[0-9a-f]{32}\/unreadable/,
  );
  assert.ok(logged, lines.join(" | "));
  assert.match(
    (await store.getDeadLetter(logged[0]))?.reason ?? "",
    /more than 16777216 bytes, over the limit/,
  );
});

Deno.test("a push past the 16 MiB read is named by its first 16 MiB, however the socket splits it: the same push keeps one letter", async () => {
  const { app, store } = await withDeadLetterRoute([settling]);
  const g = await theGoogle();
  const size = 16 * 1024 * 1024 + 100_000;
  const bytes = new Uint8Array(size).fill(0x61);
  for (const chunk of [1 << 20, 1_000_000, 65_536 + 3]) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let at = 0; at < size; at += chunk) {
            controller.enqueue(bytes.subarray(at, at + chunk));
          }
          controller.close();
        },
      }),
      headers: {
        authorization: `Bearer ${await g.token({ aud: PUBSUB.audience })}`,
        "content-length": String(size),
      },
    });
    assert.equal(res.status, 204, `${chunk}`);
    await res.body?.cancel();
  }
  const letters = (await store.listDeadLetters({ limit: 10 })).items;
  assert.deepEqual(
    letters.map((l) => l.reason.match(/more than \d+ bytes/)?.[0]),
    ["more than 16777216 bytes"],
  );
});

Deno.test("an oversized Pub/Sub push's dead letter names its job's intent, read from the first bytes of its data, on either push route", async () => {
  const { app, store } = await withDeadLetterRoute([settling]);
  const big = "x".repeat(ENVELOPE_BYTES);
  for (
    const [path, body, audience] of [
      ["/v1/pubsub", push(big), PUBSUB.audience],
      ["/v1/pubsub/dead-letter", deadLetterCopy(big), DEAD_LETTER_AUDIENCE],
    ] as const
  ) {
    const res = await pushed(app, path, body, audience);
    assert.equal(res.status, 204, `${path}: ${await res.text()}`);
    const { items } = await store.listDeadLetters();
    const found = items.find((l) => l.jobId.startsWith("pubsub/sha256-"));
    assert.ok(found, `${path}: no letter`);
    const letter = (await store.getDeadLetter(found.jobId))!;
    assert.equal(letter.intentId, "pi_0002", path);
    assert.match(
      letter.reason,
      /Publish the job alone, \{"intentId":"pi_0002"/,
    );
    await store.redrive(letter.jobId, letter.version);
  }
});
