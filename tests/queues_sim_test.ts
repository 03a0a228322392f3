/**
 * Proof by simulation that nothing is stranded, whatever the queue's own
 * limits and delays (DESIGN §14): each queue's documented redelivery rules
 * in a virtual clock (`_queue_sim.ts`), the real relayer, fast-check over
 * policies, queue settings and Sender scripts. Seeded and replayable
 * (`FC_SEED`, `FC_PATH`, `FC_RUNS`).
 *
 * (i) For every configuration `loadConfig` accepts, every job ends with its
 * intent settled or resolved by §5, and none is stranded.
 * (ii) A payment stuck in settling is rescued (re-broadcast with replace)
 * before it is poisoned, by the policy or by the queue giving up.
 * (iii) Every configuration where (i) or (ii) fails is refused at start.
 *
 * (iv) (i) holds too where, at a job's end, a delivery is killed mid-send
 * holding the job's lease (at any number, the last included, or a copy of
 * the job right before the give-up), so that the next deliveries and the
 * give-up are answered busy for up to `LEASE` + 2 × `CLOCK_SKEW`; or where
 * the store is down for up to that long. (ii) is not claimed there: a
 * delivery killed mid-send, those answered busy behind it, and one the
 * store failed each spend one of the queue's deliveries, and one at the
 * last leaves a stuck payment to the give-up, which sends it to review
 * unrescued (docs/queues.md, "While the store is down"). Longer outages
 * are bounded by each queue's own retries of the give-up (docs/queues.md),
 * not by the start check.
 *
 * Broken twins: a queue that stops early with no callback fails (i); a
 * start-up check that ignores the queue's limit fails (iii); QStash calling
 * its failure callback once more only fails (iv); a Cloudflare retention
 * that leaves out the delivery delay or the lease, or is a second under the
 * least `createQueueHandler` takes, fails (iv); a dead-letter retention
 * counted from the give-up's arrival, not the send, fails (iv).
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { definePolicy, type Policy, type QueueLimits } from "../mod.ts";
import {
  acceptedEventScenario,
  acceptedScenario,
  accepts,
  anyAccidents,
  anyScenario,
  cloudflareDeadLetterRetentionScenario,
  cloudflareRetentionScenario,
  leastCloudflareRetention,
  modelOf,
  type QueueModel,
  type QueueRunReport,
  type QueueScenario,
  type ServiceSettings,
  simulateQueue,
} from "./_queue_sim.ts";
import { catchesAsync, runs } from "./_fc.ts";
import {
  CLOUDFLARE_MAX_DELAY_SECONDS,
  cloudflareDeadLetterWaitSeconds,
  cloudflareDelaySeconds,
} from "../policy/_cloudflare_retention.ts";
import { outageDelayMs } from "../policy/_doubled.ts";

function describeRun(report: QueueRunReport): string {
  return JSON.stringify({
    stranded: report.stranded,
    unresolved: report.unresolved,
    poisonedBeforeRescue: report.poisonedBeforeRescue,
  });
}

/** (i) and (ii) on one accepted run, with `model` standing in for the queue. */
function nothingStranded(
  arbitrary: fc.Arbitrary<QueueScenario>,
  model: (scenario: QueueScenario) => QueueModel = (s) => modelOf(s.queue),
  totals?: Totals,
) {
  return fc.asyncProperty(arbitrary, async (scenario) => {
    assert.ok(
      accepts(scenario.policy, scenario.queue),
      "generated as accepted",
    );
    const report = await simulateQueue(scenario, model(scenario));
    totals?.add(report);
    assert.deepEqual(report.stranded, [], describeRun(report));
    assert.deepEqual(report.unresolved, [], describeRun(report));
    assert.deepEqual(report.poisonedBeforeRescue, [], describeRun(report));
  });
}

