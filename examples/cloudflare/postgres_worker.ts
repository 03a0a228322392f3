/**
 * A Cloudflare Worker on PostgreSQL: the webhook and a Cloudflare Queues
 * consumer with its dead-letter queue, as `worker.ts` builds them, on
 * `PostgresStore`, the durable store a Worker needs.
 *
 * workerd ties a socket to the request that opened it: a postgres.js client
 * kept at module scope fails the next request ("Cannot perform I/O on
 * behalf of a different request"). So each request and each queue batch
 * opens a client of its own, with at most 5 connections (a Worker may hold
 * six at once), and ends it once answered. Hyperdrive, where you use it,
 * keeps the database's side of those connections warm: bind it as
 * `HYPERDRIVE`, and its `connectionString` is the database's URL.
 *
 * It needs the `nodejs_compat` compatibility flag (postgres.js's Workers
 * build, which Wrangler picks, uses `node:buffer`, `node:events` and
 * `node:stream`) and `DATABASE_URL` among the service's settings. Run
 * `migrate()` once before deploying (`deno task start` with the same
 * `DATABASE_URL` does it), not per request. `deno task worker-check` runs
 * this file's {@linkcode postgresWorker} on workerd against a real server.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { env } from "cloudflare:workers";
import postgres from "postgres";
import {
  createRelayer,
  HttpSender,
  type RelayerOptions,
} from "@relayer/poison";
import {
  createQueueHandler,
  type QueueBatch,
} from "@relayer/poison/cloudflare";
import { PostgresStore } from "@relayer/poison/postgres";
import {
  type AppDeps,
  createApp,
  type DatabaseTls,
  loadConfig,
  routeOptions,
} from "@relayer/poison/webhook";

/** The part of workerd's `ExecutionContext` the Worker uses. */
export interface Context {
  waitUntil(promise: Promise<unknown>): void;
}

/** A database and the client's TLS options. */
export interface Database {
  readonly url: string;
  readonly ssl: DatabaseTls;
  readonly sslnegotiation: "direct" | null;
}

/** What {@linkcode postgresWorker} builds the Worker from. */
export interface PostgresWorkerOptions {
  /**
   * The database, and the client's TLS options (`loadConfig` reads them
   * from `DATABASE_URL`), read for each request and each batch.
   */
  readonly database: () => Database;
  /** The relayer's options but its store: the Sender, the policy, the lease. */
  readonly relayer: Omit<RelayerOptions, "store">;
  /** The app's own options: the routes' keys, the ops token, the queue to publish to. */
  readonly app: Omit<AppDeps, keyof RelayerOptions>;
  /** The jobs queue's `max_retries`, and its dead-letter queue's name. */
  readonly queue: {
    readonly maxRetries?: number | undefined;
    readonly deadLetterQueue: string;
  };
  /** Where the worker lines go. */
  readonly log: (line: string) => void;
}

/**
 * Runs `use` on a `PostgresStore` over a client of its own, with at most 5
 * connections, and ends the client once `use` is done (in
 * `ctx.waitUntil`, so the answer need not wait for it).
 */
export async function withPostgresStore<T>(
  database: Database,
  ctx: Context,
  use: (store: PostgresStore) => Promise<T>,
): Promise<T> {
  // postgres.js reads `sslnegotiation`; its types do not name it.
  const tls = {
    ssl: database.ssl,
    sslnegotiation: database.sslnegotiation,
  } as Pick<postgres.Options<Record<string, never>>, "ssl">;
  const sql = postgres(database.url, { max: 5, ...tls });
  try {
    return await use(new PostgresStore(sql));
  } finally {
    ctx.waitUntil(sql.end());
  }
}

/**
 * The Worker's `fetch` and `queue` handlers, on a `PostgresStore` over a
 * client of each request's and each batch's own.
 */
export function postgresWorker(options: PostgresWorkerOptions): {
  fetch(request: Request, env: unknown, ctx: Context): Promise<Response>;
  queue(batch: QueueBatch, env: unknown, ctx: Context): Promise<void>;
} {
  const withStore = <T>(
    ctx: Context,
    use: (store: PostgresStore) => Promise<T>,
  ) => withPostgresStore(options.database(), ctx, use);
  return {
    fetch: (request, _env, ctx) =>
      withStore(ctx, async (store) =>
        await createApp({
          ...options.relayer,
          ...options.app,
          store,
          log: options.log,
        }).fetch(request)),
    queue: (batch, _env, ctx) =>
      withStore(ctx, (store) =>
        createQueueHandler({
          relayer: createRelayer({ ...options.relayer, store }),
          ...options.queue,
          log: options.log,
        })(batch)),
  };
}

const config = loadConfig({ CLOUDFLARE_MAX_RETRIES: "3", ...env }); // unset: Cloudflare's 3
if (config.insecureDev) { // it opens unsigned routes, with no start-up line
  throw new Error("RELAYER_INSECURE_DEV is for local runs: unset it");
}
// A Hyperdrive binding named HYPERDRIVE, where there is one, gives the URL
// (read in a handler: workerd makes its connection string per request).
const hyperdrive = (env as { HYPERDRIVE?: { connectionString: string } })
  .HYPERDRIVE;
const { database } = config;
if (database === undefined && hyperdrive === undefined) {
  throw new Error(
    "DATABASE_URL is not set: bind it as a secret (wrangler secret put DATABASE_URL), or bind Hyperdrive as HYPERDRIVE",
  );
}

export default postgresWorker({
  // Hyperdrive encrypts to the database itself; the Worker talks to it
  // inside Cloudflare, with no TLS of its own.
  database: () =>
    hyperdrive === undefined ? database! : {
      url: hyperdrive.connectionString,
      ssl: false,
      sslnegotiation: null,
    },
  relayer: {
    sender: new HttpSender(config.sender),
    policy: config.policy,
    leaseMs: config.leaseMs,
  },
  app: {
    ...routeOptions(config), // QStash, Pub/Sub, HMAC, ops, body limit, dev flag
    enqueue: (job) => env.JOBS.send(job), // POST /v1/jobs
    redriveTo: { publish: (job) => env.JOBS.send(job) }, // and a redrive
  },
  queue: {
    maxRetries: config.queues.cloudflare?.maxRetries, // CLOUDFLARE_MAX_RETRIES
    deadLetterQueue: "relayer-jobs-dlq", // consumed here too: the queue gave up
  },
  log: console.log,
});
