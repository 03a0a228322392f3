/**
 * What a forger who can reach the webhook but holds no secret may try with
 * requests it captured or made up: a valid delivery replayed on another
 * instance, after a restart or past its window; a signature of one route
 * on another; headers sent twice; tokens whose algorithm, issuer or times
 * are bent. Each is refused, and the store is not touched.
 *
 * @module
 */

import assert from "node:assert/strict";
import { sign } from "hono/jwt";
import { KvStore } from "../../store/kv.ts";
import {
  AUTHORIZED,
  genericRequest,
  makeApp,
  NOW,
  SECRET,
  theGoogle,
} from "./_app.ts";
import {
  envelope,
  googleClaims,
  jwtPart,
  PUBSUB,
  QSTASH,
  signHmac,
  signQStash,
} from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("a captured generic delivery is refused on another instance over the same store, after a restart, and past its window", async () => {
  using kv = await Deno.openKv(":memory:");
  await new KvStore(kv).createIntent(AUTHORIZED);
  const scripts = { pi_0001: { sends: [{ txHash: "0xabc" }] } };
  const first = await makeApp({ deps: { store: new KvStore(kv) }, scripts });
  const init = await genericRequest(JSON.stringify({ job, delivery: 1 }));
  const delivered = await first.app.request("/v1/deliveries", { ...init });
  assert.equal(delivered.status, 503, "sent, waiting for the receipt");
  await delivered.body?.cancel();
  // Another instance, and one started afresh: the record is in the store.
  for (const name of ["another instance", "after a restart"]) {
    const { app, sender } = await makeApp({
      deps: { store: new KvStore(kv) },
      scripts,
    });
    const replay = await app.request("/v1/deliveries", { ...init });
    assert.equal(replay.status, 401, name);
    assert.match((await replay.json()).detail, /already delivered/, name);
    assert.deepEqual(sender.calls, [], name);
  }
  // Past the window, the timestamp refuses it before any record is read.
  const later = await makeApp({
    deps: { store: new KvStore(kv), now: () => NOW + 5 * 60_000 + 1000 },
  });
  const stale = await later.app.request("/v1/deliveries", { ...init });
  assert.equal(stale.status, 401);
  assert.match((await stale.json()).detail, /more than 5 minutes old/);
  assert.equal(await new KvStore(kv).deliveries("pi_0001/settle"), 0);
});

Deno.test("a signature of one route is refused on another: QStash's on the generic route and back, the failure callback's on /v1/qstash and back", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const body = JSON.stringify(job);
  const generic = JSON.stringify({ job });
  const failed = JSON.stringify({
    retried: 3,
    sourceMessageId: "msg_1",
    sourceBody: btoa(body),
  });
  const cases: [string, string, string, Record<string, string>][] = [
    ["QStash's token as X-Signature", "/v1/deliveries", generic, {
      "x-signature": await signQStash(generic),
    }],
    ["an HMAC as Upstash-Signature", "/v1/qstash", body, {
      "upstash-signature": signHmac(SECRET, body, NOW / 1000),
    }],
    ["the failure callback's token on /v1/qstash", "/v1/qstash", body, {
      "upstash-signature": await signQStash(body, {
        url: `${QSTASH.url}/failed`,
      }),
    }],
    ["a delivery's token on /v1/qstash/failed", "/v1/qstash/failed", failed, {
      "upstash-signature": await signQStash(failed),
    }],
    ["a token for the URL with a trailing slash", "/v1/qstash", body, {
      "upstash-signature": await signQStash(body, { url: `${QSTASH.url}/` }),
    }],
    ["a token for the URL in capitals", "/v1/qstash", body, {
      "upstash-signature": await signQStash(body, {
        url: QSTASH.url.toUpperCase(),
      }),
    }],
  ];
  for (const [name, path, sent, headers] of cases) {
    const res = await app.request(path, {
      method: "POST",
      body: sent,
      headers,
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
});

Deno.test("a valid signature sent twice in one request is refused: two Upstash-Signature or X-Signature headers are one value, which verifies as neither", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const body = JSON.stringify(job);
  const token = await signQStash(body);
  const qstash = new Headers();
  qstash.append("upstash-signature", token);
  qstash.append("upstash-signature", token);
  const generic = JSON.stringify({ job });
  const mac = signHmac(SECRET, generic, NOW / 1000);
  const hmac = new Headers();
  hmac.append("x-signature", mac);
  hmac.append("x-signature", mac);
  for (
    const [path, sent, headers] of [
      ["/v1/qstash", body, qstash],
      ["/v1/deliveries", generic, hmac],
    ] as const
  ) {
    const res = await app.request(path, {
      method: "POST",
      body: sent,
      headers,
    });
    assert.equal(res.status, 401, path);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
});

Deno.test("tokens with a bent algorithm, issuer or time are refused: alg none, HS256 keyed with Google's public key, an http issuer, no exp, a future nbf; QStash's alg none and a lower-case issuer", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const google = await theGoogle();
  const key = google.jwks[0] as JsonWebKey & { kid: string; n: string };
  const nowS = Math.floor(Date.now() / 1000);
  const claims = googleClaims(nowS);
  const unsigned = `${jwtPart({ alg: "none", typ: "JWT", kid: key.kid })}.${
    jwtPart(claims)
  }`;
  // The classic confusion: the public key's bytes as an HMAC secret.
  const asSecret = async (secret: string) => {
    const [, payload, mac] = (await sign(claims, secret, "HS256")).split(".");
    return `${
      jwtPart({ alg: "HS256", typ: "JWT", kid: key.kid })
    }.${payload}.${mac}`;
  };
  const pushes: [string, string][] = [
    ["alg none, no signature", `${unsigned}.`],
    ["alg none, a signature", `${unsigned}.AAAA`],
    ["HS256 keyed with the key's n", await asSecret(key.n)],
    ["HS256 keyed with the JWK", await asSecret(JSON.stringify(key))],
    [
      "an http issuer",
      await google.token({ iss: "http://accounts.google.com" }),
    ],
    ["no exp", await google.token({ exp: undefined })],
    ["nbf an hour ahead", await google.token({ nbf: nowS + 3600 })],
    ["iat an hour ahead", await google.token({ iat: nowS + 3600 })],
  ];
  for (const [name, token] of pushes) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  const body = JSON.stringify(job);
  const [, qstashClaims] = (await signQStash(body)).split(".");
  const upstash = JSON.parse(atob(
    qstashClaims!.replaceAll("-", "+").replaceAll("_", "/"),
  ));
  const qstash: [string, string][] = [
    [
      "alg none",
      `${jwtPart({ alg: "none", typ: "JWT" })}.${qstashClaims}.`,
    ],
    [
      "issuer 'upstash'",
      await sign({ ...upstash, iss: "upstash" }, QSTASH.currentSigningKey),
    ],
  ];
  for (const [name, token] of qstash) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: { "upstash-signature": token },
    });
    assert.equal(res.status, 401, name);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
});

