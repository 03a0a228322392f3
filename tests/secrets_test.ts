/**
 * No secret ever appears in an answer or a log line: the service is driven
 * with good, bad and ops requests, and every body, header and log line is
 * searched for each configured secret.
 */
import assert from "node:assert/strict";
import { openService, remoteKvRefusal, withoutToken } from "../main.ts";
import { KvStore } from "../store/kv.ts";
import { hmacSignature } from "../webhook/_auth.ts";
import { loadConfig } from "../webhook/config.ts";
import {
  envelope,
  fakeGoogle,
  PUBSUB,
  signQStash,
} from "./webhook/_signing.ts";
import { timeout } from "./_timeout.ts";
import { revocableKv } from "./_echoing_kv.ts";
import { testInOwnProcess } from "./_own_process.ts";
import { startMain } from "./_main_process.ts";
import { dotnetEscaped, lowerPercent, unicodeEscaped } from "./_echo_forms.ts";

const SECRETS = {
  WEBHOOK_SECRET: "webhook-secret-AAAA-1111",
  WEBHOOK_SECRET_NEXT: "webhook-next-EEEE-5555",
  OPS_TOKEN: "ops-token-BBBB-2222-xyz",
  OPS_TOKEN_NEXT: "ops-next-FFFF-6666-xyz",
  QSTASH_CURRENT_SIGNING_KEY: "sig_current_CCCC_3333",
  QSTASH_NEXT_SIGNING_KEY: "sig_next_DDDD_4444_zz",
};

/** Unix seconds by the wall clock: the service runs on it. */
const nowS = () => Math.floor(Date.now() / 1000);

