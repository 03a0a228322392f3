/**
 * The service's settings, read from environment variables and checked
 * before anything starts: a bad or missing setting stops the service with
 * one line that names it. Pure: takes the variables as a record, so it runs
 * (and is tested) anywhere.
 *
 * | variable | meaning |
 * |---|---|
 * | `QSTASH_CURRENT_SIGNING_KEY`, `QSTASH_NEXT_SIGNING_KEY` | QStash's signing keys (both, or neither; no space or line break at either end, not wrapped in quotes; a local QStash's published keys only with a `PUBLIC_URL` on loopback, and never on Deno Deploy) |
 * | `PUBLIC_URL` | the service's public base URL, without a route (`/v1/qstash`), a query or a fragment; QStash signs `PUBLIC_URL/v1/qstash` |
 * | `PUBSUB_AUDIENCE` | the OIDC audience of the Pub/Sub push subscription |
 * | `PUBSUB_SERVICE_ACCOUNT` | the service account Pub/Sub pushes as (required with `PUBSUB_AUDIENCE`) |
 * | `PUBSUB_DEAD_LETTER_AUDIENCE` | the OIDC audience of the push subscription on the dead-letter topic (`POST /v1/pubsub/dead-letter`); not `PUBSUB_AUDIENCE`'s |
 * | `QSTASH_TOKEN` | publish jobs (`POST /v1/jobs`, redrive) through QStash, with `QSTASH_RETRIES` and the failure callback |
 * | `QSTASH_URL` | optional: QStash's API base, without `/v2/publish` (default `https://qstash.upstash.io`; plain http on loopback only, as `QSTASH_TOKEN` goes with every publish) |
 * | `WEBHOOK_SECRET` | the HMAC secret of `POST /v1/deliveries` (16+ characters, no space or line break at either end, not wrapped in quotes; not the docs' local-run value on Deno Deploy, with a `PUBLIC_URL` off this machine, or where `main.ts` listens off loopback) |
 * | `WEBHOOK_SECRET_NEXT` | optional: a second secret the route also takes while the senders move to it (a rotation; the docs' local-run value refused as `WEBHOOK_SECRET`'s) |
 * | `OPS_TOKEN` | the bearer token of the ops routes (16+ characters), not equal to any signing secret or `QSTASH_TOKEN`, nor the docs' local-run value on Deno Deploy, with a `PUBLIC_URL` off this machine, or where `main.ts` listens off loopback |
 * | `OPS_TOKEN_NEXT` | optional: a second token the ops routes also take while the clients move to it (a rotation; only with `OPS_TOKEN`, by its rules) |
 * | `SENDER_URL` | the signer service (`POST /send`, `GET /receipt/:txHash`) |
 * | `SENDER_TIMEOUT` | optional: how long a signer call may take (default `10s`; a duration, as the policy's below) |
 * | `KV_PATH` / `KV_URL` | a SQLite file (default `./data/relayer.kv`; refused on Deno Deploy, where it would be each isolate's own) or a KV Connect URL |
 * | `DENO_KV_ACCESS_TOKEN` | with `KV_URL`: KV Connect's access token (what a header can carry: printable ASCII, no line break, no space at either end) |
 * | `DENO_DEPLOYMENT_ID`, `DENO_KV_PATH_PREFIX` | set by Deno Deploy, not by you: the first says the service runs there (the local queue, `RELAYER_INSECURE_DEV` and the docs' local-run secrets are refused, the drain is shorter); the second is read before `DENO_KV_DEFAULT_PATH` |
 * | `DENO_KV_DEFAULT_PATH` | set by Deno Deploy, not by you: the Deno KV database assigned to the app. On Deploy, with neither `KV_URL` nor `DATABASE_URL`, the service refuses to start without one (an isolate's own store instead would lose its state and share none) |
 * | `KV_QUEUE` | `1`: also consume the local Deno KV queue on a KV file (not with `KV_URL` or `DATABASE_URL`, and refused on Deno Deploy); Deno KV delays a message at most 30 days, so `CAP` is then at most `720h`, and `LEASE` plus twice `CLOCK_SKEW` (a busy delivery's wait) at most that too |
 * | `DATABASE_URL` | a PostgreSQL URL (`postgres://user:password@host:5432/db`): keep the state there (PostgresStore) instead of Deno KV; add `?sslmode=verify-full` for TLS (see docs/postgres.md) |
 * | `MAX_DELIVERIES`, `BASE`, `CAP`, `JITTER`, `STUCK_AFTER`, `LEASE`, `CLOCK_SKEW` | policy overrides (durations as `5s`, `2m` or milliseconds; in every duration setting, `SENDER_TIMEOUT`, `BODY_TIMEOUT` and `PUBSUB_*` too, a plain number from 1 to 999 is refused, as seconds without their unit, so write `250ms`) |
 * | `MAX_BODY_BYTES` | optional: the request body limit (default 65536, at least 1024) |
 * | `BODY_TIMEOUT` | optional: how long a route waits for a request's body once it begins to read it (default `30s`); one not all there by then is refused 408 |
 * | `QSTASH_RETRIES` | the `Upstash-Retries` your publishes carry, 0–100 and at most your QStash plan's retry cap (default `MAX_DELIVERIES − 1`, or more where the failure callback needs it: 2 at the least with the default `LEASE`) |
 * | `PUBSUB_MAX_DELIVERY_ATTEMPTS` | the subscription's dead-letter policy, 5–100 (unset: no dead-letter policy); set, with `PUBSUB_AUDIENCE`, it needs `PUBSUB_DEAD_LETTER_AUDIENCE`, which needs it (without `PUBSUB_AUDIENCE`, unread, as the backoffs and retention below) |
 * | `PUBSUB_MIN_BACKOFF`, `PUBSUB_MAX_BACKOFF` | the subscription's retry policy (defaults `10s` and `10m`, each at most `10m`) |
 * | `PUBSUB_MESSAGE_RETENTION` | the subscription's message retention, `10m` to `744h` (unset: Pub/Sub's default, 7 days, checked where the subscription has no dead-letter policy) |
 * | `CLOUDFLARE_MAX_RETRIES` | optional: the Cloudflare Queues consumer's `max_retries`, 0–100, checked when set. Read by a Cloudflare Worker only, as each `CLOUDFLARE_*` below: `main.ts` leaves them out of its start's check (`serviceSettings`) and names each as ignored, with a Worker's refusal where `loadConfig` refuses it |
 * | `CLOUDFLARE_DLQ_MAX_RETRIES` | optional: the dead-letter queue consumer's `max_retries`, 0–100; refused, as the queue handler refuses it, where its retries span less than 14 days (a Worker, `workerConfig`, takes one not given as Cloudflare's default of 3, which is refused) |
 * | `CLOUDFLARE_MESSAGE_RETENTION`, `CLOUDFLARE_DLQ_MESSAGE_RETENTION` | optional: the jobs queue's and the dead-letter queue's message retention, whole seconds from `1m` to `336h` (Cloudflare's default is 4 days; with a unit: a plain number is refused, as Wrangler's `--message-retention-period-secs` counts seconds); refused, as the queue handler refuses it, where it ends while the handler may still retry a message there (counted with `CLOUDFLARE_MAX_RETRIES`, 3 unless set, and `CLOUDFLARE_DELIVERY_DELAY`; unset, counted as 24 h, the least a plan keeps unless set, the Workers Free plan's, where any `CLOUDFLARE_*` setting is set, as a Worker's `workerConfig` sets `CLOUDFLARE_MAX_RETRIES`) |
 * | `CLOUDFLARE_DELIVERY_DELAY` | optional: the jobs queue's delivery delay (or its producer binding's `delivery_delay`, or the longest `delaySeconds` a producer sends with), whole seconds from `0` to `24h` (with a unit, as for the retentions: `--delivery-delay-secs` counts seconds), counted in its retention and the dead-letter queue's (a message moves there with its age), counted from the send (Cloudflare does not say it waits for a first delivery; unset: 0) |
 * | `RELAYER_INSECURE_DEV` | `1`: accept unsigned requests on every route whose keys are not set, the ops routes too without `OPS_TOKEN`; for local runs only: refused, as the docs' local-run secrets are, on Deno Deploy, with a `PUBLIC_URL` off this machine, where `main.ts` listens off loopback, or by a Worker's `nameUnread` once a request comes to it from off this machine |
 *
 * @module
 */

import { ROUTE_AT_END } from "./_routes.ts";
import { plainMsRefusal } from "../policy/_plain_ms.ts";
import { parseDuration } from "../policy/parse_duration.ts";
import { DEFAULT_POLICY, definePolicy, type Policy } from "../policy/policy.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { rescueWindow } from "../policy/rescue_window.ts";
import type { Jitter } from "../policy/jitter.ts";
import { checkQueue } from "../policy/check_queue.ts";
import { deliveriesText } from "../policy/_count.ts";
import {
  qstashCallbackSpanMs,
  qstashDefaultRetries,
  qstashRetriesNeed,
} from "../policy/_qstash_callback.ts";
import {
  busyWaitMs,
  deadLetterEndMs,
  PUBSUB_DEFAULT_RETENTION_MS,
  retentionEnoughMs,
  retentionNeedMs,
  retentionShort,
} from "../policy/_retention.ts";
import {
  CLOUDFLARE_MAX_DELIVERY_DELAY_MS,
  CLOUDFLARE_MAX_RETENTION_MS,
  CLOUDFLARE_MIN_RETENTION_MS,
  cloudflareDeadLetterRetriesNeeded,
  cloudflareDeadLetterSpanSeconds,
  cloudflareDeliveryDelayAllowed,
  cloudflareRetentionAllowed,
  cloudflareRetentionRefusal,
} from "../policy/_cloudflare_retention.ts";
import type { QueueLimits } from "../policy/queue.ts";
import type { AppDeps } from "./app.ts";
import {
  insecureDevRefusal,
  insecureOpenRoutes,
  loopbackWithoutDns,
  MIN_SECRET,
  onLoopback,
  publishedQStashKey,
  publishedSecret,
  type PubSubKeys,
  readableSetting,
} from "./_auth.ts";
import { textSaid } from "./_url_said.ts";
import { CLAIM_GRACE_MS } from "../store/_rules.ts";
import { DEFAULT_CLOCK_SKEW_MS as RELAYER_CLOCK_SKEW_MS } from "../relayer/_options.ts";
import { DEFAULT_LEASE_MS } from "../relayer/_sends.ts";
import { googleJwks } from "./google_jwks.ts";
import { assertOptionNames, MAX_TIMER_MS, show } from "../policy/_validate.ts";

/**
 * A setting that stops the service from starting.
 *
 * @example Name the setting at fault
 * ```ts
 * import { ConfigError, loadConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const env = { SENDER_URL: "http://127.0.0.1:9000", WEBHOOK_SECRET: "short" };
 * assert.throws(() => loadConfig(env), (error) => {
 *   assert.ok(error instanceof ConfigError);
 *   assert.equal(error.setting, "WEBHOOK_SECRET");
 *   assert.equal(
 *     error.message,
 *     "WEBHOOK_SECRET must be at least 16 characters long: generate a random one, such as with: openssl rand -base64 32",
 *   );
 *   return true;
 * });
 * ```
 */
