/**
 * The dead-letter topic's subscription is the give-up's only route, so it
 * must not give up itself. A subscription with a dead-letter policy of its
 * own (copied from the jobs' subscription, say) forwards a give-up it
 * pushed its max delivery attempts (5 unless set) to yet another topic,
 * where nothing resolves the intent: a give-up answered busy behind a send
 * in flight, with no retry policy (immediate redelivery), spends the five
 * in a second, and one that meets the store down spends them in the first
 * minutes of the outage. The start cannot see that subscription; its
 * pushes show it, as only a subscription with a dead-letter policy numbers
 * them (`deliveryAttempt`), so the log says so, at most once a minute.
 *
 * @module
 */

import assert from "node:assert/strict";
import { deadLetterRequest, NOW, withDeadLetterRoute } from "./_app.ts";

const job = { intentId: "pi_0004", kind: "settle" } as const;

/** The dead-letter subscription's push of the job, numbered `deliveryAttempt` if given. */
function deadLetterPush(deliveryAttempt?: number | string) {
  return deadLetterRequest(job, {
    messageId: "dead-letter-copy-4",
    deliveryCount: "3",
    ...(deliveryAttempt === undefined ? {} : { deliveryAttempt }),
  });
}

Deno.test("a dead-letter subscription with a dead-letter policy of its own forwards a busy give-up after its attempts, leaving the intent settling with no dead letter, and the log says so, once a minute", async () => {
  const lines: string[] = [];
  let now = NOW;
  const { app, store } = await withDeadLetterRoute(
    [{
      id: job.intentId,
      state: "settling",
      hold: "pending",
      settlingSince: NOW,
    }],
    { log: (line) => lines.push(line), now: () => now },
  );
  // Another instance's delivery wrote ahead of a send and was killed: its
  // lease stands for 30 s.
  const intent = (await store.getIntent(job.intentId))!;
  await store.beginBroadcast(intent.id, intent.version, now, {
    lease: { owner: "killed", ttlMs: 30_000, now, keep: true },
  });

  // Immediate redelivery: five attempts in a second, each busy.
  const answers: number[] = [];
  for (let attempt = 1; attempt <= 5; attempt++) {
    now += 200;
    const res = await app.request(
      "/v1/pubsub/dead-letter",
      await deadLetterPush(attempt),
    );
    answers.push(res.status);
    await res.body?.cancel();
  }
  assert.deepEqual(answers, [503, 503, 503, 503, 503]);
  // Pub/Sub now forwards the give-up to the dead-letter subscription's
  // own dead-letter topic: no push comes here again.
  assert.equal((await store.getIntent(job.intentId))!.state, "settling");
  assert.equal(await store.getDeadLetter(`${job.intentId}/settle`), null);

  const warned = () =>
    lines.filter((line) => /dead-letter policy of its own/.test(line));
  assert.equal(warned().length, 1, lines.join("\n"));
  const line = warned()[0]!;
  assert.match(line, /^relayer POST \/v1\/pubsub\/dead-letter: /);
  assert.match(line, /projects\/p\/subscriptions\/relayer-dead-letter/);
  assert.match(line, /deliveryAttempt 1/);
  assert.match(line, /stranded/);
  assert.match(line, /remove/i);

  // Within the minute, still the one line; then again.
  now += 30_000;
  const within = await app.request(
    "/v1/pubsub/dead-letter",
    await deadLetterPush(6),
  );
  await within.body?.cancel();
  assert.equal(warned().length, 1, lines.join("\n"));
  now += 30_000;
  const res = await app.request(
    "/v1/pubsub/dead-letter",
    await deadLetterPush(6),
  );
  await res.body?.cancel();
  assert.equal(warned().length, 2, lines.join("\n"));
});

Deno.test("a dead-letter subscription without a dead-letter policy (no deliveryAttempt, 0, or one that is no number) is not warned of", async () => {
  const lines: string[] = [];
  const { app } = await withDeadLetterRoute(
    [{ id: job.intentId, state: "authorized", hold: "pending" }],
    { log: (line) => lines.push(line) },
  );
  // A deliveryAttempt that is no number is none Pub/Sub sends.
  for (const attempt of [undefined, 0, "3"]) {
    const res = await app.request(
      "/v1/pubsub/dead-letter",
      await deadLetterPush(attempt),
    );
    await res.body?.cancel();
  }
  assert.deepEqual(
    lines.filter((line) => /dead-letter policy/.test(line)),
    [],
  );
});
