/**
 * KvStore's redrive enqueues on Deno KV's own queue in the commit that
 * removes the dead letter: a redrive that loses the race enqueues nothing.
 */
import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { deadLetter } from "./_contract.ts";
import { withTimeout } from "../_timeout.ts";

Deno.test("KvStore.redrive() enqueues in the removal's commit, and the loser of two redrives enqueues nothing", async () => {
  await withTimeout(async () => {
    const kv = await Deno.openKv(":memory:");
    try {
      const store = new KvStore(kv);
      const received: unknown[] = [];
      const listening = kv.listenQueue((message) => {
        received.push(message);
      });
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
      while (received.length < 1) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual(received, [message], "exactly one job enqueued");
      assert.equal(await store.getDeadLetter("pi_1/settle"), null);
      kv.close();
      await listening;
    } catch (error) {
      kv.close();
      throw error;
    }
  }, 15_000);
});
