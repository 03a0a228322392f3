/**
 * A library user who checks a Pub/Sub subscription with `checkQueue` and
 * gives no `ackDeadlineMs` runs on a subscription whose ack deadline is
 * Pub/Sub's default, 10 s, also its least: a push the endpoint does not
 * answer in time fails only then, and the next comes a backoff later. The
 * check used to count such a push as taking no time at all, and so took a
 * retention that ten 10 s pushes 10 min apart and a busy last one outlive:
 * the message expired before the push that would have resolved it, and
 * the payment was left settling with no job and no dead letter.
 *
 * Pub/Sub is modelled as the check models it at its worst: each failed
 * push takes the subscription's ack deadline and the maximum backoff
 * before the next, and a message is pushed only while it is retained.
 *
 * @module
 */

import { checkQueue, DEFAULT_POLICY } from "../../mod.ts";
import { DEFAULT_LEASE_MS } from "../../relayer/_sends.ts";
import { theGoogle } from "./_app.ts";
import { job } from "./_late_copy.ts";
import { PUBSUB } from "./_signing.ts";
import {
  assertNotStranded,
  pushesWhileRetained,
  settlingService,
} from "./_stranded.ts";

/** Pub/Sub's ack deadline where a subscription sets none, and its least. */
const PUBSUB_DEFAULT_ACK_DEADLINE_MS = 10_000;
/** The relayer's default lease, which the check counts when not given. */
const LEASE_MS = DEFAULT_LEASE_MS;

Deno.test("a Pub/Sub retention checkQueue takes with no ackDeadlineMs outlasts ten pushes at Pub/Sub's default 10 s ack deadline and a busy last one: the intent is resolved, never stranded", async () => {
  const queue = {
    kind: "pubsub",
    minBackoffMs: 40_000,
    maxBackoffMs: 600_000,
  } as const;
  // The smallest whole-second retention the check takes.
  let retentionMs = 600_000;
  while (
    checkQueue(DEFAULT_POLICY, { ...queue, retentionMs }).problem !== null
  ) retentionMs += 1_000;

  const g = await theGoogle();
  const { app, clock, store } = await settlingService(job.intentId, {
    log: () => {},
    policy: DEFAULT_POLICY,
    leaseMs: LEASE_MS,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });

  const { answers } = await pushesWhileRetained(app, {
    clock,
    published: clock.now,
    retentionMs,
    stepMs: PUBSUB_DEFAULT_ACK_DEADLINE_MS + queue.maxBackoffMs,
    messageId: "5001",
    store,
    // Another instance's delivery wrote ahead of a send and was killed.
    killAt: DEFAULT_POLICY.maxDeliveries,
    leaseMs: LEASE_MS,
  });

  await assertNotStranded(
    store,
    job.intentId,
    `a retention of ${retentionMs} ms`,
    answers,
  );
});
