/**
 * A busy answer under a queue's own limit. A copy of a job that finds
 * another delivery's send in flight answers busy, and the relayer never
 * poisons on that, but the queue counts the answer as one of its
 * deliveries (QStash's retries, Cloudflare's `max_retries`, the store's
 * count). Here the send's delivery ran on another instance that died
 * mid-send, so the send stays "in flight" for its whole lease (`LEASE` +
 * `CLOCK_SKEW`, 35 s). Backed off by the policy alone (5 s, 10 s, 20 s),
 * one such send spent a short queue's every delivery: the queue gave up,
 * and the policy never decided. Backed off past the send's lease, the copy
 * is busy once, and the next delivery decides.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  createRelayer,
  type Relayer,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { localQueueConsumer } from "../../webhook/_local_queue.ts";
import {
  createQueueHandler,
  type QueueMessage,
} from "../../cloudflare/queue_handler.ts";
import {
  BACKENDS,
  memoryBackend,
  openAuthorized,
  overriding,
} from "../_stores.ts";
import { gatedSender } from "../relayer/_gated_sender.ts";
import { QSTASH, signQStash } from "./_signing.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const JOB_ID = "pi_0001/settle";
const T0 = 1_000_000;
const LEASE_MS = 30_000;
const SKEW_MS = 5_000;
/** Three deliveries: QStash's `retries` 2, the least `loadConfig` takes for it. */
const policy = { maxDeliveries: 3, jitter: "none" } as const;

/**
 * The first delivery, on another instance: it wrote ahead and its send
 * left at `T0`; then the instance died (its send never ends until
 * `release`).
 */
async function diedMidSend(store: Store, clock: { t: number }) {
  const gate = gatedSender();
  const other = createRelayer({
    ...optionsOn(store, clock),
    sender: gate.sender,
  });
  const started = gate.nextStart();
  const first = other.deliver(JOB, 1);
  await started;
  return {
    /** Lets the dead send end (its record is refused or lands): test cleanup. */
    async release() {
      gate.releaseAll();
      await first.catch(() => {});
    },
  };
}

/** This instance's relayer options, on the same store and clock. */
function optionsOn(store: Store, clock: { t: number }) {
  return {
    store,
    sender: new ScriptedSender({}),
    policy,
    now: () => clock.t,
    random: () => 0,
    leaseMs: LEASE_MS,
    clockSkewMs: SKEW_MS,
  };
}

