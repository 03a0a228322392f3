/**
 * A QStash message over its route's limit is hashed unread past the
 * limit; its first bytes, the route's limit of them, are all it reads, and
 * there it finds the intent its letter names, so the letter's discard is
 * refused while the payment may have no job. Its failure callback is over
 * its own limit too (it carries the message base64): there it finds the
 * message it gives up on and that message's intent, so its letter is the
 * one `/v1/qstash` kept for the message, and names the intent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, OPS } from "./_app.ts";
import {
  type App,
  authorized,
  FAILED_URL,
  failureCallback,
  job,
  post,
} from "./_oversized_qstash.ts";
import { signQStash } from "./_signing.ts";

/** QStash's failure callback for `source`, on its give-up after a 489. */
function callback(source: string, messageId: string): string {
  return failureCallback(source, messageId, { status: 489, retried: 0 });
}

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
  const res = await post(app, "/v1/qstash", source, { messageId: "msg_late" });
  assert.equal(res.status, 489, await res.clone().text());
  assert.match((await res.json()).detail, /\{"intentId":"pi_0002"/);
  assert.deepEqual(await letters(store), [
    'qstash/msg_late/unreadable "pi_0002"',
  ]);
  const refused = await discard(app, "qstash/msg_late/unreadable");
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
});

Deno.test("an oversized QStash message and its oversized failure callback keep one letter, qstash/<id>/unreadable, naming the intent; its discard is refused while the intent is authorized", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const source = job(80_048);
  const direct = await post(app, "/v1/qstash", source, {
    messageId: "msg_big",
  });
  assert.equal(direct.status, 489, await direct.clone().text());
  await direct.body?.cancel();
  const res = await post(app, "/v1/qstash/failed", callback(source, "msg_big"));
  assert.equal(res.status, 489, await res.clone().text());
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  assert.match((await res.json()).detail, /\{"intentId":"pi_0002"/);
  assert.deepEqual(await letters(store), [
    'qstash/msg_big/unreadable "pi_0002"',
  ]);
  const refused = await discard(app, "qstash/msg_big/unreadable");
  assert.equal(refused.status, 409);
  assert.match((await refused.json()).detail, /still authorized/);
});

Deno.test("an oversized failure callback of a message /v1/qstash never kept keeps its letter under the message's id, naming the intent and counting QStash's deliveries", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const body = callback(job(80_048), "msg_only_cb");
  const res = await post(app, "/v1/qstash/failed", body);
  assert.equal(res.status, 489, await res.clone().text());
  await res.body?.cancel();
  const letter = await store.getDeadLetter("qstash/msg_only_cb/unreadable");
  assert.equal(letter?.intentId, "pi_0002");
  assert.equal(letter?.deliveries, 1);
  assert.match(letter?.reason ?? "", /failure callback is \d+ bytes/);
  assert.deepEqual(await letters(store), [
    'qstash/msg_only_cb/unreadable "pi_0002"',
  ]);
  const refused = await discard(app, "qstash/msg_only_cb/unreadable");
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
});

Deno.test("an oversized failure callback never writes a letter of its message's id over one that names an intent, nor takes an id from inside the message's headers", async () => {
  const { app, store } = await makeApp({
    intents: [authorized, { ...authorized, id: "pi_0003" }],
  });
  // The letter /v1/qstash kept for msg_victim names pi_0003.
  const victim = job(80_048).replace("pi_0002", "pi_0003");
  const direct = await post(app, "/v1/qstash", victim, {
    messageId: "msg_victim",
  });
  assert.equal(direct.status, 489);
  await direct.body?.cancel();
  const before = await store.getDeadLetter("qstash/msg_victim/unreadable");
  assert.equal(before?.intentId, "pi_0003");
  // A callback that says it gives up on msg_victim with a job of pi_0002
  // (not QStash's to make, but signed): the letter stays as it was.
  const other = await post(
    app,
    "/v1/qstash/failed",
    callback(job(80_048), "msg_victim"),
  );
  assert.equal(other.status, 489);
  await other.body?.cancel();
  assert.deepEqual(
    await store.getDeadLetter("qstash/msg_victim/unreadable"),
    before,
  );
  // The message's headers name msg_victim, nested; QStash's own field comes
  // after the message's body, past the first bytes: named by its hash.
  const nested = JSON.stringify({
    status: 489,
    retried: 0,
    sourceHeader: { sourceMessageId: "msg_victim" },
    note: '"sourceMessageId":"msg_victim"',
    sourceBody: btoa(job(80_048)),
    sourceMessageId: "msg_late_id",
  });
  const res = await post(app, "/v1/qstash/failed", nested);
  assert.equal(res.status, 489);
  await res.body?.cancel();
  assert.deepEqual(
    await store.getDeadLetter("qstash/msg_victim/unreadable"),
    before,
  );
  const all = await letters(store);
  assert.equal(all.length, 2, `${all}`);
  assert.match(
    all.join("\n"),
    /^qstash\/sha256-[0-9a-f]{32}\/unreadable "pi_0002"$/m,
  );
});

