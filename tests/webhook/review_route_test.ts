/**
 * `POST /v1/intents/:id/resolve`: an operator settles or fails a payment in
 * review (DESIGN §2, the hold captured or voided first), on the version
 * they read, and nothing else.
 *
 * @module
 */

import { catchTimers } from "../_armed_timer.ts";
import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import {
  type Broadcast,
  MemoryStore,
  poison,
  type ReceiptStatus,
  ScriptedSender,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-review-tests";
const headers = { authorization: `Bearer ${OPS}` };

/** The test apps' lease (the relayer's default). */
const LEASE_MS = 30_000;

/**
 * Posts a fail of a review that may have sent (`post`), whose first answer
 * is 409 `send-in-flight` whatever it says: a send of it may still run in
 * some instance with no write-ahead on record (another's rescue replaced
 * it). A lease later on the app's monotonic clock (`clock.mono`), every
 * send has ended: it posts it again, and returns that answer.
 */
async function afterTheWait(
  post: () => Response | Promise<Response>,
  clock: { mono: number },
): Promise<Response> {
  const first = await post();
  const problem = await first.json();
  assert.equal(first.status, 409, JSON.stringify(problem));
  assert.equal(problem.type, "urn:relayer:problem:send-in-flight");
  assert.equal(first.headers.get("retry-after"), String(LEASE_MS / 1000));
  clock.mono += LEASE_MS;
  return await post();
}

/** Puts `pi_1` in review on `store`, its hold pending; its version after. */
async function putInReview(
  store: Store,
  txHashes?: string[],
  lastBroadcast?: Broadcast,
) {
  const created = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    ...(txHashes ? { txHashes } : {}),
    ...(lastBroadcast ? { lastBroadcast } : {}),
  });
  return await store.transition("pi_1", {
    from: "settling",
    to: "needs_review",
    version: created.version,
    at: 1,
  });
}

