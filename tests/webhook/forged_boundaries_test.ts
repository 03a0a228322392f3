/**
 * What a forger holding no key, but perhaps one captured delivery, may try
 * at the edges of the three signature checks, end to end through
 * `createApp`: bytes that differ from the signed ones only after a
 * normalization (a byte order mark, whitespace, Unicode, a charset, a
 * compression), JSON with keys given twice, the signature's headers sent
 * again under other names, Google tokens that name their key in other ways
 * or carry their numbers as strings, every time claim at and around the
 * 30 s of clock tolerance, and a captured delivery replayed at the edge of
 * its replay record or with its unsigned headers changed. None moves a
 * payment or spends a delivery, and every genuine delivery among them is
 * taken, but one: a copy of a QStash delivery sent ahead of QStash's own
 * with `Upstash-Retried` raised, which the token does not sign, is the
 * token's one use at that count (docs/webhook.md, what the token does not
 * sign).
 *
 * @module
 */

import assert from "node:assert/strict";
import { sha256 } from "@noble/hashes/sha2.js";
import {
  AUTHORIZED,
  DEAD_LETTER_AUDIENCE,
  deadLetterRequest,
  genericRequest,
  makeApp,
  NOW,
  SECRET,
  theGoogle,
} from "./_app.ts";
import {
  base64url,
  envelope,
  googleClaims,
  jwtPart,
  PUBSUB,
  QSTASH,
  rsaKeyPair,
  signHmac,
  signQStash,
} from "./_signing.ts";
import { SENDS, sendsOf, targetApp } from "./_forged.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const encoder = new TextEncoder();

/** Runs `fn` with the wall clock (`Date.now()` and `new Date()`) at `ms`. */
async function atWallClock<T>(
  ms: number,
  fn: () => T | Promise<T>,
): Promise<T> {
  const RealDate = globalThis.Date;
  class FixedDate extends RealDate {
    constructor(...args: unknown[]) {
      super(...((args.length === 0 ? [ms] : args) as [number]));
    }
    static override now(): number {
      return ms;
    }
  }
  globalThis.Date = FixedDate as DateConstructor;
  try {
    return await fn();
  } finally {
    globalThis.Date = RealDate;
  }
}

async function statusOf(res: Response): Promise<number> {
  await res.body?.cancel();
  return res.status;
}

async function gzip(text: string): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([text]).stream().pipeThrough(
    new CompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

Deno.test("a QStash token is good only for the bytes it signs: a byte order mark, a newline, other whitespace, another Unicode form, UTF-16 or gzip of the same JSON are 401 and write nothing; the genuine bytes then settle", async () => {
  const { app, writes, sender } = await targetApp();
  const body = JSON.stringify({ ...job, note: "caf\u00e9" });
  const token = await signQStash(body);
  const utf16 = new Uint8Array(body.length * 2);
  for (let i = 0; i < body.length; i++) {
    utf16[2 * i] = body.charCodeAt(i) & 0xff;
    utf16[2 * i + 1] = body.charCodeAt(i) >> 8;
  }
  const variants: [string, BodyInit, Record<string, string>][] = [
    ["a byte order mark before it", `\ufeff${body}`, {}],
    ["a newline after it", `${body}\n`, {}],
    ["pretty-printed", JSON.stringify(JSON.parse(body), null, 2), {}],
    ["NFD instead of NFC", body.normalize("NFD"), {}],
    ["the é as a JSON escape", body.replace("\u00e9", "\\u00e9"), {}],
    ["UTF-16LE, said so", utf16, {
      "content-type": "application/json; charset=utf-16le",
    }],
    ["gzip, said so", await gzip(body), { "content-encoding": "gzip" }],
  ];
  for (const [name, sent, headers] of variants) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body: sent,
      headers: { ...headers, "upstash-signature": token },
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  // None of them spent the token: the genuine bytes, under a header name
  // in capitals and beside a content-encoding they do not have, settle.
  const genuine = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "UPSTASH-SIGNATURE": token, "content-encoding": "gzip" },
  });
  assert.equal(await statusOf(genuine), 503, "sent, waiting for the receipt");
  assert.equal(sendsOf(sender), 1);
});

