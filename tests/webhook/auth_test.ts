import assert from "node:assert/strict";
import {
  hmacSignature,
  hmacVerifier,
  pubsubVerifier,
  qstashVerifier,
  SIGNATURE_MAX_AGE_MS,
  SIGNATURE_REPLAY_TTL_MS,
  TOKEN_CLOCK_TOLERANCE_MS,
  TOKEN_MAX_CHARS,
  TOKEN_REPLAY_MARGIN_MS,
} from "../../webhook/_auth.ts";
import { fakeGoogle, PUBSUB, QSTASH, signQStash, taking } from "./_signing.ts";

const SECRET = "webhook-secret-for-tests";
const body = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" } });

Deno.test("hmacSignature() signs '<t>.<raw body>' as t=<t>,v1=<hex>, the same as openssl", () => {
  // printf '%s' '1764504000.{"a":1}' | openssl dgst -sha256 -hmac 'webhook-secret-for-tests'
  assert.equal(
    hmacSignature(SECRET, '{"a":1}', 1764504000),
    "t=1764504000,v1=" +
      "c2d1f524e35269a11a9a31c3d3569dde3e10efb3a9b877f6f0c656dbc7bae301",
  );
});

Deno.test("hmacVerifier() gives the replay claim: the lower-case v1, until t + 6 minutes", () => {
  const t = 1_764_504_000;
  const verify = hmacVerifier(SECRET, () => t * 1000 + SIGNATURE_MAX_AGE_MS);
  const header = hmacSignature(SECRET, body, t);
  const v1 = header.split("v1=")[1]!;
  const expected = {
    ok: true,
    claim: {
      key: `deliveries/${v1}`,
      expiresAt: t * 1000 + SIGNATURE_REPLAY_TTL_MS,
    },
  };
  assert.deepEqual(verify(body, header), expected);
  // The same signature in capitals is the same signed request: the same key.
  assert.deepEqual(verify(body, `t=${t},v1=${v1.toUpperCase()}`), expected);
  // The record outlives the signature: a replay cannot outwait it.
  assert.ok(SIGNATURE_REPLAY_TTL_MS > SIGNATURE_MAX_AGE_MS);
});

