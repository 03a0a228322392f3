/**
 * I1–I6 of DESIGN §5 over generated histories: sender outcomes, crashes
 * before and after every store write, store faults on every kind of write,
 * duplicate deliveries, store-counted
 * and queue-counted deliveries, atomic and ledger-first stores, and queues
 * that give up beside their last delivery.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { definePolicy, MemoryStore, type Store } from "../../mod.ts";
import {
  type Backend,
  BACKENDS,
  ignoringUnlessCounted,
  kvBackend,
  memoryBackend,
  postgresAvailable,
  postgresBackend,
} from "../_stores.ts";
import { catchesAsync, fixedRun, runs } from "../_fc.ts";
import { anyScenario, type Breaker, cleanThenDoubt, simulate } from "./_sim.ts";

/** Holds when no history `scenarios` draws breaks an invariant (only those whose violation text matches `which`, if given). */
function holdsOver(
  scenarios: fc.Arbitrary<Parameters<typeof simulate>[0]>,
  backend: Backend,
  breaker?: Breaker,
  which?: RegExp,
) {
  return fc.asyncProperty(scenarios, async (scenario) => {
    const { store, close } = await backend.open();
    try {
      const { violations } = await simulate(scenario, store, breaker);
      assert.deepEqual(
        violations.filter((v) => which === undefined || which.test(v)),
        [],
      );
    } finally {
      await close();
    }
  });
}

/** {@linkcode holdsOver} the histories `anyScenario` draws. */
function invariantsHold(backend: Backend, breaker?: Breaker, which?: RegExp) {
  return holdsOver(anyScenario, backend, breaker, which);
}

Deno.test("createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [MemoryStore]", async () => {
  await fc.assert(invariantsHold(memoryBackend), { numRuns: runs(1000) });
});

Deno.test("createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [KvStore]", async () => {
  await fc.assert(invariantsHold(kvBackend), { numRuns: runs(300) });
});

Deno.test({
  name:
    "createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [PostgresStore]",
  ignore: !postgresAvailable,
  async fn() {
    await fc.assert(invariantsHold(postgresBackend), { numRuns: runs(100) });
  },
});

