/**
 * A queue that gives up on a job before the policy's last delivery is
 * named in the log, at most once a minute per give-up route: a bridge's
 * limit (SQS's maxReceiveCount), which no start-up check can see, a QStash
 * message whose retries a plan capped or a publisher of one's own set
 * lower than QSTASH_RETRIES, a Pub/Sub dead-letter policy changed since
 * PUBSUB_MAX_DELIVERY_ATTEMPTS was set. The give-up resolves the intent
 * all the same; the job only had fewer deliveries, and less of the rescue
 * window, than the service was checked for.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import {
  deadLetterRequest,
  genericRequest,
  NOW,
  withDeadLetterRoute,
} from "./_app.ts";
import { failedRequest, QSTASH, signQStash } from "./_signing.ts";
import { loadConfig } from "../../webhook/config.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
/** Sent a moment ago, its receipt not in: a give-up sends it to review. */
const settling: NewIntent = {
  id: "pi_0001",
  state: "settling",
  hold: "pending",
  settlingSince: NOW,
  lastBroadcast: { outcome: "unknown", at: NOW, error: "timeout" },
};

/** The test app (MAX_DELIVERIES 3, every give-up route) and its log lines. */
async function service() {
  const lines: string[] = [];
  const made = await withDeadLetterRoute([settling], {
    log: (line: string) => lines.push(line),
  });
  return { ...made, lines };
}

/** The lines that name a give-up before MAX_DELIVERIES. */
function early(lines: readonly string[]): string[] {
  return lines.filter((line) => line.includes("fewer than MAX_DELIVERIES"));
}

/** QStash's failure callback for the job, `retried` and `maxRetries` as given (left out if undefined). */
async function callback(
  retried: number | undefined,
  maxRetries: number | undefined,
  id = "msg_1",
): Promise<RequestInit> {
  return await failedRequest(JSON.stringify({
    status: 503,
    ...(retried === undefined ? {} : { retried }),
    ...(maxRetries === undefined ? {} : { maxRetries }),
    dlqId: `dlq_${id}`,
    sourceMessageId: id,
    url: QSTASH.url,
    method: "POST",
    sourceBody: btoa(JSON.stringify(job)),
  }));
}

