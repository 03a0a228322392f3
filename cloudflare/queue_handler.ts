/**
 * A Cloudflare Queues consumer built from a relayer: the `queue(batch)`
 * handler of a Worker. Delivery number = `message.attempts`; a retry is
 * `message.retry({ delaySeconds })` with this policy's delay; done or poison
 * is `message.ack()`. It must be told the name of the queue's dead-letter
 * queue (without one Cloudflare deletes a message at its retry limit),
 * which the same handler consumes too: every message there is the queue
 * giving up.
 *
 * Web APIs only, and no Cloudflare types needed: the batch and message types
 * here are the part of Cloudflare's that the handler uses.
 *
 * @example A Worker that serves the webhook and consumes a queue
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import { createQueueHandler } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const relayer = createRelayer({ store: new MemoryStore(), sender: new ScriptedSender({}) });
 * const worker = {
 *   queue: createQueueHandler({
 *     relayer,
 *     maxRetries: 9, // the jobs consumer's max_retries
 *     deadLetterQueue: "relayer-jobs-dlq", // its dead_letter_queue
 *     deadLetterMaxRetries: 100, // that queue's consumer's max_retries
 *   }),
 * };
 * assert.equal(typeof worker.queue, "function");
 * ```
 *
 * @module
 */

import { describeError, oneLine } from "../policy/_walk.ts";
import {
  formatOutcome,
  type Job,
  jobIdOf,
  type Outcome,
  parseJob,
  type Relayer,
} from "../relayer/relayer.ts";
import { outageDelayMs } from "../policy/_doubled.ts";
import { intentIdSeen } from "../relayer/_job_text.ts";
import {
  CLOUDFLARE_FREE_RETENTION_MS,
  CLOUDFLARE_MAX_DELAY_SECONDS as MAX_DELAY_SECONDS,
  CLOUDFLARE_MAX_DELIVERY_DELAY_MS,
  CLOUDFLARE_MAX_RETENTION_MS,
  CLOUDFLARE_MIN_RETENTION_MS,
  cloudflareDeadLetterMaxWaitSeconds,
  cloudflareDeadLetterMinWaitSeconds,
  cloudflareDeadLetterRetriesRefusal,
  cloudflareDelaySeconds as delaySecondsOf,
  cloudflareDeliveryDelayAllowed,
  cloudflareRetentionAllowed,
  type CloudflareRetentionLimits,
  cloudflareRetentionRefusal,
} from "../policy/_cloudflare_retention.ts";
import { assertOptionNames, show } from "../policy/_validate.ts";
import { formatDuration } from "../policy/format_duration.ts";

/**
 * One message of a Cloudflare Queues batch: the part of Cloudflare's
 * `Message` the handler uses.
 *
 * @example A message as a test builds it
 * ```ts
 * import type { QueueMessage } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const calls: string[] = [];
 * const message: QueueMessage = {
 *   id: "m1",
 *   body: { intentId: "pi_0001", kind: "settle" },
 *   attempts: 1,
 *   ack: () => calls.push("ack"),
 *   retry: (options) => calls.push(`retry ${options?.delaySeconds ?? "-"}`),
 * };
 * message.ack();
 * assert.deepEqual(calls, ["ack"]);
 * ```
 */
export interface QueueMessage {
  /** Cloudflare's message id. */
  readonly id: string;
  /** The job: an object (the default content type) or its JSON text. */
  readonly body: unknown;
  /** How many times this message has been delivered, counting this one (1-based). */
  readonly attempts: number;
  /** Done with it: the queue forgets the message. */
  ack(): void;
  /** Deliver it again, after `delaySeconds` if given. */
  retry(options?: { delaySeconds?: number }): void;
}

/**
 * A batch of messages, as Cloudflare hands it to a Worker's `queue`
 * handler: the part of Cloudflare's `MessageBatch` the handler uses.
 *
 * @example A batch as a test builds it
 * ```ts
 * import type { QueueBatch } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const batch: QueueBatch = { queue: "relayer-jobs", messages: [] };
 * assert.equal(batch.messages.length, 0);
 * ```
 */
export interface QueueBatch {
  /** The queue's name. */
  readonly queue: string;
  /** The messages. */
  readonly messages: readonly QueueMessage[];
}

/**
 * What {@linkcode createQueueHandler} builds a consumer from.
 *
 * @example Options for a queue and its dead-letter queue
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import type { QueueHandlerOptions } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const relayer = createRelayer({ store: new MemoryStore(), sender: new ScriptedSender({}) });
 * const jobs: QueueHandlerOptions = {
 *   relayer,
 *   maxRetries: 9,
 *   deadLetterQueue: "relayer-jobs-dlq",
 *   deadLetterMaxRetries: 100,
 * };
 * assert.equal(jobs.maxRetries, 9);
 * ```
 */
