/**
 * The webhook queues deliver to: one Hono app, Web APIs only, built from
 * its dependencies. `main.ts` serves it on Deno (and Deno Deploy); under
 * Node, `@hono/node-server` serves the same `app.fetch`. CI runs every
 * delivery route on Node 20, 22, 24 and 26, Bun and Cloudflare Workers.
 *
 * | route | source | delivery number | done | retry | poison |
 * |---|---|---|---|---|---|
 * | `POST /v1/qstash` | Upstash QStash | `Upstash-Retried` + 1, else (missing or unreadable) counted by job id | 200 | 503 + `Retry-After` | 200 |
 * | `POST /v1/pubsub` | Pub/Sub push (wrapped) | `deliveryAttempt`, else (missing, 0 or unreadable) counted by subscription and message id | 204 | 503 | 204 |
 * | `POST /v1/deliveries` | anything, HMAC-signed | `delivery`, else (missing or unreadable) counted by `messageId` (per job), else by job id | 200 | 503 + `Retry-After` | 200 |
 *
 * Ops routes (bearer `OPS_TOKEN`): `POST /v1/intents` (setup),
 * `GET /v1/intents/:id`, `POST /v1/intents/:id/resolve` (settle or fail a
 * payment in review, `{ to, version }`, and `nonceChecked: true` to fail
 * one a send of which may have left, unless a tx of it on record reverted
 * (the intent keeps its last broadcast only); its hold captured,
 * or voided in the same write as the move to failed;
 * the answer names the job's dead letter and the `DELETE` that discards it),
 * `GET /v1/dead-letters`, `POST /v1/dead-letters/:jobId/redrive` (the job
 * id `%2F`-encoded, or as `/v1/dead-letters/:intentId/:kind/redrive`),
 * `DELETE /v1/dead-letters/:jobId` (likewise, or
 * `/v1/dead-letters/:queue/:id/unreadable`) for a letter no job can act on,
 * `POST /v1/jobs` (QStash with `QSTASH_TOKEN`, or the local queue with
 * `KV_QUEUE=1`). `GET /healthz` is open, for liveness probes (the process
 * answers); `GET /readyz` too, for readiness (the store answers a read and
 * takes a write).
 *
 * An authenticated Pub/Sub message that cannot be read (bad JSON, bad
 * base64, not a job, over the limit) is acked with 204, logged, and kept as
 * the dead letter `pubsub/<messageId>/unreadable`: a 400 would have Pub/Sub
 * redeliver it for days. An authenticated QStash message that cannot be
 * read (not a job, over the limit) is kept so too, as
 * `qstash/<Upstash-Message-Id>/unreadable`, and answered 489 with
 * `Upstash-NonRetryable-Error: true`, which ends QStash's retries.
 *
 * @module
 */

import { describeError, oneLine } from "../policy/_walk.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { backoff } from "../policy/backoff.ts";
import { jitter } from "../policy/jitter.ts";
import { isPoison } from "../policy/sentinels.ts";
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import {
  countOrThrow,
  deadLetterPage,
  INTENT_ID_RULE,
  intentOrNull,
  isIntentId,
  letterOrNull,
  redriveRefusal,
  writtenIntent,
} from "../store/_rules.ts";
import {
  assertOptionNames,
  checkedClock,
  MAX_TIMER_MS,
  show,
} from "../policy/_validate.ts";
import { REDRIVE_OPTIONS, RELAYER_OPTIONS } from "../relayer/_options.ts";
import type {
  DeadLetter,
  Intent,
  QueueIds,
  StoredDeadLetter,
} from "../store/store.ts";
import { ConflictError } from "../store/conflict_error.ts";
import { isHeldBySession } from "../store/_held_lock.ts";
import { isNotRead, isNotWritten } from "../store/_not_written.ts";
import { isReadOnly } from "../store/_read_only.ts";
import { isSchemaBehind } from "../store/_schema_behind.ts";
import { ReplayError } from "../store/replay_error.ts";
import {
  createRelayer,
  formatOutcome,
  type Job,
  jobIdOf,
  type Outcome,
  parseJob,
  type RedriveOptions,
  type Relayer,
  type RelayerOptions,
} from "../relayer/relayer.ts";
import {
  exactText,
  hmacVerifier,
  KeysUnavailable,
  MIN_SECRET,
  type PubSubKeys,
  pubsubVerifier,
  type PushVerification,
  type QStashKeys,
  qstashVerifier,
  type RefusalKind,
  type ReplayClaim,
  tokenMatcher,
} from "./_auth.ts";
import { oncePer, stepBackPace } from "./_step_back.ts";
import { urlSaid } from "./_url_said.ts";
import { deliveriesText } from "../policy/_count.ts";
import { qstashDefaultRetries } from "../policy/_qstash_callback.ts";
import { writeAheadsSeen } from "./_write_aheads.ts";
import { problem } from "./_problem.ts";
import { jsonAnswer } from "./_json_answer.ts";
import { topLevelFields } from "./_json_head.ts";
import { type NotJsonCause, notJsonCause } from "./_not_json.ts";
import { bodyDeadlines, type TimedRead } from "./_deadlines.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import {
  DEFAULT_LEASE_MS,
  ownSendEnded,
  resolveArrived,
  sendEndedUnrecorded,
  sendInFlight,
  unrecordedTxHashes,
} from "../relayer/_sends.ts";
import { leftUnrecorded } from "../relayer/_unrecorded_claims.ts";
import { isUnderWay } from "../relayer/_under_way.ts";
import { intentIdSeen } from "../relayer/_job_text.ts";

export type { PubSubKeys, QStashKeys, ReplayClaim };
/**
 * The webhook {@linkcode createApp} builds: a Hono app, of which the public
 * surface is what a runtime serves (`fetch`) and what a test calls
 * (`request`, without a socket).
 *
 * @example Hand `fetch` to a server
 * ```ts
 * import { createApp, type WebhookApp } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const app: WebhookApp = createApp({ store: new MemoryStore(), sender: new ScriptedSender({}) });
 * // `Deno.serve(app.fetch)` serves it; here, one request without a socket.
 * const res = await app.fetch(new Request("http://localhost/healthz"));
 * assert.deepEqual(await res.json(), { status: "ok" });
 * ```
 */
export interface WebhookApp {
  /** Answers a request: hand it to `Deno.serve`, `@hono/node-server` or a Worker's `fetch`. */
  fetch(request: Request): Response | Promise<Response>;
  /** Answers a request built from a path (`"/healthz"`) or URL, as Hono's `app.request` does. */
  request(
    input: string | URL | Request,
    init?: RequestInit,
  ): Response | Promise<Response>;
  /**
   * The relayer the routes deliver with, built from the app's own options.
   * Hand it to any other lane of the same process (a queue consumer), so
   * that one count of sends in flight covers both: a copy of a job that
   * arrives on one lane while the other sends it is busy, whatever the
   * wall clock says.
   *
   * @example Deliver a job the app's way, outside a request
   * ```ts
   * import { createApp } from "@relayer/poison/webhook";
   * import { MemoryStore, ScriptedSender } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const store = new MemoryStore();
   * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
   * const app = createApp({ store, sender: new ScriptedSender({}), random: () => 0 });
   * const outcome = await app.relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 1);
   * assert.equal(outcome.action, "retry"); // sent: its receipt is read next time
   * assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
   * ```
   */
  readonly relayer: Relayer;
}

/** What a queue message showed before it proved unreadable (for `keepUnreadable`). */
type PushSeen = { id?: unknown; attempt?: unknown; job?: unknown };

/**
 * What {@linkcode createApp} builds the webhook from: the relayer's own
 * options (store, Sender, policy, clock, randomness, lease) and the keys of
 * each route.
 *
 * @example Build the app from its dependencies
 * ```ts
 * import { type AppDeps, createApp } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const deps: AppDeps = {
 *   store: new MemoryStore(),
 *   sender: new ScriptedSender({}),
 *   policy: { maxDeliveries: 5 },
 *   opsToken: "ops-token-0123456789",
 * };
 * const app = createApp(deps);
 * assert.deepEqual(await (await app.request("/healthz")).json(), { status: "ok" });
 * assert.equal((await app.request("/v1/dead-letters")).status, 401); // no ops token sent
 * ```
 */
export interface AppDeps extends RelayerOptions {
  /** QStash's signing keys; without them `POST /v1/qstash` is refused. */
  readonly qstash?: QStashKeys;
  /** Google's OIDC settings; without them `POST /v1/pubsub` is refused. */
  readonly pubsub?: PubSubKeys;
  /**
   * Google's OIDC settings of the push subscription on the dead-letter
   * topic (its own audience, `PUBSUB_DEAD_LETTER_AUDIENCE`); without them
   * `POST /v1/pubsub/dead-letter` is refused.
   */
  readonly pubsubDeadLetter?: PubSubKeys;
  /** The HMAC secret of `POST /v1/deliveries`, 16 characters or more; without it the route is refused. */
  readonly webhookSecret?: string;
  /**
   * A second HMAC secret `POST /v1/deliveries` takes while the senders
   * move to it (a rotation): a delivery signed with either verifies. Only
   * with `webhookSecret`.
   */
  readonly webhookSecretNext?: string;
  /** The bearer token of the ops routes, 16 characters or more of printable ASCII (no space at either end); without it they are refused. */
  readonly opsToken?: string;
  /**
   * A second bearer token the ops routes take while the clients move to it
   * (a rotation): a call with either is let through, both compared in
   * constant time. Only with `opsToken`, and by the same rules.
   */
  readonly opsTokenNext?: string;
  /**
   * Accept unauthenticated requests on routes whose keys are not set. For
   * local development only; never in production.
   *
   * @default {false}
   */
  readonly insecureDev?: boolean;
  /**
   * The largest request body, in bytes. A queue's envelope around a job (a
   * Pub/Sub push, QStash's failure callback) may be larger, by the job's
   * base64 encoding and 16 KiB: every job a direct route takes also fits
   * the envelope that gives it up (a Pub/Sub dead-letter push by 4 KiB
   * more, for the attributes its copy adds). An authenticated Pub/Sub push
   * over its limit is acked (204) and kept as a dead letter
   * `pubsub/sha256-…/unreadable`, not refused: Pub/Sub would redeliver a
   * 413 for days. An authenticated QStash message over its limit (its
   * token checked, then the hash of its body, read as it comes) is kept as
   * a dead letter and answered 489, not refused: QStash retries a 413 to
   * the end. A route that reads no body (a redrive, a discard, the ops
   * reads) leaves one unread, whatever its length.
   *
   * @default {65536}
   */
  readonly maxBodyBytes?: number;
  /**
   * The longest a route waits for a request's body, in milliseconds, from
   * when it begins to read it (once the headers are checked). A body not
   * all there by then is refused 408 (`body-timeout`, `Connection:
   * close`), and its read stopped: a client that sends the headers and
   * holds the body back holds no handler past it (the refusal comes at most
   * a quarter of it later: one timer ticks for every read in flight). Every
   * queue sends a 408 again. It bounds an oversized body's hashed read too
   * (up to 72 MiB).
   *
   * @default {30000}
   */
  readonly bodyTimeoutMs?: number;
  /**
   * Where the worker lines go: one per delivery (`worker  pi_0001/settle
   * #1  retry  (reason)`) and one per unexpected failure (its name and
   * message; never a secret, never a stack over HTTP); one per operator's
   * new intent, job, redrive, discard and resolution of a review; at most
   * once a minute per route, one for requests refused for their size (413)
   * and one for bodies that did not arrive in time (408), and one for
   * refused (401) requests per kind of refusal (a missing or unverified
   * credential, a key or secret not held, another URL or audience, another
   * service account, a time off by this server's clock, a malformed
   * timestamp or claims, a replay: a fixed set, so a forger's requests do
   * not hide a queue's own refusal, and a flood of them adds a few lines a
   * minute at most), each with the count since the last line of its
   * route, status and kind; and the store's readiness (`/readyz`, a delivery's failure):
   * `relayer not ready: …` when a probe fails (again at most once a minute
   * while its error stays the same), `relayer ready again: …` at the first
   * that passes after.
   *
   * @default {a function that discards them}
   */
  readonly log?: (line: string) => void;
  /**
   * Puts a job on a queue (`POST /v1/jobs`); absent, that route answers
   * 503. A failure answers 503 too, with `Retry-After` the error's
   * `retryAfterMs` where it has one (as `qstashPublisher`'s has when QStash
   * rate-limits the publish and says until when), else 5 s; a redrive whose
   * `redriveTo.publish` fails answers the same way. What it resolves to is
   * not read (a Worker's `env.JOBS.send(job)` answers its queue's metrics).
   */
  readonly enqueue?: (job: Job) => Promise<unknown>;
  /**
   * Where a redriven job goes: published to a queue before the dead letter
   * is removed, or enqueued on the store's own queue in the same commit.
   * Absent, the redrive route answers 503 and keeps the dead letter:
   * removing it with no job on a queue would strand the intent (DESIGN
   * §14).
   */
  readonly redriveTo?: RedriveOptions;
  /**
   * The monotonic clock, in milliseconds, that the resolve route counts
   * its `send-in-flight` wait on: a fail of a payment in review that may
   * have sent is refused (409, `Retry-After`) until this process has seen
   * it for a lease (`leaseMs`) from the first fail it refused, the longest
   * a send still running in any instance can last. Inject one to step
   * through that wait in a test, as `now` steps the wall clock. A reading
   * that is not a finite number fails the request (500) and writes
   * nothing.
   *
   * @default {() => performance.now()}
   *
   * @example Past the wait without sleeping
   * ```ts
   * import { createApp } from "@relayer/poison/webhook";
   * import { MemoryStore } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const store = new MemoryStore();
   * await store.createIntent({ id: "pi_0001", state: "needs_review", hold: "pending", settlingSince: 0, mayHaveSent: true });
   * let mono = 0;
   * const app = createApp({
   *   store,
   *   sender: { send: () => Promise.reject(new Error("no sends")), receipt: () => Promise.resolve("dropped") },
   *   opsToken: "ops-token-0123456789",
   *   leaseMs: 30_000,
   *   monotonicNow: () => mono,
   * });
   * const headers = { authorization: "Bearer ops-token-0123456789" };
   * const fail = async () => {
   *   const { intent } = await (await app.request("/v1/intents/pi_0001", { headers })).json();
   *   return app.request("/v1/intents/pi_0001/resolve", {
   *     method: "POST",
   *     headers,
   *     body: JSON.stringify({ to: "failed", version: intent.version, nonceChecked: true }),
   *   });
   * };
   * const first = await fail();
   * assert.equal(first.status, 409); // send-in-flight: a send may still run
   * assert.equal(first.headers.get("retry-after"), "30");
   * mono += 30_000; // a lease later: every send has ended
   * assert.equal((await fail()).status, 200);
   * assert.equal((await store.getIntent("pi_0001"))?.hold, "voided");
   * ```
   */
  readonly monotonicNow?: () => number;
}

/** Every option `createApp` reads: the relayer's and its own. */
const APP_OPTIONS: readonly string[] = [
  ...RELAYER_OPTIONS,
  ...Object.keys(
    {
      qstash: true,
      pubsub: true,
      pubsubDeadLetter: true,
      webhookSecret: true,
      webhookSecretNext: true,
      opsToken: true,
      opsTokenNext: true,
      insecureDev: true,
      maxBodyBytes: true,
      bodyTimeoutMs: true,
      log: true,
      enqueue: true,
      redriveTo: true,
      monotonicNow: true,
    } satisfies Record<Exclude<keyof AppDeps, keyof RelayerOptions>, true>,
  ),
];

/** The relayer's own options out of the app's. */
function relayerOptions(deps: AppDeps): RelayerOptions {
  const options: Record<string, unknown> = {};
  for (const name of RELAYER_OPTIONS) {
    if (Object.hasOwn(deps, name)) {
      options[name] = (deps as unknown as Record<string, unknown>)[name];
    }
  }
  return options as unknown as RelayerOptions;
}

/**
 * The JSON body of every delivery answer.
 *
 * @example Read a delivery answer
 * ```ts
 * import { createApp, type DeliveryAnswer } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // insecureDev: an unsigned delivery, for local development only.
 * const app = createApp({ store: new MemoryStore(), sender: new ScriptedSender({}), insecureDev: true, random: () => 0 });
 * const body = JSON.stringify({ job: { intentId: "pi_0404", kind: "settle" }, delivery: 1 });
 * const res = await app.request("/v1/deliveries", { method: "POST", body });
 * const answer: DeliveryAnswer = await res.json();
 * assert.equal(res.status, 503);
 * assert.equal(answer.outcome, "retry");
 * assert.equal(answer.reason, "intent pi_0404 not found");
 * ```
 */
export interface DeliveryAnswer {
  /** `"done"`, `"retry"` or `"poison"`. */
  readonly outcome: Outcome["action"];
  /** The job id, such as `"pi_0001/settle"`. */
  readonly job: string;
  /** The delivery this answers, 1-based. */
  readonly delivery: number;
  /** Why. */
  readonly reason: string;
  /** For a retry: how long the queue should wait, in milliseconds. */
  readonly delayMs?: number;
  /** For a poison: what the resolution did. */
  readonly resolution?: string;
  /** For Pub/Sub retries: who decides the wait. */
  readonly note?: string;
}

type Route = "qstash" | "pubsub" | "deliveries";

const STATUS: Record<Route, Record<Outcome["action"], number>> = {
  qstash: { done: 200, retry: 503, poison: 200 },
  pubsub: { done: 204, retry: 503, poison: 204 },
  deliveries: { done: 200, retry: 503, poison: 200 },
};

// QStash honours a Retry-After of at most one day.
const MAX_RETRY_AFTER_S = 86_400;

/**
 * The most `Retry-After` a delivery route asks for, in seconds: a day on
 * QStash's, the most it honours (its start-up check counts its delays so
 * capped); none on the generic route, whose bridge the check counts as
 * waiting the policy's delays whole: capped there, a policy whose delays
 * pass a day brought its last delivery back before the rescue window the
 * check took, and a payment whose send was unknown went to review
 * unrescued. (Pub/Sub's answers carry none.)
 */
const ROUTE_RETRY_AFTER_S: Record<Route, number> = {
  qstash: MAX_RETRY_AFTER_S,
  pubsub: MAX_RETRY_AFTER_S,
  deliveries: Infinity,
};

/** The ops routes' paths, as `app.use` matches them. */
const OPS_PATHS = [
  "/v1/intents/*", // and /v1/intents itself: Hono's "/*" matches it too
  "/v1/dead-letters/*",
  "/v1/jobs",
] as const;

/** The paths of the GET routes, which answer HEAD too. */
const HEAD_PATHS = [
  "/healthz",
  "/readyz",
  "/v1/intents/:id",
  "/v1/dead-letters",
] as const;

/**
 * The answer with a Content-Length of its body, for a HEAD that will drop
 * it. A length already set, or no body, is left as it is.
 */
async function withLength(res: Response): Promise<Response> {
  if (res.body === null || res.headers.has("content-length")) return res;
  const bytes = await res.arrayBuffer();
  const headers = new Headers(res.headers);
  headers.set("content-length", String(bytes.byteLength));
  return new Response(bytes, {
    status: res.status,
    statusText: res.statusText,
    headers,
  });
}

/** The routes whose body is a queue's envelope around a base64-encoded job. */
const ENVELOPE_ROUTES: ReadonlySet<string> = new Set([
  "/v1/qstash/failed",
  "/v1/pubsub",
  "/v1/pubsub/dead-letter",
]);

/**
 * An envelope's room beyond the encoded job: its other fields and
 * attributes, and (QStash's failure callback) our last answer, base64: its
 * `reason` is clipped to 1,000 characters by the relayer.
 */
const ENVELOPE_HEADROOM_BYTES = 16 * 1024;

/**
 * The room `POST /v1/deliveries` leaves past `maxBodyBytes` for a bridge's
 * give-up: its `gaveUp` (a count, a message id of up to 200 characters,
 * escaped, and a bridge's whitespace) in place of the delivery's
 * `delivery` or `messageId`. A bridge gives up on the job it delivered,
 * on the same route: refused there for that room (413), a give-up that a
 * bridge takes as final is dropped, and nothing resolves the intent. A
 * delivery still gets `maxBodyBytes`.
 */
const GAVE_UP_HEADROOM_BYTES = 1024;

/**
 * The routes Pub/Sub pushes to. Pub/Sub redelivers a push answered
 * anything but 2xx until its retention ends (7 days by default, up to 31),
 * so an authenticated push over the limit is acked and kept as a dead
 * letter there, as an unreadable one is, not refused with a 413.
 */
const PUSH_ROUTES: ReadonlySet<string> = new Set([
  "/v1/pubsub",
  "/v1/pubsub/dead-letter",
]);

/**
 * The most of an authenticated push over the limit that is read, to name
 * its dead letter by its hash (streamed, never held): Pub/Sub's largest
 * message, 10 MB, is under 14 MB as a push, its data base64.
 */
const OVERSIZED_PUSH_READ_BYTES = 16 * 1024 * 1024;

/**
 * The routes that read no body, as `<method> <pattern>`: a body sent to
 * one is left unread whatever its length, so one over the limit is not
 * refused by its Content-Length either, as the same body sent chunked
 * (counted only as a route reads it) never was.
 */
const UNREAD_BODY_ROUTES: ReadonlySet<string> = new Set([
  "GET /v1/intents/:id",
  "GET /v1/dead-letters",
  "POST /v1/dead-letters/:jobId/redrive",
  "POST /v1/dead-letters/:intentId/:kind/redrive",
  "POST /v1/dead-letters/:queue/:name/unreadable/redrive",
  "DELETE /v1/dead-letters/:jobId",
  "DELETE /v1/dead-letters/:intentId/:kind",
  "DELETE /v1/dead-letters/:queue/:name/unreadable",
]);

/**
 * The routes QStash calls. QStash retries anything but 2xx (a 413 too)
 * until its retries run out, then calls the failure callback, which
 * carries the message base64 (larger still): an authenticated message over
 * the limit is kept as a dead letter there and answered 489 with
 * `Upstash-NonRetryable-Error: true`, as an unreadable one is, not refused
 * with a 413 that strands its job.
 */
const QSTASH_ROUTES: ReadonlySet<string> = new Set([
  "/v1/qstash",
  "/v1/qstash/failed",
]);

/**
 * The most of an authenticated QStash message over the limit that is read,
 * to check its hash against its token (streamed, never held): QStash's
 * largest message, 50 MB on its fixed plans (10 MB pay as you go), is under
 * 70 MB as a failure callback, its body base64. One longer is refused 413.
 */
const OVERSIZED_QSTASH_READ_BYTES = 72 * 1024 * 1024;

/**
 * What Pub/Sub's dead-letter copy of a push adds to it, at most: four
 * attributes naming the source (its subscription up to 255 characters),
 * a subscription path of its own and a new message id, under a kilobyte.
 * The dead-letter route takes this much more than `/v1/pubsub`, or a push
 * that route read would strand its job at the give-up (a 413 Pub/Sub
 * redelivers until the copy's retention ends).
 */
const DEAD_LETTER_COPY_BYTES = 4 * 1024;

/** How long `/readyz` waits for the store's answer to its read. */
const READY_WAIT_MS = 2_000;

/** How long one `/readyz` probe of the store answers for. */
const READY_CACHE_MS = 1_000;

/** How often a store probe that keeps failing with the same error is logged again. */
const PROBE_LOG_INTERVAL_MS = 60_000;

/** The intent `/readyz` reads: any id will do, and none need exist. */
const READY_PROBE_ID = "readyz";

/**
 * The count a failed delivery writes to learn whether the store takes a
 * write now: no job has this id (an intent id holds no `/`).
 */
const WRITE_PROBE_COUNT = "relayer/write-probe";

/** How long an operator's failing of a payment in review waits for its txs' receipts, in all. */
const RESOLVE_RECEIPTS_MS = 5_000;

/** How often, at most, the log says that Google's keys cannot be fetched. */
const KEYS_LOG_INTERVAL_MS = 60_000;

/**
 * How often, at most, the log says that a route refuses requests (401,
 * 413 for their size, 408 for a body that did not arrive in time), per
 * route and status, and for a 401 per kind of refusal: a queue whose
 * every delivery is refused (a PUBLIC_URL that is not the URL QStash
 * calls, a secret rotated on one side only, a clock off by minutes, a
 * publisher whose jobs outgrew MAX_BODY_BYTES) strands its jobs, and the
 * operator must see it, though a forger's request came first in the
 * minute; a flood of forgeries must not flood the log.
 */
const REFUSALS_LOG_INTERVAL_MS = 60_000;

/**
 * How many QStash tokens an app remembers as used while the store could
 * not record them: a token is about 40 bytes of key and lives 6½ minutes,
 * so an outage of thousands of deliveries a minute is covered.
 */
const UNRECORDED_TOKENS = 10_000;

/**
 * The methods a refusal's log line names as sent; any other is logged as
 * `OTHER`. HTTP takes any token as a method (Deno.serve took one of 60,000
 * characters), and `limitBody` answers every method: keyed by the method
 * as sent, each made-up one had a line of its own and a record kept for
 * good (1,000 requests wrote 50 MB of log and kept 50 MB).
 */
const LOGGED_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
  "CONNECT",
  "TRACE",
]);

/**
 * What a 401's log line counts, per kind of refusal ({@linkcode RefusalKind}):
 * the refusals of that kind on its route since that kind's last line.
 */
const REFUSAL_KINDS: Readonly<Record<RefusalKind, string>> = {
  unverified: "a missing or unverified credential",
  key: "a key or secret this service does not hold",
  url: "another URL or audience",
  account: "another service account",
  clock: "a time off by this server's clock",
  claims: "a malformed timestamp or claims",
  replay: "a replay",
};

