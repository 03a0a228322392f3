/**
 * The three ways a queue proves a delivery is its own: QStash's signed JWT
 * (verified by the official `Receiver`), Google's OIDC bearer token
 * (verified against a JWKS), and an HMAC-SHA-256 of the raw body. Web
 * APIs and pure JavaScript only.
 *
 * @module
 */

import { Receiver, SignatureError } from "@upstash/qstash";
import { verifyWithJwks } from "hono/jwt";
import type { HonoJsonWebKey } from "hono/utils/jwt/jws";
import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { stepBackPace } from "./_step_back.ts";
import { optionUrlSaid, readsAsUrl, textSaid, urlSaid } from "./_url_said.ts";

const encoder = new TextEncoder();

/**
 * Compares two strings (as UTF-8) or byte arrays in time that depends on
 * their length only.
 */
export function timingSafeEqual(
  a: string | Uint8Array,
  b: string | Uint8Array,
): boolean {
  const x = typeof a === "string" ? encoder.encode(a) : a;
  const y = typeof b === "string" ? encoder.encode(b) : b;
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  }
  return diff === 0;
}

/**
 * A check of a presented bearer token against `tokens` (`OPS_TOKEN`, and
 * `OPS_TOKEN_NEXT` while a rotation is under way): each compared by
 * `options.equal`, whatever the others gave, so the time taken says
 * nothing of which one, if any, it is. What is compared is the SHA-256
 * digest of each (the tokens' taken once, here): 32 bytes against 32,
 * so neither the presented token's length nor its content changes how
 * long a comparison runs, and no comparison's length tells a token's.
 */
export function tokenMatcher(
  tokens: readonly string[],
  options: {
    /** @default {timingSafeEqual} */
    readonly equal?: (a: Uint8Array, b: Uint8Array) => boolean;
  } = {},
): (presented: string) => boolean {
  const { equal = timingSafeEqual } = options;
  const expected = tokens.map((token) => sha256(encoder.encode(token)));
  return (presented) => {
    const given = sha256(encoder.encode(presented));
    let matched = false;
    for (const token of expected) matched = equal(given, token) || matched;
    return matched;
  };
}

/**
 * What a verified delivery leaves behind so the same signed request cannot
 * be used twice: a key unique to the signed request and the time, in
 * milliseconds, after which the signature is refused anyway (so the record
 * of it may go). QStash: `qstash/<jti>` until 90 s past the token's `exp`
 * (its 30 s of clock tolerance and a minute's margin); the generic route:
 * `deliveries/<v1>` until `t` + 6 minutes.
 *
 * @example Keep a claim until it expires
 * ```ts
 * import type { ReplayClaim } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const used = new Map<string, number>();
 * function firstUse(claim: ReplayClaim, now: number): boolean {
 *   for (const [key, until] of used) if (until <= now) used.delete(key);
 *   if (used.has(claim.key)) return false;
 *   used.set(claim.key, claim.expiresAt);
 *   return true;
 * }
 * const claim: ReplayClaim = { key: "qstash/jwt_67kxXD6UBAk7DqU6hzuHMDdXFXfP", expiresAt: 300_000 };
 * assert.equal(firstUse(claim, 0), true);
 * assert.equal(firstUse(claim, 1_000), false); // a replay
 * ```
 */
export interface ReplayClaim {
  /** Unique to the signed request. */
  readonly key: string;
  /** When the record may expire, in milliseconds of the injected clock. */
  readonly expiresAt: number;
}

/**
 * What kind of refusal a verifier's is, from a fixed set, never from what
 * a client sent: the log paces its refusal lines per route and per kind,
 * so that a forger's refusals do not hide a queue's own (its token ours
 * but for another URL, a clock off) for the minute. A party without the
 * service's secrets reaches `unverified`, and `key` (a MAC under a key we
 * do not hold is what a forgery is) on the generic and QStash routes; with
 * a Google account, `account` on the Pub/Sub routes (Google signs a token
 * for any audience with the account's own email). Every other kind needs a
 * request or token one of the service's keys, or its service account,
 * signed.
 *
 * - `unverified`: no credential, or one that does not verify;
 * - `key`: signed with a key or secret this service does not hold;
 * - `url`: signed for another URL or audience than the route's;
 * - `account`: signed for another service account;
 * - `clock`: out of its time by this server's clock;
 * - `claims`: a timestamp in milliseconds, a token with no `jti` or `exp`,
 *   a QStash or Google token beside another in one header (two headers
 *   joined);
 * - `replay`: a signed request seen before.
 */
export type RefusalKind =
  | "unverified"
  | "key"
  | "url"
  | "account"
  | "clock"
  | "claims"
  | "replay";

/** A verifier's answer: the replay claim, or what was wrong (no secret in it). */
export type Verification =
  | { readonly ok: true; readonly claim: ReplayClaim }
  | {
    readonly ok: false;
    readonly detail: string;
    /**
     * What the service's operator can set if every request is refused so,
     * for the log only: the caller is not told of the service's settings.
     */
    readonly hint?: string;
    /** Its kind, for the log's pace; absent, `unverified`. */
    readonly kind?: RefusalKind;
  };

/** A verifier's refusal. */
type Refused = Extract<Verification, { readonly ok: false }>;

/**
 * A verifier of a signed request, and its `precheck`: what the request's
 * signature header alone refuses (a refusal), or `undefined` when only
 * the body can tell. A route calls it before it reads the body, so a
 * request that is forged on its face is answered at once, whatever its
 * body does: a client that sends its headers and then holds the body back
 * would otherwise keep the request, and its connection, waiting.
 */
type Verifier<F, H> = F & {
  readonly precheck: (header: H) => Refused | undefined;
};

/** How old a generic-route signature may be: 5 minutes (DESIGN §15). */
export const SIGNATURE_MAX_AGE_MS = 5 * 60_000;
/** How far ahead of our clock a generic-route timestamp may be (the signer's clock may run fast). */
export const SIGNATURE_MAX_SKEW_MS = 30_000;
/** How long a generic-route replay record lives after `t`: longer than the signature's age limit. */
export const SIGNATURE_REPLAY_TTL_MS = 6 * 60_000;
/**
 * How far a signed token's time claims may miss our clock (QStash's `nbf`
 * and `exp`, Google's `iat`, `nbf` and `exp`): a queue's clock and ours
 * differ a little, and with no slack a token signed this second is refused
 * by a server whose clock lags by a millisecond.
 */
export const TOKEN_CLOCK_TOLERANCE_MS = 30_000;
/**
 * How long a QStash replay record outlives the last moment its token could
 * be accepted: room for instances whose clocks differ, as the generic
 * route's record outlives its signature's age limit by a minute.
 */
export const TOKEN_REPLAY_MARGIN_MS = 60_000;

const HOW_TO_SIGN =
  "send 'X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of \"<t>.<raw body>\" with WEBHOOK_SECRET>'";

/**
 * Signs generic-route deliveries: `t=<unix seconds>,v1=<hex HMAC-SHA-256 of
 * "<t>.<raw body>">` under `secret`. The key is prepared once;
 * `@noble/hashes` (audited, pure JS, edge-compatible) signs a short body
 * about 5× faster than a Web Crypto round trip, which dominated the generic
 * route under load.
 */
export function hmacSigner(
  secret: string,
): (body: string | Uint8Array, timeS: number) => string {
  const keyed = hmac.create(sha256, encoder.encode(secret));
  return (body, timeS) => {
    if (!Number.isSafeInteger(timeS) || timeS < 0) {
      throw new RangeError(
        `Cannot sign as 'timeS' must be a whole number of unix seconds: current value is ${timeS}`,
      );
    }
    // The body's own bytes (a string's UTF-8), after "<t>.".
    const mac = keyed.clone().update(encoder.encode(`${timeS}.`)).update(
      typeof body === "string" ? encoder.encode(body) : body,
    ).digest();
    return `t=${timeS},v1=${bytesToHex(mac)}`;
  };
}

