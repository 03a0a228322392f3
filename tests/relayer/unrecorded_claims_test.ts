/**
 * `deliver` marks a replay claim it answered with on no record (the store
 * busy at the delivery and again at the claim's record), by the very
 * object passed, and no other: the webhook remembers a QStash token so
 * marked as used (tests/webhook/busy_unrecorded_replay_test.ts). A claim
 * recorded is not marked: a delivery answered with it on record is a
 * replay the store refuses by itself.
 */
import assert from "node:assert/strict";
import {
  BusyError,
  createRelayer,
  MemoryStore,
  ReplayError,
  type Sender,
  type Store,
} from "../../mod.ts";
import { leftUnrecorded } from "../../relayer/_unrecorded_claims.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

const sender: Sender = {
  send: () => Promise.resolve({ txHash: "0xabc" }),
  receipt: () => Promise.resolve("pending"),
};

/** A replay claim of token `jti`, good for 5 minutes. */
const claimOf = (jti: string) => ({
  key: `qstash/${jti}`,
  now: Date.now(),
  expiresAt: Date.now() + 300_000,
});

/** `memory`, its `admit` refused as another session's lock while `on.busy`. */
function busyAdmit(memory: MemoryStore, on: { busy: boolean }): Store {
  return new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return on.busy && key === "admit"
        ? () =>
          Promise.reject(
            new BusyError("intent pi_0001 is locked by another session"),
          )
        : value.bind(target);
    },
  });
}

Deno.test("deliver() leaves a claim it recorded unmarked, and marks one the store was busy to record, with or without a delivery number, by the object passed only", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const on = { busy: false };
  const relayer = createRelayer({ store: busyAdmit(memory, on), sender });

  // Recorded with the delivery's first write: not marked.
  const recorded = claimOf("jwt_recorded");
  const sent = await relayer.deliver(JOB, 1, { claim: recorded });
  assert.equal(sent.action, "retry"); // sent, its receipt pending
  assert.equal(leftUnrecorded(recorded), false);
  await assert.rejects(
    relayer.deliver(JOB, 2, { claim: { ...recorded } }),
    ReplayError,
  );

  on.busy = true;
  // Counted by the store (no delivery number): busy at the count, which
  // carries the claim.
  const atCount = claimOf("jwt_count");
  assert.equal(
    (await relayer.deliver(JOB, undefined, { claim: atCount })).action,
    "retry",
  );
  assert.equal(leftUnrecorded(atCount), true);
  // Numbered by the queue: a look-only delivery (its tx pending) records
  // the claim on its own, and the store is busy there.
  const atRecord = claimOf("jwt_record");
  assert.equal(
    (await relayer.deliver(JOB, 3, { claim: atRecord })).action,
    "retry",
  );
  assert.equal(leftUnrecorded(atRecord), true);
  // Only the object passed: a copy of it, or a claim never passed, is not.
  assert.equal(leftUnrecorded({ ...atRecord }), false);
  assert.equal(leftUnrecorded(claimOf("jwt_never")), false);
});
