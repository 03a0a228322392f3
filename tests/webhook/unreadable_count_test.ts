/**
 * A delivery whose queue count cannot be read (an `Upstash-Retried` that
 * is not an integer >= 0, a `deliveryAttempt` that is not an integer >= 1)
 * is counted in the store, as one without the count is: the job keeps its
 * policy's deliveries and is poisoned and resolved by the policy at the
 * end. Refused, QStash's 489 ended its retries at the first delivery, and
 * Pub/Sub's push was acked as an unreadable letter that resolved nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import {
  assertThirdToReview,
  makeApp,
  NOW,
  theGoogle,
  withDeadLetterRoute,
} from "./_app.ts";
import { signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
/** Its send's outcome unknown a moment ago: each delivery waits, the last resolves it. */
const settling: NewIntent = {
  id: "pi_0001",
  state: "settling",
  hold: "pending",
  settlingSince: NOW,
  lastBroadcast: { outcome: "unknown", at: NOW, error: "timeout" },
};

/** QStash's signed delivery of the job, its `Upstash-Retried` as given (none if undefined). */
async function qstash(retried: string | undefined): Promise<RequestInit> {
  const body = JSON.stringify(job);
  return {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body),
      "upstash-message-id": "msg_1",
      ...(retried === undefined ? {} : { "upstash-retried": retried }),
    },
  };
}

/** Pub/Sub's push of the job as message `m-1`, its `deliveryAttempt` as given (none if undefined). */
async function pubsub(attempt: unknown): Promise<RequestInit> {
  return {
    method: "POST",
    body: JSON.stringify({
      message: { data: btoa(JSON.stringify(job)), messageId: "m-1" },
      subscription: "projects/p/subscriptions/relayer",
      ...(attempt === undefined ? {} : { deliveryAttempt: attempt }),
    }),
    headers: { authorization: `Bearer ${await (await theGoogle()).token()}` },
  };
}

Deno.test("POST /v1/qstash counts a delivery whose Upstash-Retried cannot be read in the store, as one without it: a retry with its Retry-After, the next counted #2, the last poisoned by the policy", async () => {
  // Not an integer >= 0, or past 15 digits (Number would round it).
  for (
    const retried of ["abc", "-1", "1.5", "", "0x1", "1e3", "1234567890123456"]
  ) {
    const what = JSON.stringify(retried);
    const { app, store } = await makeApp({ intents: [settling] });
    const first = await app.request("/v1/qstash", await qstash(retried));
    assert.equal(first.status, 503, `${what}: ${await first.clone().text()}`);
    assert.equal(first.headers.get("retry-after"), "3", what);
    const answer = await first.json();
    assert.equal(answer.outcome, "retry", what);
    assert.equal(answer.delivery, 1, what);
    assert.equal(await store.deliveries("pi_0001/settle"), 1, what);
    // QStash's next delivery, without the header or as unreadable.
    const second = await app.request("/v1/qstash", await qstash(undefined));
    assert.equal(second.status, 503, what);
    assert.equal((await second.json()).delivery, 2, what);
    const last = await app.request("/v1/qstash", await qstash(retried));
    await assertThirdToReview(last, store, what);
    const letter = await store.getDeadLetter("pi_0001/settle");
    assert.equal(letter?.deliveries, 3, what);
    assert.equal(letter?.cause, "exhausted", what);
    assert.equal(
      await store.getDeadLetter("qstash/msg_1/unreadable"),
      null,
      what,
    );
  }
});

Deno.test("POST /v1/pubsub counts a push whose deliveryAttempt cannot be read in the store, as one without it: a retry, the next counted #2, the last poisoned by the policy, and no unreadable letter", async () => {
  for (const attempt of ["x", "2", -1, 1.5, true, 2 ** 53, {}]) {
    const what = JSON.stringify(attempt);
    const { app, store } = await makeApp({ intents: [settling] });
    const first = await app.request("/v1/pubsub", await pubsub(attempt));
    assert.equal(first.status, 503, `${what}: ${await first.clone().text()}`);
    const answer = await first.json();
    assert.equal(answer.outcome, "retry", what);
    assert.equal(answer.delivery, 1, what);
    // Counted as a push without deliveryAttempt is: per subscription.
    assert.equal(await store.deliveries("pubsub/p/relayer/m-1"), 1, what);
    const second = await app.request("/v1/pubsub", await pubsub(undefined));
    assert.equal(second.status, 503, what);
    assert.equal((await second.json()).delivery, 2, what);
    const last = await app.request("/v1/pubsub", await pubsub(attempt));
    assert.equal(last.status, 204, what);
    await last.body?.cancel();
    const letter = await store.getDeadLetter("pi_0001/settle");
    assert.equal(letter?.deliveries, 3, what);
    assert.equal(letter?.cause, "exhausted", what);
    assert.equal(
      letter?.resolution,
      "last broadcast unknown, needs review",
      what,
    );
    assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
    assert.equal(
      await store.getDeadLetter("pubsub/m-1/unreadable"),
      null,
      what,
    );
  }
});

