/**
 * A Worker for `deno task worker-check`'s PostgreSQL step:
 * `examples/cloudflare/postgres_worker.ts` as it is (its default export
 * answers every request but the three below, on a client of the request's
 * own, with at most 5 connections), and its {@linkcode postgresWorker}
 * consuming the jobs queue and its dead-letter queue with the check's own
 * policy. All of it runs on `PostgresStore` over postgres.js's Workers
 * build (the package's `workerd` export, which talks to the server over
 * `cloudflare:sockets` and needs `nodejs_compat`), on the real server at
 * `DATABASE_URL`, with `HttpSender` on `SENDER_URL`.
 *
 * Routes besides the example's (the check's own; nothing here is for
 * production):
 * - `POST /migrate` runs `store.migrate()` and answers 204;
 * - `POST /store` calls the store directly, on intents `pw_0001` and
 *   `pw_0002`: the write-ahead with a lease and a replay record, the
 *   refusals the store decides on what it read (a stale version, another's
 *   lease, a failure once money may have moved), those the server raises
 *   (a duplicate, a replayed claim), and two writes on one version at once
 *   from two clients, of which exactly one lands; it answers each step's
 *   result, or the error's name, as JSON;
 * - `POST /tls` takes `{ url, ssl, waitMs }`, a URL, its `sslmode`
 *   (`verify-full` unless given) and `migrate()`'s bound, and runs
 *   `migrate()` and a read on the example's client for it: `{ intent }` (`null`), or `{ error }`, the error's name
 *   and message; with `calls: true`, no `migrate()`: a read and a write
 *   on a client made as the example makes it, on a store whose
 *   `connectionWaitMs` is `waitMs`, answered as `{ read, write }`, each
 *   its result or its error's name and message;
 * - `GET /sessions` answers `{ sessions }`, the sessions PostgreSQL has
 *   counted on the database so far (`pg_stat_database.sessions`), once
 *   none of them is open.
 *
 * The queues' policy is the seed's with 1 s delays; its `stuckAfterMs`
 * outlasts the check, so a settling payment is never rescued and each
 * intent is sent at most once, whatever the queue's latency. The queues'
 * `max_retries` is 2 (`tools/_worker_check.mjs` binds them to match).
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import {
  BusyError,
  ConflictError,
  HttpSender,
  type Intent,
  ReplayError,
  type Store,
} from "../mod.ts";
import { PostgresStore } from "../store/postgres.ts";
import type { QueueBatch } from "../cloudflare/queue_handler.ts";
import example, {
  type Context,
  postgresWorker,
  withPostgresStore,
} from "../examples/cloudflare/postgres_worker.ts";

/** The bindings `tools/_worker_check.mjs` gives the Worker. */
interface Env {
  /** The server, for the check's own routes and queues; the example reaches it through its Hyperdrive binding. */
  readonly CHECK_DATABASE_URL: string;
  readonly SENDER_URL: string;
  readonly WEBHOOK_SECRET: string;
  readonly OPS_TOKEN: string;
  /** The second ops token, a rotation under way: the ops routes take both. */
  readonly OPS_TOKEN_NEXT: string;
}

const POLICY = {
  maxDeliveries: 3,
  baseMs: 1000,
  capMs: 1000,
  jitter: "none",
  stuckAfterMs: 600_000,
} as const;

/** The store over a client of this request's own, as the example opens it. */
function withStore<T>(
  env: Env,
  ctx: Context,
  use: (store: PostgresStore) => Promise<T>,
): Promise<T> {
  return withPostgresStore(database(env), ctx, use);
}

function database(env: Env) {
  return {
    url: env.CHECK_DATABASE_URL,
    ssl: false,
    sslnegotiation: null,
  } as const;
}

let checkedWorker: ReturnType<typeof postgresWorker> | undefined;

/**
 * The example's handlers with the check's policy, for the queues: built
 * once per isolate, as the example's own are.
 */
function checked(env: Env) {
  return checkedWorker ??= postgresWorker({
    database: () => database(env),
    relayer: {
      sender: new HttpSender({ url: env.SENDER_URL, timeoutMs: 5000 }),
      policy: POLICY,
    },
    app: {},
    // The check binds the dead-letter consumer to max_retries 100.
    queue: {
      maxRetries: 2,
      deadLetterQueue: "pg-jobs-dlq",
      deadLetterMaxRetries: 100,
    },
    log: console.log,
  });
}

