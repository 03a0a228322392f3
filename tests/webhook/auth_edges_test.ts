/**
 * The signature and replay checks at their edges: what a forger could try
 * that the route tests do not, each refused.
 *
 * @module
 */

import assert from "node:assert/strict";
import { sha256 } from "@noble/hashes/sha2.js";
import {
  qstashVerifier,
  timingSafeEqual,
  tokenMatcher,
} from "../../webhook/_auth.ts";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { QSTASH, signQStash } from "./_signing.ts";
import { refusal, refusedSetting } from "./_config.ts";
import { AUTHORIZED, makeApp } from "./_app.ts";
import { authorized, FAILED_URL, job } from "./_oversized_qstash.ts";

const body = JSON.stringify({ intentId: "pi_0001", kind: "settle" });

Deno.test("timingSafeEqual() takes equal strings only: never a prefix, an empty string against a secret, or a string with NULs after it", () => {
  assert.equal(timingSafeEqual("abc", "abc"), true);
  assert.equal(timingSafeEqual("", ""), true);
  for (
    const [a, b] of [
      ["abc", "ab"],
      ["ab", "abc"],
      ["", "secret"],
      ["abc", "abc\0"],
      ["abc", "abd"],
    ]
  ) {
    assert.equal(timingSafeEqual(a!, b!), false, JSON.stringify([a, b]));
  }
});

Deno.test("tokenMatcher() compares inputs of one fixed length, once for each token, whatever the length or content of the token presented", () => {
  const current = "the-current-ops-token-0123";
  const next = "the-next-ops-token-4567-and-longer";
  for (const tokens of [[current], [current, next]]) {
    const compared: [number, number][] = [];
    const matches = tokenMatcher(tokens, {
      equal: (a, b) => {
        compared.push([a.length, b.length]);
        return timingSafeEqual(a, b);
      },
    });
    const presented = [
      "",
      "x",
      current.slice(0, -1),
      current,
      `${current}x`,
      next,
      "é".repeat(40),
      "y".repeat(8_000),
    ];
    for (const token of presented) {
      compared.length = 0;
      const matched = matches(token);
      assert.equal(matched, tokens.includes(token), JSON.stringify(token));
      // Every comparison is of two inputs of the same length, the same for
      // every token presented: its length and content change no loop.
      assert.deepEqual(
        compared,
        tokens.map(() => [32, 32]),
        `${token.length} characters against ${tokens.length} token(s)`,
      );
    }
  }
});

Deno.test("qstashVerifier() refuses a token whose MAC is cut short or empty, whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const good = await signQStash(body);
  const input = good.slice(0, good.lastIndexOf("."));
  const mac = good.slice(good.lastIndexOf(".") + 1);
  for (const cut of ["", mac.slice(0, 1), mac.slice(0, 42)]) {
    const token = `${input}.${cut}`;
    const name = `MAC of ${cut.length} characters`;
    assert.ok(verify.precheck(token), name);
    assert.ok(verify.checkClaims(token), name);
    assert.equal(verify.verifyDigest(token, hash).ok, false, name);
    assert.equal((await verify(token, body)).ok, false, name);
  }
});

Deno.test("qstashVerifier() refuses a token one of its keys signed for another host, scheme or spelling of the URL, whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const path = new URL(QSTASH.url).pathname;
  for (
    const url of [
      `https://other-service.example.test${path}`,
      QSTASH.url.replace("https:", "http:"),
      QSTASH.url.replace("https://relayer", "HTTPS://RELAYER"),
      `${QSTASH.url}/`,
    ]
  ) {
    const token = await signQStash(body, { url });
    assert.equal((await verify(token, body)).ok, false, url);
    assert.ok(verify.checkClaims(token), url);
    assert.equal(verify.verifyDigest(token, hash).ok, false, url);
  }
  // The URL as configured verifies both ways.
  const token = await signQStash(body);
  assert.equal((await verify(token, body)).ok, true);
  assert.equal(verify.checkClaims(token), undefined);
  assert.equal(verify.verifyDigest(token, hash).ok, true);
});

