/**
 * `workerConfig` gives a Worker's queues Cloudflare's own `max_retries`
 * (3) where `CLOUDFLARE_MAX_RETRIES` or `CLOUDFLARE_DLQ_MAX_RETRIES` is
 * not set, as the consumer runs without one: the number the start check
 * and the queue handler judge, and name in a refusal.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createApp, workerConfig } from "../../webhook/app.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { HttpSender, MemoryStore } from "../../mod.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};

Deno.test("workerConfig takes Cloudflare's default of 3 for CLOUDFLARE_DLQ_MAX_RETRIES not given, which the start check refuses as the queue handler does, saying the 3 is that default", () => {
  assert.throws(
    () => workerConfig({ ...ENV, CLOUDFLARE_MAX_RETRIES: "9" }),
    /^ConfigError: CLOUDFLARE_DLQ_MAX_RETRIES is 3, its default \(unset: Cloudflare's max_retries for a consumer that sets none\), so a give-up that fails while the store is down would be retried for only 35s \(less than 14 days, Cloudflare's longest retention\) before Cloudflare deletes it, and its intent would be stranded\. Set the dead-letter queue consumer's max_retries and CLOUDFLARE_DLQ_MAX_RETRIES to at least 41 \(100 is safe\)$/,
  );
  // Set to 3, it is the operator's: no word of a default.
  assert.throws(
    () =>
      workerConfig({
        ...ENV,
        CLOUDFLARE_MAX_RETRIES: "9",
        CLOUDFLARE_DLQ_MAX_RETRIES: "3",
      }),
    /^ConfigError: CLOUDFLARE_DLQ_MAX_RETRIES is 3, so a give-up/,
  );
  const { config } = workerConfig({
    ...ENV,
    CLOUDFLARE_MAX_RETRIES: "9",
    CLOUDFLARE_DLQ_MAX_RETRIES: "100",
  });
  assert.equal(config.queues.cloudflare?.maxRetries, 9);
  assert.equal(config.cloudflareDeadLetterMaxRetries, 100);
});

Deno.test("workerConfig takes Cloudflare's default of 3 for CLOUDFLARE_MAX_RETRIES not given, which the start check refuses under MAX_DELIVERIES 10, saying the 3 is that default", () => {
  assert.throws(
    () => workerConfig(ENV),
    /^ConfigError: CLOUDFLARE_MAX_RETRIES is 3, its default \(unset: Cloudflare's max_retries for a consumer that sets none\), so Cloudflare Queues move a job to the dead-letter queue after 4 deliveries, before MAX_DELIVERIES \(10\): set the consumer's max_retries and CLOUDFLARE_MAX_RETRIES to at least 9/,
  );
  // Set to 3, it is the operator's: no word of a default.
  assert.throws(
    () => workerConfig({ ...ENV, CLOUDFLARE_MAX_RETRIES: "3" }),
    /^ConfigError: CLOUDFLARE_MAX_RETRIES is 3, so Cloudflare Queues move a job/,
  );
});

Deno.test("workerConfig takes Cloudflare's default of 3 for CLOUDFLARE_MAX_RETRIES or CLOUDFLARE_DLQ_MAX_RETRIES set empty (wrangler.toml's \"\"), as for one not given: the empty value hid the default and skipped its check", () => {
  assert.throws(
    () =>
      workerConfig({
        ...ENV,
        CLOUDFLARE_MAX_RETRIES: "",
        CLOUDFLARE_DLQ_MAX_RETRIES: "100",
      }),
    /^ConfigError: CLOUDFLARE_MAX_RETRIES is 3, its default \(unset: Cloudflare's max_retries for a consumer that sets none\)/,
  );
  assert.throws(
    () =>
      workerConfig({
        ...ENV,
        CLOUDFLARE_MAX_RETRIES: "9",
        CLOUDFLARE_DLQ_MAX_RETRIES: "",
      }),
    /^ConfigError: CLOUDFLARE_DLQ_MAX_RETRIES is 3, its default/,
  );
});

Deno.test("workerConfig with queues: false holds a Worker that consumes no queue (fetch only) to no queue's max_retries, and names each CLOUDFLARE_ setting it is given as ignored", () => {
  // A fetch-only Worker (QStash's route, the generic one) with the
  // service's defaults: neither max_retries set, nothing refused.
  const { config, unread } = workerConfig(ENV, { queues: false });
  assert.equal(config.queues.cloudflare, undefined);
  assert.equal(config.cloudflareDeadLetterMaxRetries, undefined);
  assert.deepEqual(unread, []);
  // A CAP the Worker's queue could not give a rescue window under (its
  // delays at most 12 h) is no queue's here either.
  const long = {
    ...ENV,
    MAX_DELIVERIES: "3",
    BASE: "24h",
    CAP: "24h",
    JITTER: "none",
    STUCK_AFTER: "30h",
  };
  assert.throws(
    () => workerConfig({ ...long, CLOUDFLARE_MAX_RETRIES: "9" }),
    /^ConfigError: On Cloudflare Queues/,
  );
  assert.equal(
    workerConfig(long, { queues: false }).config.policy.capMs,
    24 * 60 * 60 * 1000,
  );
  // A consumer's settings given anyway, even ones a consumer refuses:
  // read by nothing here, named once each.
  // One set empty (wrangler.toml's ""), as not set: not named.
  const given = workerConfig(
    {
      ...ENV,
      CLOUDFLARE_MAX_RETRIES: "3",
      CLOUDFLARE_MESSAGE_RETENTION: "1",
      CLOUDFLARE_DLQ_MAX_RETRIES: "",
    },
    { queues: false },
  );
  assert.equal(given.config.queues.cloudflare, undefined);
  assert.deepEqual(
    given.unread,
    ["CLOUDFLARE_MAX_RETRIES", "CLOUDFLARE_MESSAGE_RETENTION"].map((name) =>
      `relayer: ${name} is set, but only a Cloudflare Queues consumer reads it (its queue handler, createQueueHandler), and this Worker consumes no queue (workerConfig's queues: false), so it is ignored: remove it from the Worker's settings, or pass queues: true if it consumes one`
    ),
  );
  // A queue handler built from it anyway is refused by the handler: its
  // max_retries not given is Cloudflare's 3.
  const app = createApp({
    store: new MemoryStore(),
    sender: new HttpSender(config.sender),
    policy: config.policy,
  });
  assert.throws(
    () =>
      createQueueHandler({
        relayer: app.relayer,
        maxRetries: config.queues.cloudflare?.maxRetries,
        deadLetterQueue: "relayer-jobs-dlq",
        deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries,
      }),
    /^RangeError: Cannot create queue handler as 'maxRetries' must be at least maxDeliveries - 1 = 9/,
  );
  // A consumer (queues: true, the default) is held exactly as before.
  for (const options of [{}, { queues: true }]) {
    assert.throws(
      () => workerConfig(ENV, options),
      /^ConfigError: CLOUDFLARE_MAX_RETRIES is 3, its default /,
    );
  }
});