/**
 * The sessions PostgreSQL has counted on the checked database
 * (`pg_stat_database.sessions`), read once none of its client sessions is
 * open: a session's count is flushed when it ends at the latest. Read from
 * `template1`, so the reading is no session of the database it counts.
 */
async function sessions(env: Env, ctx: Context): Promise<number> {
  const url = new URL(env.CHECK_DATABASE_URL);
  const database = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/template1";
  const sql = postgres(url.href, { max: 1 });
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [open] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = ${database} AND backend_type = 'client backend'`;
      if (open?.n === 0) break;
      if (Date.now() > deadline) {
        throw new Error(`${open?.n} sessions still open after 10 s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const [row] = await sql<{ sessions: number }[]>`
      SELECT sessions::int AS sessions FROM pg_stat_database
      WHERE datname = ${database}`;
    if (row === undefined) throw new Error(`no database ${database}`);
    return row.sessions;
  } finally {
    ctx.waitUntil(sql.end());
  }
}

/** A step's result: the intent's fields that step is about, or the error. */
type Result = Record<string, unknown> | string;

/** What `POST /store` runs: every step on a real server, none skipped; `second` is another client's store. */
async function storeSteps(
  store: Store,
  second: Store,
): Promise<[string, Result][]> {
  const results: [string, Result][] = [];
  const step = async (
    name: string,
    call: () => Promise<Intent | string | number | null>,
  ) => {
    try {
      const value = await call();
      results.push([
        name,
        value === null || typeof value !== "object" ? { value } : {
          state: value.state,
          hold: value.hold,
          version: value.version,
          broadcasting: value.broadcasting,
          mayHaveSent: value.mayHaveSent,
        },
      ]);
    } catch (error) {
      const known = error instanceof ConflictError
        ? `ConflictError${error.refused ? " (refused)" : ""}`
        : error instanceof BusyError
        ? "BusyError"
        : error instanceof ReplayError
        ? "ReplayError"
        : null;
      // Anything else is a failure of the step, and says why.
      results.push([name, known ?? `unexpected ${String(error)}`]);
    }
  };
  const id = "pw_0001";
  const lease = (owner: string, now: number, keep = false) => ({
    lease: { owner, ttlMs: 30_000, now, keep },
  });
  const claim = (key: string, now: number) => ({
    claim: { key, now, expiresAt: now + 360_000 },
  });
  await step(
    "create",
    () => store.createIntent({ id, state: "authorized", hold: "pending" }),
  );
  await step(
    "create again",
    () => store.createIntent({ id, state: "authorized", hold: "pending" }),
  );
  // The relayer's write-ahead: settling, with the broadcast's start, the
  // delivery's lease (kept across the send) and its replay record.
  await step("write ahead", () =>
    store.transition(id, {
      from: "authorized",
      to: "settling",
      version: "1",
      at: 1000,
    }, { ...lease("d1", 1000, true), ...claim("sig-1", 1000) }));
  await step("write ahead on a stale version", () =>
    store.transition(id, {
      from: "authorized",
      to: "settling",
      version: "1",
      at: 1000,
    }));
  const unknown = {
    outcome: "unknown",
    at: 1300,
    error: "rpc: timeout",
  } as const;
  await step(
    "record under another's live lease",
    () => store.recordBroadcast(id, "2", unknown, lease("d2", 1100)),
  );
  await step(
    "record with a replayed claim",
    () =>
      store.recordBroadcast(id, "2", unknown, {
        ...lease("d1", 1100),
        ...claim("sig-1", 1100),
      }),
  );
  // Nothing of the two refused writes committed.
  await step("read", () => store.getIntent(id));
  await step("void the hold mid-broadcast", () => store.voidHold(id));
  await step("record", () =>
    store.recordBroadcast(id, "2", unknown, {
      ...lease("d1", 1300),
      ...claim("sig-2", 1300),
    }));
  await step("fail once it may have sent", () =>
    store.transition(id, {
      from: "settling",
      to: "failed",
      version: "3",
      at: 1400,
      ledger: "void",
    }));
  await step("review instead", () =>
    store.transition(id, {
      from: "settling",
      to: "needs_review",
      version: "3",
      at: 1400,
    }));
  await step(
    "count a delivery",
    () => store.admit({ count: `${id}/settle`, now: 1500 }),
  );
  await step(
    "count it again",
    () => store.admit({ count: `${id}/settle`, now: 1600 }),
  );
  await step(
    "count it with a replayed claim",
    () =>
      store.admit({
        count: `${id}/settle`,
        ...claim("sig-2", 1700),
        now: 1700,
      }),
  );
  await step("deliveries", () => store.deliveries(`${id}/settle`, 1800));
  // A late copy of a message the queue gave up on: its give-up mark on
  // record refuses the write ahead of its send, in the write's own read.
  const late = "pw_0003";
  const mark = "gaveup/cloudflare/dlq/m-late";
  const aheadOf = (marks: string[]) => () =>
    store.transition(late, {
      from: "authorized",
      to: "settling",
      version: "1",
      at: 1900,
    }, { ...lease("d3", 1900, true), unlessCounted: marks });
  await step(
    "a give-up mark",
    () => store.admit({ count: mark, now: 1850 }),
  );
  await step(
    "create another",
    () =>
      store.createIntent({ id: late, state: "authorized", hold: "pending" }),
  );
  await step(
    "write ahead with its message's mark on record",
    aheadOf(["gaveup/cloudflare/dlq/m-0", mark]),
  );
  await step(
    "write ahead with other messages' marks",
    aheadOf(["gaveup/cloudflare/dlq/m-0", "gaveup/qstash/message/m-1"]),
  );
  // Two stores on clients of their own, each with its connection open, as
  // two isolates would be: exactly one write lands. Which layer refuses
  // the other is timing: on workerd the second's read has so far come
  // after the first's commit (the store's read refuses it); the suites on
  // Deno race the server's own check (refuse_stale) between connections.
  await step("two writes on one version at once", async () => {
    const other = "pw_0002";
    await store.createIntent({
      id: other,
      state: "authorized",
      hold: "pending",
    });
    await Promise.all([store.getIntent(other), second.getIntent(other)]);
    const move = (on: Store) =>
      on.transition(other, {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 2000,
      });
    const outcomes = await Promise.allSettled([move(store), move(second)]);
    return outcomes.map((outcome) =>
      outcome.status === "fulfilled"
        ? outcome.value.state
        : outcome.reason instanceof ConflictError && !outcome.reason.refused
        ? "ConflictError"
        : `unexpected ${String(outcome.reason)}`
    ).sort().join(", ");
  });
  return results;
}

