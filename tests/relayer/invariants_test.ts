/**
 * I1–I6 of DESIGN §5 over generated histories: sender outcomes, crashes
 * before and after every store write, duplicate deliveries, store-counted
 * and queue-counted deliveries, atomic and ledger-first stores.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { MemoryStore, type Store } from "../../mod.ts";
import {
  type Backend,
  kvBackend,
  memoryBackend,
  postgresAvailable,
  postgresBackend,
} from "../_stores.ts";
import { catchesAsync, runs } from "../_fc.ts";
import { anyScenario, type Breaker, simulate } from "./_sim.ts";

function invariantsHold(backend: Backend, breaker?: Breaker) {
  return fc.asyncProperty(anyScenario, async (scenario) => {
    const { store, close } = await backend.open();
    try {
      const { violations } = await simulate(scenario, store, breaker);
      assert.deepEqual(violations, []);
    } finally {
      await close();
    }
  });
}

Deno.test("createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [MemoryStore]", async () => {
  await fc.assert(invariantsHold(memoryBackend), { numRuns: runs(300) });
});

Deno.test("createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [KvStore]", async () => {
  await fc.assert(invariantsHold(kvBackend), { numRuns: runs(150) });
});

Deno.test({
  name:
    "createRelayer() keeps I1–I6 over generated histories with crashes and duplicates [PostgresStore]",
  ignore: !postgresAvailable,
  async fn() {
    await fc.assert(invariantsHold(postgresBackend), { numRuns: runs(100) });
  },
});

Deno.test("the generated histories reach crashes between ledger and state, duplicates and every ending", async () => {
  const totals = {
    crashes: 0,
    busy: 0,
    interruptedFinished: 0,
    failed: 0,
    needs_review: 0,
    settled: 0,
    created: 0,
  };
  for (const scenario of fc.sample(anyScenario, { numRuns: 300, seed: 42 })) {
    const { stats } = await simulate(scenario, new MemoryStore());
    totals.crashes += stats.crashes;
    totals.busy += stats.busy;
    totals.interruptedFinished += stats.interruptedFinished;
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

/** Breaks I1: sends to failed what should go to review. */
const failsOnDoubt: Breaker = (store) => ({
  ...bind(store),
  transition: (id, change) =>
    store.transition(
      id,
      change.to === "needs_review"
        ? { ...change, to: "failed", ledger: "void" }
        : change,
    ),
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

/** Breaks I6: hides a voided hold from the reader (a stale ledger cache). */
const staleLedger: Breaker = (store) => ({
  ...bind(store),
  getIntent: async (id) => {
    const intent = await store.getIntent(id);
    return intent?.state === "settling" && intent.hold === "voided"
      ? { ...intent, hold: "pending" }
      : intent;
  },
});

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
    await catchesAsync(invariantsHold(memoryBackend, failsOnDoubt)),
    true,
  );
});

Deno.test("the invariant property catches a store that forgets an earlier send (I1)", async () => {
  assert.equal(
    await catchesAsync(
      invariantsHold(memoryBackend, forgetful),
      1000,
    ),
    true,
  );
});

Deno.test("the invariant property catches a store that grants every lease (I5)", async () => {
  assert.equal(
    await catchesAsync(invariantsHold(memoryBackend, noLease)),
    true,
  );
});

Deno.test("the invariant property catches a reader that misses a voided hold (I6)", async () => {
  assert.equal(
    await catchesAsync(
      invariantsHold(memoryBackend, staleLedger),
      1000,
    ),
    true,
  );
});
