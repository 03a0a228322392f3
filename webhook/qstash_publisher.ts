/**
 * Publishing jobs through QStash, right by construction: every publish
 * carries the retries the service was checked with and the failure
 * callback that resolves a job QStash gives up on.
 *
 * @module
 */

import { ROUTE_AT_END } from "./_routes.ts";
import { cutAt, secretForms } from "../policy/_walk.ts";
import { assertOptionNames } from "../policy/_validate.ts";
import { Client } from "@upstash/qstash";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
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
   * it, the publish fails (the job may have reached QStash or not), so
   * that an operator's `POST /v1/jobs` or redrive answers 503 and can be
   * tried again instead of hanging for as long as QStash does. An integer
   * from 1 to 2147483647.
   *
   * @default {10000}
   */
  readonly timeoutMs?: number;
}

/** What a publish's race answers when QStash's answer is later than its bound. */
const LATE: unique symbol = Symbol("late");

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
   */
  publish(
    job: Job,
    options?: { readonly deduplicationId?: string },
  ): Promise<{ messageId: string }>;
}

/**
 * A {@linkcode Publisher} through QStash (`@upstash/qstash`'s `Client`):
 * every job goes to `PUBLIC_URL/v1/qstash` with `retries` and
 * `failureCallback: PUBLIC_URL/v1/qstash/failed`, so a job QStash gives up
 * on is still resolved. A deduplication id goes out as its hex SHA-256
 * (`Upstash-Deduplication-Id`): QStash refuses one with a colon, which a
 * redrive's `<jobId>:<version>` has. Building it does no I/O; the client
 * is made on the first publish.
 *
 * @param options The token, the public URL, the retries, the API base and
 * how long a publish may wait.
 * @returns The publisher.
 * @throws {RangeError} If `retries` is not an integer in 0..100, or
 * `timeoutMs` not one in 1..2147483647.
 * @throws {TypeError} If `publicUrl` or `baseUrl` is not an http(s) URL,
 * `publicUrl` has a query, a fragment or one of the service's routes
 * (`/v1/qstash`, …) at its end, or `token` is empty.
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
    timeoutMs > 2_147_483_647
  ) {
    throw new RangeError(
      `Cannot build a QStash publisher as 'timeoutMs' must be an integer from 1 to 2147483647 (milliseconds): current value is ${
        String(timeoutMs)
      }`,
    );
  }
  if (!Number.isInteger(retries) || retries < 0 || retries > 100) {
    throw new RangeError(
      `Cannot build a QStash publisher as 'retries' must be an integer in 0..100: current value is ${
        String(retries)
      }`,
    );
  }
  if (typeof token !== "string" || token === "") {
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
  const baseUrl = httpUrl(
    "baseUrl",
    options.baseUrl ?? "https://qstash.upstash.io",
  );
  let client: Client | undefined;
  return {
    async publish(input, { deduplicationId } = {}) {
      const job = parseJob(input);
      client ??= new Client({
        token,
        baseUrl,
        enableTelemetry: false,
        retry: false,
        // Never read QSTASH_DEV from the environment: it swaps in the
        // public dev credentials and starts a dev server, as the Receiver
        // would swap in the public dev signing keys.
        devMode: false,
      });
      const published = client.publishJSON({
        url: `${base}/v1/qstash`,
        body: job,
        retries,
        failureCallback: `${base}/v1/qstash/failed`,
        ...(deduplicationId
          ? { deduplicationId: qstashDeduplicationId(deduplicationId) }
          : {}),
      });
      // The client takes no signal: past the bound, its request is left to
      // end on its own (its failure then goes nowhere), and the caller is
      // answered.
      published.catch(() => {});
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<typeof LATE>((resolve) => {
        timer = setTimeout(() => resolve(LATE), timeoutMs);
      });
      let result: unknown;
      try {
        result = await Promise.race([published, late]);
      } catch (error) {
        throw publishError(error, token, jobIdOf(job));
      } finally {
        clearTimeout(timer);
      }
      if (result === LATE) {
        throw new Error(
          `QStash did not answer the publish of ${
            jobIdOf(job)
          } within ${timeoutMs} ms: it may have taken the job or not; publishing again is harmless (a job only says "go and look", and a redrive's deduplication id drops the second)`,
        );
      }
      const messageId = (result as { messageId?: unknown }).messageId;
      if (typeof messageId !== "string") {
        throw new Error(`QStash returned no messageId for ${jobIdOf(job)}`);
      }
      return { messageId };
    },
  };
}

/**
 * A deduplication id QStash takes: the hex SHA-256 of `id`. QStash refuses
 * an `Upstash-Deduplication-Id` with a colon (400 "DeduplicationId cannot
 * contain ':'"), and a redrive's id is `<intentId>/settle:<version>`, an
 * intent id may hold colons too; the hash keeps equal ids equal (the loser
 * of two redrives is still dropped) in 64 characters QStash accepts.
 */
function qstashDeduplicationId(id: string): string {
  return bytesToHex(sha256(new TextEncoder().encode(id)));
}

/**
 * A failed publish, in words a log may keep: the client's error quotes
 * the API's answer whole, and an answer (a proxy's, say) may echo the
 * request's `Authorization` header. The token never appears.
 */
function publishError(error: unknown, token: string, jobId: string): Error {
  const status = (error as { status?: unknown } | null)?.status;
  let text = error instanceof Error ? error.message : String(error);
  for (const form of secretForms(token)) {
    text = text.replaceAll(form, "<QSTASH_TOKEN>");
  }
  text = text.replace(/\s+/g, " ");
  return new Error(
    `QStash did not take the job ${jobId}${
      typeof status === "number" ? ` (HTTP ${status})` : ""
    }: ${text.length > 200 ? `${cutAt(text, 200)}…` : text}`,
  );
}

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
  return url.href;
}
