/**
 * A queue's signed give-up on a settling intent records its replay claim
 * before it asks the Sender for receipts. When that record is slow to
 * answer (a database just back from a restart), the receipts' budget must
 * not run out under it and let the resolution write the same claim again:
 * the record would then refuse the give-up as a replay of itself (a 401:
 * one of the queue's calls spent), though nobody replayed it (found by the
 * crash test, a PostgreSQL `immediate` shutdown under a QStash failure
 * callback). Should the resolution's write land first, the give-up instead
 * sent a paid payment to review without reading its receipts: the budget
 * is the Sender's, not the store's.
 */
import assert from "node:assert/strict";
import {
  createRelayer,
  type ReceiptStatus,
  ReplayError,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS, slowClaims } from "../_stores.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";

const LEASE_MS = 100; // the give-up's receipts budget is half: 50 ms
const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const QUEUE = { queue: "qstash", messageId: "msg_1" } as const;

/** A replay claim of token `jti`, good for 5 minutes. */
const claimOf = (jti: string) => ({
  key: `qstash/${jti}`,
  now: Date.now(),
  expiresAt: Date.now() + 300_000,
});

/** A signer whose one tx confirmed. */
const confirmed: Sender = {
  send: () => Promise.reject(new Error("a give-up sends nothing")),
  receipt: (): Promise<ReceiptStatus> => Promise.resolve("confirmed"),
};

/** The job's intent, settling for a minute with one tx on record. */
function settlingOnOneTx(store: Store): Promise<unknown> {
  return store.createIntent({
    id: JOB.intentId,
    state: "settling",
    hold: "pending",
    settlingSince: Date.now() - 60_000,
    txHashes: ["0xpi_0001"],
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a signed give-up whose replay record answers after the receipts' budget is not refused as a replay of itself`, async () => {
    const { store, close } = await backend.open();
    try {
      await settlingOnOneTx(store);
      const relayer = createRelayer({
        store: slowClaims(store, 3 * LEASE_MS),
        sender: confirmed,
        leaseMs: LEASE_MS,
      });
      const claim = () => claimOf("jwt_1");
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

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a signed give-up whose replay record landed and whose answer was lost fails as the store failing, not as a replay, and the queue's next call resolves it`, async () => {
    const { store, close } = await backend.open();
    try {
      await settlingOnOneTx(store);
      const lossy = createRelayer({
        store: slowClaims(store, 0, true),
        sender: confirmed,
        leaseMs: LEASE_MS,
      });
      const first = await lossy.giveUp(JOB, {
        deliveries: 3,
        queue: QUEUE,
        claim: claimOf("jwt_1"),
      }).then(() => undefined, (error: unknown) => error);
      // The webhook answers it 503: the queue calls again.
      assert.ok(
        first instanceof Error && !(first instanceof ReplayError),
        String(first),
      );
      assert.equal((await store.getIntent(JOB.intentId))?.state, "settling");
      // QStash signs each call afresh: the next one resolves the intent.
      const relayer = createRelayer({
        store,
        sender: confirmed,
        leaseMs: LEASE_MS,
      });
      const outcome = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: QUEUE,
        claim: claimOf("jwt_2"),
      });
      assert.equal(outcome.action, "done", JSON.stringify(outcome));
      assert.equal((await store.getIntent(JOB.intentId))?.state, "settled");
      // The first request, replayed, is refused: its record landed.
      await assert.rejects(
        relayer.giveUp(JOB, {
          deliveries: 3,
          queue: QUEUE,
          claim: claimOf("jwt_1"),
        }),
        ReplayError,
      );
    } finally {
      await close();
    }
  });
}

Deno.test({
  name:
    "PostgresStore: a signed give-up whose replay record waits on a lock past the receipts' budget reads its receipts all the same, and settles the paid payment",
  ignore: !postgresAvailable,
  fn: async () => {
    const { store, sql, schema, close } = await openPostgresStore();
    const held = await sql.reserve();
    try {
      await settlingOnOneTx(store);
      // Another session holds the replay records' table for 3 leases (a
      // server busy after a restart, say): the record waits, then lands.
      // Cut short by the budget, the resolution's write claimed it first
      // and sent the payment to review with its receipt unread.
      await held`BEGIN`;
      await held.unsafe(
        `LOCK TABLE "${schema}".claims IN SHARE ROW EXCLUSIVE MODE`,
      );
      const timer = setTimeout(() => held`COMMIT`.execute(), 3 * LEASE_MS);
      const relayer = createRelayer({
        store,
        sender: confirmed,
        leaseMs: LEASE_MS,
      });
      const outcome = await relayer.giveUp(JOB, {
        deliveries: 3,
        queue: QUEUE,
        claim: claimOf("jwt_1"),
      }).finally(() => clearTimeout(timer));
      assert.equal(outcome.action, "done", JSON.stringify(outcome));
      assert.equal((await store.getIntent(JOB.intentId))?.state, "settled");
    } finally {
      await held`ROLLBACK`.catch(() => {});
      held.release();
      await close();
    }
  },
});
