/**
 * A dead-letter policy gives up before a retention ends only once its last
 * attempt's push surely ended: `(maxDeliveryAttempts − 1) × (ackDeadlineMs +
 * maxBackoffMs) + ackDeadlineMs` after the first delivery. With no ack
 * deadline given, `checkQueue` counts Pub/Sub's default (and least), 10 s,
 * in the last push too, not only in the steps before it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { checkQueue, DEFAULT_POLICY, type QueueLimits } from "../../mod.ts";

/** 10 attempts, 10 min apart at most, each push counted 10 s. */
const queue = {
  kind: "pubsub",
  minBackoffMs: 40_000,
  maxBackoffMs: 600_000,
  maxDeliveryAttempts: 10,
} as const satisfies QueueLimits;

Deno.test("checkQueue() counts a dead-letter policy's last push at the default 10s ack deadline: 9 × (10s + 10m) + 10s", () => {
  const endMs = 9 * (10_000 + 600_000) + 10_000;
  assert.equal(
    checkQueue(DEFAULT_POLICY, { ...queue, retentionMs: endMs }).problem,
    "stops_early",
  );
  assert.equal(
    checkQueue(DEFAULT_POLICY, { ...queue, retentionMs: endMs + 1 }).problem,
    null,
  );
});
