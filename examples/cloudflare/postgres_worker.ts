/**
 * A Cloudflare Worker on PostgreSQL: the webhook and a Cloudflare Queues
 * consumer with its dead-letter queue, as `worker.ts` builds them, on
 * `PostgresStore`, the durable store a Worker needs.
 *
 * The app and the queue consumer are built once per isolate, as in
 * `worker.ts`: the app keeps state that must outlast a request. It fetches
 * Google's keys again for an unknown `kid` at most once a minute, probes
 * the store for `/readyz` at most once a second whoever calls, and says at
 * most once a minute that Google's keys cannot be had. An app built per
 * request would forget all three: every unauthenticated push with a
 * made-up `kid` would fetch Google's keys, and every `GET /readyz` would
 * open a connection to the database.
 *
 * The store, though, is per request: workerd ties a socket to the request
 * that opened it, and a postgres.js client kept at module scope fails the
 * next request ("Cannot perform I/O on behalf of a different request"). So
 * each request and each queue batch opens a client of its own, with at
 * most 2 connections (a Worker holds six at once, and the queue handler's
 * 4 lanes each make a signer call), and ends it once
 * answered; the app's store forwards each call to that client's
 * `PostgresStore`, found through `AsyncLocalStorage`. postgres.js connects
 * on a client's first query, so a request that never reaches the store
 * (a refused push, a `/readyz` answered from the last probe) opens no
 * connection. Hyperdrive, where you use it, keeps the database's side of
 * those connections warm: bind it as `HYPERDRIVE`, and its
 * `connectionString` is the database's URL. Create it with
 * `--caching-disabled`: Hyperdrive caches read queries by default, for a
 * minute and more, and a write does not clear them, so each of the store's
 * reads could be the intent as it was before the last delivery wrote it.
 *
 * It needs the `nodejs_compat` compatibility flag (postgres.js's Workers
 * build, which Wrangler picks, uses `node:buffer`, `node:events` and
 * `node:stream`; this file uses `node:async_hooks`) and `DATABASE_URL`
 * among the service's settings (the Deno KV ones, `QSTASH_TOKEN` and
 * `QSTASH_URL` it ignores and names once, as `worker.ts` does). Run `migrate()` once
 * before deploying, not per request: this Worker never does, and on a
 * database never migrated every store call fails, naming `migrate()` (a
 * short script: docs/queues.md, "Deploying to Cloudflare the first time").
 * `deno task worker-check` runs this file's {@linkcode postgresWorker} on
 * workerd against a real server.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { AsyncLocalStorage } from "node:async_hooks";
import { env } from "cloudflare:workers";
import postgres from "postgres";
import { HttpSender, type RelayerOptions, type Store } from "@relayer/poison";
import {
  createQueueHandler,
  type QueueBatch,
} from "@relayer/poison/cloudflare";
import { PostgresStore } from "@relayer/poison/postgres";
import {
  type AppDeps,
  createApp,
  type DatabaseTls,
  routeOptions,
  workerConfig,
} from "@relayer/poison/webhook";

/** The part of workerd's `ExecutionContext` the Worker uses. */
export interface Context {
  waitUntil(promise: Promise<unknown>): void;
}

/** A database and the client's TLS options. */
export interface Database {
  readonly url: string;
  /** The database name, %-escapes decoded (`loadConfig` gives it), sent in place of the URL's path. */
  readonly name?: string | undefined;
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
  /**
   * The jobs queue's `max_retries`, its dead-letter queue's name and
   * `max_retries`, the two queues' message retentions if checked, and the
   * jobs queue's delivery delay, counted in both.
   */
  readonly queue: {
    readonly maxRetries?: number | undefined;
    readonly deadLetterQueue: string;
    readonly deadLetterMaxRetries?: number | undefined;
    readonly messageRetentionMs?: number | undefined;
    readonly deadLetterMessageRetentionMs?: number | undefined;
    readonly deliveryDelayMs?: number | undefined;
  };
  /** Where the worker lines go. */
  readonly log: (line: string) => void;
}

/**
 * Runs `use` on a `PostgresStore` over a client of its own, with at most 2
 * connections, and closes the store and ends the client once `use` is done
 * (the end in `ctx.waitUntil`, so the answer need not wait for it).
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
  // No connection yet: postgres.js opens one on the first query, and
  // ending a client that never queried sends nothing.
  // Two connections, and the queue handler's 4 lanes of signer calls: 6, the
  // connections a Worker holds at a time (more wait, on the send's clock).
  // The name decoded: postgres.js sends the URL's path undecoded.
  const sql = postgres(database.url, {
    max: 2,
    ...(database.name ? { database: database.name } : {}),
    ...tls,
  });
  const store = new PostgresStore(sql);
  try {
    return await use(store);
  } finally {
    // The store first: its probes of the pool after a lost connection
    // stop, and a write after the end fails at once (docs/postgres.md).
    store.close();
    ctx.waitUntil(sql.end());
  }
}

/**
 * A `Store` that forwards each call to the store `stores` holds for the
 * request or queue batch the call is made in (`stores.run(store, …)`):
 * one app, built once, on each request's own client.
 *
 * @param stores Holds the current request's or batch's store.
 * @returns The store to build the app and the relayer on; each of its
 * calls rejects with an `Error` when made outside `stores.run`.
 */
