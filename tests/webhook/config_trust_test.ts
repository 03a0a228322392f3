/**
 * loadConfig()'s refusals that keep a forged or leaking setup from
 * starting: Pub/Sub without a service account, a SENDER_URL that carries
 * secrets, and the LEASE bound at its exact edge.
 */
import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  // Long enough a minimum backoff that Pub/Sub's own delays outlast STUCK_AFTER.
  PUBSUB_MIN_BACKOFF: "34s",
};

/** The one-line refusal of `env`, checked to name `setting`. */
function refusal(env: Record<string, string>, setting: string): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.setting, setting);
    assert.ok(!error.message.includes("\n"), "one line");
    return error.message;
  }
  throw new assert.AssertionError({ message: `accepted ${setting}` });
}

Deno.test("loadConfig() refuses PUBSUB_AUDIENCE without PUBSUB_SERVICE_ACCOUNT, in one line", () => {
  assert.equal(
    refusal(
      { ...base, PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub" },
      "PUBSUB_SERVICE_ACCOUNT",
    ),
    "PUBSUB_SERVICE_ACCOUNT is missing: with PUBSUB_AUDIENCE set, name the service account your push subscription authenticates as, because Google issues tokens for any audience to any account",
  );
  assert.equal(
    refusal(
      {
        ...base,
        PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
        PUBSUB_SERVICE_ACCOUNT: "not an email",
      },
      "PUBSUB_SERVICE_ACCOUNT",
    ),
    'PUBSUB_SERVICE_ACCOUNT must be the service account\'s email, such as pusher@my-project.iam.gserviceaccount.com: current value is "not an email"',
  );
  const config = loadConfig({
    ...base,
    PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
    PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
  });
  assert.deepEqual(config.pubsub, {
    audience: "https://relayer.example.test/v1/pubsub",
    serviceAccount: "pusher@p.iam.gserviceaccount.com",
  });
});

Deno.test("loadConfig() refuses a SENDER_URL with a query, a fragment or credentials, naming it and echoing nothing", () => {
  const secret = "tok3n-s3cret-value";
  const cases: [string, RegExp][] = [
    [`https://signer.example/v1?token=${secret}`, /query string or fragment/],
    [`https://signer.example/v1#${secret}`, /query string or fragment/],
    [`https://signer.example/v1?`, /query string or fragment/],
    [`https://user:${secret}@signer.example/v1`, /must not carry credentials/],
    [`https://${secret}@signer.example/v1`, /must not carry credentials/],
    [`https://user:${secret}@[bad`, /absolute http\(s\) URL/],
    [`ftp://${secret}.example`, /absolute http\(s\) URL/],
  ];
  for (const [url, words] of cases) {
    const message = refusal({ ...base, SENDER_URL: url }, "SENDER_URL");
    assert.match(message, /^SENDER_URL /, url);
    assert.match(message, words, url);
    assert.ok(!message.includes(secret), `echoed: ${message}`);
  }
  assert.equal(
    refusal(
      { ...base, SENDER_URL: "https://signer.example/v1?token=x" },
      "SENDER_URL",
    ),
    "SENDER_URL must not carry a query string or fragment: give the base URL only, such as https://host.example:8443/base",
  );
});

Deno.test("loadConfig() accepts LEASE exactly 2 × SENDER_TIMEOUT and refuses 1 ms less", () => {
  const at = loadConfig({ ...base, SENDER_TIMEOUT: "8s", LEASE: "16000" });
  assert.deepEqual([at.leaseMs, at.sender.timeoutMs], [16_000, 8000]);
  assert.equal(
    refusal({ ...base, SENDER_TIMEOUT: "8s", LEASE: "15999" }, "LEASE"),
    "LEASE (15.999s) must be at least twice SENDER_TIMEOUT (8s): the lease is renewed right before a send and must outlast it, with room for the writes around it, or two deliveries could send at once. Set LEASE to at least 16s, or lower SENDER_TIMEOUT",
  );
  // Only SENDER_TIMEOUT set: the refusal says LEASE was its default, and
  // what to set it to.
  assert.equal(
    refusal({ ...base, SENDER_TIMEOUT: "30s" }, "LEASE"),
    "LEASE (30s, its default) must be at least twice SENDER_TIMEOUT (30s): the lease is renewed right before a send and must outlast it, with room for the writes around it, or two deliveries could send at once. Set LEASE to at least 1m0s, or lower SENDER_TIMEOUT",
  );
  // The defaults sit above the bound: 30 s ≥ 2 × 10 s.
  const defaults = loadConfig(base);
  assert.deepEqual([defaults.leaseMs, defaults.sender.timeoutMs], [
    30_000,
    10_000,
  ]);
});

Deno.test("loadConfig() accepts a secret of exactly 16 characters and refuses 15, never echoing it, saying where a good one comes from", () => {
  for (const name of ["WEBHOOK_SECRET", "OPS_TOKEN"]) {
    const at = loadConfig({ ...base, [name]: "s".repeat(16) });
    assert.equal(
      name === "OPS_TOKEN" ? at.opsToken : at.webhookSecret,
      "s".repeat(16),
    );
    assert.equal(
      refusal({ ...base, [name]: "s".repeat(15) }, name),
      `${name} must be at least 16 characters long: generate a random one, such as with: openssl rand -base64 32`,
    );
  }
  // QStash's keys are QStash's: a short one was cut when copied.
  for (
    const name of ["QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY"]
  ) {
    assert.equal(
      refusal({ ...base, [name]: "s".repeat(15) }, name),
      `${name} must be at least 16 characters long: copy the whole key from the QStash console's signing keys`,
    );
  }
});
