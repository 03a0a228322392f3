/**
 * A QStash delivery the store answered busy twice, at the delivery (a
 * lease or another session's lock) and again at the token's record: the
 * delivery is a retry (503) and its token is on no record. QStash signs
 * neither `Upstash-Retried` nor `Upstash-Message-Id`, so whoever saw the
 * request could send it again with a raised count once the store is back:
 * delivery 100 of an authorized payment drops its job unsent, a dead
 * letter in its place. This instance remembers such a token as used. The
 * generic route signs its delivery number, and a request counted in the
 * store whose count was the busy write was not counted: sent again, it is
 * counted once.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { busyWhile } from "./_busy_while.ts";
import {
  AUTHORIZED,
  genericRequest,
  makeApp,
  NOW,
  SENT_WAITING,
} from "./_app.ts";
import { signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

const authorized = AUTHORIZED;
const waiting = SENT_WAITING;

type App = Awaited<ReturnType<typeof makeApp>>["app"];

/**
 * An app over a store holding `intent`, its `busy` calls refused as
 * another session's lock while `on.busy` (true until the test sets it
 * false), the payment's send scripted to answer `0xabc`, then pending.
 */
async function busyApp(
  intent: Parameters<MemoryStore["createIntent"]>[0],
  busy: readonly string[],
): Promise<{ memory: MemoryStore; on: { busy: boolean }; app: App }> {
  const memory = new MemoryStore();
  await memory.createIntent(intent);
  const on = { busy: true };
  const { app } = await makeApp({
    deps: { store: busyWhile(memory, new Set(busy), on) },
    scripts: {
      pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
    },
  });
  return { memory, on, app };
}

/** QStash's signed request for `job`, its `Upstash-Retried` as given. */
function postQStash(
  app: App,
  signature: string,
  retried?: string,
): Promise<Response> {
  return Promise.resolve(app.request("/v1/qstash", {
    method: "POST",
    body: JSON.stringify(job),
    headers: {
      "upstash-signature": signature,
      ...(retried === undefined ? {} : { "upstash-retried": retried }),
    },
  }));
}

/** Asserts `answer` is a busy delivery's: a retry, 503. */
async function assertBusy(answer: Response): Promise<void> {
  const text = await answer.text();
  assert.equal(answer.status, 503, text);
  assert.equal(JSON.parse(text).outcome, "retry", text);
}

/**
 * Sends the request `signature` signed again as delivery 100, the store
 * back, and asserts it is refused as a replay: no dead letter, the intent
 * as it was `before`.
 */
async function assertReplayRefused(
  app: App,
  memory: MemoryStore,
  signature: string,
  before: unknown,
): Promise<void> {
  const replay = await postQStash(app, signature, "99");
  const replayed = await replay.text();
  assert.equal(replay.status, 401, replayed);
  assert.match(JSON.parse(replayed).detail, /already delivered/);
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  assert.deepEqual(await memory.getIntent("pi_0001"), before);
}

for (
  const [name, intent, busy] of [
    [
      "its settle write and its token's record (an authorized payment: its job dropped unsent)",
      authorized,
      ["transition", "admit"],
    ],
    [
      "its token's record (a look-only delivery: a payment sent, to review)",
      waiting,
      ["admit"],
    ],
  ] as const
) {
  Deno.test(`POST /v1/qstash: a delivery the store answered busy at ${name} cannot be sent again as delivery 100 (401)`, async () => {
    const { memory, on, app } = await busyApp(intent, busy);
    const before = await memory.getIntent("pi_0001");
    const signature = await signQStash(JSON.stringify(job));
    await assertBusy(await postQStash(app, signature, "0"));
    on.busy = false; // the store is back
    await assertReplayRefused(app, memory, signature, before);
  });
}

Deno.test("POST /v1/deliveries: a delivery counted in the store that the store answered busy at its count keeps its signature (the route signs its number): sent again, it is counted once, not twice", async () => {
  const { memory, on, app } = await busyApp(authorized, ["admit"]);
  const init = await genericRequest(JSON.stringify({ job }));
  const first = await app.request("/v1/deliveries", init);
  const text = await first.text();
  assert.equal(first.status, 503, text);
  assert.equal(JSON.parse(text).outcome, "retry", text);
  on.busy = false;
  const again = await app.request("/v1/deliveries", init);
  const answer = await again.json();
  assert.equal(answer.delivery, 1, JSON.stringify(answer));
  assert.equal(await memory.deliveries("pi_0001/settle", NOW), 1);
  const replay = await app.request("/v1/deliveries", init);
  assert.equal(replay.status, 401, await replay.text());
  assert.equal(await memory.deliveries("pi_0001/settle", NOW), 1);
});

Deno.test("POST /v1/qstash: a delivery without Upstash-Retried (counted in the store) that the store answered busy at its count and token's record cannot be sent again as delivery 100 (401)", async () => {
  const { memory, on, app } = await busyApp(authorized, ["admit"]);
  const before = await memory.getIntent("pi_0001");
  const signature = await signQStash(JSON.stringify(job));
  await assertBusy(await postQStash(app, signature));
  on.busy = false; // the store is back
  await assertReplayRefused(app, memory, signature, before);
  assert.equal(await memory.deliveries("pi_0001/settle", NOW), 0);
});

Deno.test("POST /v1/deliveries: the generic route's busy deliveries take no room among the QStash tokens remembered as used: ten thousand of them leave such a token remembered", async () => {
  const { memory, on, app } = await busyApp(authorized, [
    "transition",
    "admit",
  ]);
  const before = await memory.getIntent("pi_0001");
  const signature = await signQStash(JSON.stringify(job));
  await assertBusy(await postQStash(app, signature, "0"));
  // As many as this instance remembers of QStash's tokens (10,000), each
  // a signed request of its own, each answered busy.
  for (let i = 0; i < 10_000; i++) {
    const other = { intentId: `pi_${i}`, kind: "settle" };
    const init = await genericRequest(JSON.stringify({ job: other }));
    const answer = await app.request("/v1/deliveries", init);
    await answer.body?.cancel();
    assert.equal(answer.status, 503, `generic delivery ${i + 1}`);
  }
  on.busy = false;
  await assertReplayRefused(app, memory, signature, before);
});
