/**
 * The lease is timed from before the write-ahead, so a write-ahead held up
 * in the store eats into it: one that took more than half the lease sends
 * nothing (recorded as not sent), so a send never starts with a lease that
 * might lapse under it and let another delivery act on the intent (I5).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import {
  createRelayer,
  type Intent,
  type ReceiptStatus,
  ScriptedSender,
  type Sender,
} from "../../mod.ts";
import {
  BACKENDS,
  openAuthorized,
  overriding,
  slowWriteAhead,
} from "../_stores.ts";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

const LEASE = 30_000;
const JOB = { intentId: "pi_0001", kind: "settle" } as const;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a write-ahead that took over half the lease sends nothing, and says so`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const clock = { t: 1_000_000 };
      const sender = new ScriptedSender({
        [JOB.intentId]: { sends: [{ txHash: "0xabc" }] },
      });
      const relayer = createRelayer({
        store: slowWriteAhead(store, clock, LEASE / 2 + 1),
        sender,
        now: () => clock.t,
        leaseMs: LEASE,
        random: () => 0,
      });
      const outcome = await relayer.deliver(JOB, 1);
      assert.equal(outcome.action, "retry");
      assert.match(
        outcome.reason,
        /^not sent: the write ahead of the send took 15\.001s of the 30s lease/,
      );
      assert.deepEqual(sender.calls, [], "the signer was never asked");
      const intent = await store.getIntent(JOB.intentId);
      assert.equal(intent?.broadcasting, null);
      assert.equal(intent?.mayHaveSent, false);
      assert.equal(intent?.lastBroadcast?.outcome, "not_sent");
      // The lease is released: the next delivery sends at once.
      const next = createRelayer({
        store,
        sender,
        now: () => clock.t,
        leaseMs: LEASE,
      });
      const sent = await next.deliver(JOB, 2);
      assert.match(sent.reason, /^sent 0xabc, waiting for confirmation/);
      assert.equal(sender.calls.length, 1);
    } finally {
      await close();
    }
  });
}

Deno.test("MemoryStore: the store failing the not-sent record of a write-ahead that took over half the lease is thrown as it came at the last delivery, not the job's failure", async () => {
  const { store, close } = await BACKENDS[0]!.open();
  try {
    // Settling, its last broadcast declared not sent: the last delivery
    // sends again (an authorized intent's first send waits for a delivery
    // that can read its receipt).
    await store.createIntent({
      id: JOB.intentId,
      state: "settling",
      hold: "pending",
      settlingSince: 1_000_000,
      lastBroadcast: { outcome: "not_sent", at: 1_000_000 },
      mayHaveSent: false,
    });
    const clock = { t: 1_000_000 };
    const sender = new ScriptedSender({
      [JOB.intentId]: { sends: [{ txHash: "0xabc" }] },
    });
    const blip = new Error("connection reset by peer");
    let fail: Error | undefined = blip;
    const relayer = createRelayer({
      store: slowWriteAhead(
        overriding(store, {
          recordBroadcast: (...args) => {
            const failing = fail;
            fail = undefined;
            return failing
              ? Promise.reject(failing)
              : store.recordBroadcast(...args);
          },
        }),
        clock,
        LEASE / 2 + 1,
      ),
      sender,
      policy: { maxDeliveries: 3 },
      now: () => clock.t,
      leaseMs: LEASE,
      random: () => 0,
    });
    await assert.rejects(relayer.deliver(JOB, 3), (error) => error === blip);
    assert.deepEqual(sender.calls, [], "the signer was never asked");
    // Nothing decided: no letter, the payment not in review; the
    // write-ahead stands, for the next look or the queue's give-up.
    assert.equal(await store.getDeadLetter(`${JOB.intentId}/settle`), null);
    const intent = await store.getIntent(JOB.intentId);
    assert.equal(intent?.state, "settling");
    assert.notEqual(intent?.broadcasting, null);
  } finally {
    await close();
  }
});

Deno.test("MemoryStore: a write-ahead that took exactly half the lease still sends", async () => {
  const { store, close } = await BACKENDS[0]!.open();
  await store.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  const clock = { t: 0 };
  const sender = new ScriptedSender({
    [JOB.intentId]: { sends: [{ txHash: "0xabc" }] },
  });
  const relayer = createRelayer({
    store: slowWriteAhead(store, clock, LEASE / 2),
    sender,
    now: () => clock.t,
    leaseMs: LEASE,
  });
  const outcome = await relayer.deliver(JOB, 1);
  assert.match(outcome.reason, /^sent 0xabc/);
  await close();
});

/** A signer that takes `ms` to accept each send, and remembers when. */
class SlowSigner implements Sender {
  readonly calls: { start: number; end: number; txHash: string }[] = [];
  constructor(readonly ms: number) {}
  async send(_intent: Intent): Promise<{ txHash: string }> {
    const start = Date.now();
    const txHash = `0x${this.calls.length + 1}`;
    await new Promise((r) => setTimeout(r, this.ms));
    this.calls.push({ start, end: Date.now(), txHash });
    return { txHash };
  }
  receipt(): Promise<ReceiptStatus> {
    return Promise.resolve("pending");
  }
}

Deno.test({
  name:
    "PostgresStore: a write-ahead held up by a locked row does not send on a lease that would lapse mid-send",
  ignore: !postgresAvailable,
  async fn() {
    // Scaled down: SENDER_TIMEOUT 2 s and LEASE 4 s (the least the service
    // accepts); another session holds the intent's row for 3 s, within the
    // store's 10 s connectionWaitMs, and the signer takes 1.9 s.
    const lease = 4_000;
    const { store, schema, close } = await openPostgresStore();
    const locker = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
    });
    try {
      await store.createIntent({
        id: JOB.intentId,
        state: "authorized",
        hold: "pending",
      });
      const signer = new SlowSigner(1_900);
      const policy = { maxDeliveries: 3, stuckAfterMs: 3_500, baseMs: 60_000 };
      const a = createRelayer({
        store,
        sender: signer,
        policy,
        leaseMs: lease,
      });
      const b = createRelayer({
        store,
        sender: signer,
        policy,
        leaseMs: lease,
      });
      let release!: () => void;
      const held = new Promise<void>((r) => release = r);
      const locked = locker.begin(async (tx) => {
        await tx.unsafe(
          `SELECT 1 FROM "${schema}".intents WHERE id = $1 FOR UPDATE`,
          [JOB.intentId],
        );
        await held;
      });
      await new Promise((r) => setTimeout(r, 100));
      setTimeout(release, 3_000);
      const first = a.deliver(JOB, 2);
      // A redelivery after the first delivery's lease (timed from its
      // start) has lapsed: it may rescue, and must not send beside it.
      await new Promise((r) => setTimeout(r, lease + 300));
      await b.deliver(JOB, 3);
      await first;
      await locked;
      const overlap = signer.calls.some((x, i) =>
        signer.calls.some((y, j) => i < j && x.start < y.end && y.start < x.end)
      );
      assert.equal(overlap, false, "two sends overlapped at the signer");
      const intent = await store.getIntent(JOB.intentId);
      for (const call of signer.calls) {
        assert.ok(
          intent?.txHashes.includes(call.txHash),
          `${call.txHash} was accepted but is nowhere on the intent`,
        );
      }
    } finally {
      await locker.end({ timeout: 1 });
      await close();
    }
  },
});
