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
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { loadConfig } from "../../webhook/config.ts";
import { DEAD_LETTER_AUDIENCE, theGoogle } from "./_app.ts";
import { PUBSUB } from "./_signing.ts";

const job = { intentId: "pi_0004", kind: "settle" } as const;

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

for (
  const [name, backoff] of [
    ["the 10m retention 40s backoffs fit ten pushes in", "40s"],
    ["Google's default maximum backoff", "10m"],
  ] as const
) {
  Deno.test(`a Pub/Sub retention the start-up check takes outlasts a busy last delivery (${name}): the intent is resolved, never stranded`, async () => {
    const env = {
      SENDER_URL: "http://127.0.0.1:9000",
      PUBSUB_AUDIENCE: PUBSUB.audience,
      PUBSUB_SERVICE_ACCOUNT: PUBSUB.serviceAccount,
      PUBSUB_MIN_BACKOFF: "40s",
      PUBSUB_MAX_BACKOFF: backoff,
    };
    const retentionMs = smallestRetentionS(env) * 1000;
    const config = loadConfig({
      ...env,
      PUBSUB_MESSAGE_RETENTION: `${retentionMs / 1000}s`,
    });
    const { policy, leaseMs, clockSkewMs } = config;
    const { ackDeadlineMs = 0, maxBackoffMs } = config.queues.pubsub;
    const stepMs = ackDeadlineMs + maxBackoffMs;

    const store = new MemoryStore();
    await store.createIntent({
      id: job.intentId,
      state: "authorized",
      hold: "pending",
    });
    const sender = new ScriptedSender({
      [job.intentId]: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
    });
    const published = 1_000_000;
    const clock = { now: published };
    const g = await theGoogle();
    const lines: string[] = [];
    const app = createApp({
      log: (line) => lines.push(line),
      store,
      sender,
      policy,
      leaseMs,
      clockSkewMs,
      now: () => clock.now,
      random: () => 0,
      pubsub: {
        audience: PUBSUB.audience,
        jwks: g.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
    });

    const answers: string[] = [];
    for (let push = 1;; push++) {
      clock.now = published + (push - 1) * stepMs;
      if (clock.now - published >= retentionMs) {
        answers.push(`expired before push ${push}`);
        break;
      }
      if (push === policy.maxDeliveries) {
        // Another instance's delivery of a copy wrote ahead of a send just
        // now and was killed: its lease stands until it lapses.
        const intent = (await store.getIntent(job.intentId))!;
        await store.beginBroadcast(intent.id, intent.version, clock.now, {
          lease: {
            owner: "killed",
            ttlMs: leaseMs,
            now: clock.now,
            keep: true,
          },
        });
      }
      const res = await app.request("/v1/pubsub", {
        method: "POST",
        body: JSON.stringify({
          message: {
            data: btoa(JSON.stringify(job)),
            messageId: "3001",
            publishTime: "2026-12-05T10:00:00.000Z",
          },
          subscription: "projects/p/subscriptions/relayer",
        }),
        headers: { authorization: `Bearer ${await g.token()}` },
      });
      answers.push(`${push}: ${res.status}`);
      await res.body?.cancel();
      if (res.status === 204) break; // acked: done or poisoned
    }

    const intent = (await store.getIntent(job.intentId))!;
    const letter = await store.getDeadLetter(`${job.intentId}/settle`);
    assert.ok(
      ["settled", "failed", "needs_review"].includes(intent.state) ||
        letter !== null,
      `stranded: ${intent.state}, no dead letter, with a retention of ${retentionMs} ms (${
        answers.join(", ")
      }; last line: ${lines.at(-1)})`,
    );
  });
}

Deno.test("a Pub/Sub retention the start-up check takes with a dead-letter policy outlasts its last attempt's push: a busy last delivery is dead-lettered and resolved, never stranded", async () => {
  // The check takes a dead-letter policy for the give-up where its
  // attempts end within the retention. Pub/Sub forwards the message once
  // the last attempt's push failed, and that push may take the ack
  // deadline: a retention that ends within it drops the message with no
  // dead letter. It used to take one that fits the last attempt's start.
  const env = {
    SENDER_URL: "http://127.0.0.1:9000",
    PUBSUB_AUDIENCE: PUBSUB.audience,
    PUBSUB_SERVICE_ACCOUNT: PUBSUB.serviceAccount,
    PUBSUB_MIN_BACKOFF: "40s",
    PUBSUB_MAX_BACKOFF: "10m",
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10",
    PUBSUB_DEAD_LETTER_AUDIENCE: DEAD_LETTER_AUDIENCE,
  };
  const retentionMs = smallestRetentionS(env) * 1000;
  const config = loadConfig({
    ...env,
    PUBSUB_MESSAGE_RETENTION: `${retentionMs / 1000}s`,
  });
  const { policy, leaseMs, clockSkewMs } = config;
  const { ackDeadlineMs = 0, maxBackoffMs, maxDeliveryAttempts = 0 } =
    config.queues.pubsub;
  const stepMs = ackDeadlineMs + maxBackoffMs;

  const store = new MemoryStore();
  await store.createIntent({
    id: job.intentId,
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    [job.intentId]: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
  });
  const published = 1_000_000;
  const clock = { now: published };
  const g = await theGoogle();
  const app = createApp({
    store,
    sender,
    policy,
    leaseMs,
    clockSkewMs,
    now: () => clock.now,
    random: () => 0,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
    pubsubDeadLetter: {
      audience: DEAD_LETTER_AUDIENCE,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });

  const answers: string[] = [];
  let acked = false;
  for (let push = 1; push <= maxDeliveryAttempts; push++) {
    clock.now = published + (push - 1) * stepMs;
    if (clock.now - published >= retentionMs) {
      answers.push(`expired before push ${push}`);
      break;
    }
    if (push === maxDeliveryAttempts) {
      // Another instance's delivery of a copy wrote ahead of a send just
      // now and was killed: its lease stands until it lapses.
      const intent = (await store.getIntent(job.intentId))!;
      await store.beginBroadcast(intent.id, intent.version, clock.now, {
        lease: { owner: "killed", ttlMs: leaseMs, now: clock.now, keep: true },
      });
    }
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: JSON.stringify({
        message: {
          data: btoa(JSON.stringify(job)),
          messageId: "3002",
          publishTime: "2026-12-05T10:00:00.000Z",
        },
        subscription: "projects/p/subscriptions/relayer",
        deliveryAttempt: push,
      }),
      headers: { authorization: `Bearer ${await g.token()}` },
    });
    answers.push(`${push}: ${res.status}`);
    await res.body?.cancel();
    if (res.status === 204) {
      acked = true;
      break;
    }
  }
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
