/**
 * Publishing jobs through QStash, right by construction: every publish
 * carries the retries the service was checked with and the failure
 * callback that resolves a job QStash gives up on. It speaks QStash's
 * publish API with `fetch` (as `@upstash/qstash` 2.12.0's `Client` sends
 * it), so that a publish past its bound is aborted, a 429 says when to
 * try again, and nothing goes to the console; the webhook verifies
 * QStash's deliveries with that package's `Receiver`.
 *
 * @module
 */

import { ROUTE_AT_END } from "./_routes.ts";
import { loopbackWithoutDns } from "./_auth.ts";
import { resetInMs, retryAfterMs } from "./_rate_limit_waits.ts";
import { cutAt, messageOf, secretMasker } from "../policy/_walk.ts";
import { assertOptionNames, MAX_TIMER_MS, show } from "../policy/_validate.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { readText } from "../relayer/_read_text.ts";
import { type Job, jobIdOf, parseJob } from "../relayer/relayer.ts";

/**
 * The settings of {@linkcode qstashPublisher}.
 *
 * @example From the service's settings
 * ```ts
 * import type { QStashPublisherOptions } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const options: QStashPublisherOptions = {
 *   token: "qstash-token",
 *   publicUrl: "https://relayer.example.com",
 *   retries: 9, // MAX_DELIVERIES − 1: ten deliveries in all
 * };
 * assert.equal(options.retries + 1, 10);
 * ```
 */
export interface QStashPublisherOptions {
  /** `QSTASH_TOKEN`: the bearer token of QStash's API. */
  readonly token: string;
  /**
   * `PUBLIC_URL`: the service's public base URL. Jobs go to
   * `PUBLIC_URL/v1/qstash`; the failure callback is
   * `PUBLIC_URL/v1/qstash/failed`.
   */
  readonly publicUrl: string;
  /** `QSTASH_RETRIES`: sent as `Upstash-Retries`; at most your plan's cap. */
  readonly retries: number;
  /**
   * `QSTASH_URL`: QStash's API base.
   *
   * @default {"https://qstash.upstash.io"}
   */
  readonly baseUrl?: string;
  /**
   * How long a publish may wait for QStash's answer, in milliseconds: past
   * it, the request is aborted and the publish fails (the job may have
   * reached QStash or not), so
   * that an operator's `POST /v1/jobs` or redrive answers 503 and can be
   * tried again instead of hanging for as long as QStash does. An integer
   * from 1 to 2147483647.
   *
   * @default {10000}
   */
  readonly timeoutMs?: number;
}

/** The options `qstashPublisher` reads; any other is a typo. */
const PUBLISHER_OPTIONS: readonly string[] = Object.keys(
  {
    token: true,
    publicUrl: true,
    retries: true,
    baseUrl: true,
    timeoutMs: true,
  } satisfies Record<keyof QStashPublisherOptions, true>,
);

/**
 * Publishes jobs to a queue.
 *
 * @example A publisher that records what it would publish
 * ```ts
 * import type { Job } from "@relayer/poison";
 * import type { Publisher } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const sent: Job[] = [];
 * const publisher: Publisher = {
 *   publish: (job) => {
 *     sent.push(job);
 *     return Promise.resolve({ messageId: `msg_${sent.length}` });
 *   },
 * };
 * assert.deepEqual(await publisher.publish({ intentId: "pi_0001", kind: "settle" }), { messageId: "msg_1" });
 * ```
 */
export interface Publisher {
  /**
   * Publishes one job.
   *
   * @param job The job.
   * @param options A deduplication id: a second publish with it is dropped by the queue.
   * @returns The queue's id of the message.
   * @throws {Error} If the queue did not take the job, or did not say so in
   * time. Where the queue said how long to wait (QStash's 429), the error
   * carries it as `retryAfterMs`, which `createApp`'s `POST /v1/jobs` and
   * redrive answer as `Retry-After`.
   */
  publish(
    job: Job,
    options?: { readonly deduplicationId?: string },
  ): Promise<{ messageId: string }>;
}

