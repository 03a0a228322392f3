/**
 * A QStash message over its route's limit is hashed unread past the
 * limit; its first bytes, the route's limit of them, are all it reads, and
 * there it finds the intent its letter names, so the letter's discard is
 * refused while the payment may have no job.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { makeApp, OPS } from "./_app.ts";
import { QSTASH, signQStash } from "./_signing.ts";

const FAILED_URL = `${QSTASH.url}/failed`;

const authorized: NewIntent = {
  id: "pi_0002",
  state: "authorized",
  hold: "pending",
};

/** A job of `size` bytes whose intent comes after `before` bytes of another field. */
function lateJob(size: number, before: number): string {
  const base = JSON.stringify({
    note: "x".repeat(before),
    intentId: "pi_0002",
    kind: "settle",
    tail: "",
  });
  return JSON.stringify({
    note: "x".repeat(before),
    intentId: "pi_0002",
    kind: "settle",
    tail: "y".repeat(size - base.length),
  });
}

type App = {
  request: (path: string, init: RequestInit) => Response | Promise<Response>;
};

/** A POST signed as QStash signs it, its length said. */
async function post(
  app: App,
  path: string,
  body: string,
  messageId?: string,
): Promise<Response> {
  return await app.request(path, {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "upstash-signature": await signQStash(body, {
        url: path === "/v1/qstash" ? QSTASH.url : FAILED_URL,
      }),
      ...(messageId === undefined ? {} : { "upstash-message-id": messageId }),
      "upstash-retried": "0",
      "content-length": String(new TextEncoder().encode(body).byteLength),
    },
  });
}

async function letters(store: {
  listDeadLetters: (
    o: { limit: number },
  ) => Promise<{ items: readonly { jobId: string; intentId: string }[] }>;
}): Promise<string[]> {
  return (await store.listDeadLetters({ limit: 100 })).items.map((l) =>
    `${l.jobId} ${JSON.stringify(l.intentId)}`
  );
}

async function discard(app: App, jobId: string): Promise<Response> {
  return await app.request(`/v1/dead-letters/${jobId}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${OPS}` },
  });
}

Deno.test("an oversized QStash message whose intent comes after its first 4 KiB, within the route's limit, keeps a letter naming it", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const source = lateJob(80_048, 10_000);
  assert.equal(source.indexOf('"intentId"') > 10_000, true);
  const res = await post(app, "/v1/qstash", source, "msg_late");
  assert.equal(res.status, 489, await res.clone().text());
  assert.match((await res.json()).detail, /\{"intentId":"pi_0002"/);
  assert.deepEqual(await letters(store), [
    'qstash/msg_late/unreadable "pi_0002"',
  ]);
  const refused = await discard(app, "qstash/msg_late/unreadable");
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
});
