/**
 * A clock that steps: one process, one clock, and the wall clock jumps
 * forward while a send is in flight (a VM resumed, NTP stepped it). By the
 * stepped clock the send's lease has lapsed and the payment looks stuck,
 * but the send is still running in this very process, so a copy of the job
 * delivered here must answer busy, not rescue beside it (I5). On the local
 * Deno KV queue such a copy is certain: Deno KV redelivers a message whose
 * handler is still running once the wall clock passes its deadline
 * (`tests/queue_clock_test.ts`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, type Store } from "../../mod.ts";
import { BACKENDS, openAuthorized } from "../_stores.ts";
import { gatedSender } from "./_gated_sender.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

/**
 * A relayer over `store` whose first delivery's send is in flight, held by
 * a gated Sender, with the wall clock stepped `stepMs` forward since.
 */
async function sendInFlight(
  store: Store,
  stepMs: number,
  options: { leaseMs?: number } = {},
) {
  const clock = { t: 1_800_000_000_000 };
  const gate = gatedSender();
  const relayer = createRelayer({
    store,
    sender: gate.sender,
    now: () => clock.t,
    ...options,
  });
  const started = gate.nextStart();
  const first = relayer.deliver(JOB, 1);
  await started; // the first delivery's send is in flight
  clock.t += stepMs;
  return { gate, relayer, first };
}

for (const backend of BACKENDS) {
  for (const stepMs of [60_000, 6 * 60_000, 24 * 3_600_000]) {
    Deno.test(`${backend.name}: a copy delivered to the process whose send is in flight answers busy when the clock steps ${stepMs / 60_000} min forward mid-send`, async () => {
      const { store, close } = await openAuthorized(backend, JOB.intentId);
      try {
        // Past the lease (30 s) and STUCK_AFTER (5 min).
        const { gate, relayer, first } = await sendInFlight(store, stepMs);
        const second = await Promise.race([
          relayer.deliver(JOB, 2),
          gate.nextStart().then(() => "sent" as const),
        ]);
        gate.releaseAll();
        const firstOutcome = await first;
        if (second === "sent") gate.releaseAll();
        assert.equal(
          gate.maxInFlight,
          1,
          `two sends in flight at once for ${JOB.intentId} (the copy answered ${
            typeof second === "string" ? second : JSON.stringify(second)
          })`,
        );
        assert.ok(second !== "sent");
        assert.equal(second.action, "retry");
        assert.match(second.reason, /busy with another delivery/);
        // The first send is recorded: nothing raced its record.
        assert.equal(firstOutcome.action, "retry");
        assert.equal(
          firstOutcome.reason,
          "sent 0x0001, waiting for confirmation",
        );
        const intent = await store.getIntent(JOB.intentId);
        assert.deepEqual(intent?.txHashes, ["0x0001"]);
        assert.equal(intent?.broadcasting, null);
        // Once the send is over, a copy finds it recorded and reads its receipt.
        const third = await relayer.deliver(JOB, 3);
        assert.equal(third.reason, "waiting for 0x0001 to confirm");
        assert.equal(gate.sends, 1);
      } finally {
        await close();
      }
    });
  }
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a queue's give-up that arrives while this process's send for the intent is in flight, the clock stepped forward mid-send, waits for the send and resolves with its hash on record`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      // Past the lease (30 s) and STUCK_AFTER (5 min).
      const { gate, relayer, first } = await sendInFlight(store, 6 * 60_000);
      const queue = { queue: "pubsub", messageId: "m-1" } as const;
      const givenUp = relayer.giveUp(JOB, { deliveries: 10, queue });
      await new Promise((resolve) => setTimeout(resolve, 20));
      gate.releaseAll();
      const [firstOutcome, outcome] = await Promise.all([first, givenUp]);
      // Resolved mid-send, the payment went to review with no hash on
      // record, and the send's own record of the tx that left was refused.
      assert.equal(
        firstOutcome.reason,
        "sent 0x0001, waiting for confirmation",
      );
      assert.deepEqual(
        outcome.action === "poison" && outcome.resolution,
        "last broadcast sent as 0x0001, needs review",
        JSON.stringify(outcome),
      );
      const intent = await store.getIntent(JOB.intentId);
      assert.equal(intent?.state, "needs_review");
      assert.deepEqual(intent?.txHashes, ["0x0001"]);
      assert.equal(gate.sends, 1);
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a queue's give-up waits for this process's send in flight only so long: a send that never ends does not hold the queue's last word up`, async () => {
    const { store, close } = await openAuthorized(backend, JOB.intentId);
    try {
      // The give-up waits at most half the lease: 100 ms here.
      const { gate, relayer, first } = await sendInFlight(store, 6 * 60_000, {
        leaseMs: 200,
      });
      const outcome = await relayer.giveUp(JOB, {
        deliveries: 10,
        queue: { queue: "pubsub", messageId: "m-1" },
      });
      assert.equal(outcome.action, "poison", JSON.stringify(outcome));
      assert.equal(
        (await store.getIntent(JOB.intentId))?.state,
        "needs_review",
      );
      gate.releaseAll();
      await first;
    } finally {
      await close();
    }
  });
}