Deno.test("hmacVerifier() refuses, saying what was wrong, without the secret", () => {
  const t = 1_764_504_000;
  const verify = hmacVerifier(SECRET, () => t * 1000);
  for (
    const [header, words] of [
      [undefined, /missing or malformed/],
      ["", /missing or malformed/],
      [`t=${t},v1=zz`, /missing or malformed/],
      // A signer that took Date.now() as it is.
      [hmacSignature(SECRET, body, t * 1000), /milliseconds.*unix seconds/],
      [hmacSignature(SECRET, body, t - 301), /more than 5 minutes old/],
      [hmacSignature(SECRET, body, t + 31), /ahead of this server's clock/],
      [hmacSignature("another-secret-0000", body, t), /does not verify/],
      [hmacSignature(SECRET, `${body} `, t), /does not verify/],
    ] as const
  ) {
    const answer = verify(body, header);
    assert.equal(answer.ok, false, String(header));
    if (!answer.ok) {
      assert.match(answer.detail, words);
      assert.ok(!answer.detail.includes(SECRET));
    }
  }
});

Deno.test("hmacVerifier() names what is wrong with a header read as malformed: two headers joined with ', ', v1 before t, two v1 (Stripe's rotation); each still refused, the genuine signature in it or not, and its MACs not echoed", () => {
  const t = 1_764_504_000;
  const next = "the-next-webhook-secret";
  const verify = hmacVerifier(SECRET, () => t * 1000, next);
  const genuine = hmacSignature(SECRET, body, t);
  const v1 = genuine.split("v1=")[1]!;
  const other = hmacSignature(next, body, t).split("v1=")[1]!;
  const joined =
    /holds 2 signatures \(2 t=\): two X-Signature headers were joined with ', ' \(a proxy or a client added one\), or two signatures sent in one: send one X-Signature header, with one t and one v1: send 'X-Signature: t=/;
  const order =
    /has v1 before t: t= must come first: send 'X-Signature: t=<unix seconds>,v1=/;
  const twoV1 =
    /holds 2 v1 values, as Stripe sends while a secret rotates: send one v1, the MAC under WEBHOOK_SECRET \(this service checks WEBHOOK_SECRET_NEXT itself while you rotate\): send 'X-Signature: t=/;
  for (
    const [header, words] of [
      // Headers.append of two values, as fetch and a proxy join them.
      [`${genuine}, ${genuine}`, joined],
      [`t=${t},v1=${"0".repeat(64)}, ${genuine}`, joined],
      [`${genuine},${hmacSignature(SECRET, body, t - 1)}`, joined],
      [`v1=${v1},t=${t}`, order],
      [` v1=${v1.toUpperCase()}, t=${t} `, order],
      [`t=${t},v1=${v1},v1=${other}`, twoV1],
      [`t=${t},v1=${other},v1=${v1}`, twoV1],
      [`t=${t}, v1=${v1}, v1=${v1}`, twoV1],
      // Not one of those: the general words.
      [`v1=${v1.slice(1)},t=${t}`, /missing or malformed/],
      [`v1=${v1}`, /missing or malformed/],
      [`t=${t}`, /missing or malformed/],
    ] as const
  ) {
    for (
      const answer of [
        verify(body, header),
        verify.precheck(header) ?? { ok: true as const },
        verify.untimely(header) ?? { ok: true as const },
      ]
    ) {
      assert.equal(answer.ok, false, header);
      if (!answer.ok) {
        assert.match(answer.detail, words, header);
        assert.ok(!answer.detail.includes(v1), header);
        assert.ok(!answer.detail.includes(other), header);
        assert.equal(answer.kind, undefined, header);
      }
    }
  }
});

Deno.test("hmacVerifier() takes a signature under the next secret too, during a rotation, with the same replay key; never one under a third", () => {
  const t = 1_764_504_000;
  const next = "the-next-webhook-secret";
  const verify = hmacVerifier(SECRET, () => t * 1000, next);
  for (const secret of [SECRET, next]) {
    const header = hmacSignature(secret, body, t);
    const answer = verify(body, header);
    assert.equal(answer.ok, true, secret);
    if (answer.ok) {
      assert.equal(answer.claim.key, `deliveries/${header.split("v1=")[1]}`);
    }
  }
  const other = verify(body, hmacSignature("a-third-secret-000000", body, t));
  assert.equal(other.ok, false);
  if (!other.ok) {
    assert.match(other.detail, /does not verify/);
    assert.ok(!other.detail.includes(next));
  }
  // Without `next`, a signature under it does not verify.
  assert.equal(
    hmacVerifier(SECRET, () => t * 1000)(body, hmacSignature(next, body, t)).ok,
    false,
  );
  assert.throws(
    () => hmacVerifier(SECRET, () => t * 1000, "short"),
    /'webhookSecretNext' is 5 characters long: .* WEBHOOK_SECRET_NEXT has the same rule/,
  );
  assert.throws(
    () => hmacVerifier(SECRET, () => t * 1000, ""),
    /'webhookSecretNext' is empty/,
  );
});

Deno.test("qstashVerifier() gives the replay claim: the token's jti, for as long as the token could be accepted, on the app's clock", async () => {
  // The app's clock is far from the wall clock, which the Receiver reads.
  const appNow = 5_000;
  const verify = qstashVerifier(QSTASH, () => appNow);
  const before = Date.now();
  const nowS = Math.floor(before / 1000);
  const signature = await signQStash(body, {
    nowS,
    ttlS: 300,
    jti: "jwt_67kxXD6UBAk7DqU6hzuHMDdXFXfP",
  });
  const answer = await verify(signature, body);
  const after = Date.now();
  assert.equal(answer.ok, true);
  if (!answer.ok) return;
  assert.equal(answer.claim.key, "qstash/jwt_67kxXD6UBAk7DqU6hzuHMDdXFXfP");
  // Accepted until exp + the tolerance by the wall clock; kept a margin more.
  const lasts = (nowS + 300) * 1000 + TOKEN_CLOCK_TOLERANCE_MS +
    TOKEN_REPLAY_MARGIN_MS;
  assert.ok(answer.claim.expiresAt <= appNow + lasts - before);
  assert.ok(answer.claim.expiresAt >= appNow + lasts - after);
});

Deno.test("qstashVerifier() allows the queue's clock to differ from ours by up to 30 s: a token signed 5 s ahead, or 10 s past its exp, verifies; 31 s past does not", async () => {
  const verify = qstashVerifier(QSTASH);
  const wallS = Math.floor(Date.now() / 1000);
  const cases: [string, number, number, boolean][] = [
    ["signed 5 s ahead (nbf in the future)", wallS + 5, 300, true],
    ["10 s past its exp", wallS - 310, 300, true],
    ["31 s past its exp", wallS - 331, 300, false],
  ];
  for (const [name, nowS, ttlS, ok] of cases) {
    const answer = await verify(await signQStash(body, { nowS, ttlS }), body);
    assert.equal(answer.ok, ok, name);
  }
});

Deno.test("qstashVerifier() refuses a token without its body hash (answered 401, not thrown)", async () => {
  const verify = qstashVerifier(QSTASH);
  const answer = await verify(
    await signQStash(body, { bodyHash: null }),
    body,
  );
  assert.equal(answer.ok, false);
});

Deno.test("qstashVerifier() refuses a verified token without a jti: its replay could not be refused", async () => {
  const verify = qstashVerifier(QSTASH);
  const answer = await verify(await signQStash(body, { jti: null }), body);
  assert.equal(answer.ok, false);
  if (!answer.ok) assert.match(answer.detail, /'jti'/);
  const bad = await verify(
    await signQStash(body, { key: "wrong-key-000000" }),
    body,
  );
  assert.equal(bad.ok, false);
});

/** Runs `run` counting the Web Crypto calls made meanwhile (imports, signs, verifies, digests). */
async function webCryptoCalls(run: () => Promise<unknown>): Promise<number> {
  const subtle = crypto.subtle as unknown as Record<string, unknown>;
  const methods = ["importKey", "sign", "verify", "digest"] as const;
  let calls = 0;
  for (const name of methods) {
    const real = (subtle[name] as (...args: unknown[]) => unknown).bind(
      crypto.subtle,
    );
    subtle[name] = (...args: unknown[]) => {
      calls++;
      return real(...args);
    };
  }
  try {
    await run();
  } finally {
    for (const name of methods) delete subtle[name];
  }
  return calls;
}

Deno.test("qstashVerifier() refuses a token signed by neither key before any key is imported: a forged token costs no Web Crypto call, whatever URL it names", async () => {
  const verify = qstashVerifier(QSTASH);
  // A forger copies a real token's header and claims and makes up the
  // MAC, or signs with a key of its own; naming another URL as sub used
  // to cost two more verifications (the check for a PUBLIC_URL slip).
  const forged: [string, string][] = [];
  for (const url of [QSTASH.url, "https://elsewhere.example/v1/qstash"]) {
    const [header, claims] = (await signQStash(body, { url })).split(".");
    forged.push([`made-up MAC, sub ${url}`, `${header}.${claims}.AAAA`]);
    forged.push([
      `another key, sub ${url}`,
      await signQStash(body, { url, key: "sig_forger_0123456789abcdef" }),
    ]);
  }
  for (const [name, token] of forged) {
    let answer: Awaited<ReturnType<typeof verify>> | undefined;
    const calls = await webCryptoCalls(async () => {
      answer = await verify(token, body);
    });
    assert.equal(answer?.ok, false, name);
    if (answer?.ok === false) {
      assert.match(answer.detail, /does not verify/, name);
    }
    assert.equal(calls, 0, `${name}: ${calls} Web Crypto call(s)`);
  }
  // A token signed by either key still goes to the Receiver, and verifies.
  for (const key of [QSTASH.currentSigningKey, QSTASH.nextSigningKey]) {
    const answer = await verify(await signQStash(body, { key }), body);
    assert.equal(answer.ok, true, key);
  }
  // Signed by our key for another URL: still told apart, as a set-up slip.
  const slip = await verify(
    await signQStash(body, { url: "https://elsewhere.example/v1/qstash" }),
    body,
  );
  assert.equal(slip.ok, false);
  if (!slip.ok) assert.match(slip.detail, /signed for https:\/\/elsewhere/);
});

/** How many characters `run` had `atob` decode: a token's parts are decoded by it. */
async function charsDecoded(run: () => Promise<unknown>): Promise<number> {
  const real = globalThis.atob;
  let chars = 0;
  globalThis.atob = (data: string) => {
    chars += data.length;
    return real(data);
  };
  try {
    await run();
  } finally {
    globalThis.atob = real;
  }
  return chars;
}

Deno.test("qstashVerifier() decodes nothing of a token neither key signed, and refuses a token longer than 8 KiB and twice the URL unread, even one a key signed", async () => {
  const verify = qstashVerifier(QSTASH);
  const [header, claims] = (await signQStash(body)).split(".");
  // A forged header as long as a server takes (64 KiB on Deno) cost
  // milliseconds to decode before its MAC was checked.
  const long = (pad: number) =>
    signQStash(body, { extra: { pad: "y".repeat(pad) } });
  const refused: [string, string][] = [
    ["made-up MAC", `${header}.${claims}.AAAA`],
    ["made-up MAC, 64 KiB", `${header}.${"B".repeat(65_000)}.AAAA`],
    ["signed, 64 KiB", await long(48_000)],
  ];
  for (const [name, token] of refused) {
    let answer: Awaited<ReturnType<typeof verify>> | undefined;
    let calls = 0;
    const chars = await charsDecoded(async () => {
      calls = await webCryptoCalls(async () => {
        answer = await verify(token, body);
      });
    });
    assert.equal(answer?.ok, false, name);
    assert.equal(chars, 0, `${name}: ${chars} characters decoded`);
    assert.equal(calls, 0, `${name}: ${calls} Web Crypto call(s)`);
  }
  // A genuine token is far shorter; the longest within the limit still
  // verifies, and the shortest past it (a few characters more) does not.
  const limit = TOKEN_MAX_CHARS + 2 * QSTASH.url.length;
  let pad = Math.floor((limit - 400) * 3 / 4);
  let within = await long(pad);
  assert.ok(within.length <= limit, "the padding starts within the limit");
  for (;;) {
    const next = await long(++pad);
    if (next.length > limit) {
      assert.equal((await verify(next, body)).ok, false, `${next.length}`);
      break;
    }
    within = next;
  }
  assert.ok(within.length > limit - 8, `${within.length}`);
  assert.equal((await verify(within, body)).ok, true, `${within.length}`);
});

Deno.test("pubsubVerifier() refuses an Authorization header longer than 8 KiB and twice the audience unread, even a token Google's key signed", async () => {
  const google = await fakeGoogle();
  const verify = taking(pubsubVerifier({
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  }));
  const [header, claims] = (await google.token()).split(".");
  for (
    const [name, authorization] of [
      [
        "a known kid, 64 KiB of claims",
        `Bearer ${header}.${"B".repeat(65_000)}.AAAA`,
      ],
      [
        "signed, 64 KiB",
        `Bearer ${await google.token({ pad: "y".repeat(48_000) })}`,
      ],
    ]
  ) {
    let verified: boolean | undefined;
    const chars = await charsDecoded(async () => {
      verified = await verify(authorization);
    });
    assert.equal(verified, false, name);
    assert.equal(chars, 0, `${name}: ${chars} characters decoded`);
  }
  assert.equal(await verify(`Bearer ${header}.${claims}.AAAA`), false);
  // The longest token within the limit verifies, and the shortest past it
  // (a character or two more) does not: the limit counts the token, not
  // its "Bearer " scheme.
  const limit = TOKEN_MAX_CHARS + 2 * PUBSUB.audience.length;
  const long = (pad: number) => google.token({ pad: "y".repeat(pad) });
  let pad = Math.floor((limit - 900) * 3 / 4);
  let within = await long(pad);
  assert.ok(within.length <= limit, "the padding starts within the limit");
  for (;;) {
    const next = await long(++pad);
    if (next.length > limit) {
      assert.equal(await verify(`Bearer ${next}`), false, `${next.length}`);
      break;
    }
    within = next;
  }
  assert.ok(within.length >= limit - 2, `${within.length}`);
  assert.equal(await verify(`Bearer ${within}`), true, `${within.length}`);
});

Deno.test("qstashVerifier() checks a token's MAC no more strictly than QStash's Receiver: a MAC with a '=' of padding, which the Receiver takes, verifies", async () => {
  const verify = qstashVerifier(QSTASH);
  const token = await signQStash(body);
  assert.equal((await verify(`${token}=`, body)).ok, true);
});

Deno.test("qstashVerifier() refuses a forged token whose MAC is a long run of '=' and a letter in time linear in its length", async () => {
  // A long URL makes room for a long token within the limit; on the
  // default URL, 8 KiB of '=' took 40-100 ms, and 60 KB 2 s (no limit then).
  const url = `${QSTASH.url}?${"q".repeat(20_000)}`;
  const verify = qstashVerifier({ ...QSTASH, url });
  const part = (value: unknown) =>
    btoa(JSON.stringify(value)).replaceAll("=", "");
  const token = `${part({ alg: "HS256", typ: "JWT" })}.${part({ body: "x" })}.${
    "=".repeat(45_000)
  }A`;
  assert.ok(token.length <= TOKEN_MAX_CHARS + 2 * url.length);
  const started = performance.now();
  const answer = await verify(token, body);
  const tookMs = performance.now() - started;
  assert.equal(answer.ok, false);
  // About a millisecond; quadratic, over a second.
  assert.ok(tookMs < 300, `${tookMs.toFixed(0)} ms`);
});

/** A token of `key` with any header and claims (HS256 MAC whatever `alg` says). */
async function tokenWith(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  key: string = QSTASH.currentSigningKey,
): Promise<string> {
  const b64 = (bytes: Uint8Array) =>
    btoa(String.fromCharCode(...bytes)).replaceAll("+", "-")
      .replaceAll("/", "_").replace(/=+$/, "");
  const text = (value: unknown) =>
    b64(new TextEncoder().encode(JSON.stringify(value)));
  const input = `${text(header)}.${text(claims)}`;
  const hmac = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(key),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = await crypto.subtle.sign(
    "HMAC",
    hmac,
    new TextEncoder().encode(input),
  );
  return `${input}.${b64(new Uint8Array(mac))}`;
}

Deno.test("qstashVerifier(): checkClaims then verifyDigest, for a body too large to read whole, accept and refuse the tokens the Receiver does, and give the same replay claim", async () => {
  let appNow = 5_000;
  const verify = qstashVerifier(QSTASH, () => appNow);
  const nowS = Math.floor(Date.now() / 1000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const b64 = btoa(String.fromCharCode(...hash)).replaceAll("+", "-")
    .replaceAll("/", "_");
  const claims = {
    iss: "Upstash",
    sub: QSTASH.url,
    iat: nowS,
    nbf: nowS,
    exp: nowS + 300,
    jti: "jwt_1",
    body: b64,
  };
  const hs256 = { alg: "HS256", typ: "JWT" };
  const cases: Record<string, string | undefined> = {
    good: await signQStash(body),
    "the next key": await signQStash(body, { key: QSTASH.nextSigningKey }),
    "body unpadded": await tokenWith(hs256, {
      ...claims,
      body: b64.replace(/=+$/, ""),
    }),
    "no nbf, no iat": await tokenWith(hs256, {
      ...claims,
      nbf: undefined,
      iat: undefined,
    }),
    "10 s past exp": await signQStash(body, { nowS: nowS - 310 }),
    none: undefined,
    "another key": await signQStash(body, { key: "sig_not_ours_00000" }),
    "another URL": await signQStash(body, { url: `${QSTASH.url}/failed` }),
    "another body": await signQStash(`${body} `),
    "no body claim": await signQStash(body, { bodyHash: null }),
    expired: await signQStash(body, { nowS: nowS - 3600 }),
    "not yet": await signQStash(body, { nowS: nowS + 3600 }),
    "iss not Upstash": await signQStash(body, { extra: { iss: "Other" } }),
    "no iss": await tokenWith(hs256, { ...claims, iss: undefined }),
    "iat not a number": await tokenWith(hs256, { ...claims, iat: "now" }),
    "alg HS512": await tokenWith({ alg: "HS512", typ: "JWT" }, claims),
    "alg none": await tokenWith({ alg: "none" }, claims),
    crit: await tokenWith({ ...hs256, crit: ["x"], x: 1 }, claims),
    "no jti": await signQStash(body, { jti: null }),
  };
  for (const [name, signature] of Object.entries(cases)) {
    appNow += 1;
    const whole = await verify(signature, body);
    const early = verify.checkClaims(signature);
    const digest = verify.verifyDigest(signature, hash);
    assert.equal(digest.ok, whole.ok, `${name}: ${JSON.stringify(whole)}`);
    if (whole.ok && digest.ok) {
      // The same key; its expiry counted from the wall clock of each call.
      assert.equal(digest.claim.key, whole.claim.key, name);
      assert.ok(
        Math.abs(digest.claim.expiresAt - whole.claim.expiresAt) < 1000,
        name,
      );
    } else assert.deepEqual(digest, whole, name);
    // The early check refuses only what the whole check refuses, and all
    // of it but the body's hash.
    if (whole.ok) assert.equal(early, undefined, name);
    else if (name !== "another body") assert.ok(early, name);
  }
});

Deno.test("qstashVerifier() checks a body given as bytes that are not UTF-8 by their own SHA-256, with every other check of the token", async () => {
  const verify = qstashVerifier(QSTASH);
  const nowS = Math.floor(Date.now() / 1000);
  // {"intentId":"pi_0001","kind":"settle","note":"caf<E9>"}: no text's UTF-8.
  const latin1 = new Uint8Array([
    ...new TextEncoder().encode(
      '{"intentId":"pi_0001","kind":"settle","note":"caf',
    ),
    0xe9,
    ...new TextEncoder().encode('"}'),
  ]);
  const other = latin1.slice();
  other[other.indexOf(0xe9)] = 0xe8;
  const good = await signQStash(latin1);
  const taken = await verify(good, latin1);
  assert.ok(taken.ok, JSON.stringify(taken));
  assert.match(taken.claim.key, /^qstash\/jwt_/);
  const refusals: Record<string, [string, Uint8Array]> = {
    "another body": [good, other],
    "the body read as UTF-8": [good, new TextEncoder().encode("\ufffd")],
    expired: [await signQStash(latin1, { nowS: nowS - 3600 }), latin1],
    "another URL": [
      await signQStash(latin1, { url: `${QSTASH.url}/failed` }),
      latin1,
    ],
    "another key": [
      await signQStash(latin1, { key: "sig_not_ours_00000" }),
      latin1,
    ],
    "no jti": [await signQStash(latin1, { jti: null }), latin1],
  };
  for (const [name, [signature, bytes]] of Object.entries(refusals)) {
    assert.equal((await verify(signature, bytes)).ok, false, name);
  }
  // UTF-8 bytes go to the Receiver as their text, a byte order mark kept.
  const bom = new TextEncoder().encode('\ufeff{"intentId":"pi_0001"}');
  assert.ok((await verify(await signQStash(bom), bom)).ok);
});

Deno.test("hmacVerifier() checks the MAC before the time: a t out of time or in milliseconds is 'clock' or 'claims' only under one of the secrets, and a forgery of either is refused in the same words as unverified", () => {
  const t = 1_764_504_000;
  const next = "webhook-secret-next-for-tests";
  const verify = hmacVerifier(SECRET, () => t * 1000, next);
  const forged = (timeS: number) => `t=${timeS},v1=${"ab".repeat(32)}`;
  for (
    const [name, timeS] of [
      ["5 minutes and a second old", t - 301],
      ["31 s ahead", t + 31],
      ["an hour old", t - 3600],
      ["in milliseconds", t * 1000],
    ] as const
  ) {
    const kind = name === "in milliseconds" ? "claims" : "clock";
    const answers = [
      hmacSignature(SECRET, body, timeS),
      hmacSignature(next, body, timeS),
      forged(timeS),
      hmacSignature("a-secret-a-forger-made-up", body, timeS),
    ].map((header) => verify(body, header));
    const [current, upcoming, ...forgeries] = answers.map((answer) =>
      answer.ok ? assert.fail(name) : answer
    );
    assert.equal(current!.kind, kind, name);
    assert.equal(upcoming!.kind, kind, name);
    for (const forgery of forgeries) {
      assert.equal(forgery.kind, undefined, name);
      assert.equal(forgery.hint, undefined, name);
      // The words are the same: only the log's pace tells them apart.
      assert.equal(forgery.detail, current!.detail, name);
    }
  }
  // The sender's own, out of time: its log line says the MAC verified.
  const stale = verify(body, hmacSignature(SECRET, body, t - 301));
  assert.match(!stale.ok && stale.hint || "", /the signature verifies/);
  // In time, a forgery is still "does not verify", as a wrong secret is.
  const wrong = verify(body, forged(t));
  assert.equal(!wrong.ok && wrong.kind, "key");
});

Deno.test("hmacVerifier() says a t of 13 to 15 digits with a well-formed v1 is in milliseconds, white space as the signature allows it; other t and v1 are malformed", () => {
  const t = 1_764_504_000;
  const verify = hmacVerifier(SECRET, () => t * 1000);
  const v1 = "ab".repeat(32);
  for (
    const [header, words] of [
      [`t=${t * 1000},v1=${v1}`, /milliseconds/],
      [` t=${t * 1000}, v1=${v1} `, /milliseconds/],
      [`t=${"9".repeat(15)},v1=${v1}`, /milliseconds/],
      // Microseconds, or a v1 that is no signature: malformed.
      [`t=${t * 1_000_000},v1=${v1}`, /missing or malformed/],
      [`t=${t * 1000},v1=zz`, /missing or malformed/],
      // A v1 one hex digit too long, or text after it, is no signature either.
      [`t=${t * 1000},v1=${v1}0`, /missing or malformed/],
      [`t=${t * 1000},v1=${v1},v0=${v1}`, /missing or malformed/],
    ] as const
  ) {
    const answer = verify(body, header);
    assert.equal(answer.ok, false, header);
    if (!answer.ok) assert.match(answer.detail, words, header);
  }
});

Deno.test("pubsubVerifier() takes a token whose aud is a list of the audience alone, refuses one whose list names another beside it, or is empty, and refuses one whose email_verified is missing", async () => {
  const google = await fakeGoogle();
  const verify = pubsubVerifier({
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  });
  const alone = await google.token({ aud: [PUBSUB.audience] });
  assert.deepEqual(await verify(`Bearer ${alone}`), { ok: true });
  for (
    const aud of [
      ["https://elsewhere.example.test/", PUBSUB.audience],
      [PUBSUB.audience, "https://elsewhere.example.test/"],
      [PUBSUB.audience, PUBSUB.audience, null],
      [],
    ]
  ) {
    const listed = await verify(`Bearer ${await google.token({ aud })}`);
    assert.equal(listed.ok, false, JSON.stringify(aud));
    assert.match(
      !listed.ok && listed.hint || "",
      /PUBSUB_AUDIENCE/,
      JSON.stringify(aud),
    );
  }
  const unlisted = await google.token({
    aud: ["https://elsewhere.example.test/"],
  });
  const refused = await verify(`Bearer ${unlisted}`);
  assert.equal(refused.ok, false);
  assert.match(!refused.ok && refused.hint || "", /PUBSUB_AUDIENCE/);
  const unverified = await verify(
    `Bearer ${await google.token({ email_verified: undefined })}`,
  );
  assert.equal(unverified.ok, false);
  assert.match(
    !unverified.ok && unverified.hint || "",
    /PUBSUB_SERVICE_ACCOUNT/,
  );
});

Deno.test("pubsubVerifier() hints at the clock only for a token otherwise this route's: the account first, then the audience, so a token of any other account is 'account' whatever its audience", async () => {
  const google = await fakeGoogle();
  const verify = pubsubVerifier({
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  });
  const nowS = Math.floor(Date.now() / 1000);
  const expired = { iat: nowS - 7200, exp: nowS - 3600 };
  const elsewhere = { aud: "https://elsewhere.example.test/" };
  const other = { email: "someone@elsewhere.iam.gserviceaccount.com" };
  const hint = async (claims: Record<string, unknown>) => {
    const answer = await verify(`Bearer ${await google.token(claims)}`);
    assert.equal(answer.ok, false);
    return !answer.ok && `${answer.kind}: ${answer.hint}` || "";
  };
  assert.match(
    await hint({ ...expired, ...elsewhere }),
    /^url: .*PUBSUB_AUDIENCE/,
  );
  assert.match(
    await hint({ ...expired, ...other }),
    /^account: .*PUBSUB_SERVICE_ACCOUNT/,
  );
  // Anyone with a Google account has Google sign a token for any audience
  // under their own email: that is another account, not another audience.
  assert.match(
    await hint({ ...elsewhere, ...other }),
    /^account: .*PUBSUB_SERVICE_ACCOUNT/,
  );
  assert.match(
    await hint({ ...expired, ...elsewhere, ...other }),
    /^account: .*PUBSUB_SERVICE_ACCOUNT/,
  );
  assert.match(await hint(expired), /^clock: .*clock/);
});

Deno.test("pubsubVerifier() gives no hint for a token none of Google's keys signed, nor for a header that is no token: a forger's audience or account is not the route's to set", async () => {
  const google = await fakeGoogle();
  const forger = await fakeGoogle();
  const verify = pubsubVerifier({
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  });
  const nowS = Math.floor(Date.now() / 1000);
  const headers = {
    "another key, this route's claims": `Bearer ${await forger.token()}`,
    "another key, another audience": `Bearer ${await forger.token({
      aud: "https://elsewhere.example.test/",
    })}`,
    "another key, another account": `Bearer ${await forger.token({
      email: "someone@elsewhere.iam.gserviceaccount.com",
    })}`,
    "another key, expired": `Bearer ${await forger.token({
      iat: nowS - 7200,
      exp: nowS - 3600,
    })}`,
    "Google's key, another issuer": `Bearer ${await google.token({
      iss: "https://issuer.example.test",
      aud: "https://elsewhere.example.test/",
    })}`,
    "no token": "Bearer not-a-token",
    "another scheme": `Basic ${btoa("user:password")}`,
  };
  for (const [name, header] of Object.entries(headers)) {
    assert.deepEqual(await verify(header), { ok: false }, name);
  }
  assert.deepEqual(await verify(undefined), { ok: false });
  // The route's own token is taken: the forger's were refused for their key.
  assert.deepEqual(await verify(`Bearer ${await google.token()}`), {
    ok: true,
  });
});

Deno.test("a party without the service's secrets reaches only 'unverified' and 'key' on the generic and QStash verifiers, and with a Google account only 'unverified' and 'account' on Pub/Sub's, whatever the time, URL, audience or claims it signs", async () => {
  const t = Math.floor(Date.now() / 1000);
  const times = [t, t - 301, t - 86_400, t + 31, t + 86_400, t * 1000];
  const kinds = (answers: readonly { ok: boolean; kind?: string }[]) =>
    [...new Set(answers.map((a) => a.ok ? "taken" : a.kind ?? "unverified"))]
      .toSorted();
  // The generic route: made-up MACs and secrets, at every time.
  const generic = hmacVerifier(SECRET, () => t * 1000);
  const headers = times.flatMap((timeS) => [
    `t=${timeS},v1=${"0".repeat(64)}`,
    hmacSignature("a-secret-a-forger-made-up", body, timeS),
    hmacSignature(SECRET, `${body} `, timeS), // another body's MAC
  ]);
  assert.deepEqual(
    kinds(
      headers.flatMap((h) => [generic.precheck(h) ?? {}, generic(body, h)])
        .filter((a) => "ok" in a) as { ok: boolean; kind?: string }[],
    ),
    ["key", "unverified"],
  );
  // QStash's routes: tokens under made-up keys, for any URL, time or claims.
  const qstash = qstashVerifier(QSTASH);
  const tokens = await Promise.all(
    [t, t - 3600, t + 3600].flatMap((nowS) =>
      [QSTASH.url, "https://proxy.example.test/v1/qstash"].flatMap((url) =>
        ["jwt_made_up", null].map((jti) =>
          signQStash(body, { key: "sig_a_forger_made_up_0000", url, nowS, jti })
        )
      )
    ),
  );
  assert.deepEqual(
    kinds(await Promise.all(tokens.map((token) => qstash(token, body)))),
    ["key"],
  );
  // Pub/Sub's: Google signs a forger's token for any audience and time,
  // under the forger's own account; a token under a key not Google's.
  const google = await fakeGoogle();
  const forger = await fakeGoogle();
  const pubsub = pubsubVerifier({
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  });
  const claims = [PUBSUB.audience, "https://elsewhere.example.test/"].flatMap(
    (aud) =>
      [{}, { iat: t - 7200, exp: t - 3600 }, { iat: t + 3600 }].map((time) => ({
        aud,
        ...time,
        email: "someone@elsewhere.iam.gserviceaccount.com",
      })),
  );
  const pushes = await Promise.all(
    [google, forger].flatMap((signer) =>
      claims.map(async (c) => pubsub(`Bearer ${await signer.token(c)}`))
    ),
  );
  assert.deepEqual(kinds(pushes), ["account", "unverified"]);
});
