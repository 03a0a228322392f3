/**
 * The names of the service's settings, to tell a setting misspelt
 * (`MAX_DELIVERY=3`) from one of the service's: `loadConfig` reads only the
 * names it knows, so a misspelt one would leave its default in force with
 * nothing said. And which of them each entry point reads: `main.ts` leaves
 * a Cloudflare Worker's out of its check, a Worker (`workerConfig`) those
 * only `main.ts` reads, and each names those it was given but never reads.
 *
 * @module
 */

import {
  cloudflareRetention,
  type Config,
  ConfigError,
  loadConfig,
  loadConfigFor,
  openRoutesOf,
  refuseReusedOpsToken,
} from "./config.ts";
import {
  insecureDevMode,
  insecureDevRefusal,
  onLoopback,
  readableSetting,
  rotationState,
} from "./_auth.ts";
import { problem } from "./_problem.ts";
import { assertOptionNames, show } from "../policy/_validate.ts";

/** Every variable `loadConfig` and `main.ts` read (webhook/config.ts's table). */
export const SETTINGS: ReadonlySet<string> = new Set([
  "BASE",
  "BODY_TIMEOUT",
  "CAP",
  "CLOCK_SKEW",
  "CLOUDFLARE_DELIVERY_DELAY",
  "CLOUDFLARE_DLQ_MAX_RETRIES",
  "CLOUDFLARE_DLQ_MESSAGE_RETENTION",
  "CLOUDFLARE_MAX_RETRIES",
  "CLOUDFLARE_MESSAGE_RETENTION",
  "DATABASE_URL",
  "DENO_DEPLOYMENT_ID",
  "DENO_KV_ACCESS_TOKEN",
  "DENO_KV_DEFAULT_PATH",
  "DENO_KV_PATH_PREFIX",
  "JITTER",
  "KV_PATH",
  "KV_QUEUE",
  "KV_URL",
  "LEASE",
  "MAX_BODY_BYTES",
  "MAX_DELIVERIES",
  "OPS_TOKEN",
  "OPS_TOKEN_NEXT",
  "PUBLIC_URL",
  "PUBSUB_AUDIENCE",
  "PUBSUB_DEAD_LETTER_AUDIENCE",
  "PUBSUB_MAX_BACKOFF",
  "PUBSUB_MAX_DELIVERY_ATTEMPTS",
  "PUBSUB_MESSAGE_RETENTION",
  "PUBSUB_MIN_BACKOFF",
  "PUBSUB_SERVICE_ACCOUNT",
  "QSTASH_CURRENT_SIGNING_KEY",
  "QSTASH_NEXT_SIGNING_KEY",
  "QSTASH_RETRIES",
  "QSTASH_TOKEN",
  "QSTASH_URL",
  "RELAYER_INSECURE_DEV",
  "SENDER_TIMEOUT",
  "SENDER_URL",
  "STUCK_AFTER",
  "WEBHOOK_SECRET",
  "WEBHOOK_SECRET_NEXT",
]);

// Only names in the settings' own families, or a letter off a setting's
// name, are taken for a misspelling: the environment holds many others
// (PATH, HOME, the platform's). LEASE_ and JITTER_ are families too (a
// LEASE_MS). DATABASE_ is not: platforms and compose files set
// DATABASE_USER, DATABASE_PUBLIC_URL and the like beside DATABASE_URL; a
// DATABASE_URI, a letter off, is named all the same.
const FAMILIES =
  /^(QSTASH|PUBSUB|WEBHOOK|SENDER|KV|CLOUDFLARE|RELAYER|OPS|MAX|PUBLIC|STUCK|CLOCK|BODY|LEASE|JITTER)_/;

// Shorter names a letter off a setting are too common to name (BASH, TMP).
const ONE_OFF_LENGTH = 5;

// What Kubernetes sets in every pod for each service of its namespace
// (and Docker's links for each linked container): a service named
// `relayer` or `sender` gives RELAYER_SERVICE_HOST, SENDER_PORT,
// SENDER_PORT_9000_TCP_ADDR…, none of them a setting misspelt.
const SERVICE_LINK =
  /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/;

// What Wrangler reads from the environment it deploys or runs a Worker
// from (a CI job's CLOUDFLARE_API_TOKEN beside the Worker's settings;
// wrangler dev's, which CLOUDFLARE_INCLUDE_PROCESS_ENV hands to the
// Worker's env), none of them a setting misspelt:
// developers.cloudflare.com/workers/wrangler/system-environment-variables.
const WRANGLER = new Set([
  "CLOUDFLARE_ACCESS_CLIENT_ID",
  "CLOUDFLARE_ACCESS_CLIENT_SECRET",
  "CLOUDFLARE_ACCOUNT_ID",
  "CLOUDFLARE_API_BASE_URL",
  "CLOUDFLARE_API_KEY",
  "CLOUDFLARE_API_TOKEN",
  "CLOUDFLARE_CF_FETCH_ENABLED",
  "CLOUDFLARE_CF_FETCH_PATH",
  "CLOUDFLARE_COMPLIANCE_REGION",
  "CLOUDFLARE_EMAIL",
  "CLOUDFLARE_ENV",
  "CLOUDFLARE_INCLUDE_PROCESS_ENV",
  "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV",
]);
// wrangler dev's database for a Hyperdrive binding, by the binding's name
// (docs/queues.md's CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE).
const WRANGLER_HYPERDRIVE =
  /^CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_\w+$/;

