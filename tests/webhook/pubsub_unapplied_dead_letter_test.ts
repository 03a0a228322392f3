/**
 * The mirror of `pubsub_undeclared_dead_letter_test.ts`: a service told of
 * a dead-letter policy (`PUBSUB_MAX_DELIVERY_ATTEMPTS` and
 * `PUBSUB_DEAD_LETTER_AUDIENCE` set) whose jobs' subscription has none
 * (never added, or removed in Google's console since). Only a subscription
 * with one numbers its pushes (`deliveryAttempt`), so a push without the
 * number shows it. Pub/Sub then never gives up on a job there: it pushes
 * until the message's retention ends and drops it with no dead letter, and
 * the start-up check, which counted on the policy's give-up, did not ask
 * the retention to outlast a busy last delivery. The log says so, at most
 * once a minute.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, pubsubRequest, withDeadLetterRoute } from "./_app.ts";

const job = { intentId: "pi_0003", kind: "settle" } as const;

const push = (deliveryAttempt?: number) =>
  pubsubRequest(job, "78", deliveryAttempt);

const said = (lines: string[]) =>
  lines.filter((line) => /no dead-letter policy/.test(line));

Deno.test("POST /v1/pubsub without a deliveryAttempt, on a service told of a dead-letter policy, says in the log that the subscription has none and a job can be stranded, once a minute", async () => {
  const lines: string[] = [];
  let now = 1_000_000;
  const { app } = await withDeadLetterRoute(
    [{ id: "pi_0003", state: "created" }],
    { log: (line) => lines.push(line), now: () => now },
  );
  for (const attempt of [undefined, 0]) {
    await (await app.request("/v1/pubsub", await push(attempt))).body
      ?.cancel();
  }
  assert.equal(said(lines).length, 1, lines.join("\n"));
  assert.equal(
    said(lines)[0],
    "relayer POST /v1/pubsub: a push of projects/p/subscriptions/relayer carries no deliveryAttempt, so the subscription has no dead-letter policy, but PUBSUB_MAX_DELIVERY_ATTEMPTS and PUBSUB_DEAD_LETTER_AUDIENCE are set: Pub/Sub never gives up on a job there, but pushes it until its message retention ends and then drops it with no dead letter, which the start-up check did not count on (it took the policy's give-up), and the intent of a job that outlives the retention is stranded. Add the dead-letter policy to the subscription (max delivery attempts as PUBSUB_MAX_DELIVERY_ATTEMPTS, its dead-letter topic pushed to POST /v1/pubsub/dead-letter), or unset both and set PUBSUB_MESSAGE_RETENTION to the subscription's retention",
  );
  // Within the minute: nothing more. After it: said again.
  await (await app.request("/v1/pubsub", await push())).body?.cancel();
  assert.equal(said(lines).length, 1, lines.join("\n"));
  now += 60_000;
  await (await app.request("/v1/pubsub", await push())).body?.cancel();
  assert.equal(said(lines).length, 2, lines.join("\n"));
});

Deno.test("POST /v1/pubsub says nothing of a missing dead-letter policy on a numbered push, or where none was declared", async () => {
  const lines: string[] = [];
  const { app: declared } = await withDeadLetterRoute(
    [{ id: "pi_0003", state: "created" }],
    { log: (line) => lines.push(line) },
  );
  await (await declared.request("/v1/pubsub", await push(1))).body?.cancel();
  const { app: undeclared } = await makeApp({
    intents: [{ id: "pi_0003", state: "created" }],
    deps: { log: (line) => lines.push(line) },
  });
  await (await undeclared.request("/v1/pubsub", await push())).body?.cancel();
  assert.equal(said(lines).length, 0, lines.join("\n"));
});

Deno.test("POST /v1/pubsub takes a push numbered 0 as one without a number: it says the subscription has no dead-letter policy, and never that 0 is a count it cannot read", async () => {
  const lines: string[] = [];
  const { app } = await withDeadLetterRoute(
    [{ id: "pi_0003", state: "created" }],
    { log: (line) => lines.push(line) },
  );
  await (await app.request("/v1/pubsub", await push(0))).body?.cancel();
  assert.equal(said(lines).length, 1, lines.join("\n"));
  assert.deepEqual(
    lines.filter((line) => / is not a count; /.test(line)),
    [],
  );
});
