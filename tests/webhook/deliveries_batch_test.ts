/**
 * A bridge that sends its queue's batch to `POST /v1/deliveries` (a JSON
 * array of deliveries, or an SQS Lambda event `{"Records": […]}` passed
 * on as it came) is refused 400, as the route takes one delivery per
 * request, and told so in those words. A signed batch's readable jobs are
 * kept first, each as a dead letter naming its intent, as a signed body
 * encoded twice or a bare job is: refused with nothing kept, a bridge that
 * takes a 4xx as final dropped every job of the batch, and each intent was
 * left with no job and no dead letter.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { genericRequest, makeApp } from "./_app.ts";

const intents = [
  { id: "pi_0001", state: "authorized", hold: "pending" },
  { id: "pi_0002", state: "authorized", hold: "pending" },
] as const;

Deno.test("POST /v1/deliveries keeps each readable job of a signed JSON array of deliveries as a dead letter naming its intent, then refuses it 400 saying to send one delivery per request", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [...intents],
    deps: { log: (line) => lines.push(line) },
  });
  const batch = [
    { job: { intentId: "pi_0001", kind: "settle" }, delivery: 2 },
    { intentId: "pi_0002", kind: "settle" }, // a bare job
    { delivery: 1 }, // names no job
  ];
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(batch)),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(
    detail,
    /^The body is a batch \(a JSON array of 3 elements\): POST \/v1\/deliveries takes one delivery per request, \{"job":/,
  );
  assert.match(detail, /send each element as a request of its own/);
  assert.match(
    detail,
    /Kept 2 jobs as dead letters \(generic\/sha256-[0-9a-f]{32}\/unreadable for intent pi_0001, generic\/sha256-[0-9a-f]{32}\/unreadable for intent pi_0002\); 1 element names no job and is not kept: publish a readable job for each intent, then discard its letter\.$/,
  );
  const letters = (await store.listDeadLetters({ limit: 10 })).items;
  assert.deepEqual(
    letters.map((letter) => [letter.intentId, letter.deliveries]).sort(),
    [["pi_0001", 2], ["pi_0002", 1]],
  );
  for (const letter of letters) {
    assert.equal(letter.cause, "declared");
    assert.match(
      letter.reason,
      /^unreadable bridge message: The body is a batch/,
    );
  }
  assert.equal(
    lines.filter((line) => /refused and kept as a dead letter/.test(line))
      .length,
    2,
    lines.join("\n"),
  );
  // The intents are untouched.
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
});

Deno.test('POST /v1/deliveries keeps each readable job of a signed SQS Lambda event ({"Records": […]}) as a dead letter with its ApproximateReceiveCount, then refuses it 400 saying to send each record\'s body as a delivery of its own', async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  const event = {
    Records: [
      {
        messageId: "059f36b4-87a3-44ab-83d2-661975830a7d",
        body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
        attributes: { ApproximateReceiveCount: "3" },
        eventSource: "aws:sqs",
      },
      {
        messageId: "2e1424d4-f796-459a-8184-9c92662be6da",
        body: JSON.stringify({ job: { intentId: "pi_0002", kind: "settle" } }),
        attributes: { ApproximateReceiveCount: "1" },
        eventSource: "aws:sqs",
      },
    ],
  };
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(event)),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(
    detail,
    /^The body is a batch \(an SQS event of 2 records, \{"Records": …\}\): POST \/v1\/deliveries takes one delivery per request,/,
  );
  assert.match(
    detail,
    /send each record's body, parsed, as a request of its own \(its ApproximateReceiveCount as 'delivery', a number, and its messageId as 'messageId'\)/,
  );
  assert.match(detail, /Kept 2 jobs as dead letters/);
  const letters = (await store.listDeadLetters({ limit: 10 })).items;
  assert.deepEqual(
    letters.map((letter) => [letter.intentId, letter.deliveries]).sort(),
    [["pi_0001", 3], ["pi_0002", 1]],
  );
});

Deno.test("POST /v1/deliveries refuses a batch with no job naming an intent (an empty array, numbers, misspelt jobs whose intent id cannot be read) 400 saying batches are not taken, with nothing kept; an unsigned batch 401, nothing kept", async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  for (
    const body of [
      [],
      [1, 2],
      [{ job: { intentId: "", kind: "Settle" } }, { job: { kind: "settle" } }],
      { Records: [] },
      { Records: [{ body: "not json" }] },
    ]
  ) {
    const text = JSON.stringify(body);
    const res = await app.request("/v1/deliveries", await genericRequest(text));
    assert.equal(res.status, 400, text);
    const { detail } = await res.json();
    assert.match(detail, /^The body is a batch /, text);
    assert.match(detail, /takes one delivery per request/, text);
    assert.doesNotMatch(detail, /Kept/, text);
  }
  const unsigned = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify([{ job: { intentId: "pi_0001", kind: "settle" } }]),
      { signature: "t=1000,v1=00" },
    ),
  );
  assert.equal(unsigned.status, 401);
  await unsigned.body?.cancel();
  assert.deepEqual((await store.listDeadLetters({ limit: 10 })).items, []);
});

Deno.test("POST /v1/deliveries refuses a replay of a signed batch whose jobs it kept 401, as a replay, keeping no letter twice", async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  const init = await genericRequest(
    JSON.stringify([{ job: { intentId: "pi_0001", kind: "settle" } }]),
  );
  const first = await app.request("/v1/deliveries", init);
  assert.equal(first.status, 400);
  await first.body?.cancel();
  const kept = (await store.listDeadLetters({ limit: 10 })).items;
  assert.equal(kept.length, 1);
  const again = await app.request("/v1/deliveries", init);
  assert.equal(again.status, 401);
  assert.match((await again.json()).detail, /already delivered: a replay/);
  assert.deepEqual((await store.listDeadLetters({ limit: 10 })).items, kept);
});

Deno.test("POST /v1/deliveries refuses a replay of a signed batch of several jobs 401 and writes nothing: a letter discarded since its first delivery stays discarded", async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  const init = await genericRequest(
    JSON.stringify([
      { job: { intentId: "pi_0001", kind: "settle" } },
      { job: { intentId: "pi_0002", kind: "settle" } },
    ]),
  );
  const first = await app.request("/v1/deliveries", init);
  assert.equal(first.status, 400);
  await first.body?.cancel();
  const kept = (await store.listDeadLetters({ limit: 10 })).items;
  assert.equal(kept.length, 2);
  // The operator discards pi_0001's letter (a readable job was published).
  const discarded = kept.find((letter) => letter.intentId === "pi_0001")!;
  const read = (await store.getDeadLetter(discarded.jobId))!;
  await store.redrive(discarded.jobId, read.version, { keepCount: true });
  const left = (await store.listDeadLetters({ limit: 10 })).items;
  // A replay of the same signed request, within its five minutes.
  const again = await app.request("/v1/deliveries", init);
  assert.equal(again.status, 401);
  assert.match((await again.json()).detail, /already delivered: a replay/);
  assert.deepEqual(
    (await store.listDeadLetters({ limit: 10 })).items,
    left,
    "the replay wrote a letter",
  );
});

Deno.test("POST /v1/deliveries answers 503 for a signed batch whose letter cannot be kept, leaving the signature unused, so the bridge's retry of the same batch keeps each job once", async () => {
  const memory = new MemoryStore();
  let down = true;
  let puts = 0;
  const store = new Proxy(memory, {
    get: (target, key) =>
      key === "putDeadLetter"
        ? (...args: Parameters<MemoryStore["putDeadLetter"]>) =>
          down && ++puts === 2
            ? Promise.reject(new Error("store down"))
            : target.putDeadLetter(...args)
        : Reflect.get(target, key, target),
  });
  const { app } = await makeApp({ intents: [...intents], deps: { store } });
  const job = (intentId: string) => ({ job: { intentId, kind: "settle" } });
  // The same job twice, as a batch may carry a message and its redelivery.
  const init = await genericRequest(
    JSON.stringify([job("pi_0001"), job("pi_0001"), job("pi_0002")]),
  );
  const failed = await app.request("/v1/deliveries", init);
  assert.equal(failed.status, 503);
  assert.match(
    (await failed.json()).detail,
    /could not be kept as a dead letter; deliver it again\.$/,
  );
  down = false;
  const again = await app.request("/v1/deliveries", init);
  assert.equal(again.status, 400);
  const { detail } = await again.json();
  assert.match(detail, /Kept 2 jobs as dead letters/);
  const letters = (await memory.listDeadLetters({ limit: 10 })).items;
  assert.deepEqual(
    letters.map((letter) => letter.intentId).sort(),
    ["pi_0001", "pi_0002"],
  );
  // The letter the failed try kept is named as it was kept.
  for (const letter of letters) {
    assert.ok(
      detail.includes(`${letter.jobId} for intent ${letter.intentId}`),
      detail,
    );
  }
});

Deno.test("POST /v1/deliveries keeps the readable jobs of a signed batch encoded as JSON twice (a bridge that stringifies its batch) and says it is a JSON text of a batch", async () => {
  const { app, store } = await makeApp({ intents: [...intents] });
  const batch = [{ job: { intentId: "pi_0001", kind: "settle" }, delivery: 4 }];
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(JSON.stringify(batch))),
  );
  assert.equal(res.status, 400);
  assert.match(
    (await res.json()).detail,
    /^The body is a batch \(a JSON text of a JSON array of 1 element\): .* Kept 1 job as a dead letter \(generic\/sha256-[0-9a-f]{32}\/unreadable for intent pi_0001\): /,
  );
  assert.deepEqual(
    (await store.listDeadLetters({ limit: 10 })).items.map((letter) => [
      letter.intentId,
      letter.deliveries,
    ]),
    [["pi_0001", 4]],
  );
});

Deno.test("POST /v1/deliveries keeps a misspelt job whose intent id can be read, in a batch or a body encoded as JSON twice, as a letter naming its intent, as it keeps the job sent alone", async () => {
  const misspelt = { intentId: "pi_0001", kind: "Settle" };
  for (
    const body of [
      { job: misspelt, delivery: 2 }, // alone, as before
      [{ job: misspelt, delivery: 2 }, { delivery: 1 }],
      JSON.stringify({ job: misspelt, delivery: 2 }),
      {
        Records: [{
          body: JSON.stringify(misspelt),
          attributes: { ApproximateReceiveCount: "2" },
        }],
      },
    ]
  ) {
    const text = JSON.stringify(body);
    const { app, store } = await makeApp({ intents: [...intents] });
    const res = await app.request("/v1/deliveries", await genericRequest(text));
    assert.equal(res.status, 400, text);
    const { detail } = await res.json();
    assert.deepEqual(
      (await store.listDeadLetters({ limit: 10 })).items.map((
        letter,
      ) => [letter.intentId, letter.deliveries]),
      [["pi_0001", 2]],
      text,
    );
    assert.match(
      detail,
      /'kind' must be "settle": current value is "Settle"/,
      text,
    );
    assert.match(detail, /pi_0001/, text);
  }
  // One whose intent id cannot be read names nothing, and keeps nothing.
  const { app, store } = await makeApp({ intents: [...intents] });
  for (
    const body of [
      [{ job: { intentId: "", kind: "Settle" } }, { job: { kind: "settle" } }],
      JSON.stringify({ job: { intentId: "pi 1", kind: "settle" } }),
      JSON.stringify({ job: JSON.stringify(misspelt) }),
    ]
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400);
    await res.body?.cancel();
  }
  assert.deepEqual((await store.listDeadLetters({ limit: 10 })).items, []);
});