Deno.test(
  "openService() never puts a secret in an answer or a log line",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_secrets_" });
    const google = await fakeGoogle();
    const logs: string[] = [];
    const service = await openService(
      loadConfig({
        ...SECRETS,
        PUBLIC_URL: "https://relayer.example.test",
        PUBSUB_AUDIENCE: PUBSUB.audience,
        PUBSUB_SERVICE_ACCOUNT: PUBSUB.serviceAccount,
        PUBSUB_MIN_BACKOFF: "40s", // ≥ STUCK_AFTER / (MAX_DELIVERIES − 1)
        SENDER_URL: "http://127.0.0.1:9", // nothing listens: sends fail as unknown
        SENDER_TIMEOUT: "200ms",
        KV_PATH: `${dir}/relayer.kv`,
      }),
      { log: (line) => logs.push(line), random: () => 0, jwks: google.jwks },
    );
    logs.push(service.description);
    assert.match(
      service.description,
      /routes: .*deliveries \(two secrets: WEBHOOK_SECRET_NEXT, a rotation under way\), ops \(two tokens: OPS_TOKEN_NEXT, a rotation under way\)/,
    );
    const answers: string[] = [];
    const ask = async (path: string, init: RequestInit = {}) => {
      const res = await service.app.request(path, init);
      answers.push(
        `${res.status} ${JSON.stringify([...res.headers])} ${await res.text()}`,
      );
    };
    try {
      const ops = { authorization: `Bearer ${SECRETS.OPS_TOKEN}` };
      await ask("/v1/intents", {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ id: "pi_1", state: "authorized" }),
      });
      const body = JSON.stringify({
        job: { intentId: "pi_1", kind: "settle" },
        delivery: 1,
      });
      await ask("/v1/deliveries", {
        method: "POST",
        body,
        headers: {
          "x-signature": hmacSignature(SECRETS.WEBHOOK_SECRET, body, nowS()),
        },
      });
      await ask("/v1/deliveries", {
        method: "POST",
        body,
        headers: { "x-signature": "sha256=00" },
      });
      // The generic route's refusals: old scheme, stale, ahead, wrong key,
      // malformed: none may echo the secret or the expected signature.
      for (
        const signature of [
          hmacSignature(SECRETS.WEBHOOK_SECRET, body, nowS() - 301),
          hmacSignature(SECRETS.WEBHOOK_SECRET, body, nowS() + 3600),
          hmacSignature(SECRETS.OPS_TOKEN, body, nowS()),
          hmacSignature(SECRETS.WEBHOOK_SECRET_NEXT, `${body} `, nowS()),
          `t=${nowS()},v1=${"0".repeat(64)}`,
          `t=${nowS()}`,
          `sha256=${SECRETS.WEBHOOK_SECRET}`,
        ]
      ) {
        await ask("/v1/deliveries", {
          method: "POST",
          body,
          headers: { "x-signature": signature },
        });
      }
      await ask("/v1/deliveries", {
        method: "POST",
        body: "{",
        headers: {
          "x-signature": hmacSignature(SECRETS.WEBHOOK_SECRET, "{", nowS()),
        },
      });
      const job = JSON.stringify({ intentId: "pi_1", kind: "settle" });
      await ask("/v1/qstash", {
        method: "POST",
        body: job,
        headers: {
          "upstash-signature": await signQStash(job, {
            key: SECRETS.QSTASH_CURRENT_SIGNING_KEY,
            url: "https://relayer.example.test/v1/qstash",
          }),
          "upstash-retried": "0",
        },
      });
      await ask("/v1/qstash", {
        method: "POST",
        body: job,
        headers: { "upstash-signature": "x.y.z" },
      });
      await ask("/v1/intents/pi_1", { headers: ops });
      await ask("/v1/intents/pi_1", {
        headers: { authorization: "Bearer wrong" },
      });
      // The next token, then one a character off it.
      await ask("/v1/intents/pi_1", {
        headers: { authorization: `Bearer ${SECRETS.OPS_TOKEN_NEXT}` },
      });
      await ask("/v1/intents/pi_1", {
        headers: { authorization: `Bearer ${SECRETS.OPS_TOKEN_NEXT}z` },
      });
      await ask("/v1/dead-letters", { headers: ops });
      await ask("/v1/pubsub", { method: "POST", body: "{}" });
      // Pub/Sub: another account's token, then an authenticated message
      // that is unreadable (acked, logged, kept as a dead letter).
      const bearer = async (claims: Record<string, unknown> = {}) => ({
        authorization: `Bearer ${await google.token(claims)}`,
      });
      await ask("/v1/pubsub", {
        method: "POST",
        body: envelope({ intentId: "pi_1", kind: "settle" }),
        headers: await bearer({
          email: "attacker@evil.iam.gserviceaccount.com",
        }),
      });
      await ask("/v1/pubsub", {
        method: "POST",
        body: JSON.stringify({
          message: { messageId: "m-1", data: btoa(SECRETS.OPS_TOKEN) },
        }),
        headers: await bearer(),
      });
      await ask("/v1/dead-letters", { headers: ops });
      await ask("/healthz");
    } finally {
      service.close();
      await Deno.remove(dir, { recursive: true });
    }
    assert.equal(answers.length, 23);
    assert.ok(
      logs.some((l) => l.includes("pubsub/m-1/unreadable")),
      "the unreadable message was logged",
    );
    assert.ok(
      answers.some((a) =>
        a.startsWith("503 ") && a.includes('"outcome":"retry"')
      ),
      "a real delivery ran",
    );
    for (const [name, secret] of Object.entries(SECRETS)) {
      for (const text of [...answers, ...logs]) {
        assert.ok(!text.includes(secret), `${name} leaked: ${text}`);
      }
    }
  }),
);

Deno.test("withoutToken() keeps KV Connect's access token out of every error of the handle, as a metadata refresh quotes the endpoint's answer", async () => {
  // A self-hosted denokv token: any characters a header can carry.
  const token = 'Kv!pass/2024  "prod"\\x';
  const quoted = JSON.stringify(token).slice(1, -1);
  const refused = () =>
    new TypeError(
      `Failed to fetch metadata: 401 Unauthorized: denied: Bearer ${token} (as JSON: "${quoted}", "${
        quoted.replaceAll("/", "\\/")
      }")`,
    );
  const fake = {
    getMany: () => Promise.reject(refused()),
    list: () => ({
      // deno-lint-ignore require-yield
      async *[Symbol.asyncIterator]() {
        throw refused();
      },
    }),
    atomic: () => {
      const op = {
        check: () => op,
        set: () => op,
        commit: () => Promise.reject(refused()),
      };
      return op;
    },
  } as unknown as Deno.Kv;
  const kv = withoutToken(fake, token);
  const clean = (error: unknown) => {
    assert.ok(error instanceof TypeError);
    assert.ok(!error.message.includes("2024"), error.message);
    assert.ok(!String(error.stack).includes("2024"), error.stack);
    assert.match(error.message, /Bearer <DENO_KV_ACCESS_TOKEN>/);
    return true;
  };
  await assert.rejects(kv.getMany([["a"]]), clean);
  await assert.rejects(async () => {
    for await (const _ of kv.list({ prefix: ["a"] })) {
      // nothing: the first step throws
    }
  }, clean);
  await assert.rejects(
    kv.atomic().check({ key: ["a"], versionstamp: null }).set(["a"], 1)
      .commit(),
    clean,
  );
});

