/**
 * Backoff against the floor and the peers, and flat in the delivery number.
 *
 * - "backoff at delivery 3, against the floor and the peers": the floor
 *   (the formula and equal jitter written inline, the baseline), cockatiel's
 *   `halfJitterGenerator`, retry's `createTimeout`, and ours: `backoff(n)`,
 *   `jitter(backoff(n), "equal")` and `decide(err, n)`. Every side draws
 *   from `Math.random`.
 * - "… flat from delivery 3 to 1e300": each of ours at delivery 3 (the
 *   baseline), 1e9 and 1e300. The doubling loop stops at the cap, so the
 *   cost should not grow with the delivery number.
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

// A policy that still retries at delivery 1e300, so decide() computes a
// delay there instead of stopping at maxDeliveries.
const roomy = definePolicy({ maxDeliveries: Number.MAX_SAFE_INTEGER });
const { random } = injected;
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
  Deno.bench(`decide(err, n, roomy, { random }) at delivery ${n}`, {
    group: "decide(), flat from delivery 3 to 1e300",
    baseline,
  }, () => {
    const d = decide(error, deliveries[i]!, roomy, { random });
    keep(d.action === "retry" ? d.delayMs : 1);
  });
}