export class ConfigError extends Error {
  /**
   * Constructs a new instance.
   *
   * @param setting The environment variable at fault.
   * @param message What is wrong and what to do, naming the setting.
   */
  constructor(readonly setting: string, message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/**
 * The checked settings of the service.
 *
 * @example Read the checked settings
 * ```ts
 * import { type Config, loadConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * function kvTarget(config: Config): string {
 *   const { kv } = config;
 *   return "path" in kv ? kv.path : "url" in kv ? kv.url : "the platform's database";
 * }
 * const config: Config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-secret-of-16-chars",
 *   KV_PATH: ":memory:",
 * });
 * assert.equal(kvTarget(config), ":memory:");
 * assert.deepEqual(config.sender, { url: "http://127.0.0.1:9000", timeoutMs: 10_000 });
 * ```
 */
export interface Config {
  /** The retry policy. */
  readonly policy: Policy;
  /** How long a delivery holds its intent's lease, in milliseconds. */
  readonly leaseMs: number;
  /** How far apart the instances' clocks may be, in milliseconds (`CLOCK_SKEW`). */
  readonly clockSkewMs: number;
  /**
   * The command of a local run given to {@linkcode loadConfig}
   * (`localRun`), carried so that {@linkcode offLoopbackRefusal} names it
   * too without being given it again; absent where none was given
   * (`deno task start`).
   */
  readonly localRun?: string;
  /** QStash's keys and the URL its tokens name. */
  readonly qstash?: {
    currentSigningKey: string;
    nextSigningKey: string;
    url: string;
  };
  /** Pub/Sub's audience and the service account its tokens must name. */
  readonly pubsub?: { audience: string; serviceAccount: string };
  /** The dead-letter topic's push subscription: its audience and service account. */
  readonly pubsubDeadLetter?: { audience: string; serviceAccount: string };
  /** Publishing through QStash (`QSTASH_TOKEN`, `QSTASH_URL`), to `publicUrl`. */
  readonly qstashPublish?: {
    token: string;
    baseUrl?: string;
    publicUrl: string;
  };
  /** The generic route's HMAC secret. */
  readonly webhookSecret?: string;
  /** The secret the generic route also takes during a rotation. */
  readonly webhookSecretNext?: string;
  /** The ops routes' bearer token. */
  readonly opsToken?: string;
  /** The token the ops routes also take during a rotation. */
  readonly opsTokenNext?: string;
  /** The signer service. */
  readonly sender: { url: string; timeoutMs: number };
  /** Where the Deno KV database is: a path, a KV Connect URL, or the platform's default. */
  readonly kv: { path: string } | { url: string } | { platform: true };
  /** Whether to consume the local Deno KV queue. */
  readonly kvQueue: boolean;
  /**
   * Whether the service runs on Deno Deploy (`DENO_DEPLOYMENT_ID` set),
   * which runs no local Deno KV queue and stops an instance 5 s after its
   * `SIGINT`.
   */
  readonly onDeploy: boolean;
  /**
   * The PostgreSQL database (`DATABASE_URL`): when set, the service keeps
   * its state there (PostgresStore) and `kv` is not used.
   */
  readonly database?: {
    url: string;
    description: string;
    /**
     * The database name, its %-escapes decoded (`pay%40ments` is
     * `pay@ments`), as the start line names it and libpq reads it; absent
     * where the URL names none. Passed as the client's `database` option:
     * postgres.js 3.4.9 sends the URL's path undecoded.
     */
    name?: string;
    /** The client's `ssl` option, as the URL asks (see {@linkcode DatabaseTls}). */
    ssl: DatabaseTls;
    /**
     * The client's `sslnegotiation` option, as the URL asks: `"direct"`
     * (TLS from the first byte, PostgreSQL 17 and later) or `null`, so the
     * environment's `PGSSLNEGOTIATION` cannot change it either.
     */
    sslnegotiation: "direct" | null;
    /**
     * The client's `host` and `port` options, as lists of one, where the
     * URL's host is an IPv6 address in brackets (`[::1]`, given as
     * `::1`; the URL's port, else 5432): postgres.js 3.4.9 cannot read
     * one in a URL (it dials the host `[`), nor in a `host` string (it
     * dials `localhost`). Absent for any other host, which the client
     * reads from the URL.
     */
    hosts?: { host: [string]; port: [number] };
  };
  /** The request body limit, in bytes. */
  readonly maxBodyBytes: number;
  /** How long a route waits for a request's body (`BODY_TIMEOUT`), in milliseconds. */
  readonly bodyTimeoutMs: number;
  /** Whether unsigned deliveries are accepted on unconfigured routes. */
  readonly insecureDev: boolean;
  /**
   * The Cloudflare dead-letter queue consumer's `max_retries`
   * (`CLOUDFLARE_DLQ_MAX_RETRIES`), for `createQueueHandler`'s
   * `deadLetterMaxRetries`, which checks it.
   */
  readonly cloudflareDeadLetterMaxRetries?: number;
  /**
   * The Cloudflare queues' message retentions and the jobs queue's
   * delivery delay, those set (`CLOUDFLARE_MESSAGE_RETENTION`,
   * `CLOUDFLARE_DLQ_MESSAGE_RETENTION`, `CLOUDFLARE_DELIVERY_DELAY`), as
   * `createQueueHandler` takes them (`messageRetentionMs`,
   * `deadLetterMessageRetentionMs`, `deliveryDelayMs`) and checks them:
   * spread them into its options.
   */
  readonly cloudflareRetentions?: {
    readonly messageRetentionMs?: number;
    readonly deadLetterMessageRetentionMs?: number;
    readonly deliveryDelayMs?: number;
  };
  /**
   * The queues' own limits and delays (`QSTASH_RETRIES`, `PUBSUB_*`,
   * `CLOUDFLARE_MAX_RETRIES`), checked against the policy for every
   * configured queue. `cloudflare` is present when `CLOUDFLARE_MAX_RETRIES`
   * is set. Each carries `clockSkewMs` (`CLOCK_SKEW`), which the rescue
   * window must outlast with `STUCK_AFTER`; `qstash` also carries
   * `leaseMs` (`LEASE`), which its failure callback's retries must outlast
   * with twice the skew. With `PUBSUB_MESSAGE_RETENTION`, `pubsub` also
   * carries what the retention is checked against (`ackDeadlineMs` and
   * `leaseMs`), so `checkQueue(config.policy, config.queues.qstash)`,
   * `checkQueue(config.policy, config.queues.pubsub)` and, with
   * `cloudflare`, `checkQueue(config.policy, config.queues.cloudflare)`
   * give the start check's verdicts. (Unset, the start check counts
   * Pub/Sub's default retention, 7 days, where there is no dead-letter
   * policy; `pubsub` carries none.)
   */
  readonly queues: {
    readonly qstash: Extract<QueueLimits, { kind: "qstash" }>;
    readonly pubsub: Extract<QueueLimits, { kind: "pubsub" }>;
    readonly cloudflare?: Extract<QueueLimits, { kind: "cloudflare" }>;
  };
}

type QueueSettings = Config["queues"];

/** The least `MAX_BODY_BYTES` the service takes. */
const MIN_BODY_BYTES = 1024;

function flag(env: Record<string, string | undefined>, name: string): boolean {
  const value = env[name];
  if (
    value === undefined || value === "" || value === "0" || value === "false"
  ) return false;
  if (value === "1" || value === "true") return true;
  throw new ConfigError(
    name,
    `${name} must be 1 or 0 (or true or false): current value is ${
      JSON.stringify(value)
    }`,
  );
}

/**
 * A Pub/Sub audience: compared exactly with the token's `aud`, so one with
 * spaces around it (or only spaces) would refuse every push.
 */
function audienceIn(
  env: Record<string, string | undefined>,
  name: string,
): string | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  if (value.trim() !== value || value.trim() === "") {
    throw new ConfigError(
      name,
      `${name} must be the push subscription's audience exactly, without spaces around it (its push endpoint's URL, by default): current value is ${
        // Its query unsaid: the push endpoint's URL, which an audience is
        // by default, may carry a verification token (`?token=…`).
        textSaid(value)}`,
    );
  }
  return value;
}

function secret(
  env: Record<string, string | undefined>,
  name: string,
): string | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  if (value.length < MIN_SECRET) {
    // Never echo a secret, not even a short one.
    throw new ConfigError(
      name,
      `${name} must be at least ${MIN_SECRET} characters long: ${
        name.startsWith("QSTASH_")
          ? "copy the whole key from the QStash console's signing keys"
          : "generate a random one, such as with: openssl rand -base64 32"
      }`,
    );
  }
  if (value.trim() !== value) {
    // A secret read from a file or a console often keeps its line break:
    // the service would then sign or verify with a key no sender holds, and
    // refuse every delivery with a 401 that cannot say why.
    throw new ConfigError(
      name,
      `${name} starts or ends with a space or line break (as a value written with echo, or copied from a console, can): remove it, since the key is used exactly as set`,
    );
  }
  if (/^(["'])[\s\S]*\1$/.test(value)) {
    // An env file read literally (docker run --env-file, kubectl create
    // secret --from-env-file) keeps NAME="…"'s quotes: the service would
    // verify with a key no sender holds. No key QStash or openssl gives
    // is quoted. Never echoed.
    throw new ConfigError(
      name,
      `${name} is wrapped in quotes, which are taken as part of the key (an env file read as it is, such as docker run --env-file's or kubectl's --from-env-file, keeps them): remove them, since the key is used exactly as set`,
    );
  }
  return value;
}

/**
 * Refuses an `OPS_TOKEN` equal to one of `others` (a signing secret, or
 * QStash's token, by name): whoever holds that one would also hold the ops
 * routes. For `loadConfig`, and a Worker's `workerConfig`, which reads no
 * `QSTASH_TOKEN` but may be given the service's.
 *
 * @example
 * ```ts
 * import { refuseReusedOpsToken } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * const token = "a-shared-token-0123456789";
 * refuseReusedOpsToken(token, [["QSTASH_TOKEN", "another-token-0123"]]);
 * assert.throws(
 *   () => refuseReusedOpsToken(token, [["QSTASH_TOKEN", token]]),
 *   /^ConfigError: OPS_TOKEN must differ from QSTASH_TOKEN: /,
 * );
 * ```
 *
 * @param opsToken `OPS_TOKEN` (or `OPS_TOKEN_NEXT`, as `name`), if set.
 * @param others Each other secret's name and value.
 * @param name The setting `opsToken` is.
 * @throws {ConfigError} If `opsToken` equals one of them.
 */
export function refuseReusedOpsToken(
  opsToken: string | undefined,
  others: readonly (readonly [string, string | undefined])[],
  name: "OPS_TOKEN" | "OPS_TOKEN_NEXT" = "OPS_TOKEN",
): void {
  const reused = others.find(([, value]) =>
    opsToken !== undefined && value === opsToken
  );
  if (reused === undefined) return;
  throw new ConfigError(
    name,
    `${name} must differ from ${
      reused[0]
    }: whoever holds a signing secret or QStash's token (a bridge, QStash's console) would also hold the ops routes, which resolve payments and redrive jobs. Generate a token of its own, such as with: openssl rand -base64 32`,
  );
}

/**
 * A token sent as `Authorization: Bearer <token>`. A header value loses
 * surrounding spaces and cannot hold a line break or a character outside
 * ASCII: no client could send such a token (every call would be refused),
 * and the runtime's refusal of the header quotes it whole in its error.
 * Ours (`OPS_TOKEN`, which clients type in) takes the token characters
 * RFC 6750 names; another service's token is taken as it issued it, if a
 * header can carry it.
 */
function bearerToken(
  env: Record<string, string | undefined>,
  name: string,
  ours = false,
): string | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  if (
    ours
      ? !/^[A-Za-z0-9._~+/-]+=*$/.test(value)
      : !/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value)
  ) {
    // Never echo it, not even in part.
    throw new ConfigError(
      name,
      ours
        ? `${name} must be made of A-Z a-z 0-9 - . _ ~ + / (and = at the end), as a bearer token is sent: no spaces, line breaks or other characters`
        : `${name} must be what a header can carry, as it is sent as a bearer token: printable ASCII, no line break, no space at either end`,
    );
  }
  return value;
}

function httpUrl(
  env: Record<string, string | undefined>,
  name: string,
): string | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  // A URL may carry a secret (credentials, a token in the query): these
  // lines name the setting and never echo its value.
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (
    url === undefined || (url.protocol !== "https:" && url.protocol !== "http:")
  ) {
    throw new ConfigError(
      name,
      `${name} must be an absolute http(s) URL, such as https://host.example:8443/base`,
    );
  }
  if (url.username || url.password) {
    throw new ConfigError(
      name,
      `${name} must not carry credentials: remove the user:password@ part`,
    );
  }
  if (url.search !== "" || url.hash !== "" || /[?#]/.test(value)) {
    throw new ConfigError(
      name,
      `${name} must not carry a query string or fragment: give the base URL only, such as https://host.example:8443/base`,
    );
  }
  // As the URL parser writes it (host in lower case, no default port), the
  // way the QStash publisher writes the URL it publishes to: QStash signs
  // that URL as the token's subject, and the receiver checks it against
  // this one, so the two must be spelled alike.
  return url.href.replace(/\/+$/, "");
}

/** The longest delay Deno KV's `enqueue` takes: 30 days. */
const MAX_KV_DELAY_MS = 30 * 24 * 60 * 60 * 1000;

/** The `target_session_attrs` postgres.js 3.4.9 takes. */
const SESSION_ATTRS: readonly string[] = [
  "read-write",
  "read-only",
  "primary",
  "standby",
  "prefer-standby",
];

/**
 * The `target_session_attrs` postgres.js 3.4.9 takes, as a refusal names
 * them: `DATABASE_URL`'s check here, and the service's start (`openHint`
 * in `main.ts`) where the client refused one from `PGTARGETSESSIONATTRS`.
 *
 * @example
 * ```ts
 * import { SESSION_ATTRS_NAMED } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(SESSION_ATTRS_NAMED, "read-write, read-only, primary, standby or prefer-standby");
 * ```
 */
export const SESSION_ATTRS_NAMED: string = `${
  SESSION_ATTRS.slice(0, -1).join(", ")
} or ${SESSION_ATTRS.at(-1)}`;

/**
 * Why the local Deno KV queue cannot run a policy whose `CAP` is
 * `capMs`, or `undefined` where it can: Deno KV delays a message at most
 * 30 days. The start (`KV_QUEUE`) and `deno task schedule --queue kv`
 * refuse it in these words.
 *
 * @param capMs The policy's `CAP`.
 * @returns The refusal, without a setting's name before it, or `undefined`.
 *
 * @example CAP at 30 days, and a millisecond over
 * ```ts
 * import { kvCapRefusal } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(kvCapRefusal(720 * 3_600_000), undefined);
 * assert.match(kvCapRefusal(720 * 3_600_000 + 1) ?? "", /^CAP is 720h0m0\.001s, but/);
 * ```
 */
export function kvCapRefusal(capMs: number): string | undefined {
  if (capMs <= MAX_KV_DELAY_MS) return undefined;
  return `CAP is ${
    formatDuration(capMs)
  }, but the local Deno KV queue delays a message at most 30 days, so a retry could not be enqueued: lower CAP to 720h or less`;
}

/**
 * Checks `DATABASE_URL` without ever echoing it: the URL usually carries
 * the password. The description names only host, port and database.
 * `deno task kv-to-postgres` reads it too, to connect as the service does.
 *
 * @param env The settings.
 * @returns The database, or `undefined` when `DATABASE_URL` is unset.
 * @throws {ConfigError} If `DATABASE_URL` is not a URL the service takes.
 */
