/**
 * What a Cloudflare queue's message retention must hold: one rule, shared
 * by `createQueueHandler`, the service's reading of
 * `CLOUDFLARE_MESSAGE_RETENTION` and `CLOUDFLARE_DLQ_MESSAGE_RETENTION`,
 * and `deno task schedule --queue cloudflare`, so the three give one
 * verdict.
 *
 * Cloudflare deletes a message whose retention ends, retried or not, with
 * no dead letter ("messages in a queue that reach the maximum message
 * retention are deleted from the queue", its Queues limits page; only a
 * message at its retry limit goes to the dead-letter queue). Its docs do
 * not say the retention waits for a first delivery, so it is counted from
 * the send: a delivery delay (the queue's `delivery_delay`, or a send's
 * `delaySeconds`) is part of a message's age.
 *
 * @module
 */

import { deliveriesText } from "./_count.ts";
import { outageDelayMs } from "./_doubled.ts";
import { busyWaitMs } from "./_retention.ts";
import { formatDuration } from "./format_duration.ts";

/** Cloudflare's shortest message retention: 60 s. */
export const CLOUDFLARE_MIN_RETENTION_MS = 60_000;

/** Cloudflare's longest message retention: 14 days. */
export const CLOUDFLARE_MAX_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

/**
 * The Workers Free plan's message retention: 24 hours, fixed there (its
 * Queues limits page), and the most Wrangler takes there
 * (`--message-retention-period-secs` 60 to 86400 on the free tier, 60 to
 * 1209600 on a paid one): the longest retention every plan allows. A
 * paid plan keeps a queue's messages 4 days unless set.
 */
export const CLOUDFLARE_FREE_RETENTION_MS = 86_400_000;

/**
 * The room a suggested retention leaves for each delivery's batch: 15
 * minutes, a consumer invocation's wall-clock limit (Queues limits), the
 * longest a batch runs before the next delivery. The check does not count
 * it (it is a floor: the handler's own waits); a batch of 10 on 4 lanes
 * whose signer times out at 10 s twice runs about a minute.
 */
export const CLOUDFLARE_DELIVERY_ALLOWANCE_MS = 900_000;

/**
 * The retention, in seconds, a refusal suggests: past `leastSeconds` (the
 * least the check takes) by {@linkcode CLOUDFLARE_DELIVERY_ALLOWANCE_MS}
 * for each of `deliveries` batches, and at least 1 day
 * ({@linkcode CLOUDFLARE_FREE_RETENTION_MS}, which every plan allows), at
 * most 14 days. More than 1 day only where the floor and its room need it;
 * the Workers Free plan cannot keep that.
 *
 * ```ts
 * import { cloudflareSuggestedRetentionSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareSuggestedRetentionSeconds(721, 10), 86_400);
 * assert.equal(cloudflareSuggestedRetentionSeconds(86_400 + 721, 10), 96_121);
 * ```
 */
export function cloudflareSuggestedRetentionSeconds(
  leastSeconds: number,
  deliveries: number,
): number {
  return Math.min(
    CLOUDFLARE_MAX_RETENTION_MS / 1000,
    Math.max(
      CLOUDFLARE_FREE_RETENTION_MS / 1000,
      leastSeconds + deliveries * CLOUDFLARE_DELIVERY_ALLOWANCE_MS / 1000,
    ),
  );
}

/**
 * The largest `delaySeconds` the handler asks for: 12 hours, Cloudflare's
 * limit until February 2026 (24 hours since, and in Miniflare), so it
 * holds on either.
 */
export const CLOUDFLARE_MAX_DELAY_SECONDS = 43_200;

/**
 * The longest delivery delay counted: 24 hours, the longest `delaySeconds`
 * Cloudflare takes (since February 2026; 12 hours before).
 */
export const CLOUDFLARE_MAX_DELIVERY_DELAY_MS = 86_400_000;

/**
 * Whether `ms` is a delivery delay the rule counts: whole seconds from 0
 * to 24 hours, as Cloudflare delays a message.
 *
 * ```ts
 * import { cloudflareDeliveryDelayAllowed } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDeliveryDelayAllowed(0), true);
 * assert.equal(cloudflareDeliveryDelayAllowed(1_500), false);
 * assert.equal(cloudflareDeliveryDelayAllowed(86_401_000), false);
 * ```
 */
