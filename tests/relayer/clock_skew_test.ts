/**
 * Clocks: two instances share one store, each with its own clock. A
 * lease's expiry is written by the holder's clock and read by the
 * contender's; `broadcasting` likewise. A contender whose clock runs ahead
 * (or a holder whose clock runs behind) by up to `clockSkewMs` must not
 * take over an intent whose send is still in flight by real time (I5),
 * even with the tightest settings `loadConfig` takes (LEASE = 2 ×
 * SENDER_TIMEOUT, STUCK_AFTER below LEASE). Past that bound nothing is
 * promised (docs/policy.md).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, type Sender } from "../../mod.ts";
import { BACKENDS, openAuthorized, slowWriteAhead } from "../_stores.ts";
import { gatedSender } from "./_gated_sender.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

interface Case {
  readonly name: string;
  readonly leaseMs: number;
  readonly stuckAfterMs: number;
  /** The Sender's timeout: the longest a send stays in flight. */
  readonly senderTimeoutMs: number;
  /** How long the holder's write-ahead took (under half the lease: it sends). */
  readonly writeAheadMs: number;
  /** How far the contender's clock runs ahead of the holder's. */
  readonly skewMs: number;
}

const CASES: readonly Case[] = [
  {
    // The control: the same timings on one clock are busy, as they must be.
    name: "no skew, LEASE 20s = 2 × SENDER_TIMEOUT, STUCK_AFTER 10s",
    leaseMs: 20_000,
    stuckAfterMs: 10_000,
    senderTimeoutMs: 10_000,
    writeAheadMs: 9_000,
    skewMs: 0,
  },
  {
    // LEASE = 2 × SENDER_TIMEOUT (the least loadConfig allows), STUCK_AFTER
    // below LEASE (allowed): two seconds of skew.
    name: "2s of skew, LEASE 20s = 2 × SENDER_TIMEOUT, STUCK_AFTER 10s",
    leaseMs: 20_000,
    stuckAfterMs: 10_000,
    senderTimeoutMs: 10_000,
    writeAheadMs: 9_000,
    skewMs: 2_000,
  },
  {
    // The same, with the contender as far ahead as the relayer allows for
    // (clockSkewMs, 5 s by default): the most it promises to cover.
    name:
      "5s of skew (clockSkewMs), LEASE 20s = 2 × SENDER_TIMEOUT, STUCK_AFTER 10s",
    leaseMs: 20_000,
    stuckAfterMs: 10_000,
    senderTimeoutMs: 10_000,
    writeAheadMs: 9_000,
    skewMs: 5_000,
  },
];

for (const backend of BACKENDS) {
  for (const c of CASES) {
    Deno.test(`${backend.name}: a contender whose clock runs ahead does not send while the holder's send is in flight (${c.name})`, async () => {
      const { store, close } = await openAuthorized(backend, JOB.intentId);
      try {
        const real = { t: 1_800_000_000_000 };
        const gate = gatedSender();
        const policy = {
          maxDeliveries: 10,
          baseMs: 5_000,
          capMs: 120_000,
          jitter: "none" as const,
          stuckAfterMs: c.stuckAfterMs,
        };
        const holder = createRelayer({
          store: slowWriteAhead(store, real, c.writeAheadMs),
          sender: gate.sender,
          now: () => real.t,
          leaseMs: c.leaseMs,
          policy,
        });
        const contender = createRelayer({
          store,
          sender: gate.sender,
          now: () => real.t + c.skewMs,
          leaseMs: c.leaseMs,
          policy,
        });
        const started = gate.nextStart();
        const first = holder.deliver(JOB, 1);
        await started; // the holder's send is in flight
        // Still in flight by real time: within the Sender's timeout of its start.
        real.t += c.senderTimeoutMs - 1_000;
        const second = await Promise.race([
          contender.deliver(JOB, 2),
          gate.nextStart().then(() => "sent" as const),
        ]);
        gate.releaseAll();
        await first;
        if (second === "sent") gate.releaseAll();
        assert.equal(
          gate.maxInFlight,
          1,
          `two sends in flight at once for ${JOB.intentId} (${gate.sends} sends; the contender answered ${
            typeof second === "string" ? second : JSON.stringify(second)
          })`,
        );
      } finally {
        await close();
      }
    });
  }
}

// The lease a give-up holds has no `broadcasting` beside it: only the
// lease's own arithmetic keeps a contender whose clock runs ahead from
// sending behind the drop while, by real time, the lease still holds.
for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a give-up's lease holds against a contender whose clock runs up to clockSkewMs ahead`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const real = { t: 1_800_000_000_000 };
      let sends = 0;
      const sender: Sender = {
        send: () => Promise.resolve({ txHash: `0x${++sends}` }),
        receipt: () => Promise.resolve("pending"),
      };
      const giver = createRelayer({ store, sender, now: () => real.t });
      const dropped = await giver.giveUp(JOB, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "msg_A" },
      });
      assert.equal(dropped.action, "poison");
      // 2 s of the give-up's 30 s lease left by real time; the contender's
      // clock, 4 s ahead, reads it as lapsed 2 s ago.
      real.t += 28_000;
      const contender = createRelayer({
        store,
        sender,
        now: () => real.t + 4_000,
      });
      const outcome = await contender.deliver(JOB, 1);
      assert.equal(outcome.action, "retry");
      assert.match(outcome.reason, /busy with another delivery/);
      assert.equal(sends, 0, "nothing sent behind the give-up's drop");
    } finally {
      await close();
    }
  });
}

// A send in flight on record is another delivery's for the lease and
// clockSkewMs after its write-ahead, by the reader's clock, as its lease
// is: a contender whose clock runs ahead reads it as busy until then, and
// waits out the rest in one answer. Read as lapsed by the lease alone, it
// took the payment for one still waiting for its tx ("settling for 22s
// without tx hash, waiting") and came back before the send's lease was
// over, spending another of the queue's deliveries on it.
for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a contender whose clock runs up to clockSkewMs ahead reads a send in flight past the lease by its clock as busy, and waits out the rest`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const real = { t: 1_800_000_000_000 };
      const gate = gatedSender();
      const policy = {
        maxDeliveries: 10,
        baseMs: 1_000,
        jitter: "none" as const,
        stuckAfterMs: 60_000,
      };
      const options = { sender: gate.sender, leaseMs: 20_000, policy };
      const holder = createRelayer({ store, now: () => real.t, ...options });
      const contender = createRelayer({
        store,
        now: () => real.t + 5_000,
        ...options,
      });
      const started = gate.nextStart();
      const first = holder.deliver(JOB, 1);
      await started;
      // 17 s into the send by real time: 22 s by the contender's clock,
      // past the 20 s lease and within its 5 s of skew.
      real.t += 17_000;
      const second = await contender.deliver(JOB, 2);
      gate.releaseAll();
      await first;
      assert.deepEqual(second, {
        action: "retry",
        delivery: 2,
        // The send's lease and the skew, by the contender's clock (25 s
        // after the write-ahead), then the skew a next reader may lag by.
        delayMs: 8_000,
        reason: "intent pi_0001 is busy with another delivery",
      });
      assert.equal(gate.sends, 1);
    } finally {
      await close();
    }
  });
}