/** (iii): a run that breaks (i) or (ii) has a configuration the check refuses. */
function refusedWhenBroken(
  check: (policy: Policy, queue: QueueLimits) => boolean,
  tally?: { accepted: number; refused: number; brokenRefused: number },
) {
  return fc.asyncProperty(anyScenario, async (scenario) => {
    const accepted = check(scenario.policy, scenario.queue);
    const report = await simulateQueue(scenario);
    const broken = report.stranded.length > 0 ||
      report.unresolved.length > 0 || report.poisonedBeforeRescue.length > 0;
    if (tally) {
      tally[accepted ? "accepted" : "refused"]++;
      if (broken && !accepted) tally.brokenRefused++;
    }
    assert.ok(!broken || !accepted, describeRun(report));
  });
}

/** The figures of a batch of runs. */
class Totals {
  runs = 0;
  jobs = 0;
  stranded = 0;
  queueGaveUp = 0;
  giveUpCalls = 0;
  rescues = 0;
  add(report: QueueRunReport): void {
    this.runs++;
    this.jobs += Object.values(report.stats.finalStates).reduce(
      (a, b) => a + (b ?? 0),
      0,
    );
    this.stranded += report.stranded.length;
    this.queueGaveUp += report.stats.queueGaveUp;
    this.giveUpCalls += report.stats.giveUpCalls;
    this.rescues += report.stats.rescues;
  }
}

const RUNS = 300;

for (const kind of ["qstash", "pubsub", "cloudflare", "kv"] as const) {
  Deno.test(`simulateQueue() on ${kind}: every accepted configuration strands nothing and rescues before it poisons`, async () => {
    const totals = new Totals();
    await fc.assert(
      nothingStranded(acceptedScenario(kind), undefined, totals),
      { numRuns: runs(RUNS) },
    );
    assert.equal(totals.stranded, 0);
    assert.ok(totals.rescues > 0, "some stuck payment was rescued");
    if (kind !== "kv" && totals.runs >= 100) {
      assert.ok(totals.queueGaveUp > 0, "the queue gave up at least once");
    }
  });
}

/** The longest outage (iv) covers: a busy give-up's wait, `LEASE` + 2 × `CLOCK_SKEW`. */
const busyBound = (settings: ServiceSettings) =>
  settings.leaseMs + 2 * settings.clockSkewMs;

/** (i) on one accepted run with a killed lease holder or a store outage. */
function nothingStrandedAfterEvents(
  arbitrary: fc.Arbitrary<QueueScenario>,
  model: (scenario: QueueScenario) => QueueModel = (s) =>
    modelOf(s.queue, s.policy, s.slowest, s.cloudflare, s.settings),
  seen?: { killed: number; failed: number; giveUpRetried: number },
  accepted = true,
) {
  return fc.asyncProperty(arbitrary, async (scenario) => {
    assert.ok(
      !accepted || accepts(scenario.policy, scenario.queue, scenario.settings),
      "generated as accepted",
    );
    const report = await simulateQueue(scenario, model(scenario));
    if (seen) {
      seen.killed += report.stats.killed;
      seen.failed += report.stats.failed;
      seen.giveUpRetried += report.stats.giveUpRetried;
    }
    const run = JSON.stringify({
      event: scenario.event,
      settings: scenario.settings,
      ...JSON.parse(describeRun(report)),
    });
    assert.deepEqual(report.stranded, [], run);
    assert.deepEqual(report.unresolved, [], run);
  });
}

for (const kind of ["qstash", "pubsub", "cloudflare", "kv"] as const) {
  Deno.test(`simulateQueue() on ${kind}: a delivery killed mid-send or a store outage at a job's end strands nothing`, async () => {
    const seen = { killed: 0, failed: 0, giveUpRetried: 0 };
    await fc.assert(
      nothingStrandedAfterEvents(
        acceptedEventScenario(kind, busyBound),
        undefined,
        seen,
      ),
      { numRuns: runs(150) },
    );
    // Not vacuous: sends were killed holding their lease, the store
    // failed deliveries, and (but on KV, which never gives up) give-ups
    // were answered busy or failed and called again.
    if (runs(150) >= 100) {
      assert.ok(seen.killed > 0 && seen.failed > 0, JSON.stringify(seen));
      if (kind !== "kv") {
        assert.ok(seen.giveUpRetried > 0, JSON.stringify(seen));
      }
    }
  });
}

