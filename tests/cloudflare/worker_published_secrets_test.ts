/**
 * A Worker has no platform marker and may have no `PUBLIC_URL`, so the
 * secrets the docs give for a local run, and a local QStash's published
 * keys, are judged by where its requests come from: on loopback (`wrangler
 * dev`, worker-check) they are taken; once a request comes from off this
 * machine (Cloudflare routes by a public host), each request is refused,
 * naming the setting, never its value.
 *
 * @module
 */
import assert from "node:assert/strict";
import { worker } from "./_worker.ts";
import { QSTASH, signHmac } from "../webhook/_signing.ts";

const LOCAL = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "local-secret-0123456789",
  OPS_TOKEN: "local-ops-token-0123456789",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

function opsCall(base: string, token: string): Request {
  return new Request(`${base}/v1/dead-letters`, {
    headers: { authorization: `Bearer ${token}` },
  });
}

function delivery(base: string, secret: string): Request {
  const body = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" } });
  return new Request(`${base}/v1/deliveries`, {
    method: "POST",
    headers: { "x-signature": signHmac(secret, body) },
    body,
  });
}

Deno.test("a Worker with the docs' local-run secrets serves loopback requests, and once one comes from off this machine refuses every request with a 503 naming the setting, never its value", async () => {
  const { fetch, logged } = worker(LOCAL);
  for (const base of ["http://127.0.0.1:8787", "http://localhost:8787"]) {
    const ops = await fetch(opsCall(base, LOCAL.OPS_TOKEN));
    assert.equal(ops.status, 200, base);
    await ops.body?.cancel();
  }
  const detail =
    "WEBHOOK_SECRET is a value the docs give for a local run, which anyone can read, and this Worker is reached off this machine, so it answers nothing: generate a random one, such as with: openssl rand -base64 32, and set it with: wrangler secret put WEBHOOK_SECRET";
  const off = "https://relayer.example.workers.dev";
  for (
    const request of [
      delivery(off, LOCAL.WEBHOOK_SECRET),
      opsCall(off, LOCAL.OPS_TOKEN),
      // Once seen off this machine, a loopback host is no longer believed.
      opsCall("http://127.0.0.1:8787", LOCAL.OPS_TOKEN),
    ]
  ) {
    const answer = await fetch(request);
    assert.equal(answer.status, 503, request.url);
    const text = await answer.text();
    assert.equal(JSON.parse(text).detail, detail);
    assert.ok(
      !text.includes(LOCAL.WEBHOOK_SECRET) && !text.includes(LOCAL.OPS_TOKEN),
    );
  }
  assert.deepEqual(logged, [`relayer: ${detail}`]);
});

Deno.test("a Worker with a local QStash's published keys and a loopback PUBLIC_URL is refused once reached off this machine, and one with secrets of its own is served there", async () => {
  const published = worker({
    ...LOCAL,
    WEBHOOK_SECRET: "own-secret-0123456789abcdef",
    OPS_TOKEN: "own-ops-token-0123456789abcdef",
    PUBLIC_URL: "http://127.0.0.1:8787",
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs",
  });
  const answer = await published.fetch(
    opsCall(
      "https://relayer.example.workers.dev",
      "own-ops-token-0123456789abcdef",
    ),
  );
  assert.equal(answer.status, 503);
  const text = await answer.text();
  assert.equal(
    JSON.parse(text).detail,
    "QSTASH_NEXT_SIGNING_KEY is a published key (a local QStash's), which anyone can sign with, and this Worker is reached off this machine, so it answers nothing: copy both signing keys from the QStash console, and set it with: wrangler secret put QSTASH_NEXT_SIGNING_KEY",
  );
  assert.ok(!text.includes("sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs"));

  const own = worker({
    ...LOCAL,
    WEBHOOK_SECRET: "own-secret-0123456789abcdef",
    OPS_TOKEN: "own-ops-token-0123456789abcdef",
  });
  const served = await own.fetch(
    opsCall(
      "https://relayer.example.workers.dev",
      "own-ops-token-0123456789abcdef",
    ),
  );
  assert.equal(served.status, 200);
  await served.body?.cancel();
  assert.deepEqual(own.logged, []);
});
