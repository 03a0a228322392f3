/**
 * `RELAYER_INSECURE_DEV` in a Worker with no `PUBLIC_URL`: a Worker has no
 * platform marker, so, as for the docs' local-run secrets, where it runs is
 * told by the host its requests come to. On loopback (`npx wrangler dev`) the
 * routes whose keys are not set take unsigned requests; once a request
 * comes from off this machine (Cloudflare routes by a public host), each
 * request is refused 503, naming the routes the flag would open, the ops
 * routes among them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { workerConfig } from "../../webhook/app.ts";
import { worker } from "./_worker.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  RELAYER_INSECURE_DEV: "1",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

/** An unsigned call that creates an intent, at `base`. */
function createIntent(base: string, id: string): Request {
  return new Request(`${base}/v1/intents`, {
    method: "POST",
    body: JSON.stringify({ id, state: "authorized" }),
  });
}

Deno.test("a Worker with RELAYER_INSECURE_DEV serves unsigned loopback requests, and once one comes from off this machine refuses every request with a 503 naming the routes it would open", async () => {
  const { fetch, logged } = worker(ENV);
  const local = await fetch(createIntent("http://127.0.0.1:8787", "pi_0001"));
  assert.equal(local.status, 201, await local.text());
  const detail =
    "RELAYER_INSECURE_DEV is for local runs, and this Worker is reached off this machine, so it answers nothing: it would take requests with no signature or token, from anyone who reaches it, on /v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries, the ops routes (which create and resolve intents, and publish, redrive and discard jobs). Unset RELAYER_INSECURE_DEV (each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes), or run on your own machine: PUBLIC_URL unset or on localhost, 127.0.0.1 or [::1], and served on loopback (npx wrangler dev)";
  for (
    const request of [
      createIntent("https://relayer.example.workers.dev", "pi_0002"),
      // Once seen off this machine, a loopback host is no longer believed.
      createIntent("http://127.0.0.1:8787", "pi_0003"),
    ]
  ) {
    const answer = await fetch(request);
    assert.equal(answer.status, 503, request.url);
    assert.equal((await answer.json()).detail, detail);
  }
  assert.deepEqual(logged, [
    // The first event, on loopback: what the flag opens.
    "relayer: INSECURE DEV MODE (unsigned requests accepted on /v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries, the ops routes), served to a loopback host only",
    `relayer: ${detail}`,
  ]);
});

Deno.test("a Worker with RELAYER_INSECURE_DEV and every route's keys but the ops token names only the ops routes as open once reached off this machine", async () => {
  const { fetch } = worker({
    ...ENV,
    WEBHOOK_SECRET: "own-secret-0123456789abcdef",
  });
  const answer = await fetch(
    createIntent("https://relayer.example.workers.dev", "pi_0001"),
  );
  assert.equal(answer.status, 503);
  const { detail } = await answer.json();
  assert.match(
    detail,
    /, on \/v1\/qstash and \/v1\/qstash\/failed, \/v1\/pubsub, \/v1\/pubsub\/dead-letter, the ops routes \(/,
  );
  assert.ok(!detail.includes("own-secret-0123456789abcdef"));
});

/** A service's settings at a `PUBLIC_URL` off this machine. */
const OFF_MACHINE = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  PUBLIC_URL: "https://relayer.example.com",
  RELAYER_INSECURE_DEV: "1",
};

/** The message of the `ConfigError` on `RELAYER_INSECURE_DEV` `load` throws. */
function refusal(load: () => unknown): string {
  try {
    load();
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.setting, "RELAYER_INSECURE_DEV", error.message);
    return error.message;
  }
  assert.fail("RELAYER_INSECURE_DEV was taken off this machine");
}

Deno.test("workerConfig() refusing RELAYER_INSECURE_DEV at a PUBLIC_URL off this machine says to run the Worker under npx wrangler dev, not deno task start", () => {
  const worker = refusal(() => workerConfig(OFF_MACHINE));
  assert.match(
    worker,
    /, or run on your own machine: PUBLIC_URL unset or on localhost, 127\.0\.0\.1 or \[::1\], and served on loopback \(npx wrangler dev\)$/,
  );
  assert.doesNotMatch(worker, /deno task start/);
  // The service's own refusal still names its own local run.
  assert.match(
    refusal(() => loadConfig(OFF_MACHINE)),
    /, and served on loopback \(deno task start\)$/,
  );
});