for (const backend of BACKENDS) {
  Deno.test(`a queue's give-up beside a delivery whose store count lags (a crash before it was counted) strands nothing [${backend.name}]`, async () => {
    // Found by the generated histories: the give-up dropped the job of the
    // authorized intent, then the delivery it raced (delivery 1 by the
    // store's count, 2 by the queue's) sent, and answered a retry the
    // queue no longer heard: settling, with no job.
    const { store, close } = await backend.open();
    try {
      const { violations, stats } = await simulate({
        policy: definePolicy({
          maxDeliveries: 2,
          baseMs: 1000,
          capMs: 10_000,
          jitter: "equal",
          stuckAfterMs: 0,
        }),
        intents: [{
          start: "authorized",
          sends: ["sent"],
          receipts: ["confirmed"],
        }],
        crashes: [{ at: 0, when: "before" }],
        duplicates: [],
        queueCounts: false,
        splitLedger: false,
        giveUps: true,
        giveUpAt: 2,
        pauseAt: -1,
        twoGiveUps: false,
        seed: 0,
      }, store);
      assert.deepEqual(violations, []);
      assert.equal(stats.gaveUp, 1);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`a copy of a message whose give-up is still at work is retried, not acked, so the give-up resolves the intent it finds settling [${backend.name}]`, async () => {
    // Found by the generated histories (seed 613227497) once the give-up
    // marked its message before dropping the job: of two copies of the
    // message, one sent; the give-up, busy with it, marked the message and
    // answered retry; the other copy's write ahead was then refused and
    // answered done, which ended the message, and the intent was left
    // settling with its give-up never repeated.
    const { store, close } = await backend.open();
    try {
      const { violations } = await simulate({
        policy: definePolicy({
          maxDeliveries: 3,
          baseMs: 1000,
          capMs: 10_000,
          jitter: "equal",
          stuckAfterMs: 0,
        }),
        intents: [{
          start: "authorized",
          sends: ["sent"],
          receipts: ["pending"],
        }],
        crashes: [],
        duplicates: [0, 1],
        queueCounts: false,
        splitLedger: false,
        giveUps: true,
        giveUpAt: 1,
        pauseAt: 2,
        twoGiveUps: true,
        seed: 0,
      }, store);
      assert.deepEqual(violations, []);
    } finally {
      await close();
    }
  });
}

Deno.test("the generated histories reach crashes between ledger and state, duplicates, give-ups, queue counts far ahead and gone backwards, and every ending", async () => {
  const totals = {
    crashes: 0,
    faults: 0,
    "after writeAhead": 0,
    "before record": 0,
    "after ledger": 0,
    "fault after record": 0,
    "fault before mark": 0,
    busy: 0,
    gaveUp: 0,
    interruptedFinished: 0,
    publishedAgain: 0,
    farAhead: 0,
    backwards: 0,
    manyCopies: 0,
    failed: 0,
    needs_review: 0,
    settled: 0,
    created: 0,
  };
  for (const scenario of fc.sample(anyScenario, fixedRun(1, 300))) {
    const { stats } = await simulate(scenario, new MemoryStore());
    totals.crashes += stats.crashes;
    totals.faults += stats.faults;
    for (
      const at of [
        "after writeAhead",
        "before record",
        "after ledger",
        "fault after record",
        "fault before mark",
      ] as const
    ) totals[at] += stats.crashedAt[at] ?? 0;
    totals.gaveUp += stats.gaveUp;
    totals.busy += stats.busy;
    totals.interruptedFinished += stats.interruptedFinished;
    totals.publishedAgain += stats.publishedAgain;
    totals.farAhead += stats.farAhead;
    totals.backwards += stats.backwards;
    totals.manyCopies += stats.manyCopies;
    for (
      const state of ["failed", "needs_review", "settled", "created"] as const
    ) {
      totals[state] += stats.finalStates[state] ?? 0;
    }
  }
  for (const [name, count] of Object.entries(totals)) {
    assert.ok(count > 0, `${name} never reached`);
  }
});

/**
 * Breaks I1: fails what should go to review. The store refuses to fail a
 * settling payment whose broadcast may have left, so this worker plays
 * the operator: to review, then review → failed with the hold voided.
 */
const failsOnDoubt: Breaker = (store) => ({
  ...bind(store),
  transition: async (id, change, options) => {
    const moved = await store.transition(id, change, options);
    if (change.to !== "needs_review") return moved;
    return await store.transition(id, {
      from: "needs_review",
      to: "failed",
      version: moved.version,
      at: change.at,
      ledger: "void",
    });
  },
});

/** Breaks I1 another way: forgets that an earlier broadcast may have left. */
const forgetful: Breaker = (store) => ({
  ...bind(store),
  getIntent: async (id) => {
    const intent = await store.getIntent(id);
    return intent && { ...intent, mayHaveSent: false };
  },
});

/** Breaks I5: ignores every lease (drops it from the writes). */
const noLease: Breaker = (store) => ({
  ...bind(store),
  transition: (id, change) => store.transition(id, change),
  beginBroadcast: (id, version, at) => store.beginBroadcast(id, version, at),
  recordBroadcast: (id, version, broadcast) =>
    store.recordBroadcast(id, version, broadcast),
});

/**
 * Breaks I5: a store that grants every lease, read through a cache that
 * does not show a send in flight (`broadcasting`). The relayer itself
 * answers busy when it sees a send begun less than a lease ago, so only
 * a reader that misses it leaves the lease as the last guard.
 */
const noLeaseBlind: Breaker = (store) => ({
  ...noLease(store),
  getIntent: blind(store).getIntent,
});

/** A reader that does not see a send in flight (`broadcasting`). */
const blind: Breaker = (store) => ({
  ...bind(store),
  getIntent: async (id) => {
    const intent = await store.getIntent(id);
    return intent === null ? null : { ...intent, broadcasting: null };
  },
});

/** Hides a voided hold from the reader (a stale ledger cache). */
const staleLedger: Breaker = (store) => ({
  ...bind(store),
  getIntent: async (id) => {
    const intent = await store.getIntent(id);
    return intent?.state === "settling" && intent.hold === "voided"
      ? { ...intent, hold: "pending" }
      : intent;
  },
});

/**
 * Breaks I6: a stale ledger cache in front of a store that skips its own
 * rule (no broadcast behind a voided hold), answering the write-ahead as
 * if it had landed.
 */
const staleAndLax: Breaker = (store) => {
  const stale = staleLedger(store);
  return {
    ...stale,
    beginBroadcast: async (id, version, at, options) => {
      const intent = await stale.getIntent(id);
      if (intent !== null && (await store.getIntent(id))?.hold === "voided") {
        return { ...intent, broadcasting: at };
      }
      return await store.beginBroadcast(id, version, at, options);
    },
  };
};

function bind(store: Store): Store {
  const methods = {} as Record<string, unknown>;
  for (const key of Object.getOwnPropertyNames(Object.getPrototypeOf(store))) {
    const value = (store as unknown as Record<string, unknown>)[key];
    if (typeof value === "function" && key !== "constructor") {
      methods[key] = value.bind(store);
    }
  }
  return methods as unknown as Store;
}

Deno.test("the invariant property catches a store that fails doubtful payments (I1)", async () => {
  assert.equal(
    await catchesAsync(invariantsHold(memoryBackend, failsOnDoubt, /^I1:/)),
    true,
  );
});

Deno.test("the invariant property catches a store that ignores a late copy's give-up marks (I4)", async () => {
  // A late copy of a message the queue gave up on, past the give-up's
  // lease: only the marks in the write ahead of its send keep it home.
  assert.equal(
    await catchesAsync(
      invariantsHold(memoryBackend, ignoringUnlessCounted, /^I4: .* sent/),
    ),
    true,
  );
});

Deno.test("a relayer that forgets an earlier send cannot fail the payment: the store refuses, and the resolution reviews it (I1)", async () => {
  await fc.assert(invariantsHold(memoryBackend, forgetful), {
    numRuns: runs(300),
  });
});

Deno.test("the invariant property catches a store that grants every lease, behind a reader blind to a send in flight (I5)", async () => {
  assert.equal(
    await catchesAsync(invariantsHold(memoryBackend, noLeaseBlind)),
    true,
  );
});

Deno.test("the invariant property catches a stale reader in front of a store that lets a broadcast start behind a voided hold (I6)", async () => {
  assert.equal(
    await catchesAsync(
      invariantsHold(memoryBackend, staleAndLax, /^I6:/),
      1000,
    ),
    true,
  );
});

Deno.test("a reader blind to a send in flight cannot send beside it: the store's lease refuses the rescue (I5)", async () => {
  await fc.assert(invariantsHold(memoryBackend, blind), {
    numRuns: runs(300),
  });
});

Deno.test("a reader that misses a voided hold cannot broadcast behind it: the store refuses the write-ahead (I6)", async () => {
  await fc.assert(invariantsHold(memoryBackend, staleLedger), {
    numRuns: runs(300),
  });
});

/**
 * Histories where the clock steps past a send's lease while it runs, and a
 * queue's give-up on another instance puts the payment in review before
 * the send's record: no crash, no store fault, so every tx the chain took
 * was recorded by a live process.
 *
 * The give-up lands mid-send only when the queue gives up at the very
 * delivery that sends, held before that delivery's record (store call 2
 * when the queue counts, 3 when the store does): drawn as anyScenario
 * draws them, a give-up that voided the hold of the second send of a
 * payment with its write-ahead on record was caught in 2 of 3,000 runs
 * (103 of 1,000 now).
 */
const lapsedSends = fc.record({
  scenario: anyScenario,
  first: fc.option(cleanThenDoubt, { freq: 2 }),
  giveUpAt: fc.oneof(fc.constant(2), fc.integer({ min: 1, max: 7 })),
  pauseAt: fc.oneof(fc.constantFrom(2, 3), fc.integer({ min: 0, max: 6 })),
}).map(({ scenario, first, giveUpAt, pauseAt }) => ({
  ...scenario,
  intents: first === null
    ? scenario.intents
    : [first, ...scenario.intents.slice(1)],
  crashes: [],
  faults: [],
  giveUps: true,
  giveUpAt,
  pauseAt,
  lapse: true,
}));

/** {@linkcode holdsOver} the lapsed-send histories. */
function lapsedSendsHold(backend: Backend, breaker?: Breaker, which?: RegExp) {
  return holdsOver(lapsedSends, backend, breaker, which);
}

for (const backend of BACKENDS) {
  Deno.test(`a give-up that puts a payment in review while its send runs voids no hold of a tx that may land: an operator's fail meets the tx on record (I7) [${backend.name}]`, async () => {
    await fc.assert(lapsedSendsHold(backend), {
      numRuns: runs(backend === postgresBackend ? 30 : 200),
    });
  });
}

/**
 * Breaks I1 mid-send: a give-up that misses the write-ahead on record (a
 * reader blind to it plans a fail after a send declared not sent) and a
 * store that takes the fail through review, voiding the hold while the
 * send may still leave.
 */
const voidsBehindSend: Breaker = (store) => ({
  ...blind(store),
  transition: async (id, change, options) => {
    if (change.from !== "settling" || change.to !== "failed") {
      return await store.transition(id, change, options);
    }
    const { ledger: _, ...review } = change;
    const moved = await store.transition(id, {
      ...review,
      to: "needs_review",
    }, options);
    return await store.transition(id, {
      from: "needs_review",
      to: "failed",
      version: moved.version,
      at: change.at,
      ledger: "void",
    });
  },
});

Deno.test("the lapsed-send property catches a give-up that voids a hold with a write-ahead on record (I1)", async () => {
  // Drawn as anyScenario draws them, with no give-up aimed at the record
  // of a send that follows one declared not sent, this was caught in 2 of
  // 3,000 runs: the property's 200 in CI rarely would.
  assert.equal(
    await catchesAsync(
      lapsedSendsHold(memoryBackend, voidsBehindSend, /^I1: .* may have left/),
      200,
    ),
    true,
  );
});