export function cloudflareDeliveryDelayAllowed(ms: unknown): ms is number {
  return typeof ms === "number" && Number.isInteger(ms) && ms % 1000 === 0 &&
    ms >= 0 && ms <= CLOUDFLARE_MAX_DELIVERY_DELAY_MS;
}

/**
 * Whether `ms` is a message retention Cloudflare allows: whole seconds
 * from 60 s to 14 days (`--message-retention-period-secs` 60 to 1209600).
 *
 * ```ts
 * import { cloudflareRetentionAllowed } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareRetentionAllowed(600_000), true);
 * assert.equal(cloudflareRetentionAllowed(600_500), false); // not whole seconds
 * assert.equal(cloudflareRetentionAllowed(59_000), false); // under 60 s
 * ```
 */
export function cloudflareRetentionAllowed(ms: unknown): ms is number {
  return typeof ms === "number" && Number.isInteger(ms) && ms % 1000 === 0 &&
    ms >= CLOUDFLARE_MIN_RETENTION_MS && ms <= CLOUDFLARE_MAX_RETENTION_MS;
}

/**
 * Seconds for `retry({ delaySeconds })`: rounded up (the jitter's floor
 * holds), at least 1 (a 0 would redeliver at once, in a tight loop) and at
 * most 12 h.
 *
 * ```ts
 * import { cloudflareDelaySeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDelaySeconds(0), 1);
 * assert.equal(cloudflareDelaySeconds(2_001), 3);
 * assert.equal(cloudflareDelaySeconds(86_400_000), 43_200);
 * ```
 */
export function cloudflareDelaySeconds(delayMs: number): number {
  return Math.min(
    CLOUDFLARE_MAX_DELAY_SECONDS,
    Math.max(1, Math.ceil(delayMs / 1000)),
  );
}

/** What the retention rule reads of a handler and its queues. */
export interface CloudflareRetentionLimits {
  /** The policy's `baseMs`. */
  readonly baseMs: number;
  /** The policy's `capMs`. */
  readonly capMs: number;
  /** The relayer's lease (30 s when absent). */
  readonly leaseMs?: number | undefined;
  /** The relayer's clock skew (5 s when absent). */
  readonly clockSkewMs?: number | undefined;
  /** The jobs consumer's `max_retries`. */
  readonly maxRetries: number;
  /**
   * The longest a message waits before its first delivery: the queue's
   * `delivery_delay` or a send's `delaySeconds` (0 when absent).
   */
  readonly deliveryDelayMs?: number | undefined;
}

/**
 * The longest wait, in seconds, the handler asks after delivery `attempt`
 * of a job that keeps failing: the policy's delay (at most its un-jittered
 * backoff, which the wait after a store failure is too), or a busy
 * answer's, which waits out a lease (up to `leaseMs` + 2 × `clockSkewMs`).
 *
 * ```ts
 * import { cloudflareLongestWaitSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * const limits = { baseMs: 5_000, capMs: 120_000, maxRetries: 9 };
 * assert.equal(cloudflareLongestWaitSeconds(limits, 1), 40); // a 30 s lease + 2 × 5 s
 * assert.equal(cloudflareLongestWaitSeconds(limits, 9), 120); // the cap
 * ```
 */
export function cloudflareLongestWaitSeconds(
  limits: CloudflareRetentionLimits,
  attempt: number,
): number {
  return cloudflareDelaySeconds(
    Math.max(
      outageDelayMs(attempt, limits.baseMs, limits.capMs),
      busyWaitMs(limits),
    ),
  );
}

/**
 * How old a message may be, in seconds, when the jobs queue last delivers
 * it: its delivery delay (rounded up to whole seconds) and the waits the
 * handler asks over `maxRetries` retries. The jobs queue's retention must
 * exceed it.
 *
 * ```ts
 * import { cloudflareJobsSpanSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * const limits = { baseMs: 5_000, capMs: 120_000, maxRetries: 9 };
 * assert.equal(cloudflareJobsSpanSeconds(limits), 720);
 * assert.equal(cloudflareJobsSpanSeconds({ ...limits, deliveryDelayMs: 60_000 }), 780);
 * ```
 */
export function cloudflareJobsSpanSeconds(
  limits: CloudflareRetentionLimits,
): number {
  let span = Math.ceil((limits.deliveryDelayMs ?? 0) / 1000);
  for (let attempt = 1; attempt <= limits.maxRetries; attempt++) {
    span += cloudflareLongestWaitSeconds(limits, attempt);
  }
  return span;
}

