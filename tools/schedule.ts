/**
 * The policy explainer: when each delivery of a job can come, at the
 * earliest and at the latest, and whether the policy keeps a job alive long
 * enough for a stuck payment to be rescued.
 *
 * ```sh
 * deno task schedule [--max-deliveries 10 --base 5s --cap 2m --jitter equal --stuck-after 5m] [--clock-skew 5s] [--svg docs/schedule.svg]
 * deno task schedule --queue qstash --retries 5 [--lease 30s]
 * deno task schedule --queue pubsub --min-backoff 10s --max-backoff 10m [--max-delivery-attempts 20]
 * deno task schedule --queue pubsub --min-backoff 40s --message-retention 168h [--sender-timeout 10s | --ack-deadline 1m] [--lease 30s]
 * deno task schedule --queue cloudflare --max-retries 3 --dlq-max-retries 100 [--message-retention 96h] [--dlq-message-retention 336h] [--delivery-delay 1m] [--lease 30s]
 * ```
 *
 * prints one row per delivery (the delay after it, the time of the next
 * delivery since the first) and a verdict line; it exits 1 when the
 * guaranteed rescue window is shorter than `--stuck-after` and
 * `--clock-skew` together (the service's `STUCK_AFTER` and `CLOCK_SKEW`,
 * checked as `loadConfig` checks them), and 2 on a bad flag. With
 * `--queue`, the schedule is the one that queue really gives: its own
 * limit, and its own delays where it ignores ours (Pub/Sub); it
 * exits 1 as well when the queue gives up before the policy's last
 * delivery, or (Pub/Sub, `--message-retention`, else Pub/Sub's default of
 * 7 days where there is no dead-letter policy) when a message may expire
 * before its job is resolved, as `checkQueue` and the service's start
 * check count it, or (Cloudflare, `--message-retention` and
 * `--dlq-message-retention`, each 24 h, the Workers Free plan's, unless
 * given, and `--dlq-max-retries`, Cloudflare's 3 unless given) when
 * `createQueueHandler` would refuse the retention or those retries,
 * printing its refusal. {@linkcode schedule} is the pure computation behind it.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { plainMsRefusal } from "../policy/_plain_ms.ts";
import { deliveriesText } from "../policy/_count.ts";
import {
  qstashCallbackShort,
  qstashCallbackSpanMs,
  qstashDefaultRetries,
  qstashRetriesNeed,
} from "../policy/_qstash_callback.ts";
import {
  busyWaitMs,
  DEFAULT_QUEUE_ACK_DEADLINE_MS,
  DEFAULT_QUEUE_CLOCK_SKEW_MS,
  DEFAULT_QUEUE_LEASE_MS,
  PUBSUB_DEFAULT_RETENTION_MS,
  retentionEnoughMs,
  retentionFits,
  retentionNeedMs,
  retentionShort,
} from "../policy/_retention.ts";
import {
  backoff,
  definePolicy,
  describePolicy,
  formatDuration,
  type Jitter,
  parseDuration,
  type Policy,
  queueGap,
  queueLimit,
  type QueueLimits,
  rescueWindow,
} from "../mod.ts";
import * as Plot from "@observablehq/plot";
import {
  clockSkew,
  cloudflareDeliveryDelay,
  cloudflareRetention,
  ConfigError,
  DEFAULT_CLOCK_SKEW_MS,
  kvCapRefusal,
  lease,
  MAX_CLOCK_SKEW_MS,
  PUBSUB_BACKOFF_LIMIT_MS,
  pubsubAckDeadline,
  pubsubDeliveriesNeed,
  pubsubMinBackoffNeedMs,
  pubsubRetention,
  rescueNeedMs,
  senderTimeout,
  whyNotDuration,
  windowRaisers,
} from "../webhook/config.ts";
import { chartSvg } from "../support/chart.ts";
import {
  CLOUDFLARE_FREE_RETENTION_MS,
  cloudflareDeadLetterAgeSeconds,
  cloudflareDeadLetterRetriesRefusal,
  cloudflareJobsSpanSeconds,
  type CloudflareRetentionLimits,
  cloudflareRetentionRefusal,
} from "../policy/_cloudflare_retention.ts";

// Re-exported so the documentation of `schedule` and its results links it.
export type { Jitter, Policy, QueueLimits } from "../mod.ts";

/** What happens after one delivery fails. */
export type ScheduleRow =
  | {
    /** The delivery, 1-based, counting the first try. */
    readonly delivery: number;
    /** Another delivery follows. */
    readonly action: "retry";
    /** The shortest delay after this delivery: the jitter's lower bound. */
    readonly minDelayMs: number;
    /** The longest delay after this delivery: the un-jittered backoff. */
    readonly maxDelayMs: number;
    /** The earliest the next delivery can come, since the first (the sum of the shortest delays so far). */
    readonly guaranteedMs: number;
    /** The latest the next delivery can come, since the first (the sum of the longest delays so far). */
    readonly worstMs: number;
  }
  | {
    /** The delivery, 1-based: the last one, `maxDeliveries`. */
    readonly delivery: number;
    /** No delivery follows: the job is poisoned. */
    readonly action: "poison";
  }
  | {
    /** The delivery, 1-based: the queue's last, before `maxDeliveries`. */
    readonly delivery: number;
    /** No delivery follows: the queue gives up (its give-up route resolves the intent). */
    readonly action: "give_up";
  }
  | {
    /**
     * The delivery, 1-based: the last that surely comes within a Pub/Sub
     * message retention, before `maxDeliveries`.
     */
    readonly delivery: number;
    /**
     * No delivery surely follows: the message may expire, and Pub/Sub
     * drops it with no dead letter and no give-up route (its intent is
     * stranded).
     */
    readonly action: "expire";
  };

/** A policy's delivery schedule and its verdict. */
export interface Schedule {
  /** The checked policy. */
  readonly policy: Policy;
  /**
   * How far apart the instances' clocks may be (the service's
   * `CLOCK_SKEW`): the window must outlast `stuckAfterMs` and it together.
   */
  readonly clockSkewMs: number;
  /** The queue the schedule is laid out for; absent, the policy's own delays with no limit. */
  readonly queue?: QueueLimits;
  /**
   * One row per delivery, 1 … `maxDeliveries` (or the queue's limit, if
   * lower); only the last is `"poison"` (or `"give_up"`, or `"expire"`
   * where a Pub/Sub message retention is the limit).
   */
  readonly rows: readonly ScheduleRow[];
  /**
   * Whether the queue gives up before the policy's last delivery (or,
   * Pub/Sub, may drop the message then, its retention over; or, QStash,
   * its retries of a failure callback may all come while a give-up is
   * answered busy behind another's lease).
   */
  readonly stopsEarly: boolean;
  /**
   * The Pub/Sub message retention the job needs, which the queue's
   * `retentionMs` must exceed, when it does not (and no dead-letter policy
   * gives up first): `maxDeliveries × (ackDeadlineMs + maxBackoffMs) +
   * leaseMs + 2 × clockSkewMs`, as `checkQueue` and the service count it;
   * or, with a dead-letter policy of at least `maxDeliveries` attempts
   * whose end comes first, that end (`(maxDeliveryAttempts − 1) ×
   * (ackDeadlineMs + maxBackoffMs) + ackDeadlineMs`), past which it gives
   * up first. A message may then expire before the push that resolves its
   * job, and is dropped with no dead letter: the service refuses to start.
   */
  readonly retentionNeedMs?: number;
  /**
   * Whether the Pub/Sub `retentionMs` counted is Pub/Sub's default, 7 days,
   * because none was given (`--message-retention` unset, no dead-letter
   * policy): the service counts its `PUBSUB_MESSAGE_RETENTION` unset so.
   */
  readonly retentionDefault?: true;
  /** The guaranteed time from the first delivery to the last: `rescueWindow(policy, queue)`. */
  readonly guaranteedMs: number;
  /** The longest time from the first delivery to the last (every delay at its maximum). */
  readonly worstMs: number;
  /**
   * Whether the guaranteed window lasts at least `stuckAfterMs` and
   * `clockSkewMs` together, so a settling payment is rescued before its
   * job can be poisoned, whichever instance's clock reads it as stuck.
   */
  readonly outlasts: boolean;
  /**
   * The policy's own guaranteed window (`rescueWindow(policy)`), when a
   * queue is given and that window is shorter than `stuckAfterMs` and
   * `clockSkewMs` together. The service refuses such a policy at start
   * whatever the queue does: its generic route and its local queue wait
   * the policy's own delays.
   */
  readonly ownTooShortMs?: number;
}

/** The most deliveries {@linkcode schedule} lays out: one row each. */
export const MAX_SCHEDULE_DELIVERIES = 1000;