Deno.test("withoutToken() is a KvLike KvStore runs on: writes, reads and lists", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(withoutToken(kv, "ddp_unused_0123456789"));
    const intent = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: intent.version,
      at: 1,
    });
    await store.putDeadLetter({
      jobId: "pi_9/settle",
      intentId: "pi_9",
      deliveries: 1,
      cause: "exhausted",
      reason: "",
      resolution: "",
      lastError: "",
      poisonedAt: 2,
    });
    assert.equal((await store.getIntent("pi_1"))?.state, "settling");
    assert.deepEqual(
      (await store.listDeadLetters()).items.map((d) => d.jobId),
      ["pi_9/settle"],
    );
    assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
  } finally {
    kv.close();
  }
});

Deno.test(
  "main.ts keeps DENO_KV_ACCESS_TOKEN out of its log when a KV Connect database refuses it mid-run, on Deno Deploy's database as on KV_URL's",
  timeout(60_000, async () => {
    const token = "DEPLOYTOK/0123456789abcdef";
    for (
      const where of [
        (url: string) => ({
          DENO_DEPLOYMENT_ID: "test-deployment",
          DENO_KV_DEFAULT_PATH: url,
        }),
        (url: string) => ({ KV_URL: url }),
      ]
    ) {
      const kv = revocableKv();
      const dir = await Deno.makeTempDir({ prefix: "relayer_secrets_" });
      const main = startMain({
        ...where(`http://127.0.0.1:${kv.server.addr.port}/kv`),
        DENO_KV_ACCESS_TOKEN: token,
        SENDER_URL: "http://127.0.0.1:9",
        WEBHOOK_SECRET: SECRETS.WEBHOOK_SECRET,
        OPS_TOKEN: SECRETS.OPS_TOKEN,
      }, { writeDir: dir });
      try {
        const base = await main.base();
        if (base === null) assert.fail((await main.ended()).stderr);
        // The token revoked or rotated under the running service: once
        // its metadata expired, Deno fetches it again, and the answer
        // refusing it quotes the token.
        kv.revoke();
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const res = await fetch(`${base}/v1/intents/pi_1`, {
          headers: { authorization: `Bearer ${SECRETS.OPS_TOKEN}` },
        });
        const answer = await res.text();
        assert.equal(res.status, 503, answer);
        main.child.kill("SIGTERM");
        const { stdout, stderr } = await main.ended();
        const said = `${stdout}${stderr}${answer}`;
        assert.match(
          stdout,
          /relayer read of intent pi_1 failed: .*you sent Bearer <DENO_KV_ACCESS_TOKEN>/,
        );
        assert.ok(!said.includes("0123456789abcdef"), said);
      } finally {
        main.kill();
        await main.ended();
        await kv.server.shutdown();
        await Deno.remove(dir, { recursive: true });
      }
    }
  }),
);

Deno.test("remoteKvRefusal() masks DENO_KV_ACCESS_TOKEN in lower-case %-escapes and JSON's \\u escapes, and leaves other text be", () => {
  const token = "Kv/pass+2024<&'>x";
  const lower = lowerPercent(encodeURIComponent(token));
  const dotnet = dotnetEscaped(token);
  const everyOther = unicodeEscaped(token);
  for (const echo of [lower, dotnet, everyOther]) {
    assert.equal(
      remoteKvRefusal(new Error(`401 at /kv%2fdb: you sent ${echo}`), token),
      "401 at /kv%2fdb: you sent <DENO_KV_ACCESS_TOKEN>",
    );
  }
});

