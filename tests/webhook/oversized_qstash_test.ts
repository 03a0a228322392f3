/**
 * QStash messages over their route's body limit. QStash retries anything
 * but 2xx until its retries run out, then calls the failure callback,
 * which carries the message base64: a message refused 413 for its size
 * spent every retry, and one a little larger was refused at its give-up
 * too, its intent stranded with no letter and no log line. An
 * authenticated one is now kept as a dead letter and answered 489 with
 * `Upstash-NonRetryable-Error: true`, which QStash's docs say stops its
 * retries; a forged one is refused before its body is read.
 *
 * @module
 */

import assert from "node:assert/strict";
import { bodyNeverSent, endlessBody, makeApp, NOW, OPS } from "./_app.ts";
import {
  authorized,
  FAILED_URL,
  failureCallback,
  job,
  post,
} from "./_oversized_qstash.ts";
import { QSTASH, signQStash } from "./_signing.ts";

/** The direct route's limit (MAX_BODY_BYTES), and the callback's. */
const MAX_BODY_BYTES = 65_536;
const ENVELOPE_BYTES = Math.ceil(MAX_BODY_BYTES / 3) * 4 + 16 * 1024;

/** QStash's failure callback for `source`, as QStash makes it once its retries of a 413 ran out. */
function callback(source: string, messageId: string): string {
  return failureCallback(source, messageId, { status: 413, retried: 3 });
}

const bytes = (text: string) => new TextEncoder().encode(text).byteLength;

Deno.test("an authenticated QStash message over /v1/qstash's limit is kept as the dead letter qstash/<Upstash-Message-Id>/unreadable, logged, and answered 489 with Upstash-NonRetryable-Error, however it is framed", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [authorized],
    deps: { log: (line: string) => lines.push(line) },
  });
  for (const size of [70_048, 80_048, 200_000]) {
    for (const framing of ["length", "chunked"] as const) {
      lines.length = 0;
      const id = `msg_${size}_${framing}`;
      const res = await post(app, "/v1/qstash", job(size), {
        framing,
        messageId: id,
        retried: 2,
      });
      const name = `${size} ${framing}`;
      assert.equal(res.status, 489, `${name}: ${await res.clone().text()}`);
      assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
      assert.equal((await res.json()).type, "urn:relayer:problem:too-large");
      const letter = await store.getDeadLetter(`qstash/${id}/unreadable`);
      assert.ok(letter, `${name}: no dead letter`);
      assert.match(letter.reason, /^unreadable QStash message: /);
      assert.match(letter.reason, new RegExp(`${size} bytes, over the limit`));
      assert.equal(letter.deliveries, 3);
      assert.equal(letter.poisonedAt, NOW);
      assert.match(
        lines.join("\n"),
        new RegExp(`qstash/${id}/unreadable acked and kept as a dead letter`),
        name,
      );
    }
  }
  // Nothing was read as a job.
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
});

