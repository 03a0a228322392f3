/**
 * Clocks (review): the rescue window (DESIGN §4) is counted by the queue,
 * in real time, from the first delivery's answer to the last delivery; but
 * "stuck" is counted by the clock of the instance taking the last delivery
 * from the `at` another instance wrote. With instances whose clocks differ
 * by up to `CLOCK_SKEW` (which `loadConfig` takes up to 10 minutes), a
 * window that outlasts `STUCK_AFTER` by less than the skew lets the last
 * delivery read the payment as not stuck yet: it is poisoned before its
 * rescue can run, which the start-up check exists to prevent.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import { loadConfig } from "../../webhook/config.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const ENV = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};

/**
 * Runs a job through every delivery the policy allows, the queue waiting
 * each answer's `delayMs` (the floor of equal jitter: `random` 0). The
 * first delivery runs on instance A, the rest on instance B, whose clock
 * runs `behindMs` behind A's. Returns the Sender's calls and the last
 * outcome.
 */
async function run(env: Record<string, string>, behindMs: number) {
  const config = loadConfig(env); // accepted: the start-up checks pass
  const store = new MemoryStore();
  await store.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    [JOB.intentId]: {
      // The first send's answer is lost (unknown): the payment waits
      // STUCK_AFTER, then is rescued with the same nonce.
      sends: [{ error: new Error("signer timed out") }, { txHash: "0xabc" }],
    },
  });
  const real = { t: 1_800_000_000_000 };
  const options = {
    store,
    sender,
    policy: config.policy,
    leaseMs: config.leaseMs,
    clockSkewMs: config.clockSkewMs,
    random: () => 0,
  };
  const a = createRelayer({ ...options, now: () => real.t });
  const b = createRelayer({ ...options, now: () => real.t - behindMs });
  let outcome = await a.deliver(JOB, 1);
  for (let n = 2; n <= config.policy.maxDeliveries; n++) {
    assert.equal(outcome.action, "retry");
    if (outcome.action === "retry") real.t += outcome.delayMs;
    outcome = await b.deliver(JOB, n);
  }
  return { calls: sender.calls, outcome, config };
}

function rescues(calls: readonly { method: string; replace?: boolean }[]) {
  return calls.filter((c) => c.method === "send").map((c) => c.replace);
}

Deno.test("the default policy's rescue runs at the last delivery when the instances' clocks agree", async () => {
  const { calls } = await run({ ...ENV, CLOCK_SKEW: "0" }, 0);
  assert.deepEqual(rescues(calls), [false, true]);
});

Deno.test("an instance 20s behind the one that recorded the send reads the payment as not stuck at the default policy's last delivery: poisoned before its rescue", async () => {
  // One clock as far as the start-up check knows; 20 s apart in fact.
  const { calls, outcome } = await run({ ...ENV, CLOCK_SKEW: "0" }, 20_000);
  assert.deepEqual(rescues(calls), [false]);
  assert.equal(outcome.action, "poison");
  assert.match(outcome.reason, /^no luck after 10 deliveries/);
});

Deno.test("loadConfig() refuses a CLOCK_SKEW the rescue window does not outlast with STUCK_AFTER; at the largest it takes, an instance that far behind still rescues at the last delivery", async () => {
  // 317.5 s guaranteed by the default policy: 300 s and 30 s do not fit.
  assert.throws(
    () => loadConfig({ ...ENV, CLOCK_SKEW: "30s" }),
    /rescue window is 5m17\.5s .* STUCK_AFTER is 5m0s and CLOCK_SKEW is 30s/,
  );
  assert.throws(() => loadConfig({ ...ENV, CLOCK_SKEW: "17501ms" }));
  const { calls } = await run({ ...ENV, CLOCK_SKEW: "17500ms" }, 17_500);
  assert.deepEqual(rescues(calls), [false, true]);
});
