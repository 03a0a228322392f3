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

import assert from "node:assert/strict";
import {
  checkQueue,
  DEFAULT_POLICY,
  MemoryStore,
  ScriptedSender,
} from "../../mod.ts";
import { DEFAULT_LEASE_MS } from "../../relayer/_sends.ts";
import { createApp } from "../../webhook/app.ts";
import { theGoogle } from "./_app.ts";
import { job, pubsubPush } from "./_late_copy.ts";
import { PUBSUB } from "./_signing.ts";

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

  const store = new MemoryStore();
  await store.createIntent({
    id: job.intentId,
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    [job.intentId]: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
  });
  const clock = { now: 1_000_000 };
  const published = clock.now;
  const g = await theGoogle();
  const app = createApp({
    log: () => {},
    store,
    sender,
    policy: DEFAULT_POLICY,
    leaseMs: LEASE_MS,
    now: () => clock.now,
    random: () => 0,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });

  const stepMs = PUBSUB_DEFAULT_ACK_DEADLINE_MS + queue.maxBackoffMs;
  const answers: string[] = [];
  for (let push = 1;; push++) {
    clock.now = published + (push - 1) * stepMs;
    if (clock.now - published >= retentionMs) {
      answers.push(`expired before push ${push}`);
      break;
    }
    if (push === DEFAULT_POLICY.maxDeliveries) {
      // Another instance's delivery wrote ahead of a send and was killed.
      const intent = (await store.getIntent(job.intentId))!;
      await store.beginBroadcast(intent.id, intent.version, clock.now, {
        lease: { owner: "killed", ttlMs: LEASE_MS, now: clock.now, keep: true },
      });
    }
    const res = await app.request(
      "/v1/pubsub",
      await pubsubPush("5001", "2026-12-05T10:00:00.000Z", undefined),
    );
    answers.push(`${push}: ${res.status}`);
    await res.body?.cancel();
    if (res.status === 204) break;
  }

  const intent = (await store.getIntent(job.intentId))!;
  const letter = await store.getDeadLetter(`${job.intentId}/settle`);
  assert.ok(
    ["settled", "failed", "needs_review"].includes(intent.state) ||
      letter !== null,
    `stranded: ${intent.state}, no dead letter, with a retention of ${retentionMs} ms (${
      answers.join(", ")
    })`,
  );
});
