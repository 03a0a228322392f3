/**
 * A push that carries `deliveryAttempt` comes from a subscription with a
 * dead-letter policy (Pub/Sub sends none, or 0, without one). A service
 * told of no such policy (`PUBSUB_MAX_DELIVERY_ATTEMPTS` and
 * `PUBSUB_DEAD_LETTER_AUDIENCE` unset: both typo'd, or the policy added
 * in Google's console later) passed its start-up check as "no limit", yet
 * Pub/Sub gives up after the policy's attempts (5 unless set), forwards
 * the job to a dead-letter topic nothing here resolves, and its intent is
 * stranded. The start cannot see it; the push shows it, so the log says
 * so, at most once a minute.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, pubsubRequest, withDeadLetterRoute } from "./_app.ts";
import { deadLetterPush } from "./_late_copy.ts";

const job = { intentId: "pi_0003", kind: "settle" } as const;

const push = (deliveryAttempt?: number) =>
  pubsubRequest(job, "77", deliveryAttempt);

Deno.test("POST /v1/pubsub with a deliveryAttempt, on a service told of no dead-letter policy, says in the log that a give-up would strand the intent, once a minute", async () => {
  const lines: string[] = [];
  let now = 1_000_000;
  const { app } = await makeApp({
    intents: [{ id: "pi_0003", state: "created" }],
    deps: { log: (line) => lines.push(line), now: () => now },
  });
  const warned = () =>
    lines.filter((line) => /dead-letter policy/.test(line)).length;
  for (const n of [1, 2]) {
    const res = await app.request("/v1/pubsub", await push(n));
    assert.equal(res.status, 503, await res.clone().text());
    await res.body?.cancel();
  }
  assert.equal(warned(), 1, lines.join("\n"));
  const line = lines.find((l) => /dead-letter policy/.test(l))!;
  assert.match(line, /PUBSUB_MAX_DELIVERY_ATTEMPTS/);
  assert.match(line, /PUBSUB_DEAD_LETTER_AUDIENCE/);
  assert.match(line, /projects\/p\/subscriptions\/relayer/);
  assert.match(line, /stranded/);
  // Within the minute, still the one line.
  now += 59_999;
  await (await app.request("/v1/pubsub", await push(3))).body?.cancel();
  assert.equal(warned(), 1, lines.join("\n"));
  now += 1;
  await (await app.request("/v1/pubsub", await push(3))).body?.cancel();
  assert.equal(warned(), 2, lines.join("\n"));
});

Deno.test("POST /v1/pubsub says nothing of a dead-letter policy without a deliveryAttempt, or where the dead-letter route is configured", async () => {
  const lines: string[] = [];
  const { app } = await makeApp({
    intents: [{ id: "pi_0003", state: "created" }],
    deps: { log: (line) => lines.push(line) },
  });
  for (const attempt of [undefined, 0]) {
    await (await app.request("/v1/pubsub", await push(attempt))).body
      ?.cancel();
  }
  const { app: declared } = await withDeadLetterRoute(
    [{ id: "pi_0003", state: "created" }],
    { log: (line) => lines.push(line) },
  );
  await (await declared.request("/v1/pubsub", await push(1))).body?.cancel();
  assert.equal(
    lines.filter((line) => /dead-letter policy/.test(line)).length,
    0,
    lines.join("\n"),
  );
});

Deno.test("POST /v1/pubsub/dead-letter, not configured, refuses the give-up (503) and says so in the log, at most once a minute: Pub/Sub retries it only until its retention ends", async () => {
  const lines: string[] = [];
  let now = 1_000_000;
  const { app, store } = await makeApp({
    intents: [{ id: "pi_0002", state: "authorized", hold: "pending" }],
    deps: { log: (line) => lines.push(line), now: () => now },
  });
  const refusedLines = () =>
    lines.filter((line) => line.includes("/v1/pubsub/dead-letter"));
  for (let i = 0; i < 2; i++) {
    const res = await app.request(
      "/v1/pubsub/dead-letter",
      await deadLetterPush(),
    );
    assert.equal(res.status, 503);
    await res.body?.cancel();
  }
  assert.equal(refusedLines().length, 1, lines.join("\n"));
  assert.match(refusedLines()[0]!, /refused 503/);
  assert.match(refusedLines()[0]!, /PUBSUB_DEAD_LETTER_AUDIENCE/);
  assert.match(refusedLines()[0]!, /stranded/);
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
  now += 60_000;
  await (await app.request("/v1/pubsub/dead-letter", await deadLetterPush()))
    .body?.cancel();
  assert.equal(refusedLines().length, 2, lines.join("\n"));
  assert.match(refusedLines()[1]!, /\(2 refused since the last line\)/);
});