Deno.test("killed-holder property catches QStash calling its failure callback once more only", async () => {
  // The failure callback retried once (QSTASH_RETRIES 1): 12 s after its
  // first call, within a lease a killed send left standing.
  const onceMore = (scenario: QueueScenario): QueueModel => {
    const model = modelOf(scenario.queue, scenario.policy, scenario.slowest);
    return {
      ...model,
      giveUpRetry: (k, delayMs, sinceMs, random) =>
        k <= 1 ? model.giveUpRetry!(k, delayMs, sinceMs, random) : undefined,
    };
  };
  const longLease = acceptedEventScenario("qstash", busyBound).filter((s) =>
    s.settings!.leaseMs >= 30_000 && s.event!.kind === "killed"
  );
  assert.equal(
    await catchesAsync(nothingStrandedAfterEvents(longLease, onceMore), 300),
    true,
  );
});

Deno.test("simulateQueue() on pubsub at the least retention the start check takes, with no dead-letter policy: a killed holder or an outage at the last deliveries strands nothing", async () => {
  const seen = { killed: 0, failed: 0, giveUpRetried: 0 };
  await fc.assert(
    nothingStrandedAfterEvents(
      acceptedEventScenario("pubsub", busyBound, { shiftMs: () => 0 }),
      undefined,
      seen,
    ),
    { numRuns: runs(150) },
  );
  if (runs(150) >= 100) {
    assert.ok(seen.killed > 0 && seen.failed > 0, JSON.stringify(seen));
  }
});

Deno.test("least-retention property catches a start check that leaves no room for a busy wait", async () => {
  // The retention such a check would take: LEASE + 2 × CLOCK_SKEW less.
  const noBusyRoom = acceptedEventScenario("pubsub", busyBound, {
    shiftMs: busyBound,
  });
  assert.equal(
    await catchesAsync(
      nothingStrandedAfterEvents(noBusyRoom, undefined, undefined, false),
      300,
    ),
    true,
  );
});

Deno.test("least-retention scenarios reach the corner a retention need without LEASE misses: 1 run in 40 or more strands", async () => {
  // The retention such a check would take: LEASE less, its 2 × CLOCK_SKEW
  // kept (the check's own terms, one left out). A property that strands
  // in fewer runs than this catches it only now and then.
  const noLease = fc.sample(
    acceptedEventScenario("pubsub", busyBound, {
      shiftMs: (settings) => settings.leaseMs,
    }),
    { numRuns: 400, seed: 62 },
  );
  let stranded = 0;
  for (const scenario of noLease) {
    const report = await simulateQueue(
      scenario,
      modelOf(scenario.queue, scenario.policy, scenario.slowest),
    );
    if (report.stranded.length + report.unresolved.length > 0) stranded++;
  }
  assert.ok(
    stranded * 40 >= noLease.length,
    `${stranded} of ${noLease.length}`,
  );
});

Deno.test("simulateQueue() on cloudflare at the least message retention createQueueHandler takes, with a delivery delay: a killed holder or an outage at a job's end strands nothing", async () => {
  const seen = { killed: 0, failed: 0, giveUpRetried: 0 };
  await fc.assert(
    nothingStrandedAfterEvents(
      cloudflareRetentionScenario(busyBound),
      undefined,
      seen,
    ),
    { numRuns: runs(150) },
  );
  if (runs(150) >= 100) {
    assert.ok(seen.killed > 0 && seen.failed > 0, JSON.stringify(seen));
  }
});