/** The verdict's words when the window outlasts `stuckAfterMs` (and the clock skew). */
export const OK_TEXT = "OK, the rescue runs before the job can be poisoned";

/** The verdict's words when it does not. */
export const TOO_SHORT_TEXT =
  "TOO SHORT, a settling payment can be poisoned before its rescue";

/** The jitter's lower bound for an un-jittered delay, as `jitter` draws it. */
function lowerBound(delayMs: number, strategy: Jitter): number {
  return strategy === "equal"
    ? Math.floor(delayMs / 2)
    : strategy === "full"
    ? 0
    : delayMs;
}

/**
 * Lays out a policy's schedule: for each delivery, the shortest and longest
 * delay after it and when the next delivery comes since the first, at the
 * earliest (every delay at the jitter's lower bound) and at the latest
 * (every delay un-jittered). The last delivery has no delay: it is
 * poisoned. The earliest time of the last delivery is the policy's rescue
 * window, which must outlast `stuckAfterMs` and the clock skew together,
 * as the service checks it (`rescueNeedMs`).
 *
 * With a queue, the rows are the ones that queue really gives: at most its
 * own limit of deliveries (the last one `"give_up"` when it stops before
 * the policy), each gap as the queue applies it (`queueGap`: our delays
 * capped at 1 day on QStash and 12 h on Cloudflare, Pub/Sub's own backoff
 * between its bounds). On Pub/Sub with a `retentionMs`, the rows stop
 * (`"expire"`) after the deliveries that surely come within it, and
 * `retentionNeedMs` says what it needs where it is too short, as
 * `checkQueue` counts it.
 *
 * @param policy The policy, or the fields that differ from the default.
 * @param queue The queue that delivers the job; absent, the policy's own
 * delays with no limit.
 * @param options `clockSkewMs`: how far apart the instances' clocks may be,
 * the service's `CLOCK_SKEW` (its default, 5 s, when absent; 0 for one
 * clock; at most 10 min, as the service takes it). `retentionDefault`:
 * whether a Pub/Sub queue's `retentionMs` is Pub/Sub's default, counted
 * because none was given, which the printed lines then say (false unless
 * given).
 * @returns The rows and the verdict.
 * @throws {RangeError} If the policy, a queue limit or `clockSkewMs` is
 * invalid, or `maxDeliveries` is above {@linkcode MAX_SCHEDULE_DELIVERIES}
 * (one row each).
 * @throws {TypeError} If `jitter` is not `"equal"`, `"full"` or `"none"`.
 *
 * @example The default policy
 * ```ts
 * import { schedule } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const { rows, guaranteedMs, worstMs, outlasts } = schedule();
 * assert.deepEqual(rows[0], {
 *   delivery: 1,
 *   action: "retry",
 *   minDelayMs: 2500,
 *   maxDelayMs: 5000,
 *   guaranteedMs: 2500,
 *   worstMs: 5000,
 * });
 * assert.deepEqual(rows.at(-1), { delivery: 10, action: "poison" });
 * assert.deepEqual([guaranteedMs, worstMs, outlasts], [317_500, 635_000, true]);
 *
 * // QStash with 4 retries gives up at delivery 5.
 * const qstash = schedule({}, { kind: "qstash", retries: 4 });
 * assert.deepEqual(qstash.rows.at(-1), { delivery: 5, action: "give_up" });
 * assert.deepEqual([qstash.stopsEarly, qstash.guaranteedMs], [true, 37_500]);
 *
 * // A Pub/Sub retention of 1h44m50s cannot hold 10 pushes of up to
 * // 25 s, 10 min apart, and a busy delivery's wait (30 s + 2 × 5 s).
 * const pubsub = schedule({}, {
 *   kind: "pubsub", minBackoffMs: 40_000, maxBackoffMs: 600_000,
 *   retentionMs: 6_290_000, ackDeadlineMs: 25_000,
 * });
 * assert.deepEqual([pubsub.stopsEarly, pubsub.retentionNeedMs], [false, 6_290_000]);
 *
 * // 317.5 s outlasts 5 min and a 17.5 s clock skew, not one 1 ms more.
 * assert.equal(schedule({}, undefined, { clockSkewMs: 17_500 }).outlasts, true);
 * assert.equal(schedule({}, undefined, { clockSkewMs: 17_501 }).outlasts, false);
 * ```
 */
export function schedule(
  policy: Partial<Policy> = {},
  queue?: QueueLimits,
  options: {
    readonly clockSkewMs?: number;
    readonly retentionDefault?: boolean;
  } = {},
): Schedule {
  const checked = definePolicy(policy);
  if (checked.maxDeliveries > MAX_SCHEDULE_DELIVERIES) {
    throw new RangeError(
      `Cannot lay out schedule as 'maxDeliveries' must be at most ${MAX_SCHEDULE_DELIVERIES} (one row each): current value is ${checked.maxDeliveries}`,
    );
  }
  const { clockSkewMs = DEFAULT_CLOCK_SKEW_MS } = options;
  if (
    !Number.isSafeInteger(clockSkewMs) || clockSkewMs < 0 ||
    clockSkewMs > MAX_CLOCK_SKEW_MS
  ) {
    throw new RangeError(
      `Cannot lay out schedule as 'clockSkewMs' must be a whole number of milliseconds from 0 to ${MAX_CLOCK_SKEW_MS} (the service's CLOCK_SKEW): current value is ${clockSkewMs}`,
    );
  }
  const needMs = rescueNeedMs(checked.stuckAfterMs, clockSkewMs);
  const limit = queue === undefined ? Infinity : queueLimit(queue);
  // QStash retries a failure callback on its own backoff: its retries
  // must outlast a give-up busy behind another's lease (as checkQueue and
  // the service count it, with this clock skew where the queue gives none).
  const callbackShort = queue?.kind === "qstash" &&
    qstashCallbackShort({
      ...queue,
      clockSkewMs: queue.clockSkewMs ?? clockSkewMs,
    });
  const stopsEarly = limit < checked.maxDeliveries || callbackShort;
  const last = Math.min(checked.maxDeliveries, limit);
  const rows: ScheduleRow[] = [];
  let guaranteedMs = 0;
  let worstMs = 0;
  for (let delivery = 1; delivery < last; delivery++) {
    const { minMs: minDelayMs, maxMs: maxDelayMs } = queue === undefined
      ? {
        minMs: lowerBound(backoff(delivery, checked), checked.jitter),
        maxMs: backoff(delivery, checked),
      }
      : queueGap(checked, queue, delivery);
    guaranteedMs += minDelayMs;
    worstMs += maxDelayMs;
    rows.push({
      delivery,
      action: "retry",
      minDelayMs,
      maxDelayMs,
      guaranteedMs,
      worstMs,
    });
  }
  rows.push({
    delivery: last,
    action: limit >= checked.maxDeliveries
      ? "poison"
      : queue?.kind === "pubsub" && retentionLimits(queue)
      ? "expire"
      : "give_up",
  });
  const own = queue === undefined ? Infinity : rescueWindow(checked);
  const retentionShortNow = queue?.kind === "pubsub" &&
    retentionShort(queue, checked.maxDeliveries);
  return {
    policy: checked,
    clockSkewMs,
    ...(queue === undefined ? {} : { queue }),
    rows,
    stopsEarly,
    guaranteedMs,
    worstMs,
    outlasts: guaranteedMs >= needMs,
    ...(own < needMs ? { ownTooShortMs: own } : {}),
    ...(retentionShortNow
      ? { retentionNeedMs: retentionEnoughMs(queue, checked.maxDeliveries) }
      : {}),
    ...(options.retentionDefault === true && queue?.kind === "pubsub" &&
        queue.retentionMs !== undefined
      ? { retentionDefault: true }
      : {}),
  };
}

/**
 * Whether a Pub/Sub subscription's retention, not its dead-letter policy,
 * ends the deliveries that surely come.
 */
function retentionLimits(
  queue: Extract<QueueLimits, { kind: "pubsub" }>,
): boolean {
  return retentionFits(queue) < (queue.maxDeliveryAttempts ?? Infinity);
}

/** `"2.5s … 5s"`, or one duration when both ends agree. */
function range(lowMs: number, highMs: number): string {
  return lowMs === highMs
    ? formatDuration(lowMs)
    : `${formatDuration(lowMs)} … ${formatDuration(highMs)}`;
}

/**
 * `"stuck after 5m0s"`, and `" + clock skew 5s"` when the skew is not 0:
 * what the window must outlast.
 */
function stuckText(stuckAfterMs: number, clockSkewMs: number): string {
  return `stuck after ${formatDuration(stuckAfterMs)}${
    clockSkewMs > 0 ? ` + clock skew ${formatDuration(clockSkewMs)}` : ""
  }`;
}

