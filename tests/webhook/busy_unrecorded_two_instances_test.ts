/**
 * A QStash delivery the store answered busy twice (at the delivery and at
 * its token's record) at one instance, and the same signed request sent
 * again with `Upstash-Retried: 99` once the store is back, to another
 * instance behind the same URL. The memory of tokens left on no record is
 * the instance's own (`docs/webhook.md`, "A token whose delivery the store
 * answered busy is remembered too"): the other instance takes the request
 * as delivery 100. Measured here, so that the documented reach stays
 * true: an authorized payment's job is dropped unsent, the hold pending
 * and a dead letter kept that a redrive sends from; a payment waiting for
 * its receipt goes to review with its tx on record. Nothing is sent, no
 * hold is voided, no payment failed. The instance that saw it first still
 * refuses it, and once it has, its record is in the store for every
 * instance.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { busyWhile } from "./_busy_while.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";
import { AUTHORIZED, makeApp, OPS, SENT_WAITING } from "./_app.ts";
import { lockWrites } from "./_locked_writes.ts";
import { signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

type App = Awaited<ReturnType<typeof makeApp>>["app"];

/** QStash's signed request for `job` as message `messageId`, its `Upstash-Retried` as given. */
async function postQStash(
  app: App,
  signature: string,
  retried: string,
  messageId = "msg_1",
): Promise<Response> {
  return await app.request("/v1/qstash", {
    method: "POST",
    body: JSON.stringify(job),
    headers: {
      "upstash-signature": signature,
      "upstash-retried": retried,
      "upstash-message-id": messageId,
    },
  });
}

/**
 * Two instances over one store holding `intent`, its `busy` calls refused
 * while `on.busy`; each its own Sender, scripted to answer `0xabc`, then
 * pending.
 */
async function twoInstances(
  intent: Parameters<MemoryStore["createIntent"]>[0],
  busy: readonly string[],
) {
  const memory = new MemoryStore();
  await memory.createIntent(intent);
  const on = { busy: true };
  const store = busyWhile(memory, new Set(busy), on);
  const scripts = {
    pi_0001: {
      sends: [{ txHash: "0xabc" }],
      receipts: ["pending" as const],
    },
  };
  const deps = {
    store,
    log: () => {},
    redriveTo: { publish: () => Promise.resolve() },
  };
  const a = await makeApp({ deps, scripts });
  const b = await makeApp({ deps, scripts });
  return { memory, on, a, b };
}

/**
 * {@linkcode twoInstances} over `intent`, the QStash delivery of `job`
 * answered busy (503) at instance `a`, then the store back: its signature,
 * for the resend.
 */
async function answeredBusyAtA(
  intent: Parameters<MemoryStore["createIntent"]>[0],
  busy: readonly string[],
) {
  const instances = await twoInstances(intent, busy);
  const signature = await signQStash(JSON.stringify(job));
  const first = await postQStash(instances.a.app, signature, "0");
  assert.equal(first.status, 503, await first.text());
  instances.on.busy = false; // the store is back
  return { ...instances, signature };
}

const authorized = AUTHORIZED;
const waiting = SENT_WAITING;

