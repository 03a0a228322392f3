/**
 * A bridge on AWS that passes its message on as it came sends
 * `POST /v1/deliveries` the envelope its bus put the job in: an SNS
 * notification (`{"Type":"Notification","Message":"<job's JSON>"}`, what
 * an SQS queue subscribed to a topic without raw message delivery holds)
 * or an EventBridge event (`{"detail-type":…,"detail":{…}}`, what a rule's
 * target gets without an input path). Signed, its job is kept first as a
 * dead letter naming its intent, as a bare job's or a body encoded twice
 * is, then refused 400 saying how to send the job itself: refused with
 * nothing kept, a bridge that takes a 4xx as final dropped it, and the
 * intent was left with no job and no dead letter. So is the envelope
 * inside an SQS event's record, and an SNS event's record, and a
 * CloudEvent in structured mode (`{"specversion":…,"data":…}`, what a
 * Dapr or Knative subscription delivers).
 *
 * @module
 */

import assert from "node:assert/strict";
import { genericRequest, makeApp } from "./_app.ts";

const intents = [
  { id: "pi_0001", state: "authorized", hold: "pending" },
  { id: "pi_0002", state: "authorized", hold: "pending" },
] as const;

/** An SNS notification of `message`, as SNS shapes it. */
function notification(message: unknown): Record<string, unknown> {
  return {
    Type: "Notification",
    MessageId: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
    TopicArn: "arn:aws:sns:us-east-1:123456789012:relayer-jobs",
    Message: JSON.stringify(message),
    Timestamp: "2026-12-08T01:00:00.000Z",
    SignatureVersion: "1",
    Signature: "EXAMPLEpH+…",
    SigningCertURL:
      "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem",
    UnsubscribeURL:
      "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:123456789012:relayer-jobs:0",
  };
}

/** An EventBridge event whose detail is `detail`, as EventBridge shapes it. */
function event(detail: unknown): Record<string, unknown> {
  return {
    version: "0",
    id: "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "relayer job",
    source: "payments.relayer",
    account: "123456789012",
    time: "2026-12-08T01:00:00Z",
    region: "us-east-1",
    resources: [],
    detail,
  };
}

/** The detail of a signed POST /v1/deliveries of `body`, with the letters it kept. */
async function posted(body: unknown) {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [...intents],
    deps: { log: (line) => lines.push(line) },
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(body)),
  );
  const { detail } = await res.json();
  const letters = (await store.listDeadLetters({ limit: 10 })).items;
  return { status: res.status, detail, letters, lines, store };
}

Deno.test("POST /v1/deliveries keeps the job of a signed SNS notification as a dead letter naming its intent, then refuses it 400 saying to send its Message (or turn on raw message delivery)", async () => {
  for (
    const message of [
      { intentId: "pi_0001", kind: "settle" },
      { job: { intentId: "pi_0001", kind: "settle" }, delivery: 3 },
    ]
  ) {
    const { status, detail, letters, store } = await posted(
      notification(message),
    );
    assert.equal(status, 400);
    assert.deepEqual(
      letters.map((letter) => [letter.intentId, letter.deliveries]),
      [["pi_0001", "delivery" in message ? 3 : 1]],
    );
    assert.match(
      detail,
      /^The body is an SNS notification, \{"Type":"Notification","Message":…\}: POST \/v1\/deliveries takes the delivery its Message holds, parsed, as the body/,
    );
    assert.match(detail, /raw message delivery/);
    assert.match(
      detail,
      /Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: publish a readable job for intent pi_0001, then discard the letter\.$/,
    );
    assert.match(
      letters[0]!.reason,
      /^unreadable bridge message: The body is an SNS notification/,
    );
    assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  }
});

Deno.test("POST /v1/deliveries keeps the job of a signed EventBridge event as a dead letter naming its intent, then refuses it 400 saying to send its detail (an input path of $.detail)", async () => {
  const { status, detail, letters } = await posted(
    event({ job: { intentId: "pi_0002", kind: "settle" }, delivery: 2 }),
  );
  assert.equal(status, 400);
  assert.deepEqual(
    letters.map((letter) => [letter.intentId, letter.deliveries]),
    [["pi_0002", 2]],
  );
  assert.match(
    detail,
    /^The body is an EventBridge event, \{"detail-type":…,"detail":…\}: POST \/v1\/deliveries takes the delivery its detail holds as the body/,
  );
  assert.match(detail, /\$\.detail/);
  // A misspelt job in it whose intent id can be read is kept so too, and
  // the 400 says why it cannot be read.
  const misspelt = await posted(
    notification({ intentId: "pi_0002", kind: "Settle" }),
  );
  assert.equal(misspelt.status, 400);
  assert.deepEqual(misspelt.letters.map((letter) => letter.intentId), [
    "pi_0002",
  ]);
  assert.match(
    misspelt.detail,
    /Its job cannot be read either: Cannot read job as 'kind' must be "settle": current value is "Settle"\. Kept/,
  );
});