/** The flag of each setting whose raise lengthens the rescue window. */
const RAISER_FLAGS = {
  MAX_DELIVERIES: "--max-deliveries",
  BASE: "--base",
  CAP: "--cap",
} as const;

/**
 * The verdict line: the guaranteed and worst window against `stuckAfterMs`
 * and the clock skew (named when it is not 0), then {@linkcode OK_TEXT} or
 * {@linkcode TOO_SHORT_TEXT}.
 *
 * @param s A schedule from {@linkcode schedule}.
 * @returns One line of text, without a newline.
 *
 * @example The default policy
 * ```ts
 * import { schedule, verdict } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   verdict(schedule()),
 *   "rescue window 5m17.5s guaranteed (10m35s worst) vs stuck after 5m0s + clock skew 5s: OK, the rescue runs before the job can be poisoned",
 * );
 * // One clock: the skew is 0, and not named.
 * assert.match(verdict(schedule({}, undefined, { clockSkewMs: 0 })), / vs stuck after 5m0s: OK,/);
 * ```
 */
export function verdict(s: Schedule): string {
  const expires = s.rows.at(-1)?.action === "expire";
  const early = !s.stopsEarly || expires
    ? ""
    : s.queue?.kind === "qstash" && s.rows.length >= s.policy.maxDeliveries
    ? `; ${
      callbackShortText({
        ...s.queue,
        clockSkewMs: s.queue.clockSkewMs ?? s.clockSkewMs,
      })
    }`
    : `; ${
      stopsEarlyText(s.rows.length, s.policy.maxDeliveries, s.queue?.kind)
    }`;
  // Pub/Sub guarantees only its minimum backoff per gap: say what it
  // needs, as the service's refusal does.
  const { stuckAfterMs } = s.policy;
  const neededMs = pubsubMinBackoffNeedMs(
    rescueNeedMs(stuckAfterMs, s.clockSkewMs),
    s.rows.length,
  );
  const needs = !s.outlasts && s.queue?.kind === "pubsub" &&
      Number.isFinite(neededMs)
    ? neededMs <= PUBSUB_BACKOFF_LIMIT_MS
      ? `; Pub/Sub needs a minimum backoff of at least ${
        formatDuration(neededMs)
      }`
      : `; no minimum backoff Pub/Sub allows (at most 10m) is enough: it needs --max-deliveries ${
        pubsubDeliveriesNeed(rescueNeedMs(stuckAfterMs, s.clockSkewMs))
      } or more with a 10m minimum backoff`
    : "";
  const own = s.ownTooShortMs === undefined
    ? ""
    : `; ${ownTooShortText(s.ownTooShortMs, stuckAfterMs, s.clockSkewMs)}`;
  const retention = s.queue?.kind === "pubsub" &&
      s.retentionNeedMs !== undefined
    ? `; ${s.retentionDefault ? `${DEFAULT_RETENTION_TEXT}: ` : ""}${
      expiresText(s.queue, s.policy.maxDeliveries, expires ? s.rows.length : 0)
    }`
    : "";
  // The policy's own fix, as the service's refusal says it, where neither
  // the queue's limit nor Pub/Sub's backoff is what to change.
  // Full jitter guarantees no wait at all: only the jitter, or a window
  // of nothing to outlast, holds.
  const fix = s.outlasts || early !== "" || needs !== ""
    ? ""
    : s.policy.jitter === "full"
    ? `; use --jitter equal or none, or lower --stuck-after to 0${
      s.clockSkewMs > 0 ? " and --clock-skew to 0" : ""
    }`
    : `; raise ${
      windowRaisers(s.policy, (setting) => RAISER_FLAGS[setting])
    }, or lower --stuck-after${s.clockSkewMs > 0 ? " or --clock-skew" : ""}`;
  return `rescue window ${formatDuration(s.guaranteedMs)} guaranteed (${
    formatDuration(s.worstMs)
  } worst) vs ${stuckText(stuckAfterMs, s.clockSkewMs)}: ${
    s.outlasts ? OK_TEXT : TOO_SHORT_TEXT
  }${early}${needs}${fix}${own}${retention}`;
}

/**
 * The verdict's words when a Pub/Sub message may expire before its job is
 * resolved (no dead-letter policy gives up first): after the deliveries
 * that surely fit in the retention, while a dead-letter policy's last
 * attempt is pushed, or while the last delivery is answered busy behind
 * another's lease; and the retention that is enough, with the sum behind
 * it, as `checkQueue` and the service count it (a dead-letter policy's
 * end, where it comes first and has at least `maxDeliveries` attempts).
 *
 * @param queue The subscription, with its `retentionMs` (and the
 * `ackDeadlineMs`, `leaseMs` and `clockSkewMs` counted against it).
 * @param maxDeliveries The policy's.
 * @param fits The deliveries that surely come within the retention, when
 * fewer than `maxDeliveries`; 0 when they all do.
 * @returns The words, without a newline.
 *
 * @example The default policy on Pub/Sub with an hour's retention
 * ```ts
 * import { expiresText } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const hour = {
 *   kind: "pubsub", minBackoffMs: 40_000, maxBackoffMs: 600_000,
 *   retentionMs: 3_600_000, ackDeadlineMs: 25_000, leaseMs: 30_000, clockSkewMs: 5_000,
 * } as const;
 * assert.equal(
 *   expiresText(hour, 10, 6),
 *   "MESSAGE MAY EXPIRE after 6 deliveries, before the policy's 10: Pub/Sub drops it with no dead letter, and its intent is stranded; it needs a message retention of more than 1h44m50s (10 × (25s + 10m0s) + 30s + 2 × 5s)",
 * );
 * ```
 */
export function expiresText(
  queue: Extract<QueueLimits, { kind: "pubsub" }>,
  maxDeliveries: number,
  fits: number,
): string {
  const leaseMs = queue.leaseMs ?? DEFAULT_QUEUE_LEASE_MS;
  const clockSkewMs = queue.clockSkewMs ?? DEFAULT_QUEUE_CLOCK_SKEW_MS;
  const attempts = queue.maxDeliveryAttempts;
  const when = fits > 0
    ? `after ${deliveriesText(fits)}, before the policy's ${maxDeliveries}`
    : attempts !== undefined && retentionFits(queue) >= attempts
    ? `while its last delivery attempt (max delivery attempts ${attempts}) is pushed, before Pub/Sub forwards it to the dead-letter topic`
    : `while the last delivery is answered busy behind another's lease (up to ${
      formatDuration(leaseMs + 2 * clockSkewMs)
    }), before the push that would resolve it`;
  const ackMs = queue.ackDeadlineMs ?? DEFAULT_QUEUE_ACK_DEADLINE_MS;
  const step = `(${formatDuration(ackMs)} + ${
    formatDuration(queue.maxBackoffMs)
  })`;
  const needMs = retentionNeedMs(queue, maxDeliveries);
  const enoughMs = retentionEnoughMs(queue, maxDeliveries);
  // Past a dead-letter policy's end, where it comes first, the last
  // attempt's push surely ended and Pub/Sub forwards the message.
  const sum = enoughMs < needMs
    ? `${attempts! - 1} × ${step} + ${formatDuration(ackMs)}`
    : `${maxDeliveries} × ${step} + ${formatDuration(leaseMs)} + 2 × ${
      formatDuration(clockSkewMs)
    }`;
  return `MESSAGE MAY EXPIRE ${when}: Pub/Sub drops it with no dead letter, and its intent is stranded; it needs a message retention of more than ${
    formatDuration(enoughMs)
  } (${sum})`;
}

/**
 * The verdict's words when, under a queue, the policy's own window is
 * shorter than `stuckAfterMs` and the clock skew together: the service
 * refuses to start with it.
 *
 * @param ownMs The policy's own guaranteed window, `rescueWindow(policy)`.
 * @param stuckAfterMs The policy's.
 * @param clockSkewMs The service's `CLOCK_SKEW` (named when not 0).
 * @returns The words, without a newline.
 *
 * @example Three deliveries
 * ```ts
 * import { ownTooShortText } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   ownTooShortText(7_500, 300_000),
 *   "POLICY TOO SHORT: its own delays guarantee 7.5s, under stuck after 5m0s, so the service refuses to start with it",
 * );
 * assert.equal(
 *   ownTooShortText(7_500, 300_000, 5_000),
 *   "POLICY TOO SHORT: its own delays guarantee 7.5s, under stuck after 5m0s + clock skew 5s, so the service refuses to start with it",
 * );
 * ```
 */
export function ownTooShortText(
  ownMs: number,
  stuckAfterMs: number,
  clockSkewMs = 0,
): string {
  return `POLICY TOO SHORT: its own delays guarantee ${
    formatDuration(ownMs)
  }, under ${
    stuckText(stuckAfterMs, clockSkewMs)
  }, so the service refuses to start with it`;
}

