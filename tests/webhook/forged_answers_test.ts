/**
 * What each route answers a forged delivery, read whole: the status and
 * the documented words, an answer and a log line that carry no secret, no
 * stack and nothing of the forged request (its token, its signature, the
 * claims a forger chose), and a store left as it was, so that the genuine
 * delivery sent after the forgeries is taken, once. One test per route;
 * the forgeries are those a forger who holds no key can make, and a few a
 * key holder could sign (duplicate claims), to pin which value counts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { watchWrites } from "../_stores.ts";
import { hmacSignature } from "../../webhook/_auth.ts";
import {
  AUTHORIZED,
  makeApp,
  NOW,
  OPS,
  SECRET,
  STACK,
  theGoogle,
} from "./_app.ts";
import {
  base64url,
  envelope,
  failureCallback,
  googleClaims,
  jwtPart,
  QSTASH,
  rsaKeyPair,
  signHmac,
  signQStash,
} from "./_signing.ts";
import { job as oversized, post } from "./_oversized_qstash.ts";
import { SENDS, sendsOf, targetApp } from "./_forged.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const encoder = new TextEncoder();

const QSTASH_REFUSED =
  "The Upstash-Signature header is missing or does not verify against this URL and body.";
/** The refusal of an Upstash-Signature header of `n` tokens, one of them QStash's. */
const JOINED_QSTASH = (n: number) =>
  `The Upstash-Signature header holds ${n} values joined with ',': two Upstash-Signature headers were sent (QStash sends one; something on the way added one): pass QStash's header through as it came.`;
const PUSH_REFUSED =
  "Send Google's OIDC token for this audience as 'Authorization: Bearer <token>'.";
const HOW_TO_SIGN =
  "send 'X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of \"<t>.<raw body>\" with WEBHOOK_SECRET>'";
const MALFORMED =
  `The X-Signature header is missing or malformed: ${HOW_TO_SIGN}.`;
const JOINED =
  `The X-Signature header holds 2 signatures (2 t=): two X-Signature headers were joined with ', ' (a proxy or a client added one), or two signatures sent in one: send one X-Signature header, with one t and one v1: ${HOW_TO_SIGN}.`;
const V1_FIRST =
  `The X-Signature header has v1 before t: t= must come first: ${HOW_TO_SIGN}.`;
const TWO_V1 =
  `The X-Signature header holds 2 v1 values, as Stripe sends while a secret rotates: send one v1, the MAC under WEBHOOK_SECRET (this service checks WEBHOOK_SECRET_NEXT itself while you rotate): ${HOW_TO_SIGN}.`;
const NOT_VERIFIED =
  `The X-Signature does not verify against this body and timestamp: ${HOW_TO_SIGN}.`;

/** What no answer or log line may carry: the app's secrets. */
const SECRETS = [
  SECRET,
  OPS,
  QSTASH.currentSigningKey,
  QSTASH.nextSigningKey,
];

/** What a forgery is sent to. */
type App = {
  request: (path: string, init: RequestInit) => Response | Promise<Response>;
};

/** A forged request: its name, its headers, its body and what it is answered. */
interface Forgery {
  readonly name: string;
  readonly headers: Headers | Record<string, string>;
  readonly body: BodyInit;
  /** The answer's detail, exactly. */
  readonly detail: string;
  /** What of the request the answer must not echo (a token, a MAC, a claim). */
  readonly secret: readonly string[];
}

let forger: Promise<CryptoKeyPair> | undefined;

/** The forger's own RSA key pair, made once (a key is slow to make). */
function forgerKeys(): Promise<CryptoKeyPair> {
  return forger ??= rsaKeyPair();
}

/**
 * One store and one Sender for every app a test builds: `pi_0001`
 * authorized, its writes counted, the Sender's sends scripted.
 */
async function shared(): Promise<{
  writes: () => number;
  sender: ScriptedSender;
  /** A fresh app over them, logging to `log`: its refusal lines unpaced. */
  app: (log?: (line: string) => void) => Promise<App>;
}> {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  const { store, writes } = watchWrites(memory);
  const sender = new ScriptedSender(SENDS);
  return {
    writes,
    sender,
    app: async (log = () => {}) =>
      (await makeApp({ deps: { store, sender, log } })).app,
  };
}

