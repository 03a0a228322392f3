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
  type Store,
} from "../../mod.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("createRelayer() names the tx hash of a send whose record failed, in the delivery's reason", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  // The real store, but its record of a sent broadcast fails.
  const store: Store = new Proxy(memory, {
    get(target, key) {
      if (key === "recordBroadcast") {
        return (...args: Parameters<Store["recordBroadcast"]>) =>
          args[2].outcome === "sent"
            ? Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:5432"))
            : target.recordBroadcast(...args);
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xfeed" }] } }),
    now: () => 0,
    random: () => 0,
  });
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
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  // A store of one's own that checks the lease before the version: the
  // record of the send meets another delivery's lease.
  const store: Store = new Proxy(memory, {
    get(target, key) {
      if (key === "recordBroadcast") {
        return (...args: Parameters<Store["recordBroadcast"]>) =>
          args[2].outcome === "sent"
            ? Promise.reject(
              new BusyError("Cannot write pi_0001 as another holds its lease"),
            )
            : target.recordBroadcast(...args);
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xbeef" }] } }),
    now: () => 0,
    random: () => 0,
  });
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /is busy with another delivery/);
  assert.match(formatOutcome(job, outcome), /sent 0xbeef first/);
});