Deno.test("least-retention property on cloudflare catches a check that leaves out the delivery delay or the lease, and a retention a second under the least: a message deleted at its retention while still retried is stranded", async () => {
  // The retention such a check would take: the delivery delay less.
  const noDelay = cloudflareRetentionScenario(busyBound, (delayMs) => delayMs);
  assert.equal(
    await catchesAsync(nothingStrandedAfterEvents(noDelay), 300),
    true,
  );
  // The floor is tight: a second under it (which the handler refuses),
  // a message retried at its last second is deleted (64 runs in 1500).
  const secondLess = cloudflareRetentionScenario(busyBound, () => 1000);
  assert.equal(
    await catchesAsync(nothingStrandedAfterEvents(secondLess), 500),
    true,
  );
  // And one that counts the delay but not a busy intent's lease in its
  // waits, only the policy's backoff: LEASE + 2 × CLOCK_SKEW less.
  const noBusy = cloudflareRetentionScenario(
    busyBound,
    (_delayMs, settings) => busyBound(settings),
  );
  assert.equal(
    await catchesAsync(nothingStrandedAfterEvents(noBusy), 300),
    true,
  );
});

Deno.test("simulateQueue() on cloudflare at the least dead-letter message retention createQueueHandler takes, counted from the send: a killed holder or an outage at a job's end strands nothing", async () => {
  const seen = { killed: 0, failed: 0, giveUpRetried: 0 };
  await fc.assert(
    nothingStrandedAfterEvents(
      cloudflareDeadLetterRetentionScenario(busyBound),
      undefined,
      seen,
    ),
    { numRuns: runs(150) },
  );
  if (runs(150) >= 100) {
    assert.ok(seen.giveUpRetried > 0, JSON.stringify(seen));
  }
});

Deno.test("simulateQueue() on cloudflare at the least dead-letter retention: a give-up that meets the store down there for as long as a busy wait, its attempts started again at 1, is called again after the outage and before the retention ends", async () => {
  // maxRetries 1, a send that timed out, the store down from the last
  // delivery for LEASE + 2 × CLOCK_SKEW (210.001 s), and the least
  // dead-letter retention the handler takes: the jobs queue's waits
  // (211 s) and a busy give-up's (211 s), 7m3s. The give-up reaches the
  // dead-letter queue 19 s after the send, in the outage. Doubled from
  // the base (30 s, 60 s, 120 s), its retries all came within the outage,
  // and the next, 211 s, after the retention: the intent was stranded.
  const policy = definePolicy({
    maxDeliveries: 2,
    baseMs: 30_000,
    capMs: 172_800_000,
    jitter: "equal",
    stuckAfterMs: 1,
  });
  const queue = { kind: "cloudflare", maxRetries: 1 } as const;
  const settings = {
    senderTimeoutMs: 1000,
    leaseMs: 208_001,
    clockSkewMs: 1000,
  };
  const least = leastCloudflareRetention(
    policy,
    queue,
    settings,
    0,
    "deadLetterMessageRetentionMs",
  );
  assert.equal(least, 423_000);
  const scenario: QueueScenario = {
    policy,
    queue,
    settings,
    payments: [{
      start: "authorized",
      sends: ["timeout"],
      receipts: ["confirmed"],
    }],
    duplicates: [],
    lostAcks: [],
    seed: 0,
    event: { kind: "outage", at: 2, ms: busyBound(settings) },
    cloudflare: { deadLetterMessageRetentionMs: least, deliveryDelayMs: 0 },
  };
  assert.ok(accepts(policy, queue, settings));
  const report = await simulateQueue(scenario);
  assert.deepEqual(report.stranded, [], describeRun(report));
  assert.deepEqual(report.unresolved, [], describeRun(report));
  assert.ok(report.stats.giveUpRetried > 0, JSON.stringify(report.stats));
});

