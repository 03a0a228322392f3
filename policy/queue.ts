/**
 * The queue's own rules: how many deliveries it makes before it gives up,
 * and whose delays separate them.
 *
 * @module
 */

import { backoff } from "./backoff.ts";
import { assertDelivery, assertMs, show } from "./_validate.ts";
import { retentionFits } from "./_retention.ts";
import { definePolicy, type Policy } from "./policy.ts";

/**
 * The limits and delays of the queue that delivers a job (DESIGN §14). A
 * job's life is in the queue's hands: the queue may stop delivering before
 * the policy poisons the job, and it may not use our delays at all.
 *
 * - `qstash`: Upstash QStash. It makes `retries + 1` deliveries (the
 *   `Upstash-Retries` a publish carries, at most the plan's cap), honours
 *   our `Retry-After` up to 1 day, then calls the failure callback, which
 *   it retries as many times on its own backoff (12 s, 2 min 28 s, …);
 *   `checkQueue` wants those retries to outlast a give-up answered busy
 *   behind another's lease (`leaseMs` + 2 × `clockSkewMs`).
 * - `pubsub`: a Google Pub/Sub push subscription. It ignores our delays and
 *   backs off between `minBackoffMs` and `maxBackoffMs` (each 0 … 10 min);
 *   with a dead-letter policy it stops after `maxDeliveryAttempts` (5–100),
 *   without one it redelivers until retention ends. Retention ends a
 *   message with no dead letter at all: given `retentionMs`, the deliveries
 *   that surely fit in it bound the job too, each push taking up to
 *   `ackDeadlineMs` and each gap up to `maxBackoffMs`; and `checkQueue`
 *   wants it to hold, after `maxDeliveries` such pushes, a busy delivery's
 *   wait (`leaseMs` + 2 × `clockSkewMs`) and one more push, unless a
 *   dead-letter policy's last attempt surely ends within it.
 * - `cloudflare`: Cloudflare Queues. It makes `maxRetries + 1` deliveries,
 *   honours our `retry({ delaySeconds })` (the handler asks for at most
 *   12 h; Cloudflare takes up to 24 h), then moves the message
 *   to the dead-letter queue.
 * - `kv`: the local Deno KV queue. We re-enqueue with our delay; no limit.
 *
 * @example Describe each queue
 * ```ts
 * import { queueLimit, type QueueLimits } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const queues: QueueLimits[] = [
 *   { kind: "qstash", retries: 5 },
 *   { kind: "pubsub", maxDeliveryAttempts: 20, minBackoffMs: 10_000, maxBackoffMs: 600_000 },
 *   { kind: "cloudflare", maxRetries: 3 },
 *   { kind: "kv" },
 * ];
 * assert.deepEqual(queues.map(queueLimit), [6, 20, 4, Infinity]);
 * ```
 */