export interface QueueHandlerOptions {
  /** The relayer that runs each delivery. */
  readonly relayer: Relayer;
  /**
   * The queue's `max_retries` (the consumer's setting in `wrangler.toml`):
   * the queue delivers a message at most `maxRetries + 1` times, then moves
   * it to its dead-letter queue.
   *
   * @default {3}
   */
  readonly maxRetries?: number | undefined;
  /**
   * The name of the queue's dead-letter queue (the consumer's
   * `dead_letter_queue` in `wrangler.toml`), which this handler consumes
   * too (the same Worker, a second consumer). A message from that queue is
   * the queue giving up on a job after `maxRetries + 1` deliveries: the job
   * is poisoned ("the queue gave up after N deliveries"), resolved by the
   * intent's state exactly as a poisoned delivery is, then acked. Any other
   * queue's batch is deliveries.
   *
   * Required: without a dead-letter queue Cloudflare deletes a message at
   * its retry limit, and a job whose last delivery was busy (DESIGN §13) or
   * met the store down would leave its intent with no job and no dead
   * letter. Where another Worker consumes the dead-letter queue, name it
   * all the same: its batches never come here.
   */
  readonly deadLetterQueue: string;
  /**
   * The dead-letter queue's own `max_retries` (its consumer's setting in
   * `wrangler.toml`), checked: a give-up that fails (the store down) is
   * retried with a wait doubling to 12 h, and running out of retries
   * deletes the message and strands its intent. So its retries must span
   * Cloudflare's longest retention, 14 days (41 with the default policy;
   * `max_retries = 100` always does). Not given, it is Cloudflare's
   * default of 3, which is refused: give it.
   *
   * @default {3}
   */
  readonly deadLetterMaxRetries?: number | undefined;
  /**
   * The jobs queue's message retention, in milliseconds (whole seconds,
   * 60 s to 14 days; 4 days unless set, 24 h fixed on the Workers Free
   * plan), checked:
   * Cloudflare deletes a message whose retention ends, retried or not,
   * with no dead letter, so the retention must outlast the waits the
   * handler asks over `maxRetries` retries (each up to the policy's
   * backoff, or a busy intent's `leaseMs` + 2 × `clockSkewMs`): more than
   * 12 min with the default policy and lease. That is a floor: each
   * delivery's batch runs too (up to 15 min) and a backlog waits, so set
   * more; a refusal suggests 1 day, which every plan allows (the Workers
   * Free plan keeps messages 24 h), or more where the floor needs it. Not
   * given, it is counted as 24 h, the least a plan keeps unless set (the
   * handler cannot see the plan): waits that outlast it are refused, and
   * on a paid plan giving the queue's retention (4 days unless set) is the
   * way past that.
   */
  readonly messageRetentionMs?: number | undefined;
  /**
   * The dead-letter queue's message retention, in milliseconds (whole
   * seconds, 60 s to 14 days), checked: a message moves there
   * with its age (Miniflare's queue keeps its send's timestamp; Cloudflare
   * does not say), so the jobs queue's `deliveryDelayMs` and waits come
   * first, and a give-up answered busy then waits up to the policy's delay
   * after the queue's last delivery (or a lease) before it is tried again;
   * a retention that ends first deletes it, its intent stranded: more than
   * 14 min with the default policy and lease (a floor, as for
   * `messageRetentionMs`). On a paid plan, 14 days outlasts the longest
   * outage. Not given, it is counted as 24 h, as `messageRetentionMs` is.
   * No wait on the dead-letter queue passes what it (given, or 24 h)
   * leaves a message as old as the jobs queue's waits make it, whether
   * Cloudflare kept the message's `attempts` on the move or started them
   * again at 1 (its docs do not say; Miniflare's does). Given, none is
   * shorter than the busy give-up's wait it counts (2 min with the
   * default policy and lease): a give-up that meets the store down there
   * for as long is retried once after it, before the retention ends.
   */
  readonly deadLetterMessageRetentionMs?: number | undefined;
  /**
   * The longest a message on the jobs queue waits before its first
   * delivery, in milliseconds (whole seconds, 0 to 24 h): the queue's
   * delivery delay (`wrangler queues update <queue> --delivery-delay-secs`)
   * or the longest `delaySeconds` a producer sends with, whichever is
   * longer. Cloudflare does not say a retention waits for the first
   * delivery, so it is counted from the send and the delay is part of a
   * message's age: it is added to the waits
   * `messageRetentionMs` must outlast, and to those
   * `deadLetterMessageRetentionMs` must (a message moves to the dead-letter
   * queue with its age). Not given, 0.
   *
   * @default {0}
   */
  readonly deliveryDelayMs?: number | undefined;
  /**
   * How many messages of a batch are handled at once. Cloudflare lets an
   * invocation hold 6 connections at a time (fetches waiting for headers,
   * and sockets such as a PostgreSQL client's) and queues the rest: a send
   * queued there spends its `SENDER_TIMEOUT` waiting, and a send that
   * timed out may have been sent, so its payment ends in review. Keep this
   * plus the store's connections (postgres.js `max`) at 6 or below: 4 with
   * a client of 2, as the PostgreSQL example Worker does. A message makes
   * one signer call at a time, except when it reads the receipts of an
   * intent that was rescued (one per tx on record, at once, so the
   * delivery waits one timeout for them): where rescues are common, lower
   * this.
   *
   * @default {4}
   */
  readonly concurrency?: number | undefined;
  /**
   * Where the worker lines go: one per message, and one per unexpected
   * failure (its name and message, never a secret). A sink that throws
   * loses its line; every message is still acked or retried.
   *
   * @default {a function that discards them}
   */
  readonly log?: (line: string) => void;
}

