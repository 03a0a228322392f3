/**
 * Backoff against the floor and the peers, and flat in the delivery number.
 *
 * - "backoff at delivery 3, against the floor and the peers": the floor
 *   (the formula and equal jitter written inline, the baseline), cockatiel's
 *   `halfJitterGenerator`, retry's `createTimeout`, and ours: `backoff(n)`,
 *   `jitter(backoff(n), "equal")` and `decide(err, n)`. Every side draws
 *   from `Math.random`.
 * - "… flat from delivery 3 to …": each of ours at delivery 3 (the
 *   baseline) and far past the cap: `backoff` and `jitter` at 1e9 and
 *   1e300, `decide` at 1e9 and 2^53 − 2. The doubling loop stops at the
 *   cap, so the cost should not grow with the delivery number. `decide`
 *   stops short of 1e300: `maxDeliveries` is at most 2^53 − 1, and a
 *   delivery at or past it is exhausted (a poison, no delay), so the row
 *   would price another branch under the same label. The rows of that
 *   group are checked to retry when this file loads.
 *
 * Delivery numbers are read from a mutable array on every call, so none
 * folds into a constant.
 *
 * `deno bench backoff` (the root file `backoff` imports this one), or
 * `deno task bench backoff`, or `deno bench bench/backoff_bench.ts`.
 *
 * @module
 */

import { backoff, decide, definePolicy, jitter } from "../mod.ts";
import { floorAndPeers, keep, SOURCES } from "./_peers.ts";

const deliveries = [3, 1e9, 1e300];
/**
 * The most deliveries a policy allows (`maxDeliveries` is a safe
 * integer), so that `decide` still retries far past the cap.
 *
 * @example
 * ```ts
 * import { ROOMY } from "./backoff_bench.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(ROOMY.maxDeliveries, Number.MAX_SAFE_INTEGER);
 * ```
 */
export const ROOMY = definePolicy({ maxDeliveries: Number.MAX_SAFE_INTEGER });
/**
 * The deliveries of the `decide` group: 3 (the baseline), 1e9, and the
 * last one {@linkcode ROOMY} retries at (its `maxDeliveries` is exhausted).
 *
 * @example Each one a delay, none a poison
 * ```ts
 * import { DECIDE_DELIVERIES, ROOMY } from "./backoff_bench.ts";
 * import { decide } from "../mod.ts";
 * import assert from "node:assert/strict";
 *
 * for (const n of DECIDE_DELIVERIES) {
 *   assert.equal(decide(new Error("x"), n, ROOMY).action, "retry");
 * }
 * ```
 */
export const DECIDE_DELIVERIES: number[] = [
  3,
  1e9,
  Number.MAX_SAFE_INTEGER - 1,
];
const error = new Error("rpc timeout");
const [mathRandom, injected] = SOURCES as [
  (typeof SOURCES)[0],
  (typeof SOURCES)[0],
];

const peers = "backoff at delivery 3, against the floor and the peers";
floorAndPeers(peers, deliveries, 0, mathRandom);
Deno.bench("ours: backoff(n)", { group: peers }, () => {
  Math.random = mathRandom.random;
  keep(backoff(deliveries[0]!));
});
Deno.bench('ours: jitter(backoff(n), "equal")', { group: peers }, () => {
  Math.random = mathRandom.random;
  keep(jitter(backoff(deliveries[0]!), "equal", Math.random));
});
Deno.bench("ours: decide(err, n)", { group: peers }, () => {
  Math.random = mathRandom.random;
  const d = decide(error, deliveries[0]!);
  keep(d.action === "retry" ? d.delayMs : 1);
});

const { random } = injected;
// A row labelled with a delay must compute one: an exhausted decision
// (a poison) would be timed under the same label.
for (const n of DECIDE_DELIVERIES) {
  const d = decide(error, n, ROOMY, { random });
  if (d.action !== "retry") {
    throw new Error(
      `decide(err, ${n}, ROOMY) does not retry (${d.reason}): the row 'decide(err, n, roomy, { random }) at delivery ${n}' would not time a delay`,
    );
  }
}
for (let i = 0; i < deliveries.length; i++) {
  const baseline = i === 0;
  const n = deliveries[i]!;
  Deno.bench(`backoff(n) at delivery ${n}`, {
    group: "backoff(n), flat from delivery 3 to 1e300",
    baseline,
  }, () => {
    keep(backoff(deliveries[i]!));
  });
  Deno.bench(`jitter(backoff(n), "equal") at delivery ${n}`, {
    group: 'jitter(backoff(n), "equal"), flat from delivery 3 to 1e300',
    baseline,
  }, () => {
    keep(jitter(backoff(deliveries[i]!), "equal", random));
  });
  const m = DECIDE_DELIVERIES[i]!;
  Deno.bench(`decide(err, n, roomy, { random }) at delivery ${m}`, {
    group: "decide(), flat from delivery 3 to 2^53 - 2",
    baseline,
  }, () => {
    const d = decide(error, DECIDE_DELIVERIES[i]!, ROOMY, { random });
    keep(d.action === "retry" ? d.delayMs : 1);
  });
}