export function databaseUrl(
  env: Record<string, string | undefined>,
): Config["database"] | undefined {
  const value = env.DATABASE_URL;
  if (value === undefined || value === "") return undefined;
  const shape =
    "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname";
  // The authority, between "://" and the path: read before URL, which
  // refuses two ports. The value is never shown: it may hold a password.
  const head = /^[a-z]+:\/\/([^/?#]*)/i.exec(value);
  const authority = head?.[1] ?? "";
  if (authority.indexOf("@") !== authority.lastIndexOf("@")) {
    // URL takes the host after the last "@", the PostgreSQL client after
    // the first: the two would read different hosts and passwords.
    throw new ConfigError(
      "DATABASE_URL",
      `${shape}: its user or password holds a raw '@': write it as %40 (the value is not shown: it may hold a password)`,
    );
  }
  // The host part ends at the first '/', '?' or '#': one raw in the
  // password leaves its rest, its '@' and the host to be read as the
  // database name, a query or a fragment, which the start line and the
  // refusal to open would show. An '@' in a query parameter's value, after
  // a userinfo that ended at its own '@', is a setting postgres.js sends
  // the server (?application_name=relayer@eu-west): taken.
  const rest = head === null ? "" : value.slice(head[0].length);
  if (
    rest.includes("@") && !(authority.includes("@") && onlyInQueryValues(rest))
  ) {
    // An '@' in the path may be the database name's own (postgres.js
    // would take it) or a password's, cut short by a raw '/': name both,
    // the database name first after a userinfo that ended at its own '@'.
    const inPath = /^[^?#]*@/.test(rest);
    const hidden = "(the value is not shown: it may hold a password)";
    throw new ConfigError(
      "DATABASE_URL",
      inPath && authority.includes("@")
        ? `${shape}: an '@' comes after its host: write an '@' in the database name as %40, and a raw '/', '?' or '#' in the user or password, which ends the host early, as %2F, %3F and %23 ${hidden}`
        : `${shape}: an '@' comes after its host: a raw '/', '?' or '#' in the user or password ends the host early, so write them as %2F, %3F and %23${
          inPath ? ", and an '@' in the database name as %40" : ""
        } ${hidden}`,
    );
  }
  if (authority.slice(authority.lastIndexOf("@") + 1).includes(",")) {
    throw new ConfigError(
      "DATABASE_URL",
      `${shape}: it names several hosts, and the relayer connects to one: give one TCP host (a primary, or a proxy in front of the cluster)`,
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(
      "DATABASE_URL",
      `${shape} (the value is not shown: it may hold a password)`,
    );
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new ConfigError(
      "DATABASE_URL",
      `${shape}: its scheme is ${JSON.stringify(url.protocol)}`,
    );
  }
  if (url.hostname === "") {
    throw new ConfigError("DATABASE_URL", `${shape}: it names no host`);
  }
  const libpq = ["host", "hostaddr", "port"].filter((name) =>
    url.searchParams.has(name)
  );
  if (libpq.length > 0) {
    throw new ConfigError(
      "DATABASE_URL",
      `${shape}: it sets ${
        libpq.map((name) => `?${name}=`).join(" and ")
      }, which the PostgreSQL client does not read (a Unix socket is not supported): put one TCP host and port before the database name`,
    );
  }
  // postgres.js 3.4.9 takes five of libpq's target_session_attrs, and
  // throws for any other as the client is made: the service's start, a
  // move's, and each request of a Worker that makes its client per
  // request. libpq's default, any, is what it does without one.
  const attrs = url.searchParams.get("target_session_attrs");
  if (attrs && !SESSION_ATTRS.includes(attrs)) {
    throw new ConfigError(
      "DATABASE_URL",
      attrs === "any"
        ? `${shape}: its target_session_attrs is any, libpq's default, which the PostgreSQL client does not take: remove it (without one the client does what any asks)`
        : `${shape}: its target_session_attrs is not one the PostgreSQL client takes (${SESSION_ATTRS_NAMED}): set one of those, or remove it`,
    );
  }
  let database: string;
  try {
    // postgres(url) decodes the user, password and host too, and throws
    // a bare URIError on a malformed %-escape.
    for (const part of [url.username, url.password, url.hostname]) {
      decodeURIComponent(part);
    }
    database = decodeURIComponent(url.pathname);
  } catch {
    throw new ConfigError(
      "DATABASE_URL",
      `${shape}: its user, password, host or database name has a malformed %-escape (the value is not shown: it may hold a password)`,
    );
  }
  const tls = databaseTls(url.searchParams, shape);
  return {
    url: value,
    description: `PostgreSQL ${url.hostname}${url.port ? `:${url.port}` : ""}${
      database || "/"
    }, ${tls.words}`,
    ssl: tls.ssl,
    sslnegotiation: tls.direct ? "direct" : null,
    ...(database.length > 1 ? { name: database.slice(1) } : {}),
    // postgres.js 3.4.9 reads a URL's "[::1]:5432" as the host "[" (it
    // splits at the first ':'), and a host option "::1" as "" (localhost):
    // it dials an IPv6 address given as a list only.
    ...(url.hostname.startsWith("[")
      ? {
        hosts: {
          host: [url.hostname.slice(1, -1)],
          port: [url.port === "" ? 5432 : Number(url.port)],
        },
      }
      : {}),
  };
}

/**
 * Whether each '@' in `rest` (a URL after its host part) lies in a query
 * parameter's value: none in the path, a parameter's name or the fragment.
 */
function onlyInQueryValues(rest: string): boolean {
  const hash = rest.indexOf("#");
  const beforeHash = hash === -1 ? rest : rest.slice(0, hash);
  if (hash !== -1 && rest.slice(hash).includes("@")) return false;
  const mark = beforeHash.indexOf("?");
  if (mark === -1) return false;
  if (beforeHash.slice(0, mark).includes("@")) return false;
  return beforeHash.slice(mark + 1).split("&").every((pair) => {
    const eq = pair.indexOf("=");
    return !(eq === -1 ? pair : pair.slice(0, eq)).includes("@");
  });
}

/**
 * What the service's PostgreSQL client will do about TLS: the `ssl` option
 * `main.ts` passes postgres.js (3.4.9), read from `DATABASE_URL`'s
 * `sslmode` as postgres.js reads it, so the environment's `PGSSL` cannot
 * change what the start line says.
 *
 * @example TLS with the server's certificate checked
 * ```ts
 * import { type DatabaseTls, loadConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-secret-of-16-chars",
 *   DATABASE_URL: "postgres://relayer@db.example.com/payments?sslmode=verify-full",
 * });
 * const ssl: DatabaseTls | undefined = config.database?.ssl;
 * assert.equal(ssl, "verify-full");
 * ```
 */
export type DatabaseTls =
  | false
  | "prefer"
  | "require"
  | "verify-full";

/**
 * libpq's connection parameters that postgres.js 3.4.9 does not read, and
 * sends to the server as settings, which PostgreSQL refuses (checked
 * against a real server: "unrecognized configuration parameter", or "cannot
 * be changed now").
 */
const LIBPQ_ONLY = [
  "channel_binding",
  "sslsni",
  "sslcompression",
  "ssl_min_protocol_version",
  "ssl_max_protocol_version",
  "gssencmode",
  "gsslib",
  "krbsrvname",
  "requirepeer",
  "require_auth",
  "keepalives",
  "keepalives_idle",
  "keepalives_interval",
  "keepalives_count",
  "load_balance_hosts",
  "service",
  "passfile",
] as const;

/**
 * Reads DATABASE_URL's TLS parameters; refuses what postgres.js would
 * read differently from libpq, pass to the server as a setting (which the
 * server refuses), or not read at all.
 */
function databaseTls(
  params: URLSearchParams,
  shape: string,
): { ssl: DatabaseTls; direct: boolean; words: string } {
  const refuse = (why: string) =>
    new ConfigError("DATABASE_URL", `${shape}: ${why}`);
  for (const name of new Set(params.keys())) {
    // postgres.js takes the last, a reader of the URL the first.
    if (params.getAll(name).length > 1) {
      throw refuse(`it sets ?${name}= more than once: give it once`);
    }
  }
  for (const name of ["sslcert", "sslkey", "sslpassword", "sslcrl"]) {
    if (params.has(name)) {
      throw refuse(
        `it sets ?${name}=, which the PostgreSQL client does not read (client certificates are not supported): authenticate with a password`,
      );
    }
  }
  // postgres.js reads the password and the database from the URL's
  // userinfo and path only; these it sends to the server as settings, the
  // password in its first message, in the clear before any authentication
  // (a connection with no TLS), and the server refuses them.
  if (params.has("password")) {
    throw refuse(
      "it sets ?password=, which the PostgreSQL client does not read as the password (it sends it to the server as a setting, in its first message, before any authentication, and the server refuses it): put the password in the URL, postgres://user:password@host:5432/dbname, with /, ?, # and @ in it written %2F, %3F, %23 and %40",
    );
  }
  if (params.has("dbname")) {
    throw refuse(
      "it sets ?dbname=, which the PostgreSQL client does not read (it sends it to the server, which refuses it): name the database in the URL's path, postgres://user:password@host:5432/dbname",
    );
  }
  // It follows the user and database read from the URL in postgres.js's
  // first message, and the server opens the database it names.
  if (params.has("database")) {
    throw refuse(
      "it sets ?database=, which the PostgreSQL client sends to the server in place of the database the URL's path names (the start line would name the path's): name the database in the URL's path only, postgres://user:password@host:5432/dbname",
    );
  }
  // postgres.js writes UTF-8 whatever it tells the server, and sends this
  // after its own client_encoding, so the server would read each byte of a
  // non-ASCII character as a character of its own (LATIN1), or refuse it.
  const encoding = params.get("client_encoding");
  if (encoding !== null && !/^(utf-?8|unicode)$/i.test(encoding)) {
    throw refuse(
      `its ?client_encoding= is "${encoding}", but the PostgreSQL client writes UTF-8 whatever it says (the server would store each byte of a non-ASCII character as a character of its own): remove it, or give UTF8`,
    );
  }
  if (params.has("sslrootcert")) {
    throw refuse(
      "it sets ?sslrootcert=, which the PostgreSQL client does not read as a CA (it sends it to the server, which refuses it): keep ?sslmode=verify-full and give Deno the CA with DENO_CERT=<file> (or --cert <file>)",
    );
  }
  // postgres.js sends a parameter it does not know to the server as a
  // setting, and the server refuses these (a managed provider's URL may
  // carry them: Neon's has channel_binding).
  for (const name of LIBPQ_ONLY) {
    if (params.has(name)) {
      throw refuse(
        `it sets ?${name}=, which the PostgreSQL client does not read (it sends it to the server, which refuses it)${
          name === "channel_binding"
            ? ": remove it; the client cannot bind SCRAM to the TLS channel, so keep ?sslmode=verify-full to check the server"
            : ": remove it"
        }`,
      );
    }
  }
  if (params.has("ssl")) {
    throw refuse(
      "it sets ?ssl=, which libpq does not know: use ?sslmode=disable, prefer, require or verify-full",
    );
  }
  const mode = params.get("sslmode");
  let tls: { ssl: DatabaseTls; direct: boolean; words: string };
  switch (mode) {
    case null:
    case "disable":
      tls = { ssl: false, direct: false, words: "no TLS" };
      break;
    case "prefer":
      tls = {
        ssl: "prefer",
        direct: false,
        words:
          "TLS if the server offers it, server not verified (sslmode=prefer)",
      };
      break;
    // postgres.js asks for TLS on allow too, as on require.
    case "allow":
    case "require":
      tls = {
        ssl: "require",
        direct: false,
        words: `TLS, server not verified (sslmode=${mode})`,
      };
      break;
    // postgres.js checks the host name for verify-ca too.
    case "verify-ca":
    case "verify-full":
      tls = {
        ssl: "verify-full",
        direct: false,
        words: `TLS, server verified (sslmode=${mode})`,
      };
      break;
    default:
      throw refuse(
        `its ?sslmode= is ${
          JSON.stringify(mode)
        }: use disable, prefer, require or verify-full`,
      );
  }
  const negotiation = params.get("sslnegotiation");
  if (negotiation === null || negotiation === "postgres") return tls;
  if (negotiation !== "direct") {
    throw refuse(
      `its ?sslnegotiation= is ${
        JSON.stringify(negotiation)
      }: use postgres (the default) or direct`,
    );
  }
  if (tls.ssl === false || tls.ssl === "prefer") {
    throw refuse(
      "it sets ?sslnegotiation=direct, which needs ?sslmode=require or verify-full",
    );
  }
  return {
    ssl: tls.ssl,
    direct: true,
    words: `${tls.words}, direct TLS (PostgreSQL 17 and later)`,
  };
}

/**
 * Why a value that looks like a duration is not one (a fraction of a
 * millisecond, too many digits), from `parseDuration`'s error, as
 * `", and …"` to go before a refusal's "current value"; `""` for any other
 * error. The value itself is not a secret.
 */
export function whyNotDuration(error: unknown): string {
  const why =
    /^Cannot parse duration as (it (?:must be a whole|is too long).*): current value is/
      .exec(error instanceof Error ? error.message : "")?.[1];
  return why === undefined ? "" : `, and ${why}`;
}

function duration(
  env: Record<string, string | undefined>,
  name: string,
): number | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (error) {
    throw new ConfigError(
      name,
      `${name} must be a duration such as 5s, 2m or 90000 (milliseconds)${
        whyNotDuration(error)
      }: current value is ${JSON.stringify(value)}`,
    );
  }
  const refused = plainMsRefusal(name, value, ms);
  if (refused !== undefined) throw new ConfigError(name, refused);
  return ms;
}

/**
 * A duration setting a timer waits for (`SENDER_TIMEOUT`, `BODY_TIMEOUT`):
 * from 1 ms to {@linkcode MAX_TIMER_MS}, as a longer timer fires at once;
 * `fallback` where it is unset.
 */
function timerDuration(
  env: Record<string, string | undefined>,
  name: string,
  fallback: number,
): number {
  const ms = duration(env, name) ?? fallback;
  if (ms < 1 || ms > MAX_TIMER_MS) {
    throw new ConfigError(
      name,
      `${name} must be from 1ms to ${MAX_TIMER_MS}ms (${
        formatDuration(MAX_TIMER_MS)
      }, the longest a timer waits): current value is ${formatDuration(ms)}`,
    );
  }
  return ms;
}

/**
 * `CLOCK_SKEW` unset: how far apart the service takes the instances'
 * clocks to be, in milliseconds (5 s): the relayer's own default.
 * `deno task schedule --clock-skew` defaults to it too.
 *
 * @example The default
 * ```ts
 * import { DEFAULT_CLOCK_SKEW_MS } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(DEFAULT_CLOCK_SKEW_MS, 5_000);
 * ```
 */
export const DEFAULT_CLOCK_SKEW_MS: number = RELAYER_CLOCK_SKEW_MS;

/**
 * The most `CLOCK_SKEW` the service takes, in milliseconds (10 min): the
 * grace a replay record keeps after it expires.
 *
 * @example The limit
 * ```ts
 * import { MAX_CLOCK_SKEW_MS } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(MAX_CLOCK_SKEW_MS, 600_000);
 * ```
 */
export const MAX_CLOCK_SKEW_MS: number = CLAIM_GRACE_MS;

/**
 * How long a guaranteed rescue window must last for the service to start:
 * `STUCK_AFTER` and `CLOCK_SKEW` together. The window is the queue's, in
 * real time; "stuck" is read by the clock of the instance taking the last
 * delivery, from the `at` another instance wrote when it recorded the
 * send, and one whose clock runs `CLOCK_SKEW` behind that one's reads the
 * payment as stuck that much later. `loadConfig` checks the policy's own
 * window and each queue's against it, and `deno task schedule` prints the
 * same verdict.
 *
 * @param stuckAfterMs The policy's `stuckAfterMs` (`STUCK_AFTER`).
 * @param clockSkewMs How far apart the clocks may be (`CLOCK_SKEW`).
 * @returns The least window, in milliseconds.
 *
 * @example The defaults
 * ```ts
 * import { rescueNeedMs } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(rescueNeedMs(300_000, 5_000), 305_000);
 * ```
 */
export function rescueNeedMs(
  stuckAfterMs: number,
  clockSkewMs: number,
): number {
  return stuckAfterMs + clockSkewMs;
}

/**
 * The least Pub/Sub minimum backoff whose gaps make a window of `needMs`
 * over `deliveries` deliveries: Pub/Sub guarantees only its minimum backoff
 * per gap, with no growth, so each of the `deliveries − 1` gaps needs
 * `needMs / (deliveries − 1)`, rounded up to the millisecond. `Infinity`
 * for one delivery, which has no gap.
 *
 * @param needMs The window to make, {@linkcode rescueNeedMs}.
 * @param deliveries The deliveries the job gets on Pub/Sub.
 * @returns The minimum backoff, in milliseconds.
 *
 * @example The default policy with the default CLOCK_SKEW
 * ```ts
 * import { pubsubMinBackoffNeedMs } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(pubsubMinBackoffNeedMs(305_000, 10), 33_889);
 * assert.equal(pubsubMinBackoffNeedMs(300_000, 10), 33_334);
 * ```
 */
export function pubsubMinBackoffNeedMs(
  needMs: number,
  deliveries: number,
): number {
  const gaps = deliveries - 1;
  return gaps <= 0 ? Infinity : Math.ceil(needMs / gaps);
}

/**
 * Pub/Sub's largest minimum backoff (each bound of its retry policy is at
 * most 600 s), in milliseconds.
 */
export const PUBSUB_BACKOFF_LIMIT_MS = 600_000;

/**
 * The least deliveries a job needs on Pub/Sub for a window of `needMs`
 * when no minimum backoff Pub/Sub allows is enough: its largest,
 * {@linkcode PUBSUB_BACKOFF_LIMIT_MS}, per gap.
 *
 * @param needMs The window to make, {@linkcode rescueNeedMs}.
 * @returns The deliveries, counting the first.
 *
 * @example Two hours of STUCK_AFTER and the default CLOCK_SKEW
 * ```ts
 * import { pubsubDeliveriesNeed } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(pubsubDeliveriesNeed(7_205_000), 14);
 * ```
 */
export function pubsubDeliveriesNeed(needMs: number): number {
  return Math.ceil(needMs / PUBSUB_BACKOFF_LIMIT_MS) + 1;
}

/**
 * Reads `CLOCK_SKEW`, how far apart the instances' clocks may be, as the
 * service does ({@linkcode DEFAULT_CLOCK_SKEW_MS} unless set).
 * `deno task kv-to-postgres` reads it too: a lease is held that long past
 * its expiry, and `deno task schedule --clock-skew` through it.
 *
 * @example The default, and a setting
 * ```ts ignore
 * clockSkew({}); // 5000
 * clockSkew({ CLOCK_SKEW: "30s" }); // 30000
 * ```
 *
 * @param env The settings.
 * @returns The skew, in milliseconds.
 * @throws {ConfigError} If `CLOCK_SKEW` is not a duration, or is over the
 * replay records' grace (10 min).
 */
export function clockSkew(env: Record<string, string | undefined>): number {
  const clockSkewMs = duration(env, "CLOCK_SKEW") ?? DEFAULT_CLOCK_SKEW_MS;
  if (clockSkewMs > MAX_CLOCK_SKEW_MS) {
    throw new ConfigError(
      "CLOCK_SKEW",
      `CLOCK_SKEW must be at most ${
        formatDuration(MAX_CLOCK_SKEW_MS)
      }, the grace a replay record keeps after it expires (a lease's key or row keeps an hour): current value is ${
        formatDuration(clockSkewMs)
      }. Synchronise the instances' clocks (NTP) instead`,
    );
  }
  return clockSkewMs;
}

function integer(
  env: Record<string, string | undefined>,
  name: string,
): number | undefined {
  const value = env[name];
  if (value === undefined || value === "") return undefined;
  if (!/^\d{1,15}$/.test(value)) {
    throw new ConfigError(
      name,
      `${name} must be a whole number: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
  return Number(value);
}

/**
 * Whether Deno Deploy attached a Deno KV database to this app. Deploy names
 * it in `DENO_KV_DEFAULT_PATH` (after `DENO_KV_PATH_PREFIX`), which
 * `Deno.openKv()` opens when given no path; anything but an http(s) URL
 * there is a store of the isolate's own, in memory or in a file. The same
 * test as Deno's own `DENO_KV_REQUIRES_DISTRIBUTED_DATABASE` check.
 */
function deployKvAttached(env: Record<string, string | undefined>): boolean {
  const path = env.DENO_KV_DEFAULT_PATH;
  if (path === undefined || path === "") return false;
  const full = `${env.DENO_KV_PATH_PREFIX ?? ""}${path}`;
  return full.startsWith("https://") || full.startsWith("http://");
}

/**
 * The settings as text. A Worker's environment holds wrangler.toml's
 * `[vars]` as text or JSON values, so `SENDER_TIMEOUT = 10000` unquoted
 * arrives as the number 10000: a boolean, or a whole number below 2^53, is
 * read as its text (what the quoted value would be). Any other value (a
 * number the Worker may hold rounded, an object, a list) is refused by
 * name once read, never echoed (it may be a secret); one that is not read
 * (the Worker's bindings: a queue, Hyperdrive) is left alone.
 */
function asText(
  env: Readonly<Record<string, unknown>>,
): Record<string, string | undefined> {
  if (typeof env !== "object" || env === null) {
    throw new TypeError(
      `Cannot load the configuration as its variables must be an object, such as process.env, Deno.env.toObject() or a Worker's env: current value is ${
        env === null ? "null" : typeof env
      }`,
    );
  }
  // Over an empty object, not `env`: a Proxy must return a read-only,
  // non-configurable property's own value, so over a frozen env the
  // number 10000 read as "10000" would be a TypeError at start.
  return new Proxy({}, {
    has(_, name) {
      return Reflect.has(env, name);
    },
    get(_, name) {
      const value: unknown = Reflect.get(env, name);
      if (value === undefined || typeof value === "string") return value;
      if (
        typeof value === "boolean" ||
        (typeof value === "number" && Number.isSafeInteger(value))
      ) {
        return String(value);
      }
      if (typeof name !== "string") return value;
      if (typeof value === "number") {
        // Past 2^53, or with a fraction, the Worker may hold the number
        // rounded, not the digits written: read as its text, a secret
        // would be a key no sender holds. Not echoed: it may be a secret.
        throw new ConfigError(
          name,
          `${name} is a number other than a whole one below 2^53, which the Worker may hold rounded, not as written: write it quoted (${name} = "…"), or set it as a secret`,
        );
      }
      throw new ConfigError(
        name,
        `${name} must be text, as wrangler.toml's [vars] quote it (${name} = "…"), or a secret: current value is ${
          Array.isArray(value) ? "a list" : `of type ${typeof value}`
        }`,
      );
    },
  });
}

/**
 * A setting whose raise may lengthen the policy's rescue window.
 *
 * @example Each setting named by its flag
 * ```ts
 * import { type WindowRaiser, windowRaisers } from "./config.ts";
 * import { DEFAULT_POLICY } from "../policy/policy.ts";
 * import assert from "node:assert/strict";
 *
 * const flags: Record<WindowRaiser, string> = {
 *   MAX_DELIVERIES: "--max-deliveries",
 *   BASE: "--base",
 *   CAP: "--cap",
 * };
 * assert.equal(
 *   windowRaisers(DEFAULT_POLICY, (setting) => flags[setting]),
 *   "--max-deliveries, --base or --cap",
 * );
 * ```
 */
export type WindowRaiser = "MAX_DELIVERIES" | "BASE" | "CAP";

/**
 * The settings whose raise lengthens the policy's rescue window, as the
 * start's refusal names them: MAX_DELIVERIES always; BASE while there is a
 * delay and it is below CAP (BASE ≤ CAP; one delivery has no delay);
 * CAP only where it cuts a delay, the last one's doubling passing it (one
 * that meets CAP exactly, or BASE itself as the only delay, was never cut:
 * a higher CAP changes none). `deno task schedule` names its flags so.
 *
 * @param policy The policy whose window is too short.
 * @param named How each setting is named (`deno task schedule`: its flag).
 * @returns The names, joined as a sentence says them.
 *
 * @example BASE at CAP
 * ```ts
 * import { windowRaisers } from "./config.ts";
 * import { definePolicy } from "../policy/policy.ts";
 * import assert from "node:assert/strict";
 *
 * const policy = definePolicy({ maxDeliveries: 3, baseMs: 60_000, capMs: 60_000 });
 * assert.equal(windowRaisers(policy), "MAX_DELIVERIES or CAP");
 * assert.equal(windowRaisers(definePolicy({})), "MAX_DELIVERIES, BASE or CAP");
 * ```
 */
export function windowRaisers(
  policy: Policy,
  named: (setting: WindowRaiser) => string = (setting) => setting,
): string {
  const gaps = policy.maxDeliveries - 1;
  const names: WindowRaiser[] = ["MAX_DELIVERIES"];
  if (gaps >= 1 && policy.baseMs < policy.capMs) names.push("BASE");
  if (gaps >= 2 && policy.baseMs * 2 ** (gaps - 1) > policy.capMs) {
    names.push("CAP");
  }
  const said = names.map(named);
  return said.length === 1
    ? said[0]!
    : `${said.slice(0, -1).join(", ")} or ${said.at(-1)}`;
}

/**
 * Reads and checks the service's settings. Refuses a policy whose rescue
 * window (the guaranteed time from a job's first delivery to its last) is
 * shorter than `STUCK_AFTER` and `CLOCK_SKEW` together: a settling payment
 * would be poisoned before its rescue could run (an instance whose clock
 * runs `CLOCK_SKEW` behind the one that recorded the send reads it as
 * stuck that much later). Every window below is checked so.
 *
 * Refuses as well, in one line naming the settings and both numbers, a
 * configured queue (QStash when its signing keys are set, Pub/Sub when
 * `PUBSUB_AUDIENCE` is, Cloudflare Queues when `CLOUDFLARE_MAX_RETRIES`
 * is) that gives up before `MAX_DELIVERIES` (`QSTASH_RETRIES + 1`,
 * `PUBSUB_MAX_DELIVERY_ATTEMPTS`, `CLOUDFLARE_MAX_RETRIES + 1`), or whose
 * guaranteed window under its *own* delays is shorter than `STUCK_AFTER`:
 * QStash honours our delays up to 1 day, the Cloudflare queue handler asks
 * for at most 12 h (Cloudflare takes up to 24 h), and
 * Pub/Sub uses its own backoff, guaranteeing only `PUBSUB_MIN_BACKOFF` per
 * gap (so it needs at least `STUCK_AFTER / (MAX_DELIVERIES − 1)`).
 * `QSTASH_RETRIES` can be at most your QStash plan's retry cap: QStash
 * makes no more retries than the cap (whether it lowers a higher value or
 * refuses the publish, its documentation does not say), and the job would
 * then stop early.
 *
 * @param variables The environment variables (`Deno.env.toObject()`, or a
 * Worker's `env`: a boolean or whole number of its `[vars]` is read as its
 * text, and a binding under another name, a queue's, is not read).
 * @param options `localRun`: the command that runs this service on one's
 * own machine, which a refusal of `RELAYER_INSECURE_DEV` names (a service
 * of one's own on Node: `"node --import tsx service.ts"`); given, the
 * config carries it (`localRun`), for {@linkcode offLoopbackRefusal}.
 * @default {"deno task start"}
 * @returns The checked settings.
 * @throws {ConfigError} Naming the first bad or missing setting.
 * @throws {TypeError} If `variables` is not an object, or `options` names
 * an option it does not read, or `localRun` is not one line of text.
 *
 * @example A minimal local setup
 * ```ts
 * import { loadConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-secret-of-16-chars",
 * });
 * assert.equal(config.policy.maxDeliveries, 10);
 * assert.deepEqual(config.kv, { path: "./data/relayer.kv" });
 * assert.equal(config.queues.qstash.retries, 9); // MAX_DELIVERIES − 1
 * assert.throws(
 *   () => loadConfig({ SENDER_URL: "x", WEBHOOK_SECRET: "a-secret-of-16-chars" }),
 *   /SENDER_URL must be an absolute http\(s\) URL/,
 * );
 * ```
 */
export function loadConfig(
  variables: Readonly<Record<string, unknown>>,
  options: { readonly localRun?: string } = {},
): Config {
  const localRun = localRunOf("load config", options);
  const config = loadConfigFor(variables, localRun);
  // Carried for offLoopbackRefusal: a service of one's own that gave it
  // here alone had that refusal name deno task start, not its own run.
  return options.localRun === undefined ? config : { ...config, localRun };
}

/**
 * The command a refusal of `RELAYER_INSECURE_DEV` names as the local run,
 * from the options of {@linkcode loadConfig} or
 * {@linkcode offLoopbackRefusal}: `main.ts`'s unless given. A service of
 * one's own names how its user runs it, not a task of this repository.
 */
function localRunOf(
  what: string,
  options: { readonly localRun?: string },
): string {
  assertOptionNames(what, options, ["localRun"], {
    example: '{ localRun: "node --import tsx service.ts" }',
  });
  const { localRun = "deno task start" } = options;
  if (
    typeof localRun !== "string" || localRun.trim() === "" ||
    /[\r\n]/.test(localRun)
  ) {
    throw new TypeError(
      `Cannot ${what} as 'localRun' must be one line naming the command that runs the service, such as "node --import tsx service.ts": current value is ${
        show(localRun)
      }`,
    );
  }
  return localRun;
}

/**
 * Why a service with `config` must not start listening on `listensOn`, in
 * `main.ts`'s own words, or `undefined` where it may. `loadConfig` judges
 * `PUBLIC_URL`, not where a service listens: off loopback (`0.0.0.0`, `::`,
 * an interface's address) others reach it, so a secret anyone can read (the
 * docs' local-run `WEBHOOK_SECRET` or `OPS_TOKEN`, a local QStash's published
 * signing keys) or `RELAYER_INSECURE_DEV` is refused there, as `main.ts`
 * refuses it. Loopback is `localhost`, 127.0.0.0/8 and `::1`. Pure: call it
 * before listening, and stop with its text.
 *
 * @example Refuse the docs' local-run secret on 0.0.0.0
 * ```ts
 * import { loadConfig, offLoopbackRefusal } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "local-secret-0123456789", // the docs' local-run value
 * });
 * assert.equal(offLoopbackRefusal(config, "127.0.0.1"), undefined);
 * assert.equal(
 *   offLoopbackRefusal(config, "0.0.0.0"),
 *   "WEBHOOK_SECRET is a value the docs give for a local run, which anyone can read, and this service listens on 0.0.0.0, off this machine: generate a random one, such as with: openssl rand -base64 32",
 * );
 * ```
 *
 * @example A service on Node names its own local run
 * ```ts
 * import { loadConfig, offLoopbackRefusal } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const localRun = "node --import tsx service.ts"; // how its user runs it
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-of-my-own",
 *   RELAYER_INSECURE_DEV: "1",
 * }, { localRun });
 * assert.match(
 *   offLoopbackRefusal(config, "0.0.0.0", { localRun })!,
 *   /^RELAYER_INSECURE_DEV is for local runs, .* served on loopback \(node --import tsx service\.ts\)$/,
 * );
 * // The config carries it: the same refusal without it given again.
 * assert.equal(
 *   offLoopbackRefusal(config, "0.0.0.0"),
 *   offLoopbackRefusal(config, "0.0.0.0", { localRun }),
 * );
 * ```
 *
 * @param config What {@linkcode loadConfig} read.
 * @param listensOn The hostname the service listens on (`"0.0.0.0"`,
 * `"::"`, `"127.0.0.1"`), or its URL (`"http://0.0.0.0:8000/"`), named as
 * given in the text.
 * @param options `localRun`: the command that runs this service on one's
 * own machine, which the refusal of `RELAYER_INSECURE_DEV` names (give it
 * {@linkcode loadConfig} too, whose refusal names it). @default {the
 * config's `localRun`, which {@linkcode loadConfig} was given, else
 * "deno task start"}
 * @returns The refusal, one line without a `relayer: cannot start: `
 * prefix, or `undefined` on loopback or with nothing to refuse.
 * @throws {TypeError} If `options` names an option it does not read, or
 * `localRun` is not one line of text.
 */
export function offLoopbackRefusal(
  config: Config,
  listensOn: string,
  options: { readonly localRun?: string } = {},
): string | undefined {
  const what = "judge where the service listens";
  const given = localRunOf(what, options); // and names no other option
  // What loadConfig was given, unless given here.
  const localRun = options.localRun === undefined &&
      config.localRun !== undefined
    ? localRunOf(what, { localRun: config.localRun })
    : given;
  const url = listensOn.includes("://")
    ? listensOn
    : `http://${
      listensOn.includes(":") && !listensOn.startsWith("[")
        ? `[${listensOn}]`
        : listensOn
    }/`;
  if (onLoopback(url)) return undefined;
  const off = `this service listens on ${listensOn}, off this machine`;
  const readable = readableSetting(config);
  if (readable !== undefined) {
    return `${readable.setting} is ${readable.readable}, and ${off}: ${readable.fix}`;
  }
  if (!config.insecureDev) return undefined;
  return insecureDevRefusal(off, openRoutesOf(config), localRun);
}

/**
 * The routes `RELAYER_INSECURE_DEV` opens in `config`: those whose keys are
 * not set ({@linkcode insecureOpenRoutes}), as `main.ts`'s start line, its
 * refusal and a Worker's first event name them.
 *
 * @example
 * ```ts
 * import { loadConfig, openRoutesOf } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 * });
 * assert.deepEqual(openRoutesOf(config), [
 *   "/v1/qstash and /v1/qstash/failed",
 *   "/v1/pubsub",
 *   "/v1/pubsub/dead-letter",
 *   "the ops routes",
 * ]);
 * ```
 */
export function openRoutesOf(config: Config): string[] {
  return insecureOpenRoutes({
    qstash: config.qstash !== undefined,
    pubsub: config.pubsub !== undefined,
    pubsubDeadLetter: config.pubsubDeadLetter !== undefined,
    deliveries: config.webhookSecret !== undefined,
    ops: config.opsToken !== undefined,
  });
}

/**
 * {@linkcode loadConfig} for a service whose local run is `localRun` (the
 * command a refusal of `RELAYER_INSECURE_DEV` names): a Worker's
 * (`workerConfig`) is `npx wrangler dev`, not `deno task start`.
 *
 * @example A Worker's refusal names its own local run
 * ```ts
 * import { loadConfigFor } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(
 *   () =>
 *     loadConfigFor({
 *       SENDER_URL: "http://127.0.0.1:9000",
 *       PUBLIC_URL: "https://relayer.example.com",
 *       RELAYER_INSECURE_DEV: "1",
 *     }, "npx wrangler dev"),
 *   /served on loopback \(npx wrangler dev\)$/,
 * );
 * ```
 *
 * @param variables The settings, as {@linkcode loadConfig} takes them.
 * @param localRun The command that runs the service on one's machine.
 * @param worker A Cloudflare Worker's: whether it consumes a Cloudflare
 * queue, whose messages are its deliveries, so that it needs no HTTP
 * delivery route's keys; one that consumes none is told it may.
 * @returns The checked settings.
 */
export function loadConfigFor(
  variables: Readonly<Record<string, unknown>>,
  localRun: string,
  worker?: { readonly consumes: boolean },
): Config {
  const env = asText(variables);
  const onDeploy = (env.DENO_DEPLOYMENT_ID ?? "") !== "";

  const policy = ((): Policy => {
    const overrides: Partial<Record<keyof Policy, unknown>> = {
      maxDeliveries: integer(env, "MAX_DELIVERIES"),
      baseMs: duration(env, "BASE"),
      capMs: duration(env, "CAP"),
      stuckAfterMs: duration(env, "STUCK_AFTER"),
      jitter: env.JITTER === "" ? undefined : env.JITTER as Jitter | undefined,
    };
    const names: Record<keyof Policy, string> = {
      maxDeliveries: "MAX_DELIVERIES",
      baseMs: "BASE",
      capMs: "CAP",
      stuckAfterMs: "STUCK_AFTER",
      jitter: "JITTER",
    };
    try {
      return definePolicy(overrides as Partial<Policy>);
    } catch (error) {
      const field = (Object.keys(names) as (keyof Policy)[]).find((k) =>
        (error as Error).message.includes(`'${k}'`)
      );
      const name = field ? names[field] : "MAX_DELIVERIES";
      throw new ConfigError(
        name,
        `${name} is invalid: ${(error as Error).message}`,
      );
    }
  })();
  if (policy.baseMs > policy.capMs) {
    throw new ConfigError(
      env.BASE ? "BASE" : "CAP",
      `BASE is ${formatDuration(policy.baseMs)} but CAP is ${
        formatDuration(policy.capMs)
      }: the backoff starts above its cap, so every delay would be CAP. Lower BASE or raise CAP (BASE ≤ CAP).`,
    );
  }
  // The window is the queue's, in real time; "stuck" is read by the clock
  // of the instance taking the last delivery, from the `at` another
  // instance wrote when it recorded the send. One whose clock runs
  // CLOCK_SKEW behind that one's reads the payment as stuck that much
  // later: the window must outlast STUCK_AFTER and CLOCK_SKEW together.
  const clockSkewMs = clockSkew(env);
  const needMs = rescueNeedMs(policy.stuckAfterMs, clockSkewMs);
  const stuckText = stuckAndSkew(policy.stuckAfterMs, clockSkewMs);
  const window = rescueWindow(policy);
  if (window < needMs && policy.jitter === "full") {
    throw new ConfigError(
      "JITTER",
      `JITTER=full guarantees no wait between deliveries (each delay may be 0), so no MAX_DELIVERIES or CAP gives a settling payment a rescue window of STUCK_AFTER (${
        formatDuration(policy.stuckAfterMs)
      })${
        clockSkewMs > 0
          ? ` and CLOCK_SKEW (${formatDuration(clockSkewMs)})`
          : ""
      }. Use JITTER=equal (the default), which waits at least half of each delay, or JITTER=none.`,
    );
  }
  if (window < needMs) {
    throw new ConfigError(
      "STUCK_AFTER",
      `The policy's rescue window is ${formatDuration(window)} (guaranteed, ${
        policy.jitter === "none" ? "no" : policy.jitter
      } jitter) but STUCK_AFTER is ${stuckText}: a settling payment would be poisoned before its rescue. Raise ${
        windowRaisers(policy)
      }, or lower STUCK_AFTER${clockSkewMs > 0 ? " or CLOCK_SKEW" : ""}.`,
    );
  }

  const current = secret(env, "QSTASH_CURRENT_SIGNING_KEY");
  const next = secret(env, "QSTASH_NEXT_SIGNING_KEY");
  const publicUrl = httpUrl(env, "PUBLIC_URL");
  const route = publicUrl === undefined
    ? undefined
    : ROUTE_AT_END.exec(new URL(publicUrl).pathname)?.[0];
  if (route !== undefined) {
    // The routes are appended to it: QStash would deliver to one URL and
    // sign another, and a published job would go to …/v1/qstash/v1/qstash.
    throw new ConfigError(
      "PUBLIC_URL",
      `PUBLIC_URL ends with the route ${route}: give the service's base URL, without it (the service adds /v1/qstash and /v1/qstash/failed)`,
    );
  }
  if ((current === undefined) !== (next === undefined)) {
    const missing = current === undefined
      ? "QSTASH_CURRENT_SIGNING_KEY"
      : "QSTASH_NEXT_SIGNING_KEY";
    throw new ConfigError(
      missing,
      `${missing} is missing: QStash needs both signing keys (current and next)`,
    );
  }
  if (current !== undefined && publicUrl === undefined) {
    throw new ConfigError(
      "PUBLIC_URL",
      "PUBLIC_URL is missing: QStash signs the URL it delivers to, so set the service's public base URL",
    );
  }
  // On Deno Deploy a loopback PUBLIC_URL is no local QStash's: a forger
  // signs for that URL all the same.
  const published = publicUrl === undefined ? undefined : publishedQStashKey({
    QSTASH_CURRENT_SIGNING_KEY: current,
    QSTASH_NEXT_SIGNING_KEY: next,
  }, onDeploy ? undefined : publicUrl);
  if (published !== undefined) {
    // A local QStash's keys, copied to a service others can reach.
    throw new ConfigError(
      published,
      `${published} is a published key (a local QStash's: the QStash CLI dev server's, or deno task qstash-local's), which anyone can sign with, and ${
        onDeploy
          ? "this service is on Deno Deploy"
          : "PUBLIC_URL is not on this machine"
      }: copy both signing keys from the QStash console`,
    );
  }
  const audience = audienceIn(env, "PUBSUB_AUDIENCE");
  const serviceAccount = env.PUBSUB_SERVICE_ACCOUNT || undefined;
  if (serviceAccount !== undefined && audience === undefined) {
    throw new ConfigError(
      "PUBSUB_AUDIENCE",
      "PUBSUB_AUDIENCE is missing: PUBSUB_SERVICE_ACCOUNT needs the push subscription's audience",
    );
  }
  // Google issues OIDC tokens for any audience to any service account: the
  // audience alone lets anyone with a Google account push (DESIGN §15).
  if (audience !== undefined && serviceAccount === undefined) {
    throw new ConfigError(
      "PUBSUB_SERVICE_ACCOUNT",
      "PUBSUB_SERVICE_ACCOUNT is missing: with PUBSUB_AUDIENCE set, name the service account your push subscription authenticates as, because Google issues tokens for any audience to any account",
    );
  }
  if (
    serviceAccount !== undefined && !/^[^@\s]+@[^@\s]+$/.test(serviceAccount)
  ) {
    throw new ConfigError(
      "PUBSUB_SERVICE_ACCOUNT",
      `PUBSUB_SERVICE_ACCOUNT must be the service account's email, such as pusher@my-project.iam.gserviceaccount.com: current value is ${
        JSON.stringify(serviceAccount)
      }`,
    );
  }
  const deadLetterAudience = audienceIn(env, "PUBSUB_DEAD_LETTER_AUDIENCE");
  if (deadLetterAudience !== undefined && serviceAccount === undefined) {
    throw new ConfigError(
      "PUBSUB_SERVICE_ACCOUNT",
      "PUBSUB_SERVICE_ACCOUNT is missing: with PUBSUB_DEAD_LETTER_AUDIENCE set, name the service account the dead-letter push subscription authenticates as",
    );
  }
  if (deadLetterAudience !== undefined && deadLetterAudience === audience) {
    // One audience for both: a token for the push route would also open
    // the give-up route, which poisons the job it names.
    throw new ConfigError(
      "PUBSUB_DEAD_LETTER_AUDIENCE",
      "PUBSUB_DEAD_LETTER_AUDIENCE must differ from PUBSUB_AUDIENCE: give the dead-letter push subscription its own audience (its push endpoint's URL, such as https://relayer.example.com/v1/pubsub/dead-letter)",
    );
  }
  const qstashToken = bearerToken(env, "QSTASH_TOKEN");
  const qstashUrl = httpUrl(env, "QSTASH_URL");
  if (
    qstashUrl !== undefined &&
    /(^|\/)v2(\/|$)/.test(new URL(qstashUrl).pathname)
  ) {
    // The publisher appends /v2/publish/…: QStash's own path would be
    // doubled, a 404 at every publish.
    throw new ConfigError(
      "QSTASH_URL",
      "QSTASH_URL must be QStash's API base, without /v2/publish (the publisher adds /v2/publish/…), such as https://qstash.upstash.io",
    );
  }
  if (
    qstashUrl !== undefined && new URL(qstashUrl).protocol === "http:" &&
    !loopbackWithoutDns(qstashUrl)
  ) {
    // QSTASH_TOKEN goes with every publish: in clear text, whoever is on
    // the path publishes with it, and the account's failure callbacks
    // give up any job.
    throw new ConfigError(
      "QSTASH_URL",
      "QSTASH_URL is plain http off this machine: QSTASH_TOKEN is sent with every publish, and whoever reads it on the path can publish to this service, its failure callback giving up any job. Use https (plain http is taken on localhost, 127.0.0.1 or [::1] only, for a local QStash)",
    );
  }
  if (qstashToken !== undefined && publicUrl === undefined) {
    throw new ConfigError(
      "PUBLIC_URL",
      "PUBLIC_URL is missing: QSTASH_TOKEN publishes jobs to PUBLIC_URL/v1/qstash, so set the service's public base URL",
    );
  }
  if (qstashUrl !== undefined && qstashToken === undefined) {
    throw new ConfigError(
      "QSTASH_TOKEN",
      "QSTASH_TOKEN is missing: QSTASH_URL only says where QStash's API is",
    );
  }
  const webhookSecret = secret(env, "WEBHOOK_SECRET");
  const cloudflareDeadLetterMaxRetries = countIn(
    env,
    "CLOUDFLARE_DLQ_MAX_RETRIES",
    0,
    100,
  );
  const messageRetentionMs = cloudflareRetention(
    env,
    "CLOUDFLARE_MESSAGE_RETENTION",
  );
  const deadLetterMessageRetentionMs = cloudflareRetention(
    env,
    "CLOUDFLARE_DLQ_MESSAGE_RETENTION",
  );
  const deliveryDelayMs = cloudflareDeliveryDelay(env);
  const webhookSecretNext = secret(env, "WEBHOOK_SECRET_NEXT");
  if (webhookSecretNext !== undefined && webhookSecret === undefined) {
    throw new ConfigError(
      "WEBHOOK_SECRET_NEXT",
      "WEBHOOK_SECRET_NEXT is set without WEBHOOK_SECRET: set the secret the senders sign with now as WEBHOOK_SECRET, and the one they move to as WEBHOOK_SECRET_NEXT",
    );
  }
  bearerToken(env, "OPS_TOKEN", true); // its own message for spaces
  const opsToken = secret(env, "OPS_TOKEN");
  // The bearer token opens the routes that resolve payments: a bridge that
  // holds the HMAC secret, or whoever reads QStash's console, must not.
  const signing = [
    ["WEBHOOK_SECRET", webhookSecret],
    ["WEBHOOK_SECRET_NEXT", webhookSecretNext],
    ["QSTASH_CURRENT_SIGNING_KEY", current],
    ["QSTASH_NEXT_SIGNING_KEY", next],
    // Not a signing secret, but sent to QStash with every publish and
    // shown in its console.
    ["QSTASH_TOKEN", qstashToken],
  ] as const;
  refuseReusedOpsToken(opsToken, signing);
  bearerToken(env, "OPS_TOKEN_NEXT", true);
  const opsTokenNext = secret(env, "OPS_TOKEN_NEXT");
  if (opsTokenNext !== undefined && opsToken === undefined) {
    throw new ConfigError(
      "OPS_TOKEN_NEXT",
      "OPS_TOKEN_NEXT is set without OPS_TOKEN: set the token the clients send now as OPS_TOKEN, and the one they move to as OPS_TOKEN_NEXT",
    );
  }
  refuseReusedOpsToken(opsTokenNext, signing, "OPS_TOKEN_NEXT");
  // Copied from the docs' local run to a service others reach: whoever
  // read the docs signs its deliveries and holds its ops routes.
  // RELAYER_INSECURE_DEV is refused by the same rule (below).
  const reached = onDeploy
    ? "on Deno Deploy"
    : publicUrl !== undefined && !onLoopback(publicUrl)
    ? "reached at PUBLIC_URL, off this machine"
    : undefined;
  const copied = reached === undefined ? undefined : publishedSecret({
    WEBHOOK_SECRET: webhookSecret,
    WEBHOOK_SECRET_NEXT: webhookSecretNext,
    OPS_TOKEN: opsToken,
    OPS_TOKEN_NEXT: opsTokenNext,
  });
  if (copied !== undefined) {
    throw new ConfigError(
      copied,
      `${copied} is a value the docs give for a local run, which anyone can read, and this service is ${reached}: generate a random one, such as with: openssl rand -base64 32`,
    );
  }

  const insecureDev = flag(env, "RELAYER_INSECURE_DEV");
  if (insecureDev && reached !== undefined) {
    // Every route whose keys are not set, the ops routes too, would take
    // whoever reaches the service: it is for a service only this machine
    // reaches, as the docs' local-run secrets are.
    throw new ConfigError(
      "RELAYER_INSECURE_DEV",
      insecureDevRefusal(
        `this service is ${reached}`,
        insecureOpenRoutes({
          qstash: current !== undefined,
          pubsub: audience !== undefined,
          pubsubDeadLetter: deadLetterAudience !== undefined,
          deliveries: webhookSecret !== undefined,
          ops: opsToken !== undefined,
        }),
        localRun,
      ),
    );
  }
  if (qstashToken !== undefined && current === undefined && !insecureDev) {
    // The jobs it publishes come back to /v1/qstash, which takes only
    // deliveries signed with these keys: none would ever be taken.
    throw new ConfigError(
      "QSTASH_CURRENT_SIGNING_KEY",
      "QSTASH_CURRENT_SIGNING_KEY is missing: QSTASH_TOKEN publishes jobs to PUBLIC_URL/v1/qstash, which takes only deliveries signed with QStash's keys; copy both signing keys from the QStash console",
    );
  }
  // A Worker that consumes its Cloudflare queue has its deliveries there
  // (createQueueHandler): it needs no HTTP delivery route, whose routes
  // then answer 503, saying what turns them on.
  if (
    current === undefined && audience === undefined &&
    webhookSecret === undefined && !insecureDev && worker?.consumes !== true
  ) {
    throw new ConfigError(
      "WEBHOOK_SECRET",
      `No delivery route is configured: set QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY (with PUBLIC_URL), PUBSUB_AUDIENCE and PUBSUB_SERVICE_ACCOUNT, or WEBHOOK_SECRET${
        worker === undefined
          ? ""
          : ", or consume a Cloudflare queue (workerConfig without queues: false)"
      }`,
    );
  }

  const senderUrl = httpUrl(env, "SENDER_URL");
  if (senderUrl === undefined) {
    throw new ConfigError(
      "SENDER_URL",
      "SENDER_URL is missing: set the URL of your signer service",
    );
  }
  const timeoutMs = senderTimeout(env);
  const leaseMs = lease(env, timeoutMs);

  const kvUrl = httpUrl(env, "KV_URL");
  if (kvUrl !== undefined) bearerToken(env, "DENO_KV_ACCESS_TOKEN");
  const kvPath = env.KV_PATH || undefined;
  if (kvPath !== undefined && /^[a-z][a-z0-9+.-]*:\/\//i.test(kvPath)) {
    // Deno would open a URL here as KV Connect, past KV_URL's checks (no
    // credentials, no query), and every message would echo it.
    throw new ConfigError(
      "KV_PATH",
      "KV_PATH is a URL: KV_PATH is a file path; give a KV Connect URL as KV_URL (its access token as DENO_KV_ACCESS_TOKEN)",
    );
  }
  if (kvUrl !== undefined && kvPath !== undefined) {
    throw new ConfigError("KV_URL", "Set KV_URL or KV_PATH, not both");
  }
  if (kvPath !== undefined && onDeploy) {
    // Deno.openKv(KV_PATH) would open it in place of the attached database:
    // a store of this isolate's own, as with no database attached.
    throw new ConfigError(
      "KV_PATH",
      "KV_PATH is refused on Deno Deploy: a file or :memory: there is a store of each isolate's own, which loses the relayer's state on every restart and is not shared between instances, so two of them could send one payment. Remove KV_PATH from the app's environment variables and assign the app a Deno KV database (Databases in the Deno Deploy dashboard), or keep the state in PostgreSQL with DATABASE_URL",
    );
  }
  const database = databaseUrl(env);
  if (database !== undefined && (kvUrl !== undefined || kvPath !== undefined)) {
    const other = kvUrl !== undefined ? "KV_URL" : "KV_PATH";
    throw new ConfigError(
      "DATABASE_URL",
      `Set DATABASE_URL or ${other}, not both: the state lives in one store`,
    );
  }
  const kv = kvUrl !== undefined
    ? { url: kvUrl }
    : kvPath !== undefined
    ? { path: kvPath }
    : onDeploy
    ? { platform: true as const }
    : { path: "./data/relayer.kv" };
  const kvQueue = flag(env, "KV_QUEUE");
  if (kvQueue && qstashToken !== undefined) {
    throw new ConfigError(
      "KV_QUEUE",
      "Set KV_QUEUE or QSTASH_TOKEN, not both: new and redriven jobs go to one queue",
    );
  }
  if (kvQueue && onDeploy) {
    throw new ConfigError(
      "KV_QUEUE",
      "KV_QUEUE is refused on Deno Deploy: the local queue is run and tested as one long-lived process, which Deploy's isolates are not; use QStash there",
    );
  }
  if (kvQueue && kvUrl !== undefined) {
    throw new ConfigError(
      "KV_QUEUE",
      "KV_QUEUE is refused with KV_URL: a Deno KV reached over KV Connect runs no queue (every enqueue fails); use QStash, or KV_PATH for a local file",
    );
  }
  if (kvQueue && database !== undefined) {
    throw new ConfigError(
      "KV_QUEUE",
      "KV_QUEUE is refused with DATABASE_URL: the local queue enqueues in the same commit as the store's writes, and those are in PostgreSQL; use QStash or POST /v1/deliveries",
    );
  }
  if ("platform" in kv && database === undefined && !deployKvAttached(env)) {
    // Deno.openKv() would not fail: it would open a store of this isolate's
    // own, and every lease, write-ahead record and replay record with it.
    throw new ConfigError(
      "DENO_KV_DEFAULT_PATH",
      "No Deno KV database is attached to this app on Deno Deploy: Deno.openKv() would open an in-memory store of each isolate's own, which loses the relayer's state on every restart and is not shared between instances, so two of them could send one payment. In the Deno Deploy dashboard, Databases: Provision Database (Deno KV), then Assign it to this app, and redeploy; or keep the state in PostgreSQL with DATABASE_URL",
    );
  }
  const kvCap = kvQueue ? kvCapRefusal(policy.capMs) : undefined;
  if (kvCap !== undefined) throw new ConfigError("CAP", kvCap);
  // A delivery behind a send in flight waits what is left of its lease and
  // the skew twice (the relayer's busy wait): past 30 days Deno KV refuses
  // the retry, and each of its redeliveries of the message counts one more
  // delivery of the job.
  if (kvQueue && leaseMs + 2 * clockSkewMs > MAX_KV_DELAY_MS) {
    throw new ConfigError(
      "LEASE",
      `LEASE is ${
        formatDuration(leaseMs)
      }, but the local Deno KV queue delays a message at most 30 days, and a delivery behind a send in flight waits up to LEASE and CLOCK_SKEW twice (${
        formatDuration(leaseMs + 2 * clockSkewMs)
      }): lower LEASE to ${
        formatDuration(MAX_KV_DELAY_MS - 2 * clockSkewMs)
      } or less`,
    );
  }
  const maxBodyBytes = integer(env, "MAX_BODY_BYTES") ?? 64 * 1024;
  if (maxBodyBytes < MIN_BODY_BYTES) {
    // A delivery of a job with the longest intent id is about 200 bytes: a
    // smaller limit would answer every queue 413, and the queue repeats.
    throw new ConfigError(
      "MAX_BODY_BYTES",
      `MAX_BODY_BYTES must be at least ${MIN_BODY_BYTES} (a delivery of a job takes up to about 200 bytes): current value is ${maxBodyBytes}`,
    );
  }
  const bodyTimeoutMs = timerDuration(env, "BODY_TIMEOUT", 30_000);

  if (audience !== undefined) pubsubAckDeadline(timeoutMs);
  const queues = readQueues(env, policy, timeoutMs, leaseMs, clockSkewMs);
  checkQueues(policy, clockSkewMs, leaseMs, timeoutMs, queues, {
    qstash: current !== undefined || qstashToken !== undefined,
    pubsub: audience !== undefined,
    pubsubDeadLetter: deadLetterAudience !== undefined,
    pubsubMinBackoffSet: Boolean(env.PUBSUB_MIN_BACKOFF),
  });
  checkCloudflareQueues(policy, leaseMs, clockSkewMs, {
    maxRetries: queues.cloudflare?.maxRetries,
    deadLetterMaxRetries: cloudflareDeadLetterMaxRetries,
    messageRetentionMs,
    deadLetterMessageRetentionMs,
    deliveryDelayMs,
  });

  return {
    policy,
    leaseMs,
    clockSkewMs,
    ...(current !== undefined && next !== undefined && publicUrl !== undefined
      ? {
        qstash: {
          currentSigningKey: current,
          nextSigningKey: next,
          url: `${publicUrl}/v1/qstash`,
        },
      }
      : {}),
    ...(audience !== undefined && serviceAccount !== undefined
      ? { pubsub: { audience, serviceAccount } }
      : {}),
    ...(deadLetterAudience !== undefined && serviceAccount !== undefined
      ? { pubsubDeadLetter: { audience: deadLetterAudience, serviceAccount } }
      : {}),
    ...(qstashToken !== undefined && publicUrl !== undefined
      ? {
        qstashPublish: {
          token: qstashToken,
          publicUrl,
          ...(qstashUrl !== undefined ? { baseUrl: qstashUrl } : {}),
        },
      }
      : {}),
    ...(webhookSecret !== undefined ? { webhookSecret } : {}),
    ...(webhookSecretNext !== undefined ? { webhookSecretNext } : {}),
    ...(opsToken !== undefined ? { opsToken } : {}),
    ...(opsTokenNext !== undefined ? { opsTokenNext } : {}),
    sender: { url: senderUrl, timeoutMs },
    kv,
    kvQueue,
    onDeploy,
    ...(database !== undefined ? { database } : {}),
    maxBodyBytes,
    bodyTimeoutMs,
    insecureDev,
    ...(cloudflareDeadLetterMaxRetries !== undefined
      ? { cloudflareDeadLetterMaxRetries }
      : {}),
    ...(messageRetentionMs !== undefined ||
        deadLetterMessageRetentionMs !== undefined ||
        deliveryDelayMs !== undefined
      ? {
        cloudflareRetentions: {
          ...(messageRetentionMs !== undefined ? { messageRetentionMs } : {}),
          ...(deliveryDelayMs !== undefined ? { deliveryDelayMs } : {}),
          ...(deadLetterMessageRetentionMs !== undefined
            ? { deadLetterMessageRetentionMs }
            : {}),
        },
      }
      : {}),
    queues,
  };
}