Deno.test("a generic signature is good only for the bytes it signs: the same body with a byte order mark, a newline, another Unicode form or gzipped is 401; the genuine bytes then deliver", async () => {
  const { app, writes, sender } = await targetApp();
  const body = JSON.stringify({ job, note: "caf\u00e9" });
  const signature = signHmac(SECRET, body, NOW / 1000);
  const variants: [string, BodyInit, Record<string, string>][] = [
    ["a byte order mark before it", `\ufeff${body}`, {}],
    ["a newline after it", `${body}\n`, {}],
    ["NFD instead of NFC", body.normalize("NFD"), {}],
    ["gzip, said so", await gzip(body), { "content-encoding": "gzip" }],
  ];
  for (const [name, sent, headers] of variants) {
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body: sent,
      headers: { ...headers, "x-signature": signature },
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  const genuine = await app.request("/v1/deliveries", {
    method: "POST",
    body,
    headers: { "X-Signature": signature },
  });
  assert.equal(await statusOf(genuine), 503, "sent, waiting for the receipt");
  assert.equal(sendsOf(sender), 1);
});

Deno.test("a signed body with a key given twice is read one way throughout: the last value, as JSON.parse reads it; the intent named first is untouched", async () => {
  const other = { ...AUTHORIZED, id: "pi_0002" };
  const { app, store, sender } = await makeApp({
    intents: [AUTHORIZED, other],
    scripts: { ...SENDS, pi_0002: { sends: [{ txHash: "0xdef" }] } },
  });
  const body = '{"intentId":"pi_0001","kind":"settle","intentId":"pi_0002"}';
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": await signQStash(body) },
  });
  assert.equal(res.status, 503);
  assert.equal((await res.json()).job, "pi_0002/settle");
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  assert.deepEqual(
    sender.calls.filter((call) => call.method === "send").map((call) =>
      call.intentId
    ),
    ["pi_0002"],
  );
  // The generic route's delivery number given twice: the last is the one.
  const generic = '{"job":{"intentId":"pi_0001","kind":"settle"},' +
    '"delivery":1,"delivery":3}';
  const answer = await app.request(
    "/v1/deliveries",
    await genericRequest(generic),
  );
  assert.equal((await answer.json()).delivery, 3);
});

Deno.test("a captured QStash delivery replayed with its unsigned headers changed is 401 and sends nothing: another message id, another retry count, the token under a header name in capitals", async () => {
  const { app, sender, store } = await targetApp();
  const body = JSON.stringify(job);
  const token = await signQStash(body);
  const first = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": token,
      "upstash-message-id": "msg_1",
      "upstash-retried": "0",
    },
  });
  assert.equal(await statusOf(first), 503);
  const replays: [string, Record<string, string>][] = [
    ["another message id", {
      "upstash-signature": token,
      "upstash-message-id": "msg_2",
    }],
    ["the last retry", { "upstash-signature": token, "upstash-retried": "2" }],
    ["a header name in capitals", { "Upstash-Signature": token }],
  ];
  for (const [name, headers] of replays) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers,
    });
    assert.equal(res.status, 401, name);
    assert.match((await res.json()).detail, /already delivered/, name);
  }
  assert.equal(sendsOf(sender), 1);
  assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
  assert.deepEqual((await store.listDeadLetters()).items, []);
});

