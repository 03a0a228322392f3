/**
 * A Pub/Sub subscription without a dead-letter policy has no give-up
 * route: its message retention is its only limit, and a message that
 * outlives it is dropped with no signal. A delivery answers busy even at
 * and past `MAX_DELIVERIES` (DESIGN §13), so the retention the start-up
 * check accepts must leave room, after the last delivery, for a lease
 * held by a delivery that crashed mid-send to lapse (`LEASE` and twice
 * `CLOCK_SKEW`, as a busy answer waits at most) and for one more push,
 * which resolves the intent. The check used to take a retention that
 * fits exactly `MAX_DELIVERIES` pushes: a busy last one, and the payment
 * was left settling with no job and no dead letter.
 *
 * Pub/Sub is modelled as the check models it at its worst: each failed
 * push takes the ack deadline the check counts and the maximum backoff
 * before the next, and a message is pushed only while it is retained.
 *
 * @module
 */

import assert from "node:assert/strict";
import { loadConfig } from "../../webhook/config.ts";
import { DEAD_LETTER_AUDIENCE, theGoogle } from "./_app.ts";
import { job } from "./_late_copy.ts";
import { PUBSUB } from "./_signing.ts";
import {
  assertNotStranded,
  pushesWhileRetained,
  settlingService,
} from "./_stranded.ts";

/** The smallest whole-second retention `loadConfig` takes with `env`, from 10m. */
function smallestRetentionS(env: Record<string, string>): number {
  for (let s = 600;; s++) {
    try {
      loadConfig({ ...env, PUBSUB_MESSAGE_RETENTION: `${s}s` });
      return s;
    } catch {
      // refused: one second more
    }
  }
}

/**
 * The service `loadConfig` makes of `env` (with the Pub/Sub route, a 40s
 * minimum backoff and the smallest retention it takes), on a store whose
 * intent is authorized and whose send is `0xabc`, its receipt pending;
 * its clock at the message's publish time.
 */
async function atSmallestRetention(env: Record<string, string>) {
  const full = {
    SENDER_URL: "http://127.0.0.1:9000",
    PUBSUB_AUDIENCE: PUBSUB.audience,
    PUBSUB_SERVICE_ACCOUNT: PUBSUB.serviceAccount,
    PUBSUB_MIN_BACKOFF: "40s",
    ...env,
  };
  const retentionMs = smallestRetentionS(full) * 1000;
  const config = loadConfig({
    ...full,
    PUBSUB_MESSAGE_RETENTION: `${retentionMs / 1000}s`,
  });
  const { policy, leaseMs, clockSkewMs } = config;
  const g = await theGoogle();
  const keys = { jwks: g.jwks, serviceAccount: PUBSUB.serviceAccount };
  const lines: string[] = [];
  const { app, clock, store } = await settlingService(job.intentId, {
    log: (line) => lines.push(line),
    policy,
    leaseMs,
    clockSkewMs,
    pubsub: { audience: PUBSUB.audience, ...keys },
    // The dead-letter route only where the config declares one.
    ...(config.pubsubDeadLetter === undefined
      ? {}
      : { pubsubDeadLetter: { audience: DEAD_LETTER_AUDIENCE, ...keys } }),
  });
  return {
    app,
    clock,
    config,
    lines,
    published: clock.now,
    retentionMs,
    store,
  };
}

for (
  const [name, backoff] of [
    ["the 10m retention 40s backoffs fit ten pushes in", "40s"],
    ["Google's default maximum backoff", "10m"],
  ] as const
) {
  Deno.test(`a Pub/Sub retention the start-up check takes outlasts a busy last delivery (${name}): the intent is resolved, never stranded`, async () => {
    const { app, clock, config, lines, published, retentionMs, store } =
      await atSmallestRetention({ PUBSUB_MAX_BACKOFF: backoff });
    const { policy, leaseMs } = config;
    const { ackDeadlineMs = 0, maxBackoffMs } = config.queues.pubsub;
    const stepMs = ackDeadlineMs + maxBackoffMs;

    const { answers } = await pushesWhileRetained(app, {
      clock,
      published,
      retentionMs,
      stepMs,
      messageId: "3001",
      store,
      killAt: policy.maxDeliveries,
      leaseMs,
    });

    await assertNotStranded(
      store,
      job.intentId,
      `a retention of ${retentionMs} ms`,
      answers,
      `; last line: ${lines.at(-1)}`,
    );
  });
}

Deno.test("a Pub/Sub retention the start-up check takes with a dead-letter policy outlasts its last attempt's push: a busy last delivery is dead-lettered and resolved, never stranded", async () => {
  // The check takes a dead-letter policy for the give-up where its
  // attempts end within the retention. Pub/Sub forwards the message once
  // the last attempt's push failed, and that push may take the ack
  // deadline: a retention that ends within it drops the message with no
  // dead letter. It used to take one that fits the last attempt's start.
  const { app, clock, config, published, retentionMs, store } =
    await atSmallestRetention({
      PUBSUB_MAX_BACKOFF: "10m",
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
      PUBSUB_DEAD_LETTER_AUDIENCE: DEAD_LETTER_AUDIENCE,
    });
  const { leaseMs } = config;
  const { ackDeadlineMs = 0, maxBackoffMs, maxDeliveryAttempts = 0 } =
    config.queues.pubsub;
  const stepMs = ackDeadlineMs + maxBackoffMs;
  const g = await theGoogle();

  const { answers, acked } = await pushesWhileRetained(app, {
    clock,
    published,
    retentionMs,
    stepMs,
    messageId: "3002",
    store,
    killAt: maxDeliveryAttempts,
    leaseMs,
  }, { lastPush: maxDeliveryAttempts, attempts: true });
  assert.equal(answers.at(-1), `${maxDeliveryAttempts}: 503`, "a busy last");
  // The last attempt's push fails at worst after the ack deadline; only
  // then is the message forwarded, if it is still retained.
  const failedAt = published + (maxDeliveryAttempts - 1) * stepMs +
    ackDeadlineMs;
  if (!acked && failedAt - published < retentionMs) {
    // The dead-letter subscription pushes the forwarded message until its
    // give-up answers 2xx (busy while the lease stands).
    clock.now = failedAt;
    for (let push = 1; push <= 20; push++) {
      const res = await app.request("/v1/pubsub/dead-letter", {
        method: "POST",
        body: JSON.stringify({
          message: {
            data: btoa(JSON.stringify(job)),
            messageId: "4002",
            publishTime: "2026-12-05T12:00:00.000Z",
            attributes: {
              CloudPubSubDeadLetterSourceDeliveryCount: String(
                maxDeliveryAttempts,
              ),
            },
          },
          subscription: "projects/p/subscriptions/relayer-dead-letter",
        }),
        headers: {
          authorization: `Bearer ${await g.token({
            aud: DEAD_LETTER_AUDIENCE,
          })}`,
        },
      });
      answers.push(`dead letter ${push}: ${res.status}`);
      await res.body?.cancel();
      if (res.status === 204) break;
      clock.now += stepMs;
    }
  } else if (!acked) {
    answers.push("expired before it was dead-lettered");
  }

  await assertNotStranded(
    store,
    job.intentId,
    `a retention of ${retentionMs} ms`,
    answers,
  );
});