/**
 * The longest a give-up answered busy on the dead-letter queue waits
 * before it is tried again, in seconds: the policy's delay after the jobs
 * queue's last delivery, or a lease. The dead-letter queue's retention
 * must exceed it, on top of {@linkcode cloudflareJobsSpanSeconds}
 * ({@linkcode cloudflareDeadLetterAgeSeconds}).
 *
 * ```ts
 * import { cloudflareDeadLetterWaitSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDeadLetterWaitSeconds({ baseMs: 5_000, capMs: 120_000, maxRetries: 9 }), 120);
 * ```
 */
export function cloudflareDeadLetterWaitSeconds(
  limits: CloudflareRetentionLimits,
): number {
  return cloudflareLongestWaitSeconds(limits, limits.maxRetries + 1);
}

/**
 * How old a give-up may be, in seconds, when the dead-letter queue
 * delivers it again after a busy answer: a message moves there with its
 * age (Miniflare's queue keeps its send's timestamp, and Cloudflare does
 * not say it starts a new one), so the jobs queue's delivery delay and
 * waits ({@linkcode cloudflareJobsSpanSeconds}) come before the busy
 * give-up's wait ({@linkcode cloudflareDeadLetterWaitSeconds}). The
 * dead-letter queue's retention must exceed it.
 *
 * ```ts
 * import { cloudflareDeadLetterAgeSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDeadLetterAgeSeconds({ baseMs: 5_000, capMs: 120_000, maxRetries: 9 }), 840);
 * ```
 */
export function cloudflareDeadLetterAgeSeconds(
  limits: CloudflareRetentionLimits,
): number {
  return cloudflareJobsSpanSeconds(limits) +
    cloudflareDeadLetterWaitSeconds(limits);
}

/**
 * The longest wait, in seconds, the handler asks on the dead-letter queue:
 * 12 h ({@linkcode CLOUDFLARE_MAX_DELAY_SECONDS}), or, where that queue's
 * retention (`retentionMs`, when given) leaves less, what it leaves a
 * message as old as the jobs queue can make it
 * ({@linkcode cloudflareJobsSpanSeconds}), less a second: its retry comes
 * before the retention ends. That holds whatever the message's `attempts`
 * say there, which Cloudflare does not document for a moved message
 * (Miniflare's queue starts them again at 1; kept, a wait doubled from
 * them would ask up to 12 h at the first delivery there), and whether its
 * age moved with it. A retention the rule takes
 * ({@linkcode cloudflareRetentionRefusal}) leaves at least
 * {@linkcode cloudflareDeadLetterWaitSeconds}, so a busy give-up's own
 * wait is never cut.
 *
 * ```ts
 * import { cloudflareDeadLetterMaxWaitSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * const limits = { baseMs: 5_000, capMs: 120_000, maxRetries: 9 };
 * assert.equal(cloudflareDeadLetterMaxWaitSeconds(limits, undefined), 43_200);
 * assert.equal(cloudflareDeadLetterMaxWaitSeconds(limits, 86_400_000), 43_200);
 * assert.equal(cloudflareDeadLetterMaxWaitSeconds(limits, 3_600_000), 2_879); // 1 h - 12 min - 1 s
 * assert.equal(cloudflareDeadLetterMaxWaitSeconds(limits, 841_000), 120); // the least the rule takes
 * ```
 */
export function cloudflareDeadLetterMaxWaitSeconds(
  limits: CloudflareRetentionLimits,
  retentionMs: number | undefined,
): number {
  if (retentionMs === undefined) return CLOUDFLARE_MAX_DELAY_SECONDS;
  const left = Math.floor(retentionMs / 1000) -
    cloudflareJobsSpanSeconds(limits) - 1;
  return Math.min(CLOUDFLARE_MAX_DELAY_SECONDS, Math.max(1, left));
}