/** Waits, if need be, until the wall clock is early in a second: a check made now reads the same whole second. */
async function earlyInASecond(): Promise<number> {
  const ms = Date.now() % 1000;
  if (ms > 500) await new Promise((ok) => setTimeout(ok, 1010 - ms));
  return Math.floor(Date.now() / 1000);
}

Deno.test("qstashVerifier() takes a token to the very second the Receiver does, and not one second more, whether the body is read whole or by its digest: exp 30 s ago refused, 29 s taken; nbf 30 s ahead taken, 31 s refused", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const nowS = await earlyInASecond();
  const cases: [string, Parameters<typeof signQStash>[1], boolean][] = [
    ["exp 29 s ago", { nowS: nowS - 329, ttlS: 300 }, true],
    ["exp 30 s ago", { nowS: nowS - 330, ttlS: 300 }, false],
    ["nbf 30 s ahead", { nowS: nowS + 30 }, true],
    ["nbf 31 s ahead", { nowS: nowS + 31 }, false],
  ];
  for (const [name, options, taken] of cases) {
    const token = await signQStash(body, options);
    assert.equal(Math.floor(Date.now() / 1000), nowS, "still the same second");
    // Refused, each says the clock refused it.
    const said = taken ? "taken" : OUT_OF_TIME;
    const answers = [
      await verify(token, body),
      verify.checkClaims(token),
      verify.verifyDigest(token, hash),
    ];
    assert.deepEqual(answers.map(detailOf), [said, said, said], name);
  }
});

const OUT_OF_TIME =
  "The Upstash-Signature token is QStash's, for this URL, but expired or not yet valid by this server's clock (past its exp, or before its nbf, by more than 30 seconds).";

/** A verifier's answer, as its refusal's detail or "taken". */
function detailOf(
  answer: { ok: boolean; detail?: string } | undefined,
): string | undefined {
  return answer === undefined || answer.ok ? "taken" : answer.detail;
}

/** What a verifier answered, as one line: its refusal's detail and hint, or "taken". */
function said(
  answer: { ok: boolean; detail?: string; hint?: string } | undefined,
): string {
  return answer === undefined || answer.ok
    ? "taken"
    : `${answer.detail} ${answer.hint ?? ""}`.trim();
}

Deno.test("qstashVerifier() refuses a token whose jti is over 200 characters or whose exp is not a whole number of seconds: no replay record could be kept for it", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const nowS = Math.floor(Date.now() / 1000);
  const taken = await verify(
    await signQStash(body, { jti: "j".repeat(200) }),
    body,
  );
  assert.equal(taken.ok, true, "a jti of 200 characters");
  const cases: [string, Parameters<typeof signQStash>[1]][] = [
    ["a jti of 201 characters", { jti: "j".repeat(201) }],
    ["exp with a fraction", { extra: { exp: nowS + 300.5 } }],
    ["exp past 2^53", { extra: { exp: 2 ** 60 } }],
  ];
  for (const [name, options] of cases) {
    const answer = await verify(await signQStash(body, options), body);
    assert.equal(answer.ok, false, name);
    if (!answer.ok) {
      assert.match(answer.detail, /no usable 'jti' and 'exp'/, name);
    }
  }
});

const NO_REPLAY_KEY =
  "The Upstash-Signature token has no usable 'jti' and 'exp', so a replay could not be refused: publish through QStash, which sets both.";