/**
 * Sends each forgery to `path`, each to a fresh app over the same store
 * (an app logs one refusal a minute per route: so each is logged), and
 * asserts its answer (401, a problem, the detail exactly) and its one log
 * line (the detail) echo nothing of it, no secret and no stack.
 */
async function refuseAll(
  fresh: (log: (line: string) => void) => Promise<App>,
  path: string,
  forgeries: readonly Forgery[],
): Promise<void> {
  for (const forgery of forgeries) {
    const lines: string[] = [];
    const app = await fresh((line) => lines.push(line));
    const res = await app.request(path, {
      method: "POST",
      headers: forgery.headers,
      body: forgery.body,
    });
    const text = await res.text();
    const name = `${path}, ${forgery.name}`;
    assert.equal(res.status, 401, `${name}: ${text}`);
    assert.equal(
      res.headers.get("content-type"),
      "application/problem+json",
      name,
    );
    assert.equal(JSON.parse(text).detail, forgery.detail, name);
    assert.equal(lines.length, 1, `${name}: ${lines.join("\n")}`);
    assert.ok(
      lines[0]!.startsWith(
        `relayer POST ${path} refused 401: ${forgery.detail}`,
      ),
      `${name}: ${lines[0]}`,
    );
    for (
      const [what, said] of [
        ["answer", `${text}\n${[...res.headers].join("\n")}`],
        ["log", lines[0]!],
      ]
    ) {
      assert.doesNotMatch(said!, STACK, `${name}: the ${what}`);
      for (const value of [...SECRETS, ...forgery.secret]) {
        assert.ok(
          !said!.includes(value),
          `${name}: the ${what} echoes ${value}`,
        );
      }
    }
  }
}

/** A compact JWS and its MAC, which no answer may echo (an empty MAC is nothing to echo). */
function echoesOf(token: string): string[] {
  const mac = token.slice(token.lastIndexOf(".") + 1);
  return mac === "" ? [token] : [token, mac];
}

/** A compact JWS of `header` and `claims`, HS256-keyed with `key`'s bytes. */
function hs256(
  header: Record<string, unknown>,
  claims: string,
  key: string,
): string {
  const input = `${jwtPart(header)}.${base64url(claims)}`;
  const mac = hmac(sha256, encoder.encode(key), encoder.encode(input));
  return `${input}.${base64url(mac)}`;
}

Deno.test("POST /v1/qstash refuses forged tokens with its words, echoing nothing of them, writing nothing: RS256 by a key of the forger's, HS256 keyed with Google's public key, the generic route's secret or the ops token, a byte of the body changed, a 70 KB token of our key; then the genuine delivery is taken once and its replay refused", async () => {
  const { app: fresh, writes, sender } = await shared();
  const google = await theGoogle();
  const body = JSON.stringify(job);
  const genuine = await signQStash(body);
  const [, claims] = genuine.split(".");
  const claimsText = new TextDecoder().decode(
    Uint8Array.from(
      atob(claims!.replaceAll("-", "+").replaceAll("_", "/")),
      (ch) => ch.charCodeAt(0),
    ),
  );
  const pair = await forgerKeys();
  const rsInput = `${jwtPart({ alg: "RS256", typ: "JWT" })}.${claims}`;
  const rs256 = `${rsInput}.${
    base64url(
      new Uint8Array(
        await crypto.subtle.sign(
          "RSASSA-PKCS1-v1_5",
          pair.privateKey,
          encoder.encode(rsInput),
        ),
      ),
    )
  }`;
  const googleKey = google.jwks[0] as JsonWebKey & { n: string };
  const forged = (name: string, token: string, sent = body): Forgery => ({
    name,
    headers: { "upstash-signature": token },
    body: sent,
    detail: QSTASH_REFUSED,
    secret: echoesOf(token),
  });
  const huge = await signQStash(body, { extra: { pad: "x".repeat(70_000) } });
  await refuseAll(fresh, "/v1/qstash", [
    forged("RS256 by the forger's key", rs256),
    forged(
      "HS256 keyed with Google's public n",
      hs256({ alg: "HS256", typ: "JWT" }, claimsText, googleKey.n),
    ),
    forged(
      "HS256 keyed with the generic route's secret",
      hs256({ alg: "HS256", typ: "JWT" }, claimsText, SECRET),
    ),
    forged(
      "HS256 keyed with the ops token",
      hs256({ alg: "HS256", typ: "JWT" }, claimsText, OPS),
    ),
    forged(
      "the genuine token over a body one byte other",
      genuine,
      body.replace("pi_0001", "pi_0002"),
    ),
    forged("a token of our key 70 KB long", huge),
  ]);
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  // None of them used up the token: the genuine delivery is taken, once.
  const app = await fresh();
  const post = () =>
    app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: { "upstash-signature": genuine },
    });
  const taken = await post();
  assert.equal(taken.status, 503, await taken.text());
  const replay = await post();
  assert.equal(replay.status, 401);
  assert.match((await replay.json()).detail, /already delivered/);
  assert.equal(sendsOf(sender), 1);
});