// ---------------------------------------------------------------------------
// The queues' own limits (DESIGN §14): read, then checked against the policy.

const MAX_BACKOFF_MS = PUBSUB_BACKOFF_LIMIT_MS; // each bound 0 … 600 s

/**
 * A Cloudflare queue's duration setting, read as {@linkcode duration}
 * reads one, except that a plain number other than 0 is refused: the
 * Wrangler flag it mirrors (`flag`) counts seconds, and a number copied
 * from it, read as milliseconds, would be a thousandth as long (a delivery
 * delay so counted lets through a retention that ends before a message's
 * first delivery).
 */
function cloudflareDuration(
  env: Record<string, string | undefined>,
  name: string,
  flag: string,
): number | undefined {
  const ms = duration(env, name);
  const text = env[name]?.trim() ?? "";
  if (ms !== undefined && ms !== 0 && /^\d+$/.test(text)) {
    throw new ConfigError(
      name,
      `${name} is ${
        JSON.stringify(env[name])
      }, a plain number, which would be ${
        formatDuration(ms)
      } here, where Wrangler's ${flag} counts seconds: write ${text}s for seconds, or ${text}ms if you do mean milliseconds`,
    );
  }
  return ms;
}

/**
 * Reads a Cloudflare queue's message retention (`name`:
 * `CLOUDFLARE_MESSAGE_RETENTION` or `CLOUDFLARE_DLQ_MESSAGE_RETENTION`)
 * as the service reads it: whole seconds from 1 min to 14 days, as
 * Cloudflare takes it (the bounds `createQueueHandler` checks, from one
 * place); `undefined` when unset. `deno task schedule --queue cloudflare`
 * reads its `--message-retention` and `--dlq-message-retention` so.
 *
 * @example A retention in hours
 * ```ts
 * import { cloudflareRetention } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * const env = { CLOUDFLARE_MESSAGE_RETENTION: "96h" };
 * assert.equal(cloudflareRetention(env, "CLOUDFLARE_MESSAGE_RETENTION"), 345_600_000);
 * assert.throws(() => cloudflareRetention({ CLOUDFLARE_MESSAGE_RETENTION: "59s" }, "CLOUDFLARE_MESSAGE_RETENTION"), /whole seconds from 1m to 336h/);
 * ```
 *
 * @param env The settings.
 * @param name The setting to read.
 * @returns The retention, in milliseconds, or `undefined`.
 * @throws {ConfigError} If it is not whole seconds from 1 min to 14 days.
 */
