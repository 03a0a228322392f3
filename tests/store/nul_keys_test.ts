/**
 * U+0000 in what a store keeps as a key or id (a job id, a count, a claim,
 * a lease's owner, a queue's id, a mark, a tx hash) is refused with the
 * same TypeError on every store: PostgreSQL text cannot hold it, and a
 * write the memory store and Deno KV took failed on PostgresStore alone.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Intent, Store } from "../../mod.ts";
import type { WriteOptions } from "../../store/store.ts";
import { deadLetter } from "../../testing/_fixtures.ts";
import { BACKENDS } from "../_stores.ts";

const N = "\0";

const letter = deadLetter("pi_1/settle", 1);

/** pi_1 moved from authorized to settling, with `options`. */
async function toSettling(
  store: Store,
  options?: WriteOptions,
): Promise<Intent> {
  const intent = (await store.getIntent("pi_1"))!;
  return store.transition(intent.id, {
    from: "authorized",
    to: "settling",
    version: intent.version,
    at: 1,
  }, options);
}

/** Each write with a NUL in a key or id, by what it names. */
const WRITES: readonly [string, (store: Store) => Promise<unknown>][] = [
  ["count", (store) => store.admit({ count: `pi_1${N}/settle`, now: 1 })],
  [
    "claim.key",
    (store) =>
      store.admit({ claim: { key: `t${N}`, now: 1, expiresAt: 9 }, now: 1 }),
  ],
  [
    "jobId",
    (store) => store.putDeadLetter({ ...letter, jobId: `pi_1${N}/settle` }),
  ],
  [
    "intentId",
    (store) => store.putDeadLetter({ ...letter, intentId: `pi${N}` }),
  ],
  [
    "queue.queue",
    (store) =>
      store.putDeadLetter({
        ...letter,
        queue: { queue: `generic${N}`, messageId: "m" },
      }),
  ],
  [
    "queue.messageId",
    (store) =>
      store.putDeadLetter({
        ...letter,
        queue: { queue: "generic", messageId: `m${N}` },
      }),
  ],
  [
    "queue.dlqId",
    (store) =>
      store.putDeadLetter({
        ...letter,
        queue: { queue: "cloudflare", dlqId: `m${N}` },
      }),
  ],
  [
    "resetCount",
    (store) => store.putDeadLetter(letter, { resetCount: `c${N}` }),
  ],
  [
    "marks.keys",
    (store) =>
      store.putDeadLetter(letter, {
        marks: { keys: [`gaveup/q${N}`], now: 1 },
      }),
  ],
  [
    "lease.owner",
    (store) =>
      toSettling(store, { lease: { owner: `d${N}`, now: 1, ttlMs: 1_000 } }),
  ],
  [
    "unlessCounted",
    (store) => toSettling(store, { unlessCounted: [`givingup/q${N}`] }),
  ],
  ["lastBroadcast.txHash", async (store) => {
    const settling = await toSettling(store);
    return store.recordBroadcast(settling.id, settling.version, {
      outcome: "sent",
      txHash: `0x${N}`,
      at: 2,
    });
  }],
];

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} refuses U+0000 in a key or id with a TypeError that says so, as every store does`, async (t) => {
    for (const [name, write] of WRITES) {
      await t.step(name, async () => {
        const { store, close } = await backend.open();
        try {
          await store.createIntent({
            id: "pi_1",
            state: "authorized",
            hold: "pending",
          });
          await assert.rejects(
            write(store),
            (error) =>
              error instanceof TypeError &&
              /U\+0000 \(NUL\)/.test(error.message),
          );
          // Nothing of it was written.
          const intent = await store.getIntent("pi_1");
          assert.equal(intent?.lastBroadcast, null);
          if (name !== "lastBroadcast.txHash") {
            assert.equal(intent?.state, "authorized");
          }
          assert.equal(await store.getDeadLetter("pi_1/settle"), null);
        } finally {
          await close();
        }
      });
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} reads nothing under an id or owner with U+0000, as no write keeps one, rather than failing the read`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      assert.equal(await store.getIntent(`pi_1${N}`), null);
      assert.equal(await store.getDeadLetter(`pi_1${N}/settle`), null);
      assert.equal(await store.deliveries(`pi_1${N}/settle`), 0);
      await store.releaseLease!(`pi_1${N}`, "owner");
      await store.releaseLease!("pi_1", `owner${N}`);
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
    } finally {
      await close();
    }
  });
}