Deno.test("an oversized failure callback whose first bytes name its message but no intent keeps the letter /v1/qstash kept as it is, or one of its own bytes where there is none", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  // The intent comes after the first 64 KiB of the message: neither route
  // sees it.
  const source = lateJob(90_000, 70_000);
  const direct = await post(app, "/v1/qstash", source, {
    messageId: "msg_blind",
  });
  assert.equal(direct.status, 489);
  await direct.body?.cancel();
  const before = await store.getDeadLetter("qstash/msg_blind/unreadable");
  assert.equal(before?.intentId, "");
  const res = await post(
    app,
    "/v1/qstash/failed",
    callback(source, "msg_blind"),
  );
  assert.equal(res.status, 489);
  assert.match((await res.json()).detail, /name its message msg_blind\./);
  assert.deepEqual(
    await store.getDeadLetter("qstash/msg_blind/unreadable"),
    before,
  );
  assert.deepEqual(await letters(store), ['qstash/msg_blind/unreadable ""']);
  // No letter of the message's id: one of the callback's own bytes, not
  // one a late copy of the message would write over.
  const alone = await post(
    app,
    "/v1/qstash/failed",
    callback(source, "msg_blind_2"),
  );
  assert.equal(alone.status, 489);
  await alone.body?.cancel();
  assert.equal(
    await store.getDeadLetter("qstash/msg_blind_2/unreadable"),
    null,
  );
  assert.equal((await letters(store)).length, 2);
});

Deno.test("an oversized failure callback whose token signs another body is refused 401 once hashed, and writes nothing", async () => {
  const { app, writes } = await makeApp({ intents: [authorized] });
  const body = callback(job(80_048), "msg_forged_cb");
  const res = await app.request("/v1/qstash/failed", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body + " ", { url: FAILED_URL }),
      "content-length": String(body.length),
    },
  });
  assert.equal(res.status, 401);
  await res.body?.cancel();
  assert.equal(writes(), 0);
});

Deno.test("sent chunked, an oversized QStash message and its failure callback name the message and intent just the same", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const source = lateJob(80_048, 30_000);
  const direct = await post(app, "/v1/qstash", source, {
    messageId: "msg_chunked",
    framing: "chunked",
  });
  assert.equal(direct.status, 489, await direct.clone().text());
  await direct.body?.cancel();
  const res = await post(
    app,
    "/v1/qstash/failed",
    callback(source, "msg_chunked_cb"),
    { framing: "chunked" },
  );
  assert.equal(res.status, 489, await res.clone().text());
  await res.body?.cancel();
  assert.deepEqual((await letters(store)).sort(), [
    'qstash/msg_chunked/unreadable "pi_0002"',
    'qstash/msg_chunked_cb/unreadable "pi_0002"',
  ]);
});

Deno.test("an oversized failure callback whose message's letter cannot be read answers 503 and writes nothing, so QStash calls again", async () => {
  const lines: string[] = [];
  const { app, store, writes } = await makeApp({
    intents: [authorized],
    deps: { log: (line: string) => lines.push(line) },
  });
  store.getDeadLetter = () => Promise.reject(new Error("kv: connection reset"));
  const res = await post(
    app,
    "/v1/qstash/failed",
    callback(job(80_048), "msg_store_down"),
  );
  assert.equal(res.status, 503);
  assert.match((await res.json()).detail, /QStash will call again/);
  assert.equal(writes(), 0);
  assert.match(
    lines.join("\n"),
    /qstash\/msg_store_down\/unreadable failure callback over the limit, and the read of its letter failed: .*connection reset/,
  );
});