function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(
        row[j]! + 1,
        next[j - 1]! + 1,
        row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    row = next;
  }
  return row[b.length]!;
}

/** Whether `name` is a letter off (one edit from) a setting's name. */
function oneOff(name: string): boolean {
  if (name.length < ONE_OFF_LENGTH) return false;
  for (const known of SETTINGS) {
    if (
      Math.abs(known.length - name.length) <= 1 && distance(name, known) <= 1
    ) {
      return true;
    }
  }
  return false;
}

/**
 * The lines that name each variable of `names` which looks like a setting
 * of the service (`MAX_DELIVERY`, `QSTASH_RETRY`) but is none, and the
 * setting it likely meant: it is ignored, and the default stays in force.
 */
export function unknownSettingLines(names: Iterable<string>): string[] {
  const lines: string[] = [];
  for (const name of [...names].sort()) {
    if (
      SETTINGS.has(name) || SERVICE_LINK.test(name) || WRANGLER.has(name) ||
      WRANGLER_HYPERDRIVE.test(name)
    ) {
      continue;
    }
    if (!FAMILIES.test(name) && !oneOff(name)) continue;
    let like: string | undefined;
    let best = 4; // at most 3 edits away
    for (const known of SETTINGS) {
      const d = distance(name, known);
      if (d < best) [best, like] = [d, known];
    }
    lines.push(
      `relayer: ${name} is not a setting of the relayer, so it is ignored${
        like === undefined ? "" : `: did you mean ${like}?`
      } (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)`,
    );
  }
  return lines;
}

/**
 * The lines that name each setting of `env` that is set but that nothing
 * reads, given the others: it is ignored, as a misspelt one is. The
 * service starts all the same (a setting it ignored before is no reason
 * to refuse a start after an upgrade). `PUBLIC_URL` is used only by
 * QStash's route (with its signing keys) and QStash's publisher (with
 * `QSTASH_TOKEN`); a Pub/Sub or generic setup needs none, and its line says
 * it is still read, to refuse the docs' local-run secrets and
 * `RELAYER_INSECURE_DEV` at a URL off this machine. `QSTASH_RETRIES` is read only by QStash too (the route's
 * check of QStash's limit, and the publisher's `Upstash-Retries`). Pub/Sub's backoffs, retention and
 * delivery attempts are read only by the check of a Pub/Sub push route
 * (`PUBSUB_AUDIENCE`). `DENO_KV_ACCESS_TOKEN` is read only with `KV_URL`
 * (off Deno Deploy, whose runtime may open its own database with it).
 * postgres.js's `PGSSL` and `PGSSLNEGOTIATION` never are: the service
 * connects with the TLS `DATABASE_URL` asks for. The
 * `CLOUDFLARE_*` settings are read only by a Cloudflare Worker's queue
 * handler: the service, whose lines these are, consumes no Cloudflare
 * queue, and its start does not check them ({@linkcode serviceSettings}).
 * One that a Worker loading `env` refuses (`loadConfig` throws for it) is
 * named with the Worker's refusal, word for word (each judged with the
 * `CLOUDFLARE_*` settings beside it that a Worker takes on their own, as a
 * message retention is counted with the other's, `CLOUDFLARE_MAX_RETRIES`
 * and `CLOUDFLARE_DELIVERY_DELAY`; a refusal that names another setting
 * set is on that one's line, and one of a `CLOUDFLARE_*` setting not set,
 * a retention counted as 24 h, on a line of its own that names it); where the service's own
 * settings are refused first, a check that comes after theirs cannot be
 * judged, and the line says it is checked once they are taken.
 */