Deno.test("POST /v1/qstash and its failure callback name a header of two tokens, one of them QStash's (two Upstash-Signature headers joined with ', ', a proxy having added one), and log it apart from forgeries with what to put right, not as keys this service does not hold; each still refused, writing nothing, and the genuine token then taken once", async () => {
  const { app: fresh, writes, sender } = await shared();
  const body = JSON.stringify(job);
  const callback = failureCallback(job);
  const callbackUrl = `${QSTASH.url}/failed`;
  const token = await signQStash(body);
  const forgedToken = hs256(
    { alg: "HS256", typ: "JWT" },
    JSON.stringify({ iss: "Upstash", sub: QSTASH.url }),
    SECRET,
  );
  for (
    const [path, sent, genuine] of [
      ["/v1/qstash", body, token],
      [
        "/v1/qstash/failed",
        callback,
        await signQStash(callback, {
          url: callbackUrl,
        }),
      ],
    ] as const
  ) {
    const other = await signQStash(sent, {
      url: path === "/v1/qstash" ? QSTASH.url : callbackUrl,
      key: QSTASH.nextSigningKey,
    });
    for (
      const [name, values, words] of [
        ["the genuine token twice", [genuine, genuine], JOINED_QSTASH(2)],
        ["a forged token beside it", [forgedToken, genuine], JOINED_QSTASH(2)],
        ["two of QStash's tokens", [genuine, other], JOINED_QSTASH(2)],
        ["three, joined by a bare comma", [
          `${genuine},${forgedToken}`,
          forgedToken,
        ], JOINED_QSTASH(3)],
        // None of them ours: a forgery, as before.
        ["two forged tokens", [forgedToken, forgedToken], QSTASH_REFUSED],
        // More than four values: not looked into, whatever they hold.
        ["five, the genuine one among them", [
          forgedToken,
          forgedToken,
          forgedToken,
          forgedToken,
          genuine,
        ], QSTASH_REFUSED],
      ] as const
    ) {
      const lines: string[] = [];
      const app = await fresh((line) => lines.push(line));
      const headers = new Headers({ "upstash-retried": "0" });
      for (const value of values) headers.append("upstash-signature", value);
      const res = await app.request(path, {
        method: "POST",
        headers,
        body: sent,
      });
      const what = `${path}, ${name}`;
      assert.equal(res.status, 401, what);
      const text = await res.text();
      assert.equal(JSON.parse(text).detail, words, what);
      assert.equal(lines.length, 1, what);
      assert.ok(
        lines[0]!.startsWith(`relayer POST ${path} refused 401: ${words}`),
        `${what}: ${lines[0]}`,
      );
      const ours = words !== QSTASH_REFUSED;
      // Ours: what to put right, and never that the keys are wrong.
      assert.equal(lines[0]!.includes("adds a second Upstash-Signature"), ours);
      assert.equal(lines[0]!.includes("are not the keys"), !ours, what);
      for (const said of [text, lines[0]!]) {
        for (const value of [...SECRETS, genuine, other, forgedToken]) {
          assert.ok(!said.includes(value), `${what} echoes ${value}`);
        }
      }
    }
  }
  // Paced apart from forgeries: a forger's line first does not hide it
  // for the minute.
  const lines: string[] = [];
  const paced = await fresh((line) => lines.push(line));
  for (const values of [[forgedToken], [token, token]]) {
    const headers = new Headers();
    for (const value of values) headers.append("upstash-signature", value);
    const res = await paced.request("/v1/qstash", {
      method: "POST",
      headers,
      body,
    });
    assert.equal(res.status, 401);
  }
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[1]!, /holds 2 values joined with ','/);
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  // Not used up: the genuine token alone is taken.
  const app = await fresh();
  const taken = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": token },
  });
  assert.equal(taken.status, 503, await taken.text());
  assert.equal(sendsOf(sender), 1);
});