export function cloudflareRetention(
  env: Record<string, string | undefined>,
  name: "CLOUDFLARE_MESSAGE_RETENTION" | "CLOUDFLARE_DLQ_MESSAGE_RETENTION",
): number | undefined {
  const ms = cloudflareDuration(env, name, "--message-retention-period-secs");
  if (ms !== undefined && !cloudflareRetentionAllowed(ms)) {
    throw new ConfigError(
      name,
      `${name} must be whole seconds from ${
        CLOUDFLARE_MIN_RETENTION_MS / 60_000
      }m to ${
        CLOUDFLARE_MAX_RETENTION_MS / 3_600_000
      }h (the queue's --message-retention-period-secs, ${
        CLOUDFLARE_MIN_RETENTION_MS / 1000
      } to ${
        CLOUDFLARE_MAX_RETENTION_MS / 1000
      }; 96h unless set): current value is ${formatDuration(ms)}`,
    );
  }
  return ms;
}

/**
 * Reads `CLOUDFLARE_DELIVERY_DELAY` as the service reads it: the jobs
 * queue's delivery delay (or the longest `delaySeconds` a producer sends
 * with), whole seconds from 0 to 24 hours, which `createQueueHandler`
 * counts in the jobs queue's retention (`deliveryDelayMs`); `undefined`
 * when unset. `deno task schedule --queue cloudflare` reads its
 * `--delivery-delay` so.
 *
 * @example A delay of a minute
 * ```ts
 * import { cloudflareDeliveryDelay } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDeliveryDelay({ CLOUDFLARE_DELIVERY_DELAY: "1m" }), 60_000);
 * assert.throws(() => cloudflareDeliveryDelay({ CLOUDFLARE_DELIVERY_DELAY: "1500ms" }), /whole seconds from 0 to 24h/);
 * ```
 *
 * @param env The settings.
 * @returns The delay, in milliseconds, or `undefined`.
 * @throws {ConfigError} If it is not whole seconds from 0 to 24 hours.
 */