Deno.test("qstashVerifier() says a token of its keys for this URL with no exp, or no jti, has no usable 'jti' and 'exp', whether its body is read whole, as bytes not UTF-8 or by its digest, the signed body or another; POST /v1/qstash and its failure callback say so, within the limit and over it, and write nothing", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const encoder = new TextEncoder();
  // {"intentId":"pi_0001","kind":"settle","note":"caf<E9>"}: no text's UTF-8.
  const latin1 = new Uint8Array([
    ...encoder.encode('{"intentId":"pi_0001","kind":"settle","note":"caf'),
    0xe9,
    ...encoder.encode('"}'),
  ]);
  const large = job(70_048);
  const tokens: [string, Parameters<typeof signQStash>[1]][] = [
    ["no exp", { extra: { exp: undefined } }],
    ["no jti", { jti: null }],
  ];
  const bodies: [
    string,
    string | Uint8Array<ArrayBuffer>,
    string | Uint8Array<ArrayBuffer>,
  ][] = [
    ["the signed body", body, body],
    ["another body", `${body} `, body],
    ["bytes not UTF-8", latin1, latin1],
    ["a body over the route's limit", large, large],
  ];
  const { app, writes } = await makeApp({ intents: [AUTHORIZED, authorized] });
  for (const [token, options] of tokens) {
    for (const [what, signed, sent] of bodies) {
      const name = `${token}, ${what}`;
      const signature = await signQStash(signed, options);
      const hash = sha256(
        typeof sent === "string" ? encoder.encode(sent) : sent,
      );
      assert.deepEqual(
        [
          await verify(signature, sent),
          verify.checkClaims(signature),
          verify.verifyDigest(signature, hash),
        ].map(detailOf),
        [NO_REPLAY_KEY, NO_REPLAY_KEY, NO_REPLAY_KEY],
        name,
      );
      // Through the app, on QStash's route and its failure callback's.
      for (const path of ["/v1/qstash", "/v1/qstash/failed"]) {
        const res = await app.request(path, {
          method: "POST",
          body: sent,
          headers: {
            "upstash-signature": path === "/v1/qstash"
              ? signature
              : await signQStash(signed, { ...options, url: FAILED_URL }),
          },
        });
        assert.equal(res.status, 401, `${path}, ${name}`);
        assert.equal(
          (await res.json()).detail,
          NO_REPLAY_KEY,
          `${path}, ${name}`,
        );
      }
    }
  }
  assert.equal(writes(), 0);
});

Deno.test("createApp() refuses a QStash signing key shorter than 16 characters, current or next, as the service's QSTASH_* settings are: a forger who guesses it signs any delivery", async () => {
  // What a forger would send had "dev-key" been taken: a token HS256-signed
  // with the guessed key, for this route's URL and this body.
  const guessed = await signQStash(body, { key: "dev-key" });
  for (const key of ["currentSigningKey", "nextSigningKey"] as const) {
    const qstash = { ...QSTASH, [key]: "dev-key" };
    assert.throws(
      () => qstashVerifier(qstash),
      (error) =>
        error instanceof TypeError &&
        error.message ===
          `Cannot verify QStash deliveries as '${key}' is 7 characters long: a key that short can be found by trying, and whoever finds it signs any delivery. Copy the whole key from the QStash console's signing keys (the service's QSTASH_* settings have the same rule)` &&
        !error.message.includes("dev-key"),
      key,
    );
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          qstash,
        }),
      TypeError,
      key,
    );
  }
  // At 15 characters a key is refused, at 16 it is taken, and a token
  // under another is refused.
  assert.throws(
    () => qstashVerifier({ ...QSTASH, currentSigningKey: "k".repeat(15) }),
    /^TypeError: Cannot verify QStash deliveries as 'currentSigningKey' is 15 characters long: /,
  );
  const verify = qstashVerifier({ ...QSTASH, nextSigningKey: "k".repeat(16) });
  assert.equal((await verify(guessed, body)).ok, false);
  assert.equal(
    (await verify(await signQStash(body, { key: "k".repeat(16) }), body)).ok,
    true,
  );
});

