/**
 * The log as an operator greps it: every line is one line, whatever a
 * client put in the message it names, and says what it counts in the
 * right number.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { QSTASH, signHmac, signQStash } from "./_signing.ts";

const SECRET = "webhook-secret-for-tests";
const OPS = "ops-token-for-tests";
const ops = { authorization: `Bearer ${OPS}` };

/** What ends or breaks a line in some log viewer: C0, DEL, C1, U+2028, U+2029. */
// deno-lint-ignore no-control-regex
const BREAKS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

function app(lines: string[], store = new MemoryStore()) {
  return createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    now: () => 1_764_504_000_000,
    random: () => 0,
    qstash: QSTASH,
    webhookSecret: SECRET,
    opsToken: OPS,
    log: (line) => void lines.push(line),
  });
}

Deno.test("createApp() logs an unreadable message, and the discard of its letter, each on one line: a NEL, a DEL or a line separator the client put in the job is not written raw", async () => {
  const lines: string[] = [];
  const webhook = app(lines);
  // JSON.stringify escapes C0 controls, but not these.
  const body = JSON.stringify({
    intentId: "pi_0001",
    kind: "settle\u0085worker  pi_0002/settle   #1  done\u2028x\u007f\u2029",
  });
  const res = await webhook.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body),
      "upstash-message-id": "msg_1",
    },
  });
  assert.equal(res.status, 489);
  await res.body?.cancel();
  const discarded = await webhook.request(
    "/v1/dead-letters/qstash/msg_1/unreadable",
    { method: "DELETE", headers: ops },
  );
  assert.equal(discarded.status, 200);
  await discarded.body?.cancel();
  assert.equal(lines.length, 2, lines.join("\n"));
  for (const line of lines) {
    assert.ok(!BREAKS.test(line), JSON.stringify(line));
    assert.match(line, /qstash\/msg_1\/unreadable/);
  }
});

Deno.test("createApp() logs the discard of a letter kept after 1 delivery as '1 delivery', not '1 deliveries'", async () => {
  const lines: string[] = [];
  const webhook = app(lines);
  const body = JSON.stringify({
    job: { intentId: "pi_0404", kind: "settle" },
    delivery: 1,
  });
  const poisoned = await webhook.request("/v1/deliveries", {
    method: "POST",
    body,
    headers: { "x-signature": signHmac(SECRET, body, 1_764_504_000) },
  });
  assert.equal((await poisoned.json()).outcome, "poison");
  const discarded = await webhook.request("/v1/dead-letters/pi_0404/settle", {
    method: "DELETE",
    headers: ops,
  });
  assert.equal(discarded.status, 200);
  await discarded.body?.cancel();
  const line = lines.at(-1)!;
  assert.match(line, /discarded the dead letter of pi_0404\/settle/);
  assert.match(line, /\b1 delivery\b/);
  assert.doesNotMatch(line, /\b1 deliveries\b/);
});

Deno.test("createQueueHandler() logs a message that is not a job on one line: a NEL or DEL in its body is not written raw", async () => {
  const lines: string[] = [];
  const queue = createQueueHandler({
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
    relayer: createRelayer({
      store: new MemoryStore(),
      sender: new ScriptedSender({}),
      policy: { maxDeliveries: 1 },
      random: () => 0,
    }),
    log: (line) => void lines.push(line),
  });
  const calls: string[] = [];
  await queue({
    queue: "jobs",
    messages: [{
      id: "m1",
      attempts: 1,
      body: { intentId: "pi_0001", kind: "settle\u0085forged\u007f" },
      ack: () => calls.push("ack"),
      retry: () => calls.push("retry"),
    }],
  });
  assert.deepEqual(calls, ["ack"]);
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.ok(!BREAKS.test(lines[0]!), JSON.stringify(lines[0]));
});

