import assert from "node:assert/strict";
import { backoff, decide, definePolicy } from "../../mod.ts";

// `definePolicy` refuses a field it does not know (`maxDeliverys`), and every
// constructor an option it does not read. `backoff`'s and `decide`'s own
// options took any name in silence: `backoff(3, { base: 100 })` answered
// 20000, the default base's delay, and `decide(e, 1, {}, { rand })` drew
// from `Math.random`, so a replay meant to be exact was not.

Deno.test("backoff() refuses an option it does not read, naming it and the ones it reads", () => {
  assert.throws(
    () => backoff(3, { base: 100 } as never),
    new TypeError(
      'Cannot compute backoff as "base" is not one of its options (baseMs, capMs): check its spelling',
    ),
  );
  assert.throws(
    () => backoff(1, null as never),
    new TypeError(
      "Cannot compute backoff as its options must be an object such as { baseMs, capMs } or a Policy: current value is null",
    ),
  );
  assert.throws(() => backoff(1, "fast" as never), TypeError);
  // One given and the other misspelt: the default stands in for it.
  assert.throws(
    () => backoff(3, { baseMs: 100, cap: 200 } as never),
    new TypeError(
      'Cannot compute backoff as "cap" is not one of its options (baseMs, capMs): check its spelling',
    ),
  );
  // What it reads, it still takes, and leaving options out is the defaults.
  assert.equal(backoff(3, { baseMs: 100 }), 400);
  assert.equal(backoff(3, { capMs: 10_000 }), 10_000);
  assert.equal(backoff(3, {}), 20_000);
  assert.equal(backoff(3, undefined), 20_000);
  // A whole policy is options too: its baseMs and capMs are read
  // (tests/policy/backoff_policy_test.ts).
  assert.equal(backoff(3, definePolicy({ baseMs: 100 })), 400);
});

Deno.test("decide() refuses an option it does not read, naming it and the ones it reads", () => {
  const error = new Error("rpc timeout");
  assert.throws(
    () => decide(error, 1, {}, { rand: () => 0 } as never),
    new TypeError(
      'Cannot decide as "rand" is not one of its options (random): check its spelling',
    ),
  );
  assert.throws(() => decide(error, 1, {}, 0.5 as never), TypeError);
  assert.deepEqual(decide(error, 1, {}, { random: () => 0 }), {
    action: "retry",
    delayMs: 2500,
    reason: "rpc timeout",
  });
  assert.equal(decide(error, 1, {}, {}).action, "retry");
  assert.equal(decide(error, 1, {}, undefined).action, "retry");
});