/** The `X-Signature` of `body` at `timeS` (unix seconds) under `secret`. */
export function hmacSignature(
  secret: string,
  body: string | Uint8Array,
  timeS: number,
): string {
  return hmacSigner(secret)(body, timeS);
}

/**
 * A well-formed `X-Signature`: a `t` of 1 to 12 digits (unix seconds), or
 * of 13 to 15 (unix time in milliseconds, until the year 33658: refused,
 * saying so), and a `v1` of 64 hex digits.
 */
const SIGNATURE = /^\s*t=(\d{1,15}),\s*v1=([0-9a-fA-F]{64})\s*$/;

/**
 * What is wrong with an `X-Signature` that is not of the form, in the
 * words of the three shapes a sender meets without a bug of its own: two
 * headers read as one (fetch and proxies join a repeated header with
 * ", "), `v1` before `t`, and several `v1`, as Stripe sends while a secret
 * rotates. Each is refused all the same, as a header of any other shape
 * is: which of its MACs is genuine is never asked. Counts and names only:
 * nothing of the header is repeated.
 */
function malformedDetail(header: string | undefined): string {
  const fields = (header ?? "").split(",").map((field) => field.trim());
  const keys = fields.map((field) => field.split("=", 1)[0]!.trim());
  const times = keys.filter((key) => key === "t").length;
  const macs = keys.filter((key) => key === "v1").length;
  if (times > 1) {
    return `The X-Signature header holds ${times} signatures (${times} t=): two X-Signature headers were joined with ', ' (a proxy or a client added one), or two signatures sent in one: send one X-Signature header, with one t and one v1: ${HOW_TO_SIGN}.`;
  }
  if (times === 1 && macs > 1) {
    return `The X-Signature header holds ${macs} v1 values, as Stripe sends while a secret rotates: send one v1, the MAC under WEBHOOK_SECRET (this service checks WEBHOOK_SECRET_NEXT itself while you rotate): ${HOW_TO_SIGN}.`;
  }
  if (
    fields.length === 2 && keys[0] === "v1" && keys[1] === "t" &&
    SIGNATURE.test(`${fields[1]},${fields[0]}`)
  ) {
    return `The X-Signature header has v1 before t: t= must come first: ${HOW_TO_SIGN}.`;
  }
  return `The X-Signature header is missing or malformed: ${HOW_TO_SIGN}.`;
}

/** The refusal of a sender's own signature whose `t` is in milliseconds. */
const IN_MILLISECONDS = {
  ok: false,
  detail:
    `The X-Signature timestamp is in milliseconds: ${HOW_TO_SIGN}, t being Math.floor(Date.now() / 1000).`,
  kind: "claims",
} as const;

/** The refusal of a sender's own signature out of its time by this server's clock. */
const OUT_OF_TIME = {
  ok: false,
  detail:
    "The X-Signature timestamp is more than 5 minutes old, or more than 30 seconds ahead of this server's clock: sign each delivery when you send it, with the current unix time as t.",
  hint:
    "If every delivery is refused so, the signature verifies (the sender holds the secret), but the sender's clock or this server's is off: set both right (NTP), and sign each delivery when it is sent, not when it was queued.",
  kind: "clock",
} as const;

/** Refuses a generic route's secret anyone could find: empty, or short. */
function checkSecret(secret: unknown, option: string, setting: string): void {
  if (secret !== undefined && typeof secret !== "string") {
    // By its type alone: a secret is never shown.
    throw new TypeError(
      `Cannot verify generic deliveries as '${option}' must be a string: current value is ${
        secret === null
          ? "null"
          : `a${typeof secret === "object" ? "n" : ""} ${typeof secret}`
      }. Set it to the shared secret the sender signs with, or leave it out${
        option === "webhookSecret" ? " to keep the route closed" : ""
      }`,
    );
  }
  if (!secret) {
    // Anyone can compute an HMAC under an empty key.
    throw new TypeError(
      `Cannot verify generic deliveries as '${option}' is empty: set it to the shared secret the sender signs with, or leave it out${
        option === "webhookSecret" ? " to keep the route closed" : ""
      }`,
    );
  }
  if (secret.length < MIN_SECRET) {
    // A short key can be found from one signed request, offline.
    throw new TypeError(
      `Cannot verify generic deliveries as '${option}' is ${secret.length} characters long: use a random secret of at least ${MIN_SECRET} (the service's ${setting} has the same rule)`,
    );
  }
}

/**
 * A checker of generic-route `X-Signature` headers against the raw body:
 * well-formed, the HMAC equal in constant time, under `secret` or, while a
 * rotation is under way, under `next` (both are computed, whichever
 * matches), and then `t` at most {@linkcode SIGNATURE_MAX_AGE_MS} old and
 * at most {@linkcode SIGNATURE_MAX_SKEW_MS} ahead by `now`, in seconds. The
 * MAC comes first: a request is refused for its time (`clock`) or for a
 * `t` in milliseconds (`claims`) only once it is known to be the sender's,
 * so a forger who holds no secret, sending a stale `t`, is refused in the
 * same words but as `unverified`, and cannot hide the log line a sender
 * whose clock is off needs. The claim's key is the lowercased `v1`: two
 * accepted headers with the same `v1` sign the same `t` and body (a MAC
 * under either secret is one signature). Its `precheck` answers from the
 * header alone, so that a request whose header is missing or malformed is
 * refused before its body is read; one too old, ahead or in milliseconds
 * is refused once its body is read and its MAC checked, as a forger's
 * fresh `t` is. Its `untimely` is the refusal of such a `t` from the
 * header alone, for a body over the limit, which is never read whole, so
 * never MAC'd: the words are the same whoever signed it, and it is
 * counted as `unverified`, its log line saying why.
 */
export function hmacVerifier(
  secret: string,
  now: () => number,
  next?: string,
):
  & Verifier<
    (body: string | Uint8Array, header: string | undefined) => Verification,
    string | undefined
  >
  & {
    readonly untimely: (header: string | undefined) => Refused | undefined;
  } {
  checkSecret(secret, "webhookSecret", "WEBHOOK_SECRET");
  if (next !== undefined) {
    checkSecret(next, "webhookSecretNext", "WEBHOOK_SECRET_NEXT");
  }
  const sign = hmacSigner(secret);
  const signNext = next === undefined ? undefined : hmacSigner(next);
  /** The header's `t` and `v1`, or the refusal of a header malformed. */
  const read = (
    header: string | undefined,
  ): { timeS: number; v1: string; inMs: boolean } | Refused => {
    const match = SIGNATURE.exec(header ?? "");
    if (!match) return { ok: false, detail: malformedDetail(header) };
    return {
      timeS: Number(match[1]),
      v1: match[2]!.toLowerCase(),
      inMs: match[1]!.length > 12,
    };
  };
  /** Whether a `t` (in milliseconds) is too old or too far ahead by `now`. */
  const outOfTime = (atMs: number): boolean => {
    const clock = now();
    return clock - atMs > SIGNATURE_MAX_AGE_MS ||
      atMs - clock > SIGNATURE_MAX_SKEW_MS;
  };
  const verify = (
    body: string | Uint8Array,
    header: string | undefined,
  ): Verification => {
    const signed = read(header);
    if ("ok" in signed) return signed;
    const { timeS, v1, inMs } = signed;
    const given = `t=${timeS},v1=${v1}`;
    // Both compared, whatever the first gave, and before the time: the
    // time taken says nothing of which secret, if any, signed it, nor of
    // whether `t` was in time.
    const current = timingSafeEqual(given, sign(body, timeS));
    const upcoming = signNext !== undefined &&
      timingSafeEqual(given, signNext(body, timeS));
    const ours = current || upcoming;
    if (inMs) {
      // Date.now() sent as it is: said so, as "malformed" left the
      // signer's author looking at the wrong part of the header.
      return ours
        ? IN_MILLISECONDS
        : { ok: false, detail: IN_MILLISECONDS.detail };
    }
    const atMs = timeS * 1000;
    if (outOfTime(atMs)) {
      // Said in the same words, signed or not: a forger learns nothing a
      // clock does not tell. Only the sender's own is `clock`, its line
      // saying so.
      return ours ? OUT_OF_TIME : { ok: false, detail: OUT_OF_TIME.detail };
    }
    if (!ours) {
      return {
        ok: false,
        detail:
          `The X-Signature does not verify against this body and timestamp: ${HOW_TO_SIGN}.`,
        hint: HMAC_HINT,
        kind: "key",
      };
    }
    return {
      ok: true,
      claim: {
        key: `deliveries/${v1}`,
        expiresAt: atMs + SIGNATURE_REPLAY_TTL_MS,
      },
    };
  };
  return Object.assign(verify, {
    precheck: (header: string | undefined): Refused | undefined => {
      const signed = read(header);
      return "ok" in signed ? signed : undefined;
    },
    untimely: (header: string | undefined): Refused | undefined => {
      const signed = read(header);
      if ("ok" in signed) return signed;
      const detail = signed.inMs
        ? IN_MILLISECONDS.detail
        : outOfTime(signed.timeS * 1000)
        ? OUT_OF_TIME.detail
        : undefined;
      return detail === undefined
        ? undefined
        : { ok: false, detail, hint: UNCHECKED_HINT };
    },
  });
}