/**
 * A {@linkcode Publisher} through QStash's REST API (`POST
 * {baseUrl}/v2/publish/PUBLIC_URL/v1/qstash`, with the platform's `fetch`):
 * every job goes with `Upstash-Retries: retries` and
 * `Upstash-Failure-Callback: PUBLIC_URL/v1/qstash/failed`, so a job QStash
 * gives up on is still resolved, and with
 * `Upstash-Failure-Callback-Retries: retries`, so the callback is retried
 * as often as the message (as `checkQueue` and the start-up check count
 * it). A deduplication id goes out as the hex SHA-256 of the destination
 * (`PUBLIC_URL/v1/qstash`) and the id (`Upstash-Deduplication-Id`): QStash
 * refuses one with a colon, which a redrive's `<jobId>:<version>:<time>`
 * has, and two deployments on one QStash account never share one. Building
 * it does no I/O.
 *
 * A publish is one request, never retried here, not even by the runtime
 * (its body goes as a `Blob`, which Deno's `fetch` does not send again on
 * a new connection): the operator's `POST /v1/jobs` or redrive answers 503
 * and is tried again. It is bounded by `timeoutMs`, past which it is
 * aborted; one whose answer is lost fails saying QStash may hold the job.
 * QStash's 429 fails with which limit it hit and when to try again, where
 * QStash said (`Retry-After`, else `RateLimit-Reset` or
 * `Burst-RateLimit-Reset`); its 401 with what to set (`QSTASH_TOKEN`, for
 * the API at `baseUrl`), as no retry helps there. Nothing is written
 * to the console: the error says it all, and never holds the token.
 *
 * @param options The token, the public URL, the retries, the API base and
 * how long a publish may wait.
 * @returns The publisher.
 * @throws {RangeError} If `retries` is not an integer in 0..100, or
 * `timeoutMs` not one in 1..2147483647.
 * @throws {TypeError} If `publicUrl` or `baseUrl` is not an http(s) URL or
 * carries credentials (`user:password@`), `baseUrl` holds QStash's `/v2`
 * path, a query or a fragment, `publicUrl` has a query, a fragment or one of
 * the service's routes (`/v1/qstash`, …) at its end, or `token` is empty.
 *
 * @example Publish a job (to a local stand-in of QStash's API)
 * ```ts
 * import { qstashPublisher } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const seen: Headers[] = [];
 * const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
 *   seen.push(req.headers);
 *   return Response.json({ messageId: "msg_1" });
 * });
 * const publisher = qstashPublisher({
 *   token: "qstash-token",
 *   publicUrl: "https://relayer.example.com",
 *   retries: 9,
 *   baseUrl: `http://127.0.0.1:${server.addr.port}`,
 * });
 * const { messageId } = await publisher.publish({ intentId: "pi_0001", kind: "settle" });
 * assert.equal(messageId, "msg_1");
 * assert.equal(seen[0]?.get("upstash-retries"), "9");
 * assert.equal(seen[0]?.get("upstash-failure-callback"), "https://relayer.example.com/v1/qstash/failed");
 * assert.equal(seen[0]?.get("upstash-failure-callback-retries"), "9");
 * await server.shutdown();
 * ```
 */