/** The options `createQueueHandler` reads; any other is a typo. */
const OPTION_NAMES: readonly string[] = Object.keys(
  {
    relayer: true,
    maxRetries: true,
    deadLetterQueue: true,
    deadLetterMaxRetries: true,
    messageRetentionMs: true,
    deadLetterMessageRetentionMs: true,
    deliveryDelayMs: true,
    concurrency: true,
    log: true,
  } satisfies Record<keyof QueueHandlerOptions, true>,
);

/**
 * A Worker's `queue` handler. It throws only if a message's own `ack()` or
 * `retry()` threw, after the whole batch, so that Cloudflare delivers again
 * what was not acked.
 *
 * @example A message whose `retry()` threw fails the batch, after the rest
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import { createQueueHandler, type QueueHandler } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const relayer = createRelayer({ store: new MemoryStore(), sender: new ScriptedSender({}) });
 * const queue: QueueHandler = createQueueHandler({
 *   relayer,
 *   maxRetries: 9,
 *   deadLetterQueue: "relayer-jobs-dlq",
 *   deadLetterMaxRetries: 100,
 *   log: () => {},
 * });
 * const retried: string[] = [];
 * const message = (id: string, retry: () => void) => ({
 *   id, body: { intentId: "pi_0001", kind: "settle" }, attempts: 1, ack: () => {}, retry,
 * });
 * // No such intent yet: each job is retried, as it may be created later.
 * await assert.rejects(queue({
 *   queue: "relayer-jobs",
 *   messages: [
 *     message("m1", () => { throw new Error("the batch was settled already"); }),
 *     message("m2", () => void retried.push("m2")),
 *   ],
 * }));
 * assert.deepEqual(retried, ["m2"]);
 * ```
 */
export type QueueHandler = (batch: QueueBatch) => Promise<void>;

/**
 * UTF-8 that refuses what is not: a job's bytes are read as /v1/qstash
 * reads them, so a body with a byte that is not UTF-8 is unreadable, never
 * a job with U+FFFD in it.
 */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** UTF-8 that reads a byte that is not as U+FFFD: only to name an intent. */
const LENIENT_UTF8 = new TextDecoder("utf-8", {
  fatal: false,
  ignoreBOM: false,
});

/**
 * A message body as sent: bytes decoded as UTF-8 (strictly, by default:
 * a `TypeError` if they are not), anything else as it is.
 */
function decoded(body: unknown, strict = true): unknown {
  if (!(body instanceof ArrayBuffer || ArrayBuffer.isView(body))) return body;
  const bytes = body instanceof ArrayBuffer
    ? new Uint8Array(body)
    : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  if (!strict) return LENIENT_UTF8.decode(bytes);
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new TypeError(
      "Cannot read job as the message body is not UTF-8 text: publish the job as UTF-8 JSON",
    );
  }
}

/**
 * JSON text without a leading byte order mark, which RFC 8259 §8.1 lets a
 * reader ignore: workerd keeps U+FEFF in a `"text"` message's string (and
 * in a string sent as `"json"` or `"v8"`), where bytes decoded above drop
 * it, and /v1/qstash's JSON ignores it; the same text is the same job.
 */
function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** A message body as a job: an object, or its JSON text (or bytes). */
function jobOf(body: unknown): Job {
  const value = decoded(body);
  if (typeof value !== "string") return parseJob(value);
  let json: unknown;
  try {
    json = JSON.parse(withoutBom(value));
  } catch {
    throw new TypeError("Cannot read job as the message body is not JSON");
  }
  return parseJob(json);
}