/**
 * The log's note on a `t` refused from the header alone, its body over the
 * limit: not known to be the sender's, so not said to be its clock.
 */
const UNCHECKED_HINT =
  "Its body was over the limit, so not read, and its MAC not checked: if the sender signed it, both its timestamp and its body's size need putting right (once the timestamp is, such a body is refused 413).";

/**
 * QStash's signing keys and the public URL its tokens name as `sub`.
 *
 * @example Turn on the QStash route
 * ```ts
 * import { createApp, type QStashKeys } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const qstash: QStashKeys = {
 *   currentSigningKey: "sig_current_0000000000",
 *   nextSigningKey: "sig_next_0000000000000",
 *   url: "https://relayer.example/v1/qstash",
 * };
 * const app = createApp({ store: new MemoryStore(), sender: new ScriptedSender({}), qstash });
 * // Configured now, so an unsigned delivery is refused rather than "not configured".
 * const res = await app.request("/v1/qstash", { method: "POST", body: "{}" });
 * assert.equal(res.status, 401);
 * ```
 */
export interface QStashKeys {
  /** `QSTASH_CURRENT_SIGNING_KEY` (16 characters or more, as QStash's are). */
  readonly currentSigningKey: string;
  /** `QSTASH_NEXT_SIGNING_KEY`, accepted too so a key rotation drops nothing (16 characters or more). */
  readonly nextSigningKey: string;
  /**
   * The URL QStash delivers to, exactly as published (`PUBLIC_URL` + the
   * route), without a query or fragment: `createApp` checks the failure
   * callback as signed for this URL with `/failed` after it.
   */
  readonly url: string;
}

/**
 * QStash signing keys anyone can read: the dev server's in `@upstash/qstash`
 * (the QStash CLI's `dev`) and `deno task qstash-local`'s, printed for
 * copying. A local QStash delivers to this machine, so they are taken only
 * for a URL on it.
 */
const PUBLISHED_QSTASH_KEYS: ReadonlySet<string> = new Set([
  "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r",
  "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs",
  "sig_local_current_0123456789",
  "sig_local_next_0123456789",
]);