export function qstashPublisher(options: QStashPublisherOptions): Publisher {
  // A misspelt `baseUrl` would publish through QStash's default region.
  assertOptionNames("build a QStash publisher", options, PUBLISHER_OPTIONS, {
    example: "{ token, publicUrl, retries }",
  });
  const { token, retries, timeoutMs = 10_000 } = options;
  if (
    !Number.isInteger(timeoutMs) || timeoutMs < 1 ||
    timeoutMs > MAX_TIMER_MS
  ) {
    throw new RangeError(
      `Cannot build a QStash publisher as 'timeoutMs' must be an integer from 1 to 2147483647 (milliseconds): current value is ${
        show(timeoutMs)
      }`,
    );
  }
  if (!Number.isInteger(retries) || retries < 0 || retries > 100) {
    throw new RangeError(
      `Cannot build a QStash publisher as 'retries' must be an integer in 0..100: current value is ${
        show(retries)
      }`,
    );
  }
  if (token !== undefined && typeof token !== "string") {
    // By its type alone: a token is never shown.
    throw new TypeError(
      `Cannot build a QStash publisher as 'token' must be a string: current value is ${
        token === null
          ? "null"
          : `a${typeof token === "object" ? "n" : ""} ${typeof token}`
      }. Set QSTASH_TOKEN`,
    );
  }
  if (!token) {
    throw new TypeError(
      "Cannot build a QStash publisher as 'token' is empty: set QSTASH_TOKEN",
    );
  }
  const base = httpUrl("publicUrl", options.publicUrl).replace(/\/+$/, "");
  // `href` keeps an empty query or fragment ("…/?", "…#"), which the URL
  // parser's `search` and `hash` answer as "": read the text itself.
  if (
    /[?#]/.test(base) ||
    ROUTE_AT_END.test(new URL(base).pathname)
  ) {
    // The routes are appended to it: a query would end up before them, and
    // a route already there would be doubled (…/v1/qstash/v1/qstash, a 404).
    throw new TypeError(
      "Cannot build a QStash publisher as 'publicUrl' must be the service's base URL, without a query, a fragment or a route such as /v1/qstash (the publisher adds /v1/qstash and /v1/qstash/failed)",
    );
  }
  // As QStash's client trims it: `${baseUrl}/v2/publish/…`.
  const baseUrl = httpUrl(
    "baseUrl",
    options.baseUrl ?? "https://qstash.upstash.io",
  ).replace(/\/+$/, "");
  const api = new URL(baseUrl);
  if (api.protocol === "http:" && !loopbackWithoutDns(baseUrl)) {
    // The token goes with every publish: in clear text, whoever is on the
    // path publishes with it, and the account's failure callbacks give up
    // any job.
    throw new TypeError(
      "Cannot build a QStash publisher as 'baseUrl' is plain http off this machine: the token is sent with every publish, and whoever reads it on the path can publish to the service, its failure callback giving up any job. Use https (plain http is taken on localhost, 127.0.0.1 or [::1] only, for a local QStash): set QSTASH_URL so",
    );
  }
  if (
    api.search !== "" || api.hash !== "" || baseUrl.endsWith("?") ||
    baseUrl.endsWith("#") || /(^|\/)v2(\/|$)/.test(api.pathname)
  ) {
    // `/v2/publish/…` is appended to it: QStash's own path in it would be
    // doubled (a 404 at every publish), and a query would come before it.
    throw new TypeError(
      "Cannot build a QStash publisher as 'baseUrl' must be QStash's API base, such as https://qstash.upstash.io, without /v2/publish, a query or a fragment (the publisher adds /v2/publish/…): set QSTASH_URL to the base alone",
    );
  }
  // The destination goes unencoded after /v2/publish/, as QStash's API
  // reference and its client write it.
  const destination = `${base}/v1/qstash`;
  const endpoint = `${baseUrl}/v2/publish/${destination}`;
  const failureCallback = `${base}/v1/qstash/failed`;
  return {
    async publish(input, { deduplicationId } = {}) {
      const job = parseJob(input);
      const jobId = jobIdOf(job);
      const headers: Record<string, string> = {
        "authorization": `Bearer ${token}`,
        "content-type": "application/json",
        "upstash-method": "POST",
        "upstash-retries": String(retries),
        "upstash-failure-callback": failureCallback,
        // The failure callback's retries (QStash's `Upstash-Failure-Callback-`
        // prefix on a message header): as many as the message's, said
        // outright, which the start-up check counts against a give-up
        // answered busy.
        "upstash-failure-callback-retries": String(retries),
      };
      if (deduplicationId) {
        headers["upstash-deduplication-id"] = qstashDeduplicationId(
          destination,
          deduplicationId,
        );
      }
      // One bound over the whole exchange, the answer's body included:
      // past it the request is aborted (its connection closed), not left
      // running behind the caller's back.
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), timeoutMs);
      let answer: {
        status: number;
        headers: Headers;
        text: string;
        truncated: boolean;
      };
      try {
        const response = await fetch(endpoint, {
          method: "POST",
          headers,
          // A Blob, not the string: Deno's fetch sends a request whose body
          // it holds as text or bytes again, on a new connection, when a
          // kept-alive one dies after carrying it whole, and answers with
          // the answer to that copy. QStash took the first: a job without
          // a deduplication id (POST /v1/jobs) would be queued twice, and
          // said published once. A Blob (its length still declared) is
          // sent once; the lost answer fails the publish as maybe taken.
          body: new Blob([JSON.stringify(job)]),
          signal: controller.signal,
        });
        // Always read, whatever the status: a body left unread holds its
        // connection until a garbage collection.
        // Read to a cap, not whole: an answer without end (a proxy's, a
        // wrong QSTASH_URL's) grew the process by gigabytes before
        // timeoutMs ended it.
        answer = {
          status: response.status,
          headers: response.headers,
          ...await readText(response, controller.signal, MAX_ANSWER_BYTES),
        };
      } catch (error) {
        if (controller.signal.aborted) {
          throw new Error(
            `QStash did not answer the publish of ${jobId} within ${timeoutMs} ms: ${MAYBE_TAKEN}`,
          );
        }
        throw publishError(jobId, token, undefined, error);
      } finally {
        clearTimeout(timer);
      }
      const { status, text } = answer;
      if (status === 429) {
        throw rateLimited(jobId, token, answer.headers, text);
      }
      if (status < 200 || status > 299) {
        // As QStash's client words an empty answer.
        const error = publishError(
          jobId,
          token,
          status,
          text || `Error: status=${status}`,
        );
        if (status === 401) {
          // A token QStash does not know (another account's, another
          // region's, a signing key): every publish fails alike, and the
          // routes' "try again" cannot help.
          error.message +=
            `; QStash refused QSTASH_TOKEN: set it to the token the QStash console shows for the API at ${baseUrl} (QSTASH_URL), as publishing again will not help until then`;
        }
        throw error;
      }
      if (answer.truncated) {
        throw new Error(
          `QStash's answer to the publish of ${jobId} (HTTP ${status}) is over ${MAX_ANSWER_BYTES} bytes (64 KiB), the most read of it: ${MAYBE_TAKEN}`,
        );
      }
      let messageId: unknown;
      try {
        messageId = (JSON.parse(text) as { messageId?: unknown } | null)
          ?.messageId;
      } catch {
        // An answer cut off on its way back: QStash may hold the message.
      }
      if (typeof messageId !== "string") {
        throw new Error(
          `QStash answered the publish of ${jobId} with HTTP ${status} but no readable messageId: ${MAYBE_TAKEN}`,
        );
      }
      return { messageId };
    },
  };
}