Deno.test("POST /v1/deliveries keeps one letter for a job sent alone and in its envelope, and nothing for an envelope of no job; unsigned, it keeps nothing", async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  const job = { intentId: "pi_0001", kind: "settle" };
  for (
    const body of [
      job,
      notification(job),
      event(job),
      JSON.stringify(notification(job)), // encoded twice
    ]
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400);
    const { detail } = await res.json();
    // Each kept (or found kept) its job's letter.
    assert.match(detail, /Kept as the dead letter generic\/sha256-/, detail);
    if (typeof body === "string") {
      assert.match(detail, /^The body is a JSON text of an SNS notification/);
    }
  }
  assert.equal((await store.listDeadLetters({ limit: 10 })).items.length, 1);
  const other = await makeApp({ intents: [...intents] });
  for (
    const body of [
      notification({ hello: "world" }),
      { Type: "Notification", Message: "not json" },
      event({ order: 42 }),
    ]
  ) {
    const res = await other.app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400);
    await res.body?.cancel();
  }
  const unsigned = await other.app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(notification(job)), {
      signature: "t=1000,v1=00",
    }),
  );
  assert.equal(unsigned.status, 401);
  await unsigned.body?.cancel();
  assert.deepEqual(
    (await other.store.listDeadLetters({ limit: 10 })).items,
    [],
  );
});

Deno.test("POST /v1/deliveries keeps the job of an SNS notification or an EventBridge event inside an SQS event's record, and of an SNS event's record, as a batch's", async () => {
  const sqs = {
    Records: [
      {
        messageId: "059f36b4-87a3-44ab-83d2-661975830a7d",
        body: JSON.stringify(
          notification({ intentId: "pi_0001", kind: "settle" }),
        ),
        attributes: { ApproximateReceiveCount: "4" },
        eventSource: "aws:sqs",
      },
      {
        messageId: "2e1424d4-f796-459a-8184-9c92662be6da",
        body: JSON.stringify(event({ intentId: "pi_0002", kind: "settle" })),
        attributes: { ApproximateReceiveCount: "1" },
        eventSource: "aws:sqs",
      },
    ],
  };
  const fromSqs = await posted(sqs);
  assert.equal(fromSqs.status, 400);
  assert.deepEqual(
    fromSqs.letters.map((letter) => [letter.intentId, letter.deliveries])
      .sort(),
    [["pi_0001", 4], ["pi_0002", 1]],
  );
  assert.match(fromSqs.detail, /Kept 2 jobs as dead letters/);
  const sns = {
    Records: [
      {
        EventSource: "aws:sns",
        EventVersion: "1.0",
        EventSubscriptionArn:
          "arn:aws:sns:us-east-1:123456789012:relayer-jobs:0",
        Sns: notification({ intentId: "pi_0002", kind: "settle" }),
      },
    ],
  };
  const fromSns = await posted(sns);
  assert.equal(fromSns.status, 400);
  assert.match(
    fromSns.detail,
    /^The body is a batch \(an SNS event of 1 record/,
  );
  assert.match(fromSns.detail, /Kept 1 job as a dead letter/);
  assert.deepEqual(
    fromSns.letters.map((letter) => letter.intentId),
    ["pi_0002"],
  );
});

Deno.test("POST /v1/deliveries keeps the job of a signed CloudEvent in structured mode (its data, or its data_base64) as a dead letter naming its intent, then refuses it 400 saying to send the data (binary mode)", async () => {
  const cloudEvent = {
    specversion: "1.0",
    type: "com.example.relayer.job",
    source: "/payments/relayer",
    id: "A234-1234-1234",
    datacontenttype: "application/json",
  };
  for (
    const body of [
      {
        ...cloudEvent,
        data: { job: { intentId: "pi_0001", kind: "settle" }, delivery: 2 },
      },
      {
        ...cloudEvent,
        data_base64: btoa(
          JSON.stringify({
            job: { intentId: "pi_0001", kind: "settle" },
            delivery: 2,
          }),
        ),
      },
    ]
  ) {
    const { status, detail, letters } = await posted(body);
    assert.equal(status, 400);
    assert.deepEqual(
      letters.map((letter) => [letter.intentId, letter.deliveries]),
      [["pi_0001", 2]],
    );
    assert.match(
      detail,
      /^The body is a CloudEvent in structured mode, \{"specversion":…,"data":…\}: POST \/v1\/deliveries takes the delivery its data holds as the body/,
    );
    assert.match(detail, /binary mode/);
  }
});

Deno.test("POST /v1/deliveries keeps a delivery or give-up whose 'job' is an SNS notification or an EventBridge event (or its JSON text) as the letter of the job inside, naming its intent, with the count beside it", async () => {
  const job = { intentId: "pi_0001", kind: "settle" };
  for (
    const [body, count] of [
      [{ job: notification(job), delivery: 3 }, 3],
      [{ job: JSON.stringify(notification(job)), delivery: 3 }, 3],
      [{ job: event(job), gaveUp: { deliveries: 5, messageId: "m-1" } }, 5],
    ] as const
  ) {
    const { status, detail, letters } = await posted(body);
    assert.equal(status, 400);
    assert.deepEqual(
      letters.map((letter) => [letter.intentId, letter.deliveries]),
      [["pi_0001", count]],
      JSON.stringify(body),
    );
    assert.match(
      detail,
      /^'job' is an (SNS notification|EventBridge event), .*: send the job it holds, its (Message parsed|detail), as 'job'\. Kept/,
    );
    assert.match(
      detail,
      /Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: publish a readable job for intent pi_0001, then discard the letter\.$/,
    );
  }
  // The same letter as the job's own (sent bare, refused and kept).
  const { app, store } = await makeApp({ intents: [...intents] });
  for (const body of [job, { job: notification(job) }]) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400);
    await res.body?.cancel();
  }
  assert.equal((await store.listDeadLetters({ limit: 10 })).items.length, 1);
});
