/**
 * The relayer's memory of its own sends whose record failed (see
 * relayer/_sends.ts), as the resolve route reads it: the most recent
 * 1,024 intents, the last 32 txs of each, each tx once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, type Intent, MemoryStore } from "../../mod.ts";
import { unrecordedTxHashes } from "../../relayer/_sends.ts";
import { recordsFail } from "../_stores.ts";

/** A relayer whose sends return `hashOf(intent, n)` (n counts sends) and whose records of them fail. */
function unrecording(hashOf: (intent: Intent, n: number) => string) {
  const memory = new MemoryStore();
  const clock = { now: 1_000_000 };
  let sends = 0;
  const relayer = createRelayer({
    store: recordsFail(memory),
    sender: {
      send: (intent) => Promise.resolve({ txHash: hashOf(intent, ++sends) }),
      receipt: () => Promise.resolve("pending"),
    },
    policy: { maxDeliveries: 1_000 },
    now: () => clock.now,
    leaseMs: 1_000,
    clockSkewMs: 0,
  });
  return { memory, clock, relayer };
}

const id = (n: number) => `pi_${String(n).padStart(5, "0")}`;

Deno.test("the relayer keeps the txs of the 1,024 most recent intents whose record failed, an intent kept again counting as recent", async () => {
  const { memory, clock, relayer } = unrecording((intent) => `0x${intent.id}`);
  const send = async (n: number) => {
    await memory.createIntent({
      id: id(n),
      state: "authorized",
      hold: "pending",
    });
    await relayer.deliver({ intentId: id(n), kind: "settle" }, 1);
    assert.deepEqual(unrecordedTxHashes(relayer, id(n)), [`0x${id(n)}`]);
  };
  for (let n = 0; n < 1_024; n++) await send(n);
  assert.deepEqual(unrecordedTxHashes(relayer, id(0)), [`0x${id(0)}`]);
  // One more: the oldest goes.
  await send(1_024);
  assert.deepEqual(unrecordedTxHashes(relayer, id(0)), []);
  assert.deepEqual(unrecordedTxHashes(relayer, id(1)), [`0x${id(1)}`]);
  // pi_00001 kept again (rescued, its record failing again) is the most
  // recent: pi_00002 goes next, not it.
  clock.now += 24 * 3_600_000; // past the lease and stuckAfterMs
  await relayer.deliver({ intentId: id(1), kind: "settle" }, 2);
  await send(1_025);
  assert.deepEqual(unrecordedTxHashes(relayer, id(2)), []);
  assert.deepEqual(unrecordedTxHashes(relayer, id(1)), [`0x${id(1)}`]);
});

Deno.test("the relayer keeps the last 32 txs of one intent whose records failed, each once, oldest first", async () => {
  // Each rescue returns a new hash, but the last the one before it (a
  // rebroadcast of the same signed tx).
  const { memory, clock, relayer } = unrecording((_, n) =>
    `0x${n === 40 ? 39 : n}`
  );
  const intentId = id(7);
  await memory.createIntent({
    id: intentId,
    state: "authorized",
    hold: "pending",
  });
  for (let delivery = 1; delivery <= 40; delivery++) {
    await relayer.deliver({ intentId, kind: "settle" }, delivery);
    clock.now += 24 * 3_600_000; // past the lease and stuckAfterMs: rescued
  }
  const kept = unrecordedTxHashes(relayer, intentId);
  assert.equal(new Set(kept).size, kept.length, `twice: ${kept}`);
  assert.equal(kept.length, 32, `${kept}`);
  assert.deepEqual(
    kept,
    Array.from({ length: 32 }, (_, i) => `0x${i + 8}`),
  );
});