Deno.test("POST /v1/deliveries names a bridge's give-up before MAX_DELIVERIES in the log, and resolves it as any", async () => {
  const { app, store, lines } = await service();
  const body = JSON.stringify({
    job,
    gaveUp: { deliveries: 2, messageId: "m-1" },
  });
  const res = await app.request("/v1/deliveries", await genericRequest(body));
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(
    (await res.json()).reason,
    "the queue gave up after 2 deliveries",
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
  assert.deepEqual(early(lines), [
    "relayer POST /v1/deliveries: a bridge's queue gave up on pi_0001/settle after 2 deliveries (gaveUp.deliveries), fewer than MAX_DELIVERIES (3): its limit (an SQS queue's maxReceiveCount, a RabbitMQ delivery-limit, your poller's) is below the policy's deliveries, so a payment whose tx is slow to confirm or stuck may go to review before it is rescued. Raise it to at least 3",
  ]);
});

Deno.test("POST /v1/deliveries says nothing of a bridge's give-up at or past MAX_DELIVERIES, nor of one without a count of its queue's", async () => {
  for (const gaveUp of [{ deliveries: 3 }, { deliveries: 7 }, {}]) {
    const { app, lines } = await service();
    const body = JSON.stringify({ job, gaveUp: { ...gaveUp, messageId: "m" } });
    const res = await app.request("/v1/deliveries", await genericRequest(body));
    assert.equal(res.status, 200, await res.text());
    assert.deepEqual(early(lines), [], JSON.stringify(gaveUp));
  }
});

Deno.test("POST /v1/qstash/failed names a message QStash allowed fewer retries than MAX_DELIVERIES − 1 (its maxRetries), else its retried, and not one it ended early itself", async () => {
  const cases: [
    retried: number | undefined,
    maxRetries: number | undefined,
    line: string | undefined,
  ][] = [
    // A plan's cap, or a publisher's Upstash-Retries, of 1.
    [1, 1, "allowing 2 deliveries"],
    [0, 0, "allowing 1 delivery"],
    // Without maxRetries, what it delivered.
    [1, undefined, "allowing 2 deliveries"],
    // Its retries were enough: a message ended at its first delivery
    // (the 489 of a job over /v1/qstash's limit) is not the queue's limit.
    [0, 2, undefined],
    [2, 2, undefined],
    // Neither count: the store's says nothing of the queue.
    [undefined, undefined, undefined],
  ];
  for (const [retried, maxRetries, line] of cases) {
    const what = `retried ${retried}, maxRetries ${maxRetries}`;
    const { app, store, lines } = await service();
    const res = await app.request(
      "/v1/qstash/failed",
      await callback(retried, maxRetries),
    );
    assert.equal(res.status, 200, `${what}: ${await res.text()}`);
    assert.equal(
      (await store.getIntent("pi_0001"))?.state,
      "needs_review",
      what,
    );
    assert.deepEqual(
      early(lines),
      line === undefined ? [] : [
        `relayer POST /v1/qstash/failed: QStash gave up on pi_0001/settle ${line}, fewer than MAX_DELIVERIES (3): the message's retries (its Upstash-Retries, capped by your plan) are fewer than the policy's deliveries, so a payment whose tx is slow to confirm or stuck may go to review before it is rescued. Publish jobs with Upstash-Retries of at least 2 (QSTASH_RETRIES, on a plan whose cap allows it), or lower MAX_DELIVERIES`,
      ],
      what,
    );
  }
});

Deno.test("POST /v1/qstash/failed without maxRetries says nothing of a message over MAX_BODY_BYTES, which /v1/qstash ended at its first delivery (489), and resolves it", async () => {
  // The job, read well, padded past the limit (64 KiB): its failure
  // callback, 4/3 of it, is within the callback's own limit.
  const source = JSON.stringify(job) + " ".repeat(70_000);
  const { app, store, lines } = await service();
  const delivered = await app.request("/v1/qstash", {
    method: "POST",
    body: source,
    headers: {
      "content-type": "application/json",
      "upstash-signature": await signQStash(source),
      "upstash-message-id": "msg_big",
      "upstash-retried": "0",
    },
  });
  assert.equal(delivered.status, 489, await delivered.text());
  assert.equal(delivered.headers.get("upstash-nonretryable-error"), "true");
  // QStash gives up at once, after 1 delivery of the 3: no retry was
  // spent, so no Upstash-Retries would have helped.
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(JSON.stringify({
      status: 489,
      retried: 0,
      dlqId: "dlq_msg_big",
      sourceMessageId: "msg_big",
      url: QSTASH.url,
      method: "POST",
      sourceBody: btoa(source),
    })),
  );
  assert.equal(res.status, 200, await res.text());
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
  assert.deepEqual(early(lines), []);
  // One within the limit, as QStash ended it (retried 0): its retries.
  const { app: again, lines: said } = await service();
  const small = await again.request(
    "/v1/qstash/failed",
    await callback(0, undefined),
  );
  assert.equal(small.status, 200, await small.text());
  assert.equal(early(said).length, 1, said.join("\n"));
});

/** The test app with `maxBodyBytes` as given, and its log lines. */
async function serviceOf(maxBodyBytes: number) {
  const lines: string[] = [];
  const made = await withDeadLetterRoute([settling], {
    log: (line: string) => lines.push(line),
    maxBodyBytes,
  });
  return { ...made, lines };
}

Deno.test("POST /v1/qstash/failed without maxRetries names a message of MAX_BODY_BYTES exactly ended early, and not one a byte over it, whatever padding its base64 source body ends with", async () => {
  // /v1/qstash takes a body of the limit (64 KiB) as a delivery: its
  // retries count. One a byte over was ended at its first delivery. The
  // limits 64 KiB, one and two bytes more put a body of the limit's base64
  // at "==", "=" and no padding.
  for (const limit of [64 * 1024, 64 * 1024 + 1, 64 * 1024 + 2]) {
    for (const [bytes, said] of [[limit, 1], [limit + 1, 0]] as const) {
      const source = JSON.stringify(job);
      const { app, store, lines } = await serviceOf(limit);
      const res = await app.request(
        "/v1/qstash/failed",
        await failedRequest(JSON.stringify({
          status: 503,
          retried: 0,
          dlqId: "dlq_msg_edge",
          sourceMessageId: "msg_edge",
          url: QSTASH.url,
          method: "POST",
          sourceBody: btoa(source + " ".repeat(bytes - source.length)),
        })),
      );
      assert.equal(res.status, 200, await res.text());
      assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
      assert.equal(
        early(lines).length,
        said,
        `${bytes} bytes, limit ${limit}: ${lines}`,
      );
    }
  }
});