Deno.test("POST /v1/pubsub says nothing of a dead-letter policy for a push whose deliveryAttempt cannot be read, whether the service was told of one or not", async () => {
  const lines: string[] = [];
  const log = (line: string) => lines.push(line);
  const { app: undeclared } = await makeApp({
    intents: [settling],
    deps: { log },
  });
  const { app: declared } = await withDeadLetterRoute([settling], { log });
  for (const app of [undeclared, declared]) {
    const res = await app.request("/v1/pubsub", await pubsub("x"));
    assert.equal(res.status, 503, await res.clone().text());
    assert.equal((await res.json()).delivery, 1);
  }
  assert.equal(
    lines.filter((line) => /dead-letter policy/.test(line)).length,
    0,
    lines.join("\n"),
  );
});

Deno.test("POST /v1/qstash and POST /v1/pubsub log a count they cannot read, at most once a minute per route, its value cut and stripped of control characters, and nothing for a count that is well formed or left out", async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app } = await makeApp({
    intents: [settling],
    deps: {
      log: (line) => lines.push(line),
      now: () => t,
      policy: { maxDeliveries: 10 },
    },
  });
  const counts = () => lines.filter((line) => / is not a count; /.test(line));
  const deliver = async (path: string, init: RequestInit) => {
    const res = await app.request(path, init);
    assert.equal(res.status, 503, await res.clone().text());
    await res.body?.cancel();
  };
  await deliver("/v1/qstash", await qstash("0"));
  await deliver("/v1/qstash", await qstash(undefined));
  await deliver("/v1/pubsub", await pubsub(undefined));
  assert.deepEqual(counts(), []);
  await deliver("/v1/qstash", await qstash("abc"));
  await deliver("/v1/qstash", await qstash("def"));
  // Pub/Sub's token does not sign the body: a forger's count that tries
  // to write a line of its own.
  await deliver(
    "/v1/pubsub",
    await pubsub("7\nrelayer POST /v1/qstash: forged\u2028\u001b[2J"),
  );
  assert.deepEqual(counts(), [
    'relayer POST /v1/qstash: Upstash-Retried "abc" is not a count; the delivery was counted here (#2)',
    'relayer POST /v1/pubsub: deliveryAttempt "7relayer POST /v1/q"… is not a count; the delivery was counted here (#2)',
  ]);
  assert.ok(lines.every((line) => !/[\p{Cc}\u2028]/u.test(line)));
  // A minute on, each route says it again; a long value is cut.
  t += 60_000;
  await deliver(
    "/v1/qstash",
    await qstash("9".repeat(10_000)),
  );
  await deliver("/v1/pubsub", await pubsub(1.5));
  assert.deepEqual(counts().slice(2), [
    `relayer POST /v1/qstash: Upstash-Retried "${
      "9".repeat(20)
    }"… is not a count; the delivery was counted here (#4)`,
    "relayer POST /v1/pubsub: deliveryAttempt 1.5 is not a count; the delivery was counted here (#3)",
  ]);
});

Deno.test("POST /v1/pubsub's line for a count it cannot read strips every control character and line separator in it, and marks it cut only where it was", async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app } = await makeApp({
    intents: [settling],
    deps: {
      log: (line) => lines.push(line),
      now: () => t,
      policy: { maxDeliveries: 10 },
    },
  });
  const said = async (attempt: unknown) => {
    const res = await app.request("/v1/pubsub", await pubsub(attempt));
    assert.equal(res.status, 503, await res.clone().text());
    await res.body?.cancel();
    t += 60_000;
    return lines.filter((line) => / is not a count; /.test(line)).at(-1);
  };
  // DEL, C1 (NEL, CSI) and the Unicode separators, which JSON.stringify
  // leaves as they are, as well as C0; more than one of them.
  assert.equal(
    await said("1\u20282\u20293\u00854\u009b5\u007f6\u00077\n8"),
    'relayer POST /v1/pubsub: deliveryAttempt "12345678" is not a count; the delivery was counted here (#1)',
  );
  assert.equal(
    await said("x".repeat(20)),
    `relayer POST /v1/pubsub: deliveryAttempt "${
      "x".repeat(20)
    }" is not a count; the delivery was counted here (#2)`,
  );
  assert.equal(
    await said("x".repeat(21)),
    `relayer POST /v1/pubsub: deliveryAttempt "${
      "x".repeat(20)
    }"… is not a count; the delivery was counted here (#3)`,
  );
});