export function cloudflareDeliveryDelay(
  env: Record<string, string | undefined>,
): number | undefined {
  const ms = cloudflareDuration(
    env,
    "CLOUDFLARE_DELIVERY_DELAY",
    "--delivery-delay-secs",
  );
  if (ms !== undefined && !cloudflareDeliveryDelayAllowed(ms)) {
    throw new ConfigError(
      "CLOUDFLARE_DELIVERY_DELAY",
      `CLOUDFLARE_DELIVERY_DELAY must be whole seconds from 0 to ${
        CLOUDFLARE_MAX_DELIVERY_DELAY_MS / 3_600_000
      }h (the queue's --delivery-delay-secs, or the longest delaySeconds a producer sends with): current value is ${
        formatDuration(ms)
      }`,
    );
  }
  return ms;
}

function countIn(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  max: number,
  note = "",
): number | undefined {
  const value = integer(env, name);
  if (value !== undefined && (value < min || value > max)) {
    throw new ConfigError(
      name,
      `${name} must be a whole number from ${min} to ${max}${note}: current value is ${value}`,
    );
  }
  return value;
}

function backoffIn(
  env: Record<string, string | undefined>,
  name: string,
  fallbackMs: number,
): number {
  const ms = duration(env, name) ?? fallbackMs;
  if (ms > MAX_BACKOFF_MS) {
    throw new ConfigError(
      name,
      `${name} must be at most 10m (Pub/Sub's limit): current value is ${
        formatDuration(ms)
      }`,
    );
  }
  return ms;
}

/** The longest acknowledgement deadline Pub/Sub allows (600 s), which is also a push's request timeout. */
const MAX_ACK_DEADLINE_MS = 600_000;

/**
 * The ack deadline a retention is checked with: {@linkcode pubsubAckDeadline}
 * (longer than Pub/Sub allows, only where Pub/Sub is not configured:
 * loadConfig refuses it where it is).
 */
function serviceAckDeadlineMs(senderTimeoutMs: number): number {
  return pushAnswerMs(senderTimeoutMs) > MAX_ACK_DEADLINE_MS
    ? MAX_ACK_DEADLINE_MS
    : pubsubAckDeadline(senderTimeoutMs);
}

/**
 * The longest this service takes to answer a push: the receipts, then one
 * send, each bounded by `SENDER_TIMEOUT`, and 5 s for the rest (the ack
 * deadline `docs/queues.md` asks for).
 */
function pushAnswerMs(senderTimeoutMs: number): number {
  return 2 * senderTimeoutMs + 5_000;
}

/**
 * Reads `QSTASH_RETRIES`, `PUBSUB_*` and `CLOUDFLARE_MAX_RETRIES`; with a
 * Pub/Sub retention, also what `checkQueue` counts against it: the ack
 * deadline, `LEASE` and `CLOCK_SKEW`.
 */
function readQueues(
  env: Record<string, string | undefined>,
  policy: Policy,
  senderTimeoutMs: number,
  leaseMs: number,
  clockSkewMs: number,
): QueueSettings {
  const retries = countIn(
    env,
    "QSTASH_RETRIES",
    0,
    100,
    " and at most your QStash plan's retry cap",
  ) ?? qstashDefaultRetries(policy.maxDeliveries, { leaseMs, clockSkewMs });
  const maxDeliveryAttempts = countIn(
    env,
    "PUBSUB_MAX_DELIVERY_ATTEMPTS",
    5,
    100,
  );
  const minBackoffMs = backoffIn(env, "PUBSUB_MIN_BACKOFF", 10_000);
  const maxBackoffMs = backoffIn(env, "PUBSUB_MAX_BACKOFF", MAX_BACKOFF_MS);
  if (minBackoffMs > maxBackoffMs) {
    throw new ConfigError(
      // The one the operator set: the other may be its default.
      env.PUBSUB_MIN_BACKOFF ? "PUBSUB_MIN_BACKOFF" : "PUBSUB_MAX_BACKOFF",
      `PUBSUB_MIN_BACKOFF (${
        formatDuration(minBackoffMs)
      }) must be at most PUBSUB_MAX_BACKOFF (${formatDuration(maxBackoffMs)})`,
    );
  }
  const retentionMs = pubsubRetention(env);
  const maxRetries = countIn(env, "CLOUDFLARE_MAX_RETRIES", 0, 100);
  return {
    // With LEASE and CLOCK_SKEW: a give-up answered busy behind another's
    // lease waits that long, and the failure callback's retries must
    // outlast it.
    qstash: { kind: "qstash", retries, leaseMs, clockSkewMs },
    pubsub: {
      kind: "pubsub",
      ...(maxDeliveryAttempts !== undefined ? { maxDeliveryAttempts } : {}),
      minBackoffMs,
      maxBackoffMs,
      ...(retentionMs !== undefined
        ? {
          retentionMs,
          // A push this service answers takes at most about two Sender
          // calls (docs/queues.md), which the ack deadline must allow.
          ackDeadlineMs: serviceAckDeadlineMs(senderTimeoutMs),
          // A busy last delivery's wait, which the retention must outlast.
          leaseMs,
        }
        : {}),
      // The rescue window must outlast STUCK_AFTER and it together.
      clockSkewMs,
    },
    ...(maxRetries !== undefined
      ? {
        cloudflare: { kind: "cloudflare" as const, maxRetries, clockSkewMs },
      }
      : {}),
  };
}