Deno.test("POST /v1/qstash reads a token of our keys with a claim given twice by its last value, as the Receiver does, whether its body is read whole or over the route's limit: sub ours then another names the other; exp ahead then past is out of its time; jti given twice is replayed by its last", async () => {
  const { app, writes, sender } = await targetApp();
  const body = JSON.stringify(job);
  const nowS = Math.floor(Date.now() / 1000);
  /** A token of our current key over `signed`, whose claims' JSON is `...claims` and then `twice`. */
  const token = (
    claims: Record<string, unknown>,
    twice: string,
    signed = body,
  ) =>
    hs256(
      { alg: "HS256", typ: "JWT" },
      `${
        JSON.stringify({
          iss: "Upstash",
          sub: QSTASH.url,
          iat: nowS,
          nbf: nowS,
          exp: nowS + 300,
          body: base64url(sha256(encoder.encode(signed)), true),
          ...claims,
        }).slice(0, -1)
      },${twice}}`,
      QSTASH.currentSigningKey,
    );
  const other = "https://forger.example/v1/qstash";
  const cases: [string, Record<string, unknown>, string, string][] = [
    [
      "sub ours, then another",
      { jti: "jti_1" },
      `"sub":"${other}"`,
      `The Upstash-Signature token is QStash's, but signed for ${other}, and this route checks ${QSTASH.url}: publish to this route's URL, or set the service's PUBLIC_URL (createApp's qstash.url, the route's whole URL) so that it is the URL QStash calls.`,
    ],
    [
      "exp ahead, then an hour past",
      { jti: "jti_2" },
      `"exp":${nowS - 3600}`,
      "The Upstash-Signature token is QStash's, for this URL, but expired or not yet valid by this server's clock (past its exp, or before its nbf, by more than 30 seconds).",
    ],
  ];
  for (const [name, claims, twice, detail] of cases) {
    for (const sent of [body, oversized(70_048)]) {
      const what = `${name}, ${sent.length} bytes`;
      const res = await post(app, "/v1/qstash", sent, {
        signature: token(claims, twice, sent),
      });
      assert.equal(res.status, 401, what);
      assert.equal((await res.json()).detail, detail, what);
    }
  }
  assert.equal(writes(), 0);
  // jti "a" then "b": its replay key is "b", so a token whose one jti is
  // "b" is its replay, and one whose jti is "a" is not.
  const twice = token({ jti: "jti_a" }, `"jti":"jti_b"`);
  const send = async (signature: string) => {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: { "upstash-signature": signature },
    });
    return { status: res.status, detail: (await res.json()).detail };
  };
  assert.equal((await send(twice)).status, 503);
  const b = await send(await signQStash(body, { jti: "jti_b" }));
  assert.equal(b.status, 401);
  assert.match(b.detail, /already delivered/);
  assert.notEqual(
    (await send(await signQStash(body, { jti: "jti_a" }))).status,
    401,
  );
  assert.equal(sendsOf(sender), 1);
});