Deno.test("two instances: a QStash delivery answered busy twice at one, sent again as delivery 100 to the other, drops an authorized payment's job unsent there (the hold pending, nothing sent, QStash's own retries late copies); the first instance refuses it, and a redrive of the letter sends", async () => {
  const { memory, a, b, signature } = await answeredBusyAtA(authorized, [
    "transition",
    "admit",
  ]);
  const elsewhere = await postQStash(b.app, signature, "99");
  const answer = await elsewhere.json();
  assert.equal(answer.outcome, "poison", JSON.stringify(answer));
  assert.equal(answer.delivery, 100, JSON.stringify(answer));
  const letter = await memory.getDeadLetter("pi_0001/settle");
  assert.match(letter?.resolution ?? "", /dropped/, JSON.stringify(letter));
  const intent = await memory.getIntent("pi_0001");
  assert.equal(`${intent?.state}/${intent?.hold}`, "authorized/pending");
  assert.deepEqual(a.sender.calls, []);
  assert.deepEqual(b.sender.calls, []);
  // The instance that saw it first knows it.
  const here = await postQStash(a.app, signature, "99");
  assert.equal(here.status, 401, await here.text());
  // QStash's own retry of the message, signed afresh: a late copy, which
  // sends nothing; the letter stays for a redrive.
  const retry = await postQStash(
    a.app,
    await signQStash(JSON.stringify(job)),
    "1",
  );
  const retried = await retry.json();
  assert.match(
    retried.reason,
    /a late copy, nothing sent/,
    JSON.stringify(retried),
  );
  assert.deepEqual(a.sender.calls, []);
  // The operator redrives the letter; its message's first delivery sends.
  const redrive = await b.app.request(
    "/v1/dead-letters/pi_0001/settle/redrive",
    { method: "POST", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(redrive.status, 202, await redrive.text());
  const redriven = await postQStash(
    b.app,
    await signQStash(JSON.stringify(job)),
    "0",
    "msg_2",
  );
  await redriven.body?.cancel();
  assert.equal((await memory.getIntent("pi_0001"))?.state, "settling");
  const calls: readonly { method: string }[] = b.sender.calls;
  assert.deepEqual(calls.filter((call) => call.method === "send"), [
    { method: "send", intentId: "pi_0001", replace: false },
  ]);
});

Deno.test("two instances: a look-only QStash delivery answered busy at its token's record at one, sent again as delivery 100 to the other, sends the waiting payment to review there, its tx on record, its hold pending", async () => {
  const { memory, b, signature } = await answeredBusyAtA(waiting, ["admit"]);
  const elsewhere = await postQStash(b.app, signature, "99");
  const answer = await elsewhere.json();
  assert.equal(answer.outcome, "poison", JSON.stringify(answer));
  const intent = await memory.getIntent("pi_0001");
  assert.equal(`${intent?.state}/${intent?.hold}`, "needs_review/pending");
  assert.deepEqual(intent?.txHashes, ["0xabc"]);
  assert.deepEqual(b.sender.calls.filter((call) => call.method === "send"), []);
});

Deno.test("two instances: once the instance that answered a QStash delivery busy twice has refused it sent again, its record is in the store: the other instance refuses it too (401), and the job stays", async () => {
  const { memory, a, b, signature } = await answeredBusyAtA(authorized, [
    "transition",
    "admit",
  ]);
  const here = await postQStash(a.app, signature, "99");
  assert.equal(here.status, 401, await here.text());
  const elsewhere = await postQStash(b.app, signature, "99");
  assert.equal(elsewhere.status, 401, await elsewhere.text());
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
});

Deno.test({
  name:
    "two instances on PostgreSQL: a QStash delivery another session's lock held at its settle write and its token's record at one, sent again as delivery 100 to the other once the lock is gone, drops the authorized payment's job unsent there (the hold pending, nothing sent)",
  ignore: !postgresAvailable,
  fn: onFreshSchema(
    { max: 2, connectionWaitMs: 1_000 },
    async ({ admin, schema, store }) => {
      await store.createIntent(authorized);
      const scripts = { pi_0001: { sends: [{ txHash: "0xabc" }] } };
      const a = await makeApp({ deps: { store, log: () => {} }, scripts });
      const b = await makeApp({ deps: { store, log: () => {} }, scripts });
      const signature = await signQStash(JSON.stringify(job));
      const unlock = await lockWrites(admin, schema);
      try {
        const first = await postQStash(a.app, signature, "0");
        const text = await first.text();
        assert.equal(first.status, 503, text);
        assert.equal(JSON.parse(text).outcome, "retry", text);
      } finally {
        await unlock(); // the store is back
      }
      const elsewhere = await postQStash(b.app, signature, "99");
      const answer = await elsewhere.json();
      assert.equal(answer.outcome, "poison", JSON.stringify(answer));
      assert.equal(answer.delivery, 100, JSON.stringify(answer));
      const reader = new PostgresStore(admin, { schema });
      const intent = await reader.getIntent("pi_0001");
      assert.equal(`${intent?.state}/${intent?.hold}`, "authorized/pending");
      assert.notEqual(await reader.getDeadLetter("pi_0001/settle"), null);
      assert.deepEqual(a.sender.calls, []);
      assert.deepEqual(b.sender.calls, []);
      const here = await postQStash(a.app, signature, "99");
      assert.equal(here.status, 401, await here.text());
    },
  ),
});
