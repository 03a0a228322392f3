import assert from "node:assert/strict";
import fc from "fast-check";
import {
  checkQueue,
  definePolicy,
  formatDuration,
  MemoryStore,
  type QueueLimits,
  rescueWindow,
  ScriptedSender,
} from "../../mod.ts";
import { ConfigError, loadConfig, routeOptions } from "../../webhook/config.ts";
import { createApp } from "../../webhook/app.ts";
import { signHmac } from "./_signing.ts";
import { runs } from "../_fc.ts";
import { PUBSUB_ENV, QSTASH_ENV } from "./_config.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};

function refused(
  env: Record<string, string>,
  setting: string,
  message: RegExp,
): void {
  assert.throws(() => loadConfig(env), (error: unknown) => {
    assert.ok(error instanceof ConfigError);
    assert.equal(error.setting, setting);
    assert.match(error.message, message);
    return true;
  });
}

Deno.test("loadConfig() reads a full QStash + Pub/Sub + generic setup", () => {
  const config = loadConfig({
    ...base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    PUBLIC_URL: "https://relayer.example.deno.net/",
    PUBSUB_AUDIENCE: "https://relayer.example.deno.net/v1/pubsub",
    PUBSUB_SERVICE_ACCOUNT: "push@p.iam.gserviceaccount.com",
    PUBSUB_MIN_BACKOFF: "30s",
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "20",
    PUBSUB_DEAD_LETTER_AUDIENCE:
      "https://relayer.example.deno.net/v1/pubsub/dead-letter",
    OPS_TOKEN: "an-ops-token-of-16",
    MAX_DELIVERIES: "12",
    BASE: "5s",
    CAP: "2m",
    JITTER: "equal",
    STUCK_AFTER: "5m",
    LEASE: "45s",
    SENDER_TIMEOUT: "8s",
    KV_QUEUE: "1",
  });
  assert.equal(
    config.qstash?.url,
    "https://relayer.example.deno.net/v1/qstash",
  );
  assert.deepEqual(config.pubsub, {
    audience: "https://relayer.example.deno.net/v1/pubsub",
    serviceAccount: "push@p.iam.gserviceaccount.com",
  });
  assert.deepEqual(
    [
      config.policy.maxDeliveries,
      config.policy.baseMs,
      config.policy.capMs,
      config.policy.stuckAfterMs,
    ],
    [12, 5000, 120_000, 300_000],
  );
  assert.deepEqual([config.leaseMs, config.sender.timeoutMs, config.kvQueue], [
    45_000,
    8000,
    true,
  ]);
  assert.deepEqual(config.kv, { path: "./data/relayer.kv" });
  assert.deepEqual(config.queues, {
    qstash: {
      kind: "qstash",
      retries: 11,
      leaseMs: 45_000,
      clockSkewMs: 5_000,
    },
    pubsub: {
      kind: "pubsub",
      maxDeliveryAttempts: 20,
      minBackoffMs: 30_000,
      maxBackoffMs: 600_000,
      clockSkewMs: 5_000,
    },
  });
});

Deno.test("loadConfig() checks QStash's subject against the URL the publisher publishes to, however PUBLIC_URL is spelled", async () => {
  const { qstashPublisher } = await import("../../webhook/qstash_publisher.ts");
  // A local stand-in of QStash's API: it records where each job would go.
  const destinations: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => {
      const path = new URL(req.url).pathname;
      destinations.push(
        decodeURIComponent(path.replace(/^\/v2\/publish\//, "")),
      );
      return Response.json({ messageId: "msg_1" });
    },
  );
  try {
    for (
      const spelled of [
        "https://Relayer.Example.com:443/",
        "https://relayer.example.com",
        "HTTPS://RELAYER.EXAMPLE.COM//",
      ]
    ) {
      const config = loadConfig({
        ...base,
        QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
        QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
        QSTASH_TOKEN: "qstash-token-0123456789",
        PUBLIC_URL: spelled,
      });
      // What the receiver checks the token's subject against …
      assert.equal(config.qstash?.url, "https://relayer.example.com/v1/qstash");
      // … is where the publisher, given the same setting, publishes.
      await qstashPublisher({
        token: config.qstashPublish!.token,
        publicUrl: config.qstashPublish!.publicUrl,
        retries: 9,
        baseUrl: `http://127.0.0.1:${server.addr.port}`,
      }).publish({ intentId: "pi_0001", kind: "settle" });
      assert.equal(destinations.pop(), config.qstash?.url);
    }
  } finally {
    await server.shutdown();
  }
});

Deno.test("loadConfig() refuses a PUBLIC_URL that names a route: the service adds the routes to it", () => {
  const qstash = {
    ...base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  for (const route of ["/v1/qstash", "/v1/qstash/failed", "/v1/deliveries"]) {
    refused(
      { ...qstash, PUBLIC_URL: `https://relayer.example.com${route}/` },
      "PUBLIC_URL",
      new RegExp(
        `^PUBLIC_URL ends with the route ${route}: give the service's base URL`,
      ),
    );
  }
  // A base path of its own is a base URL.
  assert.equal(
    loadConfig({ ...qstash, PUBLIC_URL: "https://example.com/relayer" }).qstash
      ?.url,
    "https://example.com/relayer/v1/qstash",
  );
});

Deno.test("loadConfig() refuses QSTASH_URL without QSTASH_TOKEN: it only says where QStash's API is", () => {
  refused(
    {
      ...base,
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
      PUBLIC_URL: "https://relayer.example.com",
      QSTASH_URL: "https://qstash.example.com",
    },
    "QSTASH_TOKEN",
    /^QSTASH_TOKEN is missing: QSTASH_URL only says where QStash's API is$/,
  );
});

Deno.test("loadConfig() refuses a plain http QSTASH_URL off this machine, where QSTASH_TOKEN would go in clear text with every publish (and whoever reads it publishes to the service, its failure callback giving up any job); https, and http on loopback for a local QStash, are taken", () => {
  const qstash = {
    ...base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    PUBLIC_URL: "https://relayer.example.com",
    QSTASH_TOKEN: "qstash-token-0123456789",
  };
  for (
    const url of [
      "http://qstash.example.com",
      "http://10.0.0.7:8080",
      "HTTP://QSTASH.EXAMPLE.COM",
      // Looked up in DNS by Deno, not this machine by its name.
      "http://qstash.localhost:8080",
    ]
  ) {
    refused(
      { ...qstash, QSTASH_URL: url },
      "QSTASH_URL",
      /^QSTASH_URL is plain http off this machine: QSTASH_TOKEN is sent with every publish, and whoever reads it on the path can publish to this service, its failure callback giving up any job\. Use https \(plain http is taken on localhost, 127\.0\.0\.1 or \[::1\] only, for a local QStash\)$/,
    );
  }
  for (
    const url of [
      "https://qstash.example.com",
      "http://127.0.0.1:8080",
      "http://localhost:8080",
      "http://[::1]:8080",
    ]
  ) {
    assert.equal(
      loadConfig({ ...qstash, QSTASH_URL: url }).qstash?.url,
      "https://relayer.example.com/v1/qstash",
      url,
    );
  }
});

Deno.test("routeOptions() hands createApp every route setting loadConfig read: each route is on and signed, the body limit holds", async () => {
  const config = loadConfig({
    ...base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    PUBLIC_URL: "https://relayer.example.test",
    PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
    PUBSUB_DEAD_LETTER_AUDIENCE:
      "https://relayer.example.test/v1/pubsub/dead-letter",
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
    PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
    PUBSUB_MIN_BACKOFF: "40s",
    OPS_TOKEN: "an-ops-token-of-16",
    MAX_BODY_BYTES: "1024",
  });
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    ...routeOptions(config, { jwks: [] }),
  });
  const body = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  for (
    const route of [
      "/v1/qstash",
      "/v1/qstash/failed",
      "/v1/pubsub",
      "/v1/pubsub/dead-letter",
      "/v1/deliveries",
    ]
  ) {
    // Configured (not 503), so an unsigned request is refused as unsigned.
    const res = await app.request(route, { method: "POST", body });
    assert.equal(res.status, 401, route);
  }
  assert.equal((await app.request("/v1/dead-letters")).status, 401);
  // Signed, so that the route reads it: over the limit all the same.
  const long = "x".repeat(1025);
  const big = await app.request("/v1/deliveries", {
    method: "POST",
    body: long,
    headers: { "x-signature": signHmac(base.WEBHOOK_SECRET, long) },
  });
  assert.equal(big.status, 413);
});

Deno.test("WEBHOOK_SECRET_NEXT: during a rotation the generic route takes a delivery signed with either secret, and no other", async () => {
  const next = "the-next-webhook-secret";
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    ...routeOptions(loadConfig({ ...base, WEBHOOK_SECRET_NEXT: next }), {
      jwks: [],
    }),
  });
  const body = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" } });
  for (
    const [secret, status] of [
      [base.WEBHOOK_SECRET, 503], // intent not found yet: a retry
      [next, 503],
      ["a-third-secret-000000", 401],
    ] as const
  ) {
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: { "x-signature": signHmac(secret, body) },
    });
    assert.equal(res.status, status, secret);
    await res.body?.cancel();
  }
  assert.throws(
    () =>
      createApp({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        webhookSecretNext: next,
      }),
    /'webhookSecretNext' is set without 'webhookSecret'/,
  );
});

Deno.test("loadConfig() picks Deno Deploy's KV there, and a KV Connect URL when given", () => {
  // Deploy names the database it attached in DENO_KV_DEFAULT_PATH.
  const attached = {
    DENO_DEPLOYMENT_ID: "abc",
    DENO_KV_DEFAULT_PATH: "https://api.deno.com/v2/databases/0123/connect",
  };
  assert.deepEqual(loadConfig({ ...base, ...attached }).kv, {
    platform: true,
  });
  assert.deepEqual(
    loadConfig({ ...base, KV_URL: "https://kv.example.test/db" }).kv,
    {
      url: "https://kv.example.test/db",
    },
  );
});

Deno.test("loadConfig() refuses full jitter with a STUCK_AFTER, naming JITTER: no count or cap can help", () => {
  for (const extra of [{}, { MAX_DELIVERIES: "50", CAP: "1h" }]) {
    refused(
      { ...base, JITTER: "full", ...extra },
      "JITTER",
      /^JITTER=full guarantees no wait between deliveries .* STUCK_AFTER \(5m0s\) and CLOCK_SKEW \(5s\)\. Use JITTER=equal \(the default\).*, or JITTER=none\.$/,
    );
  }
  assert.equal(
    loadConfig({ ...base, JITTER: "full", STUCK_AFTER: "0", CLOCK_SKEW: "0" })
      .policy.jitter,
    "full",
  );
  // With instances' clocks apart, even STUCK_AFTER 0 needs a wait: one
  // behind reads the send recorded by another as made in its future.
  refused(
    { ...base, JITTER: "full", STUCK_AFTER: "0" },
    "JITTER",
    /rescue window of STUCK_AFTER \(0s\) and CLOCK_SKEW \(5s\)\./,
  );
});