Deno.test("least-dead-letter-retention property on cloudflare catches a check that counts the dead-letter queue's retention from the give-up's arrival: a message moved with its age is deleted before its busy give-up is tried again", async () => {
  // The retention such a check takes: a second past a busy give-up's wait.
  const fromArrival = cloudflareDeadLetterRetentionScenario(
    busyBound,
    (least, scenario, settings) => {
      if (scenario.queue.kind !== "cloudflare") return 0;
      const wait = cloudflareDeadLetterWaitSeconds({
        baseMs: scenario.policy.baseMs,
        capMs: scenario.policy.capMs,
        leaseMs: settings.leaseMs,
        clockSkewMs: settings.clockSkewMs,
        maxRetries: scenario.queue.maxRetries,
      });
      return least - (wait + 1) * 1000;
    },
  );
  assert.equal(
    await catchesAsync(nothingStrandedAfterEvents(fromArrival), 300),
    true,
  );
});

/** Accepted scenarios at the least dead-letter retention, their attempts kept there. */
const keptAttempts = cloudflareDeadLetterRetentionScenario(busyBound).map(
  (scenario): QueueScenario => ({
    ...scenario,
    cloudflare: { ...scenario.cloudflare, deadLetterAttempts: "kept" },
  }),
);

Deno.test("simulateQueue() on cloudflare at the least dead-letter retention, a give-up's attempts kept from the jobs queue: a killed holder or an outage at a job's end strands nothing", async () => {
  const seen = { killed: 0, failed: 0, giveUpRetried: 0 };
  await fc.assert(
    nothingStrandedAfterEvents(keptAttempts, undefined, seen),
    { numRuns: runs(150) },
  );
  if (runs(150) >= 100) {
    assert.ok(seen.giveUpRetried > 0, JSON.stringify(seen));
  }
});

Deno.test("least-dead-letter-retention property on cloudflare catches waits there doubled from kept attempts with no bound from the retention: the first retry after a give-up that failed comes after the retention ends", async () => {
  // The handler's waits there, but for the bound what the retention
  // leaves: doubled from attempts kept (maxRetries + 2 at the first
  // delivery there), up to 12 h.
  const unbounded = (scenario: QueueScenario): QueueModel => {
    const model = modelOf(
      scenario.queue,
      scenario.policy,
      scenario.slowest,
      scenario.cloudflare,
      scenario.settings,
    );
    if (scenario.queue.kind !== "cloudflare") return model;
    const { maxRetries } = scenario.queue;
    return {
      ...model,
      giveUpRetry: (k, delayMs, sinceMs, random) => {
        const waitMs = model.giveUpRetry?.(k, delayMs, sinceMs, random);
        if (waitMs === undefined) return undefined;
        const doubled = cloudflareDelaySeconds(
          outageDelayMs(
            maxRetries + 1 + k,
            scenario.policy.baseMs,
            CLOUDFLARE_MAX_DELAY_SECONDS * 1000,
          ),
        );
        return Math.max(waitMs, doubled * 1000);
      },
    };
  };
  assert.equal(
    await catchesAsync(
      nothingStrandedAfterEvents(keptAttempts, unbounded),
      300,
    ),
    true,
  );
});