Deno.test("POST /v1/pubsub/dead-letter names a message dead-lettered before MAX_DELIVERIES, not one at it, nor one whose count cannot be read", async () => {
  for (const [count, said] of [["2", true], ["3", false], ["x", false]]) {
    const { app, lines } = await service();
    const res = await app.request(
      "/v1/pubsub/dead-letter",
      await deadLetterRequest(job, {
        messageId: "dl-1",
        deliveryCount: count as string,
      }),
    );
    assert.equal(res.status, 204, `${count}: ${await res.text()}`);
    assert.deepEqual(
      early(lines),
      said
        ? [
          "relayer POST /v1/pubsub/dead-letter: Pub/Sub gave up on pi_0001/settle after 2 deliveries (CloudPubSubDeadLetterSourceDeliveryCount), fewer than MAX_DELIVERIES (3): the source subscription's dead-letter policy allows fewer delivery attempts than the policy's deliveries, or Google counted them loosely, so a payment whose tx is slow to confirm or stuck may go to review before it is rescued. Set its max delivery attempts, and PUBSUB_MAX_DELIVERY_ATTEMPTS, above MAX_DELIVERIES, with a margin",
        ]
        : [],
      count as string,
    );
  }
});

Deno.test("a give-up before MAX_DELIVERIES is logged at most once a minute per route", async () => {
  const { app, lines } = await service();
  for (const id of ["msg_1", "msg_2"]) {
    const res = await app.request(
      "/v1/qstash/failed",
      await callback(0, 0, id),
    );
    assert.equal(res.status, 200, await res.text());
  }
  const body = JSON.stringify({
    job,
    gaveUp: { deliveries: 1, messageId: "m-1" },
  });
  const res = await app.request("/v1/deliveries", await genericRequest(body));
  assert.equal(res.status, 200, await res.text());
  assert.deepEqual(
    early(lines).map((line) => line.slice(0, line.indexOf(":"))),
    ["relayer POST /v1/qstash/failed", "relayer POST /v1/deliveries"],
  );
});

Deno.test("POST /v1/qstash/failed names the Upstash-Retries the service takes as QSTASH_RETRIES: with MAX_DELIVERIES 2, 2 (one retry of the failure callback cannot outlast a busy give-up), not 1", async () => {
  const lines: string[] = [];
  const { app } = await withDeadLetterRoute([settling], {
    log: (line: string) => lines.push(line),
    policy: { maxDeliveries: 2 },
  });
  const res = await app.request("/v1/qstash/failed", await callback(0, 0));
  assert.equal(res.status, 200, await res.text());
  const [line] = early(lines);
  assert.match(
    line ?? "",
    /allowing 1 delivery, fewer than MAX_DELIVERIES \(2\): .* Publish jobs with Upstash-Retries of at least 2 \(QSTASH_RETRIES/,
    lines.join("\n"),
  );
  // The service refuses 1 and takes 2.
  const env = {
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
    PUBLIC_URL: "https://relayer.example.test",
    MAX_DELIVERIES: "2",
    STUCK_AFTER: "0s",
    CLOCK_SKEW: "0",
  };
  assert.throws(
    () => loadConfig({ ...env, QSTASH_RETRIES: "1" }),
    /Set QSTASH_RETRIES to at least 2/,
  );
  assert.equal(
    loadConfig({ ...env, QSTASH_RETRIES: "2" }).queues.qstash.retries,
    2,
  );
});

Deno.test("a give-up at MAX_DELIVERIES spends none of the once a minute: one before MAX_DELIVERIES after it, on the same route, is logged", async () => {
  const { app, lines } = await service();
  for (const [deliveries, id] of [[3, "m-1"], [4, "m-2"], [2, "m-3"]]) {
    const body = JSON.stringify({ job, gaveUp: { deliveries, messageId: id } });
    const res = await app.request("/v1/deliveries", await genericRequest(body));
    assert.equal(res.status, 200, await res.text());
  }
  assert.deepEqual(
    early(lines).map((line) => line.slice(0, line.indexOf(" (gaveUp"))),
    [
      "relayer POST /v1/deliveries: a bridge's queue gave up on pi_0001/settle after 2 deliveries",
    ],
  );
});