/** Whether `url` names this machine: localhost, 127.0.0.0/8 or [::1]. */
export function onLoopback(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  return host === "localhost" || host.endsWith(".localhost") ||
    host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Whether `url` names this machine without a DNS lookup: `localhost`,
 * 127.0.0.0/8 or [::1], not a name under `.localhost`, which
 * {@linkcode onLoopback} takes. Deno asks the system's resolver for such a
 * name, and so DNS ("dns error: failed to lookup address information" where
 * it knows none): whoever answers for the resolver on the path points it
 * anywhere. Where a secret or the keys go in clear text (plain http), only
 * these are this machine.
 */
export function loopbackWithoutDns(url: string): boolean {
  return onLoopback(url) && !new URL(url).hostname.endsWith(".localhost");
}

/**
 * The routes `RELAYER_INSECURE_DEV` opens to requests with no signature or
 * token: each whose keys are not set, by which are.
 */
export function insecureOpenRoutes(set: {
  readonly qstash: boolean;
  readonly pubsub: boolean;
  readonly pubsubDeadLetter: boolean;
  readonly deliveries: boolean;
  readonly ops: boolean;
}): string[] {
  return [
    set.qstash ? undefined : "/v1/qstash and /v1/qstash/failed",
    set.pubsub ? undefined : "/v1/pubsub",
    set.pubsubDeadLetter ? undefined : "/v1/pubsub/dead-letter",
    set.deliveries ? undefined : "/v1/deliveries",
    set.ops ? undefined : "the ops routes",
  ].filter((route) => route !== undefined);
}

/**
 * How a start names the generic route or the ops routes (`route`:
 * "deliveries", "ops") by their secrets (`current`, `next`:
 * `WEBHOOK_SECRET` and `WEBHOOK_SECRET_NEXT`, or `OPS_TOKEN` and
 * `OPS_TOKEN_NEXT`): with a rotation under way, or over and left half
 * done, said so that it shows (`main.ts`'s start line, a Worker's first
 * event).
 */
export function rotationState(
  route: "deliveries" | "ops",
  current: string,
  next: string | undefined,
): string {
  const [name, what] = route === "deliveries"
    ? ["WEBHOOK_SECRET", "secrets"]
    : ["OPS_TOKEN", "tokens"];
  return next === current
    ? `${route} (${name}_NEXT equals ${name}: a rotation over, unset it)`
    : next !== undefined
    ? `${route} (two ${what}: ${name}_NEXT, a rotation under way)`
    : route;
}

/**
 * What `RELAYER_INSECURE_DEV` leaves open, as a start says it (`main.ts`'s
 * start line, a Worker's first event): every route whose keys are not set
 * (`open`, {@linkcode insecureOpenRoutes}) takes unsigned requests, even
 * beside routes that are signed, so whoever left the flag on sees which.
 */
export function insecureDevMode(open: readonly string[]): string {
  return `INSECURE DEV MODE (unsigned requests accepted on ${
    open.length === 0 ? "no route: every key is set" : open.join(", ")
  })`;
}

/**
 * Why `RELAYER_INSECURE_DEV` is refused where others reach the service
 * (`reached`: "this service is on Deno Deploy", "… listens on …, off this
 * machine"), naming the routes it would open (`open`) and what to do, down
 * to the command of a local run (`localRun`: a Worker's is `npx wrangler
 * dev`); the same rule as the docs' local-run secrets
 * ({@linkcode publishedSecret}).
 */
export function insecureDevRefusal(
  reached: string,
  open: readonly string[],
  localRun = "deno task start",
): string {
  const routes = open.length === 0
    ? "no route while every key is set, and on each whose key is left out later"
    : open.map((route) =>
      route === "the ops routes"
        ? "the ops routes (which create and resolve intents, and publish, redrive and discard jobs)"
        : route
    ).join(", ");
  return `RELAYER_INSECURE_DEV is for local runs, and ${reached}: it would take requests with no signature or token, from anyone who reaches it, on ${routes}. Unset RELAYER_INSECURE_DEV (each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes), or run on your own machine: PUBLIC_URL unset or on localhost, 127.0.0.1 or [::1], and served on loopback (${localRun})`;
}

/**
 * The shared secrets the docs give for a local run (the README's, routes.md's
 * and webhook.md's `WEBHOOK_SECRET` and `OPS_TOKEN`): anyone can read them.
 */
const PUBLISHED_SECRETS: ReadonlySet<string> = new Set([
  "local-secret-0123456789",
  "local-ops-token-0123456789",
]);

/** Which of `secrets` is one the docs give for a local run, if any. */
export function publishedSecret<K extends string>(
  secrets: Readonly<Record<K, string | undefined>>,
): K | undefined {
  return (Object.keys(secrets) as K[]).find((name) =>
    PUBLISHED_SECRETS.has(secrets[name] ?? "")
  );
}

/**
 * The first of a service's shared secrets and QStash keys anyone can read
 * (the docs' local-run ones, a local QStash's published keys), as its
 * setting; `readable` says what it is and `fix` what to do, neither the
 * value.
 */
export function readableSetting(settings: {
  readonly webhookSecret?: string;
  readonly webhookSecretNext?: string;
  readonly opsToken?: string;
  readonly opsTokenNext?: string;
  readonly qstash?: {
    readonly currentSigningKey: string;
    readonly nextSigningKey: string;
  };
}): { setting: string; readable: string; fix: string } | undefined {
  const secret = publishedSecret({
    WEBHOOK_SECRET: settings.webhookSecret,
    WEBHOOK_SECRET_NEXT: settings.webhookSecretNext,
    OPS_TOKEN: settings.opsToken,
    OPS_TOKEN_NEXT: settings.opsTokenNext,
  });
  if (secret !== undefined) {
    return {
      setting: secret,
      readable: "a value the docs give for a local run, which anyone can read",
      fix: "generate a random one, such as with: openssl rand -base64 32",
    };
  }
  const key = publishedQStashKey({
    QSTASH_CURRENT_SIGNING_KEY: settings.qstash?.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: settings.qstash?.nextSigningKey,
  }, undefined);
  return key === undefined ? undefined : {
    setting: key,
    readable: "a published key (a local QStash's), which anyone can sign with",
    fix: "copy both signing keys from the QStash console",
  };
}

/**
 * Which of two QStash signing keys anyone can read, if one is and `url`
 * (where QStash delivers) is not on this machine, or is not known to be
 * (`undefined`: on a platform, where no local QStash delivers): a forger
 * signs with it.
 */
export function publishedQStashKey<K extends string>(
  keys: Readonly<Record<K, string | undefined>>,
  url: string | undefined,
): K | undefined {
  if (url !== undefined && onLoopback(url)) return undefined;
  return (Object.keys(keys) as K[]).find((name) =>
    PUBLISHED_QSTASH_KEYS.has(keys[name] ?? "")
  );
}

/**
 * The most characters a signed token's header may carry beyond twice the
 * URL or audience the token names: QStash's and Google's tokens are well
 * under a kilobyte besides it. A longer one is refused unread, so a forged
 * header as long as the server takes (64 KiB on Deno) costs a length check,
 * not a decoding and a keyed hash of all of it.
 */
export const TOKEN_MAX_CHARS = 8192;

/** The longest token a route takes: {@linkcode TOKEN_MAX_CHARS} and twice what it names. */
function tokenLimit(named: string): number {
  return TOKEN_MAX_CHARS + 2 * named.length;
}

const QSTASH_REFUSED =
  "The Upstash-Signature header is missing or does not verify against this URL and body.";

/** What to set when every generic delivery's signature is refused. */
const HMAC_HINT =
  "If every delivery is refused so, the sender signs with a secret this service does not hold: set WEBHOOK_SECRET back to the sender's, or the sender's as WEBHOOK_SECRET_NEXT beside it, and restart (docs/runbook.md, a deploy with a wrong secret).";

/**
 * The refusal of a token one of our keys signed for this URL that is past
 * its `exp` or before its `nbf` by the wall clock: QStash signs each
 * delivery as it sends it, so when every delivery is refused so, the
 * clock that is off is this server's. Said, as the MAC is ours: the
 * caller holds the token and its claims already.
 */
const QSTASH_OUT_OF_TIME = {
  ok: false,
  detail:
    "The Upstash-Signature token is QStash's, for this URL, but expired or not yet valid by this server's clock (past its exp, or before its nbf, by more than 30 seconds).",
  hint:
    "If every delivery is refused so, this server's clock is off: QStash signs each delivery as it sends it. Set the clock right (NTP).",
  kind: "clock",
} as const;

/** What to set when every QStash token is signed with keys not ours. */
const QSTASH_KEYS_HINT =
  "If every delivery is refused so, QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY are not the keys this QStash account signs with: copy both from the Upstash console (QStash, Signing Keys) and restart (docs/runbook.md, a deploy with a wrong secret).";

/**
 * The most values of a header of joined tokens (`Upstash-Signature`, a
 * Pub/Sub push's `Authorization`) that are checked for one of ours: each
 * costs a check of its own.
 */
const MAX_JOINED_TOKENS = 4;

/**
 * What to put right when every QStash delivery is refused for a second
 * `Upstash-Signature` header beside QStash's own.
 */
const QSTASH_JOINED_HINT =
  "If every delivery is refused so, a proxy, gateway or Worker between QStash and this service adds a second Upstash-Signature header beside QStash's own (a copy, or a header set again): have it pass QStash's one header through unchanged. The keys are right: one of the tokens is QStash's.";

/** Decodes UTF-8 and throws on bytes that are not, keeping a byte order mark. */
// Both options given: Cloudflare's types require each.
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The text whose UTF-8 is exactly `bytes`, or `undefined` when `bytes` is
 * not UTF-8 (no text encodes to it).
 */
export function exactText(bytes: Uint8Array): string | undefined {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** The claims of a JWT, unverified (trust them once its signature is); `undefined` if unreadable. */
function jwtClaims(token: string): Record<string, unknown> | undefined {
  const claims = jwtPart(token, 1);
  return typeof claims === "object" && claims !== null
    ? claims as Record<string, unknown>
    : undefined;
}

/**
 * `text` without the `=` at its end, in time linear in its length: a
 * regular expression such as `/=+$/` is tried from every `=`, which takes
 * time quadratic in a run of them not at the end (a forged token of 60 KB
 * of `=` and a letter held the event loop for 2 seconds).
 */
function unpadded(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x3d) end--;
  return text.slice(0, end);
}

/** Base64url without padding, as a JWS writes its signature. */
function base64url(bytes: Uint8Array): string {
  return unpadded(
    btoa(String.fromCharCode(...bytes)).replaceAll("+", "-")
      .replaceAll("/", "_"),
  );
}

/**
 * Whether a compact JWS carries the HS256 MAC of its signing input under
 * one of `keys` (each prepared once; every key is tried, whichever
 * matches, as the generic route's two secrets are). The signature alone:
 * header, claims and times are the Receiver's to check.
 */
function hs256Checker(keys: readonly string[]): (token: string) => boolean {
  const keyed = keys.map((key) => hmac.create(sha256, encoder.encode(key)));
  return (token) => {
    const parts = token.split(".");
    if (parts.length !== 3) return false;
    const given = unpadded(parts[2]!);
    const input = encoder.encode(`${parts[0]}.${parts[1]}`);
    let matched = false;
    for (const key of keyed) {
      const mac = base64url(key.clone().update(input).digest());
      matched = timingSafeEqual(given, mac) || matched;
    }
    return matched;
  };
}

/**
 * A verifier of `Upstash-Signature` headers (the official `Receiver`:
 * key, `iss`, `sub`, `exp`/`nbf` within {@linkcode TOKEN_CLOCK_TOLERANCE_MS},
 * body hash), once the token's HS256 MAC is found to be one of the two
 * keys' (a forgery is refused without the Receiver, which imports the keys
 * on every call, and without its claims decoded; a token longer than
 * {@linkcode TOKEN_MAX_CHARS} and twice the URL, unread). A verified token
 * must also carry the `jti` and `exp` QStash
 * always sends: they make the replay claim `qstash/<jti>`, kept for as long
 * as the token could be accepted and {@linkcode TOKEN_REPLAY_MARGIN_MS} more.
 *
 * The `Receiver` (jose) reads the wall clock, and the store expires the
 * record by `now`; so the claim's expiry is the token's remaining time by
 * the wall clock, counted from `now()`. With `now` the wall clock (the
 * service's), that is `exp` + the tolerance + the margin. Its `precheck`
 * makes the checks that need no body (a token there, not too long, and the
 * MAC of one of the keys), so that a forged token is refused before the
 * body is read.
 *
 * The body is given as text, or as the bytes that came: bytes that are
 * not UTF-8 (no text encodes to them, and the `Receiver` hashes a text's
 * UTF-8) are checked as a body too large to read is, by their SHA-256
 * after every other check of the token.
 *
 * A body too large to be read whole is verified in two steps:
 * `checkClaims` makes every check of the token the `Receiver` makes but the
 * body's (the MAC, HS256, `iss` "Upstash", `sub` this URL, `exp` and `nbf`
 * by the wall clock within the tolerance, and the `jti`, `exp` and `body`
 * the replay claim and the hash need), before the body is read on; then
 * `verifyDigest` compares the SHA-256 of the body's bytes, hashed as they
 * came, with the token's `body`, and gives the replay claim.
 */
export function qstashVerifier(
  keys: QStashKeys,
  now: () => number = Date.now,
): QStashVerifier {
  for (const key of ["currentSigningKey", "nextSigningKey"] as const) {
    if (typeof keys[key] !== "string" || keys[key] === "") {
      // The Receiver would fall back to QSTASH_* in the environment.
      throw new TypeError(
        `Cannot verify QStash deliveries as '${key}' is empty: copy it from the QStash console's signing keys`,
      );
    }
    if (keys[key].length < MIN_SECRET) {
      // An HS256 key, as the generic route's secret is: found by trying,
      // it signs any delivery. QStash's own are longer. Never echoed.
      throw new TypeError(
        `Cannot verify QStash deliveries as '${key}' is ${
          keys[key].length
        } characters long: a key that short can be found by trying, and whoever finds it signs any delivery. Copy the whole key from the QStash console's signing keys (the service's QSTASH_* settings have the same rule)`,
      );
    }
  }
  if (
    typeof keys.url !== "string" || !/^https?:\/\/./.test(keys.url) ||
    !readsAsUrl(keys.url)
  ) {
    // Without a URL the Receiver skips the `sub` check: a token signed
    // for any other endpoint would pass. One that cannot be read as a URL
    // (a colon left out, a space in its host) is no URL QStash calls:
    // taken, every delivery was refused as signed for another URL.
    throw new TypeError(
      `Cannot verify QStash deliveries as 'url' is not an http(s) URL: set it to the public URL QStash calls for this route: current value is ${
        typeof keys.url !== "string"
          ? JSON.stringify(keys.url)
          : readsAsUrl(keys.url)
          ? urlSaid(keys.url)
          : textSaid(keys.url)
      }`,
    );
  }
  const published = publishedQStashKey({
    currentSigningKey: keys.currentSigningKey,
    nextSigningKey: keys.nextSigningKey,
  }, keys.url);
  if (published !== undefined) {
    throw new TypeError(
      `Cannot verify QStash deliveries as '${published}' is a published key (a local QStash's, which anyone can read) and 'url' is not on this machine: anyone could sign a delivery to ${
        urlSaid(keys.url)
      }. Copy both keys from the QStash console's signing keys`,
    );
  }
  const receiver = new Receiver({
    currentSigningKey: keys.currentSigningKey,
    nextSigningKey: keys.nextSigningKey,
    devMode: false, // never read QSTASH_DEV from the environment
  });
  const signedByUs = hs256Checker([
    keys.currentSigningKey,
    keys.nextSigningKey,
  ]);
  const refused = { ok: false, detail: QSTASH_REFUSED } as const;
  /**
   * A refusal that names both URLs when the token is one our keys signed
   * (the precheck's MAC), QStash's, for another URL: `PUBLIC_URL` does not
   * match the URL QStash calls (a proxy, another host name), the likeliest
   * set-up slip, and a lasting one, so said before its time or its body.
   */
  const elsewhere = (
    claims: Record<string, unknown>,
  ): Refused | undefined => {
    const { iss, sub } = claims;
    if (
      iss !== "Upstash" || typeof sub !== "string" || sub === keys.url ||
      !/^https?:\/\/[\x21-\x7e]{1,500}$/.test(sub)
    ) return undefined;
    return {
      ok: false,
      detail: `The Upstash-Signature token is QStash's, but signed for ${
        urlSaid(sub)
      }, and this route checks ${
        // Its own query unsaid too: a library's url may carry a token
        // (`?token=…`), and this answer goes to whoever holds the token.
        urlSaid(
          keys.url,
        )}: publish to this route's URL, or set the service's PUBLIC_URL (createApp's qstash.url, the route's whole URL) so that it is the URL QStash calls.`,
      kind: "url",
    };
  };
  const longest = tokenLimit(keys.url);
  /**
   * The refusal of a header that holds several tokens, one of them signed
   * by one of our keys: two `Upstash-Signature` headers read as one
   * (fetch and proxies join a repeated header with ", "), something
   * between QStash and this service having added one (QStash sends one).
   * Refused all the same, as the generic route's two signatures are, but
   * not as a forgery: said so, and logged apart from forgers' refusals,
   * with what to put right. A JWS holds no comma, so none is split.
   */
  const joined = (signature: string): Refused | undefined => {
    if (!signature.includes(",")) return undefined;
    const tokens = signature.split(",").map((token) => token.trim());
    // A few values at most: each costs two keyed hashes, and a header of
    // 8 KiB of "a.b.c," (1,370 values) took 75 ms where one token of
    // 8 KiB takes a third of one.
    if (tokens.length > MAX_JOINED_TOKENS) return undefined;
    if (!tokens.some((token) => signedByUs(token))) return undefined;
    return {
      ok: false,
      detail:
        `The Upstash-Signature header holds ${tokens.length} values joined with ',': two Upstash-Signature headers were sent (QStash sends one; something on the way added one): pass QStash's header through as it came.`,
      hint: QSTASH_JOINED_HINT,
      kind: "claims",
    };
  };
  /** What the token alone refuses: none, too long, or a MAC neither key made. */
  const precheck = (signature: string | undefined): Refused | undefined => {
    if (!signature || signature.length > longest) return refused;
    // A token neither key signed is refused here, before its claims are
    // decoded and before the Receiver imports each key to verify it: a
    // forgery costs a keyed hash, not a decoding and Web Crypto round trips.
    if (!signedByUs(signature)) {
      return joined(signature) ??
        { ...refused, hint: QSTASH_KEYS_HINT, kind: "key" };
    }
    return undefined;
  };
  const verify = async (
    signature: string | undefined,
    raw: string | Uint8Array,
  ): Promise<Verification> => {
    // The token's every check but the body's, as a body read by its digest
    // gets them (the precheck's MAC first): a token refused for its
    // claims is refused in the same words whichever way its body is read.
    const checked = headerClaims(signature);
    if (!("claims" in checked)) return checked;
    if (signature === undefined) return refused;
    const { claims } = checked;
    // The Receiver hashes the UTF-8 of the text it is given: bytes that are
    // not UTF-8 read as U+FFFD, whose UTF-8 is other bytes, and a message
    // QStash signed was refused as forged through all its retries. Such a
    // body is checked as a body too large to read is, by its own bytes'
    // SHA-256, after the Receiver's every other check.
    let body = raw;
    if (typeof body !== "string") {
      const text = exactText(body);
      if (text === undefined) return digestOf(claims, sha256(body));
      body = text;
    }
    try {
      const verified = await receiver.verify({
        signature,
        body,
        url: keys.url,
        clockTolerance: TOKEN_CLOCK_TOLERANCE_MS / 1000,
      });
      if (!verified) return refused;
    } catch (error) {
      if (error instanceof SignatureError) {
        return refused;
      }
      // A malformed token can make jose throw its own errors: still a bad signature.
      if (
        error instanceof Error &&
        /JWT|JWS|token|signature/i.test(`${error.name} ${error.message}`)
      ) return refused;
      throw error;
    }
    return replayClaim(claims);
  };
  /** The replay claim of verified claims, or why there is none. */
  const replayClaim = (claims: Record<string, unknown>): Verification => {
    const { jti, exp } = claims;
    if (
      typeof jti !== "string" || !/^[\x21-\x7e]{1,200}$/.test(jti) ||
      typeof exp !== "number" || !Number.isSafeInteger(exp)
    ) {
      return {
        ok: false,
        detail:
          "The Upstash-Signature token has no usable 'jti' and 'exp', so a replay could not be refused: publish through QStash, which sets both.",
        kind: "claims",
      };
    }
    // Accepted until the wall clock passes exp + the tolerance (jose's
    // check): that much time from now, by the app's clock, and the margin.
    const left = exp * 1000 + TOKEN_CLOCK_TOLERANCE_MS - Date.now();
    return {
      ok: true,
      claim: {
        key: `qstash/${jti}`,
        expiresAt: now() + Math.max(0, left) + TOKEN_REPLAY_MARGIN_MS,
      },
    };
  };
  /**
   * The token's checks that need no body, as the Receiver (jose's
   * jwtVerify, then its `sub` check) makes them: its claims, or why not.
   */
  const headerClaims = (
    signature: string | undefined,
  ): Refused | { readonly claims: Record<string, unknown> } => {
    const early = precheck(signature);
    if (early !== undefined || signature === undefined) return early ?? refused;
    const header = jwtPart(signature, 0) as Record<string, unknown> | null;
    const claims = jwtClaims(signature);
    // The MAC checked is HS256's: a header naming another algorithm (or a
    // critical extension, which jose refuses) is not a token the Receiver
    // would take.
    if (
      typeof header !== "object" || header === null ||
      header.alg !== "HS256" || header.crit !== undefined ||
      claims === undefined
    ) return refused;
    const { iss, sub, exp, nbf, iat, body } = claims;
    if (iss !== "Upstash" || typeof body !== "string") return refused;
    if (sub !== keys.url) return elsewhere(claims) ?? refused;
    // jose's checks: `exp`, `nbf` and `iat` numbers if present, then the
    // time they say. A token without `exp` passes jose, and is refused by
    // what the replay claim needs, saying so.
    if (
      (exp !== undefined && typeof exp !== "number") ||
      (nbf !== undefined && typeof nbf !== "number") ||
      (iat !== undefined && typeof iat !== "number")
    ) return refused;
    const timed = outOfTime(claims);
    if (timed !== undefined) return timed;
    // And what the replay claim needs, before the body is read for it.
    const claim = replayClaim(claims);
    if (!claim.ok) return claim;
    return { claims };
  };
  /**
   * The clock's refusal of claims whose numeric `exp` is past, or `nbf`
   * ahead, by the wall clock in whole seconds beyond the tolerance, as
   * jose's jwtVerify reads them in the Receiver; `undefined` otherwise.
   */
  const outOfTime = (
    claims: Record<string, unknown>,
  ): typeof QSTASH_OUT_OF_TIME | undefined => {
    const { exp, nbf } = claims;
    const nowS = Math.floor(Date.now() / 1000);
    const toleranceS = TOKEN_CLOCK_TOLERANCE_MS / 1000;
    return (typeof exp === "number" && exp <= nowS - toleranceS) ||
        (typeof nbf === "number" && nbf > nowS + toleranceS)
      ? QSTASH_OUT_OF_TIME
      : undefined;
  };
  /** `headerClaims`, as a refusal or nothing. */
  const checkClaims = (signature: string | undefined): Refused | undefined => {
    const checked = headerClaims(signature);
    return "claims" in checked ? undefined : checked;
  };
  /** The replay claim of checked claims whose `body` is `sha256Digest`'s; else refused. */
  const digestOf = (
    claims: Record<string, unknown>,
    sha256Digest: Uint8Array,
  ): Verification => {
    const claimed = unpadded(claims.body as string);
    if (!timingSafeEqual(claimed, base64url(sha256Digest))) return refused;
    return replayClaim(claims);
  };
  const verifyDigest = (
    signature: string | undefined,
    sha256Digest: Uint8Array,
  ): Verification => {
    const checked = headerClaims(signature);
    return "claims" in checked
      ? digestOf(checked.claims, sha256Digest)
      : checked;
  };
  return Object.assign(verify, { precheck, checkClaims, verifyDigest });
}

/**
 * {@linkcode qstashVerifier}'s verifier: the token and the body it signs,
 * what the token alone refutes (`precheck`), and, for a body too large to
 * be read whole, the token's every other check (`checkClaims`) and the body
 * by its SHA-256 (`verifyDigest`).
 */
type QStashVerifier =
  & Verifier<
    (
      signature: string | undefined,
      body: string | Uint8Array,
    ) => Promise<Verification>,
    string | undefined
  >
  & {
    readonly checkClaims: (
      signature: string | undefined,
    ) => Refused | undefined;
    readonly verifyDigest: (
      signature: string | undefined,
      sha256Digest: Uint8Array,
    ) => Verification;
  };

/**
 * Google's OIDC settings for Pub/Sub push.
 *
 * @example Turn on the Pub/Sub route
 * ```ts
 * import { createApp, type PubSubKeys } from "@relayer/poison/webhook";
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const pubsub: PubSubKeys = {
 *   audience: "https://relayer.example/v1/pubsub",
 *   jwks: [], // in production: googleJwks(), fetched and cached on first use
 *   serviceAccount: "pusher@my-project.iam.gserviceaccount.com",
 * };
 * const app = createApp({ store: new MemoryStore(), sender: new ScriptedSender({}), pubsub });
 * const res = await app.request("/v1/pubsub", { method: "POST", body: "{}" });
 * assert.equal(res.status, 401); // no Google token
 * ```
 */
export interface PubSubKeys {
  /** The audience configured on the push subscription. */
  readonly audience: string;
  /**
   * Google's signing keys (`https://www.googleapis.com/oauth2/v3/certs`), or
   * a function that returns them (cached; `{ refresh: true }` asks for a
   * fresh copy, as `googleJwks()` does): injectable, so tests run offline.
   */
  readonly jwks:
    | readonly JsonWebKey[]
    | ((options?: { refresh?: boolean }) => Promise<readonly JsonWebKey[]>);
  /**
   * The service account the push subscription authenticates as: the
   * token's `email` must be this, with `email_verified` true. Required,
   * because Google issues tokens for any audience to any account.
   */
  readonly serviceAccount: string;
}

/** The fewest characters a shared secret or token may have (`WEBHOOK_SECRET`, `OPS_TOKEN`, and their options). */
export const MIN_SECRET = 16;

/** Google's keys could not be had: the delivery cannot be verified now, so the queue should retry. */
export class KeysUnavailable extends Error {
  constructor(options?: ErrorOptions) {
    super("Google's signing keys are unavailable", options);
    this.name = "KeysUnavailable";
  }
}

/**
 * The least time between two refetches of Google's keys caused by a token
 * whose `kid` is unknown, or known but under no key that verifies it: a
 * rotation is picked up at once (a new key under a new `kid` or an old
 * one), and a flood of made-up `kid`s or forged signatures costs at most
 * one fetch a minute.
 */
export const JWKS_REFETCH_INTERVAL_MS = 60_000;

/**
 * Part `index` of a JWT (0 the header, 1 the claims), unverified;
 * `undefined` if unreadable. Its bytes are read as UTF-8 JSON, as jose
 * and Hono read them once verified: read as Latin-1 (what `atob` gives),
 * a claim beyond ASCII (an audience of any text) was another claim here
 * than there, and a push to such an audience signed by a key Google had
 * just added was refused without the refetch of its keys.
 */
function jwtPart(token: string, index: 0 | 1): unknown {
  try {
    const part = token.split(".")[index] ?? "";
    const text = atob(
      part.replaceAll("-", "+").replaceAll("_", "/").padEnd(
        Math.ceil(part.length / 4) * 4,
        "=",
      ),
    );
    const bytes = Uint8Array.from(text, (ch) => ch.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/** The `kid` of a JWT's header, unverified; `undefined` if unreadable. */
function jwtKid(token: string): string | undefined {
  const kid = (jwtPart(token, 0) as { kid?: unknown } | null | undefined)
    ?.kid;
  return typeof kid === "string" ? kid : undefined;
}

/**
 * A verifier of Pub/Sub's `Authorization: Bearer` OIDC tokens: RS256 by
 * one of Google's keys, Google's issuer, the configured audience (alone:
 * an `aud` list that names another beside it is refused), the
 * configured service account as `email` (A-Z in any case) with
 * `email_verified` true, and `exp` (required), `iat` and `nbf` by the wall
 * clock within {@linkcode TOKEN_CLOCK_TOLERANCE_MS}. A
 * token whose `kid` is not among the keys, or whose `kid` is but under no
 * key that verifies it (a new key Google published under an old id), makes
 * the keys be fetched again once (at most once per
 * {@linkcode JWKS_REFETCH_INTERVAL_MS} by `now`, one refetch at a time)
 * and is checked against them before it is refused, if its claims, read
 * unverified, are those of a push to this route (issuer, audience,
 * account, in time); any other is refused without a fetch. A header longer
 * than {@linkcode TOKEN_MAX_CHARS} and twice the audience is refused
 * unread. An `Authorization` of several values (two headers joined with
 * ", ") is refused; where one of up to four is the service account's own
 * token, as `claims`, with a `hint` saying a second header was added.
 * A token one of Google's keys signed but that fails the account,
 * the audience or the clock (checked in that order) is refused with a
 * `hint` for the log saying which, and what the operator sets: a push
 * subscription whose audience or account is not the service's has every
 * push refused, and the refusal alone did not say why. The hint names the
 * service's settings, never the token's claims: anyone can have Google
 * sign a token for any audience, under their own account, so the account
 * comes first and such a token is refused as `account` whatever its
 * audience; only the service account's own tokens reach `url` and `clock`.
 * Throws {@linkcode KeysUnavailable} when the keys cannot be fetched.
 */
export function pubsubVerifier(
  keys: PubSubKeys,
  now: () => number = Date.now,
): (authorization: string | undefined) => Promise<PushVerification> {
  if (typeof keys.serviceAccount !== "string" || keys.serviceAccount === "") {
    throw new TypeError(
      "Cannot verify Pub/Sub pushes as 'serviceAccount' is missing: Google issues tokens for any audience to any account, so name the push subscription's service account",
    );
  }
  if (typeof keys.audience !== "string" || keys.audience === "") {
    // An empty audience would turn the audience check off: a token Google
    // issued for any other service would pass.
    throw new TypeError(
      "Cannot verify Pub/Sub pushes as 'audience' is missing: set it to the audience configured on the push subscription (its push endpoint's URL, by default)",
    );
  }
  // Google writes the account's email in lower case; a setting copied with
  // capitals names the same account.
  const account = asciiLower(keys.serviceAccount);
  let lastRefetchAt = -Infinity;
  const stepBack = stepBackPace();
  let refetching: Promise<readonly JsonWebKey[]> | undefined;
  /** How many refetches have brought keys, and the keys the last brought. */
  let refetched = { count: 0, keys: [] as readonly JsonWebKey[] };

  async function load(refresh: boolean): Promise<readonly JsonWebKey[]> {
    try {
      if (typeof keys.jwks !== "function") return keys.jwks;
      return await (refresh ? keys.jwks({ refresh }) : keys.jwks());
    } catch (error) {
      throw new KeysUnavailable({ cause: error });
    }
  }

  /**
   * Whether a token's claims, unverified, are those of a push to this
   * route: Google's issuer, this audience, this account, in time. Only
   * such a token may spend the refetch a minute allows, so a forger who
   * does not know them cannot use it up just before Google rotates its
   * keys (every push of the new key then refused until the next one).
   */
  function mayBeOurs(token: string): boolean {
    const claims = jwtPart(token, 1);
    if (typeof claims !== "object" || claims === null) return false;
    const { iss, aud, email, email_verified } = claims as Record<
      string,
      unknown
    >;
    return typeof iss === "string" &&
      /^(https:\/\/)?accounts\.google\.com$/.test(iss) &&
      audienceIs(aud, keys.audience) &&
      typeof email === "string" && asciiLower(email) === account &&
      email_verified === true &&
      inTime(claims as Record<string, unknown>, Date.now());
  }

  /**
   * The keys fetched again for `token`, which the keys it read when
   * `refetched.count` was `seen` did not verify, if it may be ours: a
   * refetch under way, waited on; one that is due, started; the keys of
   * one that ended since it read its keys (pushes at once, one of which
   * refetched while the others were being checked); or `undefined`.
   */
  async function keysAgain(
    token: string,
    seen: number,
  ): Promise<readonly JsonWebKey[] | undefined> {
    if (typeof keys.jwks !== "function" || !mayBeOurs(token)) {
      return undefined;
    }
    // A clock stepped back behind the last refetch (NTP correcting one
    // that ran fast) says nothing of how long ago it was: not "less than
    // a minute ago", which would lock a rotated-in key out for the step.
    // But once a minute at most (stepBackPace): a clock that flaps back
    // and forth (time sources fighting) would let every push of a
    // made-up kid fetch.
    const at = now();
    if (
      refetching === undefined &&
      (at < lastRefetchAt
        ? stepBack(JWKS_REFETCH_INTERVAL_MS)
        : at - lastRefetchAt >= JWKS_REFETCH_INTERVAL_MS)
    ) {
      lastRefetchAt = at;
      refetching = load(true).then((fresh) => {
        refetched = { count: refetched.count + 1, keys: fresh };
        return fresh;
      }).finally(() => (refetching = undefined));
    }
    if (refetching !== undefined) return await refetching;
    return refetched.count > seen ? refetched.keys : undefined;
  }

  /**
   * The claims of `token` if a key of `jwks` that names `kid` verifies it
   * (RS256, Google's issuer), or `undefined`. The audience is checked
   * after, so that a token Google signed for another is told apart from a
   * forgery in the log.
   */
  async function verifiedBy(
    token: string,
    kid: string,
    jwks: readonly JsonWebKey[],
  ): Promise<Record<string, unknown> | undefined> {
    // Hono verifies with the first key that names the kid: each key that
    // names it is tried here, so that keys which share a kid (a rotation
    // that publishes a new key under an old id) refuse no push signed by
    // the second.
    const named = jwks.filter((key) => (key as { kid?: unknown }).kid === kid);
    for (const key of named) {
      let payload: Record<string, unknown>;
      try {
        payload = await verifyWithJwks(token, {
          keys: [key] as HonoJsonWebKey[],
          allowedAlgorithms: ["RS256"],
          verification: {
            iss: /^(https:\/\/)?accounts\.google\.com$/,
            // Checked below, with a tolerance: Hono's checks refuse a
            // token issued a second "ahead" of our clock.
            exp: false,
            nbf: false,
            iat: false,
          },
        });
      } catch {
        // Bad signature, another issuer: all "not Google".
        continue;
      }
      // OIDC's `iss` is a string: Hono tests its pattern on the claim as
      // text, which an array of Google's issuer passes.
      return typeof payload.iss === "string" ? payload : undefined;
    }
    return undefined;
  }

  const longest = tokenLimit(keys.audience) + "Bearer ".length;
  const audienceHint = audienceHintOf(keys.audience);
  const accountHint = accountHintOf(account);
  /** One `Authorization` value's answer. */
  const one = async (authorization: string): Promise<PushVerification> => {
    // The scheme is case-insensitive (RFC 9110 §11.1), as on the ops routes.
    const match = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/i
      .exec(authorization);
    if (!match) return NOT_GOOGLES;
    const token = match[1]!;
    const kid = jwtKid(token);
    if (kid === undefined) return NOT_GOOGLES;
    const seen = refetched.count;
    let payload = await verifiedBy(token, kid, await load(false));
    // No key in hand verifies it: its kid unknown (a key Google added), or
    // known with other key material (a key Google published under an old
    // id, which would be refused until the cached keys expire). Fetched
    // again, paced and shared as one refetch, then checked again.
    if (payload === undefined) {
      const fresh = await keysAgain(token, seen);
      if (fresh !== undefined) payload = await verifiedBy(token, kid, fresh);
    }
    if (payload === undefined) return NOT_GOOGLES;
    const { aud, email, email_verified } = payload;
    // The account before the audience: anyone with a Google account has
    // Google sign a token for any audience, under that account's email,
    // so only the service account's own token may be called `url` (and
    // `clock`), and a forger's lands in `account` whatever its audience.
    if (
      typeof email !== "string" || asciiLower(email) !== account ||
      email_verified !== true
    ) return { ok: false, hint: accountHint, kind: "account" };
    if (!audienceIs(aud, keys.audience)) {
      return { ok: false, hint: audienceHint, kind: "url" };
    }
    // By the wall clock, as Google wrote them (and as the QStash Receiver
    // reads its tokens'); `now` paces the refetches.
    if (!inTime(payload, Date.now())) {
      return { ok: false, hint: CLOCK_HINT, kind: "clock" };
    }
    return TAKEN;
  };
  return async (authorization) => {
    // Refused unread: a longer header is no token of Google's.
    if (authorization === undefined || authorization.length > longest) {
      return NOT_GOOGLES;
    }
    if (!authorization.includes(",")) return await one(authorization);
    // Two Authorization headers read as one (fetch and proxies join a
    // repeated header with ", "; a token holds no comma): refused all the
    // same, but where one is the service account's own (taken alone, or
    // refused for its audience or clock, which only its tokens reach),
    // said so in the log, apart from forgeries. A few values at most are
    // checked, so that a header of many costs no more than a few tokens.
    const values = authorization.split(",").map((value) => value.trim());
    if (values.length > MAX_JOINED_TOKENS) return NOT_GOOGLES;
    for (const value of values) {
      const verified = await one(value);
      if (
        verified.ok || verified.kind === "url" || verified.kind === "clock"
      ) return JOINED_PUSH;
    }
    return NOT_GOOGLES;
  };
}

/**
 * The refusal of an `Authorization` header of several values, one of them
 * the service account's token: a second header added on the way.
 */
const JOINED_PUSH: PushVerification = {
  ok: false,
  hint:
    "The Authorization header held several values joined with ',', one of them the push subscription's own token: something between Pub/Sub and this service (a proxy, a gateway, a Worker in front) adds a second Authorization header beside Google's. If every push is refused so, have it pass Google's one header through unchanged; the audience and service account are right.",
  kind: "claims",
};

/**
 * A Pub/Sub verifier's answer: taken, or refused with, for a token one of
 * Google's keys signed, a `hint` for the log only (the caller is not told
 * of the service's settings).
 */
export type PushVerification =
  | { readonly ok: true }
  | {
    readonly ok: false;
    readonly hint?: string;
    /** Its kind, for the log's pace; absent, `unverified`. */
    readonly kind?: RefusalKind;
  };

const TAKEN: PushVerification = { ok: true };
const NOT_GOOGLES: PushVerification = { ok: false };

/** What to set when Google's tokens are all refused for the audience. */
function audienceHintOf(audience: string): string {
  // Said without a query, fragment or credentials: an audience defaults to
  // the push endpoint's URL, which may carry a verification token
  // (`?token=…`, as Google's older push samples did).
  return `If every push is refused so, Google signed them for another audience than this route's, ${
    optionUrlSaid(audience)
  }: set the route's audience (PUBSUB_AUDIENCE, PUBSUB_DEAD_LETTER_AUDIENCE for /v1/pubsub/dead-letter; createApp's audience) to its push subscription's (pushConfig.oidcToken.audience), and restart (docs/runbook.md, a deploy with a wrong secret).`;
}

/** What to set when Google's tokens are all refused for the account. */
function accountHintOf(account: string): string {
  return `If every push is refused so, Google signed them for another service account than ${
    JSON.stringify(account)
  }, or one whose email is not verified: set PUBSUB_SERVICE_ACCOUNT (createApp's serviceAccount) to the account the push subscription authenticates as (pushConfig.oidcToken.serviceAccountEmail), once you have checked it is yours (Google signs tokens for any account), and restart (docs/runbook.md, a deploy with a wrong secret).`;
}

/** What to check when Google's tokens are all refused by the clock. */
const CLOCK_HINT =
  "If every push is refused so, this server's clock is off: Google's tokens are past their exp, or issued ahead of it, by more than 30 seconds. Set the clock right (NTP).";

/**
 * Whether a token's `aud` is `audience` alone: the text, or a list that
 * holds it and nothing else. A list that names another audience beside it
 * is refused, as OpenID Connect Core (3.1.3.7) asks of a token that lists
 * an audience the client does not trust: here the audience is all that
 * tells the jobs' push subscription's tokens from the dead-letter one's,
 * and a token listing both opened both routes (a push's token gave up its
 * job). Google's tokens name one audience, as text.
 */
function audienceIs(aud: unknown, audience: string): boolean {
  return aud === audience ||
    (Array.isArray(aud) && aud.length > 0 &&
      aud.every((one) => one === audience));
}

/**
 * `text` with A-Z in lower case, and nothing else changed: an email's case
 * is ASCII's. `toLowerCase` folds more (U+212A KELVIN SIGN to "k"), which
 * would take another address for the service account.
 */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (run) => run.toLowerCase());
}

/**
 * Whether a verified token's time claims hold at `at` (milliseconds), each
 * within {@linkcode TOKEN_CLOCK_TOLERANCE_MS}: an `exp` it must have, and
 * the `iat` and `nbf` it may have.
 */
function inTime(payload: Record<string, unknown>, at: number): boolean {
  const { exp, iat, nbf } = payload;
  const seconds = (value: unknown): value is number =>
    typeof value === "number" && Number.isFinite(value);
  if (!seconds(exp) || exp * 1000 + TOKEN_CLOCK_TOLERANCE_MS <= at) {
    return false;
  }
  for (const since of [iat, nbf]) {
    if (since === undefined) continue;
    if (!seconds(since) || since * 1000 - TOKEN_CLOCK_TOLERANCE_MS > at) {
      return false;
    }
  }
  return true;
}