Deno.test("a Worker with RELAYER_INSECURE_DEV says on its first event which routes take unsigned requests, as main.ts's start line does, once", async () => {
  const { fetch, logged } = worker({
    ...ENV,
    WEBHOOK_SECRET: "a-webhook-secret-16",
  });
  assert.deepEqual(logged, []);
  const local = await fetch(createIntent("http://127.0.0.1:8787", "pi_0001"));
  assert.equal(local.status, 201, await local.text());
  await (await fetch(createIntent("http://127.0.0.1:8787", "pi_0002"))).text();
  assert.deepEqual(logged, [
    "relayer: INSECURE DEV MODE (unsigned requests accepted on /v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, the ops routes), served to a loopback host only",
  ]);
});

Deno.test("a Worker with RELAYER_INSECURE_DEV reached off this machine names as open each route whose keys are not set, and no route whose keys are, as the service does", async () => {
  const base = "https://relayer.example.workers.dev";
  const ops =
    "the ops routes (which create and resolve intents, and publish, redrive and discard jobs)";
  const qstash = {
    // QStash signs the URL it delivers to: one on loopback, for wrangler dev.
    PUBLIC_URL: "http://127.0.0.1:8787",
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  const pubsub = {
    PUBSUB_AUDIENCE: `${base}/v1/pubsub`,
    PUBSUB_SERVICE_ACCOUNT: "push@p.iam.gserviceaccount.com",
    PUBSUB_MIN_BACKOFF: "40s",
  };
  const deadLetter = {
    ...pubsub,
    PUBSUB_DEAD_LETTER_AUDIENCE: `${base}/v1/pubsub/dead-letter`,
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
  };
  const cases: [Record<string, string>, string][] = [
    [
      qstash,
      `/v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries, ${ops}`,
    ],
    [
      { OPS_TOKEN: "an-ops-token-of-16" },
      "/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries",
    ],
    [
      pubsub,
      `/v1/qstash and /v1/qstash/failed, /v1/pubsub/dead-letter, /v1/deliveries, ${ops}`,
    ],
    [deadLetter, `/v1/qstash and /v1/qstash/failed, /v1/deliveries, ${ops}`],
  ];
  for (const [keys, open] of cases) {
    const { fetch } = worker({ ...ENV, ...keys });
    const answer = await fetch(new Request(`${base}/healthz`));
    assert.equal(answer.status, 503, JSON.stringify(keys));
    const { detail } = await answer.json();
    assert.equal(
      / from anyone who reaches it, on (.*)\. Unset /.exec(detail)?.[1],
      open,
      JSON.stringify(keys),
    );
  }
});

Deno.test("a Worker with RELAYER_INSECURE_DEV and every key but OPS_TOKEN says on its first event that the ops routes take unsigned requests, and with every key, that no route does", async () => {
  const base = "http://127.0.0.1:8787";
  const keys = {
    PUBLIC_URL: base,
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    PUBSUB_AUDIENCE: `${base}/v1/pubsub`,
    PUBSUB_SERVICE_ACCOUNT: "push@p.iam.gserviceaccount.com",
    PUBSUB_MIN_BACKOFF: "40s",
    PUBSUB_DEAD_LETTER_AUDIENCE: `${base}/v1/pubsub/dead-letter`,
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const cases: [Record<string, string>, string][] = [
    [keys, "the ops routes"],
    [
      { ...keys, OPS_TOKEN: "an-ops-token-of-16" },
      "no route: every key is set",
    ],
  ];
  for (const [env, open] of cases) {
    const { fetch, logged } = worker({ ...ENV, ...env });
    await (await fetch(new Request(`${base}/healthz`))).text();
    assert.deepEqual(logged, [
      `relayer: INSECURE DEV MODE (unsigned requests accepted on ${open}), served to a loopback host only`,
    ]);
  }
});
