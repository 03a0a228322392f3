/**
 * KvStore's redrive enqueues on Deno KV's own queue in the commit that
 * removes the dead letter: a redrive that loses the race enqueues nothing,
 * and the relayer's redrive with a message reaches the queue. A drop's
 * letter a redrive took before its writer read back a lost answer stays
 * taken.
 */
import assert from "node:assert/strict";
import { ConflictError, createRelayer, ScriptedSender } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { deadLetter } from "./_contract.ts";
import { withTimeout } from "../_timeout.ts";
import {
  lostBesideRedrive,
  resendingKv,
  sentTwiceKv,
} from "./_resending_kv.ts";

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

/**
 * A relayer over {@linkcode lostBesideRedrive}'s store, the letter an
 * operator redrives meanwhile `pi_0001/settle`'s.
 */
function redrivenMeanwhile(
  kv: Deno.Kv,
  wrap: typeof resendingKv | typeof sentTwiceKv,
) {
  const lossy = lostBesideRedrive(kv, wrap, "pi_0001/settle");
  const relayer = createRelayer({
    store: lossy.store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 5 },
    now: () => 0,
  });
  return { ...lossy, relayer };
}

Deno.test("createRelayer(): a last delivery's drop whose letter's commit landed with its answer lost, the letter redriven before the store read it back, does not write the letter again beside the redriven job", async () => {
  using kv = await Deno.openKv(":memory:");
  // What a KV Connect client answers a commit it sent again after a lost
  // answer; the operator's redrive lands before the read-back.
  const { store, relayer, lost, loseNext } = redrivenMeanwhile(
    kv,
    resendingKv,
  );
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  // A Cloudflare message at its last delivery: no claim rides with the
  // drop's letter, only its mark.
  loseNext();
  const outcome = await relayer.deliver(job, 5, {
    message: { queue: "cloudflare", dlqId: "msg_1" },
  });
  assert.equal(lost(), 1);
  assert.equal(outcome.action, "poison");
  // The redrive took the letter: the redriven job is the intent's now.
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createRelayer(): a drop whose delivery names no message, its letter's commit landed with its answer lost and the letter redriven before the store read it back, does not write the letter again beside the redriven job", async () => {
  using kv = await Deno.openKv(":memory:");
  const { store, relayer, lost, loseNext } = redrivenMeanwhile(
    kv,
    resendingKv,
  );
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  // The local queue's last delivery: neither a claim nor a mark rides
  // with the drop's letter.
  loseNext();
  const outcome = await relayer.deliver({
    intentId: "pi_0001",
    kind: "settle",
  }, 5);
  assert.equal(lost(), 1);
  assert.equal(outcome.action, "poison");
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createRelayer(): a drop of a created intent's job whose delivery names no message, its letter's commit landed with its answer lost and the letter redriven before the commit was sent again, does not keep the letter again beside the redriven job", async () => {
  using kv = await Deno.openKv(":memory:");
  const { store, relayer, lost, loseNext } = redrivenMeanwhile(
    kv,
    sentTwiceKv,
  );
  await store.createIntent({ id: "pi_0001" });
  // No lease rides with a created intent's letter, nor a claim or a mark
  // with the local queue's: the letter's checks hold again once the
  // redrive took it.
  loseNext();
  const outcome = await relayer.deliver({
    intentId: "pi_0001",
    kind: "settle",
  }, 5);
  assert.equal(lost(), 1);
  assert.equal(outcome.action, "poison");
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
});
