/**
 * The cost of a decision does not grow with the delivery number: the
 * doubling loop stops at the cap. Each group compares delivery 3 (the
 * baseline) with 1e9 and 1e300.
 *
 * `deno task bench backoff` or `deno bench --filter backoff`.
 *
 * @module
 */

import { backoff, decide, definePolicy, jitter } from "../mod.ts";

// A policy that still retries at delivery 1e9, so decide() computes a delay
// there instead of stopping at maxDeliveries.
const roomy = definePolicy({ maxDeliveries: Number.MAX_SAFE_INTEGER });
const error = new Error("rpc timeout");
let seed = 1;
const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
let sink = 0;

for (const delivery of [3, 1e9, 1e300]) {
  const baseline = delivery === 3;
  Deno.bench(`backoff() at delivery ${delivery}`, {
    group: "backoff()",
    baseline,
  }, () => {
    sink += backoff(delivery);
  });
  Deno.bench(`backoff jitter(backoff(), "equal") at delivery ${delivery}`, {
    group: "backoff + jitter",
    baseline,
  }, () => {
    sink += jitter(backoff(delivery), "equal", random);
  });
  Deno.bench(`backoff decide() at delivery ${delivery}`, {
    group: "backoff decide()",
    baseline,
  }, () => {
    const decision = decide(error, delivery, roomy, { random });
    sink += decision.action === "retry" ? decision.delayMs : 1;
  });
}

addEventListener("unload", () => {
  if (sink === -1) throw new Error("unreachable: keeps the results alive");
});