/**
 * The most bytes of QStash's answer read (a publish's is a line of JSON,
 * an error's a sentence): the rest of a longer one is let go.
 */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Why publishing again is safe when QStash's answer is lost. */
const MAYBE_TAKEN =
  `it may have taken the job or not; publishing again is harmless (a job only says "go and look", and a redrive's deduplication id drops the second)`;

/**
 * A deduplication id QStash takes: the hex SHA-256 of the message's
 * `destination` and `id`. QStash refuses an `Upstash-Deduplication-Id`
 * with a colon (400 "DeduplicationId cannot contain ':'"), and a
 * redrive's id is `<intentId>/settle:<version>:<time>`, an intent id may
 * hold colons too; the hash keeps equal ids equal (the loser of two
 * redrives is still dropped) in 64 characters QStash accepts. The
 * destination is in it because QStash's documentation does not scope an
 * id to one (its content-based ids name theirs): two deployments on one
 * account (staging restored from production's backup) redriving the same
 * letter at its version and time sent one id, and the second was answered
 * 202 with the first's message and queued nothing, its letter removed.
 */
function qstashDeduplicationId(destination: string, id: string): string {
  // A URL holds no line feed: the two parts cannot run into each other.
  return bytesToHex(sha256(new TextEncoder().encode(`${destination}\n${id}`)));
}

/**
 * A failed publish, in words a log may keep: an answer (a proxy's, say)
 * may echo the request's `Authorization` header, so the token never
 * appears; the text is kept to one line of at most 200 characters.
 */
function publishError(
  jobId: string,
  token: string,
  status: number | undefined,
  cause: unknown,
): Error {
  // No answer: the request may have reached QStash whole before its
  // connection failed (a reset, a proxy's idle timeout), so it may hold
  // the job; "did not take" would be a guess.
  if (status === undefined) {
    return new Error(
      `QStash did not answer the publish of ${jobId} (${
        loggable(cause, token)
      }): ${MAYBE_TAKEN}`,
    );
  }
  return new Error(
    `QStash did not take the job ${jobId} (HTTP ${status}): ${
      loggable(cause, token)
    }`,
  );
}