/** This instance's relayer, on the same store and clock. */
function relayerOn(store: Store, clock: { t: number }): Relayer {
  return createRelayer(optionsOn(store, clock));
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: POST /v1/qstash behind a send whose instance died asks back once its lease is over, so QStash's last delivery is the policy's to decide`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    const clock = { t: T0 };
    const dead = await diedMidSend(store, clock);
    try {
      const app = createApp({ ...optionsOn(store, clock), qstash: QSTASH });
      // QStash timed the first delivery out at 10 s and delivers again at
      // once; then it waits as each answer's Retry-After says, until its
      // `retries` (2) are spent.
      clock.t = T0 + 10_000;
      const body = JSON.stringify(JOB);
      const answers: string[] = [];
      for (let retried = 1; retried <= 2; retried++) {
        const res = await app.request("/v1/qstash", {
          method: "POST",
          body,
          headers: {
            "upstash-signature": await signQStash(body),
            "upstash-retried": String(retried),
          },
        });
        const answer = await res.json();
        const after = res.headers.get("retry-after");
        answers.push(
          `+${
            (clock.t - T0) / 1000
          }s #${answer.delivery} ${res.status} ${answer.outcome}${
            after === null ? "" : ` after ${after}s`
          }`,
        );
        if (res.status !== 503) break;
        clock.t += Number(after) * 1000;
      }
      // Busy once: asked back when the send's lease is over on any
      // instance (35 s, and another instance's clock may be 5 s behind).
      assert.deepEqual(answers, [
        "+10s #2 503 retry after 30s",
        "+40s #3 200 poison",
      ]);
      const letter = await store.getDeadLetter(JOB_ID);
      assert.equal(letter?.cause, "exhausted");
      assert.equal(letter?.reason, "no luck after 3 deliveries");
      assert.equal(
        (await store.getIntent(JOB.intentId))?.state,
        "needs_review",
      );
    } finally {
      await dead.release();
      await close();
    }
  });
}

/**
 * Runs `use` on MemoryStore with `pi_0001` authorized and the first
 * delivery's send left in flight at `T0` by an instance that died.
 */
async function onMemoryWithDeadSend(
  use: (store: Store, clock: { t: number }) => Promise<void>,
): Promise<void> {
  const { store, close } = await openAuthorized(memoryBackend, JOB.intentId);
  const clock = { t: T0 };
  const dead = await diedMidSend(store, clock);
  try {
    await use(store, clock);
  } finally {
    await dead.release();
    await close();
  }
}

Deno.test("a busy copy's wait covers another instance's clock running CLOCK_SKEW behind: the next delivery there finds the dead send's lease over", () =>
  onMemoryWithDeadSend(async (store, clock) => {
    clock.t = T0 + 10_000;
    const busy = await relayerOn(store, clock).deliver(JOB, 2);
    assert.equal(busy.action, "retry");
    assert.match(busy.reason, /busy with another delivery/);
    assert.equal(busy.action === "retry" && busy.delayMs, 30_000);
    // The next delivery, that long after, on an instance whose clock runs
    // CLOCK_SKEW behind this one's: the send is not in flight there.
    clock.t += 30_000;
    const behind = {
      get t() {
        return clock.t - SKEW_MS;
      },
    };
    const next = await relayerOn(store, behind).deliver(JOB, 3);
    assert.doesNotMatch(next.reason, /busy/);
    assert.equal(next.action, "poison");
  }));

Deno.test("a busy copy still waits the policy's delay when it is the longer, and no longer than LEASE + 2 × CLOCK_SKEW when this clock reads the send as begun in the future", () =>
  onMemoryWithDeadSend(async (store, clock) => {
    clock.t = T0 + 30_000; // 10 s of the lease left here: the policy's 20 s is longer
    const late = await relayerOn(store, clock).deliver(JOB, 3);
    assert.equal(late.action === "retry" && late.delayMs, 20_000);
    clock.t = T0 - 60_000; // this instance's clock a minute behind the sender's
    const early = await relayerOn(store, clock).deliver(JOB, 2);
    assert.match(early.reason, /busy with another delivery/);
    assert.equal(early.action === "retry" && early.delayMs, 40_000);
  }));

Deno.test("createQueueHandler() retries a busy copy with delaySeconds past the send's lease", () =>
  onMemoryWithDeadSend(async (store, clock) => {
    clock.t = T0 + 12_500;
    const calls: string[] = [];
    const message: QueueMessage = {
      id: "m-1",
      body: JOB,
      attempts: 2,
      ack: () => calls.push("ack"),
      retry: (options) => calls.push(`retry ${options?.delaySeconds}`),
    };
    await createQueueHandler({
      deadLetterQueue: "jobs-dlq",
      deadLetterMaxRetries: 100,
      relayer: relayerOn(store, clock),
      maxRetries: 2,
      log: () => {},
    })({ queue: "relayer-jobs", messages: [message] });
    assert.deepEqual(calls, ["retry 28"]); // 27.5 s, rounded up
  }));

Deno.test("localQueueConsumer() re-enqueues a busy copy past the send's lease", () =>
  onMemoryWithDeadSend(async (store, clock) => {
    clock.t = T0 + 1_000;
    const sent: number[] = [];
    await localQueueConsumer({
      relayer: relayerOn(store, clock),
      enqueue: (_message, delayMs) => {
        sent.push(delayMs);
        return Promise.resolve();
      },
      log: () => {},
    })({ job: JOB });
    assert.deepEqual(sent, [39_000]);
  }));

Deno.test("a busy answer from the store's own lease (no send in flight on record) waits out what the store says is left of it, or the policy's delay if longer, and never more than LEASE + 2 × CLOCK_SKEW", async () => {
  const { store, close } = await openAuthorized(memoryBackend, JOB.intentId);
  const clock = { t: T0 };
  let lapsesAt: number | undefined;
  const held = overriding(store, {
    // Another delivery's lease (a give-up dropping the job, a resolution)
    // refuses the write ahead of the send (authorized to settling); the
    // store says when it lapses.
    transition: () =>
      Promise.reject(
        new BusyError(
          "Cannot write intent pi_0001 as another delivery holds its lease",
          {
            ...(lapsesAt === undefined ? {} : { leaseExpiresAt: lapsesAt }),
          },
        ),
      ),
  });
  try {
    const relayer = relayerOn(held, clock);
    const delays: (number | false)[] = [];
    for (
      const at of [
        T0 + 25_000,
        undefined,
        T0 + 1_000,
        T0 + 10_000_000,
        Number.NaN,
        Number.POSITIVE_INFINITY,
      ]
    ) {
      lapsesAt = at;
      const outcome = await relayer.deliver(JOB, 2);
      assert.match(outcome.reason, /busy with another delivery/);
      delays.push(outcome.action === "retry" && outcome.delayMs);
    }
    // 25 s left and CLOCK_SKEW; the policy's 10 s when the store says
    // nothing, or less is left; at most LEASE + 2 × CLOCK_SKEW; the
    // policy's when what it says is no time (a store of one's own).
    assert.deepEqual(delays, [
      30_000,
      10_000,
      10_000,
      40_000,
      10_000,
      10_000,
    ]);
  } finally {
    await close();
  }
});

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a write refused by another delivery's lease says when that lease lapses`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      const seen = await store.getIntent(JOB.intentId);
      const ahead = await store.transition(JOB.intentId, {
        from: "authorized",
        to: "settling",
        version: seen!.version,
        at: 0,
      }, { lease: { owner: "a", ttlMs: 1_000, now: 0, keep: true } });
      await assert.rejects(
        store.recordBroadcast(JOB.intentId, ahead.version, {
          outcome: "unknown",
          at: 400,
        }, { lease: { owner: "b", ttlMs: 1_000, now: 400 } }),
        (error: BusyError) =>
          error instanceof BusyError && error.leaseExpiresAt === 1_000,
      );
      // A dead letter written under a lease (a resolution's) is refused
      // the same way, and goes through once the lease is over.
      const letter = {
        jobId: JOB_ID,
        intentId: JOB.intentId,
        deliveries: 3,
        cause: "exhausted",
        reason: "no luck after 3 deliveries",
        resolution: "left authorized",
        lastError: "no luck",
        poisonedAt: 400,
      } as const;
      const kept = (now: number) =>
        store.putDeadLetter(letter, {
          intentVersion: ahead.version,
          lease: { owner: "b", ttlMs: 1_000, now },
        });
      await assert.rejects(
        kept(999),
        (error: BusyError) =>
          error instanceof BusyError && error.leaseExpiresAt === 1_000,
      );
      await kept(1_000);
      assert.equal((await store.getDeadLetter(JOB_ID))?.deliveries, 3);
    } finally {
      await close();
    }
  });
}