Deno.test("QStash's failure callback over its limit is kept as a dead letter and answered 489, so a job too large for both routes is not stranded unseen", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [authorized],
    deps: { log: (line: string) => lines.push(line) },
  });
  // The review's pairs: the direct message, then the callback that gives
  // it up (QStash's, once the 489 ends its retries).
  for (const size of [70_048, 80_048]) {
    const id = `msg_pair_${size}`;
    const source = job(size);
    const direct = await post(app, "/v1/qstash", source, { messageId: id });
    assert.equal(direct.status, 489, `${size}: ${await direct.text()}`);
    const body = callback(source, id);
    const res = await post(app, "/v1/qstash/failed", body);
    assert.ok(
      res.status === 200 || res.status === 489,
      `${size} (${bytes(body)} B): ${res.status} ${await res.clone().text()}`,
    );
    await res.body?.cancel();
  }
  const letters = (await store.listDeadLetters({ limit: 100 })).items.map((
    l,
  ) => l.jobId);
  // Both direct messages kept by /v1/qstash.
  assert.ok(letters.includes("qstash/msg_pair_70048/unreadable"), `${letters}`);
  assert.ok(letters.includes("qstash/msg_pair_80048/unreadable"), `${letters}`);
  // The first callback fits its route and gives the job up; the second,
  // over the limit, names in its first bytes the message it gives up on
  // and its intent: the letter /v1/qstash kept for it stays, and no other
  // is kept (oversized_qstash_callback_test).
  assert.ok(letters.includes("pi_0002/settle"), `${letters}`);
  assert.equal(
    letters.filter((l) => /^qstash\/sha256-/.test(l)).length,
    0,
    `${letters}`,
  );
  assert.equal(letters.length, 3, `${letters}`);
  const letter = await store.getDeadLetter("qstash/msg_pair_80048/unreadable");
  assert.equal(letter?.intentId, "pi_0002");
  assert.match(letter?.reason ?? "", /body is 80048 bytes, over the limit/);
  // A repeat of the callback (QStash calls it at least once) keeps one letter.
  const again = await post(
    app,
    "/v1/qstash/failed",
    callback(job(80_048), "msg_pair_80048"),
    { framing: "chunked" },
  );
  assert.equal(again.status, 489);
  assert.equal(again.headers.get("upstash-nonretryable-error"), "true");
  await again.body?.cancel();
  assert.equal(
    (await store.listDeadLetters({ limit: 100 })).items.length,
    letters.length,
  );
});

Deno.test("a forged, unsigned, mis-addressed or expired QStash request over the limit is refused before its body is read, and keeps nothing", async () => {
  const { app, writes } = await makeApp({ intents: [authorized] });
  const nowS = Math.floor(Date.now() / 1000);
  for (const path of ["/v1/qstash", "/v1/qstash/failed"]) {
    const url = path === "/v1/qstash" ? QSTASH.url : FAILED_URL;
    const signatures: Record<string, string | undefined> = {
      none: undefined,
      garbage: "a.b.c",
      "another key": await signQStash("{}", { url, key: "sig_not_ours_0000" }),
      "another URL": await signQStash("{}", {
        url: path === "/v1/qstash" ? FAILED_URL : QSTASH.url,
      }),
      expired: await signQStash("{}", { url, nowS: nowS - 3600 }),
      "not yet": await signQStash("{}", { url, nowS: nowS + 3600 }),
      "no jti": await signQStash("{}", { url, jti: null }),
      "not Upstash": await signQStash("{}", { url, extra: { iss: "Other" } }),
    };
    for (const [name, signature] of Object.entries(signatures)) {
      const never = bodyNeverSent();
      const res = await app.request(path, {
        method: "POST",
        body: never.body,
        headers: {
          "content-length": String(10 * ENVELOPE_BYTES),
          ...(signature === undefined
            ? {}
            : { "upstash-signature": signature }),
        },
      });
      assert.ok(
        res.status === 401 || res.status === 413,
        `${path} ${name}: ${res.status}`,
      );
      await res.body?.cancel();
      assert.equal(never.pulled, false, `${path} ${name}: its body was read`);
    }
  }
  assert.equal(writes(), 0);
});