/** The letters' ids, intents and deliveries. */
async function lettersIn(store: {
  listDeadLetters: (o: { limit: number }) => Promise<{
    items: readonly { jobId: string; intentId: string; deliveries: number }[];
  }>;
}): Promise<string[]> {
  return (await store.listDeadLetters({ limit: 100 })).items.map((l) =>
    `${l.jobId} ${JSON.stringify(l.intentId)} ${l.deliveries}`
  );
}

Deno.test("an oversized failure callback reads QStash's fields as QStash spells them: the misspelt sourceMessasgeId names the message, retried counts deliveries, a null field is read past, a whole sourceBody names the intent", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  // The misspelt id, retried 2 (3 deliveries), a null before them.
  const misspelt = JSON.stringify({
    status: 489,
    header: null,
    retried: 2,
    sourceMessasgeId: "msg_misspelt",
    sourceBody: btoa(job(80_048)),
  });
  const first = await post(app, "/v1/qstash/failed", misspelt);
  assert.equal(first.status, 489, await first.clone().text());
  await first.body?.cancel();
  // A message within the limit, whole in the callback's first bytes: the
  // callback is over its limit for a field after it.
  const whole = JSON.stringify({
    status: 489,
    retried: 0,
    sourceMessageId: "msg_whole",
    sourceBody: btoa(job(1_000)),
    trailer: "z".repeat(120_000),
  });
  const second = await post(app, "/v1/qstash/failed", whole);
  assert.equal(second.status, 489, await second.clone().text());
  await second.body?.cancel();
  assert.deepEqual((await lettersIn(store)).sort(), [
    'qstash/msg_misspelt/unreadable "pi_0002" 3',
    'qstash/msg_whole/unreadable "pi_0002" 1',
  ]);
});

Deno.test("an oversized failure callback whose first bytes end inside sourceBody, past a long field and on a length base64 cannot end on, still names the intent", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  // The route's limit with the default MAX_BODY_BYTES: the callback's first
  // bytes, all it reads.
  const limit = Math.ceil(64 * 1024 / 3) * 4 + 16 * 1024;
  const source = btoa(job(80_048));
  let body = "";
  for (let pad = 20_000;; pad++) {
    const before = JSON.stringify({
      status: 489,
      retried: 0,
      sourceMessageId: "msg_mod4",
      sourceHeader: { "X-Pad": ["p".repeat(pad)] },
    }).slice(0, -1) + ',"sourceBody":"';
    // Cut one character past a whole quantum, well short of the message's
    // first MAX_BODY_BYTES.
    if ((limit - before.length) % 4 === 1) {
      body = `${before}${source}"}`;
      break;
    }
  }
  const res = await post(app, "/v1/qstash/failed", body);
  assert.equal(res.status, 489, await res.clone().text());
  await res.body?.cancel();
  assert.deepEqual(await letters(store), [
    'qstash/msg_mod4/unreadable "pi_0002"',
  ]);
});

Deno.test("an oversized failure callback reads no more of its message than /v1/qstash does, its first MAX_BODY_BYTES: an intent whose id ends past them is named by neither, one whose id ends on the last byte by both", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  // lateJob's `"intentId":"pi_0002"` ends on byte `before + 30`.
  for (const [before, named] of [[65_506, ""], [65_505, "pi_0002"]] as const) {
    const source = lateJob(90_000, before);
    assert.equal(source.indexOf('"pi_0002"') + 8, before + 30);
    const id = `msg_edge_${before}`;
    const direct = await post(app, "/v1/qstash", source, { messageId: id });
    assert.equal(direct.status, 489);
    await direct.body?.cancel();
    const cb = await post(app, "/v1/qstash/failed", callback(source, id));
    assert.equal(cb.status, 489);
    await cb.body?.cancel();
    const alone = `${id}_cb`;
    const only = await post(app, "/v1/qstash/failed", callback(source, alone));
    assert.equal(only.status, 489);
    await only.body?.cancel();
    assert.equal(
      (await store.getDeadLetter(`qstash/${id}/unreadable`))?.intentId,
      named,
      id,
    );
    assert.equal(
      (await store.getDeadLetter(`qstash/${alone}/unreadable`))?.intentId,
      named === "" ? undefined : named,
      alone,
    );
  }
});
