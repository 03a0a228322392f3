/**
 * A send the signer accepted, whose record the store then refused (the
 * database went away mid-send): the tx hash is in no store, so the line the
 * delivery leaves is the only place an operator can find it before the
 * intent goes to review as "no broadcast on record".
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  createRelayer,
  formatOutcome,
  MemoryStore,
  ScriptedSender,
} from "../../mod.ts";
import { overriding } from "../_stores.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/**
 * An authorized pi_0001 on a MemoryStore whose record of a sent broadcast
 * fails with `error`, and a relayer whose Sender sends `txHash`.
 */
async function recordFails(error: Error, txHash: string) {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const store = overriding(memory, {
    recordBroadcast: (id, version, broadcast, options) =>
      broadcast.outcome === "sent"
        ? Promise.reject(error)
        : memory.recordBroadcast(id, version, broadcast, options),
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ pi_0001: { sends: [{ txHash }] } }),
    now: () => 0,
    random: () => 0,
  });
  return { memory, relayer };
}

Deno.test("createRelayer() names the tx hash of a send whose record failed, in the delivery's reason", async () => {
  // The real store, but its record of a sent broadcast fails.
  const { memory, relayer } = await recordFails(
    new Error("connect ECONNREFUSED 127.0.0.1:5432"),
    "0xfeed",
  );
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "retry");
  // The store kept no hash: the send is on record only as begun.
  const intent = (await memory.getIntent("pi_0001"))!;
  assert.deepEqual(intent.txHashes, []);
  assert.notEqual(intent.broadcasting, null);
  // The worker's line is where the operator finds it.
  const line = formatOutcome(job, outcome);
  assert.match(line, /0xfeed/);
  assert.match(line, /ECONNREFUSED/);
});

Deno.test("createRelayer() names the tx hash of a send whose record met another delivery's lease, and answers busy", async () => {
  // A store of one's own that checks the lease before the version: the
  // record of the send meets another delivery's lease.
  const { relayer } = await recordFails(
    new BusyError("Cannot write pi_0001 as another holds its lease"),
    "0xbeef",
  );
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /is busy with another delivery/);
  assert.match(formatOutcome(job, outcome), /sent 0xbeef first/);
});