Deno.test("a QStash signing key anyone can read (a local QStash's) is refused for a URL off this machine, by createApp and at start, and taken on loopback: a forger signs with it", async () => {
  const published = [
    // @upstash/qstash's dev server (the QStash CLI's `dev`).
    ["sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r", "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs"],
    // deno task qstash-local's, printed for copying.
    ["sig_local_current_0123456789", "sig_local_next_0123456789"],
  ] as const;
  for (const [current, next] of published) {
    for (
      const keys of [
        { currentSigningKey: current, nextSigningKey: QSTASH.nextSigningKey },
        { currentSigningKey: QSTASH.currentSigningKey, nextSigningKey: next },
      ]
    ) {
      const which = keys.currentSigningKey === current
        ? "currentSigningKey"
        : "nextSigningKey";
      assert.throws(
        () =>
          createApp({
            store: new MemoryStore(),
            sender: new ScriptedSender({}),
            qstash: { ...keys, url: QSTASH.url },
          }),
        (error) =>
          error instanceof TypeError &&
          error.message ===
            `Cannot verify QStash deliveries as '${which}' is a published key (a local QStash's, which anyone can read) and 'url' is not on this machine: anyone could sign a delivery to ${QSTASH.url}. Copy both keys from the QStash console's signing keys` &&
          !error.message.includes(current) && !error.message.includes(next),
        `${which} ${current}`,
      );
      // On loopback, where a local QStash delivers, it is taken.
      const url = "http://127.0.0.1:8000/v1/qstash";
      const verify = qstashVerifier({ ...keys, url });
      const token = await signQStash(body, { key: current, url });
      assert.equal(
        (await verify(token, body)).ok,
        which === "currentSigningKey",
      );
    }
    const env = {
      SENDER_URL: "http://127.0.0.1:9000",
      QSTASH_CURRENT_SIGNING_KEY: current,
      QSTASH_NEXT_SIGNING_KEY: next,
    };
    for (
      const publicUrl of ["https://relayer.example.com", "http://10.0.0.5:8000"]
    ) {
      const error = refusal({ ...env, PUBLIC_URL: publicUrl });
      assert.equal(error.setting, "QSTASH_CURRENT_SIGNING_KEY", publicUrl);
      assert.equal(
        error.message,
        "QSTASH_CURRENT_SIGNING_KEY is a published key (a local QStash's: the QStash CLI dev server's, or deno task qstash-local's), which anyone can sign with, and PUBLIC_URL is not on this machine: copy both signing keys from the QStash console",
      );
    }
    for (
      const publicUrl of [
        "http://127.0.0.1:8000",
        "http://localhost:8000",
        "http://[::1]:8000",
      ]
    ) {
      assert.equal(
        refusedSetting({ ...env, PUBLIC_URL: publicUrl }),
        null,
        publicUrl,
      );
    }
  }
});

Deno.test("a published QStash key is taken for a URL on a name under localhost, and refused for one that only starts as a loopback address or cannot be read as a URL", () => {
  const keys = {
    currentSigningKey: "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r",
    nextSigningKey: QSTASH.nextSigningKey,
  };
  // RFC 6761: every name under localhost is this machine.
  qstashVerifier({ ...keys, url: "http://relayer.localhost:8000/v1/qstash" });
  assert.equal(
    refusedSetting({
      SENDER_URL: "http://127.0.0.1:9000",
      QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey,
      PUBLIC_URL: "http://relayer.localhost:8000",
    }),
    null,
  );
  // A public name whose labels begin as 127.0.0.1 (a wildcard DNS name)
  // is not this machine; a URL no parser reads is refused as no URL.
  assert.throws(
    () =>
      qstashVerifier({ ...keys, url: "http://relayer .example.com/v1/qstash" }),
    /^TypeError: Cannot verify QStash deliveries as 'url' is not an http\(s\) URL/,
  );
  for (const url of ["https://127.0.0.1.nip.io/v1/qstash"]) {
    assert.throws(
      () => qstashVerifier({ ...keys, url }),
      new TypeError(
        `Cannot verify QStash deliveries as 'currentSigningKey' is a published key (a local QStash's, which anyone can read) and 'url' is not on this machine: anyone could sign a delivery to ${url}. Copy both keys from the QStash console's signing keys`,
      ),
      url,
    );
  }
  const error = refusal({
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey,
    PUBLIC_URL: "https://127.0.0.1.nip.io",
  });
  assert.equal(error.setting, "QSTASH_CURRENT_SIGNING_KEY");
});