/**
 * The verdict's words when the queue gives up before the policy's last
 * delivery, and, given the queue's kind, the flag and the setting that
 * raise its limit, as the service's refusal names them.
 *
 * @param limit The deliveries the queue makes.
 * @param maxDeliveries The policy's.
 * @param kind The queue's kind, for what to raise.
 * @returns The words, without a newline.
 *
 * @example QStash with 4 retries
 * ```ts
 * import { stopsEarlyText } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   stopsEarlyText(5, 10, "qstash"),
 *   "QUEUE GIVES UP EARLY, after 5 deliveries, before the policy's 10: give --retries 9 or more (QSTASH_RETRIES, within your plan's cap), or lower --max-deliveries",
 * );
 * ```
 */
export function stopsEarlyText(
  limit: number,
  maxDeliveries: number,
  kind?: QueueLimits["kind"],
): string {
  const raise = kind === "qstash"
    ? `--retries ${
      maxDeliveries - 1
    } or more (QSTASH_RETRIES, within your plan's cap)`
    : kind === "cloudflare"
    ? `--max-retries ${
      maxDeliveries - 1
    } or more (the consumer's max_retries and CLOUDFLARE_MAX_RETRIES)`
    : kind === "pubsub"
    ? `--max-delivery-attempts ${maxDeliveries} or more (the subscription's max delivery attempts and PUBSUB_MAX_DELIVERY_ATTEMPTS)`
    : undefined;
  return `QUEUE GIVES UP EARLY, after ${
    deliveriesText(limit)
  }, before the policy's ${maxDeliveries}${
    raise === undefined ? "" : `: give ${raise}, or lower --max-deliveries`
  }`;
}

/**
 * The verdict's words when QStash's retries of a failure callback, on its
 * own backoff, may all come while a give-up is answered busy behind
 * another's lease: the retries they span, the wait, and the retries that
 * outlast it, as `checkQueue` and the service count them.
 *
 * @param queue QStash, with the `leaseMs` and `clockSkewMs` counted.
 * @returns The words, without a newline.
 *
 * @example QStash with 1 retry
 * ```ts
 * import { callbackShortText } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   callbackShortText({ kind: "qstash", retries: 1 }),
 *   "FAILURE CALLBACK MAY RUN OUT: QStash retries it 1 time, within 12s on its own backoff, while a give-up may be answered busy behind another's lease for up to 40s (30s + 2 × 5s): it ends in QStash's DLQ, and its intent is stranded; it needs --retries 2 or more",
 * );
 * ```
 */
export function callbackShortText(
  queue: Extract<QueueLimits, { kind: "qstash" }>,
): string {
  const need = qstashRetriesNeed(queue);
  const leaseMs = queue.leaseMs ?? DEFAULT_QUEUE_LEASE_MS;
  const clockSkewMs = queue.clockSkewMs ?? DEFAULT_QUEUE_CLOCK_SKEW_MS;
  return `FAILURE CALLBACK MAY RUN OUT: QStash retries it ${queue.retries} ${
    queue.retries === 1 ? "time" : "times"
  }, within ${
    formatDuration(qstashCallbackSpanMs(queue.retries))
  } on its own backoff, while a give-up may be answered busy behind another's lease for up to ${
    formatDuration(busyWaitMs(queue))
  } (${formatDuration(leaseMs)} + 2 × ${
    formatDuration(clockSkewMs)
  }): it ends in QStash's DLQ, and its intent is stranded; ${
    Number.isFinite(need)
      ? `it needs --retries ${need} or more`
      : "no retries QStash takes (at most 100) are enough: lower the lease"
  }`;
}

/**
 * The schedule as a table for a terminal: the policy, one line per
 * delivery, then the {@linkcode verdict}.
 *
 * @param s A schedule from {@linkcode schedule}.
 * @returns The text, ending in a newline.
 *
 * @example Two deliveries, no jitter
 * ```ts
 * import { formatSchedule, schedule } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const text = formatSchedule(schedule({ maxDeliveries: 2, jitter: "none", stuckAfterMs: 0 }));
 * assert.match(text, /^#1 +5s +5s$/m);
 * assert.match(text, /^#2 +poisoned +-$/m);
 * ```
 */
export function formatSchedule(s: Schedule): string {
  const header = [
    "delivery",
    "delay after (min … max)",
    "next delivery at (guaranteed … worst)",
  ] as const;
  const cells = s.rows.map((row) =>
    row.action === "poison"
      ? [`#${row.delivery}`, "poisoned", "-"] as const
      : row.action === "give_up"
      ? [`#${row.delivery}`, "queue gives up", "-"] as const
      : row.action === "expire"
      ? [`#${row.delivery}`, "may expire", "-"] as const
      : [
        `#${row.delivery}`,
        range(row.minDelayMs, row.maxDelayMs),
        range(row.guaranteedMs, row.worstMs),
      ] as const
  );
  const width = (column: 0 | 1) =>
    Math.max(...[header, ...cells].map((line) => line[column].length));
  const first = width(0) + 2;
  const second = width(1) + 3;
  const line = (parts: readonly [string, string, string]) =>
    `${parts[0].padEnd(first)}${parts[1].padEnd(second)}${parts[2]}`;
  return [
    `policy  ${describePolicy(s.policy, s.queue)}`,
    ...(s.queue?.kind === "pubsub" && s.queue.retentionMs !== undefined
      ? [retentionLine(s.queue, s.retentionDefault === true)]
      : []),
    "",
    line(header),
    ...cells.map(line),
    "",
    verdict(s),
  ].join("\n") + "\n";
}

/**
 * The words for a Pub/Sub retention counted as Pub/Sub's default, none
 * given: the service's refusal says its `PUBSUB_MESSAGE_RETENTION` unset so.
 */
const DEFAULT_RETENTION_TEXT =
  `--message-retention is unset, so the subscription's is counted as Pub/Sub's default, ${
    formatDuration(PUBSUB_DEFAULT_RETENTION_MS)
  }`;

/** What a Pub/Sub message retention is counted against, in one line. */
function retentionLine(
  queue: Extract<QueueLimits, { kind: "pubsub" }>,
  isDefault: boolean,
): string {
  return `retention ${formatDuration(queue.retentionMs ?? 0)}${
    isDefault ? " (Pub/Sub's default: --message-retention is unset)" : ""
  }; each failed push counted ${
    formatDuration(queue.ackDeadlineMs ?? DEFAULT_QUEUE_ACK_DEADLINE_MS)
  } (ack deadline) and ${
    formatDuration(queue.maxBackoffMs)
  } (max backoff); a busy delivery's wait ${
    formatDuration(queue.leaseMs ?? DEFAULT_QUEUE_LEASE_MS)
  } (lease) + 2 × ${
    formatDuration(queue.clockSkewMs ?? DEFAULT_QUEUE_CLOCK_SKEW_MS)
  } (clock skew)`;
}

// Tick steps that read as durations: 1-2-5 below a second, then the clock's
// own divisions.
const STEPS_MS = [
  1,
  2,
  5,
  10,
  20,
  50,
  100,
  200,
  500,
  1000,
  2000,
  5000,
  10_000,
  15_000,
  30_000,
  60_000,
  120_000,
  300_000,
  600_000,
  900_000,
  1_800_000,
  3_600_000,
  7_200_000,
  10_800_000,
  21_600_000,
  43_200_000,
  86_400_000,
];

/** Ticks from 0 to at least `maxMs`, at most 8 steps, on a clock division. */
function durationTicks(maxMs: number): number[] {
  const top = Math.max(maxMs, 1);
  const step = STEPS_MS.find((ms) => top / ms <= 8) ??
    86_400_000 * Math.ceil(top / 86_400_000 / 8);
  const ticks: number[] = [];
  for (let t = 0; t < top + step; t += step) ticks.push(t);
  return ticks;
}

/** Whole delivery numbers, thinned to about a dozen ticks. */
function deliveryTicks(maxDeliveries: number): number[] {
  if (maxDeliveries <= 15) {
    return Array.from({ length: maxDeliveries }, (_, i) => i + 1);
  }
  const raw = maxDeliveries / 10;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= raw)!;
  const ticks = [1];
  for (let t = step; t <= maxDeliveries; t += step) ticks.push(t);
  return ticks;
}

/**
 * The schedule as a chart: x is the delivery number, y the time since the
 * first delivery. Two lines, the earliest (guaranteed) and the latest
 * (worst) time of each delivery, with the band between them shaded where
 * jitter can put it, and a dashed line at `stuckAfterMs` and the clock skew
 * together (both named when the skew is not 0).
 *
 * @param s A schedule from {@linkcode schedule}.
 * @returns The SVG document.
 *
 * @example Two lines and the stuck-after rule
 * ```ts
 * import { schedule, scheduleSvg } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const svg = scheduleSvg(schedule());
 * // One line mark, drawn as a path per series.
 * const line = /aria-label="line">([\s\S]*?)<\/g>/.exec(svg)?.[1] ?? "";
 * assert.equal(line.match(/<path /g)?.length, 2);
 * assert.match(svg, /stuck after 5m0s/);
 * ```
 */