/**
 * What can be read of a message that is not a job: its text (for the
 * dead letter's name when the message has no usable id) and the intent id
 * it names, if any.
 */
function readable(body: unknown): { raw: string; intentId?: unknown } {
  // Bytes that are not UTF-8 read as U+FFFD here, only to name the intent
  // and keep the text, as /v1/qstash keeps it.
  let value = decoded(body, false);
  let raw: string;
  if (typeof value === "string") {
    raw = value;
    try {
      value = JSON.parse(withoutBom(value));
    } catch {
      return { raw };
    }
  } else {
    try {
      raw = JSON.stringify(value) ?? String(value);
    } catch {
      raw = String(value);
    }
  }
  // A job encoded twice (a producer's JSON.stringify of its JSON) names
  // its intent too.
  return { raw, intentId: intentIdSeen(value) };
}

/**
 * What a refusal adds for an option given as text: a Worker's `[vars]`
 * quoted, its dashboard's variables and `.dev.vars` are text, and
 * `"9"` beside "must be an integer" reads as a contradiction. Told, as
 * definePolicy tells it, to give a number, and which of `workerConfig`'s
 * fields reads the Worker's setting into one. Not read here: the options
 * are numbers, and the retentions' settings are durations (`"4d"`), whose
 * digits alone would not be milliseconds.
 */
function asText(value: unknown, reads?: string): string {
  if (typeof value !== "string") return "";
  if (reads === undefined) return ", a text: give a number";
  return reads.startsWith("cloudflareRetentions")
    ? `, a text: give a number of milliseconds (parseDuration reads a duration's text into one; workerConfig(env).config.${reads} into one)`
    : `, a text: give a number (workerConfig(env).config.${reads} into one)`;
}

/** Refuses a dead-letter queue whose retries end before its retention can. */
function checkDeadLetterRetries(
  options: QueueHandlerOptions,
  baseMs: number,
): void {
  // Not given, the consumer's max_retries is Cloudflare's default, 3: as
  // for `maxRetries`, checked all the same.
  const retries = options.deadLetterMaxRetries ?? 3;
  if (!Number.isInteger(retries) || retries < 0 || retries > 100) {
    throw new RangeError(
      `Cannot create queue handler as 'deadLetterMaxRetries' must be an integer in 0..100: current value is ${
        show(retries)
      }${
        asText(
          retries,
          "cloudflareDeadLetterMaxRetries reads CLOUDFLARE_DLQ_MAX_RETRIES",
        )
      }`,
    );
  }
  const refusal = cloudflareDeadLetterRetriesRefusal(
    retries,
    baseMs,
    options.deadLetterMaxRetries !== undefined,
  );
  if (refusal === undefined) return;
  throw new RangeError(
    `Cannot create queue handler as 'deadLetterMaxRetries' is ${refusal}`,
  );
}

/**
 * A message retention as given, checked to be one Cloudflare allows:
 * whole seconds from 60 s to 14 days.
 */
function checkRetentionAllowed(
  name: "messageRetentionMs" | "deadLetterMessageRetentionMs",
  value: unknown,
): void {
  if (value === undefined || cloudflareRetentionAllowed(value)) return;
  throw new RangeError(
    `Cannot create queue handler as '${name}' must be whole seconds from ${
      formatDuration(CLOUDFLARE_MIN_RETENTION_MS)
    } to ${
      formatDuration(CLOUDFLARE_MAX_RETENTION_MS)
    } (a Cloudflare queue's message retention, 4 days unless set): current value is ${
      show(value)
    }${
      asText(
        value,
        `cloudflareRetentions reads ${
          name === "messageRetentionMs"
            ? "CLOUDFLARE_MESSAGE_RETENTION"
            : "CLOUDFLARE_DLQ_MESSAGE_RETENTION"
        }`,
      )
    }`,
  );
}

/**
 * Refuses message retentions that end while the handler may still retry
 * a message (`policy/_cloudflare_retention.ts`, the rule the service's
 * settings and `deno task schedule --queue cloudflare` read too):
 * Cloudflare deletes such a message, with no dead letter. Returns what the
 * rule read of the handler and its queues.
 */
