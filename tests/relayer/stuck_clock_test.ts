/**
 * The "stuck" clock of a settling intent (DESIGN §6) runs from the later
 * of entering settling, the last recorded broadcast and the start of one
 * in flight: a send whose answer was lost restarts it, so its rescue waits
 * a whole `stuckAfter` from that send, not from entering settling.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("createRelayer() waits stuckAfter from a lapsed send in flight's start before it rescues, however long the intent has been settling", async () => {
  const clock = { now: 10_000_000 };
  const store = new MemoryStore();
  // Settling for hours; a send began a minute ago and never recorded its
  // outcome (its delivery died mid-send): its lease of 30 s is over.
  await store.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    broadcasting: clock.now - 60_000,
  });
  const sender = new ScriptedSender({
    pi_0001: { sends: [{ txHash: "0xr" }] },
  });
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 5, jitter: "none" },
    leaseMs: 30_000,
    clockSkewMs: 0,
    now: () => clock.now,
    random: () => 0,
  });
  const waited = await relayer.deliver(job, 1);
  assert.equal(waited.action, "retry");
  assert.match(waited.reason, /^settling for 1m0s without tx hash, waiting$/);
  assert.equal(sender.calls.length, 0);
  // stuckAfter (5m) since that send began: rescued, on the same nonce.
  clock.now += 240_000;
  const rescued = await relayer.deliver(job, 2);
  assert.equal(rescued.reason, "sent 0xr, waiting for confirmation");
  assert.deepEqual(sender.calls, [{
    method: "send",
    intentId: "pi_0001",
    replace: true,
  }]);
});