/** A local QStash's published keys, which anyone can read. */
const PUBLISHED = {
  currentSigningKey: "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r",
  nextSigningKey: "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs",
};

/** The message of `qstashVerifier()`'s refusal of `url`, or "" if taken. */
function urlRefusal(
  keys: { currentSigningKey: string; nextSigningKey: string },
  url: string,
): string {
  try {
    qstashVerifier({ ...keys, url });
  } catch (error) {
    assert.ok(error instanceof TypeError);
    return error.message;
  }
  return "";
}

Deno.test("qstashVerifier()'s refusal of its url names it by its scheme, host and path, never its credentials, query or fragment: a URL that carries a password is not echoed whole", () => {
  for (
    const [keys, url] of [
      // A published key, for a URL off this machine.
      [PUBLISHED, "https://relayer:hunter2-pass@relayer.example/v1/qstash"],
      [PUBLISHED, "https://relayer.example/v1/qstash?token=hunter2-pass"],
      // Another scheme than http(s).
      [QSTASH, "ftp://relayer:hunter2-pass@relayer.example/v1/qstash"],
    ] as const
  ) {
    const message = urlRefusal(keys, url);
    assert.match(message, /^Cannot verify QStash deliveries as /, url);
    assert.ok(!message.includes("hunter2"), message);
    assert.ok(message.includes("relayer.example/v1/qstash"), message);
  }
});

Deno.test("qstashVerifier()'s answer to a token of its keys signed for another URL names its own url by scheme, host and path, never the query, fragment or credentials that url carries: the answer goes to whoever holds such a token", async () => {
  for (
    const url of [
      "https://relayer.example/v1/qstash?token=hunter2-tok",
      "https://relayer.example/v1/qstash#hunter2-frag",
      "https://relay:hunter2-pass@relayer.example/v1/qstash",
    ]
  ) {
    const verify = qstashVerifier({ ...QSTASH, url });
    const other = "https://staging.example/v1/qstash";
    const token = await signQStash(body, { url: other });
    for (
      const answer of [
        await verify(token, body),
        verify.checkClaims(token) ?? { ok: true as const },
      ]
    ) {
      assert.equal(answer.ok, false, url);
      if (answer.ok) continue;
      assert.equal(answer.kind, "url", url);
      assert.ok(
        answer.detail.includes(
          `this route checks https://relayer.example/v1/qstash (its credentials, query and fragment left unsaid)`,
        ),
        answer.detail,
      );
      assert.ok(!answer.detail.includes("hunter2"), answer.detail);
    }
  }
});

Deno.test("createApp() refuses a qstash.url that carries a query or fragment, naming it without them: its failure callback's URL, this one with /failed after it, would be cut in two, and every give-up refused; a failure callback signed for that URL was refused 401 before", () => {
  for (
    const url of [
      "https://relayer.example/v1/qstash?token=hunter2-tok",
      "https://relayer.example/v1/qstash#hunter2-frag",
    ]
  ) {
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          qstash: { ...QSTASH, url },
        }),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message.startsWith(
          "Cannot create app as 'qstash.url' carries a query or fragment: current value is https://relayer.example/v1/qstash (its credentials, query and fragment left unsaid). POST /v1/qstash/failed checks",
        ) && !error.message.includes("hunter2"),
      url,
    );
  }
  assert.throws(
    () =>
      createApp({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        qstash: { ...QSTASH, url: "https://relayer.example/v1/qstash?" },
      }),
    /^TypeError: Cannot create app as 'qstash\.url' carries a query or fragment: /,
  );
  // The route's URL alone is taken.
  createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    qstash: { ...QSTASH, url: "https://relayer.example/v1/qstash" },
  });
});

