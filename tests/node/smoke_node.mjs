// The core on Node, with Node's own test runner: `node --test` over the
// bundle of mod.ts that `deno task node-check` builds (RELAYER_BUNDLE), on
// each Node it runs.
import { test } from "node:test";
import assert from "node:assert/strict";

const relayer = await import(process.env.RELAYER_BUNDLE);
const {
  backoff,
  createRelayer,
  decide,
  describePolicy,
  definePolicy,
  formatDuration,
  isNotSent,
  isPoison,
  jitter,
  MemoryStore,
  notSent,
  poison,
  rescueWindow,
  ScriptedSender,
  DEFAULT_POLICY,
} = relayer;

test("backoff() doubles from 5s to the 2m cap, even at delivery 1e300", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => backoff(n)), [
    5000,
    10000,
    20000,
    40000,
    80000,
    120000,
    120000,
  ]);
  assert.equal(backoff(1e300), 120000);
  assert.throws(() => backoff(0), RangeError);
});

test("jitter() keeps equal jitter in [d/2, d] for any random output", () => {
  for (const r of [0, 0.5, 1 - Number.EPSILON / 2, 1, Number.NaN, -0.1]) {
    const delay = jitter(5000, "equal", () => r);
    assert.ok(delay >= 2500 && delay <= 5000, String(r));
  }
});

test("decide() lets a declared poison win through the cause chain", () => {
  const error = new Error("send", {
    cause: new AggregateError([poison(notSent(new Error("bad chain id")))]),
  });
  assert.equal(isPoison(error), true);
  assert.equal(isNotSent(error), true);
  assert.deepEqual(decide(error, 1), {
    action: "poison",
    cause: "declared",
    reason: "retrying will not help",
  });
  assert.deepEqual(
    decide(new Error("timeout"), 3, { maxDeliveries: 3 }).reason,
    "no luck after 3 deliveries",
  );
});

test("describePolicy(), formatDuration() and rescueWindow() agree with Deno", () => {
  assert.equal(
    describePolicy(definePolicy({ maxDeliveries: 3, jitter: "none" })),
    "at most 3 deliveries; back off 5s doubling, capped at 2m0s",
  );
  assert.equal(formatDuration(90500), "1m30.5s");
  assert.equal(rescueWindow(DEFAULT_POLICY), 317500);
});

test("createRelayer() replays the seed's three payments to the golden end states", async () => {
  let clock = 0;
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({ id: "pi_0003", state: "created" });
  const sender = new ScriptedSender({
    pi_0001: {
      sends: [{ error: poison(notSent(new Error("chain id mismatch"))) }],
    },
    pi_0002: { sends: [{ error: new Error("rpc: connection refused") }] },
  });
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 3, jitter: "none" },
    now: () => clock,
    random: () => 0,
  });
  for (const intentId of ["pi_0001", "pi_0002", "pi_0003"]) {
    for (let delivery = 1;; delivery++) {
      const outcome = await relayer.deliver(
        { intentId, kind: "settle" },
        delivery,
      );
      if (outcome.action !== "retry") break;
      clock += outcome.delayMs;
    }
  }
  const end = [];
  for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
    const intent = await store.getIntent(id);
    end.push(`${id} ${intent.state} ${intent.hold ?? "-"}`);
  }
  assert.deepEqual(end, [
    "pi_0001 failed voided",
    "pi_0002 needs_review pending",
    "pi_0003 created -",
  ]);
});
