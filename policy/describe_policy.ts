/**
 * A policy in one line, for logs and start-up banners.
 *
 * @module
 */

import { formatDuration } from "./format_duration.ts";
import { definePolicy, type Policy } from "./policy.ts";
import { queueLimit, type QueueLimits } from "./queue.ts";

function deliveries(n: number): string {
  return n === 1 ? "1 delivery" : `${n} deliveries`;
}

/** The queue's half of the line: its own limit, and whose delays apply. */
function describeQueue(queue: QueueLimits): string {
  const limit = queueLimit(queue); // checks the limits
  switch (queue.kind) {
    case "qstash":
      return `on QStash: at most ${
        deliveries(limit)
      } (retries ${queue.retries}), our delays up to 1 day`;
    case "pubsub": {
      const backoff = `its own backoff ${
        formatDuration(queue.minBackoffMs)
      } to ${formatDuration(queue.maxBackoffMs)}`;
      return queue.maxDeliveryAttempts === undefined
        ? `on Pub/Sub: no dead-letter policy, ${backoff}`
        : `on Pub/Sub: at most ${
          deliveries(limit)
        } (max delivery attempts ${queue.maxDeliveryAttempts}), ${backoff}`;
    }
    case "cloudflare":
      return `on Cloudflare Queues: at most ${
        deliveries(limit)
      } (max retries ${queue.maxRetries}), our delays up to 12h`;
    case "kv":
      return "on the local KV queue: no limit, our delays";
  }
}

/**
 * Describes a policy in one line: `"at most 3 deliveries; back off 5s
 * doubling, capped at 2m0s"`, followed by `", equal jitter"` or
 * `", full jitter"` when jitter is on. With a queue, `"; on <queue>: …"`
 * follows: the queue's own limit and whose delays apply.
 *
 * @param policy The policy to describe.
 * @param queue The queue that delivers the job, if it matters.
 * @returns One line of text.
 * @throws {RangeError} If a queue limit is out of its range, or a number
 * in the policy is (as {@linkcode definePolicy} checks it).
 * @throws {TypeError} If the policy is not one (as {@linkcode definePolicy} checks it).
 *
 * @example The default policy, alone and on QStash
 * ```ts
 * import { DEFAULT_POLICY, describePolicy } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   describePolicy(DEFAULT_POLICY),
 *   "at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter",
 * );
 * assert.equal(
 *   describePolicy(DEFAULT_POLICY, { kind: "qstash", retries: 4 }),
 *   "at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter" +
 *     "; on QStash: at most 5 deliveries (retries 4), our delays up to 1 day",
 * );
 * ```
 */
export function describePolicy(policy: Policy, queue?: QueueLimits): string {
  policy = definePolicy(policy); // what decide would use, or its error
  const jitter = policy.jitter === "none" ? "" : `, ${policy.jitter} jitter`;
  // A base at or above the cap never doubles: every delay is the cap.
  const delays = policy.baseMs >= policy.capMs
    ? formatDuration(policy.capMs)
    : `${formatDuration(policy.baseMs)} doubling, capped at ${
      formatDuration(policy.capMs)
    }`;
  const line = `at most ${
    deliveries(policy.maxDeliveries)
  }; back off ${delays}${jitter}`;
  return queue === undefined ? line : `${line}; ${describeQueue(queue)}`;
}