export type QueueLimits =
  | {
    /** Upstash QStash. */
    readonly kind: "qstash";
    /** `Upstash-Retries`: redeliveries after the first (0–100, at most the plan's cap). */
    readonly retries: number;
    /**
     * How long a delivery may hold the job's intent, in milliseconds (the
     * relayer's `leaseMs`, the service's `LEASE`): a give-up answered busy
     * behind another's lease is retried by QStash on its own backoff, as
     * many times as the message, and `checkQueue` wants those retries to
     * outlast the lease. Absent, 30000 (the relayer's default).
     */
    readonly leaseMs?: number;
    /**
     * How far apart the instances' clocks may be, in milliseconds (the
     * relayer's `clockSkewMs`, the service's `CLOCK_SKEW`): a busy
     * give-up waits `leaseMs` + 2 × `clockSkewMs` at most, and
     * `checkQueue` wants the rescue window to outlast `stuckAfterMs` and
     * it together. Absent, 5000 (the relayer's default).
     */
    readonly clockSkewMs?: number;
  }
  | {
    /** A Google Pub/Sub push subscription. */
    readonly kind: "pubsub";
    /** The dead-letter policy's `max_delivery_attempts` (5–100); absent, no dead-letter policy. */
    readonly maxDeliveryAttempts?: number;
    /** The retry policy's `minimum_backoff`, in milliseconds (0 … 600000; 0 with no retry policy). */
    readonly minBackoffMs: number;
    /** The retry policy's `maximum_backoff`, in milliseconds (`minBackoffMs` … 600000). */
    readonly maxBackoffMs: number;
    /**
     * The subscription's `message_retention_duration`, in milliseconds
     * (600000, 10 min, … 2678400000, 31 days); absent, not checked
     * (Pub/Sub's default is 7 days).
     */
    readonly retentionMs?: number;
    /**
     * The longest one push takes before Pub/Sub counts it failed, in
     * milliseconds (10000 … 600000): the subscription's ack deadline, or
     * less where the endpoint always answers sooner. Counted with each gap
     * against `retentionMs`; absent, 10000 (Pub/Sub's default ack deadline,
     * and its least).
     */
    readonly ackDeadlineMs?: number;
    /**
     * How long a delivery may hold the job's intent, in milliseconds (the
     * relayer's `leaseMs`, the service's `LEASE`): a delivery at and past
     * the last answers busy while another's lease stands, and only a push
     * after it resolves the intent, so `checkQueue` wants a
     * `retentionMs` that also holds this wait and one more push. Read only
     * with `retentionMs`; absent, 30000 (the relayer's default).
     */
    readonly leaseMs?: number;
    /**
     * How far apart the instances' clocks may be, in milliseconds (the
     * relayer's `clockSkewMs`, the service's `CLOCK_SKEW`): `checkQueue`
     * wants the rescue window to outlast `stuckAfterMs` and it together,
     * and, with `retentionMs`, counts a busy delivery's wait as `leaseMs` +
     * 2 × `clockSkewMs` at most. Absent, 5000 (the relayer's default).
     */
    readonly clockSkewMs?: number;
  }
  | {
    /** Cloudflare Queues. */
    readonly kind: "cloudflare";
    /** The consumer's `max_retries` (0–100; Cloudflare's default is 3). */
    readonly maxRetries: number;
    /**
     * How far apart the instances' clocks may be, in milliseconds (the
     * relayer's `clockSkewMs`, the service's `CLOCK_SKEW`): `checkQueue`
     * wants the rescue window to outlast `stuckAfterMs` and it together.
     * Absent, 5000 (the relayer's default).
     */
    readonly clockSkewMs?: number;
  }
  | {
    /** The local Deno KV queue: we re-enqueue, so our delays, no limit. */
    readonly kind: "kv";
    /**
     * How far apart the instances' clocks may be, in milliseconds (the
     * relayer's `clockSkewMs`, the service's `CLOCK_SKEW`): `checkQueue`
     * wants the rescue window to outlast `stuckAfterMs` and it together.
     * Absent, 5000 (the relayer's default).
     */
    readonly clockSkewMs?: number;
  };

/** QStash honours `Retry-After` up to 1 day. */
const QSTASH_MAX_DELAY_MS = 86_400_000;
/**
 * The longest `delaySeconds` the queue handler asks Cloudflare Queues for:
 * 12 h, Cloudflare's limit until February 2026 (24 h since), so one value
 * holds on either.
 */
const CLOUDFLARE_MAX_DELAY_MS = 43_200_000;
/** Pub/Sub's backoff bounds are each at most 600 s. */
const PUBSUB_MAX_BACKOFF_MS = 600_000;
/** Pub/Sub keeps a message from 10 minutes to 31 days. */
const PUBSUB_MIN_RETENTION_MS = 600_000;
const PUBSUB_MAX_RETENTION_MS = 2_678_400_000;

function assertCount(
  name: string,
  value: unknown,
  min: number,
  max: number,
  minName?: string,
) {
  if (
    !Number.isInteger(value) || (value as number) < min ||
    (value as number) > max
  ) {
    throw new RangeError(
      `Cannot read queue limits as '${name}' must be an integer from ${
        minName === undefined ? min : `${minName} (${min})`
      } to ${max}: current value is ${show(value)}`,
    );
  }
}

