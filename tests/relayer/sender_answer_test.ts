import assert from "node:assert/strict";
import { createRelayer, MemoryStore, type Sender } from "../../mod.ts";

// A Sender of one's own that answers a send with something other than an
// object (a forgotten `return`, a bare hash string) must be told so in the
// delivery's reason and on the intent, as one that answers `{}` is, not with
// the engine's words about destructuring.

const job = { intentId: "pi_0001", kind: "settle" } as const;

/**
 * A store with `pi_0001` authorized, and a relayer on it whose Sender
 * answers every send with `answer` (every receipt pending), at time 0.
 */
async function answering(answer: unknown) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender = {
    send: () => Promise.resolve(answer),
    receipt: () => Promise.resolve("pending"),
  } as unknown as Sender;
  return { store, relayer: createRelayer({ store, sender, now: () => 0 }) };
}

/**
 * A first delivery whose Sender answered `answer`: its reason says `why`,
 * and the send is on record as unknown (it may have left).
 */
async function sentAsUnknown(answer: unknown, why: string): Promise<void> {
  const { store, relayer } = await answering(answer);
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.reason, `send: ${why}`);
  const intent = await store.getIntent("pi_0001");
  assert.deepEqual(intent?.lastBroadcast, {
    outcome: "unknown",
    at: 0,
    error: why,
  });
}

for (
  const [answer, shown] of [
    [undefined, "undefined"],
    [null, "null"],
    ["0xabc", '"0xabc"'],
  ] as const
) {
  Deno.test(`createRelayer() says a Sender answered ${shown}, not { txHash }, and takes the send as unknown`, async () => {
    await sentAsUnknown(
      answer,
      `sender returned ${shown}, not { txHash }: return the tx hash as { txHash: "0x…" }`,
    );
  });
}

// A bare string can be long (a whole JSON-RPC answer, a raw signed tx): the
// reason, which goes to the worker's log line, shows its first 40
// characters, not all of it.
Deno.test("createRelayer() shows the first 40 characters of a long bare answer, not the whole of it", async () => {
  const answer = `0x${"ab".repeat(5_000)}`;
  const { relayer } = await answering(answer);
  const outcome = await relayer.deliver(job, 1);
  assert.equal(
    outcome.reason,
    `send: sender returned ${
      JSON.stringify(answer).slice(0, 40)
    }…, not { txHash }: return the tx hash as { txHash: "0x…" }`,
  );
});

// A Sender written in plain JavaScript may answer receipt() with the
// status itself rather than a Promise of it, or throw before returning
// one: send() is taken either way, and receipt() must be too, not fail
// with the engine's words about `.then`, nor skip the earlier txs.

/** `pi_0001` settling, sent as `0xold` then `0xnew`, and a relayer on it whose Sender answers receipts with `receipt`. */
async function settlingOnTwo(receipt: (txHash: string) => unknown) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    txHashes: ["0xold", "0xnew"],
    lastBroadcast: { outcome: "sent", txHash: "0xnew", at: 0 },
  });
  const sender = {
    send: () => Promise.reject(new Error("no sends here")),
    receipt,
  } as unknown as Sender;
  return { store, relayer: createRelayer({ store, sender, now: () => 1 }) };
}

Deno.test("createRelayer() takes a receipt() that answers its status without a Promise", async () => {
  const { store, relayer } = await settlingOnTwo((txHash) =>
    txHash === "0xnew" ? "confirmed" : "pending"
  );
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "done", outcome.reason);
  const intent = await store.getIntent("pi_0001");
  assert.equal(intent?.state, "settled");
  assert.equal(intent?.hold, "captured");
});

Deno.test("createRelayer() settles on an earlier tx that confirmed when receipt() throws at once for the last one", async () => {
  const { store, relayer } = await settlingOnTwo((txHash) => {
    if (txHash === "0xnew") throw new Error("node unreachable");
    return Promise.resolve("confirmed");
  });
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "done", outcome.reason);
  assert.equal((await store.getIntent("pi_0001"))?.state, "settled");
});

// A txHash of the wrong type is named as it came (a BigInt from a chain
// library, a Symbol), with what to return: not "Do not know how to
// serialize a BigInt", nor "undefined" for a Symbol.
for (
  const [txHash, shown] of [
    [0xabcn, "2748n"],
    [Symbol("0xabc"), "Symbol(0xabc)"],
    [123, "123"],
    ["", '""'],
  ] as const
) {
  Deno.test(`createRelayer() names a txHash of ${shown}, says what to return, and takes the send as unknown`, async () => {
    await sentAsUnknown(
      { txHash },
      `sender returned no txHash: ${shown}; return the tx hash as { txHash: "0x…" }`,
    );
  });
}

// A receipt() that hands back its signer's JSON (`{ status: "confirmed" }`)
// is named as it came, with the statuses it may answer, not as
// "[object Object]".
Deno.test("createRelayer() names a receipt status it cannot read as it came, and the statuses to answer", async () => {
  const { store, relayer } = await settlingOnTwo(() =>
    Promise.resolve({ status: "confirmed" })
  );
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "retry");
  assert.equal(
    outcome.reason,
    'sender returned an unknown receipt status for 0xnew: {"status":"confirmed"}; answer "confirmed", "pending" or "dropped"',
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
});

// MAX_TX_HASH (256) at its edge: a hash of 256 characters is recorded as
// sent, one of 257 is not recorded (it may exceed a store's value limit)
// and the send is on record as unknown, as a longer one is.
Deno.test("createRelayer() records a txHash of 256 characters as sent, and takes one of 257 as a send that may have left", async () => {
  const longest = `0x${"a".repeat(254)}`;
  const kept = await answering({ txHash: longest });
  await kept.relayer.deliver(job, 1);
  const sent = await kept.store.getIntent("pi_0001");
  assert.deepEqual(sent?.txHashes, [longest]);
  assert.equal(sent?.lastBroadcast?.outcome, "sent");
  const over = `0x${"a".repeat(255)}`;
  await sentAsUnknown(
    { txHash: over },
    `sender returned a txHash of 257 characters (at most 256), starting ${
      JSON.stringify(over.slice(0, 16))
    }: the broadcast may have been sent`,
  );
});