/**
 * A refusal the app answers as a problem; thrown inside handlers. A 401's
 * `kind` paces its log line apart from other kinds' on its route.
 */
class Refusal extends Error {
  constructor(
    readonly response: Response,
    readonly detail = "",
    readonly kind?: RefusalKind,
  ) {
    super("refused");
  }
}

/**
 * A route that is off (503 `not-configured`): logged as a 401 is, at most
 * once a minute per route. A queue that delivers there, or gives up there,
 * is answered only this until it stops calling.
 */
class NotConfigured extends Refusal {}

/** The routes by which a queue gives up on a job. */
const GIVE_UP_ROUTES: ReadonlySet<string> = new Set([
  "POST /v1/qstash/failed",
  "POST /v1/pubsub/dead-letter",
]);

/**
 * Whether a send of this intent may have left: a broadcast in flight, one
 * on record not declared `not_sent`, a tx hash on record, or the sticky
 * `mayHaveSent`. Any tx of its nonce may then be one with no hash kept:
 * the intent keeps its last broadcast only, so an `unknown` send followed
 * by a recorded rescue reads as if the rescue were the only send.
 */
function mayHaveLeft(intent: Intent): boolean {
  return intent.mayHaveSent || intent.broadcasting !== null ||
    intent.txHashes.length > 0 ||
    (intent.lastBroadcast !== null &&
      intent.lastBroadcast.outcome !== "not_sent");
}

/** Why a send of `intent` may have left with no hash kept, for a refusal. */
function hashlessWhy(intent: Intent): string {
  return intent.broadcasting !== null
    ? "a broadcast in flight"
    : intent.lastBroadcast?.outcome === "unknown"
    ? "its last broadcast unknown"
    : intent.txHashes.length === 0
    ? "no tx on record"
    : "every tx on record reads dropped, as it would if an earlier send whose answer was lost had landed on its nonce: the intent keeps its last broadcast only";
}

/**
 * Why a call failed when the store says its schema is not migrated, or was
 * migrated by an older version, and what to run: no retry mends it until
 * then.
 */
const SCHEMA_BEHIND =
  "the store's schema is not migrated, or was migrated by an older version (the relayer's log names what is missing)";

/** What to run on such a schema (see {@linkcode SCHEMA_BEHIND}). */
const MIGRATE =
  "As the schema's owner, run migrate() on it once (PostgresStore's migrate(): deno task start runs it at its start with the owner's DATABASE_URL; a Worker never does, see docs/postgres.md)";

/**
 * Why a write failed when the database refused it as read-only: no retry
 * mends it until the database takes writes again.
 */
const READ_ONLY =
  "the database is read-only and took none of it (a hot standby, a primary a failover demoted, or default_transaction_read_only = on for the store's role or database; the relayer's log names it)";

/** What to do about such a database (see {@linkcode READ_ONLY}). */
const WRITABLE =
  "Point the store at the primary (a URL that lists several hosts takes target_session_attrs=primary), or turn default_transaction_read_only off for the store's role or database (ALTER ROLE … SET default_transaction_read_only = off)";

/**
 * The cause the store named for a refused call, said on every route with
 * what to do (`as`: why it failed; `todo`: a sentence): a schema not
 * migrated, or a read-only database. `undefined` for any other failure.
 */
function namedCause(
  error: unknown,
): { readonly as: string; readonly todo: string } | undefined {
  return isSchemaBehind(error)
    ? { as: SCHEMA_BEHIND, todo: MIGRATE }
    : isReadOnly(error)
    ? { as: READ_ONLY, todo: WRITABLE }
    : undefined;
}

/** What held a call up when the store says another session did (PostgreSQL's 55P03, 57014). */
const HELD_UP =
  "another session's lock, or a statement cancelled by statement_timeout or pg_cancel_backend; the relayer's log names it";

/**
 * Seconds for `Retry-After`, rounded up (rounding down would break the
 * floor of equal jitter), and at least 1: a 0 (a full-jitter draw, or a
 * BASE of 1 ms) would ask the queue back at once, in a tight loop. At most
 * `maxS` (a day unless given: {@linkcode ROUTE_RETRY_AFTER_S}).
 */
function retryAfter(delayMs: number, maxS = MAX_RETRY_AFTER_S): string {
  return String(Math.max(1, Math.min(maxS, Math.ceil(delayMs / 1000))));
}

/**
 * A time of the store as an operator reads it: ISO 8601, or, past what a
 * `Date` can hold (an import, a clock beyond it), its milliseconds, where
 * `toISOString()` would throw and the answer be a 500.
 */
function timeShown(ms: number): string {
  return Math.abs(ms) <= 8_640_000_000_000_000
    ? new Date(ms).toISOString()
    : `${ms} ms since 1970 (past what a Date can show)`;
}

/**
 * `Retry-After` for an operator's publish the queue refused: the wait the
 * queue asked for, where its error carries one (`retryAfterMs`, as
 * `qstashPublisher`'s does on QStash's 429), else 5 s.
 */
function queueRetryAfter(error: unknown): string {
  const waitMs = (error as { retryAfterMs?: unknown } | null)?.retryAfterMs;
  return typeof waitMs === "number" && Number.isFinite(waitMs) && waitMs >= 0
    ? retryAfter(waitMs)
    : "5";
}

function badInput(route: Route, detail: string): Refusal {
  // QStash: 489 + Upstash-NonRetryable-Error, because retrying a malformed
  // message will not help; it goes to QStash's DLQ instead.
  return route === "qstash"
    ? new Refusal(
      problem(489, "bad-job", "Malformed job", detail, {
        "Upstash-NonRetryable-Error": "true",
      }),
      detail,
    )
    : new Refusal(problem(400, "bad-job", "Malformed job", detail), detail);
}

/**
 * The answer to an authenticated QStash message over its route's limit,
 * once it is kept as a dead letter: 489 with `Upstash-NonRetryable-Error`,
 * which QStash's docs say ends its retries (the message goes to its DLQ),
 * as for a malformed job: a 413 would be retried to the end, to no avail.
 */
function tooLargeToRetry(detail: string): Response {
  return problem(489, "too-large", "Body too large", detail, {
    "Upstash-NonRetryable-Error": "true",
  });
}

/**
 * Decodes a body as UTF-8 and keeps a leading byte order mark: the text
 * then encodes back to the very bytes a queue signed or hashed (any valid
 * UTF-8), where `Request.text()` drops the mark and breaks the signature.
 */
// Both options given: Cloudflare's types require each (false is the default).
const UTF8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/**
 * A body that could not be read to its end: the client's connection failed
 * while it sent it. The failure is the client's, so a 400, not a 500, and
 * no log line: one would hold the path the client chose (a line break in
 * it forges a line), and anyone could write one per request.
 */
function unreadableBody(): Refusal {
  const detail =
    "The request body could not be read to its end (the connection failed while it was sent): send the request again.";
  return new Refusal(
    problem(400, "unreadable-body", "Body unreadable", detail),
    detail,
  );
}

/**
 * A body not all there `timeoutMs` after its route began to read it: a
 * client that sends its headers and then holds the body back (or trickles
 * it) would otherwise hold its connection and its handler for as long as
 * the server lets it (Deno.serve, for good). A 408 with `Connection:
 * close`: the connection is not reused with part of a body still on it,
 * and every queue sends a 408 again.
 */
function bodyTimedOut(timeoutMs: number): Refusal {
  const detail = `The request body did not arrive within ${
    formatDuration(timeoutMs)
  } of its route beginning to read it: send the request again.`;
  return new Refusal(
    problem(408, "body-timeout", "Body not received in time", detail, {
      connection: "close",
    }),
    detail,
  );
}

/**
 * Reads a body within the app's deadline ({@linkcode bodyDeadlines}): as
 * `read` settles, or a {@linkcode bodyTimedOut} refusal once it passed.
 * `read` is given `late`, that refusal once the deadline passed (else
 * `undefined`), for a read chunk by chunk to stop at ({@linkcode chunkOf}).
 * Nothing is cancelled at the deadline (an `arrayBuffer()` cannot be): the
 * answer then finds its body unread, so the server does not use the
 * connection again. Deno.serve ignores the 408's `Connection: close`; a
 * body cancelled before the answer left, it reads the rest for the client
 * and answers the next request on that connection.
 */
type Within = <T>(read: TimedRead<T>) => Promise<T>;

/**
 * Refuses a body whose client left while it was read
 * ({@linkcode unreadableBody}), once its read ended with `size` bytes.
 * Deno.serve, Bun.serve and Node 24 fail that read; `@hono/node-server` on
 * Node 20 and 22 ends it as if the body were whole (empty, or cut where
 * the client left) and aborts the request's signal: so cut, a push was
 * kept as an unreadable message's dead letter and logged as acked, a
 * QStash message refused 401, though neither was sent. A body shorter than
 * its `Content-Length` was cut, whatever the signal says; one as long is
 * whole, so the signal is read only for a chunked body, which has no
 * length to fall short of. Deno.serve, under its legacy abort behaviour,
 * warns on stderr at the answer to a request whose signal was read (read
 * here, before the answer, it says the same under either behaviour).
 */
function refuseIfCut(c: Context, size: number): void {
  const length = c.req.header("content-length");
  if (length !== undefined && c.req.header("transfer-encoding") === undefined) {
    if (size < Number.parseInt(length, 10)) throw unreadableBody();
  } else if (c.req.raw.signal?.aborted) throw unreadableBody();
}

/**
 * A body longer than `maxBytes`: refused, and not read on. The log says
 * its `Content-Length` too, when it was refused by it.
 */
function tooLarge(maxBytes: number, declared?: number): Refusal {
  const detail = `A request body may be at most ${maxBytes} bytes.`;
  return new Refusal(
    problem(413, "too-large", "Body too large", detail),
    declared === undefined
      ? detail
      : `${detail} This one's Content-Length is ${declared}.`,
  );
}

/**
 * A request's body as bytes, at most `maxBytes` of them, within
 * `within`'s deadline (else a 408). Read here, by the route, once it has checked
 * what the headers alone tell (a signature, a token): a body is not read
 * ahead of that, so a client that sends forged headers and then holds its
 * body back is refused at once, not waited for.
 */
async function bytesOf(
  c: Context,
  maxBytes: number,
  within: Within,
): Promise<Uint8Array> {
  const stream = c.req.raw.body;
  if (stream === null) return new Uint8Array(0);
  if (
    c.req.header("content-length") !== undefined &&
    c.req.header("transfer-encoding") === undefined
  ) {
    // Its length said, and within the limit (limitBody): the server frames
    // the body to it, so the whole of it is read at once.
    const buffer = await within(() =>
      c.req.raw.arrayBuffer().catch(() => {
        throw unreadableBody();
      })
    );
    refuseIfCut(c, buffer.byteLength);
    if (buffer.byteLength > maxBytes) throw tooLarge(maxBytes);
    return new Uint8Array(buffer);
  }
  const reader = stream.getReader();
  const bytes = await within((late) => chunksOf(reader, maxBytes, late));
  refuseIfCut(c, bytes.byteLength);
  return bytes;
}

/**
 * A body read chunk by chunk, refused past `maxBytes`; stopped once `late`
 * (see {@linkcode Within}).
 */
async function chunksOf(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
  late: () => Error | undefined,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const chunk = await chunkOf(reader, late);
    if (chunk === undefined) break;
    size += chunk.byteLength;
    if (size > maxBytes) {
      // The rest is not read: the answer goes out, and the client's
      // connection with it.
      reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(chunk);
  }
  return joined(chunks, size);
}

/**
 * The body's next chunk, `undefined` at its end; one that cannot be read
 * is refused. Once `late` (see {@linkcode Within}) the read is
 * over: a chunk that comes then cancels the reader (its answer, the 408,
 * is out by then) and is refused with it.
 */
async function chunkOf(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  late: () => Error | undefined,
): Promise<Uint8Array | undefined> {
  // The reader's own answer type: Bun's types name it
  // ReadableStreamDefaultReadResult, whose done result the DOM's
  // ReadableStreamReadResult does not take.
  let read: Awaited<ReturnType<typeof reader.read>>;
  try {
    read = await reader.read();
  } catch {
    throw late() ?? unreadableBody();
  }
  const refusal = late();
  if (refusal) {
    reader.cancel().catch(() => {});
    throw refusal;
  }
  return read.done ? undefined : read.value;
}

/** The chunks, `size` bytes in all, as one array (most bodies come in one chunk: no copy). */
function joined(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** A request's body: its bytes, and its text as {@linkcode UTF8} decodes it. */
async function bodyOf(
  c: Context,
  maxBytes: number,
  within: Within,
): Promise<{ bytes: Uint8Array; text: string }> {
  const bytes = await bytesOf(c, maxBytes, within);
  return { bytes, text: UTF8.decode(bytes) };
}

/** The first `length` bytes of `chunks`, copied without joining the rest. */
function headOf(chunks: readonly Uint8Array[], length: number): Uint8Array {
  const head = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    if (at >= length) break;
    const part = chunk.subarray(0, length - at);
    head.set(part, at);
    at += part.byteLength;
  }
  return head;
}

/** UTF-8 as `Request.text()` decodes it: a byte order mark dropped. */
const TEXT = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false });

/** A request's body as text (an ops route's JSON). */
async function textOf(
  c: Context,
  maxBytes: number,
  within: Within,
): Promise<string> {
  return TEXT.decode(await bytesOf(c, maxBytes, within));
}

/**
 * A body as text (and its bytes), or, over `maxBytes`, how long it is, its SHA-256 and
 * its first `headBytes` (`head`, to name the intent of the job it carries;
 * at most `maxBytes`, which the read held when it found the body over):
 * the rest is read and hashed as it comes, never held, up to `readBytes`;
 * past that (`whole` false), `overBytes` is `readBytes` and the hash is
 * that of the first `readBytes` bytes, however the chunks fell. Read only
 * once the request's headers are checked, and within `within`'s deadline (else a
 * 408); `over` is called once the body is known to be over `maxBytes` (by
 * its Content-Length, before any of it is read), and may throw to refuse
 * it unread on.
 */
async function bodyOrDigestOf(
  c: Context,
  maxBytes: number,
  readBytes: number,
  headBytes: number,
  within: Within,
  over: () => void = () => {},
): Promise<TextOrDigest> {
  const stream = c.req.raw.body;
  const length = c.req.header("content-length");
  if (
    stream === null ||
    (length !== undefined && c.req.header("transfer-encoding") === undefined &&
      !(Number.parseInt(length, 10) > maxBytes))
  ) return await bodyOf(c, maxBytes, within);
  if (length !== undefined && c.req.header("transfer-encoding") === undefined) {
    over();
  }
  const reader = stream.getReader();
  return await within((late) =>
    digestOf(
      reader,
      maxBytes,
      readBytes,
      Math.min(headBytes, maxBytes),
      over,
      late,
      (size) => refuseIfCut(c, size),
    )
  );
}

/**
 * {@linkcode bodyOrDigestOf}'s answer: the text and the bytes it was read
 * from, or the length, hash and head past the limit.
 */
type TextOrDigest = { text: string; bytes: Uint8Array } | {
  overBytes: number;
  whole: boolean;
  sha256: string;
  digest: Uint8Array;
  head: Uint8Array;
};

/**
 * {@linkcode bodyOrDigestOf}'s read, chunk by chunk, stopped once `late`;
 * `ended` is told the size read once the body ended
 * ({@linkcode refuseIfCut}).
 */
async function digestOf(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
  readBytes: number,
  headBytes: number,
  over: () => void,
  late: () => Error | undefined,
  ended: (size: number) => void,
): Promise<TextOrDigest> {
  let chunks: Uint8Array[] = [];
  let size = 0;
  let hash: ReturnType<typeof sha256.create> | undefined;
  let head: Uint8Array = new Uint8Array(0);
  for (;;) {
    const value = await chunkOf(reader, late);
    if (value === undefined) break;
    size += value.byteLength;
    if (hash === undefined && size > maxBytes) {
      try {
        over();
      } catch (error) {
        reader.cancel().catch(() => {});
        throw error;
      }
      hash = sha256.create();
      for (const chunk of chunks) hash.update(chunk);
      head = headOf([...chunks, value], Math.min(headBytes, size));
      chunks = [];
    }
    if (hash === undefined) {
      chunks.push(value);
      continue;
    }
    const past = size - readBytes;
    if (past > 0) {
      // Past the bound: its first `readBytes` bytes are hashed, wherever
      // the chunks fall, so the same body is named the same however it
      // came; one of exactly `readBytes` is read whole.
      hash.update(value.subarray(0, value.byteLength - past));
      reader.cancel().catch(() => {});
      const digest = hash.digest();
      return {
        overBytes: readBytes,
        whole: false,
        sha256: bytesToHex(digest),
        digest,
        head,
      };
    }
    hash.update(value);
  }
  ended(size);
  if (hash !== undefined) {
    const digest = hash.digest();
    return {
      overBytes: size,
      whole: true,
      sha256: bytesToHex(digest),
      digest,
      head,
    };
  }
  const bytes = joined(chunks, size);
  return { text: UTF8.decode(bytes), bytes };
}

/** A job, as the refusals show one. */
const JOB_EXAMPLE = '{"intentId":"pi_0001","kind":"settle"}';

/**
 * How much of an oversized Pub/Sub push is kept to name its job's intent
 * (a QStash message keeps its route's limit: see `qstashBodyOf`).
 */
const HEAD_BYTES = 4096;

/**
 * The intent an oversized message's first bytes name (the first
 * `"intentId":"…"`), for its dead letter. Its job was not read, but a
 * letter that names no intent can be discarded at once, and the payment
 * whose only job it was then has no job and no letter; one that names it
 * is refused discard while the intent is created, authorized or settling,
 * and its detail says to publish the job. Pub/Sub's envelope carries the
 * job base64 in `message.data`: its first whole quanta are decoded.
 */
function intentIdIn(head: Uint8Array, envelope: boolean): string | undefined {
  let text = TEXT.decode(head);
  if (envelope) {
    const data = /"data"\s*:\s*"([A-Za-z0-9+/]*)/.exec(text)?.[1];
    if (data === undefined) return undefined;
    try {
      text = TEXT.decode(
        Uint8Array.from(
          atob(data.slice(0, data.length - data.length % 4)),
          (char) => char.charCodeAt(0),
        ),
      );
    } catch {
      return undefined;
    }
  }
  const id = /"intentId"\s*:\s*"([^"\\]*)"/.exec(text)?.[1];
  return isIntentId(id) ? id : undefined;
}

/**
 * What the first bytes of QStash's failure callback over its limit show
 * of the message it gives up on, scanned, not parsed
 * ({@linkcode topLevelFields}: QStash's own top-level fields only, never
 * one inside the message's headers or body): its id (`sourceMessageId`,
 * or the misspelt `sourceMessasgeId`), if it can name a letter; its
 * deliveries (`retried` + 1); and the intent of its job, found as
 * `/v1/qstash` finds it ({@linkcode intentIdIn}) in the message's first
 * bytes (`sourceBody`'s first whole base64 quanta), no more than the
 * first `maxBodyBytes`, all `/v1/qstash` reads of a message over its
 * limit: the callback names an intent only if `/v1/qstash` names the same
 * one in the letter it keeps for that message.
 */
function callbackSeen(
  head: Uint8Array,
  maxBodyBytes: number,
): { id?: string; attempt?: number; intentId?: string } {
  const { fields, cut } = topLevelFields(TEXT.decode(head), "sourceBody");
  const named = idFrom(
    fields.get("sourceMessageId") ?? fields.get("sourceMessasgeId"),
  );
  const retried = fields.get("retried");
  const body = fields.get("sourceBody");
  const data = /^[A-Za-z0-9+/]*={0,2}/.exec(
    typeof body === "string" ? body : cut ?? "",
  )![0];
  let intentId: string | undefined;
  try {
    const quanta = data.slice(
      0,
      Math.min(data.length - data.length % 4, Math.ceil(maxBodyBytes / 3) * 4),
    );
    intentId = intentIdIn(
      Uint8Array.from(atob(quanta), (char) => char.charCodeAt(0)).subarray(
        0,
        maxBodyBytes,
      ),
      false,
    );
  } catch {
    intentId = undefined;
  }
  return {
    ...(isIntentId(named) ? { id: named } : {}),
    ...(typeof retried === "number" && Number.isSafeInteger(retried) &&
        retried >= 0
      ? { attempt: retried + 1 }
      : {}),
    ...(intentId === undefined ? {} : { intentId }),
  };
}

/** The job to publish in an oversized message's stead, its intent's if named. */
function jobAlone(intentId: string | undefined): string {
  return intentId === undefined
    ? JOB_EXAMPLE
    : JSON.stringify({ intentId, kind: "settle" });
}
/** The body of `POST /v1/deliveries`, as its refusals show one. */
const DELIVERY_EXAMPLE =
  `{"job":${JOB_EXAMPLE},"delivery":1,"messageId":"m-1"} ('delivery' and 'messageId' are optional)`;
/** A bridge's give-up on `POST /v1/deliveries`, as its refusals show one. */
const GAVE_UP_EXAMPLE =
  `{"job":${JOB_EXAMPLE},"gaveUp":{"deliveries":7,"messageId":"m-1"}} ('deliveries' is optional, and 'messageId' where your queue's message has no id)`;

/**
 * `body`, read once more if it is a text (a bridge that `JSON.stringify`s
 * what it sends, a byte order mark before it ignored), with `twice` to
 * say so in an answer ("a JSON text of "); `undefined` for a text that is
 * no JSON.
 */
function readTwice(
  body: unknown,
): { body: unknown; twice: string } | undefined {
  if (typeof body !== "string") return { body, twice: "" };
  try {
    return {
      body: JSON.parse(body.charCodeAt(0) === 0xfeff ? body.slice(1) : body),
      twice: "a JSON text of ",
    };
  } catch {
    return undefined;
  }
}

/**
 * `raw` parsed as JSON, or a bad-input refusal saying what it must hold
 * (`expected`: a job unless said otherwise). `cause`, asked only once the
 * parse failed, names what was wrong with a signed body's bytes (see
 * {@linkcode notJsonCause}). `subject` names what `raw` is, where it is not
 * the request's body (Pub/Sub's decoded `message.data`: its envelope, the
 * body, was JSON).
 */
function parseJson(
  route: Route,
  raw: string,
  expected = `a job such as ${JOB_EXAMPLE}`,
  cause?: () => NotJsonCause | undefined,
  subject = "The body",
): unknown {
  try {
    // A byte order mark before JSON is ignored, as RFC 8259 §8.1 allows.
    return JSON.parse(raw.charCodeAt(0) === 0xfeff ? raw.slice(1) : raw);
  } catch {
    const known = cause?.();
    throw badInput(
      route,
      known === undefined
        ? `${subject} is not JSON: send ${expected}.`
        : `${subject} is not JSON: ${known.why}. ${known.send}, and sign the bytes sent: ${expected}.`,
    );
  }
}

function jobFrom(route: Route, value: unknown): Job {
  try {
    return parseJob(value);
  } catch (error) {
    throw badInput(route, (error as Error).message);
  }
}

/** Whether a queue's count of a job's deliveries can be read: a safe integer >= 1. */
function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) &&
    value >= 1;
}

/** The most characters of a count that cannot be read a log line shows. */
const COUNT_SHOWN = 20;

/**
 * A queue's count that cannot be read, as a log line shows it: its first
 * {@linkcode COUNT_SHOWN} characters with every control character (a line
 * break, an escape) stripped, quoted if a string. Most such counts come
 * in a header no signature covers, so whoever sends the request chose
 * them: a line must neither grow with one nor be broken by one.
 */
function shownCount(value: unknown): string {
  const text = typeof value === "string"
    ? value.slice(0, COUNT_SHOWN + 1)
    : show(value).slice(0, COUNT_SHOWN + 1);
  const cut = text.length > COUNT_SHOWN;
  // C0, DEL, C1 and the Unicode line and paragraph separators.
  const clean = text.slice(0, COUNT_SHOWN).replace(
    /[\p{Cc}\u2028\u2029]/gu,
    "",
  );
  return `${typeof value === "string" ? JSON.stringify(clean) : clean}${
    cut ? "…" : ""
  }`;
}

function decodeBase64(
  route: Route,
  data: unknown,
  field = "'message.data'",
): string {
  if (
    typeof data !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(data) ||
    data.length % 4 !== 0
  ) {
    throw badInput(route, `${field} must be the job as standard base64`);
  }
  try {
    const bytes = Uint8Array.from(atob(data), (ch) => ch.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
      bytes,
    );
  } catch {
    throw badInput(route, `${field} is not base64 of UTF-8 text`);
  }
}

/** The bytes that `data`, standard base64 as `decodeBase64` takes it, holds. */
function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return data.length / 4 * 3 - padding;
}

/**
 * The source message a Pub/Sub dead-letter push forwards, as every copy
 * of it names it. Pub/Sub dead-letters on a best-effort basis, so one
 * message may be dead-lettered more than once, each copy a new message
 * with an id of its own; what the copies share are the attributes Pub/Sub
 * sets when it forwards: the source subscription (and its project) and
 * the source topic's publish time. The intent goes with them, as two
 * messages may be published within one millisecond. `undefined` without
 * those attributes (a message published to the topic by hand). A
 * publisher may set them too, as it sets any attribute: they key a
 * repeat, and prove nothing of who sent it.
 */
