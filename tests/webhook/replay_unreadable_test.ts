/**
 * A signed QStash message that is not a job is kept as a dead letter
 * once: its replay, whatever unsigned headers it carries, is a 401 that
 * keeps nothing more.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp } from "./_app.ts";
import { signQStash } from "./_signing.ts";

const MSG = "msg_26hZCxZCuWyyTWPmSVBrNCtiJGNsULZ";

Deno.test("POST /v1/qstash refuses a replay of a signed unreadable message (401), under another message id and retry count, and keeps no second letter", async () => {
  const { app, store } = await makeApp();
  const raw = '{"intentId":"pi_0002","kind":"Settle"}';
  const signature = await signQStash(raw);
  const send = (id: string, retried: string) =>
    app.request("/v1/qstash", {
      method: "POST",
      body: raw,
      headers: {
        "content-type": "application/json",
        "upstash-retried": retried,
        "upstash-message-id": id,
        "upstash-signature": signature,
      },
    });
  const first = await send(MSG, "0");
  assert.equal(first.status, 489);
  await first.body?.cancel();
  const letter = await store.getDeadLetter(`qstash/${MSG}/unreadable`);
  assert.ok(letter);
  for (const [id, retried] of [[MSG, "0"], ["msg_another", "7"]] as const) {
    const replay = await send(id, retried);
    assert.equal(replay.status, 401, `${id}, retried ${retried}`);
    assert.match((await replay.json()).detail, /already delivered/);
  }
  assert.equal(
    await store.getDeadLetter("qstash/msg_another/unreadable"),
    null,
  );
  assert.deepEqual(
    await store.getDeadLetter(`qstash/${MSG}/unreadable`),
    letter,
  );
});