/**
 * Reads `SENDER_TIMEOUT`, how long a call to the Sender may take, as the
 * service does: a duration from 1 ms to the longest a timer waits; 10 s
 * unless set. `deno task schedule --sender-timeout` reads it through this.
 *
 * @example The default, and a setting
 * ```ts
 * import { senderTimeout } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(senderTimeout({}), 10_000);
 * assert.equal(senderTimeout({ SENDER_TIMEOUT: "20s" }), 20_000);
 * assert.throws(() => senderTimeout({ SENDER_TIMEOUT: "20" }), /SENDER_TIMEOUT is "20", a plain number/);
 * ```
 *
 * @param env The settings.
 * @returns The timeout, in milliseconds.
 * @throws {ConfigError} If `SENDER_TIMEOUT` is not such a duration.
 */
export function senderTimeout(env: Record<string, string | undefined>): number {
  return timerDuration(env, "SENDER_TIMEOUT", 10_000);
}

/**
 * Reads `LEASE`, how long a delivery may hold a job's intent, as the
 * service does: 30 s unless set, and at least twice `SENDER_TIMEOUT`, as
 * the lease is renewed right before a send and must outlast it.
 * `deno task schedule --lease` reads it through this.
 *
 * @example The default, and one too short for the Sender's timeout
 * ```ts
 * import { lease } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(lease({}, 10_000), 30_000);
 * assert.equal(lease({ LEASE: "1m" }, 10_000), 60_000);
 * assert.throws(() => lease({ LEASE: "15s" }, 10_000), /^ConfigError: LEASE \(15s\) must be at least twice SENDER_TIMEOUT \(10s\)/);
 * ```
 *
 * @param env The settings.
 * @param senderTimeoutMs `SENDER_TIMEOUT`, from {@linkcode senderTimeout}.
 * @returns The lease, in milliseconds.
 * @throws {ConfigError} If `LEASE` is not a duration, or is shorter than
 * twice `SENDER_TIMEOUT`.
 */
export function lease(
  env: Record<string, string | undefined>,
  senderTimeoutMs: number,
): number {
  const leaseMs = duration(env, "LEASE") ?? DEFAULT_LEASE_MS;
  if (leaseMs < 2 * senderTimeoutMs) {
    throw new ConfigError(
      "LEASE",
      `LEASE (${formatDuration(leaseMs)}${
        env.LEASE ? "" : ", its default"
      }) must be at least twice SENDER_TIMEOUT (${
        formatDuration(senderTimeoutMs)
      }): the lease is renewed right before a send and must outlast it, with room for the writes around it, or two deliveries could send at once. Set LEASE to at least ${
        formatDuration(2 * senderTimeoutMs)
      }, or lower SENDER_TIMEOUT`,
    );
  }
  return leaseMs;
}

/**
 * The ack deadline a Pub/Sub push needs, and that the service counts
 * each push against `PUBSUB_MESSAGE_RETENTION` with: 2 × `SENDER_TIMEOUT`
 * + 5 s (a push asks the Sender at most twice, docs/queues.md), and at
 * least 10 s, Pub/Sub's least. `deno task schedule --sender-timeout`
 * counts it so.
 *
 * @example The default SENDER_TIMEOUT, and one too long for Pub/Sub
 * ```ts
 * import { pubsubAckDeadline } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(pubsubAckDeadline(10_000), 25_000);
 * assert.equal(pubsubAckDeadline(1_000), 10_000);
 * assert.throws(() => pubsubAckDeadline(300_000), /^ConfigError: SENDER_TIMEOUT \(5m0s\) is too long for Pub\/Sub push/);
 * ```
 *
 * @param senderTimeoutMs `SENDER_TIMEOUT`, from {@linkcode senderTimeout}.
 * @returns The ack deadline, in milliseconds.
 * @throws {ConfigError} If it would be over 10 min, the longest Pub/Sub
 * allows: it would count pushes still at work as failed.
 */
export function pubsubAckDeadline(senderTimeoutMs: number): number {
  const answerMs = pushAnswerMs(senderTimeoutMs);
  if (answerMs > MAX_ACK_DEADLINE_MS) {
    // No acknowledgement deadline Pub/Sub allows would cover a push.
    throw new ConfigError(
      "SENDER_TIMEOUT",
      `SENDER_TIMEOUT (${
        formatDuration(senderTimeoutMs)
      }) is too long for Pub/Sub push: a push is answered within about 2 × SENDER_TIMEOUT + 5s (${
        formatDuration(answerMs)
      }), and Pub/Sub waits at most 10m (the acknowledgement deadline's maximum), so it would count pushes still at work as failed. Set SENDER_TIMEOUT to at most ${
        formatDuration((MAX_ACK_DEADLINE_MS - 5_000) / 2)
      }`,
    );
  }
  return Math.max(10_000, answerMs);
}

/**
 * Reads `PUBSUB_MESSAGE_RETENTION`, the Pub/Sub subscription's message
 * retention, as the service does: `10m` to `744h`, or `undefined` when
 * unset (not checked). `deno task schedule --message-retention` reads it
 * through this.
 *
 * @example Unset, set, and out of Pub/Sub's range
 * ```ts
 * import { pubsubRetention } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(pubsubRetention({}), undefined);
 * assert.equal(pubsubRetention({ PUBSUB_MESSAGE_RETENTION: "168h" }), 604_800_000);
 * assert.throws(() => pubsubRetention({ PUBSUB_MESSAGE_RETENTION: "5m" }), /must be from 10m to 744h/);
 * ```
 *
 * @param env The settings.
 * @returns The retention, in milliseconds, or `undefined`.
 * @throws {ConfigError} If it is not a duration from 10 min to 31 days.
 */
export function pubsubRetention(
  env: Record<string, string | undefined>,
): number | undefined {
  const retentionMs = duration(env, "PUBSUB_MESSAGE_RETENTION");
  if (
    retentionMs !== undefined &&
    (retentionMs < 600_000 || retentionMs > 2_678_400_000)
  ) {
    throw new ConfigError(
      "PUBSUB_MESSAGE_RETENTION",
      `PUBSUB_MESSAGE_RETENTION must be from 10m to 744h (Pub/Sub keeps a message 10 minutes to 31 days): current value is ${
        formatDuration(retentionMs)
      }`,
    );
  }
  return retentionMs;
}

/** `STUCK_AFTER`'s value, and `CLOCK_SKEW`'s when it is not 0, for a refusal. */
function stuckAndSkew(stuckAfterMs: number, clockSkewMs: number): string {
  return `${formatDuration(stuckAfterMs)}${
    clockSkewMs > 0
      ? ` and CLOCK_SKEW is ${
        formatDuration(clockSkewMs)
      } (an instance whose clock runs that far behind the one that recorded a send reads the payment as stuck that much later)`
      : ""
  }`;
}

/**
 * The `deno task schedule` command that checks a Pub/Sub message retention
 * as the service does, with the service's settings: a flag for each one
 * away from its default (the tool defaults as the service does), and the
 * retention last.
 */
function retentionCommand(
  policy: Policy,
  clockSkewMs: number,
  leaseMs: number,
  senderTimeoutMs: number,
  pubsub: Extract<QueueLimits, { kind: "pubsub" }> & { retentionMs: number },
): string {
  const flags: [string, number | string, number | string | undefined][] = [
    ["--max-deliveries", policy.maxDeliveries, DEFAULT_POLICY.maxDeliveries],
    ["--base", policy.baseMs, DEFAULT_POLICY.baseMs],
    ["--cap", policy.capMs, DEFAULT_POLICY.capMs],
    ["--jitter", policy.jitter, DEFAULT_POLICY.jitter],
    ["--stuck-after", policy.stuckAfterMs, DEFAULT_POLICY.stuckAfterMs],
    ["--clock-skew", clockSkewMs, DEFAULT_CLOCK_SKEW_MS],
    ["--min-backoff", pubsub.minBackoffMs, 10_000],
    ["--max-backoff", pubsub.maxBackoffMs, MAX_BACKOFF_MS],
    ["--max-delivery-attempts", pubsub.maxDeliveryAttempts ?? "", ""],
    ["--sender-timeout", senderTimeoutMs, 10_000],
    ["--lease", leaseMs, DEFAULT_LEASE_MS],
  ];
  const given = flags.filter(([, value, unset]) => value !== unset).map((
    [flag, value],
  ) =>
    `${flag} ${
      typeof value === "number" && flag !== "--max-deliveries" &&
        flag !== "--max-delivery-attempts"
        ? formatDuration(value)
        : value
    }`
  );
  return [
    "deno task schedule --queue pubsub",
    ...given,
    `--message-retention ${formatDuration(pubsub.retentionMs)}`,
  ].join(" ");
}

/**
 * Refuses, in one line naming the settings, a configured queue that gives
 * up before `MAX_DELIVERIES` or whose guaranteed rescue window under its
 * own delays is shorter than `STUCK_AFTER` and `CLOCK_SKEW` (the same `checkQueue` as
 * `rescueWindow` and `deno task schedule --queue`).
 */