/** An app whose store holds `pi_1` in review, its hold pending. */
async function inReview(
  options: {
    txHashes?: string[];
    lastBroadcast?: Broadcast;
    sender?: Sender;
  } = {},
) {
  const store = new MemoryStore();
  const lines: string[] = [];
  const reviewed = await putInReview(
    store,
    options.txHashes,
    options.lastBroadcast,
  );
  const clock = { mono: 0 };
  const app = createApp({
    store,
    sender: options.sender ?? new ScriptedSender({}),
    opsToken: OPS,
    log: (line) => void lines.push(line),
    monotonicNow: () => clock.mono,
  });
  const resolve = (body: unknown, id = "pi_1") =>
    app.request(`/v1/intents/${id}/resolve`, {
      method: "POST",
      headers,
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  /** A fail of a review that may have sent: {@linkcode afterTheWait}. */
  const failAfterWait = (body: unknown, id = "pi_1") =>
    afterTheWait(() => resolve(body, id), clock);
  return {
    store,
    app,
    lines,
    resolve,
    failAfterWait,
    version: reviewed.version,
  };
}

Deno.test("POST /v1/intents/:id/resolve settles a payment in review with its hold captured first, and fails one with its hold voided first, and says so in the log", async () => {
  for (const [to, hold] of [["settled", "captured"], ["failed", "voided"]]) {
    const { store, lines, resolve, failAfterWait, version } = await inReview();
    // A fail of a payment that may have sent first waits out any send.
    const res = to === "failed"
      ? await failAfterWait({ to, version, nonceChecked: true })
      : await resolve({ to, version, nonceChecked: true });
    assert.equal(res.status, 200);
    const { intent } = await res.json();
    assert.equal(intent.state, to);
    assert.equal(intent.hold, hold);
    const stored = await store.getIntent("pi_1");
    assert.equal(stored?.state, to);
    assert.equal(stored?.hold, hold);
    assert.ok(
      lines.some((line) =>
        line.includes(`review of pi_1 resolved by an operator: ${to}`)
      ),
      lines.join("\n"),
    );
  }
});

Deno.test("POST /v1/intents/:id/resolve names the job's dead letter, kept as the record of the review, and the request that discards it, which works as given", async () => {
  const { store, app, failAfterWait, version } = await inReview();
  await store.putDeadLetter({
    jobId: "pi_1/settle",
    intentId: "pi_1",
    deliveries: 10,
    cause: "exhausted",
    reason: "no luck after 10 deliveries",
    resolution: "last broadcast unknown, needs review",
    lastError: "send: signer answered 503: Service Unavailable",
    poisonedAt: 1,
  });
  const stored = await store.getDeadLetter("pi_1/settle");
  const res = await failAfterWait({
    to: "failed",
    nonceChecked: true,
    version,
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.intent.state, "failed");
  assert.deepEqual(body.deadLetter, stored);
  const discard = /(DELETE) (\/v1\/dead-letters\/\S+\?version=[^\s)]+)/.exec(
    body.next,
  );
  assert.ok(discard, body.next);
  const removed = await app.request(discard[2]!, {
    method: discard[1]!,
    headers,
  });
  assert.equal(removed.status, 200);
  await removed.body?.cancel();
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
  // Without a letter, nothing is left to do.
  const bare = await inReview();
  const plain = await (await bare.resolve({
    to: "settled",
    version: bare.version,
  })).json();
  assert.equal(plain.deadLetter, null);
  assert.equal(plain.next, undefined);
});

Deno.test("POST /v1/intents/:id/resolve stands when the dead letter cannot be read after it: no deadLetter, a next that says to look it up, and a log line", async () => {
  const { store, lines, failAfterWait, version } = await inReview();
  store.getDeadLetter = () => Promise.reject(new Error("kv: connection reset"));
  const res = await failAfterWait({
    to: "failed",
    nonceChecked: true,
    version,
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.intent.state, "failed");
  assert.equal("deadLetter" in body, false);
  assert.match(
    body.next,
    /could not be read .*GET \/v1\/intents\/pi_1 .*DELETE \/v1\/dead-letters\/pi_1\/settle\.$/,
  );
  assert.ok(
    lines.some((line) =>
      line.includes("read of the dead letter of pi_1/settle failed") &&
      line.includes("kv: connection reset")
    ),
    lines.join("\n"),
  );
});

Deno.test("POST /v1/intents/:id/resolve refuses a stale version, a payment not in review, a hold that cannot move, a bad body, and no token, changing nothing", async () => {
  const { store, app, resolve, failAfterWait, version } = await inReview();
  const stale = await resolve({ to: "failed", version: "0" });
  assert.equal(stale.status, 409);
  assert.match((await stale.json()).type, /changed$/);
  for (
    const [body, pattern] of [
      [{ to: "settle", version }, /'to' must be "settled" or "failed"/],
      [{ to: "failed" }, /'version' must be the intent's version/],
      [{ to: "failed", version, note: "x" }, /"note" is not a field/],
      ["not json", /'to' must be "settled" or "failed"/],
    ] as const
  ) {
    const res = await resolve(body);
    assert.equal(res.status, 400);
    assert.match((await res.json()).detail, pattern);
  }
  const unauthorized = await app.request("/v1/intents/pi_1/resolve", {
    method: "POST",
    body: JSON.stringify({ to: "failed", version }),
  });
  assert.equal(unauthorized.status, 401);
  assert.equal((await resolve({ to: "failed", version }, "pi_2")).status, 404);
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // The store refuses a void alone of a payment in review that may have
  // sent: the route's checks come first, and the void rides in the move.
  await assert.rejects(store.voidHold("pi_1"), /resolve route/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Voided before it went to review (nothing could have left): the funds
  // were released, so it cannot settle.
  const voided = await store.createIntent({
    id: "pi_3",
    state: "needs_review",
    hold: "voided",
    mayHaveSent: false,
  });
  const refused = await resolve(
    { to: "settled", version: voided.version },
    "pi_3",
  );
  assert.equal(refused.status, 409);
  assert.match((await refused.json()).type, /refused$/);
  assert.equal((await store.getIntent("pi_3"))?.state, "needs_review");
  // Resolved once, it is no longer in review.
  assert.equal(
    (await failAfterWait({ to: "failed", nonceChecked: true, version }))
      .status,
    200,
  );
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
  const again = await resolve({ to: "failed", nonceChecked: true, version });
  assert.equal(again.status, 409);
  assert.match((await again.json()).type, /not-in-review$/);
});

Deno.test("POST /v1/intents/:id/resolve answers 400 bad-resolution for an id no intent can have, before the store is asked, and changes nothing", async () => {
  const { store, resolve, version } = await inReview();
  for (const id of ["bad%20id", "pi_1%00", "x".repeat(300)]) {
    const res = await resolve(
      { to: "failed", nonceChecked: true, version },
      id,
    );
    assert.equal(res.status, 400, id);
    const problem = await res.json();
    assert.match(problem.type, /bad-resolution$/);
    assert.match(problem.detail, /^An intent id is /);
  }
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
});

Deno.test("POST /v1/intents/:id/resolve will not fail a payment one of whose txs confirmed, nor one whose receipts cannot be read, and fails one whose tx reverted or was dropped", async () => {
  const senderOf = (
    receipts: Record<string, () => Promise<ReceiptStatus>>,
  ): Sender => ({
    send: () => Promise.reject(new Error("no sends here")),
    receipt: (txHash) => receipts[txHash]!(),
  });
  const pending = () => Promise.resolve("pending" as const);
  const confirmed = () => Promise.resolve("confirmed" as const);
  const reverted = () => Promise.reject(poison(new Error("reverted")));
  const down = () => Promise.reject(new Error("signer down"));
  const dropped = () => Promise.resolve("dropped" as const);
  const cases: [
    Record<string, () => Promise<ReceiptStatus>>,
    number,
    string,
  ][] = [
    [{ "0xa": pending, "0xb": confirmed }, 409, "tx-confirmed"],
    [{ "0xa": down, "0xb": pending }, 503, "receipts-unread"],
    [{ "0xa": reverted, "0xb": dropped }, 200, "failed"],
  ];
  for (const [receipts, status, what] of cases) {
    const { store, resolve, version, lines } = await inReview({
      txHashes: ["0xa", "0xb"],
      sender: senderOf(receipts),
    });
    const res = await resolve({ to: "failed", version });
    assert.equal(res.status, status, what);
    const body = await res.json();
    if (status === 200) {
      assert.equal(body.intent.state, "failed");
      assert.equal(body.intent.hold, "voided");
    } else {
      assert.match(body.type, new RegExp(`${what}$`));
      assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
      assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
    }
    if (status === 409) assert.match(body.detail, /tx 0xb confirmed/);
    if (status === 503) {
      assert.ok(lines.some((line) => line.includes("signer down")));
      // The retry will meet the nonce rule too: said now, while the Sender
      // is away, not after the operator waited for it; with the nonce
      // looked up, only a retry is asked for.
      assert.match(body.detail, /also need "nonceChecked":true/);
      const checked = await resolve({
        to: "failed",
        version,
        nonceChecked: true,
      });
      const again = await checked.json();
      assert.equal(checked.status, 503, JSON.stringify(again));
      assert.doesNotMatch(again.detail, /nonceChecked/);
    }
  }
  // Settling asks no receipt: the operator has seen the chain.
  const { resolve, version } = await inReview({
    txHashes: ["0xa"],
    sender: senderOf({ "0xa": down }),
  });
  assert.equal((await resolve({ to: "settled", version })).status, 200);
});

// A store's version is opaque: KvStore's ("<intent versionstamp>:<hold
// versionstamp>") was refused as not hex, so on main.ts's store no payment
// in review could be resolved.
for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: POST /v1/intents/:id/resolve takes the version GET /v1/intents/:id shows`, async () => {
    const { store, close } = await backend.open();
    try {
      await putInReview(store);
      const clock = { mono: 0 };
      const app = createApp({
        store,
        sender: new ScriptedSender({}),
        opsToken: OPS,
        monotonicNow: () => clock.mono,
      });
      const read = await app.request("/v1/intents/pi_1", { headers });
      assert.equal(read.status, 200);
      const { intent } = await read.json();
      const res = await afterTheWait(
        () =>
          app.request("/v1/intents/pi_1/resolve", {
            method: "POST",
            headers,
            body: JSON.stringify({
              to: "failed",
              nonceChecked: true,
              version: intent.version,
            }),
          }),
        clock,
      );
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal((await store.getIntent("pi_1"))?.state, "failed");
      assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}

// A pending tx "may still be mined" (ReceiptStatus): failing the payment
// voids its hold while the tx can still pay the payee, which is what
// routes.md's "none can land any more" rules out. A Sender whose node has
// mined a tx it has not indexed yet answers pending too.
Deno.test("POST /v1/intents/:id/resolve will not fail a payment one of whose txs is still pending, and fails one whose txs were all dropped or reverted", async () => {
  const sender = (receipts: Record<string, () => Promise<ReceiptStatus>>) => ({
    send: () => Promise.reject(new Error("no sends here")),
    receipt: (txHash: string) => receipts[txHash]!(),
  });
  const dropped = () => Promise.resolve("dropped" as const);
  const pending = () => Promise.resolve("pending" as const);
  const reverted = () => Promise.reject(poison(new Error("reverted")));
  for (const last of [pending, dropped]) {
    const { store, resolve, version } = await inReview({
      txHashes: ["0xa", "0xb"],
      sender: sender({ "0xa": reverted, "0xb": last }),
    });
    const res = await resolve({ to: "failed", version });
    const body = await res.json();
    if (last === pending) {
      assert.equal(res.status, 409, JSON.stringify(body));
      assert.match(body.type, /tx-pending$/);
      assert.match(body.detail, /0xb/);
      assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
      assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
    } else {
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.intent.state, "failed");
    }
  }
});

// Up to 32 txs on record, each read in turn against one 5 s budget: a
// signer that answers every receipt in 2 s can never let an operator fail
// a payment with 3 txs (503 on every try). The relayer reads them at once
// for this very reason. Here no receipt is answered until all three are
// asked: read in turn, the first waits on the others, and the budget ends
// the request with a 503.
Deno.test("POST /v1/intents/:id/resolve reads every receipt at once within its 5 s, not one after another", async () => {
  let asked: (() => void)[] = [];
  const droppedOnceAllAsked = () =>
    new Promise<ReceiptStatus>((resolve) => {
      asked.push(() => resolve("dropped"));
      if (asked.length === 3) {
        const all = asked;
        asked = [];
        for (const answer of all) answer();
      }
    });
  const { failAfterWait, version } = await inReview({
    txHashes: ["0xa", "0xb", "0xc"],
    sender: {
      send: () => Promise.reject(new Error("no sends here")),
      receipt: droppedOnceAllAsked,
    },
  });
  // The nonce looked up: every tx reads dropped, which alone is no proof.
  const res = await failAfterWait({
    to: "failed",
    version,
    nonceChecked: true,
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.intent.state, "failed");
});

Deno.test("POST /v1/intents/:id/resolve answers 503 when a receipt does not come within 5 s, aborts the signal it gave the Sender, and leaves no timer behind", async () => {
  const signals = new Map<string, AbortSignal | undefined>();
  let askedB = () => {};
  const bAsked = new Promise<void>((resolve) => askedB = resolve);
  const { store, resolve, version, lines } = await inReview({
    txHashes: ["0xa", "0xb"],
    sender: {
      send: () => Promise.reject(new Error("no sends here")),
      receipt: (txHash, options) => {
        signals.set(txHash, options?.signal);
        if (txHash === "0xa") return Promise.resolve("dropped");
        askedB();
        return new Promise<ReceiptStatus>(() => {});
      },
    },
  });
  // The budget is the timer of 5 s the route arms: it is fired once 0xb's
  // receipt is asked for, where waiting it out took 5 s.
  const timers = catchTimers(5_000);
  let res: Response;
  try {
    const answered = resolve({ to: "failed", version });
    await bAsked;
    assert.deepEqual(
      timers.armed.filter((ms) => ms === 5_000),
      [5_000],
      `timers set: ${timers.armed}`,
    );
    timers.fire();
    res = await answered;
  } finally {
    timers.restore();
  }
  const body = await res.json();
  assert.equal(res.status, 503, JSON.stringify(body));
  assert.match(body.type, /receipts-unread$/);
  assert.match(body.detail, /0xb/);
  // The retry will meet the nonce rule too: say so now, while the Sender is
  // away, rather than after the operator waited for it.
  assert.match(body.detail, /also need "nonceChecked":true/);
  assert.ok(lines.some((line) => /0xb failed: no answer within 5s/.test(line)));
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
  // The route stopped waiting: a Sender that honours the signal stops too.
  assert.equal(signals.get("0xb")?.aborted, true);
  assert.equal(
    (signals.get("0xb")?.reason as Error).message,
    "The resolve route stopped waiting for receipts after 5s.",
  );
});

Deno.test("POST /v1/intents/:id/resolve says when its body is not JSON, or not a JSON object, rather than that 'to' is undefined", async () => {
  const { store, resolve } = await inReview();
  for (
    const [body, pattern] of [
      ["to=failed&version=1", /^The body is not JSON: send \{"to":/],
      ['{"to":"failed"', /^The body is not JSON: send \{"to":/],
      ['["failed"]', /^The body is a JSON array, not an object: send \{"to":/],
      ["null", /^The body is JSON null, not an object: send \{"to":/],
    ] as const
  ) {
    const res = await resolve(body);
    assert.equal(res.status, 400, body);
    const problem = await res.json();
    assert.equal(problem.type, "urn:relayer:problem:bad-resolution");
    assert.match(problem.detail, pattern, body);
    assert.doesNotMatch(problem.detail, /undefined/, body);
  }
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
});

Deno.test("POST /v1/intents/:id/resolve sent again after it landed answers 409 not-in-review saying the payment is already resolved as asked, with nothing to do", async () => {
  const { resolve, failAfterWait, version } = await inReview();
  assert.equal(
    (await failAfterWait({ to: "failed", nonceChecked: true, version }))
      .status,
    200,
  );
  // A script that timed out and sent it again, or a second operator.
  const same = await resolve({ to: "failed", nonceChecked: true, version });
  assert.equal(same.status, 409);
  const problem = await same.json();
  assert.equal(problem.type, "urn:relayer:problem:not-in-review");
  assert.match(
    problem.detail,
    /^Intent pi_1 is already failed: a resolution to failed landed before this one \(an earlier send of this request, or another operator's\), unless it was never in review; nothing to do\.$/,
  );
  const other = await resolve({ to: "settled", version });
  assert.equal(other.status, 409);
  assert.match(
    (await other.json()).detail,
    /^Intent pi_1 is failed, not needs_review: only a payment in review is resolved by hand\. Another resolution \(or the relayer\) moved it since it was read: read it again \(GET \/v1\/intents\/pi_1\)\.$/,
  );
});

/** A Sender that reads every receipt as dropped, and sends nothing. */
const allDropped: Sender = {
  send: () => Promise.reject(new Error("no sends here")),
  receipt: () => Promise.resolve("dropped" as const),
};

Deno.test("POST /v1/intents/:id/resolve will not fail a payment a send of which may have left with no hash kept, until the operator says they looked its nonce up", async () => {
  // The last broadcast unknown (a rescue whose answer was lost): its tx, if
  // it landed, is on no record, and the tx on record reads dropped because
  // that one used the nonce. The receipts cannot tell: only the chain can.
  const { store, resolve, failAfterWait, version } = await inReview({
    txHashes: ["0xa"],
    lastBroadcast: { outcome: "unknown", error: "timed out", at: 0 },
    sender: allDropped,
  });
  const refused = await failAfterWait({ to: "failed", version });
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.equal(problem.type.endsWith("nonce-unchecked"), true, problem.type);
  assert.match(problem.detail, /its last broadcast unknown/);
  assert.match(problem.detail, /"nonceChecked":true/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Not a boolean: a bad body.
  const bad = await resolve({ to: "failed", version, nonceChecked: "yes" });
  assert.equal(bad.status, 400);
  // Said, it fails the payment (the receipts on record are still read).
  const failed = await resolve({ to: "failed", version, nonceChecked: true });
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});

// A tx on record mined and reverted spent the intent's nonce without
// paying: every send after one that may have left shares that nonce
// (Sender), and a nonce is mined once, so no send of it can land, hashless
// or not. A tx that reads dropped proves nothing of the kind.
Deno.test("POST /v1/intents/:id/resolve fails without the nonce check a payment one of whose txs on record reverted, refuses one whose every tx kept its hash and reads dropped, and settles any payment without it", async () => {
  const senderOf = (receipt: Sender["receipt"]): Sender => ({
    send: () => Promise.reject(new Error("no sends here")),
    receipt,
  });
  const reverted = senderOf((txHash) =>
    txHash === "0xa"
      ? Promise.reject(poison(new Error("reverted")))
      : Promise.resolve("dropped")
  );
  for (
    const lastBroadcast of [
      { outcome: "sent", txHash: "0xb", at: 0 },
      { outcome: "unknown", error: "timed out", at: 0 },
    ] as const
  ) {
    const { resolve, version } = await inReview({
      txHashes: ["0xa", "0xb"],
      lastBroadcast,
      sender: reverted,
    });
    const res = await resolve({ to: "failed", version });
    assert.equal(res.status, 200, await res.text());
  }
  // Every send recorded as sent with its hash, as far as the record goes:
  // an earlier one whose answer was lost would leave the same record.
  const sent = await inReview({
    txHashes: ["0xa"],
    lastBroadcast: { outcome: "sent", txHash: "0xa", at: 0 },
    sender: allDropped,
  });
  const res = await sent.failAfterWait({ to: "failed", version: sent.version });
  assert.equal(res.status, 409);
  assert.match((await res.json()).type, /nonce-unchecked$/);
  assert.equal((await sent.store.getIntent("pi_1"))?.hold, "pending");
  const { store, resolve, version } = await inReview();
  assert.equal((await resolve({ to: "settled", version })).status, 200);
  assert.equal((await store.getIntent("pi_1"))?.hold, "captured");
});

/**
 * Puts `pi_1` in review as the relayer leaves it after a send whose answer
 * was lost (no hash kept) and a rescue on the same nonce recorded as sent
 * 0xb: its last broadcast is that rescue, as if it were the only send.
 */
async function afterLostSend(store: Store) {
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  let intent = await store.transition("pi_1", {
    from: "authorized",
    to: "settling",
    version: (await store.getIntent("pi_1"))!.version,
    at: 0,
  });
  intent = await store.recordBroadcast("pi_1", intent.version, {
    outcome: "unknown",
    error: "timed out",
    at: 1,
  });
  intent = await store.beginBroadcast("pi_1", intent.version, 2);
  intent = await store.recordBroadcast("pi_1", intent.version, {
    outcome: "sent",
    txHash: "0xb",
    at: 3,
  });
  return await store.transition("pi_1", {
    from: "settling",
    to: "needs_review",
    version: intent.version,
    at: 4,
  });
}

// The intent keeps its last broadcast only: the lost send is on no
// record. If it landed, 0xb reads dropped (its nonce was used), and the
// receipts on record read as if no tx of the payment could land. Only a
// tx on record mined and reverted proves the nonce spent without paying.
Deno.test("POST /v1/intents/:id/resolve will not fail without the nonce check a payment whose txs on record all read dropped after an earlier send kept no hash", async () => {
  const store = new MemoryStore();
  const reviewed = await afterLostSend(store);
  assert.deepEqual(
    [reviewed.lastBroadcast?.outcome, reviewed.txHashes, reviewed.mayHaveSent],
    ["sent", ["0xb"], true],
  );
  const clock = { mono: 0 };
  const app = createApp({
    store,
    sender: allDropped,
    opsToken: OPS,
    monotonicNow: () => clock.mono,
  });
  const resolve = (body: unknown) =>
    app.request("/v1/intents/pi_1/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
  const refused = await afterTheWait(
    () => resolve({ to: "failed", version: reviewed.version }),
    clock,
  );
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.match(problem.type, /nonce-unchecked$/);
  assert.match(problem.detail, /every tx on record reads dropped/);
  assert.match(problem.detail, /"nonceChecked":true/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
  // Said, it fails the payment.
  const failed = await resolve({
    to: "failed",
    version: reviewed.version,
    nonceChecked: true,
  });
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});

// Imported in review by a library caller (a migration, a payments API of
// one's own) with nothing on record: nothing says no send left, and it is
// in review because money may have moved.
Deno.test("POST /v1/intents/:id/resolve will not fail without the nonce check a payment imported in review with nothing on record, unless told nothing left", async () => {
  const { store, resolve, failAfterWait } = await inReview({
    sender: allDropped,
  });
  const imported = await store.createIntent({
    id: "pi_2",
    state: "needs_review",
    hold: "pending",
  });
  assert.equal(imported.mayHaveSent, true);
  const refused = await failAfterWait(
    { to: "failed", version: imported.version },
    "pi_2",
  );
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.match(problem.type, /nonce-unchecked$/);
  assert.match(problem.detail, /no tx on record/);
  assert.equal((await store.getIntent("pi_2"))?.hold, "pending");
  await assert.rejects(store.voidHold("pi_2"), /resolve route/);
  // Told nothing left, it fails on the record alone, at once: no send of
  // it may still run.
  const clean = await store.createIntent({
    id: "pi_3",
    state: "needs_review",
    hold: "pending",
    mayHaveSent: false,
  });
  const failed = await resolve(
    { to: "failed", version: clean.version },
    "pi_3",
  );
  assert.equal(failed.status, 200, await failed.text());
  assert.equal((await store.getIntent("pi_3"))?.hold, "voided");
});

// On a chain of account nonces (EVM), a tx the node dropped stays valid:
// whoever holds its bytes can broadcast it again, and it lands while its
// nonce is unused. An operator told "none can land (… or the signer
// dropped it)" fails a payment whose tx then pays the payee behind a
// voided hold (tests/relayer/evm_signer_test.ts shows it).
Deno.test("POST /v1/intents/:id/resolve's nonce-unchecked answer does not take a dropped tx for one that cannot land: only its nonce used by another tx, or an expiry the chain enforces", async () => {
  const { failAfterWait, version } = await inReview({
    txHashes: ["0xa"],
    sender: allDropped,
  });
  const res = await failAfterWait({ to: "failed", version });
  assert.equal(res.status, 409);
  const { type, detail } = await res.json();
  assert.match(type, /nonce-unchecked$/);
  assert.doesNotMatch(detail, /signer dropped it/);
  assert.match(detail, /a dropped tx can still land while its nonce is unused/);
  assert.match(detail, /cancel/);
});

Deno.test("POST /v1/intents/:id/resolve given its dead letter's version, which GET /v1/intents/:id shows beside the intent's, says 'version' is the intent's, not the letter's, rather than only that the intent changed", async () => {
  const { store, resolve, app } = await inReview();
  await store.putDeadLetter({
    jobId: "pi_1/settle",
    intentId: "pi_1",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "last broadcast unknown, needs review",
    lastError: "send: signer answered 502: rpc: connection refused",
    poisonedAt: 1,
  });
  const read = await (await app.request("/v1/intents/pi_1", { headers }))
    .json();
  assert.notEqual(read.deadLetter.version, read.intent.version);
  // Before: "Intent pi_1 changed since it was read (version …, not …): read
  // it again, and decide on what it is now." It had not: read again, it
  // showed the same two versions, and the same mistake answered the same.
  for (const version of [read.deadLetter.version, "<version>"]) {
    const res = await resolve({ to: "settled", version });
    assert.equal(res.status, 409);
    const { type, detail } = await res.json();
    assert.match(type, /changed$/);
    assert.match(detail, /or that was never its version/);
    assert.match(
      detail,
      /'version' is the intent's, intent\.version in GET \/v1\/intents\/pi_1, not its dead letter's/,
    );
  }
  assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
});
