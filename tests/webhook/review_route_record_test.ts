/**
 * `POST /v1/intents/:id/resolve` and an intent imported in review: what
 * its record says may have left decides whether a fail needs the nonce
 * looked up (`nonceChecked`), each field on its own.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, type NewIntent, ScriptedSender } from "../../mod.ts";
import { notWritten } from "../../store/_not_written.ts";

const OPS = "ops-token-for-review-record-tests";

/** An app over a store holding `pi_1` imported in review as `fields` say. */
async function imported(fields: Partial<NewIntent>) {
  const store = new MemoryStore();
  const intent = await store.createIntent({
    id: "pi_1",
    state: "needs_review",
    hold: "pending",
    ...fields,
  });
  const clock = { mono: 0 };
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
    monotonicNow: () => clock.mono,
  });
  const fail = (nonceChecked?: boolean) =>
    app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers: { authorization: `Bearer ${OPS}` },
      body: JSON.stringify({
        to: "failed",
        version: intent.version,
        ...(nonceChecked === undefined ? {} : { nonceChecked }),
      }),
    });
  return { store, fail, clock };
}

Deno.test("POST /v1/intents/:id/resolve will not fail without the nonce check a payment imported in review with a broadcast in flight, even told nothing left before it", async () => {
  // `mayHaveSent: false` speaks of the sends before; the broadcast in
  // flight may have left since, with no hash kept.
  const { store, fail, clock } = await imported({
    mayHaveSent: false,
    broadcasting: 5,
  });
  // That send may still run in some instance: a lease's wait comes first.
  const waited = await fail();
  assert.equal(waited.status, 409);
  assert.match((await waited.json()).type, /send-in-flight$/);
  clock.mono += 30_000;
  const refused = await fail();
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.match(problem.type, /nonce-unchecked$/);
  assert.match(problem.detail, /a broadcast in flight/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  const failed = await fail(true);
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});

Deno.test("POST /v1/intents/:id/resolve fails without the nonce check a payment imported in review whose only send is on record as not sent, told nothing left", async () => {
  const { store, fail } = await imported({
    mayHaveSent: false,
    lastBroadcast: { outcome: "not_sent", error: "chain id mismatch", at: 0 },
  });
  const failed = await fail();
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});

Deno.test("POST /v1/intents/:id/resolve does not say a tx is on no record when its record landed and only its answer was lost", async () => {
  // The record of the sent tx commits, and its answer is lost: the relayer
  // keeps the tx as unrecorded, and the store has it on the intent too.
  class AnswerLost extends MemoryStore {
    lost = true;
    override async recordBroadcast(
      ...args: Parameters<MemoryStore["recordBroadcast"]>
    ) {
      const recorded = await super.recordBroadcast(...args);
      if (this.lost && args[2].outcome === "sent") {
        this.lost = false;
        throw new Error("connection lost after the commit");
      }
      return recorded;
    }
  }
  const store = new AnswerLost();
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  const app = createApp({
    store,
    sender: new ScriptedSender({
      pi_1: { sends: [{ txHash: "0xs" }], receipts: ["confirmed"] },
    }),
    opsToken: OPS,
    log: () => {},
  });
  await app.relayer.deliver({ intentId: "pi_1", kind: "settle" }, 1);
  const sent = (await store.getIntent("pi_1"))!;
  assert.deepEqual(sent.txHashes, ["0xs"]);
  const reviewed = await store.transition("pi_1", {
    from: "settling",
    to: "needs_review",
    version: sent.version,
    at: 1,
  });
  const res = await app.request("/v1/intents/pi_1/resolve", {
    method: "POST",
    headers: { authorization: `Bearer ${OPS}` },
    body: JSON.stringify({ to: "failed", version: reviewed.version }),
  });
  assert.equal(res.status, 409);
  const problem = await res.json();
  assert.match(problem.type, /tx-confirmed$/);
  assert.match(problem.detail, /0xs/);
  assert.doesNotMatch(problem.detail, /on no record/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
});

Deno.test("POST /v1/intents/:id/resolve waits for no send in flight when the send ran here and its record was refused with nothing written, and still waits when its record's error says nothing", async () => {
  // The send ends in this process; its record fails. Marked "nothing
  // written" (a full disk, a read-only database), the write-ahead left on
  // the intent is that send's, which ended: no other can still run behind
  // it. Unmarked (a connection cut after the commit), it may have landed,
  // and the write-ahead read may be another send's.
  for (const marked of [true, false]) {
    class RecordFails extends MemoryStore {
      override recordBroadcast(): Promise<never> {
        const error = new Error("the disk is full");
        return Promise.reject(marked ? notWritten(error) : error);
      }
    }
    const store = new RecordFails();
    await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const clock = { mono: 0 };
    const app = createApp({
      store,
      sender: new ScriptedSender({
        pi_1: {
          sends: [{ txHash: "0xs" }],
          receipts: ["dropped", "dropped", "dropped"],
        },
      }),
      opsToken: OPS,
      log: () => {},
      monotonicNow: () => clock.mono,
    });
    const outcome = await app.relayer.deliver(
      { intentId: "pi_1", kind: "settle" },
      1,
    );
    assert.match(
      outcome.reason ?? "",
      marked
        ? /^sent 0xs, but its record failed: the disk is full$/
        : /^sent 0xs, and its record may have landed: the disk is full$/,
    );
    const settling = (await store.getIntent("pi_1"))!;
    assert.notEqual(settling.broadcasting, null, "the write-ahead stays");
    const reviewed = await store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: settling.version,
      at: 1,
    });
    const fail = () =>
      app.request("/v1/intents/pi_1/resolve", {
        method: "POST",
        headers: { authorization: `Bearer ${OPS}` },
        body: JSON.stringify({
          to: "failed",
          version: reviewed.version,
          nonceChecked: true,
        }),
      });
    const res = await fail();
    if (marked) {
      // Its tx is on no record: looked up again once, then failed, with
      // no lease's wait (the clock has not moved).
      assert.equal(res.status, 409);
      assert.match((await res.json()).type, /send-ended$/);
      const failed = await fail();
      assert.equal(failed.status, 200, await failed.text());
      assert.equal((await store.getIntent("pi_1"))?.state, "failed");
    } else {
      assert.equal(res.status, 409);
      assert.match((await res.json()).type, /send-in-flight$/);
      assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
    }
  }
});