Deno.test("createApp() names the queue's message in a delivery's line and a give-up's, so a line is found from the queue's console and a late copy is told apart", async () => {
  const lines: string[] = [];
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const webhook = app(lines, store);
  const body = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  const delivered = await webhook.request("/v1/qstash", {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body),
      "upstash-message-id": "msg_7",
      "upstash-retried": "0",
    },
  });
  await delivered.body?.cancel();
  const callback = JSON.stringify({
    sourceMessageId: "msg_8",
    retried: 0,
    sourceBody: btoa(body),
  });
  const gaveUp = await webhook.request("/v1/qstash/failed", {
    method: "POST",
    body: callback,
    headers: {
      "upstash-signature": await signQStash(callback, {
        url: `${QSTASH.url}/failed`,
      }),
    },
  });
  await gaveUp.body?.cancel();
  const unnamed = JSON.stringify({
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  const generic = await webhook.request("/v1/deliveries", {
    method: "POST",
    body: unnamed,
    headers: { "x-signature": signHmac(SECRET, unnamed, 1_764_504_000) },
  });
  await generic.body?.cancel();
  assert.equal(lines.length, 3, lines.join("\n"));
  assert.match(
    lines[0]!,
    /^worker {2}pi_0001\/settle +#1 .* message qstash\/msg_7$/,
  );
  assert.match(
    lines[1]!,
    /^worker {2}pi_0001\/settle +#1 .* message qstash\/msg_8$/,
  );
  // No message id, nothing added: the line is as before.
  assert.match(lines[2]!, /^worker {2}pi_0001\/settle +#1 +\w+ +\(.*\)$/);
});

Deno.test("createApp() names the message in a Pub/Sub push's and give-up's line, a bridge's delivery and give-up, and a failed delivery's line, as the runbook greps them", async () => {
  const lines: string[] = [];
  const log = (line: string) => void lines.push(line);
  const store = new MemoryStore();
  for (const id of ["pi_0001", "pi_0002", "pi_0003", "pi_0004"]) {
    await store.createIntent({ id, state: "created" });
  }
  // Unsigned (insecure dev): what is under test is the line, not the check.
  const webhook = createApp({
    store,
    sender: new ScriptedSender({}),
    insecureDev: true,
    now: () => 1_764_504_000_000,
    random: () => 0,
    log,
  });
  const data = (intentId: string) =>
    btoa(JSON.stringify({ intentId, kind: "settle" }));
  const post = async (path: string, body: unknown, headers = {}) => {
    const res = await webhook.request(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers,
    });
    await res.body?.cancel();
    return res.status;
  };
  assert.equal(
    await post("/v1/pubsub", {
      message: { data: data("pi_0001"), messageId: "m-1" },
      subscription: "projects/p/subscriptions/jobs",
      deliveryAttempt: 1,
    }),
    503,
  );
  // A dead-letter copy: its own id, not its source's.
  assert.equal(
    await post("/v1/pubsub/dead-letter", {
      message: {
        data: data("pi_0002"),
        messageId: "copy-2",
        attributes: {
          CloudPubSubDeadLetterSourceDeliveryCount: "5",
          CloudPubSubDeadLetterSourceSubscription: "jobs",
          CloudPubSubDeadLetterSourceSubscriptionProject: "p",
          CloudPubSubDeadLetterSourceTopicPublishTime:
            "2026-01-01T00:00:00.000Z",
        },
      },
      subscription: "projects/p/subscriptions/jobs-dead",
    }),
    204,
  );
  assert.equal(
    await post("/v1/deliveries", {
      job: { intentId: "pi_0003", kind: "settle" },
      delivery: 1,
      messageId: "m-3",
    }),
    503,
  );
  assert.equal(
    await post("/v1/deliveries", {
      job: { intentId: "pi_0004", kind: "settle" },
      gaveUp: { deliveries: 3, messageId: "m-4" },
    }),
    200,
  );
  // The store down: the failed delivery's line names its message too.
  const down = createApp({
    store: new Proxy(new MemoryStore(), {
      get: () => () => Promise.reject(new Error("the store is down")),
    }),
    sender: new ScriptedSender({}),
    insecureDev: true,
    now: () => 1_764_504_000_000,
    log,
  });
  const failed = await down.request("/v1/qstash", {
    method: "POST",
    body: JSON.stringify({ intentId: "pi_0005", kind: "settle" }),
    headers: { "upstash-message-id": "msg_5", "upstash-retried": "0" },
  });
  assert.equal(failed.status, 503);
  await failed.body?.cancel();
  const worker = lines.filter((line) => line.startsWith("worker"));
  assert.equal(worker.length, 5, lines.join("\n"));
  assert.match(
    worker[0]!,
    /^worker {2}pi_0001\/settle +#1 .* message pubsub\/m-1$/,
  );
  assert.match(
    worker[1]!,
    /^worker {2}pi_0002\/settle +#5 +poison .* message pubsub\/copy-2$/,
  );
  assert.match(
    worker[2]!,
    /^worker {2}pi_0003\/settle +#1 .* message generic\/m-3$/,
  );
  assert.match(
    worker[3]!,
    /^worker {2}pi_0004\/settle +#3 +poison .* message generic\/m-4$/,
  );
  assert.match(
    worker[4]!,
    /^worker {2}pi_0005\/settle +failed unexpectedly: .* message qstash\/msg_5$/,
  );
});