export function unreadSettingLines(
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const lines = unreadBesideLines(env);
  const cloudflare = CLOUDFLARE_ONLY.filter((name) => env[name]);
  // The service's own settings are judged only where a Worker's beside
  // them must be told apart.
  if (cloudflare.length === 0) return lines;
  const service = serviceSettings(env);
  const serviceRefusal = refusalOf(service);
  // A Worker reads them together: a retention is counted with the
  // max_retries, the delivery delay and the other queue's retention beside
  // it (unset, 24 h). So each is judged with those beside it that hold on
  // their own.
  const taken: Record<string, string | undefined> = {};
  for (const name of cloudflare) {
    if (!ownRefusal(service, name, env[name])) taken[name] = env[name];
  }
  // A refusal of a Worker's setting not given (a retention counted as 24 h):
  // no value set here is at fault, and its own line names it.
  const unset = new Map<string, string>();
  for (const name of cloudflare) {
    const refused = refusalNamed({ ...service, ...taken, [name]: env[name] });
    const unsetOne = refused !== undefined && refused.setting !== name &&
      (CLOUDFLARE_ONLY as readonly string[]).includes(refused.setting) &&
      !env[refused.setting];
    if (unsetOne && !unset.has(refused.setting)) {
      unset.set(refused.setting, refused.message);
    }
    // Another setting's, set beside it or not set: that one's line names it.
    const refusal = unsetOne || (refused !== undefined &&
        refused.setting !== name && taken[refused.setting] !== undefined)
      ? undefined
      : refused?.message;
    const said =
      `relayer: ${name} is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here`;
    lines.push(
      refusal === undefined
        ? `${said} (its value is checked all the same)`
        : refusal !== serviceRefusal
        ? `${said}; a Worker given this value refuses to start: ${refusal}`
        : `${said} (its value is checked once the service's own settings are taken)`,
    );
  }
  for (const [name, refusal] of unset) {
    lines.push(
      `relayer: ${name} is not set, and a Cloudflare Worker given the CLOUDFLARE_ settings set here refuses to start for it (this service consumes no Cloudflare queue, and starts): ${refusal}`,
    );
  }
  return lines;
}

/**
 * The lines of {@linkcode unreadSettingLines} that the service and a
 * Worker share: each setting unread given the others beside it. For a
 * `worker`, QStash's settings are read by its route alone, with the
 * signing keys: a Worker has no QStash publisher.
 */
function unreadBesideLines(
  env: Readonly<Record<string, string | undefined>>,
  worker = false,
): string[] {
  const keys = env.QSTASH_CURRENT_SIGNING_KEY || env.QSTASH_NEXT_SIGNING_KEY;
  const lines: string[] = [];
  if (worker) {
    // A Worker has no QStash publisher (QSTASH_TOKEN is main.ts's, named
    // on its own): QStash's route alone reads these, with its signing keys.
    const needs =
      "which needs QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY, and neither is set, so it is ignored: set both signing keys from the QStash console to take QStash's deliveries, or remove it";
    // Not "ignored": the start reads it to refuse the docs' local-run
    // secrets and RELAYER_INSECURE_DEV at a URL off this machine, QStash or
    // not.
    if (env.PUBLIC_URL && !keys) {
      lines.push(
        "relayer: PUBLIC_URL is set, but a Cloudflare Worker uses it only for QStash's route, which needs QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY, and neither is set, so it is read only to refuse, at a URL off this machine, the docs' local-run secrets and RELAYER_INSECURE_DEV: set both signing keys from the QStash console to take QStash's deliveries",
      );
    }
    if (env.QSTASH_RETRIES && !keys) {
      lines.push(
        `relayer: QSTASH_RETRIES is set, but a Cloudflare Worker reads it only for QStash's route (its check of QStash's retries), ${needs}`,
      );
    }
  } else if (!keys && !env.QSTASH_TOKEN) {
    if (env.PUBLIC_URL) {
      lines.push(
        "relayer: PUBLIC_URL is set, but the service uses it only for QStash (its route, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is read only to refuse, at a URL off this machine, the docs' local-run secrets and RELAYER_INSECURE_DEV",
      );
    }
    if (env.QSTASH_RETRIES) {
      lines.push(
        "relayer: QSTASH_RETRIES is set, but only QStash reads it (its route's check, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is ignored",
      );
    }
  }
  if (env.DENO_KV_ACCESS_TOKEN && !env.KV_URL && !env.DENO_DEPLOYMENT_ID) {
    lines.push(
      "relayer: DENO_KV_ACCESS_TOKEN is set, but only a KV Connect database reads it (KV_URL), which is not set, so it is ignored",
    );
  }
  if (!env.PUBSUB_AUDIENCE) {
    for (const name of PUBSUB_CHECKED) {
      if (!env[name]) continue;
      lines.push(
        `relayer: ${name} is set, but only the Pub/Sub check reads it, with PUBSUB_AUDIENCE, which is not set, so it is ignored`,
      );
    }
  }
  for (const name of POSTGRES_TLS) {
    if (!env[name]) continue;
    lines.push(
      `relayer: ${name} is set, but the service takes TLS from DATABASE_URL alone (its sslmode and sslnegotiation: docs/postgres.md), so it is ignored`,
    );
  }
  return lines;
}