Deno.test("loadConfig() refuses BASE above CAP, naming the one that was set", () => {
  refused(
    { ...base, BASE: "3m" },
    "BASE",
    /^BASE is 3m0s but CAP is 2m0s: the backoff starts above its cap, so every delay would be CAP\. Lower BASE or raise CAP/,
  );
  refused({ ...base, CAP: "1s" }, "CAP", /^BASE is 5s but CAP is 1s: /);
  assert.equal(
    loadConfig({ ...base, BASE: "2m", STUCK_AFTER: "0" }).policy.baseMs,
    120_000,
  );
});

Deno.test("loadConfig() refuses a policy whose rescue window is shorter than STUCK_AFTER, with both numbers", () => {
  refused(
    { ...base, MAX_DELIVERIES: "5" },
    "STUCK_AFTER",
    /rescue window is 37\.5s .* STUCK_AFTER is 5m0s/,
  );
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "4" },
    "STUCK_AFTER",
    /rescue window is 35s \(guaranteed, no jitter\) .* Raise MAX_DELIVERIES or BASE, or lower STUCK_AFTER or CLOCK_SKEW\.$/,
  );
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "4", CLOCK_SKEW: "0" },
    "STUCK_AFTER",
    /rescue window is 35s \(guaranteed, no jitter\) but STUCK_AFTER is 5m0s: .* Raise MAX_DELIVERIES or BASE, or lower STUCK_AFTER\.$/,
  );
  // Only what lengthens the window is named: CAP once a delay reaches it
  // (5 s, 10 s, 20 s stay below 2 min, so a higher CAP changes none),
  // BASE while a delay is below CAP.
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "6", CAP: "20s" },
    "STUCK_AFTER",
    /rescue window is 1m15s .* Raise MAX_DELIVERIES, BASE or CAP, or lower/,
  );
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "3", BASE: "1m", CAP: "1m" },
    "STUCK_AFTER",
    /rescue window is 2m0s .* Raise MAX_DELIVERIES or CAP, or lower/,
  );
  // A last delay that meets CAP exactly (5 s, 10 s, 20 s under a CAP of
  // 20 s) was never cut by it: a higher CAP changes none of them.
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "4", CAP: "20s" },
    "STUCK_AFTER",
    /rescue window is 35s .* Raise MAX_DELIVERIES or BASE, or lower/,
  );
  // One delivery: no delay at all, so neither BASE nor CAP lengthens it.
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "1" },
    "STUCK_AFTER",
    /rescue window is 0s .* Raise MAX_DELIVERIES, or lower/,
  );
  // One delay, BASE itself, below CAP: a higher BASE lengthens it, a
  // higher CAP does not.
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "2" },
    "STUCK_AFTER",
    /rescue window is 5s .* Raise MAX_DELIVERIES or BASE, or lower/,
  );
  // One delay, BASE itself, whatever CAP is; BASE cannot pass CAP.
  refused(
    { ...base, JITTER: "none", MAX_DELIVERIES: "2", BASE: "1m", CAP: "1m" },
    "STUCK_AFTER",
    /rescue window is 1m0s .* Raise MAX_DELIVERIES, or lower/,
  );
  assert.doesNotThrow(() =>
    loadConfig({ ...base, MAX_DELIVERIES: "5", STUCK_AFTER: "30s" })
  );
  // At the edge: the default policy guarantees 317.5 s, to the
  // millisecond, which must outlast STUCK_AFTER and CLOCK_SKEW (5 s).
  assert.doesNotThrow(() => loadConfig({ ...base, STUCK_AFTER: "312500ms" }));
  refused(
    { ...base, STUCK_AFTER: "312501ms" },
    "STUCK_AFTER",
    /rescue window is 5m17\.5s .* STUCK_AFTER is 5m12\.501s and CLOCK_SKEW is 5s \(an instance whose clock runs that far behind the one that recorded a send reads the payment as stuck that much later\)/,
  );
  assert.doesNotThrow(() =>
    loadConfig({ ...base, STUCK_AFTER: "317500ms", CLOCK_SKEW: "0" })
  );
  refused(
    { ...base, STUCK_AFTER: "317501ms", CLOCK_SKEW: "0" },
    "STUCK_AFTER",
    /rescue window is 5m17\.5s .* STUCK_AFTER is 5m17\.501s:/,
  );
});

Deno.test("loadConfig() names the bad setting, and never echoes a secret", () => {
  refused({ ...base, SENDER_URL: "" }, "SENDER_URL", /SENDER_URL is missing/);
  refused(
    { ...base, SENDER_URL: "ftp://x" },
    "SENDER_URL",
    /absolute http\(s\) URL/,
  );
  refused(
    { SENDER_URL: base.SENDER_URL },
    "WEBHOOK_SECRET",
    /No delivery route is configured: .* PUBSUB_AUDIENCE and PUBSUB_SERVICE_ACCOUNT, or WEBHOOK_SECRET/,
  );
  refused(
    { ...base, QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789" },
    "QSTASH_NEXT_SIGNING_KEY",
    /both/,
  );
  refused(
    {
      ...base,
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    },
    "PUBLIC_URL",
    /PUBLIC_URL is missing/,
  );
  refused(
    { ...base, PUBSUB_SERVICE_ACCOUNT: "a@b" },
    "PUBSUB_AUDIENCE",
    /PUBSUB_AUDIENCE is missing/,
  );
  refused(
    {
      ...base,
      PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
      PUBSUB_DEAD_LETTER_AUDIENCE: "https://relayer.example.test/v1/pubsub",
      PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
    },
    "PUBSUB_DEAD_LETTER_AUDIENCE",
    /must differ from PUBSUB_AUDIENCE/,
  );
  refused({ ...base, MAX_DELIVERIES: "ten" }, "MAX_DELIVERIES", /whole number/);
  refused(
    { ...base, MAX_DELIVERIES: "0" },
    "MAX_DELIVERIES",
    /'maxDeliveries' must be an integer >= 1/,
  );
  refused({ ...base, JITTER: "half" }, "JITTER", /JITTER is invalid/);
  refused({ ...base, BASE: "soon" }, "BASE", /BASE must be a duration/);
  refused(
    { ...base, LEASE: "5s" },
    "LEASE",
    /must be at least twice SENDER_TIMEOUT/,
  );
  refused(
    { ...base, KV_URL: "https://kv.test", KV_PATH: "x.kv" },
    "KV_URL",
    /not both/,
  );
  refused(
    { ...base, MAX_BODY_BYTES: "10" },
    "MAX_BODY_BYTES",
    /^MAX_BODY_BYTES must be at least 1024 \(a delivery of a job takes up to about 200 bytes\): current value is 10$/,
  );
  assert.equal(
    loadConfig({ ...base, MAX_BODY_BYTES: "1024" }).maxBodyBytes,
    1024,
  );
  refused(
    { ...base, KV_QUEUE: "yes" },
    "KV_QUEUE",
    /^KV_QUEUE must be 1 or 0 \(or true or false\): current value is "yes"$/,
  );
  // A token no client can send: a header loses surrounding spaces and
  // anything outside ASCII.
  for (
    const token of [
      "an-ops-token-of-16 ",
      "an-ops-token-of-16\n",
      "t\u00f6k\u00e9n-0123456789abc",
      "an ops token of 16",
    ]
  ) {
    refused({ ...base, OPS_TOKEN: token }, "OPS_TOKEN", /bearer token/);
  }
  // The same for the tokens the service sends: a runtime refuses such a
  // header in an error that quotes it whole, which the log would print.
  const qstash = {
    ...base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    PUBLIC_URL: "https://relayer.example.deno.net/",
  };
  for (const token of ["QSTOK_eeeeeeee\neeeeeeee5", " QSTOK_eeee", "tök"]) {
    assert.throws(
      () => loadConfig({ ...qstash, QSTASH_TOKEN: token }),
      (error: unknown) =>
        error instanceof ConfigError && error.setting === "QSTASH_TOKEN" &&
        /bearer token/.test(error.message) &&
        !error.message.includes(token) && !error.message.includes("eeee"),
    );
  }
  assert.equal(
    loadConfig({ ...qstash, QSTASH_TOKEN: "eyJVc2VySUQiOiIxMjMifQ==" })
      .qstashPublish?.token,
    "eyJVc2VySUQiOiIxMjMifQ==",
  );
  refused(
    {
      ...base,
      KV_URL: "https://kv.example.test/db",
      DENO_KV_ACCESS_TOKEN: "ddp_token\nsecond",
    },
    "DENO_KV_ACCESS_TOKEN",
    /bearer token/,
  );
  // Another service's token is taken as it issued it, if a header can
  // carry it (a self-hosted denokv takes any --access-token).
  assert.deepEqual(
    loadConfig({
      ...base,
      KV_URL: "https://kv.example.test/db",
      DENO_KV_ACCESS_TOKEN: "Kv!pass#2024 prod",
    }).kv,
    { url: "https://kv.example.test/db" },
  );
  // A URL in KV_PATH would be opened as KV Connect, past KV_URL's checks.
  for (
    const path of [
      "http://kv.example.test/db?access_token=KVTOK_secret",
      "https://u:KVTOK_secret@kv.example.test/db",
    ]
  ) {
    assert.throws(
      () => loadConfig({ ...base, KV_PATH: path }),
      (error: unknown) =>
        error instanceof ConfigError && error.setting === "KV_PATH" &&
        /KV_PATH is a URL/.test(error.message) &&
        !error.message.includes("KVTOK"),
    );
  }
  // An audience is compared exactly: spaces would refuse every push.
  for (const name of ["PUBSUB_AUDIENCE", "PUBSUB_DEAD_LETTER_AUDIENCE"]) {
    for (const value of [" ", "https://relayer.example.com/v1/pubsub "]) {
      refused(
        {
          ...base,
          PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
          PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
          [name]: value,
        },
        name,
        /without spaces around it/,
      );
    }
    // The push endpoint's URL, an audience by default, may carry a
    // verification token in its query: not echoed.
    const verification = "push-verify-9f3a61c0d2";
    assert.throws(
      () =>
        loadConfig({
          ...base,
          PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
          PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
          [name]:
            ` https://relayer.example.com/v1/pubsub?token=${verification}`,
        }),
      (error: unknown) =>
        error instanceof ConfigError && error.setting === name &&
        error.message.includes(
          `current value is " https://relayer.example.com/v1/pubsub" (its credentials, query and fragment left unsaid)`,
        ) && !error.message.includes(verification),
    );
  }
  // The setting the operator set is the one named, not its default partner.
  refused(
    { ...base, PUBSUB_MAX_BACKOFF: "5s" },
    "PUBSUB_MAX_BACKOFF",
    /PUBSUB_MIN_BACKOFF \(10s\) must be at most PUBSUB_MAX_BACKOFF \(5s\)/,
  );
  refused(
    {
      ...base,
      DENO_DEPLOYMENT_ID: "x",
      DENO_KV_DEFAULT_PATH: "https://kv.test/db",
      KV_QUEUE: "1",
    },
    "KV_QUEUE",
    /Deno Deploy/,
  );
  // KV Connect refuses every enqueue, and never delivers from a queue.
  refused(
    { ...base, KV_URL: "https://kv.test/db", KV_QUEUE: "1" },
    "KV_QUEUE",
    /KV_QUEUE is refused with KV_URL: a Deno KV reached over KV Connect runs no queue/,
  );
  refused(
    {
      ...base,
      DENO_DEPLOYMENT_ID: "x",
      DENO_KV_DEFAULT_PATH: "https://kv.test/db",
      RELAYER_INSECURE_DEV: "1",
    },
    "RELAYER_INSECURE_DEV",
    /^RELAYER_INSECURE_DEV is for local runs, and this service is on Deno Deploy: /,
  );

  refused(
    {
      SENDER_URL: "http://127.0.0.1:9000",
      OPS_TOKEN: "an-ops-token-of-16",
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abc",
      PUBLIC_URL: "https://relayer.example.test",
      WEBHOOK_SECRET_NEXT: "the-next-webhook-secret",
    },
    "WEBHOOK_SECRET_NEXT",
    /^WEBHOOK_SECRET_NEXT is set without WEBHOOK_SECRET: set the secret the senders sign with now as WEBHOOK_SECRET, and the one they move to as WEBHOOK_SECRET_NEXT$/,
  );

  const short = "short-secret";
  for (
    const name of [
      "WEBHOOK_SECRET",
      "WEBHOOK_SECRET_NEXT",
      "OPS_TOKEN",
      "QSTASH_CURRENT_SIGNING_KEY",
    ]
  ) {
    assert.throws(
      () => loadConfig({ ...base, [name]: short }),
      (error: Error) => {
        assert.match(error.message, /at least 16 characters/);
        assert.ok(
          !error.message.includes(short),
          "the secret must not be echoed",
        );
        return true;
      },
    );
  }
});

Deno.test("loadConfig() refuses RELAYER_INSECURE_DEV with a PUBLIC_URL off this machine, as the docs' local-run secrets, naming the routes it would open, the ops routes among them, and no secret", () => {
  const secrets = {
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  const fix =
    ". Unset RELAYER_INSECURE_DEV (each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes), or run on your own machine: PUBLIC_URL unset or on localhost, 127.0.0.1 or [::1], and served on loopback (deno task start)";
  for (const url of ["https://relayer.example.com", "http://10.0.0.5:8000"]) {
    const env = {
      ...secrets,
      PUBLIC_URL: url,
      RELAYER_INSECURE_DEV: "1",
    };
    assert.throws(() => loadConfig(env), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.setting, "RELAYER_INSECURE_DEV");
      assert.equal(
        error.message,
        `RELAYER_INSECURE_DEV is for local runs, and this service is reached at PUBLIC_URL, off this machine: it would take requests with no signature or token, from anyone who reaches it, on /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries, the ops routes (which create and resolve intents, and publish, redrive and discard jobs)${fix}`,
      );
      for (const value of Object.values(secrets)) {
        assert.ok(!error.message.includes(value));
      }
      return true;
    });
    // Every key set, it would open nothing now: refused all the same.
    refused(
      {
        ...env,
        WEBHOOK_SECRET: "a-webhook-secret-16",
        OPS_TOKEN: "an-ops-token-of-16",
        PUBSUB_AUDIENCE: `${url}/v1/pubsub`,
        PUBSUB_DEAD_LETTER_AUDIENCE: `${url}/v1/pubsub/dead-letter`,
        PUBSUB_SERVICE_ACCOUNT: "push@p.iam.gserviceaccount.com",
      },
      "RELAYER_INSECURE_DEV",
      /: it would take requests with no signature or token, from anyone who reaches it, on no route while every key is set, and on each whose key is left out later\. Unset RELAYER_INSECURE_DEV /,
    );
  }
  // On this machine, or with no PUBLIC_URL to say otherwise: taken, as the
  // docs' local-run secrets are (main.ts then checks where it listens).
  for (
    const url of [
      "http://localhost:8000",
      "http://127.0.0.1:8000",
      "http://[::1]:8000",
      undefined,
    ]
  ) {
    const config = loadConfig({
      SENDER_URL: secrets.SENDER_URL,
      ...(url === undefined ? {} : { ...secrets, PUBLIC_URL: url }),
      RELAYER_INSECURE_DEV: "1",
      WEBHOOK_SECRET: "local-secret-0123456789",
      OPS_TOKEN: "local-ops-token-0123456789",
    });
    assert.equal(config.insecureDev, true);
  }
});

