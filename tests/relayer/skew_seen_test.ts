/**
 * Clocks further apart than `clockSkewMs` are the one case the lease does
 * not cover (two sends may overlap: docs/policy.md). The instance whose
 * clock runs behind can see it: a send in flight written ahead at a time
 * beyond its own clock by more than the bound. Its busy answer (and so its
 * log line) now says so, where it said only "busy with another delivery".
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, MemoryStore } from "../../mod.ts";
import { gatedSender } from "./_gated_sender.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const SKEW = 5_000;

/** The reason a contender `aheadMs` behind the holder's clock is given. */
async function busyBehind(aheadMs: number): Promise<string> {
  const store = new MemoryStore();
  await store.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  const t = 1_800_000_000_000;
  const gate = gatedSender();
  const common = { store, sender: gate.sender, clockSkewMs: SKEW };
  const holder = createRelayer({ ...common, now: () => t + aheadMs });
  const contender = createRelayer({ ...common, now: () => t });
  const started = gate.nextStart();
  const first = holder.deliver(JOB, 1);
  await started;
  try {
    const outcome = await contender.deliver(JOB, 2);
    assert.equal(outcome.action, "retry");
    assert.equal(gate.sends, 1);
    return outcome.reason;
  } finally {
    gate.releaseAll();
    await first;
  }
}

Deno.test("a send in flight begun further ahead of this clock than clockSkewMs is busy, and the reason says the clocks are too far apart", async () => {
  assert.equal(
    await busyBehind(65_000),
    "intent pi_0001 is busy with another delivery; its send was begun 1m5s ahead of this clock, more than clockSkewMs (5s) allows: two sends may overlap, keep the instances' clocks synchronised",
  );
});

Deno.test("within clockSkewMs, or at it, the busy reason says nothing of clocks", async () => {
  for (const ahead of [0, 3_000, SKEW]) {
    assert.equal(
      await busyBehind(ahead),
      "intent pi_0001 is busy with another delivery",
      `${ahead} ms ahead`,
    );
  }
});