function sourceMessage(
  attributes: Record<string, unknown>,
  job: Job,
): string | undefined {
  const project = nameFrom(
    attributes.CloudPubSubDeadLetterSourceSubscriptionProject,
  );
  const subscription = nameFrom(
    attributes.CloudPubSubDeadLetterSourceSubscription,
  );
  const published = idFrom(
    attributes.CloudPubSubDeadLetterSourceTopicPublishTime,
  );
  if (subscription === undefined || published === undefined) return undefined;
  return `${project ?? "-"}/${subscription}@${published}#${job.intentId}`;
}

/**
 * The attributes Pub/Sub sets on a message it forwards to a dead-letter
 * topic, which a push subscription with payload unwrapping and write
 * metadata sends as headers of these names.
 */
const DEAD_LETTER_ATTRIBUTES = [
  "CloudPubSubDeadLetterSourceDeliveryCount",
  "CloudPubSubDeadLetterSourceSubscription",
  "CloudPubSubDeadLetterSourceSubscriptionProject",
  "CloudPubSubDeadLetterSourceTopicPublishTime",
] as const;

/**
 * The job an unwrapped Pub/Sub push's body is (the message's data itself:
 * a job, `{"job": …}`, or the JSON text of either), or `undefined`.
 */
function unwrappedJob(body: unknown): Job | undefined {
  let value = body;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  if (typeof value === "object" && value !== null && "job" in value) {
    value = (value as { job: unknown }).job;
  }
  try {
    return parseJob(value);
  } catch {
    return undefined;
  }
}

/**
 * What a dead letter's id names: a job (`<intentId>/settle`), a queue
 * message that could not be read (`<queue>/<id>/unreadable`, as
 * `Relayer.keepUnreadable` names it), or nothing a letter can have (`null`).
 */
function letterNamed(jobId: string): "job" | "unreadable" | null {
  const parts = jobId.split("/");
  if (parts.length === 2) {
    return isIntentId(parts[0]) && parts[1] === "settle" ? "job" : null;
  }
  if (parts.length === 3) {
    return /^(pubsub|qstash|cloudflare|local|generic)$/.test(parts[0]!) &&
        isIntentId(parts[1]) && parts[2] === "unreadable"
      ? "unreadable"
      : null;
  }
  return null;
}

/**
 * An optional id from a queue's body: 1–200 printable ASCII characters
 * (what QStash, Pub/Sub and Cloudflare send), else left out. A control
 * character could not be kept by every store (PostgreSQL text refuses
 * U+0000), and would end up in counters, dead letters and log lines.
 */
function idFrom(value: unknown): string | undefined {
  return typeof value === "string" && /^[\x21-\x7e]{1,200}$/.test(value)
    ? value
    : undefined;
}

/**
 * A Pub/Sub subscription's project or short name: 1–255 printable ASCII
 * characters without `/` (Google's subscription names are at most 255
 * characters, its project ids shorter), else left out. A push's
 * `subscription` path and its dead-letter copy's source attributes are
 * read alike, so a name at Google's limit makes one source on both.
 */
function nameFrom(value: unknown): string | undefined {
  return typeof value === "string" &&
      /^[\x21-\x2e\x30-\x7e]{1,255}$/.test(value)
    ? value
    : undefined;
}

/**
 * The project and short name of a push's `subscription`
 * (`projects/<project>/subscriptions/<name>`), or `undefined`.
 */
function subscriptionFrom(
  value: unknown,
): { project: string; name: string } | undefined {
  const parts = typeof value === "string"
    ? value.match(/^projects\/([^/]*)\/subscriptions\/([^/]*)$/)
    : null;
  const project = nameFrom(parts?.[1]);
  const name = nameFrom(parts?.[2]);
  return project === undefined || name === undefined
    ? undefined
    : { project, name };
}

/**
 * A subscription as a log line names it: its full path, or "a
 * subscription" when the push did not say which.
 */
function subscriptionPath(
  subscription: { project: string; name: string } | undefined,
): string {
  return subscription === undefined
    ? "a subscription"
    : `projects/${subscription.project}/subscriptions/${subscription.name}`;
}

/**
 * A bridge's id of a message (`gaveUp.messageId`, a delivery's
 * `messageId`): a text of 1-200 printable ASCII characters as it is, any
 * other non-empty text as `sha256-<hex of its UTF-8>`, an empty one (or
 * none, or null) as left out (`undefined`); anything else a 400 naming `field`, and what the
 * body is (`shape`). An AMQP message_id is any short string its publisher
 * chose ("order 42", a letter past ASCII, up to 255 bytes), and Go's string
 * field without omitempty writes "" for one not set: refused, each such
 * message's deliveries and give-up stopped at the queue before the policy
 * decided, while a bridge's tests with other messages passed. The same
 * text always gives the same hash, so its count, its give-up's marks and
 * its late copies' guard hold as for any id; a log line shows no control
 * character of it.
 */
function bridgeMessageId(
  raw: unknown,
  field: string,
  shape: string,
): string | undefined {
  if (raw === undefined || raw === null || raw === "") return undefined;
  if (typeof raw === "string") {
    return idFrom(raw) ??
      `sha256-${bytesToHex(sha256(new TextEncoder().encode(raw)))}`;
  }
  throw badInput(
    "deliveries",
    `${field} must be your queue's id of the message, a text: current value is ${
      JSON.stringify(raw) ?? "undefined"
    }. ${shape}`,
  );
}

/** `n` and `noun`, made plural where `n` is not 1. */
function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/**
 * An SQS record of a Lambda event as an element of a batch: its body (the
 * queue's message text) and its ApproximateReceiveCount, which SQS gives
 * as a decimal string, as a number; an SNS event's record, its
 * notification (`Sns`), which carries no count.
 */
function sqsRecord(record: unknown): { element: unknown; count?: number } {
  if (typeof record !== "object" || record === null) return { element: record };
  const { body, attributes, Sns } = record as Record<string, unknown>;
  if (body === undefined && typeof Sns === "object" && Sns !== null) {
    return { element: Sns };
  }
  const received = typeof attributes === "object" && attributes !== null
    ? (attributes as Record<string, unknown>).ApproximateReceiveCount
    : undefined;
  return typeof received === "string" && /^[1-9][0-9]{0,8}$/.test(received)
    ? { element: body, count: Number(received) }
    : { element: body };
}

/** Whether `record` is an SNS event's record (its notification in `Sns`). */
function snsRecord(record: unknown): boolean {
  return typeof record === "object" && record !== null &&
    !("body" in record) && typeof (record as { Sns?: unknown }).Sns ===
      "object" &&
    (record as { Sns?: unknown }).Sns !== null;
}

/**
 * The message an AWS bus's envelope around a job holds (`inner`), what
 * the envelope is and how to send its message alone, or `undefined` for a
 * body that is no envelope (a delivery, a bare job). An SNS notification
 * (`{"Type":"Notification","Message":"<text>"}`) is what an SQS queue
 * subscribed to a topic holds unless the subscription's raw message
 * delivery is on; an EventBridge event (`{"detail-type":…,"detail":…}`)
 * is what a rule's target gets unless it is given an input path; a
 * CloudEvent in structured mode (`{"specversion":…,"data":…}`, or its
 * `data_base64`) is what a Dapr or Knative subscription delivers. A bridge
 * that passes its message on as it came sends the envelope.
 */
function envelopeOf(
  value: unknown,
): { inner: unknown; what: string; field: string; how: string } | undefined {
  if (
    typeof value !== "object" || value === null || Array.isArray(value) ||
    "job" in value || "intentId" in value
  ) return undefined;
  const fields = value as Record<string, unknown>;
  if (fields.Type === "Notification" && typeof fields.Message === "string") {
    return {
      inner: fields.Message,
      what: 'an SNS notification, {"Type":"Notification","Message":…}',
      field: "its Message parsed",
      how:
        `takes the delivery its Message holds, parsed, as the body, ${DELIVERY_EXAMPLE}: turn on raw message delivery on the SQS queue's subscription to the topic, or have the bridge send the Message parsed`,
    };
  }
  if (
    typeof fields.specversion === "string" &&
    ("data" in fields || "data_base64" in fields)
  ) {
    let inner = fields.data;
    if (!("data" in fields)) {
      try {
        inner = decodeBase64("deliveries", fields.data_base64, "'data_base64'");
      } catch {
        inner = undefined;
      }
    }
    return {
      inner,
      what: 'a CloudEvent in structured mode, {"specversion":…,"data":…}',
      field: "its data",
      how:
        `takes the delivery its data holds as the body, ${DELIVERY_EXAMPLE}: have the bridge send the event's data, or the event in binary mode (its data as the body, its attributes as ce- headers)`,
    };
  }
  if ("detail" in fields) {
    return {
      inner: fields.detail,
      what: 'an EventBridge event, {"detail-type":…,"detail":…}',
      field: "its detail",
      how:
        `takes the delivery its detail holds as the body, ${DELIVERY_EXAMPLE}: give the rule's target the input path $.detail, or have the bridge send the detail`,
    };
  }
  return undefined;
}

/**
 * The job a delivery's `job` holds where it is an envelope
 * ({@linkcode envelopeOf}) or its JSON text (a bridge that put the SQS
 * body of a queue subscribed to an SNS topic in `{"job": …}`), with the
 * envelope; else `undefined`.
 */
function jobInEnvelope(
  value: unknown,
): { job: unknown; what: string; field: string } | undefined {
  if (typeof value === "string") {
    try {
      value = JSON.parse(
        value.charCodeAt(0) === 0xfeff ? value.slice(1) : value,
      );
    } catch {
      return undefined;
    }
  }
  const envelope = envelopeOf(value);
  const seen = envelope === undefined ? undefined : batchJob(envelope.inner);
  return envelope === undefined || seen === undefined
    ? undefined
    : { job: seen.job, what: envelope.what, field: envelope.field };
}

/**
 * The job an element of a batch holds, with the count it carries: a
 * delivery's or give-up's `job`, or a bare job (the element without a
 * bridge's fields), as an object or its JSON text, or inside an SNS
 * notification or an EventBridge event ({@linkcode envelopeOf}; at most
 * two, an event sent through a topic); else `undefined`. A job that
 * cannot be read but names its intent (`{"intentId":"pi_1","kind":
 * "Settle"}`) is one too, with why it cannot be read (`unread`), as the
 * route keeps it sent alone: dropped, a bridge that takes a 4xx as final
 * left its intent with no job and no letter. One that names no intent (or
 * names it only in a text of a misspelt job) is not: no intent is guessed.
 */