Deno.test("POST /v1/deliveries refuses forged signatures with its words, echoing nothing of them, writing nothing: another secret, v1 cut short, v1 of another t, a byte of the body changed (a byte not UTF-8 too), the header re-spelt as the format does not allow, a forged header or v1 beside the genuine one (each named: two headers joined, v1 first, two v1), the genuine header twice; then the genuine delivery is taken once", async () => {
  const { app: fresh, writes, sender } = await shared();
  const t = NOW / 1000;
  const body = JSON.stringify({ job, note: "caf" });
  // The same body with a Latin-1 é, a byte no UTF-8 text has, and one other.
  const latin1 = Uint8Array.from(
    [...encoder.encode(body)].flatMap((byte, i, all) =>
      i === all.length - 3 ? [byte, 0xe9] : [byte]
    ),
  );
  const otherLatin1 = latin1.slice();
  otherLatin1[otherLatin1.indexOf(0xe9)] = 0xe8;
  const genuine = signHmac(SECRET, body, t);
  const v1 = genuine.split("v1=")[1]!;
  const forged = (
    name: string,
    signature: string | string[],
    detail: string,
    sent: BodyInit = body,
  ): Forgery => {
    const headers = new Headers();
    for (const value of [signature].flat()) {
      headers.append("x-signature", value);
    }
    const macs = [signature].flat().map((value) => value.split("v1=")[1] ?? "")
      .filter((mac) => mac.length > 8);
    return { name, headers, body: sent, detail, secret: macs };
  };
  const olderV1 = signHmac(SECRET, body, t - 1).split("v1=")[1]!;
  await refuseAll(fresh, "/v1/deliveries", [
    forged(
      "another secret",
      signHmac("another-secret-0123456789", body, t),
      NOT_VERIFIED,
    ),
    forged(
      "v1 cut short by one digit",
      `t=${t},v1=${v1.slice(0, 63)}`,
      MALFORMED,
    ),
    forged("v1 of the second before", `t=${t},v1=${olderV1}`, NOT_VERIFIED),
    forged(
      "a byte of the body changed",
      genuine,
      NOT_VERIFIED,
      body.replace("caf", "cag"),
    ),
    forged(
      // Both bytes read as U+FFFD: only a check of the bytes tells them apart.
      "bytes not UTF-8 signed, another such byte sent",
      hmacSignature(SECRET, latin1, t),
      NOT_VERIFIED,
      otherLatin1,
    ),
    forged("a space before the comma", `t=${t} ,v1=${v1}`, MALFORMED),
    forged("T in capitals", `T=${t},v1=${v1}`, MALFORMED),
    forged("v1 first", `v1=${v1},t=${t}`, V1_FIRST),
    forged("a prefix", `sha256=t=${t},v1=${v1}`, MALFORMED),
    forged("a v0 beside it", `t=${t},v0=${"0".repeat(64)},v1=${v1}`, MALFORMED),
    forged(
      "a forged header beside the genuine one",
      [`t=${t},v1=${"0".repeat(64)}`, genuine],
      JOINED,
    ),
    forged("the genuine header twice", [genuine, genuine], JOINED),
    forged(
      "a forged v1 beside the genuine one",
      `t=${t},v1=${"0".repeat(64)},v1=${v1}`,
      TWO_V1,
    ),
    forged(
      "the genuine v1 beside a forged one",
      `t=${t},v1=${v1},v1=${"0".repeat(64)}`,
      TWO_V1,
    ),
  ]);
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  const taken = await (await fresh()).request("/v1/deliveries", {
    method: "POST",
    body,
    headers: { "x-signature": genuine },
  });
  assert.equal(taken.status, 503, await taken.text());
  assert.equal(sendsOf(sender), 1);
});