Deno.test("a captured generic delivery re-spelt is the same signed request: t with leading zeros, v1 in capitals, spaces after the comma are 401 replays", async () => {
  const { app, sender } = await targetApp();
  const body = JSON.stringify({ job });
  const t = NOW / 1000;
  const signature = signHmac(SECRET, body, t);
  const v1 = signature.split("v1=")[1]!;
  assert.equal(
    await statusOf(
      await app.request("/v1/deliveries", await genericRequest(body)),
    ),
    503,
  );
  for (
    const spelt of [
      `t=000${t},v1=${v1}`,
      `t=${t},v1=${v1.toUpperCase()}`,
      `t=${t},   v1=${v1}`,
    ]
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { signature: spelt }),
    );
    assert.equal(res.status, 401, spelt);
    assert.match((await res.json()).detail, /already delivered/, spelt);
  }
  assert.equal(sendsOf(sender), 1);
});

Deno.test("Google tokens that name their key another way are 401 and write nothing: no kid, an embedded jwk, a jku or x5u to the forger's keys, two Authorization headers; a genuine token under a lower-case scheme is taken", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const google = await theGoogle();
  const googleKid = (google.jwks[0] as { kid: string }).kid;
  const pair = await rsaKeyPair();
  const forgerPublic = await crypto.subtle.exportKey("jwk", pair.publicKey);
  const claims = googleClaims(Math.floor(Date.now() / 1000));
  /** The forger's RS256 token under `header`, an object or its JSON text. */
  const forged = async (header: Record<string, unknown> | string) => {
    const head = typeof header === "string"
      ? base64url(header)
      : jwtPart({ alg: "RS256", typ: "JWT", ...header });
    const input = `${head}.${jwtPart(claims)}`;
    const mac = new Uint8Array(
      await crypto.subtle.sign(
        "RSASSA-PKCS1-v1_5",
        pair.privateKey,
        encoder.encode(input),
      ),
    );
    return `${input}.${base64url(mac)}`;
  };
  const genuine = await google.token();
  const [, genuineClaims, genuineMac] = genuine.split(".");
  const cases: [string, Headers][] = [];
  const add = (name: string, ...values: string[]) => {
    const headers = new Headers();
    for (const value of values) headers.append("authorization", value);
    cases.push([name, headers]);
  };
  add("no kid", `Bearer ${await forged({})}`);
  add(
    "Google's token with its kid left out",
    `Bearer ${
      jwtPart({ alg: "RS256", typ: "JWT" })
    }.${genuineClaims}.${genuineMac}`,
  );
  add(
    "an embedded jwk, Google's kid",
    `Bearer ${await forged({ kid: googleKid, jwk: forgerPublic })}`,
  );
  add(
    "an embedded jwk, its own kid",
    `Bearer ${await forged({ kid: "forger", jwk: forgerPublic })}`,
  );
  add(
    "a jku to the forger's keys",
    `Bearer ${await forged({
      kid: "forger",
      jku: "https://forger.example/certs",
    })}`,
  );
  add(
    "an x5u to the forger's certificate",
    `Bearer ${await forged({
      kid: googleKid,
      x5u: "https://forger.example/cert.pem",
    })}`,
  );
  for (const [first, last] of [["forger", googleKid], [googleKid, "forger"]]) {
    add(
      `kid given twice, ${last === googleKid ? "Google's" : "its own"} last`,
      `Bearer ${await forged(
        `{"alg":"RS256","typ":"JWT","kid":"${first}","kid":"${last}"}`,
      )}`,
    );
  }
  add("a genuine token twice", `Bearer ${genuine}`, `Bearer ${genuine}`);
  add(
    "a forged token beside a genuine one",
    `Bearer ${await forged({ kid: googleKid })}`,
    `Bearer ${genuine}`,
  );
  for (const [name, headers] of cases) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers,
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  const taken = await app.request("/v1/pubsub", {
    method: "POST",
    body: envelope(job, { deliveryAttempt: 1 }),
    headers: { Authorization: `bearer ${genuine}` },
  });
  assert.equal(await statusOf(taken), 503);
});