Deno.test("withoutToken() keeps the data-path token of KV Connect's metadata out of an error that quotes the data endpoint's refusal (with DENO_KV_ACCESS_TOKEN set in a process of its own)", async () => {
  // Deno.openKv(url) takes the access token from the environment only.
  await testInOwnProcess("tests/_secrets_kv_connect.ts", {
    DENO_KV_ACCESS_TOKEN: "access-token-0123456789",
  });
});

Deno.test("remoteKvRefusal() keeps a word after 'Bearer' that is no credential", () => {
  assert.equal(
    remoteKvRefusal(
      new Error("401: expected a Bearer token. Bearer authentication failed"),
      "tok_unused_0123",
    ),
    "401: expected a Bearer token. Bearer authentication failed",
  );
});

Deno.test("remoteKvRefusal() masks a credential after 'Bearer' in each form a header, JSON or a URL writes it, its scheme as written", () => {
  const refusal = (text: string) =>
    remoteKvRefusal(new Error(`401: you sent ${text}`), "tok_unused_0123");
  const cases: [sent: string, shown: string][] = [
    // The separator as a URL's path, a form and JSON escape a space.
    ["Bearer%20ddp0123456789", "Bearer%20<KV Connect token>"],
    ["Bearer+ddp0123456789", "Bearer+<KV Connect token>"],
    ["Bearer\\u0020ddp0123456789", "Bearer\\u0020<KV Connect token>"],
    // The scheme in any case (RFC 9110 §11.1).
    ["bearer ddp0123456789", "bearer <KV Connect token>"],
    // A run of white space, masked before it is collapsed.
    ["Bearer \t ddp0123456789", "Bearer <KV Connect token>"],
    // The header written whole in a URL, or in JSON escaping every
    // character that is not a letter or digit: an escape before 'Bearer'.
    [
      "Authorization%3A%20Bearer%20ddp0123456789",
      "Authorization%3A%20Bearer%20<KV Connect token>",
    ],
    [
      "Authorization:\\u0020Bearer\\u0020ddp0123456789",
      "Authorization:\\u0020Bearer\\u0020<KV Connect token>",
    ],
    // A credential's characters, its first run letters alone: each of
    // the others taken, or the letters before it would read as a word.
    ["Bearer abc\\/def0123", "Bearer <KV Connect token>"],
    ["Bearer abc%2Fdef0123", "Bearer <KV Connect token>"],
    ["Bearer abc\\u002Bdef0123", "Bearer <KV Connect token>"],
    ["Bearer QWxhZGRpbjpvcGVu==", "Bearer <KV Connect token>"],
    ["Bearer abcdef+ghi/jkl", "Bearer <KV Connect token>"],
    ["Bearer eyJhbGciOi.eyJzdWIi.sig", "Bearer <KV Connect token>"],
    ["Bearer abc~def", "Bearer <KV Connect token>"],
    ["Bearer abc-def", "Bearer <KV Connect token>"],
    ["Bearer abc_def", "Bearer <KV Connect token>"],
    // Digits alone, and 20 letters alone: no word.
    ["Bearer 0123456789", "Bearer <KV Connect token>"],
    ["Bearer abcdefghijABCDEFGHIJ", "Bearer <KV Connect token>"],
    // Words: 19 letters, one ending a sentence, a challenge's parameter.
    ["Bearer abcdefghijABCDEFGHI", "Bearer abcdefghijABCDEFGHI"],
    ["a Bearer token.", "a Bearer token."],
    ['Bearer realm="kv"', 'Bearer realm="kv"'],
  ];
  for (const [sent, shown] of cases) {
    assert.equal(refusal(sent), `401: you sent ${shown}`, sent);
  }
});

Deno.test("remoteKvRefusal() masks DENO_KV_ACCESS_TOKEN holding a run of white space before it collapses white space", () => {
  const token = "Kv!pass/2024  \t prod";
  assert.equal(
    remoteKvRefusal(new Error(`401: denied ${token} here`), token),
    "401: denied <DENO_KV_ACCESS_TOKEN> here",
  );
});