function checkRetentions(
  options: QueueHandlerOptions,
  maxRetries: number,
  deadLetterQueue: string,
): CloudflareRetentionLimits {
  checkRetentionAllowed("messageRetentionMs", options.messageRetentionMs);
  checkRetentionAllowed(
    "deadLetterMessageRetentionMs",
    options.deadLetterMessageRetentionMs,
  );
  const { deliveryDelayMs } = options;
  if (
    deliveryDelayMs !== undefined &&
    !cloudflareDeliveryDelayAllowed(deliveryDelayMs)
  ) {
    throw new RangeError(
      `Cannot create queue handler as 'deliveryDelayMs' must be whole seconds from 0 to ${
        formatDuration(CLOUDFLARE_MAX_DELIVERY_DELAY_MS)
      } (the queue's delivery delay, or the longest delaySeconds a producer sends with): current value is ${
        show(deliveryDelayMs)
      }${
        asText(
          deliveryDelayMs,
          "cloudflareRetentions reads CLOUDFLARE_DELIVERY_DELAY",
        )
      }`,
    );
  }
  const { relayer } = options;
  // A relayer of another make may not say its lease: the defaults, then.
  const { leaseMs, clockSkewMs } = relayer;
  const limits: CloudflareRetentionLimits = {
    baseMs: relayer.policy.baseMs,
    capMs: relayer.policy.capMs,
    leaseMs: typeof leaseMs === "number" ? leaseMs : undefined,
    clockSkewMs: typeof clockSkewMs === "number" ? clockSkewMs : undefined,
    maxRetries,
    deliveryDelayMs,
  };
  const refusal = cloudflareRetentionRefusal(limits, options, deadLetterQueue);
  if (refusal !== undefined) {
    throw new RangeError(
      `Cannot create queue handler as '${refusal.option}' is ${refusal.text}`,
    );
  }
  return limits;
}

/**
 * Builds a Cloudflare Queues consumer from a relayer. For each message:
 * delivery number = `message.attempts`; a retry is
 * `message.retry({ delaySeconds: ceil(delayMs / 1000) })`, at least 1 s and at most 12 h;
 * done or poison is `message.ack()`. A body is a job as an object, or as
 * its JSON in text or UTF-8 bytes (a leading byte order mark ignored, as
 * /v1/qstash ignores it). A message whose body is not a job (bytes
 * that are not UTF-8 included) is kept as a dead letter (`relayer.keepUnreadable`), then acked and logged
 * (no retry can help it); if the dead letter fails, it is retried. The handler does not throw for a
 * delivery (only if `ack()` or `retry()` itself throws, after the batch): a
 * delivery that fails unexpectedly (the store is down) is logged and
 * retried after the policy's base delay doubled with each of the message's
 * attempts (`baseMs`, 5 s by default), up to the policy's cap on the jobs
 * queue and up to 12 h on the dead-letter queue (or what
 * `deadLetterMessageRetentionMs`, or 24 h when it is not given, leaves a
 * message there as old as the jobs queue's waits make it, if less; given,
 * at least the busy give-up's wait it counts there). So one message never makes
 * Cloudflare retry the whole batch, an outage does not use up a message's
 * deliveries at once, and a give-up that fails outlasts an outage as long
 * as the queue's retention (with `max_retries = 100` on the dead-letter
 * queue).
 *
 * Like `createRelayer`, it does not check the rescue window; a service's
 * configuration and `deno task schedule --queue cloudflare` do.
 *
 * @param options The relayer, the queue's `maxRetries`, the name of its
 * dead-letter queue and that queue's `max_retries`, the two queues'
 * message retentions (each counted as 24 h where not given; with the jobs queue's delivery delay,
 * counted in its), and where log lines go.
 * @returns The `queue(batch)` handler.
 * @throws {RangeError} If `maxRetries` is not an integer in 0..100, or if the
 * queue would stop delivering before the policy's `maxDeliveries`
 * (`maxRetries + 1 < maxDeliveries`): that queue would drop jobs the policy
 * still means to deliver. If `deadLetterMaxRetries` is not an integer in
 * 0..100, or its retries span less than 14 days (as Cloudflare's default
 * of 3, when it is not given, does). If `messageRetentionMs` or
 * `deadLetterMessageRetentionMs` is not whole seconds from 60 s to 14
 * days, or would end (given, or counted as 24 h where not given) while
 * the handler may still retry a message there:
 * the jobs queue's within its `deliveryDelayMs` and the waits of its
 * `maxRetries` retries, the dead-letter queue's within those and a busy
 * give-up's wait. If `deliveryDelayMs` is not whole seconds from 0 to 24 h.
 * @throws {TypeError} If `relayer` is not a relayer (`createRelayer`'s, or
 * `createApp(…).relayer`). If `deadLetterQueue` is missing (Cloudflare would
 * delete a message at its retry limit, unrecorded), or if the options are
 * not an object or name an
 * option it does not read (a misspelt `deadLetterQueue` would take every
 * give-up for a delivery).
 *
 * @example Consume a batch
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import { createQueueHandler, type QueueMessage } from "@relayer/poison/cloudflare";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "created" });
 * const relayer = createRelayer({ store, sender: new ScriptedSender({}), random: () => 0 });
 * const dlq = { deadLetterQueue: "relayer-jobs-dlq", deadLetterMaxRetries: 100 };
 * const queue = createQueueHandler({ relayer, maxRetries: 9, ...dlq });
 *
 * const calls: string[] = [];
 * const message: QueueMessage = {
 *   id: "m1",
 *   body: { intentId: "pi_0001", kind: "settle" },
 *   attempts: 1,
 *   ack: () => calls.push("ack"),
 *   retry: (options) => calls.push(`retry ${options?.delaySeconds}`),
 * };
 * await queue({ queue: "relayer-jobs", messages: [message] });
 * assert.deepEqual(calls, ["retry 3"]); // not authorized yet: 2.5 s, rounded up
 *
 * assert.throws(() => createQueueHandler({ relayer, maxRetries: 3, ...dlq }), RangeError); // 4 < 10 deliveries
 * assert.throws(() => createQueueHandler({ relayer, maxRetries: 9 } as never), TypeError); // no dead-letter queue
 * assert.throws(() => createQueueHandler({ relayer, maxRetries: 9, deadLetterQueue: "relayer-jobs-dlq" }), RangeError); // its max_retries: Cloudflare's 3
 *
 * // The queues' message retentions, when given: a job retried for up to 12 min
 * // outlives a retention of 10 min; a busy give-up, moved with its age, waits up to
 * // 2 min more.
 * assert.throws(() => createQueueHandler({ relayer, maxRetries: 9, ...dlq, messageRetentionMs: 600_000 }), RangeError);
 * assert.throws(() => createQueueHandler({ relayer, maxRetries: 9, ...dlq, deadLetterMessageRetentionMs: 60_000 }), RangeError);
 * const days = (n: number) => n * 86_400_000;
 * createQueueHandler({ relayer, maxRetries: 9, ...dlq, messageRetentionMs: days(4), deadLetterMessageRetentionMs: days(14) });
 * ```
 */