Deno.test("main.ts refuses to start on a bad setting with one line that names it", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--allow-env",
      "--allow-read",
      "--allow-net",
      "main.ts",
    ],
    cwd: new URL("../..", import.meta.url).pathname,
    env: {
      SENDER_URL: "http://127.0.0.1:9",
      WEBHOOK_SECRET: "a-webhook-secret-16",
      MAX_DELIVERIES: "4",
    },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 1);
  assert.equal(new TextDecoder().decode(stdout), "");
  const lines = new TextDecoder().decode(stderr).trim().split("\n");
  assert.equal(lines.length, 1);
  assert.match(
    lines[0]!,
    /^relayer: cannot start: The policy's rescue window is 17\.5s .* STUCK_AFTER is 5m0s/,
  );
  assert.ok(!lines[0]!.includes("a-webhook-secret-16"));
});

const qstash = QSTASH_ENV;
const pubsub = PUBSUB_ENV;
/** The give-up route a Pub/Sub dead-letter policy needs. */
const deadLetter = {
  PUBSUB_DEAD_LETTER_AUDIENCE: "https://relayer.example.test/v1/pubsub/dead",
};

/** The one line loadConfig refuses `env` with. */
function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error.message;
  }
  throw new Error("loadConfig accepted it");
}

Deno.test("loadConfig() says why a value that looks like a duration is not one", () => {
  assert.equal(
    refusal({ ...base, SENDER_TIMEOUT: "1.0005s" }),
    'SENDER_TIMEOUT must be a duration such as 5s, 2m or 90000 (milliseconds), and it must be a whole number of milliseconds (at most 3 decimals on "s", none on "ms"): current value is "1.0005s"',
  );
  assert.match(
    refusal({ ...base, STUCK_AFTER: "1234567890123456" }),
    /^STUCK_AFTER must be a duration .*, and it is too long: a plain number of milliseconds has at most 15 digits/,
  );
  assert.equal(
    refusal({ ...base, LEASE: "soon" }),
    'LEASE must be a duration such as 5s, 2m or 90000 (milliseconds): current value is "soon"',
  );
});

Deno.test("loadConfig() refuses a plain number under a second, most likely seconds without their unit", () => {
  // SENDER_TIMEOUT=30 taken as 30 ms would time out every send, and every
  // payment would go to review.
  refused(
    { ...base, SENDER_TIMEOUT: "30" },
    "SENDER_TIMEOUT",
    /^SENDER_TIMEOUT is "30", a plain number, which would be 30 milliseconds: write 30s for seconds, or 30ms if you do mean milliseconds$/,
  );
  for (const name of ["BASE", "STUCK_AFTER", "CLOCK_SKEW", "LEASE"]) {
    refused({ ...base, [name]: "5" }, name, /write 5s for seconds/);
  }
  assert.equal(loadConfig({ ...base, CLOCK_SKEW: "5ms" }).clockSkewMs, 5);
  assert.equal(loadConfig({ ...base, CLOCK_SKEW: "0" }).clockSkewMs, 0);
  assert.equal(
    loadConfig({ ...base, SENDER_TIMEOUT: "1000" }).sender.timeoutMs,
    1000,
  );
});

/** QStash's keys and the URL it signs, for the refusals of a secret's form. */
const QSTASH_SETTINGS = {
  QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
  QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  PUBLIC_URL: "https://relayer.example.test",
};

Deno.test("loadConfig() refuses a secret with a space or line break at either end, never echoing it", () => {
  // With the newline kept, every delivery signed with the secret is a 401.
  for (
    const [name, value] of [
      ["WEBHOOK_SECRET", "a-webhook-secret-16\n"],
      ["WEBHOOK_SECRET_NEXT", " a-webhook-secret-17"],
      ["QSTASH_CURRENT_SIGNING_KEY", "sig_current_0123456789\n"],
      ["QSTASH_NEXT_SIGNING_KEY", "sig_next_0123456789ab "],
    ] as const
  ) {
    const message = refusal({ ...base, ...QSTASH_SETTINGS, [name]: value });
    assert.match(message, new RegExp(`^${name} starts or ends with a space`));
    assert.ok(!message.includes(value.trim()), message);
  }
});

Deno.test("loadConfig() refuses a secret wrapped in quotes, as an env file read literally keeps them, never echoing it", () => {
  // docker run --env-file and kubectl create secret --from-env-file take
  // WEBHOOK_SECRET="…" quotes and all: every delivery signed with the
  // secret, or by QStash with its keys, was a 401 that could not say why.
  for (
    const [name, value] of [
      ["WEBHOOK_SECRET", '"a-webhook-secret-16"'],
      ["WEBHOOK_SECRET_NEXT", "'a-webhook-secret-17'"],
      ["QSTASH_CURRENT_SIGNING_KEY", '"sig_current_0123456789"'],
      ["QSTASH_NEXT_SIGNING_KEY", "'sig_next_0123456789ab'"],
    ] as const
  ) {
    const message = refusal({
      ...base,
      ...QSTASH_SETTINGS,
      WEBHOOK_SECRET: "a-webhook-secret-15",
      [name]: value,
    });
    assert.match(message, new RegExp(`^${name} is wrapped in quotes`));
    assert.ok(!message.includes(value.slice(1, -1)), message);
  }
  // A quote inside a secret, or at one end only, is the secret's own.
  for (const value of ['a-"webhook"-secret-16', '"a-webhook-secret-16']) {
    assert.equal(
      loadConfig({ ...base, WEBHOOK_SECRET: value }).webhookSecret,
      value,
    );
  }
});