export function scheduleSvg(s: Schedule): string {
  // Delivery n comes when the delays after deliveries 1 … n − 1 have passed.
  const points = [
    { delivery: 1, guaranteedMs: 0, worstMs: 0 },
    ...s.rows.flatMap((row) =>
      row.action === "retry"
        ? [{
          delivery: row.delivery + 1,
          guaranteedMs: row.guaranteedMs,
          worstMs: row.worstMs,
        }]
        : []
    ),
  ];
  const guaranteed = "guaranteed: every delay at the jitter's floor";
  const worst = "worst: every delay in full";
  const band = "where jitter can put a delivery";
  const series = [
    { name: guaranteed, pick: "guaranteedMs", color: "#0072B2" },
    { name: worst, pick: "worstMs", color: "#E69F00" },
  ] as const;
  const lines = series.flatMap(({ name, pick }) =>
    points.map((p) => ({ series: name, delivery: p.delivery, ms: p[pick] }))
  );
  const ends = series.map(({ name, pick, color }) => ({
    delivery: s.policy.maxDeliveries,
    ms: points.at(-1)![pick],
    text: formatDuration(s[pick]),
    color,
    name,
  }));
  const { maxDeliveries, stuckAfterMs } = s.policy;
  // What the guaranteed line must reach, as the verdict counts it.
  const needMs = rescueNeedMs(stuckAfterMs, s.clockSkewMs);
  const yTicks = durationTicks(Math.max(s.worstMs, needMs));
  const stuck = `${
    stuckText(stuckAfterMs, s.clockSkewMs)
  }: a settling payment is rescued`;
  return chartSvg([{
    marginTop: 40,
    marginLeft: 76,
    marginRight: 32,
    marginBottom: 44,
    x: {
      label:
        `delivery (#${maxDeliveries} is the last: if it fails, the job is poisoned)`,
      labelAnchor: "center",
      labelArrow: "none",
      ticks: deliveryTicks(maxDeliveries),
      tickFormat: "d",
    },
    y: {
      label: "time since the first delivery",
      labelAnchor: "center",
      labelArrow: "none",
      domain: [0, yTicks.at(-1)!],
      ticks: yTicks,
      tickFormat: formatDuration,
      grid: true,
    },
    color: {
      domain: series.map((x) => x.name),
      range: series.map((x) => x.color),
    },
    marks: [
      Plot.text([
        `${verdict(s).replace(/:.*$/, "")}: ${s.outlasts ? "OK" : "TOO SHORT"}`,
      ], {
        frameAnchor: "top",
        dy: -28,
        fontSize: 14,
        fontWeight: "bold",
      }),
      // Blue, not the worst line's orange: kept apart from the stuck line.
      Plot.areaY(points, {
        x: "delivery",
        y1: "guaranteedMs",
        y2: "worstMs",
        fill: "#0072B2",
        fillOpacity: 0.18,
        title: () => band,
      }),
      Plot.ruleY([needMs], {
        stroke: "#D55E00",
        strokeWidth: 1.5,
        strokeDasharray: "6,4",
      }),
      // The lines rise to the right; the left end is free.
      Plot.text([stuck], {
        x: 1,
        y: needMs,
        dx: 8,
        dy: -9,
        textAnchor: "start",
        fill: "#D55E00",
        fontSize: 13,
      }),
      Plot.ruleY([0]),
      Plot.lineY(lines, {
        x: "delivery",
        y: "ms",
        z: "series",
        stroke: "series",
        strokeWidth: 2,
      }),
      Plot.dot(lines, { x: "delivery", y: "ms", fill: "series", r: 2.5 }),
      Plot.text(ends, {
        x: "delivery",
        y: "ms",
        text: "text",
        fill: "color",
        dx: -6,
        dy: -12,
        textAnchor: "end",
        fontSize: 13,
        fontWeight: "bold",
      }),
    ],
  }], {
    title: `Schedule: ${describePolicy(s.policy)}`,
    legend: [
      { label: guaranteed, color: "#0072B2" },
      { label: worst, color: "#E69F00" },
      { label: band, color: "#0072B2", kind: "area" },
    ],
    width: 900,
    height: 440,
  });
}

/**
 * The Cloudflare queues' message retentions `deno task schedule` was
 * given, and what is counted against them: the service's `LEASE` and
 * `CLOCK_SKEW` (`--lease`, `--clock-skew`), which the relayer the queue
 * handler is built from holds.
 */
export interface CloudflareRetentions {
  /** `--message-retention`: the jobs queue's, as `messageRetentionMs`. */
  readonly messageRetentionMs?: number;
  /** `--dlq-message-retention`: the dead-letter queue's, as `deadLetterMessageRetentionMs`. */
  readonly deadLetterMessageRetentionMs?: number;
  /** `--delivery-delay`: the jobs queue's, as `deliveryDelayMs` (0 unless given). */
  readonly deliveryDelayMs?: number;
  /** `--lease` (30 s unless given). */
  readonly leaseMs: number;
  /** `--clock-skew` (5 s unless given). */
  readonly clockSkewMs: number;
  /**
   * `--dlq-max-retries`: the dead-letter queue consumer's `max_retries`,
   * as `deadLetterMaxRetries`; not given, Cloudflare's default of 3, as the
   * handler takes it.
   */
  readonly deadLetterMaxRetries?: number;
}

/** The name the example Worker and wrangler.toml give the dead-letter queue. */
const CLOUDFLARE_DLQ = "relayer-jobs-dlq";

/**
 * The verdict `createQueueHandler` gives on the dead-letter queue's
 * `max_retries` and the Cloudflare retentions the flags name (one rule,
 * `policy/_cloudflare_retention.ts`): the line `deno task schedule`
 * prints, and the handler's refusal after "Cannot create queue handler
 * as " when it would refuse them. A `max_retries` not given is
 * Cloudflare's 3, and a retention not given is counted as 24 h, as the
 * handler takes them. `undefined` with no `--queue cloudflare`.
 *
 * @param flags What {@linkcode parseFlags} read.
 * @returns The line, and the refusal if any.
 *
 * @example A jobs queue's retention of 10 min under the default policy
 * ```ts
 * import { cloudflareRetentionVerdict, parseFlags } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const flags = parseFlags(["--queue", "cloudflare", "--max-retries", "9", "--dlq-max-retries", "100", "--message-retention", "10m"]);
 * assert.ok(!flags.help);
 * assert.match(cloudflareRetentionVerdict(flags)?.refusal ?? "", /--message-retention-period-secs 86400 \(1 day/);
 * ```
 */
export function cloudflareRetentionVerdict(
  flags: Flags & { readonly help: false },
): { readonly line: string; readonly refusal?: string } | undefined {
  const retentions = flags.cloudflareRetentions;
  if (retentions === undefined || flags.queue?.kind !== "cloudflare") {
    return undefined;
  }
  // Checked first, as the handler checks it.
  const dead = cloudflareDeadLetterRetriesRefusal(
    retentions.deadLetterMaxRetries ?? 3,
    flags.policy.baseMs,
    retentions.deadLetterMaxRetries !== undefined,
  );
  if (dead !== undefined) {
    const refusal = `'deadLetterMaxRetries' is ${dead}`;
    return {
      line:
        `dead-letter retries TOO FEW, createQueueHandler refuses them (give --dlq-max-retries): ${refusal}`,
      refusal,
    };
  }
  const limits: CloudflareRetentionLimits = {
    baseMs: flags.policy.baseMs,
    capMs: flags.policy.capMs,
    leaseMs: retentions.leaseMs,
    clockSkewMs: retentions.clockSkewMs,
    maxRetries: flags.queue.maxRetries,
    deliveryDelayMs: retentions.deliveryDelayMs,
  };
  const refused = cloudflareRetentionRefusal(
    limits,
    retentions,
    CLOUDFLARE_DLQ,
  );
  if (refused !== undefined) {
    const refusal = `'${refused.option}' is ${refused.text}`;
    return {
      line: `retention TOO SHORT, createQueueHandler refuses it: ${refusal}`,
      refusal,
    };
  }
  // Each not given as the handler counts it: the Workers Free plan's.
  const counted = (ms: number | undefined) =>
    ms === undefined
      ? `${
        formatDuration(CLOUDFLARE_FREE_RETENTION_MS)
      } (not given: the Workers Free plan's, the least a plan keeps)`
      : formatDuration(ms);
  const parts = [
    `jobs queue ${counted(retentions.messageRetentionMs)} > ${
      formatDuration(cloudflareJobsSpanSeconds(limits) * 1000)
    }`,
    `dead-letter queue ${counted(retentions.deadLetterMessageRetentionMs)} > ${
      formatDuration(cloudflareDeadLetterAgeSeconds(limits) * 1000)
    }`,
  ];
  return {
    line: `retention ${
      parts.join(", ")
    }: OK, no message is deleted while the handler may still retry it`,
  };
}