// One publisher keeps one token, and a masker costs tens of µs to build:
// the last one built is kept, so a run of failed publishes (an outage)
// builds it once.
let lastMasker: { token: string; mask: (text: string) => string } | undefined;

function tokenMasker(token: string): (text: string) => string {
  if (lastMasker?.token !== token) {
    lastMasker = { token, mask: secretMasker([[token, "<QSTASH_TOKEN>"]]) };
  }
  return lastMasker.mask;
}

function loggable(cause: unknown, token: string): string {
  let text = messageOf(cause);
  // Node's fetch says only "fetch failed"; what failed is its cause's.
  const inner = cause instanceof Error ? cause.cause : undefined;
  if (inner !== undefined && inner !== null) {
    const innerText = messageOf(inner);
    if (!text.includes(innerText)) text = `${text} (${innerText})`;
  }
  text = tokenMasker(token)(text);
  text = text.replace(/\s+/g, " ").trim();
  return text.length > 200 ? `${cutAt(text, 200)}…` : text;
}

/**
 * QStash's 429, with when to try again where it said: `Retry-After`, else
 * the reset of the limit it names (`RateLimit-Reset`, its daily message
 * limit; `Burst-RateLimit-Reset`, its per-second one: a unix timestamp,
 * https://upstash.com/docs/qstash/api/api-ratelimiting). The error carries
 * the wait as `retryAfterMs`, which `createApp`'s routes answer as
 * `Retry-After`.
 */
function rateLimited(
  jobId: string,
  token: string,
  headers: Headers,
  text: string,
): Error & { readonly retryAfterMs?: number } {
  const daily = headers.has("ratelimit-limit") ||
    headers.has("ratelimit-reset");
  const limit = daily
    ? "QStash's daily message limit"
    : headers.has("burst-ratelimit-limit") ||
        headers.has("burst-ratelimit-reset")
    ? "QStash's per-second burst limit"
    : "QStash's rate limit";
  const now = Date.now();
  const asked = retryAfterMs(headers.get("retry-after"), now);
  const waitMs = asked ?? resetInMs(
    headers.get(daily ? "ratelimit-reset" : "burst-ratelimit-reset"),
    now,
  );
  const said = text.trim() === ""
    ? ""
    : ` (QStash said: ${loggable(text, token)})`;
  const head =
    `QStash did not take the job ${jobId} (HTTP 429): rate-limited by ${limit}`;
  if (waitMs === undefined) {
    return new Error(
      `${head}, without saying when to try again; try again later${said}`,
    );
  }
  if (!(waitMs <= MAX_WAIT_MS)) {
    // Hundreds of digits (Infinity), a date or a reset years ahead: no
    // QStash limit lasts so long, so no wait to pass on. A count of
    // seconds is QStash's own; a time is read by this server's clock,
    // which may be behind.
    const seconds = asked !== undefined &&
      /^[\d.]+$/.test(headers.get("retry-after")!.trim());
    const clock = seconds
      ? ""
      : " (a time so far ahead may say this server's clock is behind)";
    return new Error(
      `${head}, asking to wait over a day, longer than any QStash limit lasts${clock}; try again later${said}`,
    );
  }
  const error = new Error(
    `${head}; try again in ${Math.max(1, Math.ceil(waitMs / 1000))} s${said}`,
  );
  return Object.assign(error, { retryAfterMs: waitMs });
}

/** The longest wait a 429 is taken to ask: its daily limit resets within a day. */
const MAX_WAIT_MS = 86_400_000;

function httpUrl(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(
      `Cannot build a QStash publisher as '${name}' is not a URL`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new TypeError(
      `Cannot build a QStash publisher as '${name}' must be an http(s) URL`,
    );
  }
  // As PUBLIC_URL and QSTASH_URL: the publish URL holds both, and a
  // runtime's error for it (an unreachable QStash) quotes it whole.
  if (url.username !== "" || url.password !== "") {
    throw new TypeError(
      `Cannot build a QStash publisher as '${name}' must not carry credentials: remove the user:password@ part`,
    );
  }
  return url.href;
}
