import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

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
});

Deno.test("loadConfig() picks Deno Deploy's KV there, and a KV Connect URL when given", () => {
  assert.deepEqual(loadConfig({ ...base, DENO_DEPLOYMENT_ID: "abc" }).kv, {
    platform: true,
  });
  assert.deepEqual(
    loadConfig({ ...base, KV_URL: "https://kv.example.test/db" }).kv,
    {
      url: "https://kv.example.test/db",
    },
  );
});

Deno.test("loadConfig() refuses a policy whose rescue window is shorter than STUCK_AFTER, with both numbers", () => {
  refused(
    { ...base, MAX_DELIVERIES: "5" },
    "STUCK_AFTER",
    /rescue window is 37\.5s .* STUCK_AFTER is 5m0s/,
  );
  refused(
    { ...base, JITTER: "full" },
    "STUCK_AFTER",
    /rescue window is 0s \(guaranteed, full jitter\)/,
  );
  assert.doesNotThrow(() =>
    loadConfig({ ...base, MAX_DELIVERIES: "5", STUCK_AFTER: "30s" })
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
    /No delivery route is configured/,
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
  refused({ ...base, KV_QUEUE: "yes" }, "KV_QUEUE", /must be 1 or 0/);
  refused(
    { ...base, DENO_DEPLOYMENT_ID: "x", KV_QUEUE: "1" },
    "KV_QUEUE",
    /Deno Deploy/,
  );
  refused(
    { ...base, DENO_DEPLOYMENT_ID: "x", RELAYER_INSECURE_DEV: "1" },
    "RELAYER_INSECURE_DEV",
    /refused/,
  );

  const short = "short-secret";
  for (
    const name of ["WEBHOOK_SECRET", "OPS_TOKEN", "QSTASH_CURRENT_SIGNING_KEY"]
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