function checkQueues(
  given: Policy,
  clockSkewMs: number,
  leaseMs: number,
  senderTimeoutMs: number,
  queues: QueueSettings,
  configured: {
    qstash: boolean;
    pubsub: boolean;
    pubsubDeadLetter: boolean;
    /** Set by the operator, not its default: the refusal says which. */
    pubsubMinBackoffSet: boolean;
  },
): void {
  // Checked against STUCK_AFTER and CLOCK_SKEW together (see loadConfig):
  // checkQueue counts the clock skew each queue carries (readQueues gave
  // each CLOCK_SKEW), so the library's verdict is the service's.
  const policy = given;
  const windowNeedMs = rescueNeedMs(given.stuckAfterMs, clockSkewMs);
  const max = policy.maxDeliveries;
  const stuck = stuckAndSkew(given.stuckAfterMs, clockSkewMs);
  if (configured.qstash) {
    const qstash = queues.qstash;
    const check = checkQueue(policy, qstash);
    const retries = queues.qstash.retries;
    if (check.problem === "stops_early" && check.limit >= max) {
      // QStash retries a failure callback as many times as the message,
      // on its own backoff (a busy give-up sends no Retry-After): all of
      // them may come while the give-up is busy, and the callback then
      // ends in QStash's DLQ with the intent stranded.
      const need = qstashRetriesNeed(qstash);
      throw new ConfigError(
        "QSTASH_RETRIES",
        `QSTASH_RETRIES is ${retries}, so QStash gives up after ${
          deliveriesText(check.limit)
        }, at or past MAX_DELIVERIES (${max}), and retries its failure callback ${retries} ${
          retries === 1 ? "time" : "times"
        }, within ${
          formatDuration(qstashCallbackSpanMs(retries))
        } of its first call on its own backoff (a give-up answered busy sends no Retry-After), but a give-up is answered busy behind another delivery's lease for up to LEASE + 2 × CLOCK_SKEW (${
          formatDuration(busyWaitMs(qstash))
        }): the callback would end in QStash's DLQ, and its intent stranded. ${
          Number.isFinite(need)
            ? `Set QSTASH_RETRIES to at least ${need} (retries past MAX_DELIVERIES − 1 are harmless: a delivery past MAX_DELIVERIES that fails is poisoned; it can be at most your QStash plan's retry cap)`
            : "Lower LEASE"
        }`,
      );
    }
    if (check.problem === "stops_early") {
      // The least that covers MAX_DELIVERIES and the failure callback's
      // retries both, so the setting asked for is not refused in turn.
      const need = qstashRetriesNeed({ ...qstash, retries: max - 1 });
      const least = Number.isFinite(need) ? need : max - 1;
      // A lease no retries QStash takes outlast: the retries asked for
      // alone would be refused in turn, for it.
      const lease = Number.isFinite(
          qstashRetriesNeed({ ...qstash, retries: Math.min(100, max - 1) }),
        )
        ? ""
        : `; and lower LEASE: no retries QStash takes (at most 100) outlast a give-up answered busy behind another delivery's lease, LEASE + 2 × CLOCK_SKEW (${
          formatDuration(busyWaitMs(qstash))
        }), and its failure callback would end in QStash's DLQ`;
      throw new ConfigError(
        "QSTASH_RETRIES",
        (max - 1 > 100
          ? `QSTASH_RETRIES is ${retries}, so QStash gives up after ${
            deliveriesText(check.limit)
          }, before MAX_DELIVERIES (${max}): QSTASH_RETRIES is taken up to 100 here (QStash documents no upper bound of its own; its published plan caps are 3, 5 and 20), so lower MAX_DELIVERIES to at most 101 and check the window with deno task schedule --queue qstash`
          : `QSTASH_RETRIES is ${retries}, so QStash gives up after ${
            deliveriesText(check.limit)
          }, before MAX_DELIVERIES (${max}): set QSTASH_RETRIES to at least ${
            least > max - 1
              ? `${least} (MAX_DELIVERIES − 1 is ${
                max - 1
              }, but the failure callback is retried as often, and its retries must outlast a give-up answered busy behind another delivery's lease, LEASE + 2 × CLOCK_SKEW (${
                formatDuration(busyWaitMs(qstash))
              }); it can be at most your QStash plan's retry cap)`
              : `${
                max - 1
              } (MAX_DELIVERIES − 1; it can be at most your QStash plan's retry cap)`
          }, or lower MAX_DELIVERIES and check the window with deno task schedule --queue qstash`) +
          lease,
      );
    }
    if (check.problem === "window_short") {
      throw new ConfigError(
        "CAP",
        `On QStash, which honours Retry-After up to 1 day, the rescue window is ${
          formatDuration(check.windowMs)
        } (guaranteed, QSTASH_RETRIES ${retries}) but STUCK_AFTER is ${stuck}: a settling payment would be poisoned before its rescue. Lower CAP to 24h or less, or lower STUCK_AFTER${
          clockSkewMs > 0 ? " or CLOCK_SKEW" : ""
        }`,
      );
    }
  }
  if (configured.pubsub) {
    // Unset, the subscription's retention is Pub/Sub's default, 7 days,
    // and it drops a message then with no dead letter: counted as a
    // retention set that long is, or MAX_DELIVERIES whose pushes outlast
    // it were taken and their intents stranded. A dead-letter policy (at
    // most 100 attempts of at most 20 min) always gives up within it.
    const unset = queues.pubsub.retentionMs === undefined &&
      queues.pubsub.maxDeliveryAttempts === undefined;
    const counted = unset
      ? {
        ...queues.pubsub,
        retentionMs: PUBSUB_DEFAULT_RETENTION_MS,
        ackDeadlineMs: serviceAckDeadlineMs(senderTimeoutMs),
        leaseMs,
        clockSkewMs,
      }
      : queues.pubsub;
    const check = checkQueue(policy, counted);
    const {
      maxDeliveryAttempts,
      minBackoffMs,
      maxBackoffMs,
      retentionMs,
      ackDeadlineMs,
    } = counted;
    if (maxDeliveryAttempts === undefined && configured.pubsubDeadLetter) {
      // The route is for a dead-letter policy, and that policy gives up
      // after its own attempts (Google's default 5 when not set): taken
      // for no policy, they were never checked, and a give-up at the fifth
      // delivery sent a settling payment to review before its rescue.
      throw new ConfigError(
        "PUBSUB_MAX_DELIVERY_ATTEMPTS",
        `PUBSUB_MAX_DELIVERY_ATTEMPTS is missing: PUBSUB_DEAD_LETTER_AUDIENCE is set, so the jobs' subscription has a dead-letter policy, and Pub/Sub gives up after its max delivery attempts (5 unless set), which must be at least MAX_DELIVERIES (${max}). Set the subscription's max delivery attempts, and PUBSUB_MAX_DELIVERY_ATTEMPTS to the same number, so that it is checked`,
      );
    }
    // Retention ends before a dead-letter policy gives up (or there is
    // none): an expired message is dropped, with no dead letter and no
    // give-up route. A delivery answers busy at and past the last (DESIGN
    // §13) while another's lease stands, LEASE + 2 × CLOCK_SKEW at most,
    // and only a push after that resolves the intent: the retention must
    // hold MAX_DELIVERIES pushes, that wait, and one more push. checkQueue
    // counts it (readQueues gave it LEASE and CLOCK_SKEW). A dead-letter
    // policy gives up first only if its last attempt's push surely ends
    // within the retention: Pub/Sub forwards the message once that push
    // failed, and an expired one is dropped.
    if (
      retentionMs !== undefined && retentionShort(counted, max)
    ) {
      const forwardMs = deadLetterEndMs(counted);
      const needMs = retentionNeedMs(counted, max);
      throw new ConfigError(
        "PUBSUB_MESSAGE_RETENTION",
        `PUBSUB_MESSAGE_RETENTION is ${
          unset
            ? `unset, so the subscription's is counted as Pub/Sub's default, ${
              formatDuration(retentionMs)
            }`
            : formatDuration(retentionMs)
        }, and each failed delivery may take up to ${
          formatDuration(ackDeadlineMs ?? 0)
        } (2 × SENDER_TIMEOUT + 5s) and PUBSUB_MAX_BACKOFF (${
          formatDuration(maxBackoffMs)
        }) before the next, so ${
          check.limit < max
            ? `a message can expire after ${
              deliveriesText(check.limit)
            }, before MAX_DELIVERIES (${max})`
            : maxDeliveryAttempts !== undefined &&
                check.limit >= maxDeliveryAttempts
            ? `a message can expire while its last delivery attempt (PUBSUB_MAX_DELIVERY_ATTEMPTS, ${maxDeliveryAttempts}) is pushed, before Pub/Sub forwards it to the dead-letter topic`
            : `a message can expire while its last delivery (MAX_DELIVERIES, ${max}) is answered busy behind another's lease (up to LEASE + 2 × CLOCK_SKEW, ${
              formatDuration(leaseMs + 2 * clockSkewMs)
            }), before the push that would resolve it`
        }: Pub/Sub then drops it with no dead letter, and its intent is stranded. Set the subscription's message retention, and PUBSUB_MESSAGE_RETENTION, to more than ${
          // The dead-letter policy's end where it comes first: past it
          // the last attempt's push surely ended (with fewer attempts than
          // MAX_DELIVERIES, the deliveries' need; they stop early anyway).
          retentionEnoughMs(counted, max) < needMs
            ? `${
              formatDuration(forwardMs)
            } ((PUBSUB_MAX_DELIVERY_ATTEMPTS − 1) × (2 × SENDER_TIMEOUT + 5s + PUBSUB_MAX_BACKOFF) + 2 × SENDER_TIMEOUT + 5s), or lower PUBSUB_MAX_BACKOFF${
              (maxDeliveryAttempts ?? max) > max
                ? `, or PUBSUB_MAX_DELIVERY_ATTEMPTS to no fewer than MAX_DELIVERIES (${max})`
                : ""
            }`
            : `${
              formatDuration(needMs)
            } (MAX_DELIVERIES × (2 × SENDER_TIMEOUT + 5s + PUBSUB_MAX_BACKOFF) + LEASE + 2 × CLOCK_SKEW), or lower PUBSUB_MAX_BACKOFF or MAX_DELIVERIES`}, and check the retention you choose with ${
          retentionCommand(given, clockSkewMs, leaseMs, senderTimeoutMs, {
            ...counted,
            retentionMs,
          })
        }`,
      );
    }
    if (check.problem === "stops_early") {
      throw new ConfigError(
        "PUBSUB_MAX_DELIVERY_ATTEMPTS",
        `PUBSUB_MAX_DELIVERY_ATTEMPTS is ${maxDeliveryAttempts}, so Pub/Sub dead-letters a job after ${
          deliveriesText(check.limit)
        }, before MAX_DELIVERIES (${max}): set the subscription's max delivery attempts and PUBSUB_MAX_DELIVERY_ATTEMPTS to at least ${max}, or lower MAX_DELIVERIES`,
      );
    }
    if (check.problem === "window_short") {
      // Pub/Sub guarantees only its minimum backoff per gap, with no growth,
      // so each of the MAX_DELIVERIES − 1 gaps needs (STUCK_AFTER +
      // CLOCK_SKEW) / gaps.
      const neededMs = pubsubMinBackoffNeedMs(windowNeedMs, check.deliveries);
      const fix = neededMs <= MAX_BACKOFF_MS
        ? `Set the subscription's minimum backoff and PUBSUB_MIN_BACKOFF to at least ${
          formatDuration(neededMs)
        } (${
          clockSkewMs > 0 ? "(STUCK_AFTER + CLOCK_SKEW)" : "STUCK_AFTER"
        } / (MAX_DELIVERIES − 1)), with PUBSUB_MAX_BACKOFF no lower`
        : `No minimum backoff Pub/Sub allows (at most 10m) is enough: raise MAX_DELIVERIES to at least ${
          pubsubDeliveriesNeed(windowNeedMs)
        } with a 10m minimum backoff, or lower STUCK_AFTER${
          clockSkewMs > 0 ? " or CLOCK_SKEW" : ""
        }`;
      throw new ConfigError(
        "PUBSUB_MIN_BACKOFF",
        `PUBSUB_MIN_BACKOFF is ${formatDuration(minBackoffMs)}${
          configured.pubsubMinBackoffSet
            ? ""
            : ", its default (unset: this service cannot read the subscription's retry policy)"
        }, and Pub/Sub applies its own backoff, guaranteeing only that much per gap: the rescue window is ${
          formatDuration(check.windowMs)
        } over ${check.deliveries} deliveries (PUBSUB_MAX_BACKOFF ${
          formatDuration(maxBackoffMs)
        }, PUBSUB_MAX_DELIVERY_ATTEMPTS ${
          maxDeliveryAttempts ?? "unset"
        }) but STUCK_AFTER is ${stuck}: a settling payment would be poisoned before its rescue. ${fix}`,
      );
    }
    if (maxDeliveryAttempts !== undefined && !configured.pubsubDeadLetter) {
      // A busy delivery retries past MAX_DELIVERIES (DESIGN §13): the job
      // Pub/Sub forwards to the dead-letter topic must reach its route.
      throw new ConfigError(
        "PUBSUB_DEAD_LETTER_AUDIENCE",
        `PUBSUB_DEAD_LETTER_AUDIENCE is missing: with PUBSUB_MAX_DELIVERY_ATTEMPTS set (${maxDeliveryAttempts}), Pub/Sub forwards a job it gives up on to the dead-letter topic, and only POST /v1/pubsub/dead-letter resolves its intent. Push the dead-letter topic's subscription to that route and set its audience here`,
      );
    }
  }
  if (queues.cloudflare !== undefined) {
    const check = checkQueue(policy, queues.cloudflare);
    const retries = queues.cloudflare.maxRetries;
    if (check.problem === "stops_early") {
      throw new ConfigError(
        "CLOUDFLARE_MAX_RETRIES",
        `CLOUDFLARE_MAX_RETRIES is ${retries}, so Cloudflare Queues move a job to the dead-letter queue after ${
          deliveriesText(check.limit)
        }, before MAX_DELIVERIES (${max}): set the consumer's max_retries and CLOUDFLARE_MAX_RETRIES to at least ${
          max - 1
        }, or lower MAX_DELIVERIES`,
      );
    }
    if (check.problem === "window_short") {
      throw new ConfigError(
        "CAP",
        `On Cloudflare Queues, where the queue handler asks for delays of at most 12h (Cloudflare takes up to 24h), the rescue window is ${
          formatDuration(check.windowMs)
        } (guaranteed, CLOUDFLARE_MAX_RETRIES ${retries}) but STUCK_AFTER is ${stuck}: a settling payment would be poisoned before its rescue. Lower CAP to 12h or less, or lower STUCK_AFTER${
          clockSkewMs > 0 ? " or CLOCK_SKEW" : ""
        }`,
      );
    }
  }
}

/**
 * Refuses a Cloudflare Worker's queue settings that its queue handler
 * (`createQueueHandler`) refuses, by the same rules, naming the setting: a
 * dead-letter queue whose `CLOUDFLARE_DLQ_MAX_RETRIES` retries span less
 * than 14 days, and a message retention that ends while the handler may
 * still retry a message there (counted with `CLOUDFLARE_MAX_RETRIES`, or
 * Cloudflare's 3 where it is not set, as the handler takes it, and
 * `CLOUDFLARE_DELIVERY_DELAY`). A Worker that reads them here and builds
 * its handler without one would have it taken unchecked, and Cloudflare
 * deletes a message whose retention ends, with no dead letter.
 */
function checkCloudflareQueues(
  policy: Policy,
  leaseMs: number,
  clockSkewMs: number,
  queues: {
    readonly maxRetries: number | undefined;
    readonly deadLetterMaxRetries: number | undefined;
    readonly messageRetentionMs: number | undefined;
    readonly deadLetterMessageRetentionMs: number | undefined;
    readonly deliveryDelayMs: number | undefined;
  },
): void {
  const dead = queues.deadLetterMaxRetries;
  const needed = dead === undefined
    ? undefined
    : cloudflareDeadLetterRetriesNeeded(dead, policy.baseMs);
  if (dead !== undefined && needed !== undefined) {
    throw new ConfigError(
      "CLOUDFLARE_DLQ_MAX_RETRIES",
      `CLOUDFLARE_DLQ_MAX_RETRIES is ${dead}, so a give-up that fails while the store is down would be retried for only ${
        formatDuration(
          cloudflareDeadLetterSpanSeconds(dead, policy.baseMs) * 1000,
        )
      } (less than 14 days, Cloudflare's longest retention) before Cloudflare deletes it, and its intent would be stranded. Set the dead-letter queue consumer's max_retries and CLOUDFLARE_DLQ_MAX_RETRIES to at least ${needed} (100 is safe)`,
    );
  }
  // Not a Cloudflare queue's settings (main.ts leaves every CLOUDFLARE_*
  // out): nothing to count an unset retention against. Any one set (a
  // delivery delay, the dead-letter queue's max_retries) is a Worker's,
  // whose handler counts an unset retention as 24 h.
  if (
    queues.maxRetries === undefined &&
    queues.deadLetterMaxRetries === undefined &&
    queues.messageRetentionMs === undefined &&
    queues.deadLetterMessageRetentionMs === undefined &&
    queues.deliveryDelayMs === undefined
  ) return;
  const refusal = cloudflareRetentionRefusal(
    {
      baseMs: policy.baseMs,
      capMs: policy.capMs,
      leaseMs,
      clockSkewMs,
      // Not set: Cloudflare's default, which the handler takes too.
      maxRetries: queues.maxRetries ?? 3,
      deliveryDelayMs: queues.deliveryDelayMs,
    },
    queues,
    "<dead-letter queue>",
  );
  if (refusal === undefined) return;
  const name = refusal.option === "messageRetentionMs"
    ? "CLOUDFLARE_MESSAGE_RETENTION"
    : "CLOUDFLARE_DLQ_MESSAGE_RETENTION";
  throw new ConfigError(
    name,
    `${name} is ${refusal.text.replace(/^not given,/, "unset,")}`,
  );
}

/**
 * The routes' settings of `config`, as `createApp` takes them:
 * the QStash keys, Pub/Sub's audiences and service account (with Google's
 * keys), the generic route's secret, the ops token, the body limit, the
 * body's deadline (`BODY_TIMEOUT`) and the insecure dev flag; what is not
 * set is left out. Every entry point builds
 * its app from it, so a route setting `loadConfig` accepts is never ignored.
 * Building it does no I/O: Google's keys are fetched on first use.
 *
 * @example
 * ```ts
 * import { loadConfig, routeOptions } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const config = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 *   MAX_BODY_BYTES: "1024",
 * });
 * assert.deepEqual(routeOptions(config), {
 *   webhookSecret: "a-webhook-secret-16",
 *   insecureDev: false,
 *   maxBodyBytes: 1024,
 *   bodyTimeoutMs: 30_000,
 * });
 * ```
 *
 * @param config What {@linkcode loadConfig} read.
 * @param options `jwks`: Google's keys for the Pub/Sub routes (default:
 * {@linkcode googleJwks}, fetched and cached).
 * @returns The options to spread into `createApp`'s.
 * @throws {TypeError} If `config` is not what `loadConfig` read (the
 * settings themselves, or what `workerConfig` returns rather than its
 * `config`), or `options` names an option it does not read.
 */
export function routeOptions(
  config: Config,
  options: { readonly jwks?: PubSubKeys["jwks"] } = {},
): RouteOptions {
  assertConfig(config);
  // A misspelt `jwks` would fetch Google's keys in silence.
  assertOptionNames("build route options", options, ["jwks"], {
    example: "{ jwks }",
  });
  const jwks = options.jwks ?? googleJwks();
  return {
    ...(config.qstash ? { qstash: config.qstash } : {}),
    ...(config.pubsub ? { pubsub: { ...config.pubsub, jwks } } : {}),
    ...(config.pubsubDeadLetter
      ? { pubsubDeadLetter: { ...config.pubsubDeadLetter, jwks } }
      : {}),
    ...(config.webhookSecret ? { webhookSecret: config.webhookSecret } : {}),
    ...(config.webhookSecretNext
      ? { webhookSecretNext: config.webhookSecretNext }
      : {}),
    ...(config.opsToken ? { opsToken: config.opsToken } : {}),
    ...(config.opsTokenNext ? { opsTokenNext: config.opsTokenNext } : {}),
    insecureDev: config.insecureDev,
    maxBodyBytes: config.maxBodyBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
  };
}

/**
 * Checks that `config` is what `loadConfig` read. From JavaScript, the
 * settings themselves, or what `workerConfig` returns (the settings under
 * `config`), were read as a config with no route: every delivery was
 * answered 503 naming a setting that was set. Names no value: the settings
 * hold secrets.
 */
function assertConfig(config: unknown): asserts config is Config {
  const what =
    "Cannot build route options as 'config' is not what loadConfig() read";
  const pass = "pass loadConfig(env), or workerConfig(env).config on a Worker";
  if (typeof config !== "object" || config === null) {
    throw new TypeError(
      `${what}: current value is ${show(config)}; ${pass}`,
    );
  }
  const fields = config as Partial<Record<keyof Config, unknown>>;
  const lacks = [
    typeof fields.insecureDev !== "boolean" && "insecureDev",
    typeof fields.maxBodyBytes !== "number" && "maxBodyBytes",
    typeof fields.bodyTimeoutMs !== "number" && "bodyTimeoutMs",
  ].filter((name) => name !== false);
  if (lacks.length === 0) return;
  const listed = lacks.length === 1
    ? lacks[0]
    : `${lacks.slice(0, -1).join(", ")} and ${lacks.at(-1)}`;
  const nested = typeof (config as { config?: unknown }).config === "object";
  throw new TypeError(
    `${what}: it lacks ${listed}; ${
      nested
        ? "pass workerConfig(env).config, not what workerConfig() returns"
        : pass
    }`,
  );
}

/**
 * What {@linkcode routeOptions} gives: the routes' part of `createApp`'s options.
 *
 * @example The routes a service's settings open
 * ```ts
 * import { loadConfig, type RouteOptions, routeOptions } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const routes: RouteOptions = routeOptions(loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 * }));
 * assert.equal(routes.webhookSecret, "a-webhook-secret-16");
 * assert.equal(routes.qstash, undefined); // QStash's route stays closed
 * ```
 */
export type RouteOptions = Pick<
  AppDeps,
  | "qstash"
  | "pubsub"
  | "pubsubDeadLetter"
  | "webhookSecret"
  | "webhookSecretNext"
  | "opsToken"
  | "opsTokenNext"
  | "insecureDev"
  | "maxBodyBytes"
  | "bodyTimeoutMs"
>;