Deno.test("a Google token whose email is the service account's only by Unicode case folding is refused", async () => {
  // U+212A KELVIN SIGN lower-cases to "k": "wor\u212Aer@…" is another
  // address, which only the full Unicode fold makes equal to "worker@…".
  const serviceAccount = "worker@project.iam.gserviceaccount.com";
  const folded = "wor\u212Aer@project.iam.gserviceaccount.com";
  assert.equal(folded.toLowerCase(), serviceAccount);
  const google = await theGoogle();
  const { app, writes } = await makeApp({
    intents: [AUTHORIZED],
    deps: {
      pubsub: { audience: PUBSUB.audience, jwks: google.jwks, serviceAccount },
    },
  });
  const push = async (token: string) => {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${token}` },
    });
    await res.body?.cancel();
    return res.status;
  };
  assert.equal(await push(await google.token({ email: folded })), 401);
  assert.equal(writes(), 0);
  // The account in ASCII capitals is still the account.
  assert.equal(
    await push(await google.token({ email: serviceAccount.toUpperCase() })),
    503,
  );
});

Deno.test("a request its headers refuse is answered without its body being read: a forged or unsigned delivery whose body never ends gets its 401 at once, with a Content-Length or without", async () => {
  const { app, writes } = await makeApp({ intents: [AUTHORIZED] });
  const madeUp = await signQStash("{}", { key: "sig_made_up_key" });
  const forged: [string, string, Record<string, string>][] = [
    ["unsigned", "/v1/deliveries", {}],
    ["malformed", "/v1/deliveries", { "x-signature": "sha256=abc" }],
    // (A well-formed header signed 10 minutes ago is not refused unread:
    // only its MAC tells the sender's, whose clock is off, from a forger's,
    // and a forger's in time is read as long.)
    ["unsigned", "/v1/qstash", {}],
    // A made-up token: its MAC is checked without the body.
    ["made-up key", "/v1/qstash", { "upstash-signature": madeUp }],
    ["unsigned", "/v1/qstash/failed", {}],
    ["unsigned", "/v1/pubsub", {}],
    ["unsigned", "/v1/pubsub/dead-letter", {}],
    ["wrong token", "/v1/intents", { authorization: "Bearer not-ours" }],
    ["no token", "/v1/jobs", {}],
  ];
  const answers: string[] = [];
  const expected: string[] = [];
  for (const [what, path, headers] of forged) {
    for (const length of [{ "content-length": "100" }, {}]) {
      const name = `${path} ${what}${
        "content-length" in length ? ", Content-Length" : ", chunked"
      }`;
      let pulled = 0;
      let stream!: ReadableStreamDefaultController<Uint8Array>;
      // Some bytes, then nothing: a client that never finishes its body.
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          stream = controller;
          controller.enqueue(new TextEncoder().encode('{"job":'));
        },
        pull() {
          pulled++;
          return new Promise<void>(() => {});
        },
      });
      const answered = Promise.resolve(
        app.request(path, {
          method: "POST",
          body,
          headers: { ...headers, ...length },
        }),
      );
      let timer: ReturnType<typeof setTimeout> | undefined;
      const first = await Promise.race([
        answered,
        new Promise<"no answer">((resolve) => {
          timer = setTimeout(() => resolve("no answer"), 1000);
        }),
      ]);
      clearTimeout(timer);
      // Whatever the answer, the body ends now, so no request is left open.
      stream.error(new Error("connection reset"));
      await (await answered).body?.cancel();
      answers.push(
        `${name}: ${first instanceof Response ? first.status : first}, ${
          pulled === 0 ? "body unread" : "body read"
        }`,
      );
      // The dead-letter route is not configured here: refused all the same.
      const status = path === "/v1/pubsub/dead-letter" ? 503 : 401;
      expected.push(`${name}: ${status}, body unread`);
    }
  }
  assert.deepEqual(answers, expected);
  assert.equal(writes(), 0);
});
