/**
 * KvStore's redrive enqueues on Deno KV's own queue in the commit that
 * removes the dead letter: a redrive that loses the race enqueues nothing,
 * and the relayer's redrive with a message reaches the queue.
 */
import assert from "node:assert/strict";
import { ConflictError, createRelayer, ScriptedSender } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { deadLetter } from "./_contract.ts";
import { withTimeout } from "../_timeout.ts";

/**
 * Runs `body` with a KvStore on an in-memory Deno KV whose queue records
 * what it delivers, then closes it.
 */
async function withQueue(
  body: (store: KvStore, received: unknown[]) => Promise<void>,
): Promise<void> {
  await withTimeout(async () => {
    const kv = await Deno.openKv(":memory:");
    const received: unknown[] = [];
    const listening = kv.listenQueue((message) => {
      received.push(message);
    });
    try {
      await body(new KvStore(kv), received);
    } finally {
      kv.close();
      await listening;
    }
  }, 15_000);
}

/** Waits until the queue has delivered `n` messages. */
async function delivered(received: unknown[], n: number): Promise<void> {
  while (received.length < n) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

Deno.test("KvStore.redrive() enqueues in the removal's commit, and the loser of two redrives enqueues nothing", async () => {
  await withQueue(async (store, received) => {
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    const read = (await store.getDeadLetter("pi_1/settle"))!;
    const message = { job: { intentId: "pi_1", kind: "settle" } };
    const results = await Promise.allSettled([
      store.redrive("pi_1/settle", read.version, { enqueue: message }),
      store.redrive("pi_1/settle", read.version, { enqueue: message }),
    ]);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    const lost = results.find((r) => r.status === "rejected");
    assert.ok(
      lost?.status === "rejected" && lost.reason instanceof ConflictError,
    );
    await delivered(received, 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(received, [message], "exactly one job enqueued");
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
  });
});

Deno.test("createRelayer() redrive with a message enqueues it on the store's own queue (Deno KV) as it removes the dead letter: the intent keeps a job", async () => {
  await withQueue(async (store, received) => {
    const job = { intentId: "pi_0001", kind: "settle" } as const;
    await store.createIntent({ id: "pi_0001" });
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({}),
      policy: { maxDeliveries: 1 },
      now: () => 0,
    });
    assert.equal((await relayer.deliver(job, 1)).action, "poison");
    assert.deepEqual(
      await relayer.redrive("pi_0001/settle", {
        message: (redriven) => ({ job: redriven }),
      }),
      job,
    );
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    await delivered(received, 1);
    assert.deepEqual(received, [{ job }]);
  });
});