/** The flags, as `--help` prints them. */
export const USAGE = `Usage: deno task schedule [flags]

Prints when each delivery of a job can come under a policy, and whether the
policy keeps a job alive long enough for a stuck payment to be rescued.

Flags (defaults are the library's):
  --max-deliveries N   deliveries a job gets, counting the first (10; at most ${MAX_SCHEDULE_DELIVERIES} here)
  --base D             delay after the first delivery, doubling (5s)
  --cap D              longest delay (2m)
  --jitter J           equal, full or none (equal)
  --stuck-after D      how long a payment may settle before its rescue (5m)
  --clock-skew D       how far apart the instances' clocks may be, the
                       service's CLOCK_SKEW (${
  formatDuration(DEFAULT_CLOCK_SKEW_MS)
}; 0 for one clock, at most
                       ${
  formatDuration(MAX_CLOCK_SKEW_MS)
}): the window must outlast --stuck-after and it
                       together
  --queue Q            lay out what queue Q really does: qstash, pubsub,
                       cloudflare or kv (default: the policy alone)
    --retries N                 qstash: Upstash-Retries, 0-100, at most your
                                plan's cap (max-deliveries - 1); the failure
                                callback's retries, on QStash's backoff, must
                                outlast a busy give-up: --lease + 2 × clock
                                skew (--lease and --sender-timeout as below)
    --max-delivery-attempts N   pubsub: the dead-letter policy's attempts,
                                5-100 (none: no dead-letter policy)
    --min-backoff D             pubsub: the retry policy's minimum (10s)
    --max-backoff D             pubsub: the retry policy's maximum (10m)
    --message-retention D       pubsub: the subscription's message retention,
                                PUBSUB_MESSAGE_RETENTION, 10m to 744h (none:
                                Pub/Sub's default, 168h, without a dead-letter
                                policy; not checked with one); with no
                                dead-letter policy giving up first, it must
                                exceed
                                max-deliveries × (ack deadline + max backoff)
                                + lease + 2 × clock skew, as the service checks
      --sender-timeout D        the service's SENDER_TIMEOUT (10s): each push
                                is counted 2 × it + 5s (at least 10s)
      --ack-deadline D          the subscription's ack deadline, 10s to 10m:
                                each push is counted that long where it is
                                longer (the service does not know it)
      --lease D                 the service's LEASE (30s; at least twice
                                --sender-timeout)
                                (these three only where a retention is
                                counted: given, or with no dead-letter policy)
    --max-retries N             cloudflare: the consumer's max_retries (3)
    --dlq-max-retries N         cloudflare: the dead-letter queue consumer's
                                max_retries, CLOUDFLARE_DLQ_MAX_RETRIES (3);
                                its retries must span 14 days (100 does), as
                                createQueueHandler checks
    --message-retention D       cloudflare: the jobs queue's message retention,
                                CLOUDFLARE_MESSAGE_RETENTION, whole seconds
                                from 1m to 336h (none: 24h, the Workers Free
                                plan's, the least a plan keeps); it must
                                exceed the waits of max_retries retries (each
                                the policy's backoff or --lease + 2 × clock
                                skew), as createQueueHandler checks
    --dlq-message-retention D   cloudflare: the dead-letter queue's,
                                CLOUDFLARE_DLQ_MESSAGE_RETENTION (none: 24h,
                                as the jobs queue's); it must exceed the jobs
                                queue's waits and a busy give-up's (a message
                                moves with its age)
      --delivery-delay D        the jobs queue's delivery delay (or the
                                longest delaySeconds sent with), 0 to 24h,
                                CLOUDFLARE_DELIVERY_DELAY: counted in both
                                retentions, counted from the send
      --lease D                 the service's LEASE (30s; at least twice
                                --sender-timeout)
      --sender-timeout D        the service's SENDER_TIMEOUT (10s)
                                (these three only with a retention)
  --svg FILE           also write the schedule as an SVG chart; with
                       \`deno task schedule\` FILE must be under docs/
                       (the task may write only there), e.g. docs/schedule.svg
  --help               print this and exit

D is a duration: 5s, 2m, 1m30.5s, 250ms, or plain milliseconds.
Exit status: 0 when the rescue window outlasts --stuck-after and --clock-skew
together, as the service checks them at start, 1 when it is too short or the
queue gives up before --max-deliveries (or, with --queue, the policy's own
delays are too short for the service to start, QStash's failure callback may
run out before a busy give-up ends, or the message retention may
end before the job is resolved, or createQueueHandler would refuse a
Cloudflare retention or the dead-letter queue's max_retries), 2 on a bad flag.
`;

/** What the command line asked for. */
export type Flags =
  | { readonly help: true }
  | {
    readonly help: false;
    /** The checked policy. */
    readonly policy: Policy;
    /** `--clock-skew`, in milliseconds: the service's `CLOCK_SKEW` (5 s unless given). */
    readonly clockSkewMs: number;
    /** The queue, with `--queue`. */
    readonly queue?: QueueLimits;
    /**
     * The Cloudflare queues' message retentions and what is counted
     * against them, with `--queue cloudflare`: what `createQueueHandler`
     * is given (a retention not given is counted as 24 h, as it counts
     * one).
     */
    readonly cloudflareRetentions?: CloudflareRetentions;
    /**
     * `true` where `--queue pubsub` has neither `--message-retention` nor
     * a dead-letter policy: the queue's `retentionMs` is Pub/Sub's default,
     * 7 days, as the service counts `PUBSUB_MESSAGE_RETENTION` unset.
     */
    readonly retentionDefault?: true;
    /** Where to write the chart; none when absent. */
    readonly svg?: string;
  };

/** A command-line mistake: its message is the one line the CLI prints. */
export class UsageError extends Error {
  /**
   * Constructs a new instance.
   *
   * @param message What is wrong, naming the flag.
   */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

const FIELDS = {
  "--max-deliveries": {
    field: "maxDeliveries",
    must: `an integer from 1 to ${MAX_SCHEDULE_DELIVERIES}`,
  },
  "--base": { field: "baseMs", must: "a duration of at least 1ms, such as 5s" },
  "--cap": { field: "capMs", must: "a duration of at least 1ms, such as 2m" },
  "--jitter": { field: "jitter", must: "equal, full or none" },
  "--stuck-after": { field: "stuckAfterMs", must: "a duration such as 5m" },
} as const satisfies Record<string, { field: keyof Policy; must: string }>;

type PolicyFlag = keyof typeof FIELDS;

function isPolicyFlag(name: string): name is PolicyFlag {
  return Object.hasOwn(FIELDS, name);
}

const QUEUE_FLAGS = {
  "--queue": { kinds: [], must: "qstash, pubsub, cloudflare or kv" },
  "--retries": { kinds: ["qstash"], must: "an integer from 0 to 100" },
  "--max-delivery-attempts": {
    kinds: ["pubsub"],
    must: "an integer from 5 to 100",
  },
  "--min-backoff": { kinds: ["pubsub"], must: "a duration up to 10m" },
  "--max-backoff": { kinds: ["pubsub"], must: "a duration up to 10m" },
  "--message-retention": {
    kinds: ["pubsub", "cloudflare"],
    must:
      "a duration from 10m to 744h, such as 168h (pubsub), or whole seconds from 1m to 336h (cloudflare)",
  },
  "--dlq-message-retention": {
    kinds: ["cloudflare"],
    must: "whole seconds from 1m to 336h, such as 336h",
  },
  "--delivery-delay": {
    kinds: ["cloudflare"],
    must: "whole seconds from 0 to 24h, such as 30s",
  },
  "--sender-timeout": {
    kinds: ["pubsub", "qstash", "cloudflare"],
    must: "a duration such as 10s",
  },
  "--ack-deadline": {
    kinds: ["pubsub"],
    must:
      "a duration from 10s to 10m (the subscription's acknowledgement deadline)",
  },
  "--lease": {
    kinds: ["pubsub", "qstash", "cloudflare"],
    must: "a duration such as 30s",
  },
  "--max-retries": { kinds: ["cloudflare"], must: "an integer from 0 to 100" },
  "--dlq-max-retries": {
    kinds: ["cloudflare"],
    must: "an integer from 0 to 100",
  },
} as const satisfies Record<
  string,
  { kinds: readonly QueueLimits["kind"][]; must: string }
>;

type QueueFlag = keyof typeof QUEUE_FLAGS;

function isQueueFlag(name: string): name is QueueFlag {
  return Object.hasOwn(QUEUE_FLAGS, name);
}

/** The flags that stand for a setting of the service, by its name. */
const SETTING_FLAGS = {
  PUBSUB_MESSAGE_RETENTION: "--message-retention",
  CLOUDFLARE_MESSAGE_RETENTION: "--message-retention",
  CLOUDFLARE_DLQ_MESSAGE_RETENTION: "--dlq-message-retention",
  CLOUDFLARE_DELIVERY_DELAY: "--delivery-delay",
  SENDER_TIMEOUT: "--sender-timeout",
  LEASE: "--lease",
  CLOCK_SKEW: "--clock-skew",
} as const;

/**
 * Reads flags as the service reads its settings (`read` is its own
 * reader), its refusal naming the flags where it names the settings.
 */
function asService<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new UsageError(
      error.message.replace(
        /\b(PUBSUB_MESSAGE_RETENTION|CLOUDFLARE_MESSAGE_RETENTION|CLOUDFLARE_DLQ_MESSAGE_RETENTION|CLOUDFLARE_DELIVERY_DELAY|SENDER_TIMEOUT|LEASE|CLOCK_SKEW)\b/g,
        (name) => SETTING_FLAGS[name as keyof typeof SETTING_FLAGS],
      ),
    );
  }
}