Deno.test("a Google token whose aud lists another audience beside the route's is 401 on each route it lists and writes nothing (OIDC Core 3.1.3.7): one for both Pub/Sub routes gives up no job; a list of the route's audience alone is taken", async () => {
  const google = await theGoogle();
  const { app, writes, sender } = await targetApp({
    pubsubDeadLetter: {
      audience: DEAD_LETTER_AUDIENCE,
      jwks: google.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });
  const both = await google.token({
    aud: [PUBSUB.audience, DEAD_LETTER_AUDIENCE],
  });
  const elsewhere = await google.token({
    aud: [DEAD_LETTER_AUDIENCE, "https://other.example.test/"],
  });
  const giveUp = await deadLetterRequest(job, {
    messageId: "dl-1",
    deliveryCount: "5",
  });
  for (const [name, token] of [["both", both], ["another", elsewhere]]) {
    const res = await app.request("/v1/pubsub/dead-letter", {
      ...giveUp,
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 401, `dead-letter route, ${name}`);
    await res.body?.cancel();
  }
  const pushed = await app.request("/v1/pubsub", {
    method: "POST",
    body: envelope(job, { deliveryAttempt: 1 }),
    headers: { authorization: `Bearer ${both}` },
  });
  assert.equal(await statusOf(pushed), 401, "jobs route, both");
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  // The route's own audience, alone in a list, names no other route.
  const alone = await google.token({ aud: [PUBSUB.audience] });
  const taken = await app.request("/v1/pubsub", {
    method: "POST",
    body: envelope(job, { deliveryAttempt: 1 }),
    headers: { authorization: `Bearer ${alone}` },
  });
  assert.equal(await statusOf(taken), 503);
  assert.equal(sendsOf(sender), 1);
});

Deno.test("a signed unreadable QStash message sent under another message's Upstash-Message-Id, which the token does not sign, leaves that message's letter naming its intent as it was, and is kept under its own bytes' hash; its replay is 401", async () => {
  const { app, store } = await makeApp({ intents: [AUTHORIZED] });
  const post = async (body: string, signature: string) =>
    await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": signature,
        "upstash-message-id": "msg_1",
      },
    });
  // QStash's message msg_1, not a job: kept, naming its intent.
  const first = JSON.stringify({ intentId: "pi_0001", kind: "refund" });
  assert.equal(await statusOf(await post(first, await signQStash(first))), 489);
  const letter = "qstash/msg_1/unreadable";
  assert.equal((await store.getDeadLetter(letter))?.intentId, "pi_0001");
  // QStash's own retry of msg_1 (a token of its own): the same letter,
  // kept again under its id, and no other.
  assert.equal(await statusOf(await post(first, await signQStash(first))), 489);
  assert.deepEqual(
    (await store.listDeadLetters({ limit: 10 })).items.map((kept) =>
      kept.jobId
    ),
    [letter],
  );
  // Another signed message, held in transit and sent under msg_1's id.
  const other = "{";
  const token = await signQStash(other);
  assert.equal(await statusOf(await post(other, token)), 489);
  const kept = await store.getDeadLetter(letter);
  assert.equal(kept?.intentId, "pi_0001");
  assert.match(kept?.reason ?? "", /'kind' must be "settle"/);
  const hashed = `qstash/sha256-${
    Array.from(sha256(encoder.encode(other)).slice(0, 16), (b) =>
      b.toString(16).padStart(2, "0")).join("")
  }/unreadable`;
  assert.match((await store.getDeadLetter(hashed))?.reason ?? "", /not JSON/);
  assert.equal(await statusOf(await post(other, token)), 401);
});

