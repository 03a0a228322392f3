/**
 * No secret ever appears in an answer or a log line: the service is driven
 * with good, bad and ops requests, and every body, header and log line is
 * searched for each configured secret.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { hmacSignature } from "../webhook/_auth.ts";
import { loadConfig } from "../webhook/config.ts";
import {
  envelope,
  fakeGoogle,
  PUBSUB,
  signQStash,
} from "./webhook/_signing.ts";
import { timeout } from "./_timeout.ts";

const SECRETS = {
  WEBHOOK_SECRET: "webhook-secret-AAAA-1111",
  OPS_TOKEN: "ops-token-BBBB-2222-xyz",
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
    assert.equal(answers.length, 20);
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