export function createQueueHandler(options: QueueHandlerOptions): QueueHandler {
  // A misspelt `deadLetterQueue` would take every give-up from the
  // dead-letter queue for a delivery: no intent whose job the queue gave
  // up on would be resolved.
  assertOptionNames("create queue handler", options, OPTION_NAMES, {
    example: "{ relayer, maxRetries, deadLetterQueue }",
  });
  const { relayer, maxRetries = 3, deadLetterQueue, concurrency = 4 } = options;
  if (!isRelayer(relayer)) {
    throw new TypeError(
      "Cannot create queue handler as 'relayer' is not a relayer: pass the one createRelayer() returns, or createApp(…).relayer, so the routes and the queue share one count of sends in flight",
    );
  }
  const sink = options.log ?? (() => {});
  // A log line is never a reason for a message to go unsettled: a sink
  // that throws loses the line, not the message.
  const log = (line: string): void => {
    try {
      // One line, whatever a message's body put in the text it quotes.
      sink(oneLine(line));
    } catch {
      // the line is lost; the message is still acked or retried
    }
  };
  if (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > 100) {
    throw new RangeError(
      `Cannot create queue handler as 'maxRetries' must be an integer in 0..100: current value is ${
        show(maxRetries)
      }${
        asText(
          maxRetries,
          "queues.cloudflare.maxRetries reads CLOUDFLARE_MAX_RETRIES",
        )
      }`,
    );
  }
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 6) {
    throw new RangeError(
      `Cannot create queue handler as 'concurrency' must be an integer in 1..6 (a Worker holds 6 connections at a time): current value is ${
        show(concurrency)
      }${asText(concurrency)}`,
    );
  }
  const { maxDeliveries } = relayer.policy;
  if (maxRetries + 1 < maxDeliveries) {
    const given = options.maxRetries === undefined
      ? `${maxRetries}, Cloudflare's default when max_retries is not set`
      : String(maxRetries);
    throw new RangeError(
      `Cannot create queue handler as 'maxRetries' must be at least maxDeliveries - 1 = ${
        maxDeliveries - 1
      }, or the queue stops before the policy does: current value is ${given}. Set the consumer's max_retries in wrangler.toml to at least ${
        maxDeliveries - 1
      } and pass the same number as maxRetries (the example Worker reads it from CLOUDFLARE_MAX_RETRIES)`,
    );
  }
  // "Without a DLQ configured, messages that reach the retry limit are
  // deleted permanently" (Cloudflare's dead-letter queues page): the last
  // delivery's retry would be the job's silent end.
  if (typeof deadLetterQueue !== "string" || deadLetterQueue === "") {
    throw new TypeError(
      `Cannot create queue handler as 'deadLetterQueue' is ${
        deadLetterQueue === undefined
          ? "missing"
          : `not a queue's name: current value is ${show(deadLetterQueue)}`
      }: without a dead-letter queue Cloudflare deletes a message at its retry limit, and a job whose last delivery was busy or met the store down leaves its intent with no job and no dead letter. Set the consumer's dead_letter_queue in wrangler.toml, consume that queue with this handler (or another), and name it here`,
    );
  }
  checkDeadLetterRetries(options, relayer.policy.baseMs);
  const limits = checkRetentions(options, maxRetries, deadLetterQueue);
  // Cloudflare does not say whether a message moved to the dead-letter
  // queue keeps its attempts (Miniflare's starts them again at 1), and no
  // count the handler sees is the same either way: kept, a wait doubled
  // from them asks up to 12 h at the first delivery there. So each wait
  // there ends within what the retention given leaves a message as old
  // as the jobs queue can make it. And each lasts at least the wait that
  // retention's floor counts there: started again at 1, waits doubled
  // from the base would retry a give-up several times within an outage
  // as long, and the next retry would come after the retention ended.
  // The message's own age (`message.timestamp`) bounds nothing here:
  // Cloudflare does not say what it is after the move, nor that the
  // retention there counts from it (docs/queues.md, Cloudflare Queues).
  // Not given, that retention is counted as 24 h, as the check counts it
  // (the Workers Free plan's, fixed): a wait of 12 h for a message the
  // jobs queue's waits made 13 h old came after it ended. The shortest
  // wait is the given retention's floor only: not given, a paid plan's
  // may be 14 days, and those waits are raised for no retention.
  const deadLetterMaxWaitSeconds = cloudflareDeadLetterMaxWaitSeconds(
    limits,
    options.deadLetterMessageRetentionMs ?? CLOUDFLARE_FREE_RETENTION_MS,
  );
  const deadLetterMinWaitSeconds = cloudflareDeadLetterMinWaitSeconds(
    limits,
    options.deadLetterMessageRetentionMs,
  );

  // The handler cannot read wrangler's max_retries: a message on the jobs
  // queue past `maxRetries + 1` deliveries proves the consumer's is
  // higher, and a give-up then records too few deliveries, and the
  // retention check counted too few retries. Said once, not per message.
  let toldRetriesHigher = false;

  async function handle(
    queue: string,
    message: QueueMessage,
    deadLetter: boolean,
  ): Promise<void> {
    if (
      !deadLetter && !toldRetriesHigher &&
      Number.isSafeInteger(message.attempts) &&
      message.attempts > maxRetries + 1
    ) {
      toldRetriesHigher = true;
      log(
        `worker  message ${message.id} on ${queue} is its delivery ${message.attempts}, past the ${
          maxRetries + 1
        } maxRetries ${maxRetries} allows: the consumer's max_retries in wrangler.toml is higher than maxRetries (CLOUDFLARE_MAX_RETRIES), so a give-up records ${
          maxRetries + 1
        } deliveries where the queue made more, and the retention check counted too few retries. Set them to the same number`,
      );
    }
    let job: Job;
    try {
      job = jobOf(message.body);
    } catch (error) {
      // Retrying a malformed message cannot help, but acking it unseen
      // could strand the intent it was for: keep it as a dead letter first.
      const detail = describeError(error);
      const body = readable(message.body);
      let kept: string;
      try {
        kept = await relayer.keepUnreadable({
          queue: "cloudflare",
          id: message.id,
          raw: body.raw,
          seen: { intentId: body.intentId, attempt: message.attempts },
          detail,
        });
      } catch (failure) {
        log(
          `worker  message ${message.id} on ${queue} is unreadable (${detail}), and its dead letter failed: ${
            describeError(failure)
          }`,
        );
        retryAfterOutage(message, deadLetter);
        return;
      }
      log(
        `worker  message ${message.id} on ${queue} acked unread and kept as ${kept}: ${detail}`,
      );
      message.ack();
      return;
    }
    let outcome: Outcome;
    try {
      outcome = deadLetter
        ? await relayer.giveUp(job, {
          deliveries: maxRetries + 1,
          queue: { queue: "cloudflare", dlqId: message.id },
        })
        // The dead-letter queue keeps the message's id (Miniflare's does:
        // deno task worker-check; Cloudflare does not document it): its
        // give-up marks ride in the write ahead of a send, so a late copy
        // sends nothing.
        : await relayer.deliver(job, message.attempts, {
          message: { queue: "cloudflare", dlqId: message.id },
        });
    } catch (error) {
      log(
        `worker  ${jobIdOf(job).padEnd(16)} failed unexpectedly: ${
          describeError(error)
        }`,
      );
      retryAfterOutage(message, deadLetter);
      return;
    }
    // Outside the try: if ack() or retry() itself throws, that is not the
    // store failing, and the message must not be retried on top of it
    // (the batch fails at the end instead). Settled before the log line,
    // which cannot then leave it unsettled.
    if (outcome.action === "retry") {
      // A give-up busy on the dead-letter queue waits at least as one that
      // met the store down: busy may be another database session's lock or
      // its statements cancelled, as long as an outage, and at the
      // policy's pace the queue's retries ran out within hours, and
      // Cloudflare deleted the message with its intent unresolved.
      const delaySeconds = delaySecondsOf(outcome.delayMs);
      message.retry({
        delaySeconds: deadLetter
          ? Math.max(delaySeconds, outageSeconds(message, deadLetter))
          : delaySeconds,
      });
    } else {
      message.ack();
    }
    log(`worker  ${formatOutcome(job, outcome)}`);
  }

  /**
   * Retries a message whose handling failed unexpectedly (the store was
   * down). A bare retry() comes back at once, and a fixed delay would use
   * up the message's retries within minutes of an outage, so the wait
   * doubles with the message's own attempts from the policy's base. On the
   * jobs queue up to the policy's cap: running out there moves the message
   * to the dead-letter queue, where it is handled again. On the
   * dead-letter queue up to 12 h: running out there deletes the message
   * and strands its intent, and 100 retries doubling to 12 h outlast the
   * queue's longest retention (14 days). There no wait passes what the
   * queue's retention (given, else 24 h) leaves a message as old as the
   * jobs queue can make it, whether its attempts started again at 1 there
   * or not, and, given, none is shorter than the wait that retention's
   * floor counts after a give-up's arrival (so one retry comes after an
   * outage as long, before the retention ends).
   */
  function retryAfterOutage(message: QueueMessage, deadLetter: boolean): void {
    message.retry({ delaySeconds: outageSeconds(message, deadLetter) });
  }

  /** The wait {@linkcode retryAfterOutage} asks for, in seconds. */
  function outageSeconds(message: QueueMessage, deadLetter: boolean): number {
    if (!deadLetter) {
      return delaySecondsOf(
        outageDelayMs(
          message.attempts,
          relayer.policy.baseMs,
          relayer.policy.capMs,
        ),
      );
    }
    return Math.min(
      deadLetterMaxWaitSeconds,
      Math.max(
        deadLetterMinWaitSeconds,
        delaySecondsOf(
          outageDelayMs(
            message.attempts,
            relayer.policy.baseMs,
            MAX_DELAY_SECONDS * 1000,
          ),
        ),
      ),
    );
  }

  return async function queue(batch: QueueBatch): Promise<void> {
    const unsettled: string[] = [];
    // `concurrency` lanes, each taking the next message when it is done.
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < batch.messages.length) {
        const message = batch.messages[next++]!;
        try {
          await handle(
            batch.queue,
            message,
            batch.queue === deadLetterQueue,
          );
        } catch (error) {
          // ack() or retry() itself failed (workerd's never do): the rest
          // of the batch goes on, and the batch fails at the end.
          unsettled.push(message.id);
          log(
            `worker  message ${message.id} on ${batch.queue} failed: ${
              describeError(error)
            }`,
          );
        }
      }
    };
    await Promise.all(
      Array.from(
        { length: Math.min(concurrency, batch.messages.length) },
        lane,
      ),
    );
    if (unsettled.length > 0) {
      // A message neither acked nor retried when the handler returns counts
      // as acked: its job would be lost. Failing the batch makes
      // Cloudflare deliver again every message not acked.
      throw new Error(
        `Cannot finish the batch of ${batch.queue} as ack() or retry() failed for ${unsettled.length} message(s) (${
          unsettled.slice(0, 5).join(", ")
        }): Cloudflare delivers again every message not acked`,
      );
    }
  };
}

/** Whether `value` has what the handler uses of a {@linkcode Relayer}. */
function isRelayer(value: unknown): value is Relayer {
  if (typeof value !== "object" || value === null) return false;
  const { deliver, giveUp, keepUnreadable, policy } = value as Relayer;
  return typeof deliver === "function" && typeof giveUp === "function" &&
    typeof keepUnreadable === "function" && typeof policy === "object" &&
    policy !== null;
}