Deno.test("qstashVerifier() refuses a url that is no URL (a colon left out, a space in its host) without echoing its credentials or query: it was echoed whole, or taken and every delivery refused", () => {
  for (
    const url of [
      "https//relayer:hunter2-pass@relayer.example/v1/qstash?token=hunter2-tok",
      "http://relay er.example/v1/qstash?token=hunter2-tok#hunter2-frag",
      "https://relayer.example:99999/v1/qstash?token=hunter2-tok",
    ]
  ) {
    for (const keys of [QSTASH, PUBLISHED]) {
      const message = urlRefusal(keys, url);
      assert.match(
        message,
        /^Cannot verify QStash deliveries as 'url' is not an http\(s\) URL/,
        url,
      );
      assert.ok(!message.includes("hunter2"), message);
      assert.ok(message.includes("/v1/qstash"), message);
    }
  }
});

Deno.test("the secrets the docs give for a local run are refused at start on Deno Deploy or with a PUBLIC_URL off this machine, and taken on loopback: a forger signs deliveries and opens the ops routes with them", () => {
  const local = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "local-secret-0123456789",
    OPS_TOKEN: "local-ops-token-0123456789",
  };
  const keys = {
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
  };
  const deploy = {
    DENO_DEPLOYMENT_ID: "deployment",
    DENO_KV_DEFAULT_PATH: "https://kv.example.test/databases/db/connect",
  };
  const where: [string, Record<string, string>][] = [
    ["on Deno Deploy", deploy],
    [
      "reached at PUBLIC_URL, off this machine",
      { ...keys, PUBLIC_URL: "https://relayer.example.com" },
    ],
  ];
  for (const [place, env] of where) {
    for (
      const [setting, value] of [
        ["WEBHOOK_SECRET", local.WEBHOOK_SECRET],
        ["WEBHOOK_SECRET_NEXT", local.WEBHOOK_SECRET],
        ["OPS_TOKEN", local.OPS_TOKEN],
      ] as const
    ) {
      const own = {
        SENDER_URL: local.SENDER_URL,
        WEBHOOK_SECRET: "own-secret-0123456789abcdef",
        OPS_TOKEN: "own-ops-token-0123456789abcdef",
        ...env,
        [setting]: value,
      };
      const error = refusal(own);
      assert.equal(error.setting, setting, `${setting} ${place}`);
      assert.equal(
        error.message,
        `${setting} is a value the docs give for a local run, which anyone can read, and this service is ${place}: generate a random one, such as with: openssl rand -base64 32`,
      );
    }
  }
  // On loopback, as the docs run it, they are taken.
  assert.equal(refusedSetting(local), null);
  assert.equal(
    refusedSetting({ ...local, ...keys, PUBLIC_URL: "http://127.0.0.1:8000" }),
    null,
  );
});

Deno.test("on Deno Deploy a local QStash's published signing key is refused at start whatever PUBLIC_URL says, a loopback one too: a forger signs for that URL all the same", () => {
  const deploy = {
    SENDER_URL: "http://127.0.0.1:9000",
    DENO_DEPLOYMENT_ID: "deployment",
    DENO_KV_DEFAULT_PATH: "https://kv.example.test/databases/db/connect",
    QSTASH_CURRENT_SIGNING_KEY: "sig_local_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_local_next_0123456789",
  };
  for (
    const publicUrl of ["http://127.0.0.1:8000", "https://relayer.example.com"]
  ) {
    const error = refusal({ ...deploy, PUBLIC_URL: publicUrl });
    assert.equal(error.setting, "QSTASH_CURRENT_SIGNING_KEY", publicUrl);
    assert.equal(
      error.message,
      "QSTASH_CURRENT_SIGNING_KEY is a published key (a local QStash's: the QStash CLI dev server's, or deno task qstash-local's), which anyone can sign with, and this service is on Deno Deploy: copy both signing keys from the QStash console",
    );
  }
  // The console's own keys are taken there.
  assert.equal(
    refusedSetting({
      ...deploy,
      QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
      PUBLIC_URL: "https://relayer.example.com",
    }),
    null,
  );
});

