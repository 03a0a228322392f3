/**
 * `cloudflare:workers` as a Worker's TypeScript project sees it: `env`
 * typed as `wrangler types` writes it for `examples/cloudflare/wrangler.toml`
 * (its `[vars]` as literal text, a JSON one as a number, the secrets, the
 * `JOBS` producer and a Hyperdrive binding), and Cloudflare's `Queue`,
 * whose `send()` answers a `QueueSendResponse`, as
 * `@cloudflare/workers-types` 4.20260702.1 declares them.
 * `worker_types_test.ts` type-checks the example Workers against it.
 *
 * @module
 */

/** What `Queue.send()` answers. */
export interface QueueSendResponse {
  metadata: { metrics: { backlogCount: number; backlogBytes: number } };
}

/** A queue producer binding. */
export interface Queue<Body = unknown> {
  send(
    message: Body,
    options?: { contentType?: string; delaySeconds?: number },
  ): Promise<QueueSendResponse>;
}

/** The Worker's bindings, as `wrangler types` writes them. */
export interface Env {
  SENDER_URL: "https://signer.example.com";
  PUBLIC_URL: "https://relayer.example.workers.dev";
  MAX_DELIVERIES: "10";
  CLOUDFLARE_MAX_RETRIES: 9;
  CLOUDFLARE_DLQ_MAX_RETRIES: "100";
  WEBHOOK_SECRET: string;
  OPS_TOKEN: string;
  DATABASE_URL: string;
  JOBS: Queue;
  HYPERDRIVE: { connectionString: string };
}

/** The Worker's bindings. */
export declare const env: Env;
