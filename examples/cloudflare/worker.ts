/**
 * A Cloudflare Worker: the webhook (QStash and signed generic deliveries,
 * the ops routes) and a Cloudflare Queues consumer with its
 * dead-letter queue, built once at module top level. Construction does no
 * I/O, sets no timer and draws no random number, which Workers forbid in
 * global scope.
 *
 * Settings are the service's own (`SENDER_URL`, the routes' keys,
 * `OPS_TOKEN`, the policy, `MAX_BODY_BYTES`, and `CLOUDFLARE_MAX_RETRIES`,
 * the consumer's `max_retries`, Cloudflare's default of 3 when it is not
 * set, so the queue's limits are always checked, and the queues' message
 * retentions, `CLOUDFLARE_MESSAGE_RETENTION` and
 * `CLOUDFLARE_DLQ_MESSAGE_RETENTION`, checked (unset, as 24 h, the
 * Workers Free plan's), with the jobs
 * queue's `CLOUDFLARE_DELIVERY_DELAY` counted in both), read from the
 * Worker's environment and
 * passed on whole by `routeOptions`; a bad one stops the Worker with a line
 * that names it, and so does `RELAYER_INSECURE_DEV`. Jobs go to the
 * Worker's own queue (`JOBS`), so `QSTASH_TOKEN`, which publishes through
 * QStash, is not used here, nor `QSTASH_URL`; nor are the service's store
 * settings (`KV_PATH`, `KV_URL`, `DENO_KV_ACCESS_TOKEN`, `KV_QUEUE`,
 * `DATABASE_URL`) or Deno Deploy's: `workerConfig` neither checks nor
 * refuses them, and the Worker names each it is given once, on its first
 * event (`nameUnread`), so that you remove it. `MemoryStore` lives
 * in one isolate and is lost with it: a Worker in production needs a
 * durable `Store` (`postgres_worker.ts` reads `DATABASE_URL`).
 *
 * `wrangler.toml` in this folder binds the queues; `deno task worker-check`
 * runs this file on workerd through Miniflare.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { env } from "cloudflare:workers";
import { HttpSender, MemoryStore } from "@relayer/poison";
import { createQueueHandler } from "@relayer/poison/cloudflare";
import { createApp, routeOptions, workerConfig } from "@relayer/poison/webhook";

const { config, nameUnread } = workerConfig(env); // max_retries unset: Cloudflare's 3
if (config.insecureDev) { // it opens unsigned routes, with no start-up line
  throw new Error("RELAYER_INSECURE_DEV is for local runs: unset it");
}
const store = new MemoryStore(); // per isolate: use a durable Store in production
const sender = new HttpSender(config.sender);
const { policy, leaseMs, clockSkewMs } = config; // LEASE, CLOCK_SKEW too
const deps = { store, sender, policy, leaseMs, clockSkewMs };
const app = createApp({
  ...deps,
  ...routeOptions(config), // QStash, Pub/Sub, HMAC, ops, body limit, dev flag
  enqueue: (job) => env.JOBS.send(job), // POST /v1/jobs
  redriveTo: { publish: (job) => env.JOBS.send(job) }, // and a redrive
  log: console.log,
});
const queue = createQueueHandler({
  relayer: app.relayer, // one count of sends in flight with the routes
  maxRetries: config.queues.cloudflare?.maxRetries, // CLOUDFLARE_MAX_RETRIES
  deadLetterQueue: "relayer-jobs-dlq", // consumed here too: the queue gave up
  deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries, // CLOUDFLARE_DLQ_MAX_RETRIES
  ...config.cloudflareRetentions, // CLOUDFLARE_MESSAGE_RETENTION, CLOUDFLARE_DLQ_MESSAGE_RETENTION, CLOUDFLARE_DELIVERY_DELAY
  log: console.log,
});

export default nameUnread({ fetch: app.fetch, queue }, console.log); // names what it ignores, once