Deno.test("a last delivery the policy poisons, meeting this relayer's own send in flight as it resolves, is busy until that send's lease is over", async () => {
  const { store, close } = await openAuthorized(memoryBackend, JOB.intentId);
  const clock = { t: T0 };
  const gate = gatedSender();
  // The look of the last copy reads no intent (a read before it was
  // created, say): a failure the policy poisons on at the last delivery.
  // Its resolution then reads the intent again, and finds this relayer's
  // own send of it in flight.
  let lookMisses = false;
  const relayer = createRelayer({
    ...optionsOn(
      overriding(store, {
        getIntent: (id) => {
          if (!lookMisses) return store.getIntent(id);
          lookMisses = false;
          return Promise.resolve(null);
        },
      }),
      clock,
    ),
    sender: gate.sender,
  });
  const started = gate.nextStart();
  const first = relayer.deliver(JOB, 1);
  try {
    await started;
    clock.t = T0 + 1_000;
    lookMisses = true;
    const last = await relayer.deliver(JOB, 3);
    assert.match(last.reason, /busy with another delivery/);
    // The send began at T0: LEASE + CLOCK_SKEW, and CLOCK_SKEW for the
    // next delivery's clock, less the second gone; the policy's 20 s is
    // the shorter.
    assert.equal(last.action === "retry" && last.delayMs, 39_000);
    assert.equal((await store.getIntent(JOB.intentId))?.state, "settling");
  } finally {
    gate.releaseAll();
    await first.catch(() => {});
    await close();
  }
});