/**
 * The shortest wait, in seconds, the handler asks on the dead-letter queue
 * where that queue's retention is given (`retentionMs`): the one the rule
 * counts after a give-up's arrival there
 * ({@linkcode cloudflareDeadLetterWaitSeconds}), for a give-up that met
 * the store down as for one answered busy; 1 s when it is not given.
 * Cloudflare does not document whether a moved message keeps its
 * `attempts` (Miniflare's queue starts them again at 1): started again, a
 * wait doubled from them begins at the policy's base, and a give-up that
 * fails through an outage as long as that wait is retried several times
 * within it, the next retry (up to
 * {@linkcode cloudflareDeadLetterMaxWaitSeconds}) coming after the
 * retention ends. At least this long, its retry after a failure at its
 * arrival comes after such an outage and, no longer than what the
 * retention leaves, before the retention ends.
 *
 * ```ts
 * import { cloudflareDeadLetterMinWaitSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * const limits = { baseMs: 5_000, capMs: 120_000, maxRetries: 9 };
 * assert.equal(cloudflareDeadLetterMinWaitSeconds(limits, undefined), 1);
 * assert.equal(cloudflareDeadLetterMinWaitSeconds(limits, 841_000), 120); // the policy's cap after delivery 10
 * assert.equal(cloudflareDeadLetterMinWaitSeconds(limits, 1_209_600_000), 120);
 * ```
 */
export function cloudflareDeadLetterMinWaitSeconds(
  limits: CloudflareRetentionLimits,
  retentionMs: number | undefined,
): number {
  if (retentionMs === undefined) return 1;
  return cloudflareDeadLetterWaitSeconds(limits);
}

/**
 * How long a give-up that keeps failing is retried on the dead-letter
 * queue with `retries` retries (the waits the handler asks for, doubled
 * from `baseMs` up to 12 h), in seconds.
 *
 * ```ts
 * import { cloudflareDeadLetterSpanSeconds } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(cloudflareDeadLetterSpanSeconds(3, 5_000), 35); // 5 + 10 + 20
 * ```
 */
export function cloudflareDeadLetterSpanSeconds(
  retries: number,
  baseMs: number,
): number {
  let total = 0;
  for (let attempt = 1; attempt <= retries; attempt++) {
    total += cloudflareDelaySeconds(
      outageDelayMs(attempt, baseMs, CLOUDFLARE_MAX_DELAY_SECONDS * 1000),
    );
  }
  return total;
}

/**
 * The fewest retries of the dead-letter queue whose waits span 14 days,
 * Cloudflare's longest retention, or `undefined` when `retries` do: fewer,
 * a give-up that fails while the store is down is deleted before the
 * store is back, and its intent stranded. The queue handler refuses
 * fewer (`deadLetterMaxRetries`), and so does a Worker's reading of
 * `CLOUDFLARE_DLQ_MAX_RETRIES`.
 *
 * ```ts
 * import { cloudflareDeadLetterRetriesNeeded } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(typeof cloudflareDeadLetterRetriesNeeded(3, 5_000), "number");
 * assert.equal(cloudflareDeadLetterRetriesNeeded(100, 5_000), undefined);
 * ```
 */
export function cloudflareDeadLetterRetriesNeeded(
  retries: number,
  baseMs: number,
): number | undefined {
  const days14 = CLOUDFLARE_MAX_RETENTION_MS / 1000;
  if (cloudflareDeadLetterSpanSeconds(retries, baseMs) >= days14) {
    return undefined;
  }
  let needed = retries;
  while (cloudflareDeadLetterSpanSeconds(needed, baseMs) < days14) needed++;
  return needed;
}

/**
 * What follows "'deadLetterMaxRetries' is " in `createQueueHandler`'s
 * refusal of a dead-letter queue whose `retries` span less than 14 days
 * ({@linkcode cloudflareDeadLetterRetriesNeeded}), or `undefined` where
 * they do; `given` is false for Cloudflare's default of 3, taken where
 * none is given. `deno task schedule --queue cloudflare` prints it too.
 *
 * ```ts
 * import { cloudflareDeadLetterRetriesRefusal } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(cloudflareDeadLetterRetriesRefusal(3, 5_000, false) ?? "", /^3, Cloudflare's default when max_retries is not set: /);
 * assert.equal(cloudflareDeadLetterRetriesRefusal(100, 5_000, true), undefined);
 * ```
 */
export function cloudflareDeadLetterRetriesRefusal(
  retries: number,
  baseMs: number,
  given: boolean,
): string | undefined {
  const needed = cloudflareDeadLetterRetriesNeeded(retries, baseMs);
  if (needed === undefined) return undefined;
  const span = cloudflareDeadLetterSpanSeconds(retries, baseMs);
  return `${retries}${
    given ? "" : ", Cloudflare's default when max_retries is not set"
  }: a give-up that fails while the store is down would be retried for only ${
    formatDuration(span * 1000)
  } (less than 14 days, Cloudflare's longest retention) before Cloudflare deletes it, and its intent would be stranded. Set the dead-letter queue consumer's max_retries in wrangler.toml to at least ${needed} (100 is safe), and pass the same number as deadLetterMaxRetries (the example Worker reads it from CLOUDFLARE_DLQ_MAX_RETRIES)`;
}