Deno.test("qstashVerifier() says a token one of its keys signed for this URL was refused by the clock, past its exp or before its nbf, and hints at this server's clock, whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const nowS = Math.floor(Date.now() / 1000);
  const cases: [string, Parameters<typeof signQStash>[1]][] = [
    ["an hour past its exp", { nowS: nowS - 3600, ttlS: 300 }],
    ["an hour before its nbf", { nowS: nowS + 3600 }],
  ];
  for (const [name, options] of cases) {
    const token = await signQStash(body, options);
    for (
      const answer of [
        await verify(token, body),
        verify.checkClaims(token),
        verify.verifyDigest(token, hash),
      ]
    ) {
      assert.ok(answer && !answer.ok, name);
      assert.equal(
        answer.detail,
        "The Upstash-Signature token is QStash's, for this URL, but expired or not yet valid by this server's clock (past its exp, or before its nbf, by more than 30 seconds).",
        name,
      );
      assert.match(answer.hint ?? "", /this server's clock is off.*NTP/, name);
    }
  }
  // A token no key of ours signed says nothing of the clock: anyone can
  // make one out of time.
  const forged = await signQStash(body, {
    nowS: nowS - 3600,
    key: "sig_someone_else_0123456789",
  });
  const answer = await verify(forged, body);
  assert.ok(!answer.ok);
  assert.doesNotMatch(`${answer.detail} ${answer.hint}`, /clock/);
});

Deno.test("createApp() answers a QStash delivery whose token is out of its time by the clock with that detail, and logs the clock hint", async () => {
  const lines: string[] = [];
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    qstash: QSTASH,
    log: (line) => lines.push(line),
  });
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body, {
        nowS: Math.floor(Date.now() / 1000) - 3600,
      }),
    },
  });
  assert.equal(res.status, 401);
  assert.match(
    (await res.json()).detail,
    /expired or not yet valid by this server's clock/,
  );
  assert.equal(lines.length, 1);
  assert.match(
    lines[0]!,
    /^relayer POST \/v1\/qstash refused 401: .*expired or not yet valid.* this server's clock is off/,
  );
});

Deno.test("qstashVerifier() says nothing of the clock of a token out of its time that is not ours for this URL (another key's, another URL's, another issuer's), whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const nowS = Math.floor(Date.now() / 1000);
  const other = "https://other-service.example.test/v1/qstash";
  const cases: [string, Parameters<typeof signQStash>[1], RegExp][] = [
    [
      "another key's, past its exp",
      { nowS: nowS - 3600, key: "sig_someone_else_0123456789" },
      /QSTASH_CURRENT_SIGNING_KEY/,
    ],
    [
      "another key's, before its nbf",
      { nowS: nowS + 3600, key: "sig_someone_else_0123456789" },
      /QSTASH_CURRENT_SIGNING_KEY/,
    ],
    ["another URL's, past its exp", { nowS: nowS - 3600, url: other }, /./],
    ["another URL's, before its nbf", { nowS: nowS + 3600, url: other }, /./],
    [
      "another issuer's, past its exp",
      { nowS: nowS - 3600, extra: { iss: "Someone" } },
      /./,
    ],
  ];
  for (const [name, options, says] of cases) {
    const token = await signQStash(body, options);
    const answers = {
      whole: await verify(token, body),
      claims: verify.checkClaims(token),
      digest: verify.verifyDigest(token, hash),
    };
    for (const [path, answer] of Object.entries(answers)) {
      assert.notEqual(said(answer), "taken", `${name}: ${path}`);
      assert.doesNotMatch(said(answer), /clock/, `${name}: ${path}`);
      assert.match(said(answer), says, `${name}: ${path}`);
    }
    // Read whole or by its digest, a token of ours for another URL says
    // which, whatever its time: the URL is the lasting slip.
    if (options?.url === other) {
      for (const [path, answer] of Object.entries(answers)) {
        assert.match(
          said(answer),
          /but signed for https:\/\/other/,
          `${name}: ${path}`,
        );
      }
    }
  }
});

