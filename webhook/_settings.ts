/**
 * The names of the service's settings, to tell a setting misspelt
 * (`MAX_DELIVERY=3`) from one of the service's: `loadConfig` reads only the
 * names it knows, so a misspelt one would leave its default in force with
 * nothing said.
 *
 * @module
 */

import { ConfigError, loadConfig } from "./config.ts";

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
    if (SETTINGS.has(name) || SERVICE_LINK.test(name)) continue;
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
 * to refuse a start after an upgrade). `PUBLIC_URL` is read only by
 * QStash's route (with its signing keys) and QStash's publisher (with
 * `QSTASH_TOKEN`); a Pub/Sub or generic setup needs none. So is
 * `QSTASH_RETRIES` (the route's check of QStash's limit, and the
 * publisher's `Upstash-Retries`). Pub/Sub's backoffs, retention and
 * delivery attempts are read only by the check of a Pub/Sub push route
 * (`PUBSUB_AUDIENCE`). `DENO_KV_ACCESS_TOKEN` is read only with `KV_URL`
 * (off Deno Deploy, whose runtime may open its own database with it).
 * postgres.js's `PGSSL` and `PGSSLNEGOTIATION` never are: the service
 * connects with the TLS `DATABASE_URL` asks for. The
 * `CLOUDFLARE_*` settings are read only by a Cloudflare Worker's queue
 * handler: the service, whose lines these are, consumes no Cloudflare
 * queue, and its start does not check them ({@linkcode serviceSettings}).
 * One that a Worker loading `env` refuses (`loadConfig` throws for it) is
 * named with the Worker's refusal, word for word; where the service's own
 * settings are refused first, a check that comes after theirs cannot be
 * judged, and the line says it is checked once they are taken.
 */
export function unreadSettingLines(
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const qstash = env.QSTASH_CURRENT_SIGNING_KEY ||
    env.QSTASH_NEXT_SIGNING_KEY ||
    env.QSTASH_TOKEN;
  const lines: string[] = [];
  if (env.PUBLIC_URL && !qstash) {
    lines.push(
      "relayer: PUBLIC_URL is set, but only QStash reads it (its route, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is ignored",
    );
  }
  if (env.QSTASH_RETRIES && !qstash) {
    lines.push(
      "relayer: QSTASH_RETRIES is set, but only QStash reads it (its route's check, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is ignored",
    );
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
  const cloudflare = CLOUDFLARE_ONLY.filter((name) => env[name]);
  // The service's own settings are judged only where a Worker's beside
  // them must be told apart.
  if (cloudflare.length === 0) return lines;
  const service = serviceSettings(env);
  const serviceRefusal = refusalOf(service);
  for (const name of cloudflare) {
    // loadConfig checks each CLOUDFLARE_ setting on its own: with it alone
    // added, a refusal other than the service's own is the Worker's for it.
    const refusal = refusalOf({ ...service, [name]: env[name] });
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
  return lines;
}

/** The message of the `ConfigError` `loadConfig(env)` throws, if it does. */
function refusalOf(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
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