/** The message of the `ConfigError` `loadConfig(env)` throws, if it does. */
function refusalOf(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  return refusalNamed(env)?.message;
}

/** `loadConfig`'s refusal of `env`, with the setting it names. */
function refusalNamed(
  env: Readonly<Record<string, string | undefined>>,
): { readonly setting: string; readonly message: string } | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (error) {
    if (error instanceof ConfigError) {
      return { setting: error.setting, message: error.message };
    }
    throw error;
  }
}

/**
 * Whether a Worker refuses a `CLOUDFLARE_*` setting for its own value,
 * whatever beside it: out of its bounds, or, beside the service's settings,
 * refused in its own name (a retention, only for its bounds: what it is
 * counted with is judged beside it).
 */
function ownRefusal(
  service: Readonly<Record<string, string | undefined>>,
  name: (typeof CLOUDFLARE_ONLY)[number],
  value: string | undefined,
): boolean {
  if (
    name === "CLOUDFLARE_MESSAGE_RETENTION" ||
    name === "CLOUDFLARE_DLQ_MESSAGE_RETENTION"
  ) {
    try {
      cloudflareRetention({ [name]: value }, name);
      return false;
    } catch (error) {
      if (error instanceof ConfigError) return true;
      throw error;
    }
  }
  return refusalNamed({ ...service, [name]: value })?.setting === name;
}

/**
 * `env` without the settings only a Cloudflare Worker reads (the
 * `CLOUDFLARE_*` ones, its queue handler's): what the service's start
 * checks, with `loadConfig`. The service consumes no Cloudflare queue, so a
 * value a Worker refuses is no reason to refuse its start; it is named
 * instead, with the Worker's refusal ({@linkcode unreadSettingLines}). A
 * Worker loads its whole environment, and still refuses it.
 *
 * @example The service's start, beside a Worker's setting it never reads
 * ```ts
 * import { serviceSettings } from "./_settings.ts";
 * import { loadConfig } from "./config.ts";
 * import assert from "node:assert/strict";
 *
 * const env = {
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 *   CLOUDFLARE_MAX_RETRIES: "3", // fewer than MAX_DELIVERIES − 1
 * };
 * assert.throws(() => loadConfig(env), /CLOUDFLARE_MAX_RETRIES is 3/); // a Worker's start
 * assert.deepEqual(serviceSettings(env), {
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 * });
 * assert.equal(loadConfig(serviceSettings(env)).queues.cloudflare, undefined);
 * ```
 *
 * @param env The environment.
 * @returns A copy of `env` without the `CLOUDFLARE_*` settings.
 */