Deno.test("a QStash token of ours over a body it did not sign is refused 401 once the body is hashed, and a replay of an oversized message writes nothing", async () => {
  const { app, store, writes } = await makeApp({ intents: [authorized] });
  const big = job(90_000);
  // Signed for another body: the hash does not match.
  const other = await signQStash(job(90_001));
  for (const framing of ["length", "chunked"] as const) {
    const res = await post(app, "/v1/qstash", big, {
      framing,
      signature: other,
      messageId: "msg_forged",
    });
    assert.equal(res.status, 401, framing);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  // Signed right, then replayed: one letter, and the replay refused.
  const signature = await signQStash(big);
  const first = await post(app, "/v1/qstash", big, {
    signature,
    messageId: "msg_once",
  });
  assert.equal(first.status, 489);
  await first.body?.cancel();
  const letter = await store.getDeadLetter("qstash/msg_once/unreadable");
  assert.ok(letter);
  const before = JSON.stringify(
    (await store.listDeadLetters({ limit: 100 })).items,
  );
  const replay = await post(app, "/v1/qstash", big, {
    signature,
    messageId: "msg_replayed",
  });
  assert.equal(replay.status, 401);
  assert.match((await replay.json()).detail, /already delivered/);
  assert.equal(
    await store.getDeadLetter("qstash/msg_replayed/unreadable"),
    null,
  );
  // Its letter's write was tried, and refused by the claim: nothing changed.
  assert.equal(
    JSON.stringify((await store.listDeadLetters({ limit: 100 })).items),
    before,
  );
});

Deno.test("an authenticated QStash message that never ends is read to a bound, then refused 413 and logged, keeping nothing", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [authorized],
    deps: { log: (line: string) => lines.push(line) },
  });
  const endless = endlessBody(256 * 1024);
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body: endless.body,
    headers: {
      "upstash-signature": await signQStash("whatever"),
      "transfer-encoding": "chunked",
    },
  });
  assert.equal(res.status, 413);
  await res.body?.cancel();
  assert.ok(endless.cancelled);
  assert.ok(
    endless.sent <= 72 * 1024 * 1024 + 256 * 1024,
    `${endless.sent}`,
  );
  assert.equal(writes(), 0);
  assert.match(lines.join("\n"), /relayer POST \/v1\/qstash refused 413/);
});

Deno.test("an authenticated QStash message whose Content-Length is past the bound is refused 413 unread, and logged", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [authorized],
    deps: { log: (line: string) => lines.push(line) },
  });
  const never = bodyNeverSent();
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body: never.body,
    headers: {
      "upstash-signature": await signQStash("whatever"),
      "content-length": String(100 * 1024 * 1024),
    },
  });
  assert.equal(res.status, 413);
  assert.match((await res.json()).detail, /this one is 104857600 bytes/);
  assert.equal(never.pulled, false);
  assert.equal(writes(), 0);
  assert.match(lines.join("\n"), /relayer POST \/v1\/qstash refused 413/);
});

Deno.test("a QStash message of exactly the 72 MiB bound is kept (489), as the 413's detail says; one byte more is refused 413", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const bound = 72 * 1024 * 1024;
  for (const size of [bound, bound + 1]) {
    const body = "x".repeat(size);
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body),
        "upstash-message-id": `msg_bound_${size}`,
        "content-length": String(size),
      },
    });
    const detail = (await res.json()).detail;
    if (size === bound) {
      assert.equal(res.status, 489, detail);
      assert.ok(
        await store.getDeadLetter(`qstash/msg_bound_${size}/unreadable`),
      );
    } else {
      assert.equal(res.status, 413);
      assert.match(detail, /this one is 75497473 bytes/);
    }
  }
});

Deno.test("an oversized QStash job's dead letter names its intent, read from the body's first bytes: its discard is refused while the intent is authorized, so the payment is not left with no job and no letter", async () => {
  const { app, store } = await makeApp({ intents: [authorized] });
  const res = await post(app, "/v1/qstash", job(70_048), {
    messageId: "msg_big",
  });
  assert.equal(res.status, 489, await res.clone().text());
  const detail = (await res.json()).detail;
  assert.match(detail, /Publish the job alone, \{"intentId":"pi_0002"/);
  const letter = await store.getDeadLetter("qstash/msg_big/unreadable");
  assert.equal(letter?.intentId, "pi_0002");
  // The operator cannot discard it unseen: it names what to do.
  const discard = await app.request(
    "/v1/dead-letters/qstash/msg_big/unreadable",
    { method: "DELETE", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(discard.status, 409);
  assert.match(
    (await discard.json()).detail,
    /still authorized.*POST \/v1\/jobs/,
  );
  // A body whose first bytes name no intent id names none.
  const other = JSON.stringify({
    note: "x".repeat(70_000),
    intentId: "pi_0002",
  });
  const res2 = await post(app, "/v1/qstash", other, { messageId: "msg_big2" });
  assert.equal(res2.status, 489);
  await res2.body?.cancel();
  assert.equal(
    (await store.getDeadLetter("qstash/msg_big2/unreadable"))?.intentId,
    "",
  );
});
