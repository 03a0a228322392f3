/**
 * A queue's give-up with ids no store key or value can hold as they are
 * (a bridge's bug: Deno KV writes keys of at most 2,048 bytes and values
 * of at most 64 KiB): the give-up still resolves the intent, keeps its
 * letter, and knows its repeats, on every store.
 */
import assert from "node:assert/strict";
import { createRelayer, ScriptedSender, type Store } from "../../mod.ts";
import { kvBackend, memoryBackend, openAuthorized } from "../_stores.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

/** A relayer on `store` whose Sender sends nothing, at a clock of 1 s. */
const idleRelayer = (store: Store) =>
  createRelayer({ store, sender: new ScriptedSender({}), now: () => 1_000 });

for (const backend of [memoryBackend, kvBackend]) {
  Deno.test(`Relayer.giveUp() keeps a queue's id over 1 KiB as its sha256, so the give-up resolves and its repeat is known (${backend.name})`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const relayer = idleRelayer(store);
      const queue = {
        queue: "generic",
        messageId: "m".repeat(3_000),
        dlqId: "d".repeat(70_000),
      };
      const first = await relayer.giveUp(JOB, { deliveries: 3, queue });
      assert.equal(first.action, "poison");
      const letter = await store.getDeadLetter("pi_0001/settle");
      assert.match(letter?.queue?.messageId ?? "", /^sha256:[0-9a-f]{64}$/);
      assert.match(letter?.queue?.dlqId ?? "", /^sha256:[0-9a-f]{64}$/);
      // The queue repeats its give-up: answered as the first was.
      assert.deepEqual(
        await relayer.giveUp(JOB, { deliveries: 3, queue }),
        first,
      );
      // And once the letter is redriven, the mark still knows the message.
      await relayer.redrive("pi_0001/settle");
      const late = await relayer.giveUp(JOB, { deliveries: 3, queue });
      assert.equal(late.action, "done");
      assert.match(late.reason, /already resolved/);
    } finally {
      await close();
    }
  });
}

for (const backend of [memoryBackend, kvBackend]) {
  Deno.test(`Relayer.deliver() knows a late copy of a message with an id over 1 KiB the queue gave up on, by the same sha256, and sends nothing (${backend.name})`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      let clock = 1_000;
      const relayer = createRelayer({
        store,
        sender: new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xa" }] } }),
        now: () => clock,
      });
      const message = { queue: "cloudflare", dlqId: "d".repeat(3_000) };
      const gaveUp = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: message,
      });
      assert.equal(gaveUp.action, "poison");
      clock += 10 * 60_000; // past the give-up's lease
      const late = await relayer.deliver(JOB, 4, { message });
      assert.equal(late.action, "done");
      assert.match(late.reason, /a late copy, nothing sent/);
      assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
    } finally {
      await close();
    }
  });
}

Deno.test("Relayer.giveUp() keeps a queue's id of 1 KiB of UTF-8 as it is, and one of 342 three-byte characters (1,026 bytes) as its sha256", async () => {
  const { store, close } = await openAuthorized(memoryBackend, JOB.intentId);
  try {
    const relayer = idleRelayer(store);
    const queue = {
      queue: "generic",
      messageId: "m".repeat(1_024),
      dlqId: "\u20ac".repeat(342),
    };
    assert.equal(
      (await relayer.giveUp(JOB, { deliveries: 3, queue })).action,
      "poison",
    );
    const letter = await store.getDeadLetter("pi_0001/settle");
    assert.equal(letter?.queue?.messageId, queue.messageId);
    assert.match(letter?.queue?.dlqId ?? "", /^sha256:[0-9a-f]{64}$/);
  } finally {
    await close();
  }
});
