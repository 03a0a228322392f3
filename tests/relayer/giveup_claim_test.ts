/**
 * A queue's signed give-up on a settling intent records its replay claim
 * before it asks the Sender for receipts. When that record is slow to
 * answer (a database just back from a restart), the receipts' budget must
 * not run out under it and let the resolution write the same claim again:
 * the record would then refuse the give-up as a replay of itself (a 401,
 * and a queue that stops calling), though nobody replayed it (found by the
 * crash test, a PostgreSQL `immediate` shutdown under a QStash failure
 * callback).
 */
import assert from "node:assert/strict";
import {
  type Admission,
  createRelayer,
  type ReceiptStatus,
  ReplayError,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const LEASE_MS = 100; // the give-up's receipts budget is half: 50 ms
const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const QUEUE = { queue: "qstash", messageId: "msg_1" } as const;

/** `store`, whose admissions of a claim answer `ms` after they landed. */
function slowClaims(store: Store, ms: number): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      if (key !== "admit") return value.bind(target);
      return async (admission: Admission) => {
        const admitted = await target.admit(admission);
        if (admission.claim !== undefined) {
          await new Promise((resolve) => setTimeout(resolve, ms));
        }
        return admitted;
      };
    },
  });
}

/** A signer whose one tx confirmed. */
const confirmed: Sender = {
  send: () => Promise.reject(new Error("a give-up sends nothing")),
  receipt: (): Promise<ReceiptStatus> => Promise.resolve("confirmed"),
};

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a signed give-up whose replay record answers after the receipts' budget is not refused as a replay of itself`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "settling",
        hold: "pending",
        settlingSince: Date.now() - 60_000,
        txHashes: ["0xpi_0001"],
      });
      const relayer = createRelayer({
        store: slowClaims(store, 3 * LEASE_MS),
        sender: confirmed,
        leaseMs: LEASE_MS,
      });
      const claim = () => ({
        key: "qstash/jwt_1",
        now: Date.now(),
        expiresAt: Date.now() + 300_000,
      });
      const outcome = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: QUEUE,
        claim: claim(),
      });
      assert.equal(outcome.action, "done", JSON.stringify(outcome));
      assert.equal((await store.getIntent(JOB.intentId))?.state, "settled");
      // The record is the request's all the same: sent again, refused.
      await assert.rejects(
        relayer.giveUp(JOB, { deliveries: 3, queue: QUEUE, claim: claim() }),
        ReplayError,
      );
    } finally {
      await close();
    }
  });
}