/**
 * A retention as a refusal names it: `given`, or, not given, the 24 h it
 * is `counted` as (the least a plan keeps unless set).
 */
function retentionSaid(given: number | undefined, counted: number): string {
  return given === undefined
    ? `not given, so it is counted as ${
      formatDuration(counted)
    }, the Workers Free plan's (fixed there; a paid plan keeps messages 4 days unless set)`
    : formatDuration(counted);
}

/** A retention the handler refuses: which, and why (with what to do). */
export interface CloudflareRetentionRefusal {
  /** The handler's option: `messageRetentionMs` or `deadLetterMessageRetentionMs`. */
  readonly option: "messageRetentionMs" | "deadLetterMessageRetentionMs";
  /** What follows "'option' is ": the retention, why it is short, and the fix. */
  readonly text: string;
}

/**
 * The `wrangler queues update` command a refusal suggests, and why its
 * retention: room past `neededSeconds` for `deliveries` batches, and
 * which plans allow it.
 */
function roomText(
  queue: string,
  neededSeconds: number,
  deliveries: number,
  suggested: number,
): string {
  const allowance = formatDuration(CLOUDFLARE_DELIVERY_ALLOWANCE_MS);
  const full = neededSeconds +
      deliveries * CLOUDFLARE_DELIVERY_ALLOWANCE_MS / 1000 <= suggested;
  const plans = suggested <= CLOUDFLARE_FREE_RETENTION_MS / 1000
    ? "1 day, which every plan allows: the Workers Free plan keeps messages 24 h, fixed; a paid plan 4 days unless set"
    : `${formatDuration(suggested * 1000)}${
      full
        ? ""
        : `, the most Cloudflare allows, which leaves less than ${allowance} a batch`
    }; only a paid plan allows it: the Workers Free plan keeps messages 24 h, fixed`;
  return `up to ${allowance} for each of the ${deliveries} batches it is in (a consumer invocation's wall-clock limit), and a backlog: wrangler queues update ${queue} --message-retention-period-secs ${suggested} (${plans})`;
}

/**
 * The refusal of message retentions that end while the handler may still
 * retry a message there, or `undefined` when both hold. Each not given is
 * counted as {@linkcode CLOUDFLARE_FREE_RETENTION_MS}, the least any plan
 * keeps unless set. Each retention given must be one Cloudflare allows
 * ({@linkcode cloudflareRetentionAllowed}); the caller checks that first.
 *
 * ```ts
 * import { cloudflareRetentionRefusal } from "./_cloudflare_retention.ts";
 * import assert from "node:assert/strict";
 *
 * const limits = { baseMs: 5_000, capMs: 120_000, maxRetries: 9 };
 * const refusal = cloudflareRetentionRefusal(limits, { messageRetentionMs: 600_000 }, "relayer-jobs-dlq");
 * assert.equal(refusal?.option, "messageRetentionMs");
 * assert.match(refusal?.text ?? "", /--message-retention-period-secs 86400 /);
 * assert.equal(cloudflareRetentionRefusal(limits, { messageRetentionMs: 721_000 }, "relayer-jobs-dlq"), undefined);
 * ```
 */