/** The flags counted only against a Pub/Sub message retention. */
const WITH_RETENTION = [
  "--sender-timeout",
  "--ack-deadline",
  "--lease",
] as const;

/**
 * Builds the queue from `--queue` and its flags (the policy gives QStash's
 * default retries; `clockSkewMs`, `--clock-skew`, is counted against a
 * Pub/Sub message retention).
 */
function queueFrom(
  raw: Partial<Record<QueueFlag, string>>,
  policy: Policy,
  clockSkewMs: number,
  out: {
    cloudflareRetentions?: CloudflareRetentions;
    retentionDefault?: true;
  } = {},
): QueueLimits | undefined {
  const kind = raw["--queue"];
  const bad = (flag: QueueFlag, error?: unknown): UsageError =>
    new UsageError(
      `${flag} must be ${QUEUE_FLAGS[flag].must}${
        whyNotDuration(error)
      }: current value is ${JSON.stringify(raw[flag])}`,
    );
  for (const flag of Object.keys(raw) as QueueFlag[]) {
    const kinds: readonly string[] = QUEUE_FLAGS[flag].kinds;
    if (flag !== "--queue" && !kinds.includes(kind ?? "")) {
      throw new UsageError(
        `${flag} is a flag of --queue ${kinds.join(", ")}: see --help`,
      );
    }
  }
  const count = (flag: QueueFlag, min: number, max: number) => {
    const text = raw[flag]?.trim();
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!/^\d{1,3}$/.test(text) || n < min || n > max) throw bad(flag);
    return n;
  };
  const backoffMs = (flag: QueueFlag, fallback: number, min = 0) => {
    const text = raw[flag];
    if (text === undefined) return fallback;
    let ms: number;
    try {
      ms = parseDuration(text);
    } catch (error) {
      throw bad(flag, error);
    }
    refusePlainMs(flag, text, ms);
    if (ms < min || ms > 600_000) throw bad(flag);
    return ms;
  };
  // The flags given for the service's settings, as the settings it reads.
  const serviceEnv = () => {
    const env: Record<string, string> = {};
    for (const [name, flag] of Object.entries(SETTING_FLAGS)) {
      const text = raw[flag as QueueFlag];
      if (text === undefined) continue;
      // The service takes an empty setting for an unset one: a flag given
      // no value is a mistake.
      if (text.trim() === "") {
        throw new UsageError(
          `${flag} needs a value: ${QUEUE_FLAGS[flag as QueueFlag].must}`,
        );
      }
      env[name] = text;
    }
    return env;
  };
  // A Pub/Sub message retention and what is counted against it, read as
  // the service reads PUBSUB_MESSAGE_RETENTION, SENDER_TIMEOUT and LEASE.
  // Unset with no dead-letter policy (`attempts`), Pub/Sub's default, 7
  // days, as the service's start check counts it: a dead-letter policy
  // gives up within it, and the service checks no retention then.
  const retention = (attempts: number | undefined) => {
    const retentionText = raw["--message-retention"];
    if (retentionText === undefined && attempts !== undefined) {
      const alone = WITH_RETENTION.find((flag) => raw[flag] !== undefined);
      if (alone !== undefined) {
        throw new UsageError(
          `${alone} is counted only against a message retention: give --message-retention too (unset, with a dead-letter policy, the service checks no retention)`,
        );
      }
      return {};
    }
    const env = serviceEnv();
    if (retentionText === undefined) out.retentionDefault = true;
    const retentionMs = retentionText === undefined
      ? PUBSUB_DEFAULT_RETENTION_MS
      : asService(() => pubsubRetention(env))!;
    const timeoutMs = asService(() => senderTimeout(env));
    const leaseMs = asService(() => lease(env, timeoutMs));
    // The service counts each push as long as it may take to answer one; a
    // longer ack deadline of the subscription, given, is counted instead.
    const answerMs = asService(() => pubsubAckDeadline(timeoutMs));
    const ackDeadlineMs = Math.max(
      answerMs,
      backoffMs("--ack-deadline", 0, 10_000),
    );
    return { retentionMs, ackDeadlineMs, leaseMs, clockSkewMs };
  };
  switch (kind) {
    case undefined:
      return undefined;
    case "qstash": {
      const given = count("--retries", 0, 100);
      if (
        raw["--lease"] === undefined && raw["--sender-timeout"] === undefined
      ) {
        const retries = given ??
          qstashDefaultRetries(policy.maxDeliveries, { clockSkewMs });
        return { kind, retries };
      }
      // The lease a busy give-up waits out, read as the service reads it.
      const env = serviceEnv();
      const timeoutMs = asService(() => senderTimeout(env));
      const leaseMs = asService(() => lease(env, timeoutMs));
      const retries = given ??
        qstashDefaultRetries(policy.maxDeliveries, { leaseMs, clockSkewMs });
      return { kind, retries, leaseMs };
    }
    case "pubsub": {
      const attempts = count("--max-delivery-attempts", 5, 100);
      const minBackoffMs = backoffMs("--min-backoff", 10_000);
      const maxBackoffMs = backoffMs("--max-backoff", 600_000);
      if (minBackoffMs > maxBackoffMs) {
        throw new UsageError(
          `--min-backoff (${
            formatDuration(minBackoffMs)
          }) must be at most --max-backoff (${formatDuration(maxBackoffMs)})`,
        );
      }
      return {
        kind,
        ...(attempts === undefined ? {} : { maxDeliveryAttempts: attempts }),
        minBackoffMs,
        maxBackoffMs,
        ...retention(attempts),
      };
    }
    case "cloudflare": {
      const maxRetries = count("--max-retries", 0, 100) ?? 3;
      // The retentions and the lease counted against them, read as the
      // service reads CLOUDFLARE_MESSAGE_RETENTION,
      // CLOUDFLARE_DLQ_MESSAGE_RETENTION and LEASE. One not given is
      // counted as the handler counts it: 24 h, the Workers Free plan's.
      const env = serviceEnv();
      const messageRetentionMs = asService(() =>
        cloudflareRetention(env, "CLOUDFLARE_MESSAGE_RETENTION")
      );
      const deadLetterMessageRetentionMs = asService(() =>
        cloudflareRetention(env, "CLOUDFLARE_DLQ_MESSAGE_RETENTION")
      );
      const leaseMs = asService(() => lease(env, senderTimeout(env)));
      const deliveryDelayMs = asService(() => cloudflareDeliveryDelay(env));
      const deadLetterMaxRetries = count("--dlq-max-retries", 0, 100);
      out.cloudflareRetentions = {
        ...(deadLetterMaxRetries !== undefined ? { deadLetterMaxRetries } : {}),
        ...(deliveryDelayMs !== undefined ? { deliveryDelayMs } : {}),
        ...(messageRetentionMs !== undefined ? { messageRetentionMs } : {}),
        ...(deadLetterMessageRetentionMs !== undefined
          ? { deadLetterMessageRetentionMs }
          : {}),
        leaseMs,
        clockSkewMs,
      };
      return { kind, maxRetries };
    }
    case "kv": {
      // The start refuses such a CAP with KV_QUEUE: Deno KV could not
      // enqueue the retry.
      const refused = kvCapRefusal(policy.capMs);
      if (refused !== undefined) {
        throw new UsageError(
          `${
            refused.replace(/\bCAP\b/g, "--cap")
          }; the service refuses to start with KV_QUEUE`,
        );
      }
      return { kind };
    }
    default:
      throw bad("--queue");
  }
}