Deno.test("loadConfig() reads the queue settings with their defaults", () => {
  const config = loadConfig(base);
  assert.deepEqual(config.queues, {
    qstash: { kind: "qstash", retries: 9, leaseMs: 30_000, clockSkewMs: 5_000 },
    pubsub: {
      kind: "pubsub",
      minBackoffMs: 10_000,
      maxBackoffMs: 600_000,
      clockSkewMs: 5_000,
    },
  });
  assert.equal(
    loadConfig({ ...base, MAX_DELIVERIES: "300" }).queues.qstash.retries,
    100,
  );
  assert.deepEqual(
    loadConfig({ ...base, CLOUDFLARE_MAX_RETRIES: "9" }).queues.cloudflare,
    { kind: "cloudflare", maxRetries: 9, clockSkewMs: 5_000 },
  );
  // Unset, QSTASH_RETRIES is MAX_DELIVERIES − 1, or more where the failure
  // callback's retries would all come while a give-up is busy behind a
  // lease (LEASE + 2 × CLOCK_SKEW): the service starts on its own default.
  for (
    const [env, retries] of [
      [{ MAX_DELIVERIES: "1" }, 2],
      [{ MAX_DELIVERIES: "2" }, 2],
      [{ MAX_DELIVERIES: "3" }, 2],
      [{ MAX_DELIVERIES: "3", LEASE: "3m" }, 3],
      [{ MAX_DELIVERIES: "5", LEASE: "3m" }, 4],
    ] as const
  ) {
    assert.equal(
      loadConfig({
        ...base,
        ...qstash,
        STUCK_AFTER: "0s",
        CLOCK_SKEW: "0s",
        ...env,
      }).queues.qstash.retries,
      retries,
      JSON.stringify(env),
    );
  }
  // An unconfigured queue is not checked: QStash's 2 retries stop nothing here.
  assert.equal(
    loadConfig({ ...base, QSTASH_RETRIES: "2" }).queues.qstash.retries,
    2,
  );
});

Deno.test("loadConfig() refuses QSTASH_RETRIES + 1 < MAX_DELIVERIES with both numbers and the plan's cap", () => {
  assert.equal(
    refusal({ ...base, ...qstash, QSTASH_RETRIES: "4" }),
    "QSTASH_RETRIES is 4, so QStash gives up after 5 deliveries, before MAX_DELIVERIES (10): set QSTASH_RETRIES to at least 9 (MAX_DELIVERIES − 1; it can be at most your QStash plan's retry cap), or lower MAX_DELIVERIES and check the window with deno task schedule --queue qstash",
  );
  refused(
    { ...base, ...qstash, QSTASH_RETRIES: "4" },
    "QSTASH_RETRIES",
    /QSTASH_RETRIES is 4/,
  );
  assert.doesNotThrow(() => loadConfig({ ...base, ...qstash }));
  assert.doesNotThrow(() =>
    loadConfig({ ...base, ...qstash, QSTASH_RETRIES: "20" })
  );
  refused(
    { ...base, ...qstash, MAX_DELIVERIES: "150" },
    "QSTASH_RETRIES",
    /^QSTASH_RETRIES is 100, so QStash gives up after 101 deliveries, before MAX_DELIVERIES \(150\): QSTASH_RETRIES is taken up to 100 here \(QStash documents no upper bound of its own; its published plan caps are 3, 5 and 20\), so lower MAX_DELIVERIES to at most 101/,
  );
  refused(
    { ...base, QSTASH_RETRIES: "101" },
    "QSTASH_RETRIES",
    /from 0 to 100 and at most your QStash plan's retry cap: current value is 101/,
  );
  // Retry-After is honoured up to 1 day: a 3-day cap shrinks the window.
  // (Two retries: the failure callback's one retry, 12 s after its first
  // call, would not outlast a give-up busy behind a 30 s lease.)
  refused(
    {
      ...base,
      ...qstash,
      MAX_DELIVERIES: "2",
      QSTASH_RETRIES: "2",
      BASE: "72h",
      CAP: "72h",
      JITTER: "none",
      STUCK_AFTER: "36h",
    },
    "CAP",
    /On QStash, which honours Retry-After up to 1 day, the rescue window is 24h0m0s .* STUCK_AFTER is 36h0m0s/,
  );
});

