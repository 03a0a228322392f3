/**
 * How our policy compares with the floor (the formula written inline) and
 * with two published peers, at deliveries 3, 30 and 1e9. Each group has the
 * inline formula as its baseline, so the summary's ratios read "how far
 * above the physical floor", and the same group at 3, 30 and 1e9 shows
 * whether the cost grows with the delivery number.
 *
 * - "delay at delivery N (equal jitter)": what does one jittered delay
 *   cost? The inline `min(cap, base × 2^(n−1))` plus inline equal jitter;
 *   ours, `jitter(backoff(n), "equal", random)`; cockatiel's
 *   `halfJitterGenerator` called once as a stateless generator; retry's
 *   `createTimeout` (the engine behind p-retry); and cockatiel's
 *   `ExponentialBackoff` stepped with `.next()` the way its `RetryPolicy`
 *   steps it (at 3 and 30 only).
 * - "decision at delivery N": what does a whole decision cost? The same
 *   inline baseline; ours, `decide()` on a plain error; and `decide()` on an
 *   error wrapped three levels deep, which prices the cause-chain walk.
 *
 * cockatiel and retry are bench-only dependencies: this file imports them,
 * the module (`mod.ts` and everything it exports) never does.
 *
 * `deno bench bench/peers_bench.ts`
 *
 * @module
 */

import { ExponentialBackoff, halfJitterGenerator } from "cockatiel";
import retry from "retry";
import { backoff, decide, definePolicy, jitter } from "../mod.ts";

const BASE_MS = 5000;
const CAP_MS = 120_000;
const DELIVERIES = [3, 30, 1e9] as const;

// One deterministic source for everything that accepts one: a 32-bit LCG
// (Numerical Recipes' constants). Its state lives in a typed array, as the
// sink below does: a module-level `let` holding a number beyond the small
// integer range is re-boxed on every write, and that allocation would cost
// more than the formula under test. cockatiel and retry call Math.random
// internally and cannot be handed a source: that is part of the point (ours
// is injectable, so tests and replays are exact), and it means their rows
// pay for Math.random rather than for this LCG.
const state = new Uint32Array([1]);
const random = (): number => {
  state[0] = Math.imul(state[0]!, 1664525) + 1013904223;
  return state[0]! / 4294967296;
};

// A policy that still retries at delivery 1e9, so decide() computes a delay
// there instead of stopping at maxDeliveries.
const roomy = definePolicy({ maxDeliveries: Number.MAX_SAFE_INTEGER });
// Errors are built once: capturing a stack costs far more than deciding,
// and the thrower pays it, not decide().
const plain = new Error("rpc timeout");
const wrapped = new Error("a", {
  cause: new Error("b", { cause: new Error("c") }),
});

// cockatiel's generator options, matching our defaults: 5 s doubling to
// 2 min. (Its generators ignore `exponent` and always double.)
const cockatielOptions = {
  generator: halfJitterGenerator,
  initialDelay: BASE_MS,
  maxDelay: CAP_MS,
  exponent: 2,
};
// retry's options, matching our defaults. Its `randomize` multiplies the
// delay by a factor in [1, 2) before the cap: a different jitter shape (up
// from d, not down to d/2), so its row prices a similar idea, not the same
// distribution.
const retryOptions = {
  factor: 2,
  minTimeout: BASE_MS,
  maxTimeout: CAP_MS,
  randomize: true,
};

// Every result is added here and checked at unload, so none is dead code.
const sink = new Float64Array(1);
function keep(value: number): void {
  sink[0] = sink[0]! + value;
}

for (const n of DELIVERIES) {
  // The physical floor: the formula and equal jitter written inline, no
  // call, no check, no clamp. One closure serves both groups' baselines.
  // At 30 and 1e9, `2 ** (n - 1)` is a call to pow (not a multiply), so
  // ours, which doubles at most log2(cap / base) times, can beat it there.
  const floor = () => {
    const d = Math.min(CAP_MS, BASE_MS * 2 ** (n - 1));
    const half = Math.floor(d / 2);
    keep(half + Math.floor(random() * (d - half + 1)));
  };
  const delay = `delay at delivery ${n} (equal jitter)`;
  Deno.bench(`inline: min(cap, base*2**(n-1)) + equal jitter at ${n}`, {
    group: delay,
    baseline: true,
  }, floor);
  Deno.bench(`ours: jitter(backoff(${n}), "equal", random)`, {
    group: delay,
  }, () => {
    keep(jitter(backoff(n), "equal", random));
  });
  Deno.bench(`cockatiel: halfJitterGenerator(${n - 1}, options)`, {
    group: delay,
  }, () => {
    const [delayMs] = halfJitterGenerator(n - 1, cockatielOptions);
    keep(delayMs);
  });
  Deno.bench(`retry: createTimeout(${n - 1}, { randomize: true })`, {
    group: delay,
  }, () => {
    keep(retry.createTimeout(n - 1, retryOptions));
  });
  // Stepping is how cockatiel's RetryPolicy reaches delivery n: the
  // factory's next() for the first failure, then one next() per later one,
  // each allocating a new state. At 1e9 that is 1e9 steps per delay: it
  // cannot be stepped there, so the row exists at 3 and 30 only (an
  // ignored bench would not even be listed).
  if (n <= 30) {
    Deno.bench({
      name: `cockatiel: ExponentialBackoff .next() x${n} (stepped; not at 1e9)`,
      group: delay,
      fn: () => {
        let step = new ExponentialBackoff({
          generator: halfJitterGenerator,
          initialDelay: BASE_MS,
          maxDelay: CAP_MS,
        }).next();
        for (let i = 1; i < n; i++) step = step.next(undefined);
        keep(step.duration);
      },
    });
  }

  const decision = `decision at delivery ${n}`;
  Deno.bench(`inline: min(cap, base*2**(n-1)) + equal jitter, decision ${n}`, {
    group: decision,
    baseline: true,
  }, floor);
  Deno.bench(`ours: decide(plain error, ${n}, roomy, { random })`, {
    group: decision,
  }, () => {
    const d = decide(plain, n, roomy, { random });
    keep(d.action === "retry" ? d.delayMs : 1);
  });
  Deno.bench(`ours: decide(error wrapped 3 deep, ${n}, roomy, { random })`, {
    group: decision,
  }, () => {
    const d = decide(wrapped, n, roomy, { random });
    keep(d.action === "retry" ? d.delayMs : 1);
  });
}

addEventListener("unload", () => {
  if (!Number.isFinite(sink[0])) {
    throw new Error("unreachable: keeps every result alive");
  }
});