const CLOCK_SKEW_MUST = "a duration such as 5s, or 0 for one clock";

/**
 * Reads `--clock-skew` as the service reads `CLOCK_SKEW` (`clockSkew`: the
 * same durations, the same refusal of a plain number under a second, the
 * same default and limit), its refusal naming the flag.
 */
function clockSkewFrom(text: string | undefined): number {
  if (text === undefined) return DEFAULT_CLOCK_SKEW_MS;
  // The service takes an empty CLOCK_SKEW for an unset one: a flag given
  // no value is a mistake.
  if (text === "") {
    throw new UsageError(`--clock-skew needs a value: ${CLOCK_SKEW_MUST}`);
  }
  try {
    return clockSkew({ CLOCK_SKEW: text });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new UsageError(
      error.message.replace(/^CLOCK_SKEW\b/, "--clock-skew"),
    );
  }
}

/**
 * Refuses a plain number under a second, as the service refuses such a
 * setting: most likely seconds written without their unit (`--base 30`).
 */
function refusePlainMs(flag: string, text: string, ms: number): void {
  const refused = plainMsRefusal(flag, text, ms);
  if (refused !== undefined) throw new UsageError(refused);
}

/**
 * Reads the command line: `--flag value` or `--flag=value`, the last of a
 * repeated flag wins. Durations go through `parseDuration`, the policy
 * through `definePolicy`.
 *
 * @param args The arguments, without the program (`Deno.args`).
 * @returns The policy, the clock skew, the queue and the SVG path, or
 * `{ help: true }`.
 * @throws {UsageError} Naming the first bad flag, such as `--base must be
 * a duration of at least 1ms, such as 5s: current value is "soon"`.
 *
 * @example Read a policy
 * ```ts
 * import { parseFlags } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * const flags = parseFlags(["--max-deliveries", "3", "--base=1s"]);
 * assert.ok(!flags.help);
 * assert.equal(flags.policy.maxDeliveries, 3);
 * assert.equal(flags.policy.baseMs, 1000);
 * assert.equal(flags.clockSkewMs, 5000); // the service's CLOCK_SKEW default
 * assert.throws(() => parseFlags(["--base", "soon"]), /^UsageError: --base /);
 * ```
 */
export function parseFlags(args: readonly string[]): Flags {
  const raw: Partial<Record<PolicyFlag, string>> = {};
  const rawQueue: Partial<Record<QueueFlag, string>> = {};
  let svg: string | undefined;
  let rawSkew: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--help" || arg === "-h") return { help: true };
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    if (
      name !== "--svg" && name !== "--clock-skew" && !isPolicyFlag(name) &&
      !isQueueFlag(name)
    ) {
      throw new UsageError(
        arg.startsWith("-")
          ? `unknown flag ${name}: see --help`
          : `unexpected argument ${JSON.stringify(arg)}: see --help`,
      );
    }
    let value: string | undefined;
    if (name !== arg) value = arg.slice(eq + 1);
    else if (args[i + 1] !== undefined && !args[i + 1]!.startsWith("--")) {
      value = args[++i]!;
    }
    if (value === undefined) {
      throw new UsageError(
        `${name} needs a value: ${
          name === "--svg"
            ? "a file such as docs/schedule.svg"
            : name === "--clock-skew"
            ? CLOCK_SKEW_MUST
            : isQueueFlag(name)
            ? QUEUE_FLAGS[name].must
            : FIELDS[name].must
        }`,
      );
    }
    if (name === "--svg") svg = value;
    else if (name === "--clock-skew") rawSkew = value;
    else if (isQueueFlag(name)) rawQueue[name] = value;
    else raw[name] = value;
  }

  const bad = (flag: PolicyFlag, error?: unknown): UsageError =>
    new UsageError(
      `${flag} must be ${FIELDS[flag].must}${
        whyNotDuration(error)
      }: current value is ${JSON.stringify(raw[flag])}`,
    );
  const overrides: Partial<Record<keyof Policy, unknown>> = {};
  for (const [flag, text] of Object.entries(raw) as [PolicyFlag, string][]) {
    const { field } = FIELDS[flag];
    if (field === "jitter") overrides.jitter = text;
    else if (field === "maxDeliveries") {
      if (!/^\d{1,15}$/.test(text.trim())) throw bad(flag);
      overrides.maxDeliveries = Number(text.trim());
    } else {
      let ms: number;
      try {
        ms = parseDuration(text);
      } catch (error) {
        throw bad(flag, error);
      }
      refusePlainMs(flag, text, ms);
      overrides[field] = ms;
    }
  }
  let policy: Policy;
  try {
    policy = definePolicy(overrides as Partial<Policy>);
  } catch (error) {
    // definePolicy names the field it refused: map it back to its flag.
    const message = error instanceof Error ? error.message : String(error);
    const flag = (Object.keys(FIELDS) as PolicyFlag[]).find((f) =>
      message.includes(`'${FIELDS[f].field}'`)
    );
    throw flag === undefined ? new UsageError(message) : bad(flag);
  }
  if (policy.maxDeliveries > MAX_SCHEDULE_DELIVERIES) {
    throw bad("--max-deliveries");
  }
  if (policy.baseMs > policy.capMs) {
    // The service refuses this policy at start (BASE ≤ CAP): so does the tool.
    throw new UsageError(
      `--base is ${formatDuration(policy.baseMs)} but --cap is ${
        formatDuration(policy.capMs)
      }: the backoff starts above its cap, so every delay would be the cap, and the service refuses to start. Lower --base or raise --cap (--base ≤ --cap).`,
    );
  }
  const clockSkewMs = clockSkewFrom(rawSkew);
  const out: {
    cloudflareRetentions?: CloudflareRetentions;
    retentionDefault?: true;
  } = {};
  const queue = queueFrom(rawQueue, policy, clockSkewMs, out);
  return {
    help: false,
    policy,
    clockSkewMs,
    ...(queue === undefined ? {} : { queue }),
    ...(out.cloudflareRetentions === undefined
      ? {}
      : { cloudflareRetentions: out.cloudflareRetentions }),
    ...(out.retentionDefault ? { retentionDefault: true } : {}),
    ...(svg === undefined ? {} : { svg }),
  };
}

/** Where {@linkcode main} prints: a line at a time, as `console.log` would. */
export interface ScheduleOutput {
  /** Prints `line` and a newline to stdout. */
  out(line: string): void;
  /** Prints `line` and a newline to stderr. */
  err(line: string): void;
}

/**
 * The command line: reads `args`, prints the schedule (or the usage, or
 * what was wrong) through `output`, writes `--svg`'s chart, and returns
 * the exit code: 0 when the window outlasts stuck-after and the queue
 * lets it run, 1 when not, 2 on a bad flag or a chart it cannot write.
 *
 * @param args The arguments, without the program (`Deno.args`).
 * @param output Where it prints; the console unless given.
 * @returns The exit code.
 *
 * @example The default schedule, printed to a string
 * ```ts
 * import { main } from "./schedule.ts";
 * import assert from "node:assert/strict";
 *
 * let stdout = "";
 * const code = await main([], {
 *   out: (line) => stdout += `${line}\n`,
 *   err: () => {},
 * });
 * assert.equal(code, 0);
 * assert.match(stdout, /^#10 +poisoned +-$/m);
 * ```
 */
export async function main(
  args: readonly string[],
  output: ScheduleOutput = {
    out: (line) => console.log(line),
    err: (line) => console.error(line),
  },
): Promise<number> {
  let flags: Flags;
  try {
    flags = parseFlags(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    output.err(`schedule: ${error.message}`);
    return 2;
  }
  if (flags.help) {
    output.out(USAGE.trimEnd());
    return 0;
  }
  const s = schedule(flags.policy, flags.queue, {
    clockSkewMs: flags.clockSkewMs,
    retentionDefault: flags.retentionDefault === true,
  });
  output.out(formatSchedule(s).trimEnd());
  const retention = cloudflareRetentionVerdict(flags);
  if (retention !== undefined) output.out(retention.line);
  if (flags.svg !== undefined) {
    try {
      await Deno.writeTextFile(flags.svg, scheduleSvg(s));
    } catch (error) {
      const reason = error instanceof Deno.errors.NotCapable ||
          error instanceof Deno.errors.PermissionDenied
        ? "no permission to write there (the task may write only under docs/)"
        : error instanceof Error
        ? error.message
        : String(error);
      output.err(
        `schedule: --svg cannot write ${JSON.stringify(flags.svg)}: ${reason}`,
      );
      return 2;
    }
    output.err(`schedule: wrote ${flags.svg}`);
  }
  return s.outlasts && !s.stopsEarly && s.ownTooShortMs === undefined &&
      s.retentionNeedMs === undefined && retention?.refusal === undefined
    ? 0
    : 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