Deno.test("POST /v1/pubsub refuses forged pushes with its words, echoing nothing of the token or the claims a forger chose, writing nothing: another audience, issuer or email, email_verified false, the forger's RSA or EC key under Google's kid; then the genuine push is taken once", async () => {
  const { app: fresh, writes, sender } = await shared();
  const google = await theGoogle();
  const kid = (google.jwks[0] as { kid: string }).kid;
  const nowS = Math.floor(Date.now() / 1000);
  const pair = await forgerKeys();
  const forgerInput = `${jwtPart({ alg: "RS256", typ: "JWT", kid })}.${
    jwtPart(googleClaims(nowS))
  }`;
  const forgerToken = `${forgerInput}.${
    base64url(
      new Uint8Array(
        await crypto.subtle.sign(
          "RSASSA-PKCS1-v1_5",
          pair.privateKey,
          encoder.encode(forgerInput),
        ),
      ),
    )
  }`;
  // A key of another kind: ES256, by an EC key of the forger's.
  const ec = await crypto.subtle.generateKey(
    { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["sign"],
  );
  const ecInput = `${jwtPart({ alg: "ES256", typ: "JWT", kid })}.${
    jwtPart(googleClaims(nowS))
  }`;
  const ecToken = `${ecInput}.${
    base64url(
      new Uint8Array(
        await crypto.subtle.sign(
          { name: "ECDSA", hash: "SHA-256" },
          ec.privateKey,
          encoder.encode(ecInput),
        ),
      ),
    )
  }`;
  const body = envelope(job, { deliveryAttempt: 1 });
  const forged = (
    name: string,
    token: string,
    chosen: string[] = [],
  ): Forgery => ({
    name,
    headers: { authorization: `Bearer ${token}` },
    body,
    detail: PUSH_REFUSED,
    secret: [...echoesOf(token), ...chosen],
  });
  const audience = "https://forger.example/v1/pubsub";
  const email = "forger@evil-project.iam.gserviceaccount.com";
  const issuer = "https://issuer.forger.example";
  await refuseAll(fresh, "/v1/pubsub", [
    forged("another audience", await google.token({ aud: audience }), [
      audience,
    ]),
    forged("another issuer", await google.token({ iss: issuer }), [issuer]),
    forged("another email", await google.token({ email }), [email]),
    forged(
      "email_verified false",
      await google.token({ email_verified: false }),
    ),
    forged("the forger's key under Google's kid", forgerToken),
    forged("ES256 by the forger's EC key under Google's kid", ecToken),
  ]);
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  const taken = await (await fresh()).request("/v1/pubsub", {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${await google.token()}` },
  });
  assert.equal(taken.status, 503, await taken.text());
  assert.equal(sendsOf(sender), 1);
});

Deno.test("POST /v1/pubsub names in its log an Authorization header of two values, one of them the service account's token (two headers joined with ', ', a proxy having added one), apart from forgeries; still refused in the same words, writing nothing; a header of more than four values, or with no token of the account, is refused as before; the genuine token then taken", async () => {
  const { app: fresh, writes, sender } = await shared();
  const google = await theGoogle();
  const body = envelope(job, { deliveryAttempt: 1 });
  const genuine = await google.token();
  const elsewhere = await google.token({
    aud: "https://relayer.example.test/v1/other",
  });
  const stranger = await google.token({
    email: "forger@evil-project.iam.gserviceaccount.com",
  });
  const joinedHint = "adds a second Authorization header";
  for (
    const [name, values, named] of [
      ["the genuine token twice", [genuine, genuine], true],
      ["a stranger's token beside it", [`Bearer ${stranger}`, genuine], true],
      [
        "the account's for another audience",
        [elsewhere, "Basic dXNlcg=="],
        true,
      ],
      ["a stranger's alone beside Basic", [stranger, "Basic dXNlcg=="], false],
      ["five values", [genuine, genuine, genuine, genuine, genuine], false],
    ] as const
  ) {
    const lines: string[] = [];
    const app = await fresh((line) => lines.push(line));
    const headers = new Headers();
    for (const value of values) {
      headers.append(
        "authorization",
        value.startsWith("Bearer ") || value.startsWith("Basic ")
          ? value
          : `Bearer ${value}`,
      );
    }
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      headers,
      body,
    });
    const text = await res.text();
    assert.equal(res.status, 401, name);
    assert.equal(JSON.parse(text).detail, PUSH_REFUSED, name);
    assert.equal(lines.length, 1, `${name}: ${lines.join("\n")}`);
    assert.equal(lines[0]!.includes(joinedHint), named, `${name}: ${lines[0]}`);
    for (const said of [text, lines[0]!]) {
      for (const value of [...SECRETS, genuine, elsewhere, stranger]) {
        assert.ok(!said.includes(value), `${name} echoes a token`);
      }
    }
  }
  // Paced apart from forgeries: a forger's line first does not hide it.
  const lines: string[] = [];
  const paced = await fresh((line) => lines.push(line));
  for (const values of [[stranger], [genuine, genuine]]) {
    const headers = new Headers();
    for (const value of values) {
      headers.append("authorization", `Bearer ${value}`);
    }
    const res = await paced.request("/v1/pubsub", {
      method: "POST",
      headers,
      body,
    });
    assert.equal(res.status, 401);
  }
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.ok(lines[1]!.includes(joinedHint), lines[1]);
  assert.equal(writes(), 0);
  assert.equal(sendsOf(sender), 0);
  const taken = await (await fresh()).request("/v1/pubsub", {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${genuine}` },
  });
  assert.equal(taken.status, 503, await taken.text());
  assert.equal(sendsOf(sender), 1);
});