async function fetch(
  request: Request,
  env: Env,
  ctx: Context,
): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (request.method === "POST" && pathname === "/migrate") {
    return await withStore(env, ctx, async (store) => {
      await store.migrate();
      return new Response(null, { status: 204 });
    });
  }
  if (request.method === "POST" && pathname === "/store") {
    return await withStore(
      env,
      ctx,
      (store) =>
        withStore(
          env,
          ctx,
          async (second) => Response.json(await storeSteps(store, second)),
        ),
    );
  }
  if (request.method === "POST" && pathname === "/tls") {
    // The example's client over verified TLS at the URL given (the check's
    // server by IP address, or by a name its certificate does not hold):
    // migrate() and a read, or the error's name and words.
    const { url, ssl = "verify-full", waitMs, calls } = await request
      .json() as {
        url: string;
        ssl?: "require" | "verify-full";
        waitMs?: number;
        calls?: boolean;
      };
    const tls = { url, ssl, sslnegotiation: null } as const;
    if (calls === true) {
      // The store's calls past migrate(), each bounded by waitMs.
      const sql = postgres(url, { max: 2, ssl });
      const store = new PostgresStore(sql, {
        connectionWaitMs: waitMs ?? 1000,
      });
      const settled = (call: Promise<unknown>) =>
        call.then(
          (value) => value ?? null,
          (error: Error) => `${error.name}: ${error.message}`,
        );
      try {
        return Response.json({
          read: await settled(store.getIntent("pw_tls")),
          write: await settled(
            store.createIntent({
              id: "pw_tls",
              state: "authorized",
              hold: "pending",
            }),
          ),
        });
      } finally {
        store.close();
        ctx.waitUntil(sql.end());
      }
    }
    try {
      return Response.json({
        intent: await withPostgresStore(tls, ctx, async (store) => {
          await store.migrate(waitMs === undefined ? {} : { waitMs });
          return await store.getIntent("pw_tls");
        }),
      });
    } catch (error) {
      const { name, message } = error as Error;
      return Response.json({ error: `${name}: ${message}` });
    }
  }
  if (request.method === "GET" && pathname === "/sessions") {
    return Response.json({ sessions: await sessions(env, ctx) });
  }
  // The example as deployed: its settings from the Worker's bindings.
  return await example.fetch(request, env, ctx);
}

function queue(batch: QueueBatch, env: Env, ctx: Context): Promise<void> {
  return checked(env).queue(batch, env, ctx);
}

export default { fetch, queue };