function assertQueue(queue: QueueLimits): void {
  switch (queue?.kind) {
    case "qstash":
      assertCount("retries", queue.retries, 0, 100);
      for (const name of ["leaseMs", "clockSkewMs"] as const) {
        if (queue[name] !== undefined) {
          assertMs("read queue limits", name, queue[name], 0);
        }
      }
      return;
    case "cloudflare":
      assertCount("maxRetries", queue.maxRetries, 0, 100);
      if (queue.clockSkewMs !== undefined) {
        assertMs("read queue limits", "clockSkewMs", queue.clockSkewMs, 0);
      }
      return;
    case "kv":
      if (queue.clockSkewMs !== undefined) {
        assertMs("read queue limits", "clockSkewMs", queue.clockSkewMs, 0);
      }
      return;
    case "pubsub": {
      if (queue.maxDeliveryAttempts !== undefined) {
        assertCount("maxDeliveryAttempts", queue.maxDeliveryAttempts, 5, 100);
      }
      assertCount("minBackoffMs", queue.minBackoffMs, 0, PUBSUB_MAX_BACKOFF_MS);
      assertCount(
        "maxBackoffMs",
        queue.maxBackoffMs,
        queue.minBackoffMs,
        PUBSUB_MAX_BACKOFF_MS,
        "minBackoffMs",
      );
      if (queue.ackDeadlineMs !== undefined) {
        assertCount(
          "ackDeadlineMs",
          queue.ackDeadlineMs,
          10_000,
          PUBSUB_MAX_BACKOFF_MS,
        );
      }
      for (const name of ["leaseMs", "clockSkewMs"] as const) {
        if (queue[name] !== undefined) {
          assertMs("read queue limits", name, queue[name], 0);
        }
      }
      if (queue.retentionMs !== undefined) {
        assertCount(
          "retentionMs",
          queue.retentionMs,
          PUBSUB_MIN_RETENTION_MS,
          PUBSUB_MAX_RETENTION_MS,
        );
      }
      return;
    }
    default:
      // From JavaScript, a kind alone (`queueLimit("qstash")`) was said to
      // lack 'kind', the one thing it held.
      if (typeof queue !== "object" || queue === null) {
        throw new TypeError(
          `Cannot read queue limits as the queue must be an object such as { kind: "qstash", retries: 3 }: current value is ${
            show(queue)
          }`,
        );
      }
      throw new TypeError(
        `Cannot read queue limits as 'kind' must be "qstash", "pubsub", "cloudflare" or "kv": current value is ${
          show((queue as { kind?: unknown } | undefined)?.kind)
        }`,
      );
  }
}

/**
 * How many deliveries the queue makes before it gives up on a job, counting
 * the first: `retries + 1` on QStash, `maxDeliveryAttempts` on Pub/Sub with
 * a dead-letter policy, `maxRetries + 1` on Cloudflare Queues, and
 * `Infinity` for the local KV queue and Pub/Sub without a dead-letter
 * policy (there the policy alone ends the job). On Pub/Sub with a
 * `retentionMs`, no more than surely fit in it (see {@linkcode QueueLimits}).
 *
 * @param queue The queue's limits.
 * @returns The number of deliveries, or `Infinity`.
 * @throws {RangeError} If a limit is out of its documented range.
 * @throws {TypeError} If `kind` is not a known queue.
 *
 * @example QStash's pay-as-you-go cap stops a job at delivery 6
 * ```ts
 * import { queueLimit } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(queueLimit({ kind: "qstash", retries: 5 }), 6);
 * assert.equal(queueLimit({ kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000 }), Infinity);
 * // An hour's retention surely holds 6 deliveries at most 10 minutes apart,
 * // and 5 when each push may take up to 2 minutes more.
 * const hour = { kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000, retentionMs: 3_600_000 } as const;
 * assert.equal(queueLimit(hour), 6);
 * assert.equal(queueLimit({ ...hour, ackDeadlineMs: 120_000 }), 5);
 * assert.throws(() => queueLimit({ kind: "pubsub", maxDeliveryAttempts: 3, minBackoffMs: 0, maxBackoffMs: 0 }), RangeError);
 * ```
 */
