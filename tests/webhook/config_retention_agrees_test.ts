/**
 * The service's start check and the library's `checkQueue` agree on a
 * Pub/Sub retention: fed the same policy and the same numbers (the ack
 * deadline the service counts, `LEASE`, `CLOCK_SKEW`), `checkQueue` says
 * `stops_early` exactly when `loadConfig` refuses the retention or the
 * dead-letter policy's attempts. A library user who checks a queue with
 * `checkQueue` is told what the service would say.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { checkQueue, definePolicy, type QueueLimits } from "../../mod.ts";
import { loadConfig } from "../../webhook/config.ts";
import { runs } from "../_fc.ts";
import { refusedSetting } from "./_config.ts";

Deno.test("checkQueue() stops a Pub/Sub queue early exactly when the service refuses its retention or attempts, with the same policy, LEASE and CLOCK_SKEW", () => {
  const settings = fc.record({
    maxDeliveries: fc.integer({ min: 4, max: 30 }),
    senderTimeoutS: fc.integer({ min: 1, max: 60 }),
    extraLeaseS: fc.integer({ min: 0, max: 600 }),
    clockSkewS: fc.integer({ min: 0, max: 5 }),
    maxBackoffS: fc.integer({ min: 60, max: 600 }),
    attempts: fc.option(fc.integer({ min: 5, max: 100 }), { nil: undefined }),
    // Around the retention the service needs, in steps of a push and a backoff.
    offset: fc.double({ min: -2, max: 2, noNaN: true }),
  });
  let refusedRetention = 0;
  let takenNearIt = 0;
  fc.assert(
    fc.property(settings, (s) => {
      const leaseMs = (2 * s.senderTimeoutS + s.extraLeaseS) * 1000;
      const clockSkewMs = s.clockSkewS * 1000;
      const maxBackoffMs = s.maxBackoffS * 1000;
      // The ack deadline the service counts: 2 × SENDER_TIMEOUT + 5s, at
      // least 10s (Pub/Sub's least).
      const ackDeadlineMs = Math.max(
        10_000,
        2 * s.senderTimeoutS * 1000 + 5000,
      );
      const stepMs = ackDeadlineMs + maxBackoffMs;
      const needMs = s.maxDeliveries * stepMs + leaseMs + 2 * clockSkewMs;
      const retentionMs = Math.min(
        2_678_400_000,
        Math.max(600_000, Math.round(needMs + s.offset * stepMs)),
      );
      const env: Record<string, string> = {
        SENDER_URL: "http://127.0.0.1:9000",
        PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
        PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
        MAX_DELIVERIES: String(s.maxDeliveries),
        STUCK_AFTER: "1s",
        SENDER_TIMEOUT: `${s.senderTimeoutS}s`,
        LEASE: `${leaseMs}ms`,
        CLOCK_SKEW: `${clockSkewMs}ms`,
        // Gaps of the maximum backoff: the window is never what is refused.
        PUBSUB_MIN_BACKOFF: `${maxBackoffMs}ms`,
        PUBSUB_MAX_BACKOFF: `${maxBackoffMs}ms`,
        PUBSUB_MESSAGE_RETENTION: `${retentionMs}ms`,
        ...(s.attempts === undefined ? {} : {
          PUBSUB_MAX_DELIVERY_ATTEMPTS: String(s.attempts),
          PUBSUB_DEAD_LETTER_AUDIENCE:
            "https://relayer.example.test/v1/pubsub/dead",
        }),
      };
      const setting = refusedSetting(env);
      // Only the queue's limits are compared here.
      fc.pre(
        setting === null || setting === "PUBSUB_MESSAGE_RETENTION" ||
          setting === "PUBSUB_MAX_DELIVERY_ATTEMPTS",
      );
      const queue = {
        kind: "pubsub" as const,
        ...(s.attempts === undefined
          ? {}
          : { maxDeliveryAttempts: s.attempts }),
        minBackoffMs: maxBackoffMs,
        maxBackoffMs,
        retentionMs,
        ackDeadlineMs,
        leaseMs,
        clockSkewMs,
      };
      const policy = definePolicy({
        maxDeliveries: s.maxDeliveries,
        stuckAfterMs: 1000,
      });
      const check = checkQueue(policy, queue as QueueLimits);
      // The settings the service read are the queue checked here.
      if (setting === null) {
        assert.deepEqual(loadConfig(env).queues.pubsub, queue);
      }
      if (setting === "PUBSUB_MESSAGE_RETENTION") refusedRetention++;
      else if (retentionMs > needMs - stepMs) takenNearIt++;
      assert.equal(
        check.problem === "stops_early",
        setting !== null,
        `${
          JSON.stringify(queue)
        }: checkQueue says ${check.problem}, loadConfig ${
          setting === null ? "takes it" : `refuses ${setting}`
        }`,
      );
    }),
    { numRuns: runs(1000) },
  );
  // Both sides of the line were reached.
  assert.ok(refusedRetention > 0 && takenNearIt > 0);
});
