/**
 * QStash's failure callback for a message that is not a job: kept as the
 * letter `/v1/qstash` would have kept.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp } from "./_app.ts";
import { failedRequest, signQStash } from "./_signing.ts";

const MSG = "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ";

Deno.test("POST /v1/qstash/failed keeps a sourceBody that is base64 of non-UTF-8 as its message's letter (489); its replay is a 401 that changes nothing; a job whose 'retried' is malformed is still given up, and a callback without its message keeps nothing", async () => {
  const { app, store, writes } = await makeApp({
    intents: [{ id: "pi_0002", state: "authorized", hold: "pending" }],
  });
  const body = JSON.stringify({
    retried: 3,
    sourceMessageId: MSG,
    sourceBody: btoa("\xff\xfe{"),
  });
  const init = await failedRequest(body);
  const res = await app.request("/v1/qstash/failed", { ...init });
  assert.equal(res.status, 489);
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  const letter = await store.getDeadLetter(`qstash/${MSG}/unreadable`);
  assert.equal(letter?.deliveries, 4);
  assert.match(letter?.reason ?? "", /not base64 of UTF-8/);
  const replay = await app.request("/v1/qstash/failed", { ...init });
  assert.equal(replay.status, 401);
  assert.deepEqual(
    await store.getDeadLetter(`qstash/${MSG}/unreadable`),
    letter,
  );
  // A job, 'retried' malformed: still QStash's give-up, resolved with the
  // store's count (none here: 1), never refused (a 489 would strand it).
  const bad = JSON.stringify({
    retried: "3",
    sourceMessageId: MSG,
    sourceBody: btoa(JSON.stringify({ intentId: "pi_0002", kind: "settle" })),
  });
  const r3 = await app.request("/v1/qstash/failed", await failedRequest(bad));
  assert.equal(r3.status, 200, await r3.clone().text());
  assert.equal((await r3.json()).reason, "the queue gave up after 1 delivery");
  const given = await store.getDeadLetter("pi_0002/settle");
  assert.equal(given?.resolution, "job dropped, intent still authorized");
  const after = writes();
  // No sourceBody: 489, nothing written.
  const none = JSON.stringify({ retried: 3, sourceMessageId: MSG });
  const r4 = await app.request("/v1/qstash/failed", await failedRequest(none));
  assert.equal(r4.status, 489);
  assert.equal(writes(), after);
});

Deno.test("POST /v1/qstash/failed writes the letter POST /v1/qstash kept for the same unreadable message again as it was", async () => {
  const { app, store } = await makeApp();
  const raw = '{"intentId":"pi_0002","kind":"Settle"}';
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body: raw,
    headers: {
      "content-type": "application/json",
      "upstash-retried": "0",
      "upstash-message-id": MSG,
      "upstash-signature": await signQStash(raw),
    },
  });
  assert.equal(res.status, 489);
  const first = await store.getDeadLetter(`qstash/${MSG}/unreadable`);
  const cb = await app.request(
    "/v1/qstash/failed",
    await failedRequest(
      JSON.stringify({
        retried: 0,
        sourceMessageId: MSG,
        sourceBody: btoa(raw),
      }),
    ),
  );
  assert.equal(cb.status, 489);
  const second = await store.getDeadLetter(`qstash/${MSG}/unreadable`);
  const { version: _a, ...a } = first!;
  const { version: _b, ...b } = second!;
  assert.deepEqual(b, a);
});