export function forwardingStore(stores: AsyncLocalStorage<Store>): Store {
  const current = (what: string): Store => {
    const store = stores.getStore();
    if (store === undefined) {
      throw new Error(
        `Cannot call ${what} on the Worker's store outside a request or a queue batch: each has a PostgreSQL client of its own, which only postgresWorker's handlers open (call the app through them)`,
      );
    }
    return store;
  };
  return {
    async createIntent(intent) {
      return await current("createIntent").createIntent(intent);
    },
    async getIntent(id) {
      return await current("getIntent").getIntent(id);
    },
    async transition(id, change, options) {
      return await current("transition").transition(id, change, options);
    },
    async beginBroadcast(id, version, at, options) {
      return await current("beginBroadcast")
        .beginBroadcast(id, version, at, options);
    },
    async recordBroadcast(id, version, broadcast, options) {
      return await current("recordBroadcast")
        .recordBroadcast(id, version, broadcast, options);
    },
    async recordHold(id) {
      return await current("recordHold").recordHold(id);
    },
    async voidHold(id) {
      return await current("voidHold").voidHold(id);
    },
    async captureHold(id) {
      return await current("captureHold").captureHold(id);
    },
    async admit(admission) {
      return await current("admit").admit(admission);
    },
    async deliveries(jobId, now) {
      return await current("deliveries").deliveries(jobId, now);
    },
    async putDeadLetter(deadLetter, options) {
      return await current("putDeadLetter").putDeadLetter(deadLetter, options);
    },
    async releaseLease(intentId, owner) {
      await current("releaseLease").releaseLease?.(intentId, owner);
    },
    async getDeadLetter(jobId) {
      return await current("getDeadLetter").getDeadLetter(jobId);
    },
    async listDeadLetters(options) {
      return await current("listDeadLetters").listDeadLetters(options);
    },
    async redrive(jobId, version, options) {
      return await current("redrive").redrive(jobId, version, options);
    },
  };
}

/**
 * The Worker's `fetch` and `queue` handlers: the app and the queue
 * consumer built once, on a store that forwards to a `PostgresStore` over
 * a client of each request's and each batch's own.
 */
export function postgresWorker(options: PostgresWorkerOptions): {
  fetch(request: Request, env: unknown, ctx: Context): Promise<Response>;
  queue(batch: QueueBatch, env: unknown, ctx: Context): Promise<void>;
} {
  const stores = new AsyncLocalStorage<Store>();
  const store = forwardingStore(stores);
  // Neither does I/O, timers or randomness when built: fine at a Worker's
  // top level, as in worker.ts. The queue consumer delivers with the app's
  // relayer, on the same store, so both handlers reach PostgreSQL the same
  // way and one count of sends in flight covers both.
  const app = createApp({
    ...options.relayer,
    ...options.app,
    store,
    log: options.log,
  });
  const queue = createQueueHandler({
    relayer: app.relayer,
    ...options.queue,
    log: options.log,
  });
  /** Runs `use` with the store of a client of its own, ended after. */
  const withStore = <T>(ctx: Context, use: () => Promise<T>) =>
    withPostgresStore(
      options.database(),
      ctx,
      (own) => stores.run(own, use),
    );
  return {
    fetch: (request, _env, ctx) =>
      withStore(ctx, async () => await app.fetch(request)),
    queue: (batch, _env, ctx) => withStore(ctx, () => queue(batch)),
  };
}

// max_retries unset: Cloudflare's 3; DATABASE_URL read, unlike worker.ts
const { config, nameUnread } = workerConfig(env, { database: true });
if (config.insecureDev) { // it opens unsigned routes, with no start-up line
  throw new Error("RELAYER_INSECURE_DEV is for local runs: unset it");
}
// A Hyperdrive binding named HYPERDRIVE, where there is one, gives the URL
// (read in a handler: workerd makes its connection string per request); a
// DATABASE_URL beside it is ignored, and nameUnread says so.
const hyperdrive = (env as { HYPERDRIVE?: { connectionString: string } })
  .HYPERDRIVE;
const { database } = config;
if (database === undefined && hyperdrive === undefined) {
  throw new Error(
    "DATABASE_URL is not set: bind it as a secret (wrangler secret put DATABASE_URL), or bind Hyperdrive as HYPERDRIVE",
  );
}

const worker = postgresWorker({
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
    clockSkewMs: config.clockSkewMs,
  },
  app: {
    ...routeOptions(config), // QStash, Pub/Sub, HMAC, ops, body limit, dev flag
    enqueue: (job) => env.JOBS.send(job), // POST /v1/jobs
    redriveTo: { publish: (job) => env.JOBS.send(job) }, // and a redrive
  },
  queue: {
    maxRetries: config.queues.cloudflare?.maxRetries, // CLOUDFLARE_MAX_RETRIES
    deadLetterQueue: "relayer-jobs-dlq", // consumed here too: the queue gave up
    deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries, // CLOUDFLARE_DLQ_MAX_RETRIES
    ...config.cloudflareRetentions, // CLOUDFLARE_MESSAGE_RETENTION, CLOUDFLARE_DLQ_MESSAGE_RETENTION, CLOUDFLARE_DELIVERY_DELAY
  },
  log: console.log,
});

export default nameUnread(worker, console.log); // names what it ignores, once
