/**
 * What a Pub/Sub message retention must hold: one rule, shared by
 * `checkQueue` and the service's start check.
 *
 * @module
 */

/**
 * The lease counted when a queue does not give one: the relayer's default
 * (`createRelayer`'s `leaseMs`, the service's `LEASE`), which the relayer
 * takes from here (its `DEFAULT_LEASE_MS`), as the policy cannot import it.
 */
export const DEFAULT_QUEUE_LEASE_MS = 30_000;

/**
 * The clock skew counted when a queue does not give one: the relayer's
 * default (`createRelayer`'s `clockSkewMs`, the service's `CLOCK_SKEW`),
 * which the relayer takes from here (its `DEFAULT_CLOCK_SKEW_MS`).
 */
export const DEFAULT_QUEUE_CLOCK_SKEW_MS = 5_000;

/**
 * The ack deadline counted when a queue does not give one: Pub/Sub's own
 * where a subscription sets none, and the least it takes (10 s). A push
 * the endpoint does not answer in time fails only then, so no push is
 * counted shorter.
 */
export const DEFAULT_QUEUE_ACK_DEADLINE_MS = 10_000;

/**
 * How long a Pub/Sub subscription keeps a message unless set: 7 days
 * (`message_retention_duration`'s default). Counted where the service is
 * not told the retention and no dead-letter policy gives up first.
 */
export const PUBSUB_DEFAULT_RETENTION_MS = 604_800_000;

/**
 * The longest a delivery (or a give-up) is answered busy behind another
 * delivery's lease (one killed mid-send holds it): `leaseMs` + 2 ×
 * `clockSkewMs`, 30000 and 5000 when absent, the relayer's defaults.
 *
 * ```ts ignore
 * busyWaitMs({}); // 40_000
 * ```
 */
export function busyWaitMs(
  limits: {
    readonly leaseMs?: number | undefined;
    readonly clockSkewMs?: number | undefined;
  },
): number {
  return (limits.leaseMs ?? DEFAULT_QUEUE_LEASE_MS) +
    2 * (limits.clockSkewMs ?? DEFAULT_QUEUE_CLOCK_SKEW_MS);
}

/** The Pub/Sub limits the retention rule reads. */
export interface RetentionLimits {
  readonly maxBackoffMs: number;
  readonly retentionMs?: number;
  readonly ackDeadlineMs?: number;
  readonly leaseMs?: number;
  readonly clockSkewMs?: number;
}

/**
 * The longest from one failed push to the next: the push itself (up to
 * `ackDeadlineMs`, 10 s when absent) and the backoff after it (up to
 * `maxBackoffMs`).
 */
export function retentionStepMs(queue: RetentionLimits): number {
  return (queue.ackDeadlineMs ?? DEFAULT_QUEUE_ACK_DEADLINE_MS) +
    queue.maxBackoffMs;
}

/**
 * The deliveries that surely come before the retention ends: delivery `k`
 * comes at most `(k − 1) × step` after the first, which Pub/Sub sends as it
 * is published. `Infinity` with no retention, or when no step takes time.
 *
 * ```ts ignore
 * retentionFits({ maxBackoffMs: 600_000, retentionMs: 3_600_000 }); // 6
 * ```
 */
export function retentionFits(queue: RetentionLimits): number {
  const stepMs = retentionStepMs(queue);
  if (queue.retentionMs === undefined || stepMs === 0) return Infinity;
  return Math.ceil(queue.retentionMs / stepMs);
}

/**
 * The retention a message needs, which it must exceed, so that a job of
 * `maxDeliveries` is resolved before it expires: a delivery answers busy
 * at and past the last while another's lease stands (up to `leaseMs` +
 * 2 × `clockSkewMs`), and only a push after that resolves the intent. So
 * `maxDeliveries` steps, that wait, and nothing less:
 * `maxDeliveries × (ackDeadlineMs + maxBackoffMs) + leaseMs + 2 × clockSkewMs`.
 *
 * ```ts ignore
 * retentionNeedMs({ maxBackoffMs: 600_000, ackDeadlineMs: 25_000 }, 10); // 6_290_000
 * ```
 */
export function retentionNeedMs(
  queue: RetentionLimits,
  maxDeliveries: number,
): number {
  return maxDeliveries * retentionStepMs(queue) + busyWaitMs(queue);
}

/**
 * When a dead-letter policy of `maxDeliveryAttempts` surely knows its last
 * attempt failed, from the first delivery: that attempt comes at most
 * `(maxDeliveryAttempts − 1) × step` after it, and its push may take up to
 * `ackDeadlineMs`. Only then does Pub/Sub forward the message to the
 * dead-letter topic; a retention that ends first drops it instead.
 * `Infinity` with no dead-letter policy.
 *
 * ```ts ignore
 * deadLetterEndMs({ maxBackoffMs: 600_000, ackDeadlineMs: 25_000, maxDeliveryAttempts: 10 }); // 5_650_000
 * ```
 */
export function deadLetterEndMs(
  queue: RetentionLimits & { readonly maxDeliveryAttempts?: number },
): number {
  if (queue.maxDeliveryAttempts === undefined) return Infinity;
  return (queue.maxDeliveryAttempts - 1) * retentionStepMs(queue) +
    (queue.ackDeadlineMs ?? DEFAULT_QUEUE_ACK_DEADLINE_MS);
}

/**
 * The retention a refusal names, which the retention must exceed: with a
 * dead-letter policy of at least `maxDeliveries` attempts, the earlier of
 * {@linkcode deadLetterEndMs} and {@linkcode retentionNeedMs} (past
 * either, {@linkcode retentionShort} is false); else the latter (fewer
 * attempts stop the job early whatever the retention).
 *
 * ```ts ignore
 * const queue = { maxBackoffMs: 600_000, ackDeadlineMs: 25_000, maxDeliveryAttempts: 10 };
 * retentionEnoughMs(queue, 10); // 5_650_000, not retentionNeedMs's 6_290_000
 * ```
 */
export function retentionEnoughMs(
  queue: RetentionLimits & { readonly maxDeliveryAttempts?: number },
  maxDeliveries: number,
): number {
  const needMs = retentionNeedMs(queue, maxDeliveries);
  return (queue.maxDeliveryAttempts ?? 0) >= maxDeliveries
    ? Math.min(deadLetterEndMs(queue), needMs)
    : needMs;
}

/**
 * Whether the retention may end before the job is resolved, with no
 * dead-letter policy giving up first: its last attempt's push does not
 * surely end within the retention ({@linkcode deadLetterEndMs}, or there
 * is no policy), and the retention is no more than
 * {@linkcode retentionNeedMs}. The message is then dropped with no dead
 * letter and no give-up route.
 */
export function retentionShort(
  queue: RetentionLimits & { readonly maxDeliveryAttempts?: number },
  maxDeliveries: number,
): boolean {
  return queue.retentionMs !== undefined &&
    queue.retentionMs <= deadLetterEndMs(queue) &&
    queue.retentionMs <= retentionNeedMs(queue, maxDeliveries);
}
