/**
 * What QStash's failure callback must outlast: one rule, shared by
 * `checkQueue`, the service's start check and `deno task schedule`.
 *
 * @module
 */

import { busyWaitMs } from "./_retention.ts";

/** QStash waits at most a day before a retry. */
const QSTASH_MAX_BACKOFF_S = 86_400;

/** The QStash limits the failure-callback rule reads. */
export interface CallbackLimits {
  readonly retries: number;
  readonly leaseMs?: number;
  readonly clockSkewMs?: number;
}

/**
 * How long after a failure callback's first call QStash's last retry of it
 * comes, at the least: QStash retries a failure callback as many times as
 * the message (`retries`), on its own backoff when the answer carries no
 * `Retry-After`, min(1 day, e^(2.5 n)) s before the n-th (taken in whole
 * seconds: 12 s, 2 min 28 s, 30 min 8 s, …).
 *
 * ```ts ignore
 * qstashCallbackSpanMs(1); // 12_000
 * qstashCallbackSpanMs(2); // 160_000
 * ```
 */
export function qstashCallbackSpanMs(retries: number): number {
  let spanS = 0;
  for (let n = 1; n <= retries; n++) {
    spanS += Math.min(QSTASH_MAX_BACKOFF_S, Math.floor(Math.exp(2.5 * n)));
  }
  return spanS * 1000;
}

/**
 * Whether QStash's retries of a failure callback may all come while a
 * give-up is answered busy ({@linkcode busyWaitMs}; a busy give-up sends
 * no `Retry-After`): the callback then ends in QStash's DLQ, and its
 * intent is stranded.
 */
export function qstashCallbackShort(queue: CallbackLimits): boolean {
  return qstashCallbackSpanMs(queue.retries) <= busyWaitMs(queue);
}

/**
 * The fewest retries, from `queue.retries` up to 100, whose failure
 * callback outlasts a busy give-up; `Infinity` if none.
 */
export function qstashRetriesNeed(queue: CallbackLimits): number {
  for (let retries = queue.retries; retries <= 100; retries++) {
    if (!qstashCallbackShort({ ...queue, retries })) return retries;
  }
  return Infinity;
}

/**
 * `QSTASH_RETRIES` unset: `maxDeliveries − 1` (up to 100), or the fewest
 * above it whose failure callback outlasts a busy give-up
 * ({@linkcode qstashRetriesNeed}), so the service and `deno task schedule`
 * never refuse their own default (where none outlasts it, `maxDeliveries −
 * 1`, and the refusal names LEASE).
 *
 * ```ts ignore
 * qstashDefaultRetries(10, {}); // 9
 * qstashDefaultRetries(2, {}); // 2: one retry comes 12 s on, within a 40 s busy give-up
 * ```
 */
export function qstashDefaultRetries(
  maxDeliveries: number,
  limits: Omit<CallbackLimits, "retries">,
): number {
  const retries = Math.min(100, maxDeliveries - 1);
  const need = qstashRetriesNeed({ ...limits, retries });
  return Number.isFinite(need) ? need : retries;
}
