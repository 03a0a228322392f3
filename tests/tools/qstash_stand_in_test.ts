/**
 * The crash test's stand-in for QStash's publish API, driven by the
 * service's own publisher: a repeated deduplication id is dropped (202,
 * the first message's id, nothing taken), QStash being down takes nothing,
 * and an answer lost on the way back still took the message.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Publication,
  type PublishFate,
  startQStashStandIn,
} from "../../tools/_qstash_stand_in.ts";
import { qstashPublisher } from "../../webhook/qstash_publisher.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/**
 * Runs `body` with a stand-in whose publishes meet `fates` in turn (then
 * "take"), the messages it took, and the service's publisher to it
 * (5 retries, its public URL https://relayer.example.test).
 */
async function withStandIn(
  fates: PublishFate[],
  body: (
    qstash: ReturnType<typeof startQStashStandIn>,
    taken: Publication[],
    publisher: ReturnType<typeof qstashPublisher>,
  ) => Promise<void>,
): Promise<void> {
  const taken: Publication[] = [];
  const qstash = startQStashStandIn({
    token: "qstash-token",
    fate: () => fates.shift() ?? "take",
    onPublish: (publication) => taken.push(publication),
    latencyMs: () => 0,
  });
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.test",
      retries: 5,
      baseUrl: qstash.url,
    });
    await body(qstash, taken, publisher);
  } finally {
    await qstash.stop();
  }
}

Deno.test("startQStashStandIn() takes a deduplication id once, as QStash does within its window, and refuses a wrong token", () =>
  withStandIn(["take", "take"], async (qstash, taken, publisher) => {
    // Two at once, as two redrives of one letter publish.
    const [first, second] = await Promise.all([
      publisher.publish(job, { deduplicationId: "pi_0001/settle:7" }),
      publisher.publish(job, { deduplicationId: "pi_0001/settle:7" }),
    ]);
    assert.equal(taken.length, 1);
    assert.equal(qstash.deduplicated, 1);
    assert.equal(first.messageId, second.messageId);
    assert.equal(taken[0]!.url, "https://relayer.example.test/v1/qstash");
    assert.equal(taken[0]!.retries, "5");
    assert.equal(
      taken[0]!.failureCallback,
      "https://relayer.example.test/v1/qstash/failed",
    );
    // Another letter's id, and a publish without one: each taken.
    await publisher.publish(job, { deduplicationId: "pi_0001/settle:8" });
    await publisher.publish(job);
    assert.equal(taken.length, 3);

    const stranger = qstashPublisher({
      token: "another-token",
      publicUrl: "https://relayer.example.test",
      retries: 5,
      baseUrl: qstash.url,
    });
    await assert.rejects(stranger.publish(job), /HTTP 401/);
    assert.equal(taken.length, 3);
    assert.equal(qstash.refused.length, 1);
  }));

Deno.test("startQStashStandIn() takes nothing while down, and takes the message when the answer is lost: the publisher fails either way", () =>
  withStandIn(["down", "lose-answer"], async (qstash, taken, publisher) => {
    await assert.rejects(
      publisher.publish(job, { deduplicationId: "a" }),
      /HTTP 503/,
    );
    assert.equal(taken.length, 0);
    // Not taken, so not remembered: the retry goes through.
    await assert.rejects(publisher.publish(job, { deduplicationId: "a" }));
    assert.equal(taken.length, 1);
    assert.equal(qstash.lostAnswers, 1);
    // The retry after a lost answer is dropped as a repeat, and answered.
    const again = await publisher.publish(job, { deduplicationId: "a" });
    assert.equal(again.messageId, taken[0]!.messageId);
    assert.equal(taken.length, 1);
  }));
