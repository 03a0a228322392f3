/**
 * The least `max_retries` of the dead-letter queue, as the queue handler
 * (`deadLetterMaxRetries`) and a Worker's `CLOUDFLARE_DLQ_MAX_RETRIES`
 * refuse it: retries whose waits span 14 days exactly are enough, one fewer
 * is refused, naming that least number and the span it falls short with.
 *
 * With a base delay of 4 h the dead-letter queue's waits are 4 h, 8 h, then
 * 12 h each (its cap): 29 retries span 4 h + 8 h + 27 × 12 h = 14 days to
 * the second, 28 span 13 days 12 h.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  formatDuration,
  MemoryStore,
  ScriptedSender,
} from "../../mod.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const FOURTEEN_DAYS_MS = 14 * 86_400_000;
const SHORT_MS = (4 + 8 + 26 * 12) * 3_600_000;

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  MAX_DELIVERIES: "4",
  BASE: "4h",
  CAP: "12h",
  CLOUDFLARE_MAX_RETRIES: "3",
  CLOUDFLARE_MESSAGE_RETENTION: "336h",
  CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
};

function handler(deadLetterMaxRetries: number) {
  const config = loadConfig({ ...SETTINGS, CLOUDFLARE_DLQ_MAX_RETRIES: "100" });
  return createQueueHandler({
    relayer: createRelayer({
      store: new MemoryStore(),
      sender: new ScriptedSender({}),
      policy: config.policy,
    }),
    maxRetries: 3,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries,
    messageRetentionMs: FOURTEEN_DAYS_MS,
    deadLetterMessageRetentionMs: FOURTEEN_DAYS_MS,
  });
}

Deno.test("createQueueHandler() takes dead-letter retries that span 14 days exactly, and refuses one fewer naming that count as the least", () => {
  assert.equal(SHORT_MS, FOURTEEN_DAYS_MS - 12 * 3_600_000);
  handler(29);
  assert.throws(
    () => handler(28),
    (error: unknown) => {
      assert.ok(error instanceof RangeError);
      assert.match(
        error.message,
        new RegExp(
          `^Cannot create queue handler as 'deadLetterMaxRetries' is 28: a give-up that fails while the store is down would be retried for only ${
            formatDuration(SHORT_MS)
          } \\(less than 14 days, Cloudflare's longest retention\\) before Cloudflare deletes it, and its intent would be stranded\\. Set the dead-letter queue consumer's max_retries in wrangler\\.toml to at least 29 \\(100 is safe\\)`,
        ),
      );
      return true;
    },
  );
});

Deno.test("loadConfig() takes CLOUDFLARE_DLQ_MAX_RETRIES whose retries span 14 days exactly, and refuses one fewer naming the least the queue handler takes", () => {
  assert.equal(
    loadConfig({ ...SETTINGS, CLOUDFLARE_DLQ_MAX_RETRIES: "29" })
      .cloudflareDeadLetterMaxRetries,
    29,
  );
  assert.throws(
    () => loadConfig({ ...SETTINGS, CLOUDFLARE_DLQ_MAX_RETRIES: "28" }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.setting, "CLOUDFLARE_DLQ_MAX_RETRIES");
      assert.equal(
        error.message,
        `CLOUDFLARE_DLQ_MAX_RETRIES is 28, so a give-up that fails while the store is down would be retried for only ${
          formatDuration(SHORT_MS)
        } (less than 14 days, Cloudflare's longest retention) before Cloudflare deletes it, and its intent would be stranded. Set the dead-letter queue consumer's max_retries and CLOUDFLARE_DLQ_MAX_RETRIES to at least 29 (100 is safe)`,
      );
      return true;
    },
  );
});