function batchJob(
  element: unknown,
  envelopes = 0,
):
  | {
    job: unknown;
    attempt: unknown;
    delivery: unknown;
    gaveUp: unknown;
    unread?: string;
  }
  | undefined {
  let value = element;
  if (typeof value === "string") {
    try {
      value = JSON.parse(
        value.charCodeAt(0) === 0xfeff ? value.slice(1) : value,
      );
    } catch {
      return undefined;
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return undefined;
  }
  const envelope = envelopeOf(value);
  if (envelope !== undefined) {
    return envelopes < 2 ? batchJob(envelope.inner, envelopes + 1) : undefined;
  }
  const fields = value as Record<string, unknown>;
  const { job: wrapped, delivery, messageId: _id, gaveUp, ...bare } = fields;
  const job = "job" in fields ? wrapped : bare;
  let unread: string | undefined;
  try {
    parseJob(job);
  } catch (error) {
    if (!isIntentId(intentIdSeen(job))) return undefined;
    unread = (error as Error).message;
  }
  return {
    job,
    attempt: attemptSeen(delivery, gaveUp ?? undefined),
    delivery,
    gaveUp: gaveUp ?? undefined,
    ...(unread === undefined ? {} : { unread }),
  };
}

/**
 * The count a bridge's body that is kept as a dead letter carries, as
 * sent (the letter takes it if it is a count, else 1): a delivery's
 * `delivery`, a give-up's `gaveUp.deliveries` (the deliveries its queue
 * made, as QStash's failure callback's letter has its retries), not one.
 */
function attemptSeen(delivery: unknown, gaveUp: unknown): unknown {
  if (gaveUp === undefined) return delivery;
  return typeof gaveUp === "object" && gaveUp !== null
    ? (gaveUp as Record<string, unknown>).deliveries
    : undefined;
}

/**
 * The store's count of a bridge's message that carries no count of its own
 * (`POST /v1/deliveries` with `messageId` and no `delivery`):
 * `generic/<jobId>/message/<id>`, per job as the message's give-up marks
 * are (a bridge may use an id again for another job). No job id has this
 * shape (an intent id holds no `/`).
 */
function bridgeCountKey(jobId: string, messageId: string): string {
  return `generic/${jobId}/message/${messageId}`;
}

/**
 * The end of a delivery's log line naming the queue's message, as
 * ` message <queue>/<id>` (its id, else its dead-letter id), or nothing.
 * Ids are checked printable ASCII without spaces (see `idFrom`).
 */
function messageNote(
  message: QueueIds | undefined,
  pushId?: string,
): string {
  const id = pushId ?? message?.messageId ?? message?.dlqId;
  if (id === undefined) return "";
  return ` message ${message?.queue ?? "pubsub"}/${id}`;
}

/**
 * Refuses an ops token (`option`: `opsToken` or `opsTokenNext`, the
 * service's `setting`) that is no string, empty, short, not what a header
 * carries, or one of `deps`' signing secrets. Names the option, never the
 * value.
 */
function checkOpsToken(
  token: string | undefined,
  option: "opsToken" | "opsTokenNext",
  setting: "OPS_TOKEN" | "OPS_TOKEN_NEXT",
  deps: AppDeps,
): void {
  const unset = option === "opsToken"
    ? "to keep the ops routes closed"
    : "while no rotation is under way";
  if (token !== undefined && typeof token !== "string") {
    // By its type alone: a token is never shown.
    throw new TypeError(
      `Cannot create app as '${option}' must be a string: current value is ${
        token === null
          ? "null"
          : `a${typeof token === "object" ? "n" : ""} ${typeof token}`
      }. Set it to a long random secret, or leave it out ${unset}`,
    );
  }
  if (token === "") {
    // An empty token would let "Bearer " through.
    throw new TypeError(
      `Cannot create app as '${option}' is empty: set it to a long random secret, or leave it out ${unset}`,
    );
  }
  if (token !== undefined && token.length < MIN_SECRET) {
    throw new TypeError(
      `Cannot create app as '${option}' is ${token.length} characters long: use a random token of at least ${MIN_SECRET} (the service's ${setting} has the same rule)`,
    );
  }
  // A header loses the spaces and line breaks at its ends and carries
  // bytes: such a token (one read from a file with its line break) would
  // match no call, and every ops call would be refused.
  if (
    token !== undefined &&
    !/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(token)
  ) {
    // Never echoed, not even in part.
    throw new TypeError(
      `Cannot create app as '${option}' is not what an Authorization header carries: it starts or ends with a space or line break, or holds a character outside printable ASCII, so every ops call would be refused. Set it as clients send it (the service's ${setting} takes A-Z a-z 0-9 - . _ ~ + / and = at the end)`,
    );
  }
  const reused = token === undefined ? undefined : ([
    ["webhookSecret", deps.webhookSecret],
    ["webhookSecretNext", deps.webhookSecretNext],
    ["qstash.currentSigningKey", deps.qstash?.currentSigningKey],
    ["qstash.nextSigningKey", deps.qstash?.nextSigningKey],
  ] as const).find(([, secret]) => secret === token)?.[0];
  if (reused !== undefined) {
    // The bearer token opens the routes that resolve payments: a bridge
    // holding the HMAC secret, or whoever reads QStash's console, must not.
    throw new TypeError(
      `Cannot create app as '${option}' is '${reused}': whoever holds a signing secret would also hold the ops routes, which resolve payments and redrive jobs. Give them a token of their own (the service's ${setting} has the same rule)`,
    );
  }
}

/**
 * Builds the webhook: delivery routes for QStash, Pub/Sub and a generic
 * HMAC-signed route, ops routes, and `/healthz`. Every answer is JSON (a
 * `application/problem+json` for errors, RFC 9457), except Pub/Sub's 204.
 * A request that is unauthenticated or malformed touches nothing, except
 * an authenticated queue message that cannot be read as a job (malformed,
 * or over the body limit): it is kept as a dead letter, then a Pub/Sub
 * push acked (a 400 would have Pub/Sub redeliver it for days) and a
 * QStash message answered 489 (no retry). A body that does not arrive
 * within `bodyTimeoutMs` is refused 408, nothing written.
 *
 * @param deps The store, the Sender, the policy, the clock, the source of
 * randomness and the keys of each route.
 * @returns The Hono app; serve `app.fetch`.
 * @throws {RangeError} If the policy, `leaseMs`, `maxBodyBytes` or
 * `bodyTimeoutMs` is invalid, or `leaseMs` is under twice the `timeoutMs`
 * the Sender declares (`HttpSender` does).
 * @throws {TypeError} If a route's keys are empty, short or incomplete: a
 * `webhookSecret`, `opsToken` or `opsTokenNext` empty or under 16
 * characters (the service's rule), an ops token no header can carry (a
 * space or line break at an end, a character outside printable ASCII), a QStash
 * signing key empty or under 16 characters, or a local QStash's published
 * key (which anyone can sign with) for a `url` off this machine, a QStash
 * `url` that is not an http(s) URL, `pubsub` without its
 * `serviceAccount` or `audience`, `pubsubDeadLetter` with `pubsub`'s
 * audience, an ops token equal to a signing secret, or `opsTokenNext`
 * without `opsToken`; or if
 * `insecureDev` is not a boolean.
 *
 * @example Deliver a signed job on the generic route
 * ```ts
 * import { createApp } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "created" });
 * const now = () => 1_764_504_000_000; // the app's clock, in milliseconds
 * const app = createApp({
 *   store,
 *   sender: new ScriptedSender({}),
 *   webhookSecret: "a-secret-of-16-chars",
 *   now,
 *   random: () => 0,
 * });
 * const body = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" }, delivery: 1 });
 * // X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<raw body>">
 * const t = Math.floor(now() / 1000);
 * const key = await crypto.subtle.importKey(
 *   "raw", new TextEncoder().encode("a-secret-of-16-chars"), { name: "HMAC", hash: "SHA-256" }, false, ["sign"],
 * );
 * const mac = new Uint8Array(
 *   await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${t}.${body}`)),
 * );
 * const signature = `t=${t},v1=` + Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
 *
 * const res = await app.request("/v1/deliveries", {
 *   method: "POST",
 *   body,
 *   headers: { "content-type": "application/json", "x-signature": signature },
 * });
 * assert.equal(res.status, 503);
 * assert.equal(res.headers.get("retry-after"), "3");
 * assert.deepEqual(await res.json(), {
 *   outcome: "retry",
 *   job: "pi_0001/settle",
 *   delivery: 1,
 *   reason: "not authorized yet",
 *   delayMs: 2500,
 * });
 * ```
 */
export function createApp(deps: AppDeps): WebhookApp {
  // A misspelt option would fall back to its default: `opsTokn` would
  // close the ops routes, `maxBodyByte` keep the default limit.
  assertOptionNames("create app", deps, APP_OPTIONS, {
    example: "{ store, sender, webhookSecret }",
  });
  // Checked here, not at the first redrive: a misspelt `publish` would
  // otherwise be a 500 on an operator's redrive, long after the deploy.
  assertOptionNames(
    "create app with this redriveTo",
    deps.redriveTo,
    REDRIVE_OPTIONS,
    {
      optional: true,
      example: "{ publish }",
    },
  );
  const {
    store,
    insecureDev = false,
    maxBodyBytes = 64 * 1024,
    bodyTimeoutMs = 30_000,
    log: sink = () => {},
    now: clock = Date.now,
    random = Math.random,
  } = deps;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new RangeError(
      `Cannot create app as 'maxBodyBytes' must be an integer >= 1: current value is ${
        show(maxBodyBytes)
      }`,
    );
  }
  if (
    !Number.isSafeInteger(bodyTimeoutMs) || bodyTimeoutMs < 1 ||
    bodyTimeoutMs > MAX_TIMER_MS
  ) {
    throw new RangeError(
      `Cannot create app as 'bodyTimeoutMs' must be an integer from 1 to ${MAX_TIMER_MS} (milliseconds): current value is ${
        show(bodyTimeoutMs)
      }`,
    );
  }
  /** Every body read's deadline: one timer for the reads in flight. */
  const within: Within = bodyDeadlines(
    bodyTimeoutMs,
    () => bodyTimedOut(bodyTimeoutMs),
  );
  if (typeof insecureDev !== "boolean") {
    // Truthy is not enough: a setting read as text ("false", "0") would
    // open every unconfigured route, the ops routes among them.
    throw new TypeError(
      `Cannot create app as 'insecureDev' must be true or false: current value is ${
        show(insecureDev)
      }. Leave it out (or false) outside local development`,
    );
  }
  if (typeof sink !== "function") {
    throw new TypeError(
      `Cannot create app as 'log' must be a function that takes a line, such as (line) => console.log(line): current value is ${
        show(sink)
      }`,
    );
  }
  // One line each, whatever a client put in the text a line quotes.
  const log = (line: string): void => sink(oneLine(line));
  const relayer: Relayer = createRelayer(relayerOptions(deps));
  // How long a send may run, in any instance: its lease, which every send
  // must end within (the relayer's default when none is given).
  const sendBoundMs = deps.leaseMs ?? DEFAULT_LEASE_MS;
  const { monotonicNow = () => performance.now() } = deps;
  if (typeof monotonicNow !== "function") {
    throw new TypeError(
      `Cannot create app as 'monotonicNow' must be a function returning milliseconds: current value is ${
        show(monotonicNow)
      }. Leave it out outside tests (it defaults to performance.now())`,
    );
  }
  /** Write-aheads of sends with no record, by when this process saw them. */
  const unrecordedFor = writeAheadsSeen(() => {
    // A reading that is not a number would end every wait at once (a
    // comparison with NaN is false): fail the request instead.
    const at = monotonicNow();
    if (typeof at !== "number" || !Number.isFinite(at)) {
      throw new TypeError(
        `Cannot read the monotonic clock as 'monotonicNow' returned ${
          show(at)
        }, not a finite number of milliseconds`,
      );
    }
    return at;
  });
  // Checked on every read, as the relayer's is: the routes write the time
  // too (a count, a replay record, an operator's resolution), and a store
  // refusing it would name a field, not the clock.
  const now = checkedClock("answer a request", clock);
  const verifyQStash = deps.qstash
    ? qstashVerifier(deps.qstash, now)
    : undefined;
  const verifyPubSub = deps.pubsub
    ? pubsubVerifier(deps.pubsub, now)
    : undefined;
  if (deps.qstash !== undefined && /[?#]/.test(deps.qstash.url)) {
    // The failure callback's URL is this one with /failed after it: a
    // query or fragment would come before it ("…?k=v/failed"), a URL
    // no QStash calls, and every give-up would be refused, its intent
    // stranded. Named without them: they may carry a token.
    throw new TypeError(
      `Cannot create app as 'qstash.url' carries a query or fragment: current value is ${
        urlSaid(deps.qstash.url)
      }. POST /v1/qstash/failed checks QStash's failure callback as signed for this URL with /failed after it, which a query or fragment would cut in two: set it to the URL QStash calls without them (the signature, not the URL, proves a delivery), and publish with that URL and /failed as the failure callback`,
    );
  }
  // QStash signs its failure callback for the callback's own URL.
  const verifyQStashFailed = deps.qstash
    ? qstashVerifier({ ...deps.qstash, url: `${deps.qstash.url}/failed` }, now)
    : undefined;
  const verifyPubSubDeadLetter = deps.pubsubDeadLetter
    ? pubsubVerifier(deps.pubsubDeadLetter, now)
    : undefined;
  if (
    deps.pubsub !== undefined && deps.pubsubDeadLetter !== undefined &&
    deps.pubsubDeadLetter.audience === deps.pubsub.audience
  ) {
    // The audience is all that tells the two subscriptions' tokens apart
    // (one service account pushes both), and a push token lives an hour.
    throw new TypeError(
      "Cannot create app as 'pubsubDeadLetter.audience' is 'pubsub.audience': a token Google issues for the push subscription would also open POST /v1/pubsub/dead-letter, which poisons the job it names. Give the dead-letter push subscription its own audience (its push endpoint's URL, such as https://relayer.example.com/v1/pubsub/dead-letter)",
    );
  }
  const { webhookSecret, opsToken, opsTokenNext } = deps;
  checkOpsToken(opsToken, "opsToken", "OPS_TOKEN", deps);
  checkOpsToken(opsTokenNext, "opsTokenNext", "OPS_TOKEN_NEXT", deps);
  if (opsToken === undefined && opsTokenNext !== undefined) {
    throw new TypeError(
      "Cannot create app as 'opsTokenNext' is set without 'opsToken': set the token the clients send now as opsToken, and the one they move to as opsTokenNext",
    );
  }
  const opsTokenMatches = opsToken === undefined ? undefined : tokenMatcher(
    opsTokenNext === undefined ? [opsToken] : [opsToken, opsTokenNext],
  );
  if (webhookSecret === undefined && deps.webhookSecretNext !== undefined) {
    throw new TypeError(
      "Cannot create app as 'webhookSecretNext' is set without 'webhookSecret': set the secret the senders sign with now as webhookSecret, and the one they move to as webhookSecretNext",
    );
  }
  const verifyHmac = webhookSecret === undefined
    ? undefined
    : hmacVerifier(webhookSecret, now, deps.webhookSecretNext);

  /** Refuses a route whose keys are missing (503), unless in insecure dev mode. */
  function requireConfigured(
    configured: boolean,
    route: string,
    settings: string,
    option: keyof AppDeps,
  ): void {
    if (!configured && !insecureDev) {
      const detail = `${route} ${
        route.endsWith("routes") ? "are" : "is"
      } off: set ${settings} (in code, createApp's '${option}'), or start with RELAYER_INSECURE_DEV=1 (insecureDev) for local development only.`;
      throw new NotConfigured(
        problem(503, "not-configured", "Route not configured", detail),
        GIVE_UP_ROUTES.has(route)
          ? `${detail} The queue's give-up is refused, and resolves nothing: once the queue stops calling, its intent is stranded.`
          : detail,
      );
    }
  }

  /**
   * A 401 answering `detail`; the log says `hint` too, if any, and paces
   * its line by `kind`.
   */
  function unauthorized(
    detail: string,
    hint?: string,
    kind: RefusalKind = "unverified",
  ): Refusal {
    return new Refusal(
      problem(401, "unauthorized", "Unauthorized", detail, {
        "www-authenticate": 'Bearer realm="relayer"',
      }),
      hint === undefined ? detail : `${detail} ${hint}`,
      kind,
    );
  }

  /** A signed request seen before: refused, and nothing was done. */
  function replayed(): Refusal {
    return unauthorized(
      "This signed request was already delivered: a replay is refused. Each delivery must carry a fresh signature.",
      undefined,
      "replay",
    );
  }

  function requireOps(c: Context): void {
    requireConfigured(
      opsToken !== undefined,
      "The ops routes",
      "OPS_TOKEN",
      "opsToken",
    );
    if (opsTokenMatches === undefined) return;
    // The scheme is case-insensitive (RFC 9110 §11.1): "bearer" is Bearer.
    const header = c.req.header("authorization") ?? "";
    const token = /^Bearer +(.*)$/i.exec(header)?.[1];
    if (token === undefined || !opsTokenMatches(token)) {
      throw unauthorized(
        "Send the ops token as 'Authorization: Bearer <OPS_TOKEN>'.",
      );
    }
  }

  /**
   * The answer to a delivery (or, `gaveUp`, a queue's give-up) that ended
   * in `outcome`. A give-up's retry (busy) carries no `Retry-After`, as a
   * give-up the store failed does not: busy may be another database
   * session's lock or its statements cancelled, as long as an outage, and
   * asked back at the policy's pace QStash's failure callback spent its
   * retries in minutes, its intent left unresolved.
   */
  async function answer(
    route: Route,
    job: Job,
    outcome: Outcome,
    gaveUp = false,
  ): Promise<Response> {
    const status = STATUS[route][outcome.action];
    const body: DeliveryAnswer = {
      outcome: outcome.action,
      job: jobIdOf(job),
      delivery: outcome.delivery,
      reason: outcome.reason,
      ...(outcome.action === "retry" ? { delayMs: outcome.delayMs } : {}),
      ...(outcome.action === "poison"
        ? { resolution: outcome.resolution }
        : {}),
      ...(route === "pubsub" && outcome.action === "retry"
        ? {
          note:
            "Pub/Sub waits by its subscription's retry policy; delayMs is what this policy asked for",
        }
        : {}),
    };
    if (status === 204) {
      return await Promise.resolve(new Response(null, { status }));
    }
    const headers: Record<string, string> = {
      "content-type": "application/json",
    };
    if (outcome.action === "retry" && route !== "pubsub" && !gaveUp) {
      headers["retry-after"] = retryAfter(
        outcome.delayMs,
        ROUTE_RETRY_AFTER_S[route],
      );
    }
    return jsonAnswer(body, status, headers);
  }

  /**
   * What failed for a reason of ours (the store: the Sender's failures are
   * the policy's to decide): a log line naming it, and a 503 the queue
   * retries. Nothing was decided. While the store refuses a write (a probe,
   * cached a second), or its schema is not migrated (no retry mends that
   * until someone runs the migration), there is no `Retry-After`: the queue
   * waits as its own backoff says. QStash's grows to a day, so its retries,
   * and its failure callback's, outlast an outage of days; a fixed short
   * wait would spend them all in minutes, and leave the intent to a
   * give-up. A delivery whose store takes the probe's write (a blip) is
   * asked back after the policy's delay for its number, jittered, as a
   * retry the policy decided would be, and not a day later. A delivery
   * with no number (counted in the store, which failed the count or a call
   * after it: its number is not known here) and a give-up get the queue's
   * own backoff: a give-up is the last word.
   * `detail` says so to the queue's operator (what could not be done, then
   * what the queue does), and names the migration where the store's schema
   * is behind; the error stays in the log.
   */
  async function failedUnexpectedly(
    what: string,
    error: unknown,
    detail: readonly [head: string, then: string],
    delivery?: { readonly route: Route; readonly n: number | undefined },
    seen = "",
  ): Promise<Response> {
    log(`worker  ${what} unexpectedly: ${describeError(error)}${seen}`);
    const n = delivery?.route === "pubsub" ? undefined : delivery?.n;
    // A schema behind is an outage no retry mends until someone migrates
    // it, whatever the probe's write finds: the queue's own backoff then.
    const blip = n !== undefined && !isSchemaBehind(error) &&
      await storeWrites();
    const [head, then] = detail;
    const named = namedCause(error);
    return problem(
      503,
      "delivery-failed",
      "Delivery failed",
      named
        ? `${head} as ${named.as}. ${named.todo}; ${then}.`
        : `${head} (the store failed unexpectedly); ${then}.`,
      blip
        ? {
          "retry-after": retryAfter(
            jitter(backoff(n, relayer.policy), relayer.policy.jitter, random),
            ROUTE_RETRY_AFTER_S[delivery!.route],
          ),
        }
        : {},
    );
  }

  /**
   * QStash tokens this app saw whose record the store could not take (it
   * was down): key → when the record would have expired, by `now`. Such a
   * token sent again to this instance, once the store is back, is a
   * replay as a recorded one is. At most {@linkcode UNRECORDED_TOKENS},
   * the oldest forgotten first.
   */
  const unrecorded = new Map<string, number>();

  /**
   * Records `claim` as used, if it is not yet and the store takes the
   * write; if the store fails it, remembers it in this instance
   * (`unrecorded`). Nothing is thrown: the delivery's answer says what
   * failed.
   */
  async function useUp(claim: ReplayClaim): Promise<void> {
    let at: number;
    try {
      at = now();
    } catch {
      return; // A clock that cannot be read: the answer says so.
    }
    try {
      await store.admit({ claim: { ...claim, now: at }, now: at });
      unrecorded.delete(claim.key);
    } catch (error) {
      if (error instanceof ReplayError) return; // already on record
      remember(claim, at);
    }
  }

  /** Remembers `claim` in this instance as used (`unrecorded`), at `at`. */
  function remember(claim: ReplayClaim, at: number): void {
    for (const [key, until] of unrecorded) {
      if (until <= at || unrecorded.size >= UNRECORDED_TOKENS) {
        unrecorded.delete(key);
      } else break;
    }
    unrecorded.set(claim.key, claim.expiresAt);
  }

  /**
   * Throws the replay refusal if `claim` is a token whose delivery this
   * instance answered while the store could not record it; it is recorded
   * now, if the store takes it.
   */
  async function refuseUnrecorded(claim: ReplayClaim): Promise<void> {
    const until = unrecorded.get(claim.key);
    if (until === undefined) return;
    if (until <= now()) {
      unrecorded.delete(claim.key);
      return;
    }
    await useUp(claim);
    throw replayed();
  }

  /**
   * Runs a delivery; an unexpected failure (store down) is a 503 the queue
   * retries. `claim` is the verified request's replay claim (QStash's
   * `jti`, the generic route's `v1`; none for Pub/Sub, whose token does not
   * cover the body, nor for an unsigned insecure-dev delivery).
   * `notRead`, given only for a queue's count that could not be read, is
   * told the delivery number the store counted, for its log line.
   */
  async function deliver(
    route: Route,
    job: Job,
    delivery: number | undefined,
    claim: ReplayClaim | undefined,
    countAs?: string,
    message?: QueueIds,
    pushId?: string,
    notRead?: (delivery: number) => void,
  ): Promise<Response> {
    // The queue's own id of the message, so a line can be found from the
    // queue's console (and a give-up's repeat told from a late copy).
    const seen = messageNote(message, pushId);
    let outcome: Outcome;
    try {
      // The replay record rides in the delivery's first write, and so do
      // the message's give-up marks: a late copy sends nothing.
      const claimed = claim ? { ...claim, now: now() } : undefined;
      outcome = await relayer.deliver(job, delivery, {
        ...(claimed ? { claim: claimed } : {}),
        ...(countAs === undefined ? {} : { countAs }),
        ...(message === undefined ? {} : { message }),
      });
      // Answered busy with its record busy too, a QStash token is on no
      // record: sent again once the store is back with Upstash-Retried
      // raised, it would be taken as a later delivery, dropping an
      // authorized payment's job unsent or sending a paid one to review.
      // Remembered as a failed delivery's is, with no write more. (The
      // generic route signs its number; a copy of a request counted in
      // the store was not counted, the count's write being the busy one.)
      if (
        route === "qstash" && claim !== undefined && claimed !== undefined &&
        leftUnrecorded(claimed)
      ) {
        remember(claim, claimed.now);
      }
    } catch (error) {
      if (error instanceof ReplayError) throw replayed();
      // QStash's token does not sign Upstash-Retried or Upstash-Message-Id,
      // and QStash signs each retry afresh: a token whose delivery failed
      // before its record landed (the store's look failed) is used up now,
      // if the store takes the write, so that whoever saw the request
      // cannot send it again with a raised count (a job dropped unsent, a
      // payment to review). A store still down cannot record it.
      if (route === "qstash" && claim !== undefined) {
        await useUp(claim);
      }
      return await failedUnexpectedly(
        `${jobIdOf(job).padEnd(16)} failed`,
        error,
        ["The delivery could not finish", "the queue will redeliver it"],
        { route, n: delivery },
        seen,
      );
    }
    notRead?.(outcome.delivery);
    log(`worker  ${formatOutcome(job, outcome)}${seen}`);
    return answer(route, job, outcome);
  }

  const app = new Hono();

  // A queue's envelope carries the job base64-encoded (a Pub/Sub push,
  // QStash's failure callback): it gets room for any job the direct
  // routes take, or a job they accepted would strand at its give-up.
  const envelopeBytes = Math.ceil(maxBodyBytes / 3) * 4 +
    ENVELOPE_HEADROOM_BYTES;
  /** The most bytes the body of a request to this route may have. */
  const limitOf = (c: Context): number =>
    c.req.path === "/v1/pubsub/dead-letter"
      ? envelopeBytes + DEAD_LETTER_COPY_BYTES
      : c.req.path === "/v1/deliveries"
      ? maxBodyBytes + GAVE_UP_HEADROOM_BYTES
      : ENVELOPE_ROUTES.has(c.req.path)
      ? envelopeBytes
      : maxBodyBytes;
  // An ops answer holds a payment (an intent, its hold and tx hashes, a
  // dead letter): no proxy or browser may keep it, whatever its status.
  // A shared cache should not keep an answer to a request with
  // Authorization anyway (RFC 9111 §3.5), but a CDN rule that caches
  // everything, or a browser's own cache, would.
  const noStore: MiddlewareHandler = async (c, next) => {
    await next();
    c.res.headers.set("cache-control", "no-store");
  };
  for (const path of OPS_PATHS) app.use(path, noStore);
  // Hono answers HEAD by running GET and dropping the body, and a runtime
  // then counts the body it was handed: Content-Length: 0. A HEAD answer's
  // Content-Length is its GET's (RFC 9110 §9.3.2), so it is set here from
  // the body about to be dropped: only on the GET routes' paths, only for
  // HEAD (a GET pays one comparison), and in the 404 and 405 handlers.
  const headLength: MiddlewareHandler = async (c, next) => {
    await next();
    if (c.req.method === "HEAD") c.res = await withLength(c.res);
  };
  for (const path of HEAD_PATHS) app.use(path, headLength);
  /** The handlers that answer a known path's wrong method (405). */
  const wrongMethod = new Set<unknown>();
  /**
   * What a route that reads a body checks from its headers alone before
   * it reads it, by `<method> <pattern>`. The body limit runs it too,
   * ahead of a 413 by Content-Length (off the common path: only for a
   * body over the limit), so a request is refused for its headers (503
   * for a route that is off, 401) whether its body is framed by its
   * length or chunked.
   */
  const headerChecks = new Map<string, (c: Context) => void>([
    ["POST /v1/deliveries", (c) => refuseUntimely(deliveriesHeaders(c))],
    ["POST /v1/qstash", (c) => void qstashHeaders(c, "/v1/qstash")],
    [
      "POST /v1/qstash/failed",
      (c) => void qstashHeaders(c, "/v1/qstash/failed"),
    ],
    ["POST /v1/intents", requireOps],
    ["POST /v1/intents/:id/resolve", requireOps],
    ["POST /v1/jobs", requireOps],
  ]);
  app.use("/v1/*", async function limitBody(c, next) {
    // A body its Content-Length says is too long is refused unread. One
    // without (chunked) is counted as its route reads it (bytesOf), after
    // the route checked the headers: read here, ahead of any check, a body
    // held back kept a forged request waiting for good.
    // A Pub/Sub push is told by its route, once its token is checked
    // (from its headers alone): one over the limit is acked, not refused.
    // So is a QStash message, once its token is checked but for the body's
    // hash: one over the limit is kept as a dead letter (489), not refused.
    // Refused here, it is logged under the route it would have reached
    // (the first pattern matched after this one, as Hono answers by the
    // first), never the path as sent.
    // A route that reads no body (a redrive) is not refused for one, and
    // a request no route answers is told so (404, or 405 for a known path
    // with the wrong method), not that its body is too large: a client on
    // a wrong URL or method must learn that. A route's checks of its
    // headers (headerChecks) run first, as they do for a body counted as
    // it is read: headers before body, a 401 or a 503 either way.
    const length = c.req.header("content-length");
    if (
      length !== undefined && c.req.header("transfer-encoding") === undefined &&
      Number.parseInt(length, 10) > limitOf(c) &&
      !PUSH_ROUTES.has(c.req.path) &&
      !(QSTASH_ROUTES.has(c.req.path) && verifyQStash !== undefined)
    ) {
      // Looked up only for a body over the limit, off the common path.
      const route = matchedRoutes(c).find((route) =>
        route.handler !== limitBody && route.handler !== noStore &&
        route.handler !== headLength
      );
      if (
        route === undefined || wrongMethod.has(route.handler) ||
        UNREAD_BODY_ROUTES.has(`${route.method} ${route.path}`)
      ) return await next();
      const checkHeaders = headerChecks.get(`${route.method} ${route.path}`);
      try {
        checkHeaders?.(c);
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        logRefusal(c, error, route.path);
        return error.response;
      }
      // A delivery's limit, not the room a bridge's give-up has past it.
      const refusal = tooLarge(
        route.path === "/v1/deliveries" ? maxBodyBytes : limitOf(c),
        Number.parseInt(length, 10),
      );
      logRefusal(c, refusal, route.path);
      return refusal.response;
    }
    return await next();
  });

  app.get("/healthz", () => jsonAnswer({ status: "ok" }));

  /**
   * A probe of the store, run at most once per `READY_CACHE_MS` (one
   * probe serves every call meanwhile, so an open route cannot be made to
   * load the store), answering whether `run` finished within
   * `READY_WAIT_MS`. `failed` says why not, for the log: on the first
   * failure of an outage, when the error changes, and at most once a
   * `PROBE_LOG_INTERVAL_MS` otherwise, with how many failed unsaid
   * (`note`), so a probe polled every second through an outage of an hour
   * writes a few dozen lines, not thousands. Those unsaid failed as the
   * last line said: on a new error the note says so, or an operator would
   * count them as failures of the new one. `recovered` is called once
   * when a probe passes after one failed, with how long since the first
   * failure, so the log says when an outage ended, not only that it began.
   */
  function cachedProbe(
    run: () => Promise<unknown>,
    failed: (error: unknown, note: string) => void,
    recovered: (downMs: number) => void,
  ): () => Promise<boolean> {
    let last: { at: number; ok: Promise<boolean> } | undefined;
    /** What a clock stepped back behind a probe or a line may end at once. */
    const probeStepBack = stepBackPace();
    const lineStepBack = stepBackPace();
    /** When the first failed probe of the outage now running began. */
    let failingSince: number | undefined;
    /** The last failure logged, and how many failed unsaid since. */
    let said: { at: number; text: string; more: number } | undefined;
    /** Probes in the order they began: one that settles after a later one (a hang) says nothing of now. */
    let begun = 0;
    let counted = 0;
    const settled = (
      probe: number,
      at: number,
      ok: boolean,
      error?: unknown,
    ) => {
      if (probe < counted) return;
      counted = probe;
      if (ok) {
        if (failingSince !== undefined) {
          recovered(Math.max(0, at - failingSince));
        }
        failingSince = undefined;
        said = undefined;
        return;
      }
      failingSince ??= at;
      const text = describeError(error);
      if (
        said !== undefined && said.text === text &&
        (at >= said.at
          ? at - said.at < PROBE_LOG_INTERVAL_MS
          : !lineStepBack(PROBE_LOG_INTERVAL_MS))
      ) {
        said.more++;
        return;
      }
      failed(
        error,
        said === undefined || said.more === 0
          ? ""
          : said.text === text
          ? ` (and ${said.more} more probe(s) since the last line)`
          : ` (after ${said.more} more probe(s) that failed as the last line said)`,
      );
      said = { at, text, more: 0 };
    };
    return () => {
      const at = now();
      // Within the second after the last probe; a clock stepped back is
      // not, once a second at most (stepBackPace: a clock that flaps back
      // and forth would otherwise probe at every call).
      if (
        last !== undefined &&
        (at >= last.at
          ? at - last.at < READY_CACHE_MS
          : !probeStepBack(READY_CACHE_MS))
      ) {
        return last.ok;
      }
      const probe = ++begun;
      const ok = (async () => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        try {
          await Promise.race([
            run(),
            new Promise((_, reject) => {
              timer = setTimeout(
                () => reject(new Error(`no answer within ${READY_WAIT_MS}ms`)),
                READY_WAIT_MS,
              );
            }),
          ]);
          settled(probe, at, true);
          return true;
        } catch (error) {
          settled(probe, at, false, error);
          return false;
        } finally {
          if (timer !== undefined) clearTimeout(timer);
        }
      })();
      last = { at, ok };
      return ok;
    };
  }

  /** Whether the last read probe failed on a schema not migrated (`/readyz` says so). */
  let readBehind = false;
  /** Whether the store answers a read (`/readyz`). */
  const storeAnswers = cachedProbe(
    async () => {
      try {
        await store.getIntent(READY_PROBE_ID);
        readBehind = false;
      } catch (error) {
        readBehind = isSchemaBehind(error);
        throw error;
      }
    },
    (error, note) =>
      log(
        `relayer not ready: the store failed a read: ${
          describeError(error)
        }${note}`,
      ),
    (downMs) =>
      log(
        `relayer ready again: the store answers a read (it failed for ${
          formatDuration(downMs)
        })`,
      ),
  );

  /** Whether the last write probe was refused by a read-only database (`/readyz` says so). */
  let writeReadOnly = false;
  /**
   * Whether the store takes a write: a store that answers reads may still
   * refuse writes (a primary gone read-only, a full disk), and for a failed
   * delivery that is an outage, not a blip.
   */
  const storeWrites = cachedProbe(
    async () => {
      try {
        await store.admit({ count: WRITE_PROBE_COUNT, now: now() });
        writeReadOnly = false;
      } catch (error) {
        writeReadOnly = isReadOnly(error);
        throw error;
      }
    },
    (error, note) =>
      log(
        `relayer not ready: the store refused a write: ${
          describeError(error)
        }${note}`,
      ),
    (downMs) =>
      log(
        `relayer ready again: the store takes a write (it refused for ${
          formatDuration(downMs)
        })`,
      ),
  );

  app.get("/readyz", async () => {
    // A read, then a write: a store that answers reads but refuses
    // writes (a primary gone read-only) fails every delivery too.
    const reads = await storeAnswers();
    if (reads && await storeWrites()) return jsonAnswer({ status: "ready" });
    return problem(
      503,
      "not-ready",
      "Not ready",
      readBehind
        ? `The store's read failed as ${SCHEMA_BEHIND}: deliveries would be answered 503 now. ${MIGRATE}.`
        : reads && writeReadOnly
        ? `The store's write failed as ${READ_ONLY}: deliveries would be answered 503 now. ${WRITABLE}.`
        : "The store did not answer a read, or refused a write (the relayer's log says why): deliveries would be answered 503 now.",
      { "retry-after": "5" },
    );
  });

  /**
   * A QStash route's checks of its headers: configured, and a signature
   * not forged on its face (refused before the body is read). Returns the
   * signature.
   */
  function qstashHeaders(
    c: Context,
    path: "/v1/qstash" | "/v1/qstash/failed",
  ): string | undefined {
    const verify = path === "/v1/qstash" ? verifyQStash : verifyQStashFailed;
    requireConfigured(
      verify !== undefined,
      `POST ${path}`,
      "QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY and PUBLIC_URL",
      "qstash",
    );
    const signature = c.req.header("upstash-signature");
    const forged = verify?.precheck(signature);
    if (forged) throw unauthorized(forged.detail, forged.hint, forged.kind);
    return signature;
  }

  app.post("/v1/qstash", async (c) => {
    const signature = qstashHeaders(c, "/v1/qstash");
    const retried = c.req.header("upstash-retried");
    // QStash counts retries from 0; we count deliveries from 1. A count
    // that cannot be read (not an integer >= 0, or past 15 digits, where
    // Number rounds) is one the queue did not give: the store counts the
    // delivery, as it counts one without the header. Refused (489), it
    // would end QStash's retries at this delivery, the policy's lost.
    const attempt = retried !== undefined && /^\d{1,15}$/.test(retried)
      ? Number(retried) + 1
      : undefined;
    const body = await qstashBodyOf(c, verifyQStash, signature);
    if (!("text" in body)) {
      // Authenticated, and too large to be a job: kept as the letter an
      // unreadable message gets, then answered as QStash's docs ask (489:
      // no retry, to its DLQ), not 413, which it retries to the end.
      if (body.claim !== undefined) await refuseUnrecorded(body.claim);
      const intentId = intentIdIn(body.head, false);
      const detail =
        `The message's body is ${body.overBytes} bytes, over the limit of ${
          limitOf(c)
        } (MAX_BODY_BYTES): not read. Publish the job alone, ${
          jobAlone(intentId)
        }`;
      return await keepUnreadable(
        "qstash",
        body.sha256,
        {
          id: c.req.header("upstash-message-id"),
          attempt,
          job: { intentId },
        },
        detail,
        () => tooLargeToRetry(detail),
        body.claim,
      );
    }
    const raw = body.text;
    let claim: ReplayClaim | undefined;
    if (verifyQStash) {
      // Over the bytes as sent (DESIGN §9: the raw body).
      const verified = await verifyQStash(signature, body.bytes);
      if (!verified.ok) {
        throw unauthorized(verified.detail, verified.hint, verified.kind);
      }
      claim = verified.claim;
      await refuseUnrecorded(claim);
    }
    let job: Job;
    try {
      // Signed, its bytes as they came, but not UTF-8: unreadable, as a
      // Pub/Sub message's data and the failure callback's sourceBody are
      // (its give-up, so, keeps the letter this keeps).
      if (exactText(body.bytes) === undefined) {
        throw badInput(
          "qstash",
          `The body is not UTF-8 text: publish the job as UTF-8 JSON, such as ${JOB_EXAMPLE}.`,
        );
      }
      job = jobFrom("qstash", parseJson("qstash", raw));
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      // Signed by QStash, and not a job: kept as a dead letter, as every
      // queue's unreadable message is (it may be its intent's only job),
      // then refused as QStash's docs ask (489: no retry, to its DLQ).
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        parsed = undefined;
      }
      // Claimed with the letter: its id is from a header the signature
      // does not cover, so a replay of the signed request must write
      // nothing, as a replayed job does.
      return await keepUnreadable(
        "qstash",
        raw,
        { id: c.req.header("upstash-message-id"), attempt, job: parsed },
        error.detail,
        () => error.response,
        claim,
      );
    }
    const messageId = idFrom(c.req.header("upstash-message-id"));
    return await deliver(
      "qstash",
      job,
      attempt,
      claim,
      undefined,
      // The failure callback names this id as its source message.
      messageId === undefined ? undefined : { queue: "qstash", messageId },
      undefined,
      // Only a header that is there and cannot be read is logged.
      attempt === undefined && retried !== undefined
        ? (delivery) => qstashCountNotRead(retried, delivery)
        : undefined,
    );
  });

  /** Whether a failure to fetch Google's keys may be logged now. */
  const keysLogDue = oncePer(KEYS_LOG_INTERVAL_MS, now);

  /**
   * Checks Google's OIDC token of a Pub/Sub push: a 503 answer when
   * Google's keys cannot be had now (Pub/Sub redelivers), a 401 refusal
   * when the token is missing or wrong, nothing when it verifies.
   */
  async function authenticatePush(
    verify:
      | ((authorization: string | undefined) => Promise<PushVerification>)
      | undefined,
    authorization: string | undefined,
  ): Promise<Response | undefined> {
    let verified: PushVerification = { ok: true };
    try {
      if (verify !== undefined) verified = await verify(authorization);
    } catch (error) {
      if (!(error instanceof KeysUnavailable)) throw error;
      // Said in the log too, at most once a minute: an operator whose
      // egress to Google is blocked sees why every push is refused.
      // (A clock stepped back behind the last line: see oncePer.)
      if (keysLogDue()) {
        log(
          `relayer cannot verify Pub/Sub pushes now: ${
            describeError(error.cause ?? error)
          } (answering 503, so Pub/Sub redelivers)`,
        );
      }
      return problem(
        503,
        "keys-unavailable",
        "Cannot verify now",
        "Google's signing keys could not be fetched; Pub/Sub will redeliver.",
      );
    }
    if (!verified.ok) {
      throw unauthorized(
        "Send Google's OIDC token for this audience as 'Authorization: Bearer <token>'.",
        verified.hint,
        verified.kind,
      );
    }
  }

  /**
   * Reads a Pub/Sub push envelope and the job in its message. What could
   * be read before it proved unreadable is left in `seen`, for
   * {@linkcode keepUnreadable}.
   *
   * @throws {Refusal} If the envelope, its message id (when required) or the job is unreadable.
   */
  function readPush(
    raw: string,
    seen: PushSeen,
    requireId: boolean,
    metadata?: (name: string) => string | undefined,
  ): {
    job: Job;
    id: string | undefined;
    attributes: Record<string, unknown>;
    source: string | undefined;
    subscription: { project: string; name: string } | undefined;
  } {
    const envelope = parseJson(
      "pubsub",
      raw,
      'Pub/Sub\'s push envelope, {"message":{"data":"<the job as base64>","messageId":"…"},"subscription":"…"}',
    );
    const { message, deliveryAttempt, delivery_attempt, subscription } =
      (typeof envelope === "object" && envelope !== null
        ? envelope
        : {}) as Record<string, unknown>;
    seen.attempt = deliveryAttempt ?? delivery_attempt;
    if (typeof message !== "object" || message === null) {
      // A subscription with payload unwrapping (`--push-no-wrapper`) pushes
      // the message's data itself, no envelope: the job alone. Acked and
      // kept as every unreadable push is, its letter names the intent the
      // job names; it named none, and every job of such a subscription
      // ended in a letter no one could find its payment from.
      const intentId = message === undefined
        ? intentIdSeen(envelope)
        : undefined;
      if (isIntentId(intentId)) {
        seen.job = envelope;
        // On the dead-letter route it is still the queue giving up, and
        // resolved as one, its count and ids from the headers a
        // subscription that writes metadata (--push-no-wrapper-write-metadata)
        // sets, else the store's: kept as a letter only, the intent was
        // left unresolved (a payment whose tx confirmed never settled,
        // its hold pending) until someone read the letter.
        const unwrapped = metadata === undefined
          ? undefined
          : unwrappedJob(envelope);
        if (unwrapped !== undefined) {
          const attributes: Record<string, string> = {};
          for (const name of DEAD_LETTER_ATTRIBUTES) {
            const value = metadata!(name);
            if (value !== undefined) attributes[name] = value;
          }
          return {
            job: unwrapped,
            id: idFrom(metadata!("x-goog-pubsub-message-id")),
            attributes,
            source: undefined,
            subscription: subscriptionFrom(
              metadata!("x-goog-pubsub-subscription-name"),
            ),
          };
        }
        throw badInput(
          "pubsub",
          `The body is a job (for intent ${intentId}) with no Pub/Sub push envelope around it, as a subscription with payload unwrapping (pushConfig.noWrapper, gcloud's --push-no-wrapper) pushes its messages: make the push subscription without it, so that Pub/Sub sends its envelope with the message's id and delivery attempt, then publish a job for the intent again.`,
        );
      }
      throw badInput(
        "pubsub",
        "The body must be a Pub/Sub push envelope with a 'message' object.",
      );
    }
    const {
      data,
      messageId,
      message_id,
      attributes,
      publishTime,
      publish_time,
    } = message as Record<string, unknown>;
    seen.id = messageId ?? message_id;
    const id = idFrom(seen.id);
    if (requireId && id === undefined) {
      throw badInput(
        "pubsub",
        "'message.messageId' must be a non-empty string.",
      );
    }
    seen.job = parseJson(
      "pubsub",
      decodeBase64("pubsub", data),
      undefined,
      undefined,
      "'message.data', decoded,",
    );
    const job = jobFrom("pubsub", seen.job);
    // The message as its dead-letter copy names it (`sourceMessage`).
    const names = subscriptionFrom(subscription);
    const published = idFrom(publishTime ?? publish_time);
    return {
      job,
      id,
      attributes:
        (typeof attributes === "object" && attributes !== null
          ? attributes
          : {}) as Record<string, unknown>,
      source: names === undefined || published === undefined
        ? undefined
        : `${names.project}/${names.name}@${published}#${job.intentId}`,
      subscription: names,
    };
  }

  /**
   * The front of both Pub/Sub push routes: the route must be configured,
   * the push Google's and its envelope readable. `read` takes what the
   * route needs from the push and may refuse it the same way. An
   * authenticated push that cannot be read is acked (Pub/Sub would
   * redeliver it for days) and kept visible to operators.
   */
  async function receivePush<T extends object>(
    c: Context,
    verify:
      | ((authorization: string | undefined) => Promise<PushVerification>)
      | undefined,
    route: {
      name: string;
      settings: string;
      option: keyof AppDeps;
      requireId: boolean;
      /** Whether an unwrapped push is read as a job (the give-up route). */
      unwrapped?: boolean;
    },
    read: (push: ReturnType<typeof readPush>, seen: PushSeen) => T,
  ): Promise<T | Response> {
    requireConfigured(
      verify !== undefined,
      route.name,
      route.settings,
      route.option,
    );
    const refused = await authenticatePush(
      verify,
      c.req.header("authorization"),
    );
    if (refused) return refused;
    const body = await bodyOrDigestOf(
      c,
      limitOf(c),
      OVERSIZED_PUSH_READ_BYTES,
      HEAD_BYTES,
      within,
    );
    if (!("text" in body)) {
      // Unread, so named by its hash (the relayer hashes what it is
      // given): a redelivery of the same push keeps the same letter.
      const intentId = intentIdIn(body.head, true);
      return await keepUnreadable(
        "pubsub",
        body.sha256,
        { job: { intentId } },
        `The push's body is ${
          body.whole ? "" : "more than "
        }${body.overBytes} bytes, over the limit of ${
          limitOf(c)
        } (MAX_BODY_BYTES, 4/3 of it and 16 KiB more for an envelope): not read. Publish the job alone, ${
          jobAlone(intentId)
        }`,
        () => new Response(null, { status: 204 }),
      );
    }
    const raw = body.text;
    const seen: PushSeen = {};
    try {
      return read(
        readPush(
          raw,
          seen,
          route.requireId,
          route.unwrapped ? (name) => c.req.header(name) : undefined,
        ),
        seen,
      );
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      return await keepUnreadable(
        "pubsub",
        raw,
        seen,
        error.detail,
        () => new Response(null, { status: 204 }),
      );
    }
  }

  /** Whether an undeclared dead-letter policy may be logged now. */
  const undeclaredLogDue = oncePer(REFUSALS_LOG_INTERVAL_MS, now);

  /**
   * Returns `delivery`, a push's `deliveryAttempt`, having said in the log
   * (at most once a minute) when no dead-letter route is configured: only
   * a subscription with a dead-letter policy numbers its pushes, and that
   * policy gives up after its max delivery attempts (5 unless set) whatever
   * the start-up check took (no limit, as `PUBSUB_MAX_DELIVERY_ATTEMPTS`
   * was unset), forwarding the job to a dead-letter topic nothing here
   * resolves: its intent would be stranded.
   */
  function undeclaredDeadLetterPolicy(
    delivery: number,
    subscription: { project: string; name: string } | undefined,
  ): number {
    if (verifyPubSubDeadLetter !== undefined || !undeclaredLogDue()) {
      return delivery;
    }
    log(
      `relayer POST /v1/pubsub: a push of ${
        subscriptionPath(subscription)
      } carries deliveryAttempt ${delivery}, so the subscription has a dead-letter policy, but PUBSUB_MAX_DELIVERY_ATTEMPTS and PUBSUB_DEAD_LETTER_AUDIENCE are unset: Pub/Sub gives up on a job after the policy's max delivery attempts (5 unless set), unchecked against MAX_DELIVERIES, and forwards it to the dead-letter topic, where nothing resolves its intent, which is stranded. Set both (and push the dead-letter topic's subscription to POST /v1/pubsub/dead-letter), or remove the subscription's dead-letter policy`,
    );
    return delivery;
  }

  /** Whether a declared dead-letter policy found missing may be logged now. */
  const missingLogDue = oncePer(REFUSALS_LOG_INTERVAL_MS, now);

  /**
   * Says in the log (at most once a minute), where a dead-letter route is
   * configured, that a push without `deliveryAttempt` comes from a
   * subscription with no dead-letter policy: Pub/Sub never gives up on a
   * job there but drops it when its retention ends, with no dead letter,
   * which the start-up check did not count on (it took the declared
   * policy's give-up), so its intent can be stranded.
   */
  function missingDeadLetterPolicy(
    subscription: { project: string; name: string } | undefined,
  ): void {
    if (verifyPubSubDeadLetter === undefined || !missingLogDue()) return;
    log(
      `relayer POST /v1/pubsub: a push of ${
        subscriptionPath(subscription)
      } carries no deliveryAttempt, so the subscription has no dead-letter policy, but PUBSUB_MAX_DELIVERY_ATTEMPTS and PUBSUB_DEAD_LETTER_AUDIENCE are set: Pub/Sub never gives up on a job there, but pushes it until its message retention ends and then drops it with no dead letter, which the start-up check did not count on (it took the policy's give-up), and the intent of a job that outlives the retention is stranded. Add the dead-letter policy to the subscription (max delivery attempts as PUBSUB_MAX_DELIVERY_ATTEMPTS, its dead-letter topic pushed to POST /v1/pubsub/dead-letter), or unset both and set PUBSUB_MESSAGE_RETENTION to the subscription's retention`,
    );
  }

  app.post("/v1/pubsub", async (c) => {
    const got = await receivePush(c, verifyPubSub, {
      name: "POST /v1/pubsub",
      settings: "PUBSUB_AUDIENCE and PUBSUB_SERVICE_ACCOUNT",
      option: "pubsub",
      requireId: true,
    }, (push, seen): {
      job: Job;
      id?: string;
      delivery?: number;
      countAs?: string;
      source?: string;
      notRead?: unknown;
    } => {
      const attempt = seen.attempt;
      const source = {
        ...(push.id === undefined ? {} : { id: push.id }),
        ...(push.source === undefined ? {} : { source: push.source }),
      };
      const subscription = push.subscription;
      if (isCount(attempt)) {
        return {
          job: push.job,
          delivery: undeclaredDeadLetterPolicy(attempt, subscription),
          ...source,
        };
      }
      // Without a dead-letter policy Pub/Sub sends no attempt count: count
      // it here, per subscription. A message id is its topic's, and every
      // subscription on the topic gets the message under it: counted by
      // the id alone, one subscription's failures would spend another's
      // deliveries. (Google always names the subscription; a push that
      // does not is counted by its id, as before.) A count that cannot be
      // read (not an integer >= 1) is one the queue did not give, counted
      // so too: acked as an unreadable letter, the job would lose its
      // policy's deliveries and its intent be left unresolved. It says
      // nothing of a dead-letter policy, either way.
      const missing = attempt === undefined || attempt === 0;
      if (missing) missingDeadLetterPolicy(subscription);
      const counted = {
        job: push.job,
        countAs: subscription === undefined
          ? `pubsub/${push.id}`
          : `pubsub/${subscription.project}/${subscription.name}/${push.id}`,
        ...source,
      };
      // Only a count that is there and cannot be read is logged.
      return missing ? counted : { ...counted, notRead: attempt };
    });
    if (got instanceof Response) return got;
    return await deliver(
      "pubsub",
      got.job,
      got.delivery,
      undefined,
      got.countAs,
      // A dead-letter copy names its source message, not its id.
      got.source === undefined
        ? undefined
        : { queue: "pubsub", dlqId: got.source },
      got.id,
      "notRead" in got
        ? (delivery) => pubsubCountNotRead(got.notRead, delivery)
        : undefined,
    );
  });

  /**
   * The queue gave up on a job: poison it as exhausted and resolve the
   * intent, exactly as a poison decision does (idempotent: a repeat, or a
   * job already poisoned, changes nothing). Busy answers a retry, so the
   * queue calls again.
   */
  async function giveUp(
    route: Route,
    job: Job,
    deliveries: number,
    queue: QueueIds,
    claim?: ReplayClaim,
  ): Promise<Response> {
    const seen = messageNote(queue);
    let outcome: Outcome;
    try {
      outcome = await relayer.giveUp(job, {
        deliveries,
        queue,
        ...(claim ? { claim: { ...claim, now: now() } } : {}),
      });
    } catch (error) {
      if (error instanceof ReplayError) throw replayed();
      return await failedUnexpectedly(
        `${jobIdOf(job).padEnd(16)} give-up failed`,
        error,
        ["The give-up could not be resolved now", "the queue will call again"],
        undefined,
        seen,
      );
    }
    log(`worker  ${formatOutcome(job, outcome)}${seen}`);
    return answer(route, job, outcome, true);
  }

  // QStash's failure callback: QStash gave up on a job after its retries.
  app.post("/v1/qstash/failed", async (c) => {
    const signature = qstashHeaders(c, "/v1/qstash/failed");
    const read = await qstashBodyOf(c, verifyQStashFailed, signature);
    if (!("text" in read)) {
      // Authenticated (the hash of all of it checked), and too large to
      // read: its first bytes may name the message it gives up on and
      // that message's intent (callbackSeen). Named both, it is kept as
      // the letter /v1/qstash keeps for that message, naming the intent
      // (/v1/qstash names the same one, or none: so the letter is one,
      // and its discard held); unless that letter is there and names an
      // intent already, or the callback names none: then it stays as it
      // is, and is not written over with less. Else it is named by the
      // callback's bytes (a repeat of it keeps one letter). Answered as
      // an unreadable one is (489: no retry).
      const seen = callbackSeen(read.head, maxBodyBytes);
      const letter = seen.id === undefined
        ? undefined
        : `qstash/${seen.id}/unreadable`;
      const detail =
        `QStash's failure callback is ${read.overBytes} bytes, over the limit of ${
          limitOf(c)
        } (4/3 of MAX_BODY_BYTES and 16 KiB more): not read${
          seen.id === undefined
            ? ", so its message is found in QStash's DLQ only"
            : ` but for its first bytes, which name its message ${seen.id}${
              seen.intentId === undefined ? "" : ` and intent ${seen.intentId}`
            }`
        }. Publish the job alone, ${jobAlone(seen.intentId)}`;
      if (letter !== undefined) {
        let kept: StoredDeadLetter | null;
        try {
          kept = letterOrNull(letter, await store.getDeadLetter(letter));
        } catch (error) {
          return deliveryFailed(
            `qstash  ${letter} failure callback over the limit, and the read of its letter failed: ${
              describeError(error)
            }`,
            "The failure callback is over the limit, and the dead letter of its message could not be read; QStash will call again.",
            error,
          );
        }
        if (
          kept !== null &&
          (isIntentId(kept.intentId) || seen.intentId === undefined)
        ) {
          log(
            `qstash  ${letter} acked, its failure callback over the limit: the dead letter kept for the message stays as it is`,
          );
          return tooLargeToRetry(detail);
        }
      }
      return await keepUnreadable(
        "qstash",
        read.sha256,
        {
          ...(seen.intentId === undefined ? {} : { id: seen.id }),
          attempt: seen.attempt,
          job: { intentId: seen.intentId },
        },
        detail,
        () => tooLargeToRetry(detail),
        read.claim,
      );
    }
    const raw = read.text;
    let claim: ReplayClaim | undefined;
    if (verifyQStashFailed) {
      const verified = await verifyQStashFailed(signature, read.bytes);
      if (!verified.ok) {
        throw unauthorized(verified.detail, verified.hint, verified.kind);
      }
      claim = verified.claim;
    }
    const body = parseJson(
      "qstash",
      raw,
      'QStash\'s failure callback, {"sourceBody":"<the job as base64>","retried":…}',
    );
    const {
      sourceBody,
      retried,
      maxRetries,
      sourceMessageId,
      sourceMessasgeId,
      dlqId,
    } = (typeof body === "object" && body !== null ? body : {}) as Record<
      string,
      unknown
    >;
    // QStash's callback docs have spelt it `sourceMessasgeId`: either
    // names the message a late copy carries as its Upstash-Message-Id.
    const sourceId = sourceMessageId ?? sourceMessasgeId;
    let source: string | undefined;
    let job: Job;
    try {
      source = decodeBase64("qstash", sourceBody, "'sourceBody'");
      job = jobFrom("qstash", parseJson("qstash", source));
    } catch (error) {
      // A callback without the message it gave up on is not QStash's.
      if (!(error instanceof Refusal) || typeof sourceBody !== "string") {
        throw error;
      }
      // The message QStash gave up on is not a job. It is kept as a dead
      // letter, as /v1/qstash keeps one, under the same name: /v1/qstash
      // may never have kept it (the store was down through every one of
      // its deliveries, each a 503), and it may be its intent's only job.
      // Then refused as /v1/qstash refuses it (489: no retry).
      // Its bytes that are not UTF-8 read as U+FFFD here, only to name
      // the intent, as /v1/qstash names it in the letter it keeps.
      let parsed: unknown;
      try {
        parsed = JSON.parse(
          source ??
            UTF8.decode(
              Uint8Array.from(atob(sourceBody), (ch) => ch.charCodeAt(0)),
            ),
        );
      } catch {
        parsed = undefined;
      }
      return await keepUnreadable(
        "qstash",
        source ?? sourceBody,
        {
          id: sourceId,
          attempt:
            typeof retried === "number" && Number.isSafeInteger(retried) &&
              retried >= 0
              ? retried + 1
              : undefined,
          job: parsed,
        },
        error.detail,
        () => error.response,
        claim,
      );
    }
    // QStash counts retries from 0; we count deliveries from 1. A callback
    // whose 'retried' cannot be read is still QStash's give-up (signed,
    // naming the job): resolved with the store's count, as a Pub/Sub dead
    // letter without its count is.
    const counted = typeof retried === "number" ? retried + 1 : undefined;
    const deliveries = await givenUpAfter(
      job,
      counted,
      retried,
      failedCountNotRead,
    );
    // The retries QStash allowed the message (`maxRetries`, as it applied
    // them: a plan's cap, a publisher's Upstash-Retries), else the
    // deliveries it made: a message it ended early (its 489) made fewer.
    // One over MAX_BODY_BYTES was ended so at its first delivery
    // (/v1/qstash keeps it and answers 489): its deliveries say nothing
    // of its retries, and no Upstash-Retries would have helped.
    qstashGaveUpEarly(
      job,
      typeof maxRetries === "number" && Number.isSafeInteger(maxRetries) &&
        maxRetries >= 0
        ? maxRetries + 1
        : isCount(counted) &&
            base64Bytes(sourceBody as string) <= maxBodyBytes
        ? counted
        : undefined,
    );
    const messageId = idFrom(sourceId);
    const dlq = idFrom(dlqId);
    return await giveUp("qstash", job, deliveries, {
      queue: "qstash",
      ...(messageId ? { messageId } : {}),
      ...(dlq ? { dlqId: dlq } : {}),
    }, claim);
  });

  /**
   * Whether a dead-letter subscription's own dead-letter policy may be
   * logged now.
   */
  const ownDeadLetterLogDue = oncePer(REFUSALS_LOG_INTERVAL_MS, now);

  /**
   * Says in the log (at most once a minute) that a push to the give-up
   * route carries `deliveryAttempt`: only a subscription with a dead-letter
   * policy numbers its pushes, and the dead-letter topic's subscription
   * with one forwards a give-up that failed its max delivery attempts (5
   * unless set: a give-up busy behind a send in flight, the store down) to
   * yet another topic, where nothing resolves its intent.
   */
  function ownDeadLetterPolicy(
    attempt: unknown,
    subscription: { project: string; name: string } | undefined,
  ): void {
    if (
      typeof attempt !== "number" || !(attempt > 0) || !ownDeadLetterLogDue()
    ) return;
    log(
      `relayer POST /v1/pubsub/dead-letter: a push of ${
        subscriptionPath(subscription)
      } carries deliveryAttempt ${attempt}, so the dead-letter topic's subscription has a dead-letter policy of its own: Pub/Sub forwards a give-up it pushed the policy's max delivery attempts (5 unless set; a give-up answered busy, or while the store is down) to that policy's topic, where nothing resolves its intent, which is stranded. Remove that subscription's dead-letter policy, so that Pub/Sub pushes a give-up until it is resolved (up to the subscription's message retention)`,
    );
  }

  // A push subscription on the dead-letter topic: Pub/Sub gave up on a job.
  app.post("/v1/pubsub/dead-letter", async (c) => {
    const push = await receivePush(c, verifyPubSubDeadLetter, {
      name: "POST /v1/pubsub/dead-letter",
      settings: "PUBSUB_DEAD_LETTER_AUDIENCE and PUBSUB_SERVICE_ACCOUNT",
      option: "pubsubDeadLetter",
      requireId: false,
      unwrapped: true,
    }, (push, seen) => {
      ownDeadLetterPolicy(seen.attempt, push.subscription);
      return push;
    });
    if (push instanceof Response) return push;
    const { job, id: messageId, attributes } = push;
    // Pub/Sub sets the source subscription's delivery count when it forwards.
    const count = attributes.CloudPubSubDeadLetterSourceDeliveryCount;
    const deliveries = await givenUpAfter(
      job,
      Number(count),
      count,
      deadLetterCountNotRead,
    );
    pubsubGaveUpEarly(job, isCount(Number(count)) ? deliveries : undefined);
    const source = sourceMessage(attributes, job);
    return await giveUp("pubsub", job, deliveries, {
      queue: "pubsub",
      ...(messageId ? { messageId } : {}),
      ...(source ? { dlqId: source } : {}),
    });
  });

  /**
   * A QStash route's body as text and bytes; or, over the route's limit, its length,
   * its SHA-256, its first bytes up to the limit (`head`: read only once
   * the hash of the whole is checked against the token's, so never an
   * unsigned byte) and the replay claim of its token. The token's every check
   * but the body's is made once the body is known to be over (by its
   * Content-Length, before any of it is read): a 401 then, the rest unread.
   * Then the body is hashed as it comes, never held, up to
   * {@linkcode OVERSIZED_QSTASH_READ_BYTES} (a 413 past it: its hash could
   * not be checked), and the hash checked against the token's (a 401).
   * Without QStash's keys (insecure dev), a body over the limit is a 413.
   */
  async function qstashBodyOf(
    c: Context,
    verify: ReturnType<typeof qstashVerifier> | undefined,
    signature: string | undefined,
  ): Promise<
    { text: string; bytes: Uint8Array } | {
      overBytes: number;
      sha256: string;
      head: Uint8Array;
      claim: ReplayClaim;
    }
  > {
    if (verify === undefined) return await bodyOf(c, limitOf(c), within);
    const length = c.req.header("content-length");
    const declared = length !== undefined &&
        c.req.header("transfer-encoding") === undefined
      ? Number.parseInt(length, 10)
      : undefined;
    const body = await bodyOrDigestOf(
      c,
      limitOf(c),
      OVERSIZED_QSTASH_READ_BYTES,
      // The first bytes up to the limit, all held when the body was found
      // over it: the job's intent may come after a long field, and the
      // failure callback's message id and source come after our answer
      // and the message's headers. Held while the rest is hashed, as a
      // body within the limit is held while it is read.
      limitOf(c),
      within,
      () => {
        const refused = verify.checkClaims(signature);
        if (refused) {
          throw unauthorized(refused.detail, refused.hint, refused.kind);
        }
        if (declared !== undefined && declared > OVERSIZED_QSTASH_READ_BYTES) {
          throw tooLargeToKeep(c, `${declared} bytes`);
        }
      },
    );
    if ("text" in body) return body;
    if (!body.whole) {
      throw tooLargeToKeep(c, `more than ${body.overBytes} bytes`);
    }
    const verified = verify.verifyDigest(signature, body.digest);
    if (!verified.ok) {
      throw unauthorized(verified.detail, verified.hint, verified.kind);
    }
    return {
      overBytes: body.overBytes,
      sha256: body.sha256,
      head: body.head,
      claim: verified.claim,
    };
  }

  /** A QStash message too long to be read to its end, so kept nowhere: 413. */
  function tooLargeToKeep(c: Context, size: string): Refusal {
    const detail = `A request body may be at most ${
      limitOf(c)
    } bytes; a QStash message over that is kept as a dead letter if it is at most ${OVERSIZED_QSTASH_READ_BYTES} bytes, and this one is ${size}.`;
    return new Refusal(
      problem(413, "too-large", "Body too large", detail),
      detail,
    );
  }

  /**
   * Logs `line` and answers 503 `delivery-failed` with `detail`, so the
   * queue delivers again; where the store's `error` is a schema behind,
   * the detail says so and what to run.
   */
  function deliveryFailed(
    line: string,
    detail: string,
    error?: unknown,
  ): Response {
    log(line);
    const named = namedCause(error);
    return problem(
      503,
      "delivery-failed",
      "Delivery failed",
      named ? `${detail} It failed as ${named.as}. ${named.todo}.` : detail,
    );
  }

  /**
   * An authenticated queue message that cannot be read is answered so that
   * the queue does not deliver it again (`done`: Pub/Sub's 204, as a 400
   * would make Pub/Sub redeliver it for up to its retention, 7 days by
   * default and up to 31; QStash's 489). It stays visible: a log line, and
   * a dead letter `<queue>/<messageId>/unreadable` (three segments, so
   * never a job's id, and never redriven) with the reason. A store failure
   * is a 503, so the queue redelivers and we try again.
   */
  async function keepUnreadable(
    queue: "pubsub" | "qstash" | "generic",
    raw: string,
    seen: PushSeen,
    detail: string,
    done: (jobId: string) => Response,
    claim?: ReplayClaim,
    replay?: () => Response,
  ): Promise<Response> {
    const name = queue === "pubsub"
      ? "Pub/Sub"
      : queue === "qstash"
      ? "QStash"
      : "deliver it again";
    let jobId: string;
    try {
      jobId = await relayer.keepUnreadable({
        ...(claim ? { claim: { ...claim, now: now() } } : {}),
        queue,
        id: seen.id,
        raw,
        seen: {
          // A job encoded twice names its intent too (a bridge or
          // publisher that serialized the job, then the message).
          intentId: intentIdSeen(seen.job),
          attempt: seen.attempt,
        },
        detail,
      });
    } catch (error) {
      if (error instanceof ReplayError) {
        if (replay !== undefined) return replay();
        throw replayed();
      }
      // Its letter is named by Upstash-Message-Id, which the token does not
      // sign: used up as a failed delivery's token is (see deliver).
      if (queue === "qstash" && claim !== undefined) await useUp(claim);
      return deliveryFailed(
        `${queue.padEnd(7)} unreadable message, and its dead letter failed: ${
          describeError(error)
        }`,
        `The message is unreadable and could not be kept as a dead letter; ${
          queue === "generic" ? name : `${name} will redeliver it`
        }.`,
        error,
      );
    }
    log(
      `${queue.padEnd(7)} ${jobId} ${
        queue === "generic" ? "refused" : "acked"
      } and kept as a dead letter: ${detail}`,
    );
    return done(jobId);
  }

  /**
   * A route's log line for a queue's count that could not be read (`field`
   * as sent, `value`), which the store's count stood in for (`done`, told
   * that count): at most one a minute per route, paced as a refusal's
   * line is. An operator sees a queue or bridge whose counts are
   * unreadable (a bridge passing SQS's ApproximateReceiveCount as a
   * string); a flood of forged headers does not flood the log.
   */
  function countNotReadLog(
    name: string,
    field: string,
    done: (deliveries: number) => string,
    due = oncePer(REFUSALS_LOG_INTERVAL_MS, now),
  ): (value: unknown, deliveries: number) => void {
    return (value, deliveries) => {
      if (!due()) return;
      log(
        `relayer ${name}: ${field} ${shownCount(value)} is not a count; ${
          done(deliveries)
        }`,
      );
    };
  }
  const countedHere = (delivery: number) =>
    `the delivery was counted here (#${delivery})`;
  const givenUpHere = (deliveries: number) =>
    `the give-up takes the count kept here (${deliveries})`;
  const qstashCountNotRead = countNotReadLog(
    "POST /v1/qstash",
    "Upstash-Retried",
    countedHere,
  );
  const pubsubCountNotRead = countNotReadLog(
    "POST /v1/pubsub",
    "deliveryAttempt",
    countedHere,
  );
  const failedCountNotRead = countNotReadLog(
    "POST /v1/qstash/failed",
    "retried",
    givenUpHere,
  );
  const deadLetterCountNotRead = countNotReadLog(
    "POST /v1/pubsub/dead-letter",
    "CloudPubSubDeadLetterSourceDeliveryCount",
    givenUpHere,
  );
  // The bridge's two counts (a delivery's, a give-up's): one line a minute
  // for the route, as for each other route.
  const bridgeCountsDue = oncePer(REFUSALS_LOG_INTERVAL_MS, now);
  const deliveryCountNotRead = countNotReadLog(
    "POST /v1/deliveries",
    "delivery",
    (delivery) =>
      `${
        countedHere(delivery)
      }; send an integer >= 1 (parse a count your queue gives as a string), or leave it out`,
    bridgeCountsDue,
  );
  const bridgeCountNotRead = countNotReadLog(
    "POST /v1/deliveries",
    "gaveUp.deliveries",
    (deliveries) =>
      `${
        givenUpHere(deliveries)
      }; send an integer >= 1 (parse a count your queue gives as a string), or leave it out`,
    bridgeCountsDue,
  );
  // A letter the route keeps (a bare job, a job or give-up it cannot read,
  // a messageId that is no text) records 1 for a count it cannot read:
  // said as the count of a readable job is, so that a bridge passing
  // SQS's ApproximateReceiveCount as a string hears of it at its first
  // refusal, and the letter's 1 is not read as a first delivery.
  const letterCountsNotRead = {
    delivery: countNotReadLog(
      "POST /v1/deliveries",
      "delivery",
      () =>
        "its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out",
      bridgeCountsDue,
    ),
    "gaveUp.deliveries": countNotReadLog(
      "POST /v1/deliveries",
      "gaveUp.deliveries",
      () =>
        "its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out",
      bridgeCountsDue,
    ),
  };
  /**
   * The answer of a letter kept on the generic route (`done`), having
   * said its count (`delivery`, or `gaveUp`'s) where it cannot be read.
   */
  function letterKept(
    delivery: unknown,
    gaveUp: unknown,
    done: (jobId: string) => Response,
  ): (jobId: string) => Response {
    return (jobId) => {
      const count = attemptSeen(delivery, gaveUp);
      if (count !== undefined && count !== null && !isCount(count)) {
        letterCountsNotRead[
          gaveUp === undefined ? "delivery" : "gaveUp.deliveries"
        ](count, 1);
      }
      return done(jobId);
    };
  }

  /**
   * A route's log line for a queue that gave up on a job before the
   * policy's last delivery: `limit`, the deliveries the queue allowed the
   * message or made by its own count, is below `maxDeliveries` (`what`
   * says so, told the job, `limit` and `maxDeliveries`). The start-up check
   * cannot see a bridge's limit, a QStash plan's cap below `QSTASH_RETRIES`
   * or a publisher of one's own, nor a dead-letter policy changed in
   * Google's console since: each job then gets fewer deliveries than the
   * policy, and less of the rescue window it was checked for, and only its
   * give-up shows it. At most one a minute per route; nothing where the
   * count is the store's (`undefined`), which says nothing of the queue.
   */
  function earlyGiveUpLog(
    name: string,
    what: (job: Job, limit: number, maxDeliveries: number) => string,
  ): (job: Job, limit: number | undefined) => void {
    const due = oncePer(REFUSALS_LOG_INTERVAL_MS, now);
    return (job, limit) => {
      const { maxDeliveries } = relayer.policy;
      if (limit === undefined || limit >= maxDeliveries || !due()) return;
      log(`relayer ${name}: ${what(job, limit, maxDeliveries)}`);
    };
  }
  const reviewTooSoon =
    "so a payment whose tx is slow to confirm or stuck may go to review before it is rescued";
  const qstashGaveUpEarly = earlyGiveUpLog(
    "POST /v1/qstash/failed",
    (job, limit, max) =>
      `QStash gave up on ${jobIdOf(job)} allowing ${
        deliveriesText(limit)
      }, fewer than MAX_DELIVERIES (${max}): the message's retries (its Upstash-Retries, capped by your plan) are fewer than the policy's deliveries, ${reviewTooSoon}. Publish jobs with Upstash-Retries of at least ${
        // The least QSTASH_RETRIES the start check takes: MAX_DELIVERIES −
        // 1, or more where the failure callback must outlast a busy
        // give-up (only when this is logged).
        qstashDefaultRetries(max, {
          leaseMs: relayer.leaseMs,
          clockSkewMs: relayer.clockSkewMs,
        })} (QSTASH_RETRIES, on a plan whose cap allows it), or lower MAX_DELIVERIES`,
  );
  const pubsubGaveUpEarly = earlyGiveUpLog(
    "POST /v1/pubsub/dead-letter",
    (job, limit, max) =>
      `Pub/Sub gave up on ${jobIdOf(job)} after ${
        deliveriesText(limit)
      } (CloudPubSubDeadLetterSourceDeliveryCount), fewer than MAX_DELIVERIES (${max}): the source subscription's dead-letter policy allows fewer delivery attempts than the policy's deliveries, or Google counted them loosely, ${reviewTooSoon}. Set its max delivery attempts, and PUBSUB_MAX_DELIVERY_ATTEMPTS, above MAX_DELIVERIES, with a margin`,
  );
  const bridgeGaveUpEarly = earlyGiveUpLog(
    "POST /v1/deliveries",
    (job, limit, max) =>
      `a bridge's queue gave up on ${jobIdOf(job)} after ${
        deliveriesText(limit)
      } (gaveUp.deliveries), fewer than MAX_DELIVERIES (${max}): its limit (an SQS queue's maxReceiveCount, a RabbitMQ delivery-limit, your poller's) is below the policy's deliveries, ${reviewTooSoon}. Raise it to at least ${max}`,
  );

  /**
   * Says in the log (at most once a minute) that a bridge's give-up named
   * no message: resolved all the same, but nothing tells its repeat from
   * a give-up of another message of the job, nor a late copy of the
   * message from a job published since.
   */
  const unnamedGiveUpDue = oncePer(REFUSALS_LOG_INTERVAL_MS, now);
  function bridgeGaveUpUnnamed(job: Job): void {
    if (!unnamedGiveUpDue()) return;
    log(
      `relayer POST /v1/deliveries: a bridge's give-up on ${
        jobIdOf(job)
      } names no message (gaveUp.messageId): resolved, but a repeat of it after a redrive is taken for a give-up of the job published since, and a late copy of the message is held off only by the give-up's lease; send your queue's id of the message in the give-up and in each delivery`,
    );
  }

  /**
   * The deliveries a queue's give-up counts: the queue's own count where
   * it is an integer >= 1, else the store's ({@linkcode countedSoFar}:
   * under `message` first, if given). The queue has given up on the job
   * either way: a give-up refused for a count it could not read would end
   * the queue's calls (QStash's 489) or spend them, or a bridge would drop
   * it as a 4xx, and nothing would resolve the intent. `sent`, the count
   * as the queue sent it, is logged by `notRead` where it is there and
   * cannot be read; a count left out is the store's, unlogged.
   */
  async function givenUpAfter(
    job: Job,
    counted: unknown,
    sent: unknown,
    notRead: (value: unknown, deliveries: number) => void,
    message?: string,
  ): Promise<number> {
    if (isCount(counted)) return counted;
    const deliveries = await countedSoFar(job, message);
    if (sent !== undefined) notRead(sent, deliveries);
    return deliveries;
  }

  /**
   * The deliveries the store counted for a job a queue gave up on without
   * saying how many (at least 1); the store failing is a 503 the queue
   * retries, as the give-up's own failure is.
   */
  async function countedSoFar(job: Job, message?: string): Promise<number> {
    try {
      // The message's own count where its deliveries named it, else the job's.
      const own = message === undefined
        ? 0
        : countOrThrow(message, await store.deliveries(message, now()));
      return Math.max(
        1,
        own || countOrThrow(
          jobIdOf(job),
          await store.deliveries(jobIdOf(job), now()),
        ),
      );
    } catch (error) {
      throw new Refusal(
        await failedUnexpectedly(
          `${jobIdOf(job).padEnd(16)} give-up failed`,
          error,
          [
            "The give-up could not be resolved now",
            "the queue will call again",
          ],
        ),
      );
    }
  }

  /**
   * The generic route's checks of its headers: configured, and an
   * `X-Signature` not missing or malformed (refused before the body is
   * read; its time is checked after its MAC, so that only the sender's own
   * is refused as `clock`). Returns the signature.
   */
  function deliveriesHeaders(c: Context): string | undefined {
    requireConfigured(
      webhookSecret !== undefined,
      "POST /v1/deliveries",
      "WEBHOOK_SECRET",
      "webhookSecret",
    );
    const header = c.req.header("x-signature");
    const forged = verifyHmac?.precheck(header);
    if (forged) throw unauthorized(forged.detail, forged.hint, forged.kind);
    return header;
  }

  /**
   * A generic delivery's body over the limit is never read whole, so its
   * MAC is never checked: a `t` out of time or in milliseconds is refused
   * as the header alone tells (401, in the words it gets whoever signed
   * it), ahead of the 413, so that a sender whose clock is off hears of
   * its clock whatever its body's size, as it does on QStash.
   */
  function refuseUntimely(header: string | undefined): void {
    const untimely = verifyHmac?.untimely(header);
    if (untimely) {
      throw unauthorized(untimely.detail, untimely.hint, untimely.kind);
    }
  }

  /**
   * A signed body encoded as JSON twice (a bridge that `JSON.stringify`s
   * its queue's message, itself the text of a delivery, a give-up or a
   * bare job), whose text holds a readable job: kept as the letter a job
   * that cannot be read gets, named by the job as sent (so a delivery and
   * its give-up keep one), naming its intent, with the count it carries;
   * then refused 400, saying to send the object itself. Refused with
   * nothing kept, a bridge that takes a 4xx as final dropped it, and its
   * give-up, encoded the same way, was refused too: the intent was left
   * with no job and no dead letter. `undefined` for a text of anything
   * else (the bridge's own mistake, naming no intent: refused as before).
   */
  async function keptTwice(
    text: string,
    claim: ReplayClaim | undefined,
  ): Promise<Response | undefined> {
    let inner: unknown;
    try {
      inner = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    } catch {
      return undefined;
    }
    if (typeof inner !== "object" || inner === null || Array.isArray(inner)) {
      return undefined;
    }
    const {
      job: wrapped,
      delivery,
      messageId: _id,
      gaveUp,
      ...bare
    } = inner as Record<string, unknown>;
    const job = "job" in inner ? wrapped : bare;
    // A misspelt job that names its intent is kept as it is sent alone.
    let intentId: unknown;
    let unread = "";
    try {
      intentId = parseJob(job).intentId;
    } catch (error) {
      intentId = intentIdSeen(job);
      if (!isIntentId(intentId)) return undefined;
      unread = ` Its job cannot be read either: ${(error as Error).message}.`;
    }
    const why = `The body is encoded as JSON twice (a JSON text of ${
      "job" in inner ? "a delivery" : "a bare job"
    } for intent ${intentId}): send the object itself, ${DELIVERY_EXAMPLE}, not its JSON.stringify.${unread}`;
    return await keepUnreadable(
      "generic",
      JSON.stringify(job),
      { attempt: attemptSeen(delivery, gaveUp ?? undefined), job },
      why,
      letterKept(delivery, gaveUp ?? undefined, (jobId) =>
        badInput(
          "deliveries",
          `${why} Kept as the dead letter ${jobId}: publish a readable job for intent ${intentId}, then discard the letter.`,
        ).response),
      claim,
    );
  }

  /**
   * A signed batch (a JSON array of deliveries, or an SQS Lambda event
   * `{"Records": […]}` passed on as it came): refused 400, as the route
   * takes one delivery per request, saying so and how to send them; each
   * element that holds a readable job (a delivery, a give-up or a bare
   * job, or the JSON text of one, as an SQS record's body is) is kept
   * first as the letter a job that cannot be read gets, named by the job
   * as sent, naming its intent, with the count it carries (an SQS
   * record's ApproximateReceiveCount where it carries none). Refused with
   * nothing kept, a bridge that takes a 4xx as final dropped every job of
   * the batch, and each intent was left with no job and no dead letter.
   * The request's replay claim rides with the last letter, so a letter
   * that fails (503) leaves the bridge's retry of the batch unrefused;
   * each letter before it carries a claim of its own (the request's key
   * and its place, `#0`, `#1`, …), which that retry finds taken and skips
   * the letter (kept by the try that failed), and a replay of the batch
   * writes none: written without one, a replay answered 401 rewrote them,
   * a letter discarded since coming back.
   * `undefined` for a body that is no batch.
   */
  async function keptBatch(
    body: unknown,
    claim: ReplayClaim | undefined,
  ): Promise<Response | undefined> {
    // Encoded twice too (a bridge that `JSON.stringify`s its batch): its
    // text read, and said so.
    const read = readTwice(body);
    if (read === undefined) return undefined;
    const { twice } = read;
    body = read.body;
    let elements: { element: unknown; count?: number }[];
    let what: string;
    let how: string;
    if (Array.isArray(body)) {
      elements = body.map((element: unknown) => ({ element }));
      what = `a JSON array of ${counted(body.length, "element")}`;
      how = "send each element as a request of its own";
    } else if (
      typeof body === "object" && body !== null && !("job" in body) &&
      Array.isArray((body as Record<string, unknown>).Records)
    ) {
      const records = (body as { Records: unknown[] }).Records;
      elements = records.map(sqsRecord);
      const sns = records.length > 0 && records.every(snsRecord);
      what = `an ${sns ? "SNS" : "SQS"} event of ${
        counted(records.length, "record")
      }, {"Records": …}`;
      how = sns
        ? "send each record's Sns.Message, parsed, as a request of its own"
        : "send each record's body, parsed, as a request of its own (its ApproximateReceiveCount as 'delivery', a number, and its messageId as 'messageId')";
    } else {
      return undefined;
    }
    const why =
      `The body is a batch (${twice}${what}): POST /v1/deliveries takes one delivery per request, ${DELIVERY_EXAMPLE}: ${how}.`;
    const jobs = new Map<
      string,
      {
        job: unknown;
        attempt: unknown;
        delivery: unknown;
        gaveUp: unknown;
        unread?: string;
      }
    >();
    let unkept = 0;
    for (const { element, count } of elements) {
      const seen = batchJob(element);
      if (seen === undefined) {
        unkept++;
        continue;
      }
      const raw = JSON.stringify(seen.job);
      if (!jobs.has(raw)) {
        jobs.set(raw, {
          ...seen,
          attempt: seen.attempt === undefined || seen.attempt === null
            ? count
            : seen.attempt,
        });
      }
    }
    if (jobs.size === 0) throw badInput("deliveries", why);
    const kept: string[] = [];
    let place = 0;
    for (const [raw, { job, attempt, delivery, gaveUp, unread }] of jobs) {
      let jobId: string | undefined;
      const last = ++place === jobs.size;
      const answer = await keepUnreadable(
        "generic",
        raw,
        { attempt, job },
        why,
        // Its count said where it cannot be read, as a bare job's is.
        letterKept(delivery, gaveUp, (id) => {
          jobId = id;
          return new Response(null);
        }),
        claim === undefined || last
          ? claim
          : { ...claim, key: `${claim.key}#${place - 1}` },
        last ? undefined : () => {
          // Kept by an earlier try of this request, under its name (as
          // relayer.keepUnreadable names a letter without an id).
          jobId = `generic/sha256-${
            bytesToHex(sha256(new TextEncoder().encode(raw))).slice(0, 32)
          }/unreadable`;
          return new Response(null);
        },
      );
      // Its letter failed: 503, the bridge sends the batch again.
      if (jobId === undefined) return answer;
      kept.push(
        `${jobId} for intent ${intentIdSeen(job)}${
          unread === undefined ? "" : ` (its job cannot be read: ${unread})`
        }`,
      );
    }
    return badInput(
      "deliveries",
      `${why} Kept ${
        kept.length === 1
          ? "1 job as a dead letter"
          : `${kept.length} jobs as dead letters`
      } (${
        kept.length > 5
          ? `${kept.slice(0, 5).join(", ")} and ${kept.length - 5} more`
          : kept.join(", ")
      })${
        unkept === 0
          ? ""
          : `; ${
            unkept === 1
              ? "1 element names no job and is"
              : `${unkept} elements name no job and are`
          } not kept`
      }: publish a readable job for each intent, then discard its letter.`,
    ).response;
  }

  /**
   * A signed SNS notification or EventBridge event ({@linkcode envelopeOf})
   * whose message holds a readable job (a delivery, a give-up or a bare
   * job, or the JSON text of one), as a bridge that passes its message on
   * as it came sends it: kept as the letter a job that cannot be read
   * gets, named by the job as sent (so the job sent alone, or in another
   * envelope, keeps the same one), naming its intent, with the count it
   * carries; then refused 400, saying how to send the job itself. Refused
   * with nothing kept, a bridge that takes a 4xx as final dropped it, and
   * the intent was left with no job and no dead letter. `undefined` for a
   * body that is no envelope, or one of no readable job (refused as
   * before).
   */
  async function keptEnvelope(
    body: unknown,
    claim: ReplayClaim | undefined,
  ): Promise<Response | undefined> {
    const read = readTwice(body);
    if (read === undefined) return undefined;
    const { twice } = read;
    body = read.body;
    const envelope = envelopeOf(body);
    const seen = envelope === undefined ? undefined : batchJob(envelope.inner);
    if (envelope === undefined || seen === undefined) return undefined;
    const { job, attempt, delivery, gaveUp, unread } = seen;
    const why =
      `The body is ${twice}${envelope.what}: POST /v1/deliveries ${envelope.how}.${
        unread === undefined ? "" : ` Its job cannot be read either: ${unread}.`
      }`;
    return await keepUnreadable(
      "generic",
      JSON.stringify(job),
      { attempt, job },
      why,
      letterKept(delivery, gaveUp, (jobId) =>
        badInput(
          "deliveries",
          `${why} Kept as the dead letter ${jobId}: publish a readable job for intent ${
            intentIdSeen(job)
          }, then discard the letter.`,
        ).response),
      claim,
    );
  }

  app.post("/v1/deliveries", async (c) => {
    const header = deliveriesHeaders(c);
    let read: { bytes: Uint8Array; text: string };
    try {
      read = await bodyOf(c, limitOf(c), within);
    } catch (error) {
      // Chunked, found over the limit as it was read (off the common path).
      if (error instanceof Refusal && error.response.status === 413) {
        refuseUntimely(header);
        throw tooLarge(maxBodyBytes);
      }
      throw error;
    }
    const { bytes, text: raw } = read;
    // Past the limit, in the room a bridge's give-up has
    // (GAVE_UP_HEADROOM_BYTES; off the common path): a body whose signature
    // does not verify, that is not JSON or that carries no `gaveUp` is
    // refused as a body over the limit is, 413 (a `t` out of time 401
    // ahead of it). A signed body that carries `gaveUp` is its signer's
    // give-up, read as one within the limit is: a fault in it (`gaveUp`
    // no object, `job` missing, a `delivery` beside it) is a 400 that
    // names it, as a 413 would send the bridge's author to its size.
    const over = bytes.byteLength > maxBodyBytes;
    let claim: ReplayClaim | undefined;
    if (verifyHmac) {
      // Over the bytes as sent (DESIGN §9: the raw body).
      const verified = verifyHmac(bytes, header);
      if (!verified.ok) {
        // Read and MAC'd here, a `t` out of time is refused as its MAC
        // says (the sender's clock, or unverified), in the same words as
        // refuseUntimely's: once it is in time, a give-up is taken.
        if (over && verifyHmac.untimely(header) === undefined) {
          throw tooLarge(maxBodyBytes);
        }
        throw unauthorized(verified.detail, verified.hint, verified.kind);
      }
      claim = verified.claim;
    }
    let body: unknown;
    try {
      body = parseJson(
        "deliveries",
        raw,
        DELIVERY_EXAMPLE,
        () => notJsonCause(c.req.raw.headers, bytes),
      );
    } catch (error) {
      if (over) throw tooLarge(maxBodyBytes);
      throw error;
    }
    const fields =
      (typeof body === "object" && body !== null ? body : {}) as Record<
        string,
        unknown
      >;
    const { job: rawJob, delivery } = fields;
    // An optional field sent as null is one left out: a serializer writes
    // every field a bridge's type has (Jackson's default, Go's pointers
    // without omitempty, Python's None), and an AMQP message without a
    // message_id property passes on a null. Refused 400, each of those
    // deliveries and give-ups stopped at the queue before the policy
    // decided, and a bridge that takes a 4xx as final dropped it. (A null
    // 'delivery' or 'gaveUp.deliveries' is a count left out: see below.)
    const gaveUp = fields.gaveUp ?? undefined;
    const rawMessageId = fields.messageId ?? undefined;
    if (over && gaveUp === undefined) throw tooLarge(maxBodyBytes);
    if (typeof body === "string") {
      const kept = await keptTwice(body, claim) ??
        await keptBatch(body, claim) ?? await keptEnvelope(body, claim);
      if (kept !== undefined) return kept;
    }
    const batch = rawJob === undefined
      ? await keptBatch(body, claim) ?? await keptEnvelope(body, claim)
      : undefined;
    if (batch !== undefined) return batch;
    if (rawJob === undefined) {
      const bare = typeof body === "object" && body !== null &&
        "intentId" in body;
      const why =
        `'job' is missing: the body of POST /v1/deliveries is ${DELIVERY_EXAMPLE}${
          bare ? '; this body looks like a bare job: wrap it in {"job": …}' : ""
        }.`;
      const named = bare ? fields.intentId : undefined;
      if (!isIntentId(named)) throw badInput("deliveries", why);
      // A signed bare job (a bridge that forwards the queue's message as
      // it came) names its intent as a job does: kept as the letter a job
      // that cannot be read gets, then refused. Refused with nothing kept,
      // a bridge that takes a 4xx as final dropped it, and the intent was
      // left with no job and no dead letter. Its letter has the count the
      // body carries, as a wrapped job's does (it had 1, whatever the
      // count), and is named by the body without the bridge's fields, so
      // each delivery of it and its give-up keep one letter (named by the
      // whole body, each count kept a letter of its own).
      const { delivery: _, messageId: _id, gaveUp: _g, ...bareJob } = fields;
      return await keepUnreadable(
        "generic",
        JSON.stringify(bareJob),
        { attempt: attemptSeen(delivery, gaveUp), job: body },
        why,
        letterKept(delivery, gaveUp, (jobId) =>
          badInput(
            "deliveries",
            `${why} Kept as the dead letter ${jobId}: publish a readable job for intent ${named}, then discard the letter.`,
          ).response),
        claim,
      );
    }
    let job: Job;
    try {
      job = parseJob(rawJob);
    } catch (error) {
      // A job that cannot be read is refused, as no retry can fix it, but
      // kept first as a dead letter, as every queue's is: it may be its
      // intent's only job. Refused with nothing kept, a bridge that takes
      // a 4xx as final dropped it, and its give-up, which carries the same
      // job, was refused too: the intent was left with no job and no
      // letter. Named by the job as sent, so each delivery of it, and its
      // give-up, keep one letter (a bridge's ids may repeat across jobs).
      // A job in an SNS notification or an EventBridge event (a bridge
      // that put its queue's message in 'job' as it came) is kept as the
      // letter of the job inside, naming its intent: kept as the
      // envelope, its letter named none.
      const enveloped = jobInEnvelope(rawJob);
      const why = enveloped === undefined
        ? (error as Error).message
        : `'job' is ${enveloped.what}: send the job it holds, ${enveloped.field}, as 'job'`;
      const seenJob = enveloped === undefined ? rawJob : enveloped.job;
      const intentId = intentIdSeen(seenJob);
      return await keepUnreadable(
        "generic",
        JSON.stringify(seenJob),
        { attempt: attemptSeen(delivery, gaveUp), job: seenJob },
        why,
        letterKept(delivery, gaveUp, (jobId) =>
          badInput(
            "deliveries",
            `${why}. Kept as the dead letter ${jobId}: ${
              isIntentId(intentId)
                ? `publish a readable job for intent ${intentId}, then discard the letter`
                : "it names no intent; discard the letter once you have found its payment"
            }.`,
          ).response),
        claim,
      );
    }
    if (gaveUp !== undefined) {
      // A bridge's give-up: its queue stopped delivering the job. Resolved
      // as QStash's failure callback is: poisoned as exhausted, the intent
      // resolved by its state, nothing sent; a repeat changes nothing.
      // A give-up it cannot read is refused, but its job is readable and
      // the give-up is the queue's last word of it: kept first as the
      // letter a job that cannot be read gets, naming its intent. Refused
      // with nothing kept, a bridge that takes a 4xx as final dropped it,
      // and the intent was left with no job and no dead letter.
      let deliveries: unknown;
      let messageId: unknown;
      let id: string | undefined;
      try {
        if (
          typeof gaveUp !== "object" || gaveUp === null || Array.isArray(gaveUp)
        ) {
          throw badInput(
            "deliveries",
            `'gaveUp' must be an object: current value is ${
              show(gaveUp)
            }. A give-up is ${GAVE_UP_EXAMPLE}.`,
          );
        }
        ({ deliveries, messageId } = gaveUp as Record<string, unknown>);
        if (
          (delivery !== undefined && delivery !== null) ||
          rawMessageId !== undefined
        ) {
          throw badInput(
            "deliveries",
            `'${
              delivery !== undefined && delivery !== null
                ? "delivery"
                : "messageId"
            }' and 'gaveUp' cannot both be given: a give-up is ${GAVE_UP_EXAMPLE}.`,
          );
        }
        // A give-up that names no message (its queue's message had no id:
        // an AMQP message without a message_id property) is resolved as
        // QStash's failure callback without its source id is: refused 400,
        // a bridge that takes a 4xx as final dropped it, or one that retries
        // it sent it until its DLQ's retention ran out, and the intent was
        // left with no job and no letter. A repeat of it cannot be told from
        // a give-up of another message of the job, and is logged so.
        id = bridgeMessageId(
          messageId,
          "'gaveUp.messageId'",
          `A give-up is ${GAVE_UP_EXAMPLE}.`,
        );
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        return await keepUnreadable(
          "generic",
          JSON.stringify(rawJob),
          { attempt: attemptSeen(delivery, gaveUp), job: rawJob },
          error.detail,
          letterKept(delivery, gaveUp, (jobId) =>
            badInput(
              "deliveries",
              `${error.detail} Kept as the dead letter ${jobId}: its queue gave up on the job of intent ${job.intentId}; publish a job for it (or resolve it), then discard the letter.`,
            ).response),
          claim,
        );
      }
      if (id === undefined) bridgeGaveUpUnnamed(job);
      // A bridge that let the store count its deliveries has no count of
      // its own: the store's, as for a Pub/Sub dead letter without one.
      // So is one whose count cannot be read (SQS's ApproximateReceiveCount
      // passed on as the string "5"): refused, a bridge that takes a 4xx
      // as final would drop the give-up, and nothing resolve the intent.
      const counted = await givenUpAfter(
        job,
        deliveries,
        deliveries === null ? undefined : deliveries,
        bridgeCountNotRead,
        id === undefined ? undefined : bridgeCountKey(jobIdOf(job), id),
      );
      bridgeGaveUpEarly(job, isCount(deliveries) ? deliveries : undefined);
      return await giveUp(
        "deliveries",
        job,
        counted,
        { queue: "generic", ...(id === undefined ? {} : { messageId: id }) },
        claim,
      );
    }
    // The bridge's queue's id of the message, if it sends one: its
    // deliveries then carry the marks its give-up writes, so a late copy
    // of a message given up on sends nothing, as on QStash.
    // One that is no text (a number, an object) is refused, but the job is
    // readable: kept first as the letter a job that cannot be read gets,
    // naming its intent (one per job, as a give-up's), and the 400 names
    // it. Refused with nothing kept, a bridge that takes a 4xx as final
    // dropped it, and the intent was left with no job and no dead letter.
    let messageId: string | undefined;
    try {
      messageId = bridgeMessageId(
        rawMessageId,
        "'messageId'",
        `A delivery is ${DELIVERY_EXAMPLE}.`,
      );
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      return await keepUnreadable(
        "generic",
        JSON.stringify(rawJob),
        { attempt: delivery, job: rawJob },
        error.detail,
        letterKept(delivery, gaveUp, (jobId) =>
          badInput(
            "deliveries",
            `${error.detail} Kept as the dead letter ${jobId}: send the delivery again with its messageId as a text (or none), or publish a job for intent ${job.intentId}, then discard the letter.`,
          ).response),
        claim,
      );
    }
    // Without a count of its own, a message that names itself is counted
    // by its id (as a Pub/Sub push is): counted by the job id, two
    // messages of one job (a bridge's duplicate, a job published again)
    // spent one count, and the job gave up in about half the policy's
    // window, before the rescue STUCK_AFTER promises.
    // A count that cannot be read (SQS's ApproximateReceiveCount passed
    // on as the string "5", a count from 0) is counted as one left out,
    // and logged, as QStash's and Pub/Sub's are: refused 400, the job
    // stopped at the queue before the policy decided, and a bridge that
    // takes a 4xx as final dropped it, its intent left with no job and no
    // letter. A null is one left out, as every optional field's null is
    // (a serializer that writes every field; RabbitMQ's x-delivery-count,
    // absent on a first delivery, passed on as it came): logged, a line a
    // minute told a bridge that did nothing wrong to send a count.
    const n = isCount(delivery) ? delivery : undefined;
    return await deliver(
      "deliveries",
      job,
      n,
      claim,
      n === undefined && messageId !== undefined
        ? bridgeCountKey(jobIdOf(job), messageId)
        : undefined,
      messageId === undefined ? undefined : { queue: "generic", messageId },
      undefined,
      n === undefined && delivery !== undefined && delivery !== null
        ? (counted) => deliveryCountNotRead(delivery, counted)
        : undefined,
    );
  });

  // Setup and admin: payments normally reach the store through the payments
  // API; this lets an operator (or a local trial) create one.
  app.post("/v1/intents", async (c) => {
    requireOps(c);
    const query = queryOf(c, []);
    if (query instanceof Response) return query;
    const text = await textOf(c, limitOf(c), within);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return problem(
        400,
        "bad-intent",
        "Bad intent",
        'The body is not JSON: send an intent such as {"id":"pi_0001","state":"authorized"} (\'state\' is "created" or "authorized").',
      );
    }
    const { id, state, hold } =
      (typeof body === "object" && body !== null ? body : {}) as Record<
        string,
        unknown
      >;
    const unknown =
      typeof body === "object" && body !== null && !Array.isArray(body)
        ? Object.keys(body).filter((key) =>
          key !== "id" && key !== "state" && key !== "hold"
        )
        : [];
    // No id, and a field the route does not take (a job's 'intentId'):
    // that field is the slip, not an id said to be undefined.
    if (!isIntentId(id) && (id !== undefined || unknown.length === 0)) {
      return problem(
        400,
        "bad-intent",
        "Bad intent",
        `'id' must be ${INTENT_ID_RULE}: current value is ${show(id)}.`,
      );
    }
    if (state !== undefined && state !== "created" && state !== "authorized") {
      return problem(
        400,
        "bad-intent",
        "Bad intent",
        '\'state\' must be "created" or "authorized".',
      );
    }
    if (hold !== undefined && hold !== "pending") {
      return problem(
        400,
        "bad-intent",
        "Bad intent",
        `'hold' must be "pending" (or left out): current value is ${
          show(hold)
        }.`,
      );
    }
    if (unknown.length > 0) {
      return problem(
        400,
        "bad-intent",
        "Bad intent",
        `${
          show(unknown[0])
        } is not a field of a new intent: send 'id', and 'state' ("created" or "authorized") and 'hold' ("pending") if you need them.`,
      );
    }
    let intent: Intent;
    try {
      intent = await store.createIntent({
        id: id as string,
        ...(state ? { state } : {}),
        ...(state === "authorized" || hold === "pending"
          ? { hold: "pending" as const }
          : {}),
      });
    } catch (error) {
      // Every field is checked above: a TypeError now is the store's own
      // failure (fetch throws one when the network fails), not the caller's.
      if (error instanceof ConflictError) {
        return problem(
          409,
          "exists",
          "Intent exists",
          `${error.message}: read it with GET /v1/intents/${id} (this route only creates, it changes no intent).`,
        );
      }
      return storeFailed(
        `creation of intent ${id}`,
        error,
        `Read it (GET /v1/intents/${id})`,
      );
    }
    log(
      `relayer intent ${intent.id} created by an operator: ${intent.state}, hold ${
        intent.hold ?? "none"
      }`,
    );
    return jsonAnswer({ intent }, 201);
  });

  app.get("/v1/intents/:id", async (c) => {
    requireOps(c);
    const query = queryOf(c, []);
    if (query instanceof Response) return query;
    const id = c.req.param("id");
    if (!isIntentId(id)) {
      return problem(
        400,
        "bad-intent-id",
        "Bad intent id",
        `An intent id is ${INTENT_ID_RULE}.`,
      );
    }
    const jobId = jobIdOf({ intentId: id, kind: "settle" });
    let read;
    try {
      const intent = intentOrNull(id, await store.getIntent(id));
      read = intent && {
        intent,
        deliveries: countOrThrow(jobId, await store.deliveries(jobId, now())),
        deadLetter: letterOrNull(jobId, await store.getDeadLetter(jobId)),
      };
    } catch (error) {
      return storeFailed(`read of intent ${id}`, error);
    }
    if (read === null) {
      return problem(
        404,
        "not-found",
        "No such intent",
        `There is no intent ${id}.`,
      );
    }
    return jsonAnswer(read);
  });

  // An operator's answer to a review (DESIGN §2): after checking the chain,
  // settle (the hold captured first) or fail (the hold voided first), in
  // one write on the version the operator read.
  app.post("/v1/intents/:id/resolve", async (c) => {
    requireOps(c);
    const query = queryOf(c, []);
    if (query instanceof Response) return query;
    // Numbered as it arrives: a send-ended warning said to another request
    // after this one arrived cannot have reached whoever sent this one.
    const arrival = resolveArrived();
    const id = c.req.param("id");
    const bad = (detail: string) =>
      problem(400, "bad-resolution", "Bad resolution", detail);
    if (!isIntentId(id)) return bad(`An intent id is ${INTENT_ID_RULE}.`);
    const text = await textOf(c, limitOf(c), within);
    const how =
      `{"to":"settled","version":"…"} once the chain shows one of its txs confirmed, or {"to":"failed","version":"…"} once it shows none can land; 'version' is the intent's as GET /v1/intents/${id} read it`;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      // Said as such: "'to' is undefined" would send a script that posted
      // a form, or a body cut short, looking for a field it did send.
      return bad(
        `The body is not JSON: send ${how} ('to' must be "settled" or "failed").`,
      );
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      const what = body === null
        ? "JSON null"
        : Array.isArray(body)
        ? "a JSON array"
        : `a JSON ${typeof body}`;
      return bad(`The body is ${what}, not an object: send ${how}.`);
    }
    const { to, version, nonceChecked, ...rest } = body as Record<
      string,
      unknown
    >;
    if (to !== "settled" && to !== "failed") {
      return bad(
        `Send ${how}. 'to' must be "settled" or "failed": current value is ${
          show(to)
        }.`,
      );
    }
    // A store's version is opaque (KvStore's is "<stamp>:<stamp>", a
    // store of one's own may use any text): only its shape is checked here,
    // the store compares it.
    if (typeof version !== "string" || !/^[\x21-\x7e]{1,200}$/.test(version)) {
      return bad(
        `'version' must be the intent's version as GET /v1/intents/${id} read it: current value is ${
          show(version)
        }.`,
      );
    }
    if (nonceChecked !== undefined && typeof nonceChecked !== "boolean") {
      return bad(
        `'nonceChecked' must be true (you looked the payment's nonce up on the chain), false or absent: current value is ${
          show(nonceChecked)
        }.`,
      );
    }
    const extra = Object.keys(rest);
    if (extra.length > 0) {
      return bad(
        `${
          show(extra[0])
        } is not a field of a resolution: send 'to' and 'version' (and 'nonceChecked').`,
      );
    }
    let intent;
    try {
      intent = intentOrNull(id, await store.getIntent(id));
    } catch (error) {
      return storeFailed(`read of intent ${id}`, error);
    }
    if (intent === null) {
      return problem(
        404,
        "not-found",
        "No such intent",
        `There is no intent ${id}.`,
      );
    }
    if (intent.state !== "needs_review") {
      // A script that timed out and sent its resolution again, or a second
      // operator, meets the first one's answer: say whether it is theirs.
      return problem(
        409,
        "not-in-review",
        "Not in review",
        intent.state === to
          ? `Intent ${id} is already ${to}: a resolution to ${to} landed before this one (an earlier send of this request, or another operator's), unless it was never in review; nothing to do.`
          : `Intent ${id} is ${intent.state}, not needs_review: only a payment in review is resolved by hand.${
            intent.state === "settled" || intent.state === "failed"
              ? ` Another resolution (or the relayer) moved it since it was read: read it again (GET /v1/intents/${id}).`
              : ""
          }`,
      );
    }
    if (intent.version !== version) {
      return problem(
        409,
        "changed",
        "Intent changed",
        `Intent ${id}'s version is ${intent.version}, not ${version}: it changed since it was read, or that was never its version ('version' is the intent's, intent.version in GET /v1/intents/${id}, not its dead letter's). Read it again, and decide on what it is now.`,
      );
    }
    if (to === "failed" && sendInFlight(relayer, id)) {
      // A queue's give-up waits only so long for a send of this process
      // before it puts the payment in review: a send that outlived its
      // lease (the clock stepped forward, a Sender slower than the lease)
      // still runs, and its tx may leave after the nonce was looked up.
      // Voided now, the hold would be released behind a payment made.
      // Whatever nonceChecked says: the chain cannot show it yet.
      return problem(
        409,
        "send-in-flight",
        "A send is in flight",
        `A send of intent ${id} is still running in this process (begun ${
          intent.broadcasting === null
            ? "before its review"
            : `at ${timeShown(intent.broadcasting)}`
        }): its tx may leave after the chain was checked. Wait until it ends (the relayer's log says "sent 0x…" or the send's error), look the intent's nonce up again, then resolve it.`,
        { "retry-after": "5" },
      );
    }
    if (to === "failed") {
      // And the txs this process's sends returned whose record failed: a
      // send that outlived the intent's settling ended after the review
      // began, its record failed (the store takes it on the intent in
      // review, so only a store error, say, leaves it out), and its tx may
      // have left after the operator looked the nonce up (while it ran).
      // On no record, it is
      // read here all the same, or a fail posted once it ended would void
      // the hold of the payment it made.
      const onRecord = intent.txHashes;
      const unrecorded = unrecordedTxHashes(relayer, id).filter((hash) =>
        !onRecord.includes(hash)
      );
      const hashes = [...onRecord, ...unrecorded];
      const seen = hashes.length > 0 ? await receiptsOf(hashes) : {};
      const offRecord = (hash: string) =>
        unrecorded.includes(hash)
          ? ` (on no record: a send of this process returned it after the payment left settling, and its record failed; the log says "sent ${hash}")`
          : "";
      if (seen.confirmed !== undefined) {
        return problem(
          409,
          "tx-confirmed",
          "A tx confirmed",
          `Intent ${id}'s tx ${seen.confirmed}${
            offRecord(seen.confirmed)
          } confirmed: the payment happened, so settle it ({"to":"settled"}) rather than fail it.`,
        );
      }
      if (seen.unread !== undefined) {
        return problem(
          503,
          "receipts-unread",
          "Receipts unread",
          `The receipt of ${seen.unread}${
            offRecord(seen.unread)
          } could not be read (the relayer's log says why), and a payment with a tx that confirmed must not fail: try again.${
            nonceChecked !== true && mayHaveLeft(intent)
              ? ` Unless a tx on record reads mined and reverted, failing it will then also need "nonceChecked":true (a send of it may have left with no hash kept): look its nonce up on the chain while the Sender is away.`
              : ""
          }`,
          { "retry-after": "5" },
        );
      }
      if (seen.pending !== undefined) {
        // Pending "may still be mined" (ReceiptStatus): voiding the hold
        // now could leave a payment made behind a voided hold.
        return problem(
          409,
          "tx-pending",
          "A tx is pending",
          `Intent ${id}'s tx ${seen.pending}${
            offRecord(seen.pending)
          } is pending, so it may still land: fail the payment only once the Sender answers it dropped (or it confirmed: then settle it).`,
        );
      }
      // A send of this process that ended waits for nothing only if its
      // write-ahead replaced none: `mayHaveSent` is set by a write-ahead
      // over another (a rescue, once another instance's clock passed that
      // send's lease), whose send may still run, and by a record since.
      // A rescue's write-ahead over a send (another instance's clock past
      // its lease) leaves only `mayHaveSent` behind once the rescue's
      // record clears `broadcasting`, the first send still running: a
      // review that may have sent waits all the same, keyed by its version
      // (a record since moves it, and the wait starts again). Nothing on
      // record tells that rescue from a send that ended (`mayHaveSent` is
      // all a write-ahead over another leaves), so every such review
      // waits, once per process and version.
      if (
        seen.reverted === undefined &&
        (intent.broadcasting !== null || intent.mayHaveSent) &&
        !(intent.broadcasting !== null && intent.mayHaveSent === false &&
          ownSendEnded(relayer, id, intent.broadcasting))
      ) {
        // The review carries a send's write-ahead with no record, and not
        // one of this process that ended: that send crashed, or it still
        // runs in some instance (another process, an isolate of a Worker,
        // this one before a restart), which this process's memory cannot
        // know, and its tx may leave after the nonce was looked up. The
        // write-ahead's time is of the sending instance's wall clock, the
        // one that stepped forward when a send outlived its lease: the
        // wait is counted on this process's monotonic clock from its first
        // sight of the write-ahead in a fail (writeAheadsSeen), and a send
        // ends within its lease. Not from a read of the intent: the
        // operator's look at the nonce after it may still come before the
        // send's tx left, and only a refusal says to look again once the
        // send ended. Whatever nonceChecked says. (A tx on record mined
        // and reverted spent the nonce every later send shares.)
        const leftMs = unrecordedFor(
          id,
          intent.broadcasting ?? `v${intent.version}`,
          sendBoundMs,
        );
        if (leftMs > 0) {
          return problem(
            409,
            "send-in-flight",
            "A send may be in flight",
            `${
              intent.broadcasting === null
                ? `Intent ${id} may have sent (mayHaveSent), and a send of it may still be running in some instance with no write-ahead on record (another instance, its clock past that send's lease, wrote ahead over it, and that rescue's record cleared it): its tx may leave after the chain was checked.`
                : `A send of intent ${id} was begun at ${
                  timeShown(intent.broadcasting)
                } (by the sending instance's clock) and its outcome is on no record: it may still be running in some instance, and its tx may leave after the chain was checked.`
            } A send ends within its lease: wait ${
              formatDuration(leftMs)
            } (Retry-After), read the intent again (GET /v1/intents/${id}: a tx the send returned is then on record), look its nonce up on the chain again, then resolve it.`,
            { "retry-after": String(Math.max(1, Math.ceil(leftMs / 1000))) },
          );
        }
      }
      if (
        seen.reverted === undefined && sendEndedUnrecorded(relayer, id, arrival)
      ) {
        // A send of this process that outlived the payment's settling ended
        // since the last fail was told so: its record failed, so the
        // version the operator read did not move, and its tx may have left
        // after the nonce was looked up (while it ran). Said once per such
        // send, and to every fail that arrived before that (a second
        // operator's, a retry sent while the first try ran): a fail that
        // arrives after is taken on the operator's word. (A tx on record
        // mined and reverted spent the nonce: nothing can land.)
        const kept = unrecordedTxHashes(relayer, id);
        return problem(
          409,
          "send-ended",
          "A send ended",
          `A send of intent ${id} run by this process ended after the payment left settling, and its outcome is on no record (the relayer's log has its "sent 0x…" or its error${
            kept.length > 0 ? `; txs on no record: ${kept.join(", ")}` : ""
          }): its tx may have left after you looked the nonce up. Look the nonce up again, then send this again.`,
        );
      }
      if (
        nonceChecked !== true && seen.reverted === undefined &&
        mayHaveLeft(intent)
      ) {
        // The receipts on record cannot clear it: a send whose answer was
        // lost kept no hash, and if it landed, the txs on record read
        // dropped because it used their nonce (and a tx that reads
        // dropped may itself still land while its nonce is unused). Only
        // a tx on record mined and reverted proves the nonce spent
        // without paying: every send of an intent after one that may have
        // left shares its nonce (Sender), and a nonce is mined once.
        return problem(
          409,
          "nonce-unchecked",
          "Nonce not checked",
          `A send of intent ${id} may have left with no hash kept (${
            hashlessWhy(intent)
          }): failing it voids the hold, and if that tx landed the payee is paid with the payer's funds released. Look its nonce up on the chain: if a tx of it confirmed, settle it ({"to":"settled"}); if none landed and none can (its nonce is used by a tx not of this payment, such as a cancel of your own on it, or every tx of it expired where your chain enforces an expiry: a dropped tx can still land while its nonce is unused), send this again with "nonceChecked":true.`,
        );
      }
    }
    const ledger = to === "settled" ? "capture" : "void";
    let resolved: Intent;
    try {
      resolved = writtenIntent(
        "transition",
        id,
        await store.transition(id, {
          from: "needs_review",
          to,
          version,
          at: now(),
          ledger,
        }),
      );
    } catch (error) {
      if (error instanceof ConflictError) {
        return problem(
          409,
          "refused",
          "Resolution refused",
          `Intent ${id} was not ${to}: ${error.message}.`,
        );
      }
      return storeFailed(
        `resolution of intent ${id}`,
        error,
        `Read the intent again (GET /v1/intents/${id})`,
      );
    }
    log(
      `relayer review of ${id} resolved by an operator: ${to}, its hold ${
        ledger === "capture" ? "captured" : "voided"
      } first`,
    );
    // The job's dead letter stays, the record of why the payment was in
    // review: the answer names it and how to remove it, or a burst of
    // reviews resolved leaves every letter listed as if still open.
    const jobId = jobIdOf({ intentId: id, kind: "settle" });
    let letter: StoredDeadLetter | null | undefined;
    try {
      letter = letterOrNull(jobId, await store.getDeadLetter(jobId));
    } catch (error) {
      // Resolved all the same: only the advice is the poorer for it.
      log(
        `relayer read of the dead letter of ${jobId} failed: ${
          describeError(error)
        }`,
      );
    }
    const discard = `DELETE /v1/dead-letters/${jobId}${
      letter ? `?version=${encodeURIComponent(letter.version)}` : ""
    }`;
    return jsonAnswer({
      intent: resolved,
      ...(letter === null ? { deadLetter: null } : {}),
      ...(letter
        ? {
          deadLetter: letter,
          next:
            `Discard the dead letter ${jobId}, the record of why the intent was in review, once nobody needs it: ${discard} (its text goes to the log).`,
        }
        : {}),
      ...(letter === undefined
        ? {
          next:
            `The dead letter of ${jobId} could not be read (the relayer's log says why): if GET /v1/intents/${id} shows one, discard it with ${discard}.`,
        }
        : {}),
    });
  });

  /**
   * Reads the receipts of `txHashes`, all at once and within 5 s in all
   * (up to 32: one after another, a slow signer would never let a review
   * fail): one confirmed, else one that could not be read, else one still
   * pending, else none of these, with one reverted if there is one. A
   * receipt the Sender declares poison (a tx mined but reverted) is read:
   * not confirmed, and no tx of its nonce can land any more.
   */
  async function receiptsOf(
    txHashes: readonly string[],
  ): Promise<
    { confirmed?: string; unread?: string; pending?: string; reverted?: string }
  > {
    // Past the budget, the Sender is told its requests are not wanted.
    const stop = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Its own value: a Sender that answered the text "late" is not the timer.
    const LATE = Symbol("late");
    const late = new Promise<typeof LATE>((resolve) => {
      timer = setTimeout(() => {
        // Late first: a Sender that rejects on the abort is still late.
        resolve(LATE);
        stop.abort(
          new DOMException(
            `The resolve route stopped waiting for receipts after ${
              RESOLVE_RECEIPTS_MS / 1000
            }s.`,
            "AbortError",
          ),
        );
      }, RESOLVE_RECEIPTS_MS);
    });
    try {
      const read = await Promise.all(txHashes.map(async (txHash) => {
        try {
          const status: unknown = await Promise.race([
            deps.sender.receipt(txHash, { signal: stop.signal }),
            late,
          ]);
          if (
            status === "confirmed" || status === "pending" ||
            status === "dropped"
          ) return status;
          // Anything else is a receipt this route cannot read, as the
          // relayer's deliveries take it: read as dropped, a Sender that
          // said "Confirmed" (or handed back its node's JSON) had a paid
          // payment failed and its hold voided.
          log(
            status === LATE
              ? `relayer receipt of ${txHash} failed: no answer within ${
                RESOLVE_RECEIPTS_MS / 1000
              }s`
              : `relayer receipt of ${txHash} failed: the Sender answered an unknown receipt status: ${
                show(status)
              }`,
          );
        } catch (error) {
          if (isPoison(error)) return "reverted";
          log(`relayer receipt of ${txHash} failed: ${describeError(error)}`);
        }
        return "unread";
      }));
      const first = (status: string) => {
        const i = read.indexOf(status as (typeof read)[number]);
        return i === -1 ? undefined : txHashes[i];
      };
      const confirmed = first("confirmed");
      if (confirmed !== undefined) return { confirmed };
      const unread = first("unread");
      if (unread !== undefined) return { unread };
      const pending = first("pending");
      if (pending !== undefined) return { pending };
      const reverted = first("reverted");
      return reverted === undefined ? {} : { reverted };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  app.get("/v1/dead-letters", async (c) => {
    requireOps(c);
    const query = queryOf(c, ["limit", "cursor"]);
    if (query instanceof Response) return query;
    const limitText = query.limit;
    // Digits only: Number() would also take "0x10", "1e1" and " 3 ".
    const limit = limitText === undefined
      ? 50
      : /^\d{1,4}$/.test(limitText)
      ? Number(limitText)
      : Number.NaN;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      return problem(
        400,
        "bad-limit",
        "Bad limit",
        `'limit' must be an integer in 1..1000 (default 50): current value is ${
          show(limitText)
        }.`,
      );
    }
    // Empty is a mistake, not the first page: a client that sends the last
    // page's null as "" would read the first page again, forever.
    if (query.cursor === "") {
      return problem(
        400,
        "bad-cursor",
        "Bad cursor",
        "'cursor' is empty: leave it out for the first page, or send the 'cursor' the previous page answered; a page whose 'cursor' is null was the last, so stop there.",
      );
    }
    const cursor = query.cursor ?? null;
    try {
      return jsonAnswer(
        deadLetterPage(await store.listDeadLetters({ limit, cursor })),
      );
    } catch (error) {
      // The store's refusal names 'cursor'; fetch throws a TypeError too
      // when the network fails, and that is the store's failure, a 503.
      if (error instanceof TypeError && error.message.includes("'cursor'")) {
        return problem(400, "bad-cursor", "Bad cursor", error.message);
      }
      return storeFailed("listing of dead letters", error);
    }
  });

  /**
   * Redrives the dead letter of a job id that must read `<intentId>/<kind>`:
   * anything else (too long for a store key, a dead letter that records a
   * message rather than a job) is a 400 problem before the store is asked.
   */
  async function redriveRoute(c: Context, jobId: string): Promise<Response> {
    requireOps(c);
    const named = letterNamed(jobId);
    if (named !== "job") {
      const detail = named === "unreadable"
        ? `${jobId} records an unreadable queue message, not a job: there is nothing to redrive; publish a readable job for the intent instead.`
        : `A job id is <intentId>/settle, the intent id ${INTENT_ID_RULE}: send it %2F-encoded, or as /v1/dead-letters/<intentId>/settle/redrive.`;
      return problem(400, "bad-job-id", "Bad job id", detail);
    }
    const query = queryOf(c, []);
    if (query instanceof Response) return query;
    const intentId = jobId.split("/")[0]!;
    if (deps.redriveTo === undefined) {
      // Advise a redelivery only where one can help.
      let letter: DeadLetter | null;
      let intent: Intent | null;
      try {
        letter = await store.getDeadLetter(jobId);
        if (letter === null) return noDeadLetter(jobId);
        intent = intentOrNull(
          letter.intentId,
          await store.getIntent(letter.intentId),
        );
      } catch (error) {
        return storeFailed(`redrive of ${jobId}`, error);
      }
      const refused = redriveRefusal(jobId, letter.intentId, intent?.state);
      if (refused !== null) {
        return problem(
          409,
          "cannot-redrive",
          "Cannot redrive",
          refused.message,
        );
      }
      return problem(
        503,
        "not-configured",
        "Redrive has no queue",
        `A redrive puts a fresh job on a queue, and this service has none (main.ts: set QSTASH_TOKEN, or KV_QUEUE=1 on a Deno KV file, as the local queue runs neither on Deno Deploy nor with KV_URL or DATABASE_URL; in code: give createApp a redriveTo). With another queue, deliver the job yourself with its count afresh: on POST /v1/deliveries as {"job":{"intentId":"${intentId}","kind":"settle"},"delivery":1}, or as a new Pub/Sub message. The dead letter stays as the record, and a new poisoning of the job replaces it.`,
      );
    }
    let job: Job | null;
    try {
      job = await relayer.redrive(jobId, deps.redriveTo);
    } catch (error) {
      if (error instanceof ConflictError) {
        // Only a redrive under way here ends by itself, in a publish and a
        // commit: asked again a second later, this one reads the letter
        // (404 once that one took it; a redrive if it failed and kept it).
        // Every other 409 stands until the operator acts, and says so.
        return problem(
          409,
          "cannot-redrive",
          "Cannot redrive",
          error.message,
          isUnderWay(error) ? { "retry-after": "1" } : {},
        );
      }
      // The queue or the store failed: worth another try, not a 500.
      log(`relayer redrive of ${jobId} failed: ${describeError(error)}`);
      const named = namedCause(error);
      return problem(
        503,
        "redrive-failed",
        "Redrive failed",
        named
          ? `The redrive of ${jobId} failed as ${named.as}: nothing changed in the store, and its dead letter stays (a job it queued before the store failed is harmless, as it only says "go and look"). ${named.todo}, then try again.`
          : isNotWritten(error)
          // The store's removal of the letter sent nothing, or was refused
          // whole: the letter stays, and no "if it did complete" applies.
          ? `The redrive of ${jobId} was not written (the relayer's log says why): its dead letter stays; try again. A job it queued before the store failed is harmless, as it only says "go and look".`
          : isNotRead(error)
          // Its read of the letter or the intent failed, before anything
          // was published or written (the relayer marks it so, whatever
          // the store).
          ? `The redrive of ${jobId} read nothing and wrote nothing (its read of the store failed: the relayer's log says why): its dead letter stays, and no job was queued; try again.`
          : `The redrive of ${jobId} did not complete (${
            isHeldBySession(error)
              ? `held up in the database: ${HELD_UP}`
              : "the relayer's log says why"
          }): try again. If it did complete after all, the retry answers 404 and the job is on its queue; a job that reaches the queue twice is harmless, as it only says "go and look".`,
        { "retry-after": queueRetryAfter(error) },
      );
    }
    if (job === null) return noDeadLetter(jobId);
    log(
      `relayer redrive of ${jobId}: its dead letter removed, a fresh job queued`,
    );
    // 'jobId' as POST /v1/jobs and the dead letters name it; 'job' stays
    // the job itself for the clients that read it so.
    return jsonAnswer({ job, jobId: jobIdOf(job), enqueued: true }, 202);
  }

  /** A 503 for an ops route whose store failed: nothing changed, try again. */
  /**
   * The 503 of an ops route whose store call failed. `reread`, for a
   * write: how to see whether it landed. A write whose answer was lost may
   * have landed (a payment failed, its hold voided), so its answer says
   * so, not that the store was never reached.
   */
  function storeFailed(
    what: string,
    error: unknown,
    reread?: string,
  ): Response {
    log(`relayer ${what} failed: ${describeError(error)}`);
    const named = namedCause(error);
    return problem(
      503,
      "store-failed",
      "Store unavailable",
      named
        ? `The ${what} failed as ${named.as}: nothing changed. ${named.todo}, then try again.`
        : isHeldBySession(error)
        ? `The ${what} was held up in the database (${HELD_UP}): nothing changed; try again.`
        : isNotWritten(error)
        ? `The ${what} was not written (the relayer's log says why): nothing changed; try again.`
        : isNotRead(error)
        // A read refused before it reached the data (a Deno KV handle or
        // a PostgresStore closed under the route), or a discard's read
        // that failed before its first write (the relayer marks it so): a
        // route reads before it writes, so nothing of it ran, whatever it
        // was about to write.
        ? `The ${what} read nothing and wrote nothing (its read of the store failed: the relayer's log says why): nothing changed; try again.`
        : reread === undefined
        ? `The ${what} could not reach the store (the relayer's log says why): try again.`
        : `The ${what} failed before the store answered (the relayer's log says why): it may have landed or not. ${reread} before you try again.`,
      { "retry-after": "5" },
    );
  }

  function noDeadLetter(jobId: string): Response {
    return problem(
      404,
      "not-found",
      "No such dead letter",
      `There is no dead letter for ${jobId} (redriven, discarded or resolved since, or never kept): GET /v1/dead-letters lists those there are.`,
    );
  }

  app.post(
    "/v1/dead-letters/:jobId/redrive",
    (c) => redriveRoute(c, c.req.param("jobId")),
  );
  app.post(
    "/v1/dead-letters/:intentId/:kind/redrive",
    (c) => redriveRoute(c, `${c.req.param("intentId")}/${c.req.param("kind")}`),
  );
  // An unreadable message's letter by the three segments its DELETE takes:
  // refused as the letter of no job (400), not a 404 as if no route answered.
  app.post(
    "/v1/dead-letters/:queue/:name/unreadable/redrive",
    (c) =>
      redriveRoute(
        c,
        `${c.req.param("queue")}/${c.req.param("name")}/unreadable`,
      ),
  );

  /**
   * The query parameters of an ops route that takes `names`, each at most
   * once, or a 400 problem: a parameter given twice would have its first
   * value taken and the other dropped unsaid, and one misspelled
   * (`?versoin=`) would leave out the check it was meant to ask for. A
   * route that takes none refuses any, for the same reason: a redrive
   * sent `?version=`, as a discard takes it, would redrive whatever letter
   * is there, not only the one read.
   */
  function queryOf<N extends string>(
    c: Context,
    names: readonly N[],
  ): Partial<Record<N, string>> | Response {
    const query: Partial<Record<N, string>> = {};
    for (const [name, values] of Object.entries(c.req.queries())) {
      if (!(names as readonly string[]).includes(name)) {
        return problem(
          400,
          "bad-query",
          "Bad query",
          names.length === 0
            ? `${
              show(name)
            } is not a parameter of this route, which takes none: send it without a query.`
            : `${show(name)} is not a parameter of this route: send only ${
              names.map((n) => `'${n}'`).join(" and ")
            }.`,
        );
      }
      if (values.length > 1) {
        return problem(
          400,
          `bad-${name}`,
          `Bad ${name}`,
          `'${name}' is given ${values.length} times: send it once.`,
        );
      }
      query[name as N] = values[0]!;
    }
    return query;
  }

  /**
   * Removes a dead letter no job can act on (`Relayer.discard`): 200 with
   * the letter removed, 400 for an id no letter can have (checked before
   * it reaches the store or the log), 404 when there is none, 409 when a
   * job can still move its intent, it is in review, or the letter changed
   * since `?version=` was read.
   */
  async function discardRoute(c: Context, jobId: string): Promise<Response> {
    requireOps(c);
    if (letterNamed(jobId) === null) {
      return problem(
        400,
        "bad-job-id",
        "Bad job id",
        `A dead letter's job id is <intentId>/settle or <queue>/<id>/unreadable, the intent id or message id ${INTENT_ID_RULE}: take it from GET /v1/dead-letters.`,
      );
    }
    const query = queryOf(c, ["version"]);
    if (query instanceof Response) return query;
    const version = query.version;
    if (version === "") {
      return problem(
        400,
        "bad-version",
        "Bad version",
        "'version' is empty: take it from GET /v1/dead-letters, or leave it out to remove whatever letter is there.",
      );
    }
    // Opaque, as an intent's version is to the resolve route: only its
    // shape is checked here, and the store compares it.
    if (version !== undefined && !/^[\x21-\x7e]{1,200}$/.test(version)) {
      return problem(
        400,
        "bad-version",
        "Bad version",
        `'version' must be the dead letter's version as GET /v1/dead-letters lists it (1-200 printable ASCII characters), or left out to remove whatever letter is there: current value is ${
          show(version)
        }.`,
      );
    }
    let removed: DeadLetter | null;
    try {
      removed = await relayer.discard(
        jobId,
        version === undefined ? {} : { version },
      );
    } catch (error) {
      if (error instanceof ConflictError) {
        return problem(409, "cannot-discard", "Cannot discard", error.message);
      }
      return storeFailed(
        `discard of ${jobId}`,
        error,
        `Read the dead letter again (GET /v1/dead-letters)`,
      );
    }
    if (removed === null) return noDeadLetter(jobId);
    // The letter was the record: what it said stays in the log.
    log(
      `relayer discarded the dead letter of ${jobId} (${removed.cause}, ${removed.deliveries} deliver${
        removed.deliveries === 1 ? "y" : "ies"
      }: ${removed.reason}; ${removed.resolution})`,
    );
    return jsonAnswer({ discarded: removed });
  }

  app.post("/v1/jobs", async (c) => {
    requireOps(c);
    const query = queryOf(c, []);
    if (query instanceof Response) return query;
    // The job first: a bad one is the caller's to fix, queue or not.
    const job = jobFrom(
      "deliveries",
      parseJson("deliveries", await textOf(c, limitOf(c), within)),
    );
    if (!deps.enqueue) {
      return problem(
        503,
        "no-local-queue",
        "No queue",
        "This service has no queue to put jobs on (main.ts: set QSTASH_TOKEN, or KV_QUEUE=1 on a Deno KV file, as the local queue runs neither on Deno Deploy nor with KV_URL or DATABASE_URL; in code: give createApp an enqueue).",
      );
    }
    // A job for no intent would only retry "not found" until poisoned.
    let intent;
    try {
      intent = intentOrNull(job.intentId, await store.getIntent(job.intentId));
    } catch (error) {
      return storeFailed(`read of intent ${job.intentId}`, error);
    }
    if (intent === null) {
      return problem(
        404,
        "not-found",
        "No such intent",
        `There is no intent ${job.intentId}: create it first (POST /v1/intents), then put its job on the queue.`,
      );
    }
    try {
      await deps.enqueue(job);
    } catch (error) {
      log(`relayer enqueue of ${jobIdOf(job)} failed: ${describeError(error)}`);
      return problem(
        503,
        "enqueue-failed",
        "Enqueue failed",
        `The queue did not take ${
          jobIdOf(job)
        } (the relayer's log says why): try again. A job that reaches the queue twice is harmless, as it only says "go and look".`,
        { "retry-after": queueRetryAfter(error) },
      );
    }
    log(`relayer job ${jobIdOf(job)} queued by an operator`);
    // 'job' is the id here (as in a delivery's answer), kept for the
    // clients that read it; 'jobId' names it as a redrive's answer and the
    // dead letters do.
    return jsonAnswer(
      { job: jobIdOf(job), jobId: jobIdOf(job), enqueued: true },
      202,
    );
  });

  // A known path with the wrong method is 405, not 404. A GET route
  // answers HEAD too (Hono runs it and drops the body), so its Allow says
  // so (RFC 9110 §10.2.1: the methods the resource supports).
  const allowed: Record<string, string> = {
    "/healthz": "GET, HEAD",
    "/readyz": "GET, HEAD",
    "/v1/qstash": "POST",
    "/v1/qstash/failed": "POST",
    "/v1/pubsub": "POST",
    "/v1/pubsub/dead-letter": "POST",
    "/v1/deliveries": "POST",
    "/v1/jobs": "POST",
    "/v1/intents": "POST",
    "/v1/intents/:id": "GET, HEAD",
    "/v1/intents/:id/resolve": "POST",
    "/v1/dead-letters": "GET, HEAD",
    "/v1/dead-letters/:jobId/redrive": "POST",
    "/v1/dead-letters/:intentId/:kind/redrive": "POST",
    "/v1/dead-letters/:queue/:name/unreadable/redrive": "POST",
  };
  // An ops path's 405 says what its route does and names the routes beside
  // it, with the path as sent: a GET of a dead letter's path is told where
  // the letters are read, a DELETE of a redrive path how to remove the
  // letter. Run only on a 405.
  const letterRoutes = (c: Context, redrive: boolean): [string, string] => {
    const letter = redrive
      ? c.req.path.slice(0, -"/redrive".length)
      : c.req.path;
    return redrive
      ? [
        `POST ${c.req.path} redrives the letter`,
        `To read the dead letters: GET /v1/dead-letters. To remove this one: DELETE ${letter}.`,
      ]
      : [
        `DELETE ${letter} removes the letter`,
        `To read the dead letters: GET /v1/dead-letters. To redrive this one: POST ${letter}/redrive.`,
      ];
  };
  const intentOf = (c: Context) => c.req.path.replace(/\/resolve$/, "");
  const opsRoutes: Record<string, (c: Context) => [string, string]> = {
    "/v1/intents": () => [
      "POST /v1/intents creates an intent",
      "To read one: GET /v1/intents/<id>.",
    ],
    "/v1/intents/:id": (c) => [
      `GET ${intentOf(c)} reads the intent`,
      `To resolve it: POST ${intentOf(c)}/resolve.`,
    ],
    "/v1/intents/:id/resolve": (c) => [
      `POST ${c.req.path} resolves the intent`,
      `To read it: GET ${intentOf(c)}.`,
    ],
    "/v1/jobs": () => [
      "POST /v1/jobs queues a job",
      "To read an intent and its deliveries: GET /v1/intents/<id>.",
    ],
    "/v1/dead-letters": () => [
      "GET /v1/dead-letters lists the dead letters",
      "To redrive one: POST /v1/dead-letters/<jobId>/redrive. To remove one: DELETE /v1/dead-letters/<jobId>.",
    ],
    "/v1/dead-letters/:jobId/redrive": (c) => letterRoutes(c, true),
    "/v1/dead-letters/:intentId/:kind/redrive": (c) => letterRoutes(c, true),
    "/v1/dead-letters/:queue/:name/unreadable/redrive": (c) =>
      letterRoutes(c, true),
    "/v1/dead-letters/:jobId": (c) => letterRoutes(c, false),
    "/v1/dead-letters/:intentId/:kind": (c) => letterRoutes(c, false),
    "/v1/dead-letters/:queue/:name/unreadable": (c) => letterRoutes(c, false),
  };
  const notAllowed = (path: string, allow: string) => {
    const methods = allow.split(", ");
    const routes = opsRoutes[path];
    const handler = (c: Context) => {
      // HTTP's methods are case-sensitive (RFC 9110 §9.1): `curl -X post`
      // sends "post", which is not POST. Said so, or the answer reads as
      // if the route took no POST at all.
      const upper = c.req.method.toUpperCase();
      const hint = upper !== c.req.method && methods.includes(upper)
        ? ` Methods are case-sensitive: send ${upper}.`
        : "";
      const answer = (res: Response) =>
        c.req.method === "HEAD" ? withLength(res) : res;
      if (routes !== undefined) {
        const [does, beside] = routes(c);
        return answer(problem(
          405,
          "method-not-allowed",
          "Method not allowed",
          `${path} answers ${allow} only (${does}).${hint} ${beside}`,
          { allow },
        ));
      }
      return answer(problem(
        405,
        "method-not-allowed",
        "Method not allowed",
        `${path} answers ${allow} only.${hint}`,
        { allow },
      ));
    };
    wrongMethod.add(handler);
    app.all(path, handler);
  };
  for (const [path, allow] of Object.entries(allowed)) notAllowed(path, allow);

  // After the redrive routes' 405s, so that a DELETE of a redrive path is
  // a 405 too, not a discard of a letter named "…/redrive".
  const discardPaths: Record<string, (c: Context) => string> = {
    "/v1/dead-letters/:jobId": (c) => c.req.param("jobId") ?? "",
    "/v1/dead-letters/:intentId/:kind": (c) =>
      `${c.req.param("intentId")}/${c.req.param("kind")}`,
    "/v1/dead-letters/:queue/:name/unreadable": (c) =>
      `${c.req.param("queue")}/${c.req.param("name")}/unreadable`,
  };
  for (const [path, jobId] of Object.entries(discardPaths)) {
    app.delete(path, (c) => discardRoute(c, jobId(c)));
    notAllowed(path, "DELETE");
  }

  // A path that is a route's but for a slash at its end or a doubled one
  // (a base URL ending in "/" joined to "/v1/…"): the 404 names the route,
  // so whoever set the queue up sees why it is refused (a queue retries a
  // 404 to its end). Only run on a 404, off every route's path.
  const routePatterns = [...Object.keys(allowed), ...Object.keys(discardPaths)]
    .map((path) => new RegExp(`^${path.replace(/:[A-Za-z]+/g, "[^/]+")}$`));
  app.notFound((c) => {
    const path = c.req.path;
    const tidy = path.replace(/\/{2,}/g, "/").replace(/(.)\/$/, "$1");
    const hint = tidy !== path && routePatterns.some((r) => r.test(tidy))
      ? ` Send it to ${tidy}: the routes take no slash at the end and no doubled slash.`
      : "";
    // A HEAD answers the headers its GET would (RFC 9110 §9.3.2), so its
    // Content-Length is that of the body naming GET; the body is dropped.
    const head = c.req.method === "HEAD";
    const res = problem(
      404,
      "not-found",
      "Not found",
      `Nothing answers ${head ? "GET" : c.req.method} ${path}.${hint}`,
    );
    return head ? withLength(res) : res;
  });

  /**
   * Per route, status and, for a 401, kind of refusal: when a refusal was
   * last logged, and how many came since. Its keys are bounded: the routes'
   * patterns, ten methods, four statuses and seven kinds.
   */
  const refusals = new Map<string, { at: number; since: number }>();
  const refusalStepBack = stepBackPace();

  /**
   * One line for a refused request (401, 408, 413, and 503 for a route
   * that is off), at most once a minute per route and status, and for a
   * 401 per kind of refusal too (its `kind`, from a fixed set: a forger's
   * unsigned request at the start of each minute does not hide a queue's
   * token ours but for another URL, or a clock off), with the count since
   * the last line of that route, status and kind. The route is the pattern
   * it matched (`pattern`, else the handler's), never the path as sent: an
   * id in the path is the caller's to choose; so is a method other than
   * HTTP's own, named `OTHER`. The detail is ours, and never holds a secret.
   */
  function logRefusal(
    c: Context,
    refusal: Refusal,
    pattern: string = c.req.routePath,
  ): void {
    const method = LOGGED_METHODS.has(c.req.method) ? c.req.method : "OTHER";
    const route = `${method} ${pattern}`;
    const status = refusal.response.status;
    const at = now();
    const kind = refusal.kind;
    const key = kind === undefined
      ? `${status} ${route}`
      : `${status} ${route} ${kind}`;
    const seen = refusals.get(key);
    // A clock stepped back behind the last line ends the minute, once a
    // minute at most (stepBackPace: a clock that flaps back and forth
    // would otherwise log every refusal).
    if (
      seen !== undefined &&
      (at >= seen.at
        ? at - seen.at < REFUSALS_LOG_INTERVAL_MS
        : !refusalStepBack(REFUSALS_LOG_INTERVAL_MS))
    ) {
      seen.since++;
      return;
    }
    const more = seen === undefined || seen.since === 0
      ? ""
      : kind === undefined
      ? ` (${seen.since + 1} refused since the last line)`
      : ` (${seen.since + 1} refused for ${
        REFUSAL_KINDS[kind]
      } since the last such line)`;
    refusals.set(key, { at, since: 0 });
    log(`relayer ${route} refused ${status}${more}: ${refusal.detail}`);
  }

  app.onError((error, c) => {
    if (error instanceof Refusal) {
      const status = error.response.status;
      if (
        status === 401 || status === 408 || status === 413 ||
        error instanceof NotConfigured
      ) {
        logRefusal(c, error);
      }
      return error.response;
    }
    if (error instanceof HTTPException) {
      return problem(
        error.status,
        "http",
        "Request refused",
        error.message || "The request was refused.",
      );
    }
    // Never a stack trace over HTTP; the log says what happened.
    log(
      `relayer ${c.req.method} ${c.req.path} failed: ${describeError(error)}`,
    );
    return problem(
      500,
      "internal",
      "Internal error",
      "The relayer failed unexpectedly; see its logs.",
    );
  });

  return Object.assign(app, { relayer });
}

export {
  ConfigError,
  type DatabaseTls,
  loadConfig,
  offLoopbackRefusal,
  type RouteOptions,
  routeOptions,
} from "./config.ts";
export { type WorkerConfig, workerConfig } from "./_settings.ts";
export {
  type Publisher,
  qstashPublisher,
  type QStashPublisherOptions,
} from "./qstash_publisher.ts";
export {
  GOOGLE_CERTS_URL,
  googleJwks,
  type GoogleJwksOptions,
} from "./google_jwks.ts";
export type { Config } from "./config.ts";