Deno.test("a signed unreadable QStash message naming an intent, sent under the Upstash-Message-Id of a letter that names none, leaves that letter as it was and is kept under its own bytes' hash", async () => {
  const { app, store } = await makeApp({ intents: [AUTHORIZED] });
  const post = async (body: string) =>
    await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body),
        "upstash-message-id": "msg_1",
      },
    });
  // QStash's message msg_1, whose job names no intent: kept, naming none,
  // the only record of a message whose payment is yet to be found.
  const first = JSON.stringify({ kind: "settle" });
  assert.equal(await statusOf(await post(first)), 489);
  const letter = "qstash/msg_1/unreadable";
  const before = await store.getDeadLetter(letter);
  assert.equal(before?.intentId, "");
  // Another signed message, naming an intent, sent under msg_1's id.
  const other = JSON.stringify({ intentId: "pi_0001", kind: "refund" });
  assert.equal(await statusOf(await post(other)), 489);
  const kept = await store.getDeadLetter(letter);
  assert.equal(kept?.intentId, "");
  assert.equal(kept?.reason, before?.reason);
  const hashed = `qstash/sha256-${
    Array.from(sha256(encoder.encode(other)).slice(0, 16), (b) =>
      b.toString(16).padStart(2, "0")).join("")
  }/unreadable`;
  assert.equal((await store.getDeadLetter(hashed))?.intentId, "pi_0001");
});

