/**
 * `decide` on every documented call form, against the floor (the formula
 * and equal jitter written inline) and two published peers, in one group
 * per random source, at delivery 3:
 *
 * - the floor: `min(cap, base × 2^(n−1))` plus inline equal jitter, the
 *   baseline (1.00×);
 * - cockatiel's `halfJitterGenerator` (the same equal-jitter idea) and
 *   retry's `createTimeout` (the engine behind p-retry), set up like our
 *   defaults;
 * - ours: `backoff(n)`, `jitter(backoff(n), "equal")`, then `decide` with no
 *   policy, with a literal partial policy written in the call (a fresh
 *   object every time, as users write it), with `DEFAULT_POLICY` and with a
 *   `definePolicy` result, and the literal `{ maxDeliveries: 3 }`, which at
 *   delivery 3 takes the exhausted branch.
 *
 * The first group gives every side `Math.random`, the second one injected
 * LCG (see `_peers.ts`). The delivery number is read from a mutable array
 * on every call, so nothing folds into a constant.
 *
 * `deno bench bench/peers_bench.ts`; `deno task bench:forms` also runs it
 * filtered to each form alone (see `bench/decide_forms.ts`).
 *
 * @module
 */

import {
  backoff,
  decide,
  DEFAULT_POLICY,
  definePolicy,
  jitter,
} from "../mod.ts";
import { floorAndPeers, keep, SOURCES } from "./_peers.ts";

const deliveries = [3];
const defined = definePolicy({ maxDeliveries: 5 });
// Built once: capturing a stack costs far more than deciding, and the
// thrower pays it, not decide().
const error = new Error("rpc timeout");

for (const { label, random } of SOURCES) {
  const group = `delivery 3, ${label} for every side`;
  // With Math.random, ours is called exactly as documented (no options);
  // with the LCG, ours is handed it.
  const options = label === "Math.random" ? undefined : { random };
  floorAndPeers(group, deliveries, 0, { label, random });
  Deno.bench(`ours: backoff(n)`, { group }, () => {
    Math.random = random;
    keep(backoff(deliveries[0]!));
  });
  Deno.bench(`ours: jitter(backoff(n), "equal")`, { group }, () => {
    Math.random = random;
    keep(jitter(backoff(deliveries[0]!), "equal", random));
  });
  Deno.bench(`ours: decide(err, n) (no policy)`, { group }, () => {
    Math.random = random;
    const d = decide(error, deliveries[0]!, undefined, options);
    keep(d.action === "retry" ? d.delayMs : 1);
  });
  Deno.bench(`ours: decide(err, n, { maxDeliveries: 5 })`, { group }, () => {
    Math.random = random;
    const d = decide(error, deliveries[0]!, { maxDeliveries: 5 }, options);
    keep(d.action === "retry" ? d.delayMs : 1);
  });
  Deno.bench(`ours: decide(err, n, DEFAULT_POLICY)`, { group }, () => {
    Math.random = random;
    const d = decide(error, deliveries[0]!, DEFAULT_POLICY, options);
    keep(d.action === "retry" ? d.delayMs : 1);
  });
  Deno.bench(`ours: decide(err, n, definePolicy(…))`, { group }, () => {
    Math.random = random;
    const d = decide(error, deliveries[0]!, defined, options);
    keep(d.action === "retry" ? d.delayMs : 1);
  });
  Deno.bench(`ours: decide(err, n, { maxDeliveries: 3 }) (exhausted)`, {
    group,
  }, () => {
    Math.random = random;
    const d = decide(error, deliveries[0]!, { maxDeliveries: 3 }, options);
    keep(d.action === "retry" ? d.delayMs : d.reason.length);
  });
}