Deno.test("simulateQueue() on pubsub: an hour's outage drops a message whose retention ends before its dead-letter policy's last attempt, and not one past it (docs/queues.md)", async () => {
  const policy = definePolicy({
    maxDeliveries: 3,
    baseMs: 5000,
    capMs: 120_000,
    jitter: "none",
    stuckAfterMs: 5000,
  });
  const settings = {
    senderTimeoutMs: 10_000,
    leaseMs: 30_000,
    clockSkewMs: 5000,
  };
  // Pushes 25 s long (2 × SENDER_TIMEOUT + 5 s), 10 min apart, five
  // attempts: the check takes a retention past 3 pushes and a busy wait,
  // 31 min 55 s, though the fifth attempt ends only at 42 min 5 s.
  const pubsub = {
    kind: "pubsub",
    maxDeliveryAttempts: 5,
    minBackoffMs: 600_000,
    maxBackoffMs: 600_000,
    ackDeadlineMs: 25_000,
    leaseMs: 30_000,
    clockSkewMs: 5000,
  } as const;
  const run = async (retentionMs: number, at: number) => {
    const queue = { ...pubsub, retentionMs };
    assert.ok(accepts(policy, queue, settings));
    const report = await simulateQueue({
      policy,
      queue,
      settings,
      slowest: true,
      event: { kind: "outage", at, ms: 3_600_000 },
      payments: [{
        start: "authorized",
        sends: ["timeout"],
        receipts: ["pending"],
      }],
      duplicates: [],
      lostAcks: [],
      seed: 1,
    });
    return report.stranded;
  };
  assert.equal(
    accepts(policy, { ...pubsub, retentionMs: 1_915_000 }, settings),
    false,
  );
  for (const at of [1, 2, 3]) {
    assert.deepEqual(await run(1_915_001, at), ["pi_0"], `outage at ${at}`);
    assert.deepEqual(await run(2_525_001, at), [], `outage at ${at}`);
  }
});

Deno.test("simulateQueue() on store-counted queues with duplicate copies: still nothing stranded", async () => {
  const storeCounted = fc.oneof(
    acceptedScenario("kv"),
    acceptedScenario("pubsub").filter((s) => !modelOf(s.queue).counts),
  ).chain((scenario) =>
    anyAccidents.map(({ duplicates }) => ({ ...scenario, duplicates }))
  );
  await fc.assert(
    fc.asyncProperty(storeCounted, async (scenario) => {
      const report = await simulateQueue(scenario);
      assert.deepEqual(report.stranded, [], describeRun(report));
      assert.deepEqual(report.unresolved, [], describeRun(report));
    }),
    { numRuns: runs(100) },
  );
});

Deno.test("simulateQueue() property catches a queue that stops early with no callback", async () => {
  // Gives up one delivery before the policy's last, and tells nobody.
  const silentEarly = (scenario: QueueScenario): QueueModel => ({
    ...modelOf(scenario.queue),
    limit: scenario.policy.maxDeliveries - 1,
    giveUpCalls: () => 0,
  });
  for (const kind of ["qstash", "pubsub", "cloudflare", "kv"] as const) {
    assert.equal(
      await catchesAsync(
        nothingStranded(acceptedScenario(kind), silentEarly),
        100,
      ),
      true,
      kind,
    );
  }
});

Deno.test("loadConfig() refuses every configuration the simulation finds broken", async () => {
  const tally = { accepted: 0, refused: 0, brokenRefused: 0 };
  await fc.assert(refusedWhenBroken(accepts, tally), {
    numRuns: runs(500),
  });
  // Not vacuous: both sides were reached, and refused runs did break.
  if (tally.accepted + tally.refused >= 200) {
    assert.ok(tally.accepted > 0 && tally.refused > 0, JSON.stringify(tally));
    assert.ok(tally.brokenRefused > 0, JSON.stringify(tally));
  }
});

Deno.test("refusal property catches a start-up check that ignores the queue's limit", async () => {
  const unlimited = (queue: QueueLimits): QueueLimits => {
    switch (queue.kind) {
      case "qstash":
        return { ...queue, retries: 100 };
      case "pubsub":
        return {
          kind: "pubsub",
          minBackoffMs: queue.minBackoffMs,
          maxBackoffMs: queue.maxBackoffMs,
        };
      case "cloudflare":
        return { ...queue, maxRetries: 100 };
      case "kv":
        return queue;
    }
  };
  assert.equal(
    await catchesAsync(
      refusedWhenBroken((policy, queue) => accepts(policy, unlimited(queue))),
      500,
    ),
    true,
  );
});
