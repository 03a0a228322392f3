import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { type Job, MemoryStore, ScriptedSender } from "../../mod.ts";

const OPS = "ops-token-for-redrive-tests";
const ops = { authorization: `Bearer ${OPS}` };

/** An app whose store holds a dead letter for `pi_0001/settle` (intent still created). */
async function withDeadLetter(
  options: {
    queue?: boolean;
    publish?: (job: Job) => Promise<void>;
    log?: (line: string) => void;
  } = {},
) {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const enqueued: Job[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    insecureDev: true, // an unsigned delivery makes the dead letter
    opsToken: OPS,
    ...(options.queue === false ? {} : {
      redriveTo: {
        publish: options.publish ??
          ((job: Job) => Promise.resolve(void enqueued.push(job))),
      },
    }),
    ...(options.log ? { log: options.log } : {}),
  });
  const poisoned = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    }),
  });
  assert.equal((await poisoned.json()).outcome, "poison");
  return { app, enqueued, store };
}

Deno.test("createApp() without a queue to redrive to refuses the redrive (503) and keeps the dead letter, so the intent is not stranded", async () => {
  const { app, store } = await withDeadLetter({ queue: false });
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 503);
  const body = await res.json();
  assert.equal(body.type.endsWith("not-configured"), true, body.type);
  assert.match(
    body.detail,
    /set QSTASH_TOKEN, or KV_QUEUE=1 on Deno KV, as the local queue cannot run with DATABASE_URL/,
  );
  // The intent is still created: its dead letter is what records it.
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  // The body the answer gives is a delivery, counted afresh from 1.
  const job = JSON.parse(
    /as (\{"job":.*"delivery":1\})/.exec(body.detail)?.[1] ?? "null",
  );
  assert.deepEqual(job, {
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  const again = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify(job),
  });
  assert.equal((await again.json()).delivery, 1);
});

Deno.test("createApp() without a queue answers 404 for a missing dead letter and 409 for a settled intent before it advises a redelivery", async () => {
  const { app, store } = await withDeadLetter({ queue: false });
  const missing = await app.request("/v1/dead-letters/pi_0404/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).type.endsWith("not-found"), true);
  await store.createIntent({ id: "pi_done", state: "settled" });
  await store.putDeadLetter({
    jobId: "pi_done/settle",
    intentId: "pi_done",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still settling",
    lastError: "pending",
    poisonedAt: 0,
  });
  const settled = await app.request("/v1/dead-letters/pi_done/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(settled.status, 409);
  const body = await settled.json();
  assert.equal(body.type.endsWith("cannot-redrive"), true, body.type);
  assert.match(
    body.detail,
    /intent pi_done is already settled: no job can help it/,
  );
  assert.doesNotMatch(body.detail, /delivery/);
  assert.notEqual(await store.getDeadLetter("pi_done/settle"), null);
});

Deno.test("createApp() answers 503 when the redrive's queue fails, keeps the dead letter, and logs why", async () => {
  const lines: string[] = [];
  const { app, store } = await withDeadLetter({
    publish: () => Promise.reject(new Error("QStash answered 500")),
    log: (line) => lines.push(line),
  });
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "5");
  const body = await res.json();
  assert.equal(body.type, "urn:relayer:problem:redrive-failed");
  assert.match(body.detail, /^The redrive of pi_0001\/settle did not complete/);
  assert.doesNotMatch(body.detail, /QStash answered/);
  assert.ok(
    lines.includes(
      "relayer redrive of pi_0001/settle failed: Error: QStash answered 500",
    ),
    lines.join("\n"),
  );
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createApp() redrives a dead letter named by intent and kind, as two path segments", async () => {
  const { app, enqueued } = await withDeadLetter();
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 202);
  assert.deepEqual(await res.json(), {
    job: { intentId: "pi_0001", kind: "settle" },
    enqueued: true,
  });
  assert.deepEqual(enqueued, [{ intentId: "pi_0001", kind: "settle" }]);
  const again = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(again.status, 404); // redriven already: the dead letter is gone
});

Deno.test("createApp() still redrives a dead letter whose job id is one %2F-encoded segment", async () => {
  const { app } = await withDeadLetter();
  const res = await app.request("/v1/dead-letters/pi_0001%2Fsettle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 202);
});

Deno.test("createApp() guards the two-segment redrive route like the other ops routes", async () => {
  const { app } = await withDeadLetter();
  const path = "/v1/dead-letters/pi_0001/settle/redrive";
  assert.equal((await app.request(path, { method: "POST" })).status, 401);
  const wrongMethod = await app.request(path, { headers: ops });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get("allow"), "POST");
  const unknown = await app.request("/v1/dead-letters/pi_0404/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(unknown.status, 404);
});