export function cloudflareRetentionRefusal(
  limits: CloudflareRetentionLimits,
  retentions: {
    readonly messageRetentionMs?: number | undefined;
    readonly deadLetterMessageRetentionMs?: number | undefined;
  },
  deadLetterQueue: string,
): CloudflareRetentionRefusal | undefined {
  // Not given, the least any plan keeps a queue's messages unless set:
  // 24 h, fixed on the Workers Free plan (a paid plan keeps 4 days). The
  // handler cannot see the plan, and a job still retried past the
  // retention is deleted with no dead letter: on a paid plan, giving the
  // retention is the way past it.
  const given = retentions.messageRetentionMs;
  const jobs = given ?? CLOUDFLARE_FREE_RETENTION_MS;
  {
    const span = cloudflareJobsSpanSeconds(limits);
    const delay = Math.ceil((limits.deliveryDelayMs ?? 0) / 1000);
    if (jobs / 1000 <= span) {
      const fits = span * 1000 < CLOUDFLARE_MAX_RETENTION_MS;
      const needed = Math.max(CLOUDFLARE_MIN_RETENTION_MS / 1000, span + 1);
      const suggested = cloudflareSuggestedRetentionSeconds(
        needed,
        limits.maxRetries + 1,
      );
      return {
        option: "messageRetentionMs",
        text: `${retentionSaid(given, jobs)}: ${
          delay > 0
            ? `a message's delivery delay (${
              formatDuration(delay * 1000)
            }) and `
            : ""
        }the waits this handler asks between a message's ${
          deliveriesText(limits.maxRetries + 1)
        } (max_retries = ${limits.maxRetries}) span up to ${
          formatDuration(span * 1000)
        } (the policy's backoff, or a busy intent's lease), and Cloudflare deletes a message whose retention ends, with no dead letter: a job still being retried would be lost and its intent stranded. ${
          fits
            ? `Set the jobs queue's message retention above ${
              formatDuration(span * 1000)
            } (the least this check takes is ${
              formatDuration(needed * 1000)
            }), with room: ${
              roomText("<queue>", needed, limits.maxRetries + 1, suggested)
            }, and pass the period set, in milliseconds, as messageRetentionMs (${
              suggested * 1000
            } for ${suggested} s; the example Worker reads it from CLOUDFLARE_MESSAGE_RETENTION as a duration, ${
              formatDuration(suggested * 1000)
            })`
            : `No retention Cloudflare allows (14 days at most) is longer: lower the consumer's max_retries (and maxRetries), the policy's CAP${
              delay > 0
                ? ", the LEASE or the delivery delay (deliveryDelayMs, CLOUDFLARE_DELIVERY_DELAY)"
                : " or the LEASE"
            }`
        }`,
      };
    }
  }
  // The dead-letter queue's, not given, as the jobs queue's: 24 h.
  const deadGiven = retentions.deadLetterMessageRetentionMs;
  const dead = deadGiven ?? CLOUDFLARE_FREE_RETENTION_MS;
  {
    const span = cloudflareJobsSpanSeconds(limits);
    const delay = Math.ceil((limits.deliveryDelayMs ?? 0) / 1000);
    const wait = cloudflareDeadLetterWaitSeconds(limits);
    const age = cloudflareDeadLetterAgeSeconds(limits);
    if (dead / 1000 <= age) {
      const fits = age * 1000 < CLOUDFLARE_MAX_RETENTION_MS;
      const needed = age + 1;
      // The jobs queue's deliveries, then the busy give-up's and its retry's.
      const suggested = cloudflareSuggestedRetentionSeconds(
        needed,
        limits.maxRetries + 3,
      );
      return {
        option: "deadLetterMessageRetentionMs",
        text: `${
          retentionSaid(deadGiven, dead)
        }: a message the queue gives up on may reach the dead-letter queue with its age (counted from its send, as Miniflare's keeps it): ${
          delay > 0
            ? `a message's delivery delay (${
              formatDuration(delay * 1000)
            }) and `
            : ""
        }the waits this handler asks between its ${
          deliveriesText(limits.maxRetries + 1)
        } on the jobs queue (max_retries = ${limits.maxRetries}) span up to ${
          formatDuration(span * 1000)
        }, and a give-up answered busy there (another delivery's lease, such as one whose Worker died mid-send) waits up to ${
          formatDuration(wait * 1000)
        } before it is tried again, so it may be ${
          formatDuration(age * 1000)
        } old, and Cloudflare deletes a message whose retention ends: the give-up would be lost and its intent stranded. ${
          fits
            ? `Set the dead-letter queue's message retention above ${
              formatDuration(age * 1000)
            } (the least this check takes is ${
              formatDuration(needed * 1000)
            }), with room: ${
              roomText(
                deadLetterQueue,
                needed,
                limits.maxRetries + 3,
                suggested,
              )
            }${
              suggested < CLOUDFLARE_MAX_RETENTION_MS / 1000
                ? `; on a paid plan, 14 days (${
                  CLOUDFLARE_MAX_RETENTION_MS / 1000
                }) outlasts a longer outage`
                : ""
            }, and pass the period set, in milliseconds, as deadLetterMessageRetentionMs (${
              suggested * 1000
            } for ${suggested} s; the example Worker reads it from CLOUDFLARE_DLQ_MESSAGE_RETENTION as a duration, ${
              formatDuration(suggested * 1000)
            })`
            : "No retention Cloudflare allows (14 days at most) is longer: lower the consumer's max_retries (and maxRetries), the policy's CAP or the LEASE"
        }`,
      };
    }
  }
  return undefined;
}
