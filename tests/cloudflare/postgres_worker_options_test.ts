/**
 * What `examples/cloudflare/postgres_worker.ts` takes for its queue
 * consumer: every option the Worker passes from its settings, the jobs
 * queue's delivery delay (`CLOUDFLARE_DELIVERY_DELAY`) among them, is one
 * its options name, so a Worker built from its own settings can pass it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { PostgresWorkerOptions } from "../../examples/cloudflare/postgres_worker.ts";
import { loadConfig } from "../../webhook/config.ts";

Deno.test("postgresWorker's queue options name each of the Cloudflare settings' options the example passes, the delivery delay too", () => {
  const config = loadConfig({
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
    CLOUDFLARE_MAX_RETRIES: "9",
    CLOUDFLARE_DLQ_MAX_RETRIES: "100",
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
    CLOUDFLARE_DELIVERY_DELAY: "1m",
  });
  const retentions = config.cloudflareRetentions!;
  // Written out, not spread: an option the type does not name is refused.
  const queue: PostgresWorkerOptions["queue"] = {
    maxRetries: config.queues.cloudflare?.maxRetries,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries,
    messageRetentionMs: retentions.messageRetentionMs,
    deadLetterMessageRetentionMs: retentions.deadLetterMessageRetentionMs,
    deliveryDelayMs: retentions.deliveryDelayMs,
  };
  assert.equal(queue.deliveryDelayMs, 60_000);
});