Deno.test("loadConfig() says a PUBSUB_MIN_BACKOFF it refuses is its default when unset, as it cannot read the subscription's own", () => {
  // A subscription set to 40s whose setting was forgotten: the refusal must
  // not read as if the operator had set 10s.
  assert.match(
    refusal({ ...base, ...pubsub }),
    /^PUBSUB_MIN_BACKOFF is 10s, its default \(unset: this service cannot read the subscription's retry policy\), and Pub\/Sub applies its own backoff/,
  );
  assert.match(
    refusal({ ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "10s" }),
    /^PUBSUB_MIN_BACKOFF is 10s, and Pub\/Sub applies its own backoff/,
  );
});

Deno.test("loadConfig() refuses Pub/Sub whose own backoff cannot outlast STUCK_AFTER, and says the minimum backoff it needs", () => {
  assert.equal(
    refusal({
      ...base,
      ...pubsub,
      PUBSUB_MIN_BACKOFF: "1s",
      PUBSUB_MAX_BACKOFF: "10s",
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "100",
      ...deadLetter,
    }),
    "PUBSUB_MIN_BACKOFF is 1s, and Pub/Sub applies its own backoff, guaranteeing only that much per gap: the rescue window is 9s over 10 deliveries (PUBSUB_MAX_BACKOFF 10s, PUBSUB_MAX_DELIVERY_ATTEMPTS 100) but STUCK_AFTER is 5m0s and CLOCK_SKEW is 5s (an instance whose clock runs that far behind the one that recorded a send reads the payment as stuck that much later): a settling payment would be poisoned before its rescue. Set the subscription's minimum backoff and PUBSUB_MIN_BACKOFF to at least 33.889s ((STUCK_AFTER + CLOCK_SKEW) / (MAX_DELIVERIES − 1)), with PUBSUB_MAX_BACKOFF no lower",
  );
  refused(
    { ...base, ...pubsub, CLOCK_SKEW: "0" },
    "PUBSUB_MIN_BACKOFF",
    /STUCK_AFTER is 5m0s: .* at least 33\.334s \(STUCK_AFTER \/ \(MAX_DELIVERIES − 1\)\)/,
  );
  // Google's defaults for a configured policy (10s … 10m) are not enough
  // for the default policy; no retry policy at all (0s) even less.
  refused({ ...base, ...pubsub }, "PUBSUB_MIN_BACKOFF", /at least 33\.889s/);
  refused(
    { ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "0s", PUBSUB_MAX_BACKOFF: "0s" },
    "PUBSUB_MIN_BACKOFF",
    /rescue window is 0s over 10 deliveries/,
  );
  assert.doesNotThrow(() =>
    loadConfig({ ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "33.889s" })
  );
  refused(
    { ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "33.888s" },
    "PUBSUB_MIN_BACKOFF",
    /rescue window is 5m4\.992s/,
  );
  refused(
    { ...base, ...pubsub, MAX_DELIVERIES: "2", STUCK_AFTER: "20m" },
    "STUCK_AFTER", // the policy's own window is refused first
    /rescue window/,
  );
  refused(
    {
      ...base,
      ...pubsub,
      MAX_DELIVERIES: "2",
      BASE: "40m",
      CAP: "40m",
      STUCK_AFTER: "15m",
      PUBSUB_MIN_BACKOFF: "10m",
    },
    "PUBSUB_MIN_BACKOFF",
    /No minimum backoff Pub\/Sub allows \(at most 10m\) is enough: raise MAX_DELIVERIES to at least 3/,
  );
  // The deliveries named outlast STUCK_AFTER and CLOCK_SKEW together:
  // 20m5s needs 3 gaps of 10m (4 deliveries), 20m alone 2 (3), which
  // the operator would set, and be refused again.
  const far = {
    ...base,
    ...pubsub,
    MAX_DELIVERIES: "2",
    BASE: "3h",
    CAP: "3h",
    STUCK_AFTER: "20m",
    PUBSUB_MIN_BACKOFF: "10m",
  };
  refused(
    far,
    "PUBSUB_MIN_BACKOFF",
    /raise MAX_DELIVERIES to at least 4 with a 10m minimum backoff, or lower STUCK_AFTER or CLOCK_SKEW$/,
  );
  refused(
    { ...far, MAX_DELIVERIES: "3" },
    "PUBSUB_MIN_BACKOFF",
    /raise MAX_DELIVERIES to at least 4 /,
  );
  assert.doesNotThrow(() => loadConfig({ ...far, MAX_DELIVERIES: "4" }));
  refused(
    { ...far, CLOCK_SKEW: "0" },
    "PUBSUB_MIN_BACKOFF",
    /raise MAX_DELIVERIES to at least 3 with a 10m minimum backoff, or lower STUCK_AFTER$/,
  );
});

Deno.test("loadConfig() refuses, with Pub/Sub push, a SENDER_TIMEOUT no acknowledgement deadline can cover", () => {
  const ok = { ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "40s" };
  refused(
    { ...ok, SENDER_TIMEOUT: "5m", LEASE: "10m", STUCK_AFTER: "5m" },
    "SENDER_TIMEOUT",
    /^SENDER_TIMEOUT \(5m0s\) is too long for Pub\/Sub push: a push is answered within about 2 × SENDER_TIMEOUT \+ 5s \(10m5s\), and Pub\/Sub waits at most 10m .*Set SENDER_TIMEOUT to at most 4m57\.5s$/,
  );
  assert.doesNotThrow(() =>
    loadConfig({
      ...ok,
      SENDER_TIMEOUT: "297500ms",
      LEASE: "10m",
      STUCK_AFTER: "5m",
    })
  );
  // Without Pub/Sub, no such bound.
  assert.doesNotThrow(() =>
    loadConfig({
      ...base,
      SENDER_TIMEOUT: "5m",
      LEASE: "10m",
      STUCK_AFTER: "5m",
    })
  );
});

Deno.test("loadConfig() refuses a Pub/Sub message retention a job can outlive: an expired message is dropped with no dead letter", () => {
  const ok = { ...base, ...pubsub, PUBSUB_MIN_BACKOFF: "40s" };
  // Ten deliveries, each failed push up to 25s (2 × SENDER_TIMEOUT + 5s)
  // and 10m before the next: 9 × 10m25s = 1h33m45s to the tenth; then a
  // busy answer behind a lease (LEASE + 2 × CLOCK_SKEW, 40s) and one more
  // push: more than 10 × 10m25s + 40s = 1h44m50s.
  refused(
    { ...ok, PUBSUB_MESSAGE_RETENTION: "93m45s" },
    "PUBSUB_MESSAGE_RETENTION",
    /^PUBSUB_MESSAGE_RETENTION is 1h33m45s, and each failed delivery may take up to 25s \(2 × SENDER_TIMEOUT \+ 5s\) and PUBSUB_MAX_BACKOFF \(10m0s\) before the next, so a message can expire after 9 deliveries, before MAX_DELIVERIES \(10\): Pub\/Sub then drops it with no dead letter, and its intent is stranded\. Set the subscription's message retention, and PUBSUB_MESSAGE_RETENTION, to more than 1h44m50s /,
  );
  // Ten pushes fit, but not a busy last one and the push after it.
  refused(
    { ...ok, PUBSUB_MESSAGE_RETENTION: "104m50s" },
    "PUBSUB_MESSAGE_RETENTION",
    /^PUBSUB_MESSAGE_RETENTION is 1h44m50s, .* so a message can expire while its last delivery \(MAX_DELIVERIES, 10\) is answered busy behind another's lease \(up to LEASE \+ 2 × CLOCK_SKEW, 40s\), before the push that would resolve it: Pub\/Sub then drops it with no dead letter, and its intent is stranded\. Set the subscription's message retention, and PUBSUB_MESSAGE_RETENTION, to more than 1h44m50s /,
  );
  const accepted = loadConfig({ ...ok, PUBSUB_MESSAGE_RETENTION: "104m51s" })
    .queues.pubsub;
  assert.deepEqual([accepted.retentionMs, accepted.ackDeadlineMs], [
    6_291_000,
    25_000,
  ]);
  // A longer SENDER_TIMEOUT takes longer pushes: the same retention is short.
  refused(
    {
      ...ok,
      PUBSUB_MESSAGE_RETENTION: "104m51s",
      SENDER_TIMEOUT: "30s",
      LEASE: "1m",
    },
    "PUBSUB_MESSAGE_RETENTION",
    /may take up to 1m5s \(2 × SENDER_TIMEOUT \+ 5s\)/,
  );
  // A shorter backoff fits more deliveries in the same retention: ten
  // pushes 1m5s apart, a busy last one and the push after it in 11m31s.
  assert.doesNotThrow(() =>
    loadConfig({
      ...ok,
      PUBSUB_MESSAGE_RETENTION: "11m31s",
      PUBSUB_MIN_BACKOFF: "40s",
      PUBSUB_MAX_BACKOFF: "40s",
    })
  );
  // Ten pushes fit in 1h40m, eleven do not: the tenth may be answered
  // busy, and it is the last of them that the message surely sees.
  refused(
    { ...ok, PUBSUB_MESSAGE_RETENTION: "100m" },
    "PUBSUB_MESSAGE_RETENTION",
    /^PUBSUB_MESSAGE_RETENTION is 1h40m0s, .* so a message can expire while its last delivery \(MAX_DELIVERIES, 10\) is answered busy behind another's lease/,
  );
  // A dead-letter policy of ten attempts gives up only once its tenth
  // push failed: at most 9 × 10m25s + 25s = 1h34m10s after the first.
  // A message that expires first is dropped with no dead letter.
  for (const retention of ["5626s", "5650s"]) {
    refused(
      {
        ...ok,
        ...deadLetter,
        PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
        PUBSUB_MESSAGE_RETENTION: retention,
      },
      "PUBSUB_MESSAGE_RETENTION",
      /, so a message can expire while its last delivery attempt \(PUBSUB_MAX_DELIVERY_ATTEMPTS, 10\) is pushed, before Pub\/Sub forwards it to the dead-letter topic: Pub\/Sub then drops it with no dead letter, and its intent is stranded\. Set the subscription's message retention, and PUBSUB_MESSAGE_RETENTION, to more than 1h34m10s \(\(PUBSUB_MAX_DELIVERY_ATTEMPTS − 1\) × \(2 × SENDER_TIMEOUT \+ 5s \+ PUBSUB_MAX_BACKOFF\) \+ 2 × SENDER_TIMEOUT \+ 5s\), or lower PUBSUB_MAX_BACKOFF, and check the retention you choose with deno task schedule --queue pubsub --min-backoff 40s --max-delivery-attempts 10 --message-retention \S+$/,
    );
  }
  // Eleven attempts may be lowered, to no fewer than MAX_DELIVERIES.
  refused(
    {
      ...ok,
      ...deadLetter,
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "11",
      PUBSUB_MESSAGE_RETENTION: "6275s",
    },
    "PUBSUB_MESSAGE_RETENTION",
    /, to more than 1h44m35s \(.*\), or lower PUBSUB_MAX_BACKOFF, or PUBSUB_MAX_DELIVERY_ATTEMPTS to no fewer than MAX_DELIVERIES \(10\), and check the retention you choose with deno task schedule --queue pubsub --min-backoff 40s --max-delivery-attempts 11 --message-retention 1h44m35s$/,
  );
  assert.doesNotThrow(() =>
    loadConfig({
      ...ok,
      ...deadLetter,
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
      PUBSUB_MESSAGE_RETENTION: "5651s",
    })
  );
  // With a dead-letter policy that stops first, that is what is named.
  refused(
    {
      ...ok,
      ...deadLetter,
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "9",
      PUBSUB_MESSAGE_RETENTION: "168h",
    },
    "PUBSUB_MAX_DELIVERY_ATTEMPTS",
    /^PUBSUB_MAX_DELIVERY_ATTEMPTS is 9/,
  );
  // A dead-letter policy whose give-up comes within the retention (ten
  // pushes begun in 1h40m) hands the job to its route: the busy wait
  // after the last push needs no retention of its own.
  const givesUp = { ...ok, ...deadLetter, PUBSUB_MAX_DELIVERY_ATTEMPTS: "10" };
  assert.equal(
    loadConfig({ ...givesUp, PUBSUB_MESSAGE_RETENTION: "100m" }).queues.pubsub
      .retentionMs,
    6_000_000,
  );
  // One whose tenth push may come after the message expired does not.
  // It names the retention that is enough: past 1h34m10s the tenth
  // attempt's push surely ends, and Pub/Sub forwards the message.
  refused(
    { ...givesUp, PUBSUB_MESSAGE_RETENTION: "93m45s" },
    "PUBSUB_MESSAGE_RETENTION",
    /so a message can expire after 9 deliveries, before MAX_DELIVERIES \(10\): .* to more than 1h34m10s \(\(PUBSUB_MAX_DELIVERY_ATTEMPTS − 1\) × \(2 × SENDER_TIMEOUT \+ 5s \+ PUBSUB_MAX_BACKOFF\) \+ 2 × SENDER_TIMEOUT \+ 5s\), or lower PUBSUB_MAX_BACKOFF, and check the retention you choose with deno task schedule --queue pubsub --min-backoff 40s --max-delivery-attempts 10 --message-retention 1h33m45s$/,
  );
  assert.doesNotThrow(() =>
    loadConfig({ ...givesUp, PUBSUB_MESSAGE_RETENTION: "5651s" })
  );
  // Fewer attempts than MAX_DELIVERIES stop the job early whatever the
  // retention: it names the retention the deliveries need.
  refused(
    {
      ...givesUp,
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "9",
      PUBSUB_MESSAGE_RETENTION: "80m",
    },
    "PUBSUB_MESSAGE_RETENTION",
    /so a message can expire after 8 deliveries, before MAX_DELIVERIES \(10\): .* to more than 1h44m50s \(MAX_DELIVERIES × /,
  );
  for (const retention of ["9m", "745h", "2678400001ms"]) {
    refused(
      { ...ok, PUBSUB_MESSAGE_RETENTION: retention },
      "PUBSUB_MESSAGE_RETENTION",
      /^PUBSUB_MESSAGE_RETENTION must be from 10m to 744h/,
    );
  }
  // 744h itself is Pub/Sub's longest, and taken.
  assert.equal(
    loadConfig({ ...ok, PUBSUB_MESSAGE_RETENTION: "744h" }).queues.pubsub
      .retentionMs,
    2_678_400_000,
  );
});

Deno.test("loadConfig() refuses a Pub/Sub dead-letter policy that stops before MAX_DELIVERIES, and bad Pub/Sub settings", () => {
  const ok = { ...base, ...pubsub, ...deadLetter, PUBSUB_MIN_BACKOFF: "40s" };
  refused(
    { ...ok, PUBSUB_MAX_DELIVERY_ATTEMPTS: "9" },
    "PUBSUB_MAX_DELIVERY_ATTEMPTS",
    /^PUBSUB_MAX_DELIVERY_ATTEMPTS is 9, so Pub\/Sub dead-letters a job after 9 deliveries, before MAX_DELIVERIES \(10\)/,
  );
  assert.equal(
    loadConfig({ ...ok, PUBSUB_MAX_DELIVERY_ATTEMPTS: "10" }).queues.pubsub
      .maxDeliveryAttempts,
    10,
  );
  // The jobs Pub/Sub gives up on need their route, or their intents strand.
  const { PUBSUB_DEAD_LETTER_AUDIENCE: _, ...noRoute } = ok;
  refused(
    { ...noRoute, PUBSUB_MAX_DELIVERY_ATTEMPTS: "10" },
    "PUBSUB_DEAD_LETTER_AUDIENCE",
    /^PUBSUB_DEAD_LETTER_AUDIENCE is missing: with PUBSUB_MAX_DELIVERY_ATTEMPTS set \(10\), .* only POST \/v1\/pubsub\/dead-letter resolves its intent/,
  );
  assert.doesNotThrow(() => loadConfig(noRoute)); // no dead-letter policy
  refused(
    { ...ok, PUBSUB_MAX_DELIVERY_ATTEMPTS: "4" },
    "PUBSUB_MAX_DELIVERY_ATTEMPTS",
    /from 5 to 100: current value is 4/,
  );
  refused(
    { ...ok, PUBSUB_MAX_BACKOFF: "11m" },
    "PUBSUB_MAX_BACKOFF",
    /at most 10m/,
  );
  refused(
    { ...ok, PUBSUB_MAX_BACKOFF: "30s" },
    "PUBSUB_MIN_BACKOFF",
    /PUBSUB_MIN_BACKOFF \(40s\) must be at most PUBSUB_MAX_BACKOFF \(30s\)/,
  );
  refused(
    { ...ok, PUBSUB_MIN_BACKOFF: "soon" },
    "PUBSUB_MIN_BACKOFF",
    /duration/,
  );
});

Deno.test("loadConfig() reads CLOUDFLARE_DLQ_MAX_RETRIES for the queue handler, which checks it: Cloudflare's default of 3 is refused", async () => {
  const { createQueueHandler } = await import(
    "../../cloudflare/queue_handler.ts"
  );
  const { createRelayer } = await import("../../mod.ts");
  assert.equal(loadConfig(base).cloudflareDeadLetterMaxRetries, undefined);
  refused(
    { ...base, CLOUDFLARE_DLQ_MAX_RETRIES: "101" },
    "CLOUDFLARE_DLQ_MAX_RETRIES",
    /^CLOUDFLARE_DLQ_MAX_RETRIES must be a whole number from 0 to 100: current value is 101$/,
  );
  const handler = (value: string) => {
    const config = loadConfig({
      ...base,
      CLOUDFLARE_MAX_RETRIES: "9",
      CLOUDFLARE_DLQ_MAX_RETRIES: value,
    });
    return createQueueHandler({
      relayer: createRelayer({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        policy: config.policy,
      }),
      maxRetries: config.queues.cloudflare?.maxRetries,
      deadLetterQueue: "relayer-jobs-dlq",
      deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries,
    });
  };
  assert.throws(() => handler("3"), /CLOUDFLARE_DLQ_MAX_RETRIES/);
  handler("100");
});

/**
 * Makes a Cloudflare queue handler of `loadConfig({ ...base, ...env })`
 * (with CLOUDFLARE_MAX_RETRIES=9 and CLOUDFLARE_DLQ_MAX_RETRIES=100) as
 * main.ts wires it, its retentions and delivery delay given: making it
 * throws what the handler refuses.
 */
async function cloudflareHandlerOf(): Promise<
  (env: Record<string, string>) => unknown
> {
  const { createQueueHandler } = await import(
    "../../cloudflare/queue_handler.ts"
  );
  const { createRelayer } = await import("../../mod.ts");
  return (env) => {
    const config = loadConfig({
      ...base,
      CLOUDFLARE_MAX_RETRIES: "9",
      CLOUDFLARE_DLQ_MAX_RETRIES: "100",
      ...env,
    });
    return createQueueHandler({
      relayer: createRelayer({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        policy: config.policy,
        leaseMs: config.leaseMs,
        clockSkewMs: config.clockSkewMs,
      }),
      maxRetries: config.queues.cloudflare?.maxRetries,
      deadLetterQueue: "relayer-jobs-dlq",
      deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries,
      ...config.cloudflareRetentions,
    });
  };
}

Deno.test("loadConfig() reads CLOUDFLARE_MESSAGE_RETENTION and CLOUDFLARE_DLQ_MESSAGE_RETENTION for the queue handler, which checks them", async () => {
  const handlerOf = await cloudflareHandlerOf();
  const unset = loadConfig(base);
  assert.equal(unset.cloudflareRetentions, undefined);
  assert.deepEqual(
    loadConfig({ ...base, CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h" })
      .cloudflareRetentions,
    { deadLetterMessageRetentionMs: 1_209_600_000 },
  );
  assert.deepEqual(
    loadConfig({ ...base, CLOUDFLARE_MESSAGE_RETENTION: "96h" })
      .cloudflareRetentions,
    { messageRetentionMs: 345_600_000 },
  );
  // Cloudflare's shortest, 60 s, is refused by the handler's rule, counted
  // with Cloudflare's 3 retries where CLOUDFLARE_MAX_RETRIES is not set.
  refused(
    { ...base, CLOUDFLARE_MESSAGE_RETENTION: "1m" },
    "CLOUDFLARE_MESSAGE_RETENTION",
    /^CLOUDFLARE_MESSAGE_RETENTION is 1m0s: the waits this handler asks between a message's 4 deliveries \(max_retries = 3\) span up to 2m0s/,
  );
  for (
    const name of [
      "CLOUDFLARE_MESSAGE_RETENTION",
      "CLOUDFLARE_DLQ_MESSAGE_RETENTION",
    ]
  ) {
    for (
      const [value, shown] of [
        ["59s", "59s"],
        ["337h", "337h0m0s"],
        ["90500ms", "1m30.5s"],
      ] as const
    ) {
      refused(
        { ...base, [name]: value },
        name,
        new RegExp(
          `^${name} must be whole seconds from 1m to 336h \\(the queue's --message-retention-period-secs, 60 to 1209600; 96h unless set\\): current value is ${
            shown.replace(".", "\\.")
          }$`,
        ),
      );
    }
  }
  const handler = (jobs: string, dead: string) =>
    handlerOf({
      CLOUDFLARE_MESSAGE_RETENTION: jobs,
      CLOUDFLARE_DLQ_MESSAGE_RETENTION: dead,
    });
  assert.throws(() => handler("10m", "336h"), /CLOUDFLARE_MESSAGE_RETENTION/);
  assert.throws(() => handler("96h", "1m"), /CLOUDFLARE_DLQ_MESSAGE_RETENTION/);
  handler("96h", "336h");
});

Deno.test("loadConfig() reads CLOUDFLARE_DELIVERY_DELAY with the retentions, and the queue handler counts it in the jobs queue's", async () => {
  const handlerOf = await cloudflareHandlerOf();
  assert.deepEqual(
    loadConfig({ ...base, CLOUDFLARE_DELIVERY_DELAY: "1m" })
      .cloudflareRetentions,
    { deliveryDelayMs: 60_000 },
  );
  for (
    const [value, shown] of [["1500ms", "1.5s"], ["25h", "25h0m0s"]] as const
  ) {
    refused(
      { ...base, CLOUDFLARE_DELIVERY_DELAY: value },
      "CLOUDFLARE_DELIVERY_DELAY",
      new RegExp(
        `^CLOUDFLARE_DELIVERY_DELAY must be whole seconds from 0 to 24h \\(the queue's --delivery-delay-secs, or the longest delaySeconds a producer sends with\\): current value is ${
          shown.replace(".", "\\.")
        }$`,
      ),
    );
  }
  const handler = (delay: string) =>
    handlerOf({
      CLOUDFLARE_MESSAGE_RETENTION: "721s",
      CLOUDFLARE_DELIVERY_DELAY: delay,
    });
  handler("0s");
  assert.throws(() => handler("1s"), /delivery delay \(1s\)/);
});

Deno.test("loadConfig() checks CLOUDFLARE_MAX_RETRIES when it is set", () => {
  refused(
    { ...base, CLOUDFLARE_MAX_RETRIES: "3" },
    "CLOUDFLARE_MAX_RETRIES",
    /^CLOUDFLARE_MAX_RETRIES is 3, so Cloudflare Queues move a job to the dead-letter queue after 4 deliveries, before MAX_DELIVERIES \(10\)/,
  );
  refused(
    { ...base, CLOUDFLARE_MAX_RETRIES: "101" },
    "CLOUDFLARE_MAX_RETRIES",
    /from 0 to 100/,
  );
  refused(
    {
      ...base,
      CLOUDFLARE_MAX_RETRIES: "1",
      MAX_DELIVERIES: "2",
      BASE: "24h",
      CAP: "24h",
      JITTER: "none",
      STUCK_AFTER: "18h",
    },
    "CAP",
    /On Cloudflare Queues, where the queue handler asks for delays of at most 12h \(Cloudflare takes up to 24h\), the rescue window is 12h0m0s/,
  );
});

Deno.test("loadConfig() refuses with one line that holds both numbers, whatever the queue settings", () => {
  const settings = fc.record({
    maxDeliveries: fc.integer({ min: 1, max: 30 }),
    stuckAfterMs: fc.integer({ min: 0, max: 3_600_000 }),
    retries: fc.integer({ min: 0, max: 100 }),
    attempts: fc.option(fc.integer({ min: 5, max: 100 }), { nil: undefined }),
    minBackoffMs: fc.integer({ min: 0, max: 600_000 }),
    maxRetries: fc.integer({ min: 0, max: 100 }),
    queue: fc.constantFrom("qstash", "pubsub", "cloudflare"),
    clockSkewMs: fc.integer({ min: 0, max: 60_000 }),
  });
  fc.assert(
    fc.property(settings, (s) => {
      const policy = definePolicy({
        maxDeliveries: s.maxDeliveries,
        capMs: 3_600_000,
        stuckAfterMs: s.stuckAfterMs,
      });
      // The policy's own check.
      if (rescueWindow(policy) < policy.stuckAfterMs + s.clockSkewMs) return;
      const env: Record<string, string> = {
        ...base,
        // checkQueue counts the clock skew the queue carries, as the
        // service counts CLOCK_SKEW.
        CLOCK_SKEW: `${s.clockSkewMs}ms`,
        MAX_DELIVERIES: String(s.maxDeliveries),
        CAP: "1h",
        STUCK_AFTER: `${s.stuckAfterMs}ms`,
        ...(s.queue === "qstash"
          ? { ...qstash, QSTASH_RETRIES: String(s.retries) }
          : s.queue === "pubsub"
          ? {
            ...pubsub,
            PUBSUB_MIN_BACKOFF: `${s.minBackoffMs}ms`,
            ...(s.attempts === undefined ? {} : {
              PUBSUB_MAX_DELIVERY_ATTEMPTS: String(s.attempts),
              ...deadLetter,
            }),
          }
          : {
            CLOUDFLARE_MAX_RETRIES: String(s.maxRetries),
            // The longest retentions: their own rule is tested elsewhere.
            CLOUDFLARE_MESSAGE_RETENTION: "336h",
            CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
          }),
      };
      const { clockSkewMs } = s;
      const queue: QueueLimits = s.queue === "qstash"
        ? { kind: "qstash", retries: s.retries, clockSkewMs }
        : s.queue === "pubsub"
        ? {
          kind: "pubsub",
          ...(s.attempts === undefined
            ? {}
            : { maxDeliveryAttempts: s.attempts }),
          minBackoffMs: s.minBackoffMs,
          maxBackoffMs: 600_000,
          clockSkewMs,
        }
        : { kind: "cloudflare", maxRetries: s.maxRetries, clockSkewMs };
      const check = checkQueue(policy, queue);
      if (check.problem === null) {
        assert.doesNotThrow(() => loadConfig(env));
        return;
      }
      const line = refusal(env);
      assert.ok(!line.includes("\n"), line);
      if (check.problem === "stops_early") {
        assert.ok(
          line.includes(`gives up after ${check.limit}`) ||
            line.includes(
              `after ${check.limit} ${
                check.limit === 1 ? "delivery" : "deliveries"
              }`,
            ),
          line,
        );
        assert.ok(line.includes(`MAX_DELIVERIES (${s.maxDeliveries})`), line);
      } else {
        assert.ok(line.includes(formatDuration(check.windowMs)), line);
        assert.ok(
          line.includes(`STUCK_AFTER is ${formatDuration(s.stuckAfterMs)}`),
          line,
        );
      }
    }),
    { numRuns: runs(500) },
  );
});

Deno.test("loadConfig() refuses a SENDER_TIMEOUT longer than a timer can wait, and a CAP the local KV queue cannot delay", () => {
  refused(
    { ...base, SENDER_TIMEOUT: "600h", LEASE: "1500h" },
    "SENDER_TIMEOUT",
    /^SENDER_TIMEOUT must be from 1ms to 2147483647ms \(596h31m23\.647s, the longest a timer waits\): current value is 600h0m0s$/,
  );
  refused(
    { ...base, SENDER_TIMEOUT: "0" },
    "SENDER_TIMEOUT",
    /^SENDER_TIMEOUT must be from 1ms/,
  );
  assert.equal(
    loadConfig({ ...base, SENDER_TIMEOUT: "2147483647", LEASE: "1500h" })
      .sender.timeoutMs,
    2_147_483_647,
  );
  refused(
    { ...base, KV_QUEUE: "1", CAP: "744h" },
    "CAP",
    /^CAP is 744h0m0s, but the local Deno KV queue delays a message at most 30 days, so a retry could not be enqueued: lower CAP to 720h or less$/,
  );
  assert.equal(
    loadConfig({ ...base, KV_QUEUE: "1", CAP: "720h" }).policy.capMs,
    30 * 24 * 60 * 60 * 1000,
  );
  // A busy answer waits what is left of the lease and the skew twice, up
  // to LEASE + 2 × CLOCK_SKEW: Deno KV refuses that delay past 30 days, and
  // each of its redeliveries counted a delivery.
  refused(
    { ...base, KV_QUEUE: "1", SENDER_TIMEOUT: "400h", LEASE: "800h" },
    "LEASE",
    /^LEASE is 800h0m0s, but the local Deno KV queue delays a message at most 30 days, and a delivery behind a send in flight waits up to LEASE and CLOCK_SKEW twice \(800h0m10s\): lower LEASE to 719h59m50s or less$/,
  );
  assert.equal(
    loadConfig({ ...base, KV_QUEUE: "1", LEASE: "719h59m50s" }).leaseMs,
    30 * 86_400_000 - 10_000,
  );
  assert.equal(
    loadConfig({ ...base, SENDER_TIMEOUT: "400h", LEASE: "800h" }).leaseMs,
    800 * 3_600_000,
  );
  assert.equal(
    loadConfig({ ...base, CAP: "744h" }).policy.capMs,
    31 * 86_400_000,
  );
});

Deno.test("loadConfig() reads CLOCK_SKEW (default 5s, 0 for one machine's clock) and refuses more than its replay records cover (10m)", () => {
  assert.equal(loadConfig(base).clockSkewMs, 5_000);
  assert.equal(loadConfig({ ...base, CLOCK_SKEW: "0ms" }).clockSkewMs, 0);
  assert.equal(loadConfig({ ...base, CLOCK_SKEW: "250ms" }).clockSkewMs, 250);
  // 10 minutes of skew need a rescue window of STUCK_AFTER and 10 minutes:
  // 20 deliveries guarantee 15m17.5s.
  assert.equal(
    loadConfig({ ...base, CLOCK_SKEW: "10m", MAX_DELIVERIES: "20" })
      .clockSkewMs,
    600_000,
  );
  refused(
    { ...base, CLOCK_SKEW: "30s" },
    "STUCK_AFTER",
    /rescue window is 5m17\.5s .* STUCK_AFTER is 5m0s and CLOCK_SKEW is 30s/,
  );
  // A replay record is deleted 10 minutes after it expires, by the
  // deleting instance's clock: with clocks 30 minutes apart, one ahead
  // deletes it while one behind still accepts the signature.
  refused(
    { ...base, CLOCK_SKEW: "30m" },
    "CLOCK_SKEW",
    /^CLOCK_SKEW must be at most 10m0s, the grace a replay record keeps after it expires .*: current value is 30m0s\. Synchronise the instances' clocks \(NTP\) instead$/,
  );
});

Deno.test("loadConfig() on Deno Deploy refuses to start without a Deno KV database attached to the app: Deno.openKv() would fall back to a store of each isolate's own", () => {
  const deploy = { ...base, DENO_DEPLOYMENT_ID: "abc" };
  const notAttached =
    /^No Deno KV database is attached to this app on Deno Deploy: .*in-memory store of each isolate's own.*Provision Database.*Assign.*redeploy.*DATABASE_URL/;
  refused(deploy, "DENO_KV_DEFAULT_PATH", notAttached);
  refused(
    { ...deploy, DENO_KV_DEFAULT_PATH: "" },
    "DENO_KV_DEFAULT_PATH",
    notAttached,
  );
  // A file, or memory, is the isolate's own too: what Deno itself checks.
  for (const path of ["/tmp/kv.sqlite3", ":memory:", "default"]) {
    refused(
      { ...deploy, DENO_KV_DEFAULT_PATH: path },
      "DENO_KV_DEFAULT_PATH",
      notAttached,
    );
  }
  refused(
    { ...deploy, DENO_KV_PATH_PREFIX: "https://kv.test/databases/" },
    "DENO_KV_DEFAULT_PATH",
    notAttached,
  );
  // Attached: an http(s) database, written whole or after Deno's prefix.
  for (
    const env of [
      { DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect" },
      { DENO_KV_DEFAULT_PATH: "http://127.0.0.1:4512/kv" },
      {
        DENO_KV_PATH_PREFIX: "https://kv.test/databases/",
        DENO_KV_DEFAULT_PATH: "0123/connect",
      },
    ]
  ) {
    assert.deepEqual(loadConfig({ ...deploy, ...env }).kv, { platform: true });
  }
  // Another store, named by the operator, needs no attached database.
  assert.deepEqual(
    loadConfig({ ...deploy, KV_URL: "https://kv.test/db" }).kv,
    { url: "https://kv.test/db" },
  );
  assert.ok(
    loadConfig({ ...deploy, DATABASE_URL: "postgres://u:p@db.test/relayer" })
      .database,
  );
  // Not on Deploy: the local file, whatever DENO_KV_DEFAULT_PATH says.
  assert.deepEqual(loadConfig(base).kv, { path: "./data/relayer.kv" });
});

Deno.test("loadConfig() on Deno Deploy refuses KV_PATH, with a database attached or not: Deno.openKv() would open it in place of the attached one, a store of each isolate's own", () => {
  const deploy = { ...base, DENO_DEPLOYMENT_ID: "abc" };
  const isolates =
    /^KV_PATH is refused on Deno Deploy: a file or :memory: there is a store of each isolate's own, .*two of them could send one payment\. Remove KV_PATH from the app's environment variables and assign the app a Deno KV database .*DATABASE_URL$/;
  for (
    const attached of [
      {},
      { DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect" },
    ]
  ) {
    for (const path of [":memory:", "./data/relayer.kv", "/tmp/kv.sqlite3"]) {
      refused({ ...deploy, ...attached, KV_PATH: path }, "KV_PATH", isolates);
    }
  }
  // Off Deploy the file is the one store of a long-lived process.
  for (const path of [":memory:", "./data/relayer.kv"]) {
    assert.deepEqual(loadConfig({ ...base, KV_PATH: path }).kv, { path });
  }
});

Deno.test("loadConfig() reads a Worker's [vars] written as TOML numbers or booleans as their text, and refuses any other JSON value by name", () => {
  // wrangler.toml's [vars] holds text or JSON values: `SENDER_TIMEOUT =
  // 10000` unquoted reaches the Worker's env as the number 10000.
  const env = {
    ...base,
    MAX_DELIVERIES: 10,
    SENDER_TIMEOUT: 12_000,
    LEASE: 60_000,
    CLOUDFLARE_MAX_RETRIES: 9,
    CLOUDFLARE_DLQ_MAX_RETRIES: 100,
    KV_QUEUE: false,
  } as unknown as Record<string, string>;
  const config = loadConfig(env);
  assert.equal(config.sender.timeoutMs, 12_000);
  assert.equal(config.leaseMs, 60_000);
  assert.equal(config.queues.cloudflare?.maxRetries, 9);
  assert.equal(config.cloudflareDeadLetterMaxRetries, 100);
  assert.equal(config.kvQueue, false);
  // A number means what its text means, refusals included.
  refused(
    { ...base, BASE: 5 } as unknown as Record<string, string>,
    "BASE",
    /a plain number, which would be 5 milliseconds: write 5s/,
  );
  // The Worker's bindings (a queue, Hyperdrive) sit in the same env, unread.
  const bindings = { ...base, JOBS: { send() {} }, HYPERDRIVE: {} };
  loadConfig(bindings as unknown as Record<string, string>);
  // Any other JSON value under a setting's name is named, not a TypeError,
  // and a secret's value is not echoed.
  for (const name of ["WEBHOOK_SECRET", "SENDER_URL", "RELAYER_INSECURE_DEV"]) {
    refused(
      {
        ...base,
        [name]: { value: "a-webhook-secret-16" },
      } as unknown as Record<
        string,
        string
      >,
      name,
      new RegExp(
        `^${name} must be text, as wrangler\\.toml's \\[vars\\] quote it`,
      ),
    );
  }
  assert.throws(
    () =>
      loadConfig(
        {
          ...base,
          WEBHOOK_SECRET: ["a-webhook-secret-16"],
        } as unknown as Record<
          string,
          string
        >,
      ),
    (error: unknown) =>
      error instanceof ConfigError &&
      !error.message.includes("a-webhook-secret-16"),
  );
});

Deno.test("loadConfig() refuses a Worker [vars] number whose text is not what was written (past 2^53, or with a fraction), by name and unechoed", () => {
  // `WEBHOOK_SECRET = 1234567890123456789` unquoted reaches the Worker as
  // 1234567890123456800: read as that text, the service would verify with
  // a key no sender holds and refuse every delivery with a 401.
  const cases: [string, number][] = [
    ["WEBHOOK_SECRET", Number("1234567890123456789")],
    ["OPS_TOKEN", Number("3.14159265358979323846")],
    ["SENDER_TIMEOUT", 2 ** 60],
  ];
  for (const [name, value] of cases) {
    assert.throws(
      () =>
        loadConfig(
          { ...base, [name]: value } as unknown as Record<string, string>,
        ),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.setting, name);
        assert.match(error.message, /write it quoted/);
        assert.ok(!error.message.includes(String(value)), error.message);
        return true;
      },
    );
  }
  // A safe integer is its own text: taken, as before.
  assert.equal(
    loadConfig(
      { ...base, SENDER_TIMEOUT: 12_000 } as unknown as Record<string, string>,
    ).sender.timeoutMs,
    12_000,
  );
});

Deno.test("loadConfig() reads a frozen environment, numbers of its [vars] included", () => {
  // A caller may freeze what it hands over (a Worker's env as a module
  // constant, a test's fixture): its read-only settings must still be read
  // as text, not fail the start with a Proxy's invariant TypeError.
  const env = Object.freeze({
    ...base,
    SENDER_TIMEOUT: 12_000,
    KV_QUEUE: false,
  }) as unknown as Record<string, string>;
  const config = loadConfig(env);
  assert.equal(config.sender.timeoutMs, 12_000);
  assert.equal(config.kvQueue, false);
  refused(
    Object.freeze({
      ...base,
      WEBHOOK_SECRET: ["a-webhook-secret-16"],
    }) as unknown as Record<string, string>,
    "WEBHOOK_SECRET",
    /must be text/,
  );
});

Deno.test("loadConfig() refuses an OPS_TOKEN that is also a signing secret or QStash's token, by name and without echoing it: whoever signs deliveries would hold the operator's routes", () => {
  const token = "shared-secret-0123456789";
  const qstash = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abc",
    PUBLIC_URL: "https://relayer.example.test",
  };
  for (
    const [env, reused] of [
      [{ ...base, WEBHOOK_SECRET: token }, "WEBHOOK_SECRET"],
      [
        { ...base, WEBHOOK_SECRET_NEXT: token },
        "WEBHOOK_SECRET_NEXT",
      ],
      [
        { ...base, ...qstash, QSTASH_CURRENT_SIGNING_KEY: token },
        "QSTASH_CURRENT_SIGNING_KEY",
      ],
      [
        { ...base, ...qstash, QSTASH_NEXT_SIGNING_KEY: token },
        "QSTASH_NEXT_SIGNING_KEY",
      ],
      // Sent to QStash with every publish, and shown in its console.
      [{ ...base, ...qstash, QSTASH_TOKEN: token }, "QSTASH_TOKEN"],
    ] as const
  ) {
    assert.throws(
      () => loadConfig({ ...env, OPS_TOKEN: token }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.setting, "OPS_TOKEN");
        assert.equal(
          error.message,
          `OPS_TOKEN must differ from ${reused}: whoever holds a signing secret or QStash's token (a bridge, QStash's console) would also hold the ops routes, which resolve payments and redrive jobs. Generate a token of its own, such as with: openssl rand -base64 32`,
        );
        assert.ok(!error.message.includes(token));
        return true;
      },
    );
  }
  // Each on its own is taken.
  assert.equal(
    loadConfig({ ...base, OPS_TOKEN: token }).opsToken,
    token,
  );
});

Deno.test("loadConfig() refuses Pub/Sub's dead-letter route without PUBSUB_MAX_DELIVERY_ATTEMPTS: the route is for a dead-letter policy, whose attempts (Google's default 5) would stop the default policy at its fifth delivery, unchecked", () => {
  const env = { ...base, ...pubsub, ...deadLetter, PUBSUB_MIN_BACKOFF: "40s" };
  // What the subscription does with a dead-letter policy whose attempts
  // were not set: Google's default, 5, and a give-up at the fifth delivery,
  // before the policy's tenth and before STUCK_AFTER (4 gaps of 40s).
  const googleDefault = checkQueue(definePolicy(), {
    kind: "pubsub",
    maxDeliveryAttempts: 5,
    minBackoffMs: 40_000,
    maxBackoffMs: 600_000,
  });
  assert.equal(googleDefault.problem, "stops_early");
  refused(
    env,
    "PUBSUB_MAX_DELIVERY_ATTEMPTS",
    /^PUBSUB_MAX_DELIVERY_ATTEMPTS is missing: PUBSUB_DEAD_LETTER_AUDIENCE is set, so the jobs' subscription has a dead-letter policy, and Pub\/Sub gives up after its max delivery attempts \(5 unless set\)/,
  );
  assert.equal(
    loadConfig({ ...env, PUBSUB_MAX_DELIVERY_ATTEMPTS: "10" }).queues.pubsub
      .maxDeliveryAttempts,
    10,
  );
});

Deno.test("loadConfig()'s queue refusals count one delivery in the singular", () => {
  refused(
    {
      ...base,
      ...qstash,
      QSTASH_RETRIES: "0",
      MAX_DELIVERIES: "3",
      STUCK_AFTER: "0s",
      CLOCK_SKEW: "0s",
    },
    "QSTASH_RETRIES",
    /^QSTASH_RETRIES is 0, so QStash gives up after 1 delivery, before MAX_DELIVERIES \(3\)/,
  );
  refused(
    {
      ...base,
      CLOUDFLARE_MAX_RETRIES: "0",
      MAX_DELIVERIES: "3",
      STUCK_AFTER: "0s",
      CLOCK_SKEW: "0s",
    },
    "CLOUDFLARE_MAX_RETRIES",
    /dead-letter queue after 1 delivery, before MAX_DELIVERIES \(3\)/,
  );
});

Deno.test("checkQueue(policy, config.queues.qstash) gives the start check's verdict: it carries LEASE and CLOCK_SKEW, which the failure callback's retries must outlast", () => {
  // 2 retries span 160 s: enough for the default 40 s busy give-up, not
  // for a LEASE of 3m.
  const env = {
    ...base,
    QSTASH_RETRIES: "2",
    MAX_DELIVERIES: "3",
    STUCK_AFTER: "0s",
    LEASE: "3m",
  };
  const config = loadConfig(env); // QStash not configured: not checked
  assert.deepEqual(
    [config.queues.qstash.leaseMs, config.queues.qstash.clockSkewMs],
    [180_000, 5_000],
  );
  assert.equal(
    checkQueue(config.policy, config.queues.qstash).problem,
    "stops_early",
  );
  refused({ ...env, ...qstash }, "QSTASH_RETRIES", /^QSTASH_RETRIES is 2,/);
});

Deno.test("loadConfig() refuses a plain number for a Cloudflare retention or delivery delay: Wrangler's --message-retention-period-secs and --delivery-delay-secs count seconds, and read as milliseconds a delay copied from them would be counted a thousandth as long", () => {
  for (
    const [name, value, shown] of [
      ["CLOUDFLARE_DELIVERY_DELAY", "43000", "43s"],
      ["CLOUDFLARE_DELIVERY_DELAY", "3000", "3s"],
      ["CLOUDFLARE_MESSAGE_RETENTION", "1209600", "20m9.6s"],
      ["CLOUDFLARE_DLQ_MESSAGE_RETENTION", "1209600", "20m9.6s"],
      ["CLOUDFLARE_MESSAGE_RETENTION", "864000", "14m24s"],
    ] as const
  ) {
    refused(
      { ...base, [name]: value },
      name,
      new RegExp(
        `^${name} is "${value}", a plain number, which would be ${
          shown.replace(".", "\\.")
        } here, where Wrangler's --(message-retention-period|delivery-delay)-secs counts seconds: write ${value}s for seconds, or ${value}ms if you do mean milliseconds$`,
      ),
    );
  }
  // Spaces around it (a line read from a file) make it no less plain.
  refused(
    { ...base, CLOUDFLARE_DELIVERY_DELAY: " 43000\n" },
    "CLOUDFLARE_DELIVERY_DELAY",
    /^CLOUDFLARE_DELIVERY_DELAY is " 43000\\n", a plain number, which would be 43s here, .*: write 43000s for seconds, or 43000ms if you do mean milliseconds$/,
  );
  // 0 is 0 in any unit; a unit given is read as it says.
  assert.deepEqual(
    loadConfig({
      ...base,
      CLOUDFLARE_DELIVERY_DELAY: "0",
      CLOUDFLARE_MESSAGE_RETENTION: "1209600s",
    }).cloudflareRetentions,
    { deliveryDelayMs: 0, messageRetentionMs: 1_209_600_000 },
  );
});

// From JavaScript, the settings themselves (`routeOptions(env)`) or what
// workerConfig() returns (`routeOptions(workerConfig(env))`, its settings
// under `config`) were taken as a config with no route: the app answered
// every delivery 503 "set WEBHOOK_SECRET", with WEBHOOK_SECRET set.
Deno.test("routeOptions() refuses the settings themselves, or workerConfig()'s answer, naming what to pass and no secret", () => {
  const env = { ...base, WEBHOOK_SECRET: "a-webhook-secret-16" };
  const refusals: [unknown, string][] = [
    [
      env,
      "Cannot build route options as 'config' is not what loadConfig() read: it lacks insecureDev, maxBodyBytes and bodyTimeoutMs; pass loadConfig(env), or workerConfig(env).config on a Worker",
    ],
    [
      { config: loadConfig(env), unread: [] },
      "Cannot build route options as 'config' is not what loadConfig() read: it lacks insecureDev, maxBodyBytes and bodyTimeoutMs; pass workerConfig(env).config, not what workerConfig() returns",
    ],
    [
      null,
      "Cannot build route options as 'config' is not what loadConfig() read: current value is null; pass loadConfig(env), or workerConfig(env).config on a Worker",
    ],
    [
      undefined,
      "Cannot build route options as 'config' is not what loadConfig() read: current value is undefined; pass loadConfig(env), or workerConfig(env).config on a Worker",
    ],
  ];
  for (const [config, message] of refusals) {
    assert.throws(
      () => routeOptions(config as never, { jwks: [] }),
      (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.equal(error.message, message);
        assert.ok(!error.message.includes("a-webhook-secret-16"));
        return true;
      },
    );
  }
  // A misspelt `jwks` would fetch Google's keys in silence.
  assert.throws(
    () => routeOptions(loadConfig(env), { jkws: [] } as never),
    /Cannot build route options as "jkws" is not one of its options \(jwks\)/,
  );
});