export function serviceSettings(
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string | undefined> {
  const service = { ...env };
  for (const name of CLOUDFLARE_ONLY) delete service[name];
  return service;
}

/**
 * The service's settings a Cloudflare Worker never reads, and what reads
 * them in `main.ts`: a Worker sends its jobs to its own queue and keeps its
 * state in its own store (`DATABASE_URL` is read by one on PostgreSQL,
 * `workerConfig`'s `database`).
 */
export const SERVICE_ONLY: Readonly<Record<string, string>> = {
  KV_PATH: "its Deno KV store",
  KV_URL: "its Deno KV store",
  DENO_KV_ACCESS_TOKEN: "its Deno KV store, with KV_URL",
  KV_QUEUE: "its local Deno KV queue",
  QSTASH_TOKEN: "its QStash publisher",
  QSTASH_URL: "its QStash publisher",
  DATABASE_URL: "its PostgreSQL store",
  DENO_DEPLOYMENT_ID: "set by Deno Deploy, where it runs",
  DENO_KV_DEFAULT_PATH: "set by Deno Deploy, its Deno KV database there",
  DENO_KV_PATH_PREFIX: "set by Deno Deploy, its Deno KV database there",
};

/** Cloudflare's `max_retries` for a consumer that sets none. */
const CLOUDFLARE_DEFAULTS = {
  CLOUDFLARE_MAX_RETRIES: "3",
  CLOUDFLARE_DLQ_MAX_RETRIES: "3",
} as const;

/**
 * `loadConfig` over a Worker's settings, Cloudflare's defaults among them: a
 * refusal of a default the Worker was not given says it is that default, as
 * the operator set no such number.
 */
function loadWithDefaults(
  settings: Record<string, unknown>,
  env: Record<string, unknown>,
  consumes: boolean,
): Config {
  try {
    return loadConfigFor(settings, "npx wrangler dev", { consumes });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const name = error.setting;
    if (!(name in CLOUDFLARE_DEFAULTS) || (env[name] ?? "") !== "") throw error;
    const value = CLOUDFLARE_DEFAULTS[name as keyof typeof CLOUDFLARE_DEFAULTS];
    const said = `${name} is ${value},`;
    if (!error.message.startsWith(said)) throw error;
    throw new ConfigError(
      name,
      `${name} is ${value}, its default (unset: Cloudflare's max_retries for a consumer that sets none),${
        error.message.slice(said.length)
      }`,
    );
  }
}

/**
 * What {@linkcode workerConfig} gives a Worker.
 *
 * @example A setting only `main.ts` reads, named once
 * ```ts
 * import { type WorkerConfig, workerConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const worker: WorkerConfig = workerConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 *   CLOUDFLARE_MAX_RETRIES: "9",
 *   CLOUDFLARE_DLQ_MAX_RETRIES: "100",
 *   KV_QUEUE: "1",
 * });
 * assert.equal(worker.config.webhookSecret, "a-webhook-secret-16");
 * assert.equal(worker.unread.length, 1);
 * assert.match(worker.unread[0]!, /^relayer: KV_QUEUE is set, but only main\.ts reads it/);
 * ```
 */
export interface WorkerConfig {
  /** The settings a Worker reads, checked. */
  readonly config: Config;
  /**
   * A line for each setting given that the Worker never reads: a name like
   * a setting's but none (`MAX_DELIVERY`, as `main.ts` names it), those
   * only `main.ts` reads, those nothing reads beside the rest, and, for a
   * Worker on PostgreSQL (`database`), a `DATABASE_URL` beside a Hyperdrive
   * binding `HYPERDRIVE`, which it connects through instead; and, for a
   * Worker that consumes no queue (`queues: false`), each `CLOUDFLARE_*`
   * setting.
   */
  readonly unread: readonly string[];
  /**
   * `handlers` (a Worker's default export: `fetch`, `queue`), each of which
   * first logs the `unread` lines through `log`, on the first call of any
   * of them only: once per isolate, in an event, as a Worker's global scope
   * is no place for I/O. Its handlers may be its class's methods (`new
   * Worker()`); a class itself (a `WorkerEntrypoint`) is refused with a
   * `TypeError`. With a secret anyone can read (the docs' local-run
   * `WEBHOOK_SECRET`, `WEBHOOK_SECRET_NEXT`, `OPS_TOKEN` or `OPS_TOKEN_NEXT`, or a local
   * QStash's published signing key), `fetch` serves requests to a loopback
   * host only (`wrangler dev`): once one comes to another host, as every
   * request on Cloudflare does, it logs a line naming the setting and
   * answers each request from then on 503 `not-configured`, saying the
   * same (never the value). So it does with `RELAYER_INSECURE_DEV`, naming
   * the routes it would open; on its first event it logs those routes, as
   * `main.ts`'s start line does (`INSECURE DEV MODE (…)`), and so a
   * rotation of `WEBHOOK_SECRET` or `OPS_TOKEN` under way, or over and left
   * half done (`relayer: routes: ops (two tokens: …)`). With secrets of its own, and no
   * `RELAYER_INSECURE_DEV`, `fetch` checks nothing per request.
   */
  nameUnread<H extends object>(handlers: H, log: (line: string) => void): H;
}

/** What a Worker on PostgreSQL says of a `DATABASE_URL` beside its Hyperdrive binding. */
const HYPERDRIVE_BESIDE =
  "relayer: DATABASE_URL is set beside the Hyperdrive binding HYPERDRIVE, which a Worker on PostgreSQL connects through, so DATABASE_URL is ignored (its host, database and TLS settings too): remove it from the Worker's secrets (wrangler secret delete DATABASE_URL), or remove the [[hyperdrive]] binding to connect by DATABASE_URL";

/**
 * A Cloudflare Worker's settings: `loadConfig` over its environment, its
 * queues' `max_retries` Cloudflare's 3 where `CLOUDFLARE_MAX_RETRIES` or
 * `CLOUDFLARE_DLQ_MAX_RETRIES` is not set (unless `queues: false`: a
 * Worker that consumes no queue reads neither), without the settings only
 * `main.ts` reads (its Deno KV store and queue, its QStash publisher, Deno
 * Deploy's own, and `DATABASE_URL` unless `database`), which a Worker
 * neither checks nor refuses, whatever their value (but an `OPS_TOKEN`
 * equal to a `QSTASH_TOKEN` given, which QStash's console shows, is
 * refused, as `loadConfig` refuses it). Each of those given,
 * each other setting nothing reads beside the rest, and each variable named
 * like a setting but none (`MAX_DELIVERY`: its default stays; a binding,
 * an object, is none), as `main.ts` names them, is named once, on the
 * Worker's first event (`nameUnread`). A
 * Worker has no platform marker and may have no `PUBLIC_URL`, so a secret
 * anyone can read (the docs' local-run ones, a local QStash's published
 * keys), and `RELAYER_INSECURE_DEV`, are judged by the host its requests
 * come to: `nameUnread`'s `fetch` serves loopback ones only. Pure: no I/O, timer or random number, so it
 * runs at a Worker's top level.
 *
 * @example A service's environment copied into a Worker
 * ```ts
 * import { workerConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const { config, nameUnread } = workerConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-webhook-secret-16",
 *   CLOUDFLARE_MAX_RETRIES: "9",
 *   CLOUDFLARE_DLQ_MAX_RETRIES: "100",
 *   KV_PATH: "https://kv.example.test/db", // loadConfig refuses it
 * });
 * assert.equal(config.queues.cloudflare?.maxRetries, 9);
 * const logged: string[] = [];
 * const worker = nameUnread({ fetch: () => new Response("ok") }, (line) => {
 *   logged.push(line);
 * });
 * worker.fetch();
 * worker.fetch();
 * assert.deepEqual(logged, [
 *   "relayer: KV_PATH is set, but only main.ts reads it (its Deno KV store), not a Cloudflare Worker, so it is ignored: remove it from the Worker's settings",
 * ]);
 * ```
 *
 * @param env The Worker's environment (`cloudflare:workers`' `env`): its
 * settings as text, or as wrangler.toml's unquoted `[vars]` give them,
 * beside its bindings.
 * @param options `database`: the Worker keeps its state in PostgreSQL, and
 * reads `DATABASE_URL` (beside a Hyperdrive binding `HYPERDRIVE`, which it
 * then connects through, `DATABASE_URL` is neither read nor checked,
 * `config.database` is absent, and it is named as ignored). `queues`
 * (default `true`): `false` for a Worker that consumes no Cloudflare queue
 * (fetch only: QStash's route, the generic one), which is then held to no
 * queue's `max_retries` or retention: its `CLOUDFLARE_*` settings are
 * neither checked nor defaulted (`config.queues.cloudflare` is absent), and
 * each given is named as ignored. A queue handler built from that `config`
 * anyway is refused by `createQueueHandler`, whose `maxRetries` not given
 * is Cloudflare's 3.
 * @returns The checked settings, and what names those unread.
 * @throws {ConfigError} For a setting the Worker reads that is refused.
 * @throws {TypeError} For an `env` that is not an object, or is an array;
 * for an option other than `database` and `queues`, or one not a boolean.
 */
export function workerConfig(
  env: object,
  options: { readonly database?: boolean; readonly queues?: boolean } = {},
): WorkerConfig {
  if (typeof env !== "object" || env === null || Array.isArray(env)) {
    // A spread of it would be no settings at all (an array's, its
    // indexes), and the refusal would name a setting missing.
    throw new TypeError(
      `Cannot read the Worker's settings as workerConfig takes the Worker's env object (import { env } from "cloudflare:workers", or a handler's env argument): current value is ${
        env === null ? "null" : Array.isArray(env) ? "an array" : typeof env
      }`,
    );
  }
  // A misspelt or non-boolean `database` would leave DATABASE_URL unread,
  // the Worker's store unchecked, with nothing said.
  assertOptionNames(
    "read the Worker's settings",
    options,
    ["database", "queues"],
    { example: "{ database: true }" },
  );
  if (
    options.database !== undefined && typeof options.database !== "boolean"
  ) {
    throw new TypeError(
      `Cannot read the Worker's settings as 'database' must be true or false (true: the Worker reads DATABASE_URL): current value is ${
        show(options.database)
      }`,
    );
  }
  // A misspelt value would hold a fetch-only Worker to a queue's retries,
  // or a consumer to none.
  if (options.queues !== undefined && typeof options.queues !== "boolean") {
    throw new TypeError(
      `Cannot read the Worker's settings as 'queues' must be true or false (false: the Worker consumes no Cloudflare queue): current value is ${
        show(options.queues)
      }`,
    );
  }
  // An object, not a record: workerd's Env is an interface.
  const settings: Record<string, unknown> = { ...env };
  const consumes = options.queues !== false;
  // A Worker that consumes no queue (fetch only: QStash's route, the
  // generic one) reads none of a consumer's settings: named, not checked.
  const consumerOnly = consumes
    ? []
    : CLOUDFLARE_ONLY.filter((name) =>
      settings[name] !== undefined && settings[name] !== ""
    );
  if (!consumes) {
    for (const name of CLOUDFLARE_ONLY) delete settings[name];
  }
  // Not given, or given empty (wrangler.toml's ""), which loadConfig reads
  // as not set: Cloudflare's default, which the consumer runs with.
  for (const [name, value] of Object.entries(CLOUDFLARE_DEFAULTS)) {
    if (consumes && (settings[name] ?? "") === "") settings[name] = value;
  }
  const ignored = Object.keys(SERVICE_ONLY).filter((name) =>
    name !== "DATABASE_URL" || options.database !== true
  );
  const given = ignored.filter((name) =>
    settings[name] !== undefined && settings[name] !== ""
  );
  for (const name of ignored) delete settings[name];
  // The docs' and postgres_worker.ts's convention: a Hyperdrive binding
  // named HYPERDRIVE is what a Worker on PostgreSQL connects through. A
  // DATABASE_URL beside it is then ignored, and said so, not refused: the
  // two most often name one database, which only Hyperdrive's connection
  // string (read in a handler) could tell. Not read either: one it would
  // refuse alone (a host in brackets, whose refusal says to bind
  // Hyperdrive) would stop a Worker that never uses it.
  const hyperdrive = (env as Record<string, unknown>).HYPERDRIVE;
  const beside = options.database === true &&
      typeof hyperdrive === "object" && hyperdrive !== null &&
      settings.DATABASE_URL !== undefined && settings.DATABASE_URL !== ""
    ? [HYPERDRIVE_BESIDE]
    : [];
  if (beside.length > 0) delete settings.DATABASE_URL;
  const config = loadWithDefaults(
    settings,
    env as Record<string, unknown>,
    consumes,
  );
  if (config.database?.hosts !== undefined) {
    // loadConfig takes it for main.ts, which hands the client its host and
    // port as lists; postgres.js's Workers build dials `host:port`, and the
    // Worker's client is given the URL alone.
    throw new ConfigError(
      "DATABASE_URL",
      "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: its host is an IPv6 address in brackets, which a Cloudflare Worker's PostgreSQL client does not dial: use a host name that resolves to it, or bind Hyperdrive as HYPERDRIVE",
    );
  }
  // Unread here, but QStash's console shows it: it must not open the
  // Worker's ops routes either.
  const qstashToken = (env as Record<string, unknown>).QSTASH_TOKEN;
  const qstash = [[
    "QSTASH_TOKEN",
    qstashToken === undefined ? undefined : String(qstashToken),
  ]] as const;
  refuseReusedOpsToken(config.opsToken, qstash);
  refuseReusedOpsToken(config.opsTokenNext, qstash, "OPS_TOKEN_NEXT");
  // Read as text, as loadConfig reads them: a [vars] value may be a number.
  const text: Record<string, string> = {};
  for (const name of SETTINGS) {
    if (settings[name] !== undefined) text[name] = String(settings[name]);
  }
  // A setting's name misspelt leaves its default in force, as it does in
  // main.ts: named as there. A binding (a queue, Hyperdrive) is an object,
  // no setting, whatever its name.
  const named = Object.keys(env).filter((name) =>
    ["string", "number", "boolean"].includes(
      typeof (env as Record<string, unknown>)[name],
    )
  );
  const unread = [
    ...beside,
    ...unknownSettingLines(named),
    ...given.map((name) =>
      `relayer: ${name} is set, but only main.ts reads it (${
        SERVICE_ONLY[name]
      }), not a Cloudflare Worker, so it is ignored: remove it from the Worker's settings`
    ),
    ...consumerOnly.map((name) =>
      `relayer: ${name} is set, but only a Cloudflare Queues consumer reads it (its queue handler, createQueueHandler), and this Worker consumes no queue (workerConfig's queues: false), so it is ignored: remove it from the Worker's settings, or pass queues: true if it consumes one`
    ),
    ...unreadBesideLines(text, true),
  ];
  // A Worker has no platform marker, and often no PUBLIC_URL: where it is
  // reached is told by the requests themselves, whose host Cloudflare
  // routes by (never a loopback one). Known here, so a Worker with secrets
  // of its own wraps its fetch as before and pays nothing per request.
  // So is RELAYER_INSECURE_DEV, refused by the same rule: with no
  // PUBLIC_URL, nothing else tells a Worker on Cloudflare from `wrangler
  // dev`, and there it would open each route whose keys are not set, the
  // ops routes too without OPS_TOKEN, to whoever reaches it.
  const found = readableSetting(config);
  const open = openRoutesOf(config);
  // Said on the first event, as main.ts says it on its start line: which
  // routes take unsigned requests while the Worker is reached on loopback.
  const insecureLine = config.insecureDev
    ? `relayer: ${insecureDevMode(open)}, served to a loopback host only`
    : undefined;
  const refusedOffMachine = found !== undefined
    ? `${found.setting} is ${found.readable}, and this Worker is reached off this machine, so it answers nothing: ${found.fix}, and set it with: wrangler secret put ${found.setting}`
    : config.insecureDev
    ? insecureDevRefusal(
      "this Worker is reached off this machine, so it answers nothing",
      open,
      "npx wrangler dev",
    )
    : undefined;
  // A rotation under way, or over and left half done, said as main.ts's
  // start line says it: a Worker has no start line.
  const rotations = [
    config.webhookSecret !== undefined && config.webhookSecretNext !== undefined
      ? rotationState(
        "deliveries",
        config.webhookSecret,
        config.webhookSecretNext,
      )
      : undefined,
    config.opsToken !== undefined && config.opsTokenNext !== undefined
      ? rotationState("ops", config.opsToken, config.opsTokenNext)
      : undefined,
  ].flatMap((state) =>
    state === undefined ? [] : [`relayer: routes: ${state}`]
  );
  const firstLines = [
    ...unread,
    ...rotations,
    ...(insecureLine === undefined ? [] : [insecureLine]),
  ];
  let said = firstLines.length === 0;
  const sayOnce = (log: (line: string) => void) => {
    if (said) return;
    said = true;
    for (const line of firstLines) log(line);
  };
  // Once a request came from off this machine, every later one is refused.
  let offMachine = false;
  return {
    config,
    unread,
    nameUnread(handlers, log) {
      if (typeof handlers === "function") {
        // workerd builds a class anew for each event; no copy of it wraps
        // its methods.
        throw new TypeError(
          "nameUnread takes a Worker's handlers object ({ fetch, queue }), not a class: export an object, or log workerConfig's `unread` lines from the class's own handlers",
        );
      }
      type Handler = (...args: unknown[]) => unknown;
      const plain = (handler: Handler) => (...args: unknown[]) => {
        sayOnce(log);
        return handler.apply(handlers, args);
      };
      const guarded = (detail: string) =>
      (handler: Handler) =>
      (
        ...args: unknown[]
      ) => {
        sayOnce(log);
        if (!offMachine) {
          const url = (args[0] as { url?: unknown } | undefined)?.url;
          offMachine = typeof url === "string" && !onLoopback(url);
          if (offMachine) log(`relayer: ${detail}`);
        }
        return offMachine
          ? problem(503, "not-configured", "Route not configured", detail)
          : handler.apply(handlers, args);
      };
      const wrapFetch = refusedOffMachine === undefined
        ? plain
        : guarded(refusedOffMachine);
      const wrapAs = (key: string) => key === "fetch" ? wrapFetch : plain;
      // Read by descriptor: a getter is no handler until workerd reads it,
      // and one that throws must not throw here. It is read then, on the
      // object itself, and a handler it gives is wrapped as the others.
      const named: Record<string, unknown> = {};
      for (const [key, found] of handlerDescriptors(handlers)) {
        if ("value" in found) {
          named[key] = typeof found.value === "function"
            ? wrapAs(key)(found.value as Handler)
            : found.value;
          continue;
        }
        Object.defineProperty(named, key, {
          enumerable: true,
          configurable: true,
          get: () => {
            const value: unknown = Reflect.get(handlers, key);
            return typeof value === "function"
              ? wrapAs(key)(value as Handler)
              : value;
          },
        });
      }
      return named as typeof handlers;
    },
  };
}

/**
 * The descriptors of `handlers`' properties, its own enumerable ones and
 * those of its class (`export default new Worker()`, whose `fetch` workerd
 * finds on the prototype, where a spread of the object does not), the
 * nearest of each name: read without calling a getter.
 */
function handlerDescriptors(
  handlers: object,
): Map<string, PropertyDescriptor> {
  const found = new Map<string, PropertyDescriptor>();
  for (const name of Object.keys(handlers)) {
    found.set(name, Object.getOwnPropertyDescriptor(handlers, name)!);
  }
  for (
    let proto = Object.getPrototypeOf(handlers);
    proto !== null && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === "constructor" || found.has(name)) continue;
      found.set(name, Object.getOwnPropertyDescriptor(proto, name)!);
    }
  }
  return found;
}

// postgres.js's own TLS variables, which main.ts overrides with what
// DATABASE_URL says (the start line tells it), so that the environment
// cannot change it unseen.
const POSTGRES_TLS = ["PGSSL", "PGSSLNEGOTIATION"] as const;

// What loadConfig checks for a Cloudflare Worker (the example Workers
// pass them to createQueueHandler): the service runs no queue handler.
const CLOUDFLARE_ONLY = [
  "CLOUDFLARE_MAX_RETRIES",
  "CLOUDFLARE_DLQ_MAX_RETRIES",
  "CLOUDFLARE_MESSAGE_RETENTION",
  "CLOUDFLARE_DLQ_MESSAGE_RETENTION",
  "CLOUDFLARE_DELIVERY_DELAY",
] as const;

// The subscription's settings the start-up check of Pub/Sub reads, and
// nothing else: without PUBSUB_AUDIENCE there is no check.
const PUBSUB_CHECKED = [
  "PUBSUB_MIN_BACKOFF",
  "PUBSUB_MAX_BACKOFF",
  "PUBSUB_MESSAGE_RETENTION",
  "PUBSUB_MAX_DELIVERY_ATTEMPTS",
] as const;
