/**
 * `workerConfig` gives a Worker's queues Cloudflare's own `max_retries`
 * (3) where `CLOUDFLARE_MAX_RETRIES` or `CLOUDFLARE_DLQ_MAX_RETRIES` is
 * not set, as the consumer runs without one: the number the start check
 * and the queue handler judge, and name in a refusal.
 *
 * @module
 */
import assert from "node:assert/strict";
import { workerConfig } from "../../webhook/app.ts";

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
