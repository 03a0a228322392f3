/**
 * A store of one's own that does not mark its refusals (`refused` unset on
 * its ConflictError): the relayer cannot tell a refusal from a race lost,
 * so it tries the failure three times, nobody writing between, before it
 * sends the payment to review instead.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import { unmarkingRefusals } from "./_unmarked.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("createRelayer() tries a failure a store of one's own refuses unmarked three times before it reviews the payment", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "settling",
    settlingSince: 0,
    lastBroadcast: { outcome: "not_sent", at: 0 },
  });
  const fails: unknown[] = [];
  // Every ConflictError comes back as a plain one, `refused` unset; each
  // try of the failure (settling → failed) is counted.
  const unmarked = unmarkingRefusals(store, (key, args) => {
    if (
      key === "transition" &&
      (args[1] as { to?: string } | undefined)?.to === "failed"
    ) fails.push(args[1]);
  });
  const relayer = createRelayer({
    store: unmarked,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 5, jitter: "none" },
    now: () => 1_000_000,
    random: () => 0,
  });
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "poison");
  assert.equal(fails.length, 3);
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
});