Deno.test("Google's signed numbers and flags must be JSON's: exp, iat or nbf as a string, email_verified as the string 'true' are 401", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const google = await theGoogle();
  const nowS = Math.floor(Date.now() / 1000);
  const tokens: [string, Record<string, unknown>][] = [
    ["exp as a string", { exp: String(nowS + 3600) }],
    ["iat as a string", { iat: String(nowS - 10) }],
    ["nbf as a string", { nbf: String(nowS - 10) }],
    ["email_verified as a string", { email_verified: "true" }],
  ];
  for (const [name, claims] of tokens) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${await google.token(claims)}` },
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
});

Deno.test("QStash's exp and nbf at the 30 s tolerance: exp 29 s past is taken, 30 s past refused; nbf 30 s ahead taken, 31 s ahead refused (the wall clock's second)", async () => {
  const wall = 1_800_000_000_000;
  const nowS = wall / 1000;
  const cases: [string, { nowS: number; ttlS: number }, number][] = [
    ["exp 29 s past", { nowS: nowS - 329, ttlS: 300 }, 503],
    ["exp 30 s past", { nowS: nowS - 330, ttlS: 300 }, 401],
    ["nbf 30 s ahead", { nowS: nowS + 30, ttlS: 300 }, 503],
    ["nbf 31 s ahead", { nowS: nowS + 31, ttlS: 300 }, 401],
  ];
  for (const [name, sign, status] of cases) {
    const { app, writes } = await targetApp({ now: () => wall });
    const body = JSON.stringify(job);
    const token = await signQStash(body, sign);
    // The last millisecond of the wall clock's second: it is still nowS.
    const res = await atWallClock(
      wall + 999,
      () =>
        app.request("/v1/qstash", {
          method: "POST",
          body,
          headers: { "upstash-signature": token },
        }),
    );
    assert.equal(await statusOf(res), status, name);
    if (status === 401) assert.equal(writes(), 0, name);
  }
});

Deno.test("Google's exp, iat and nbf at the 30 s tolerance, to the millisecond: exp + 30 s is refused, a millisecond before taken; iat or nbf 30 s ahead taken, a millisecond more refused", async () => {
  const google = await theGoogle();
  const wall = 1_800_000_000_000;
  const s = wall / 1000;
  const cases: [string, number, Record<string, unknown>, number][] = [
    ["a millisecond before exp + 30 s", wall - 1, { exp: s - 30 }, 503],
    ["at exp + 30 s", wall, { exp: s - 30 }, 401],
    ["iat 30 s ahead", wall, { iat: s + 30 }, 503],
    ["iat 30 s and 1 ms ahead", wall - 1, { iat: s + 30 }, 401],
    ["nbf 30 s ahead", wall, { nbf: s + 30 }, 503],
    ["nbf 30 s and 1 ms ahead", wall - 1, { nbf: s + 30 }, 401],
  ];
  for (const [name, at, claims, status] of cases) {
    const { app, writes } = await targetApp({ now: () => at });
    const token = await google.token({
      iat: s - 100,
      exp: s + 3600,
      ...claims,
    });
    const res = await atWallClock(
      at,
      () =>
        app.request("/v1/pubsub", {
          method: "POST",
          body: envelope(job, { deliveryAttempt: 1 }),
          headers: { authorization: `Bearer ${token}` },
        }),
    );
    assert.equal(await statusOf(res), status, name);
    if (status === 401) assert.equal(writes(), 0, name);
  }
});

Deno.test("a captured QStash delivery is refused as a replay for every millisecond its token still verifies, and as expired from the first one it does not; a fresh token of the same body is taken", async () => {
  const wall = 1_800_000_000_000;
  let clock = wall;
  const { app, sender } = await makeApp({
    intents: [AUTHORIZED],
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }, { txHash: "0xdef" }] } },
    deps: { now: () => clock },
  });
  const body = JSON.stringify(job);
  const nowS = wall / 1000;
  const token = await signQStash(body, { nowS, ttlS: 300 });
  const post = (signature: string) =>
    atWallClock(clock, () =>
      app.request("/v1/qstash", {
        method: "POST",
        body,
        headers: { "upstash-signature": signature },
      }));
  assert.equal(await statusOf(await post(token)), 503);
  // The token verifies while the wall clock's second is before exp + 30 s.
  const lastAccepted = (nowS + 300 + 30) * 1000 - 1;
  for (const at of [wall + 1, lastAccepted]) {
    clock = at;
    const res = await post(token);
    assert.equal(res.status, 401, `at ${at - wall} ms`);
    assert.match((await res.json()).detail, /already delivered/);
  }
  clock = lastAccepted + 1;
  const expired = await post(token);
  assert.equal(expired.status, 401);
  assert.doesNotMatch((await expired.json()).detail, /already delivered/);
  assert.equal(sendsOf(sender), 1);
  // QStash's next delivery of the message: a fresh token, taken.
  const fresh = await signQStash(body, { nowS: clock / 1000 });
  assert.notEqual(await statusOf(await post(fresh)), 401);
});

Deno.test("a captured generic delivery at the edge of its window: a replay is refused as one up to t + 5 min, as too old a millisecond later; one signed 30 s ahead is refused as a replay till its own t + 5 min; the same body signed afresh is taken", async () => {
  const t = NOW / 1000;
  for (
    const [name, signedAt] of [["now", t], ["30 s ahead", t + 30]] as const
  ) {
    let clock = NOW;
    const { app, sender } = await targetApp({ now: () => clock });
    const body = JSON.stringify({ job });
    const captured = await genericRequest(body, { timeS: signedAt });
    assert.equal(
      await statusOf(await app.request("/v1/deliveries", { ...captured })),
      503,
      name,
    );
    for (const at of [NOW + 1, signedAt * 1000 + 5 * 60_000]) {
      clock = at;
      const res = await app.request("/v1/deliveries", { ...captured });
      assert.equal(res.status, 401, `${name}, at ${at - NOW} ms`);
      assert.match((await res.json()).detail, /already delivered/, name);
    }
    clock = signedAt * 1000 + 5 * 60_000 + 1;
    const stale = await app.request("/v1/deliveries", { ...captured });
    assert.equal(stale.status, 401, name);
    assert.match((await stale.json()).detail, /more than 5 minutes old/, name);
    assert.equal(
      sendsOf(sender),
      1,
      name,
    );
    const fresh = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS: Math.floor(clock / 1000) }),
    );
    assert.notEqual(await statusOf(fresh), 401, name);
  }
});

Deno.test("QStash's next signing key is taken and shares the replay record: a token of the same jti under the other key is a replay", async () => {
  const { app, sender } = await targetApp();
  const body = JSON.stringify(job);
  const jti = "jwt_same_id_under_both_keys";
  const next = await signQStash(body, { key: QSTASH.nextSigningKey, jti });
  const current = await signQStash(body, { jti });
  assert.equal(
    await statusOf(
      await app.request("/v1/qstash", {
        method: "POST",
        body,
        headers: { "upstash-signature": next },
      }),
    ),
    503,
  );
  const again = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": current },
  });
  assert.equal(again.status, 401);
  assert.match((await again.json()).detail, /already delivered/);
  assert.equal(sendsOf(sender), 1);
  // A key that is neither: refused before anything is read.
  const third = await signQStash(body, { key: "sig_third_0123456789abcdef" });
  assert.equal(
    await statusOf(
      await app.request("/v1/qstash", {
        method: "POST",
        body,
        headers: { "upstash-signature": third },
      }),
    ),
    401,
  );
});

Deno.test("the URL a token names is compared with the configured one, never with the request's Host: a token for the Host the request names, or for the URL with a query, percent-encoded or with a default port, is 401; the genuine token under a made-up Host is taken", async () => {
  const { app, writes, sender } = await targetApp();
  const google = await theGoogle();
  const body = JSON.stringify(job);
  const qstashSubs = [
    "https://forger.example/v1/qstash",
    `${QSTASH.url}?x=1`,
    QSTASH.url.replace("/qstash", "/%71stash"),
    QSTASH.url.replace(".test/", ".test:443/"),
  ];
  for (const url of qstashSubs) {
    const res = await app.request("http://forger.example/v1/qstash", {
      method: "POST",
      body,
      headers: {
        host: "forger.example",
        "upstash-signature": await signQStash(body, { url }),
      },
    });
    assert.equal(res.status, 401, url);
    await res.body?.cancel();
  }
  const audiences = [
    "https://forger.example/v1/pubsub",
    `${PUBSUB.audience}?x=1`,
    `${PUBSUB.audience}/`,
    PUBSUB.audience.replace(".test/", ".test:443/"),
  ];
  for (const aud of audiences) {
    const res = await app.request("http://forger.example/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: {
        host: "forger.example",
        authorization: `Bearer ${await google.token({ aud })}`,
      },
    });
    assert.equal(res.status, 401, aud);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  const genuine = await app.request("http://forger.example/v1/qstash", {
    method: "POST",
    body,
    headers: {
      host: "forger.example",
      "upstash-signature": await signQStash(body),
    },
  });
  assert.equal(await statusOf(genuine), 503);
  assert.equal(sendsOf(sender), 1);
});

Deno.test("QStash's token covers the body and the URL, not Upstash-Retried: a copy sent ahead of QStash's own request, its retry count raised, is taken at that count (the job dropped, nothing sent, the intent still authorized, the letter kept); QStash's own copy is then a 401 replay", async () => {
  const { app, sender, store } = await targetApp();
  const body = JSON.stringify(job);
  const token = await signQStash(body);
  const post = async (signature: string, retried: string) => {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": signature,
        "upstash-retried": retried,
        "upstash-message-id": "msg_1",
      },
    });
    return { status: res.status, answer: await res.json() };
  };
  const ahead = await post(token, "41");
  assert.equal(ahead.status, 200);
  assert.equal(ahead.answer.outcome, "poison");
  assert.equal(ahead.answer.reason, "no luck after 42 deliveries");
  const own = await post(token, "0");
  assert.equal(own.status, 401);
  assert.match(own.answer.detail, /already delivered/);
  assert.equal(sendsOf(sender), 0);
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.equal((await store.listDeadLetters()).items[0]?.deliveries, 42);
});

Deno.test("a QStash message whose signed bytes are gzip is not decompressed: its token verifies over the bytes as sent, and the message is kept as unreadable (489), not refused as forged", async () => {
  const { app, store, sender } = await targetApp();
  const compressed = await gzip(JSON.stringify(job));
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body: compressed,
    headers: {
      "content-encoding": "gzip",
      "upstash-signature": await signQStash(compressed),
      "upstash-message-id": "msg_gzip",
    },
  });
  assert.equal(res.status, 489);
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  await res.body?.cancel();
  assert.deepEqual(
    (await store.listDeadLetters()).items.map((letter) => letter.jobId),
    ["qstash/msg_gzip/unreadable"],
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.equal(sendsOf(sender), 0);
});