export function queueLimit(queue: QueueLimits): number {
  assertQueue(queue);
  switch (queue.kind) {
    case "qstash":
      return queue.retries + 1;
    case "pubsub":
      return Math.min(
        queue.maxDeliveryAttempts ?? Infinity,
        retentionFits(queue),
      );
    case "cloudflare":
      return queue.maxRetries + 1;
    case "kv":
      return Infinity;
  }
}

/**
 * The time between delivery `delivery` and the next, as the queue really
 * applies it: `minMs` is what is guaranteed, `maxMs` the longest planned.
 *
 * - QStash, Cloudflare Queues, the KV queue: our delay (the policy's
 *   backoff with its jitter), capped by what the queue accepts (1 day on
 *   QStash, 12 h on Cloudflare).
 * - Pub/Sub: its own backoff, never ours. What we relied on, from Google's
 *   documentation of the subscription's `RetryPolicy` (the same text in
 *   every client reference, e.g.
 *   https://cloud.google.com/python/docs/reference/pubsub/latest/google.cloud.pubsub_v1.types.RetryPolicy):
 *   "Retry delay will be exponential based on provided minimum and maximum
 *   backoffs", "Retry Policy is implemented on a best effort basis. At
 *   times, the delay between consecutive deliveries may not match the
 *   configuration. That is, delay can be more or less than configured
 *   backoff", and each bound is "between 0 and 600 seconds" (defaults 10 s
 *   and 600 s); no growth factor is given. And from
 *   https://cloud.google.com/pubsub/docs/handling-failures: "By default,
 *   subscriptions use immediate redelivery". So the only lower bound Google
 *   states is `minimum_backoff` per gap, with no growth (`0` with no retry
 *   policy); best effort may even go below it, which no start-up check can
 *   see. The most it plans is `maximum_backoff`.
 *
 * @param policy The policy whose delays the queue may apply.
 * @param queue The queue's limits.
 * @param delivery The delivery that failed, 1-based.
 * @returns The shortest and longest gap, in milliseconds.
 * @throws {RangeError} If `delivery` is not an integer >= 1, or a number in
 * the policy or a limit is out of range.
 * @throws {TypeError} If the policy is not a valid policy (see
 * {@linkcode definePolicy}) or `kind` is not a known queue.
 *
 * @example Pub/Sub ignores our backoff
 * ```ts
 * import { DEFAULT_POLICY, queueGap } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const pubsub = { kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000 } as const;
 * assert.deepEqual(queueGap(DEFAULT_POLICY, pubsub, 1), { minMs: 10_000, maxMs: 600_000 });
 * assert.deepEqual(queueGap(DEFAULT_POLICY, { kind: "kv" }, 1), { minMs: 2500, maxMs: 5000 });
 * ```
 */
export function queueGap(
  policy: Policy,
  queue: QueueLimits,
  delivery: number,
): { minMs: number; maxMs: number } {
  // What decide would use, or its error: read as it is, a partial policy's
  // missing jitter counted as none, and overstated the guaranteed gap.
  policy = definePolicy(policy);
  assertQueue(queue);
  assertDelivery("compute queue gap", delivery);
  if (queue.kind === "pubsub") {
    return { minMs: queue.minBackoffMs, maxMs: queue.maxBackoffMs };
  }
  const capMs = queueDelayCap(queue);
  const delayMs = backoff(delivery, policy);
  return {
    minMs: Math.min(jitterFloor(delayMs, policy), capMs),
    maxMs: Math.min(delayMs, capMs),
  };
}

/** The longest delay a queue that applies ours accepts. */
function queueDelayCap(queue: QueueLimits): number {
  return queue.kind === "qstash"
    ? QSTASH_MAX_DELAY_MS
    : queue.kind === "cloudflare"
    ? CLOUDFLARE_MAX_DELAY_MS
    : Infinity;
}

/** The jitter's lower bound for an un-jittered delay. */
function jitterFloor(delayMs: number, policy: Policy): number {
  return policy.jitter === "equal"
    ? Math.floor(delayMs / 2)
    : policy.jitter === "full"
    ? 0
    : delayMs;
}