Deno.test("qstashVerifier() refuses a token of its keys for this URL whose exp, nbf or iat is not a number, as the Receiver does, whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const nowS = Math.floor(Date.now() / 1000);
  const generic =
    "The Upstash-Signature header is missing or does not verify against this URL and body.";
  for (
    const [name, extra] of [
      ["exp as a string", { exp: String(nowS + 300) }],
      ["nbf as a string, an hour ahead", { nbf: String(nowS + 3600) }],
      ["nbf as null", { nbf: null }],
      ["iat as a string", { iat: String(nowS) }],
    ] as const
  ) {
    const token = await signQStash(body, { extra });
    assert.equal(said(await verify(token, body)), generic, `${name}: whole`);
    assert.equal(said(verify.checkClaims(token)), generic, name);
    assert.equal(said(verify.verifyDigest(token, hash)), generic, name);
  }
});

Deno.test("qstashVerifier() names the URL a token was signed for only where the token is QStash's and that URL an http(s) URL of printable ASCII up to 500 characters after its scheme, whether the body is read whole or by its digest", async () => {
  const verify = qstashVerifier(QSTASH, () => 5_000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const generic =
    "The Upstash-Signature header is missing or does not verify against this URL and body.";
  const answers = async (token: string) => ({
    whole: said(await verify(token, body)),
    claims: said(verify.checkClaims(token)),
    digest: said(verify.verifyDigest(token, hash)),
  });
  const longest = `https://${"a".repeat(500)}`;
  for (
    const [name, options] of [
      ["another issuer's", { url: longest, extra: { iss: "Someone" } }],
      ["another issuer's, past its exp", {
        url: longest,
        nowS: Math.floor(Date.now() / 1000) - 3600,
        extra: { iss: "Someone" },
      }],
      ["a sub too long", { url: `${longest}a` }],
      ["a sub with a space", { url: "https://other.example.test/v1 qstash" }],
      ["a sub with a control character", { url: "https://other.example\t/" }],
      ["a sub of another scheme", {
        url: "ftp://other.example.test/v1/qstash",
      }],
      ["a sub that is no URL", { url: "relayer" }],
    ] as const
  ) {
    const token = await signQStash(body, options);
    for (const [path, answer] of Object.entries(await answers(token))) {
      assert.equal(answer, generic, `${name}: ${path}`);
    }
  }
  // At the bound, and by http: named on every path.
  for (const url of [longest, "http://other.example.test/v1/qstash"]) {
    const token = await signQStash(body, { url });
    for (const [path, answer] of Object.entries(await answers(token))) {
      assert.ok(answer.includes(`but signed for ${url}, `), `${url}: ${path}`);
    }
  }
  // A URL of the same account may carry a token: named by its scheme, host
  // and path, never its credentials, query or fragment.
  for (
    const url of [
      "https://other.example.test/v1/qstash?token=s3cret",
      "https://user:s3cret@other.example.test/v1/qstash",
      "https://:s3cret@other.example.test/v1/qstash",
      "https://s3cret@other.example.test/v1/qstash",
      "https://other.example.test/v1/qstash#s3cret",
    ]
  ) {
    const token = await signQStash(body, { url });
    for (const [path, answer] of Object.entries(await answers(token))) {
      assert.ok(
        answer.includes(
          "but signed for https://other.example.test/v1/qstash (its credentials, query and fragment left unsaid), ",
        ),
        `${url}: ${path}: ${answer}`,
      );
      assert.ok(!answer.includes("s3cret"), `${url}: ${path}: ${answer}`);
    }
  }
  // Of http(s)'s shape but no URL (a port past 65535): none of it said.
  const unread = "https://user:s3cret@other.example.test:99999/v1/qstash";
  const token = await signQStash(body, { url: unread });
  for (const [path, answer] of Object.entries(await answers(token))) {
    assert.ok(
      answer.includes("but signed for another URL, "),
      `${path}: ${answer}`,
    );
    assert.ok(!answer.includes("s3cret"), `${path}: ${answer}`);
  }
});
