import assert from "node:assert/strict";
import { backoff, decide, definePolicy, jitter } from "../../mod.ts";

// `backoff` takes `{ baseMs, capMs }` or a whole Policy, and is the delay
// before jitter. A part of a policy with another field took that field in
// silence: `backoff(1, { jitter: "full" })` answered 5000, never jittered,
// where `decide` given the same object jitters, and the refusal of a
// misspelt option named `jitter` among the options backoff reads.

Deno.test("backoff() refuses a part of a policy, naming the field it does not read and what to pass", () => {
  const todo =
    "backoff reads baseMs and capMs alone and applies no jitter: pass { baseMs, capMs }, or a whole Policy (definePolicy(…)), and jitter(backoff(n, policy), policy.jitter) for the delay decide waits";
  for (const field of ["jitter", "maxDeliveries", "stuckAfterMs"]) {
    const part = { baseMs: 100, [field]: field === "jitter" ? "full" : 3 };
    assert.throws(
      () => backoff(1, part as never),
      new TypeError(
        `Cannot compute backoff as "${field}" is a Policy's field, not one of its options (baseMs, capMs): ${todo}`,
      ),
    );
  }
  assert.throws(() => backoff(1, { jitter: "full" } as never), TypeError);
});

Deno.test("backoff() refuses a part of a policy that holds baseMs and capMs, and takes a whole one written out", () => {
  const todo =
    "backoff reads baseMs and capMs alone and applies no jitter: pass { baseMs, capMs }, or a whole Policy (definePolicy(…)), and jitter(backoff(n, policy), policy.jitter) for the delay decide waits";
  // decide jitters this object; backoff answered 400 for it, un-jittered.
  const part = { baseMs: 100, capMs: 1000, jitter: "full" } as const;
  assert.equal(
    decide(new Error("rpc timeout"), 3, part, { random: () => 0.25 })
      .action === "retry",
    true,
  );
  assert.throws(
    () => backoff(3, part as never),
    new TypeError(
      `Cannot compute backoff as "jitter" is a Policy's field, not one of its options (baseMs, capMs): ${todo}`,
    ),
  );
  assert.throws(
    () => backoff(3, { baseMs: 100, capMs: 1000, maxDeliveries: 3 } as never),
    TypeError,
  );
  // A whole policy, as a literal or from definePolicy, and bare options.
  const whole = {
    maxDeliveries: 8,
    baseMs: 100,
    capMs: 1000,
    jitter: "full",
    stuckAfterMs: 0,
  } as const;
  assert.equal(backoff(3, whole), 400);
  assert.equal(backoff(3, definePolicy(whole)), 400);
  assert.equal(backoff(3, { baseMs: 100, capMs: 1000 }), 400);
});

Deno.test("backoff() refuses a part of a policy that gives capMs too as a Policy's field, not a misspelling", () => {
  // capMs, a name backoff reads, ahead of the policy's field: the refusal
  // still names that field as a Policy's, never "check its spelling".
  assert.throws(
    () => backoff(1, { capMs: 1000, jitter: "full" } as never),
    (error: unknown) =>
      error instanceof TypeError &&
      error.message.startsWith(
        `Cannot compute backoff as "jitter" is a Policy's field, not one of its options (baseMs, capMs): `,
      ),
  );
  assert.equal(backoff(1, { capMs: 1000 }), 1000);
});

Deno.test("backoff() refuses a misspelt option naming baseMs and capMs alone as its options", () => {
  assert.throws(
    () => backoff(3, { base: 100 } as never),
    new TypeError(
      'Cannot compute backoff as "base" is not one of its options (baseMs, capMs): check its spelling',
    ),
  );
});

Deno.test("backoff() of a whole policy is the delay decide jitters", () => {
  const policy = definePolicy({ baseMs: 100, capMs: 1000, jitter: "full" });
  assert.equal(backoff(3, policy), 400);
  const random = () => 0.5;
  const decision = decide(new Error("rpc timeout"), 3, policy, { random });
  assert.equal(decision.action, "retry");
  assert.equal(
    decision.action === "retry" && decision.delayMs,
    jitter(backoff(3, policy), policy.jitter, random),
  );
});
