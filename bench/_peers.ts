/**
 * What the bench files share: the floor (the delay formula and equal jitter
 * written inline, no call, no check), the two published peers set up like
 * our defaults, the two random sources, and a sink that keeps every result
 * alive.
 *
 * Every row of a group draws from the same source. cockatiel and retry call
 * `Math.random` internally and take no generator, so a row installs its
 * group's source as `Math.random` before it runs; ours and the floor are
 * handed the same function. Every row pays that one store, the floor
 * included, so the ratios are not skewed by it.
 *
 * cockatiel and retry are bench-only dependencies: the bench files import
 * them, the module (`mod.ts` and everything it exports) never does.
 *
 * @module
 */

import { halfJitterGenerator } from "cockatiel";
import retry from "retry";

/** Our default base delay, given to every side. */
export const BASE_MS = 5000;
/** Our default cap, given to every side. */
export const CAP_MS = 120_000;

// A 32-bit LCG (Numerical Recipes' constants). Its state lives in a typed
// array: a module-level `let` holding a number beyond the small-integer range
// is re-boxed on every write, and that allocation would cost more than the
// formula under test.
const state = new Uint32Array([1]);
function lcg(): number {
  state[0] = Math.imul(state[0]!, 1664525) + 1013904223;
  return state[0]! / 4294967296;
}

/** A random source, and the words that name it in a group's title. */
export interface Source {
  /** How the group's title names it. */
  readonly label: string;
  /** The generator every row of the group draws from. */
  readonly random: () => number;
}

/** The engine's `Math.random` for every side, then one injected LCG for every side. */
export const SOURCES: readonly Source[] = [
  { label: "Math.random", random: Math.random },
  { label: "one injected LCG", random: lcg },
];

// Every result is added here and checked at unload, so none is dead code.
const sink = new Float64Array(1);

/** Adds a result to the sink, so the engine cannot drop the work. */
export function keep(value: number): void {
  sink[0] = sink[0]! + value;
}

addEventListener("unload", () => {
  if (!Number.isFinite(sink[0])) {
    throw new Error("unreachable: keeps every result alive");
  }
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

/**
 * Registers the floor (the group's baseline) and the two peers in `group`,
 * at the delivery number `deliveries[index]`. The number is read from the
 * array on every call, so the engine cannot fold it into a constant.
 */
export function floorAndPeers(
  group: string,
  deliveries: number[],
  index: number,
  source: Source,
): void {
  const { random } = source;
  const shown = deliveries[index]!;
  // Every caller registers the floor at delivery 3 only: the groups that
  // go on past the cap (`backoff_bench.ts`) take ours at delivery 3
  // as their baseline, not this floor.
  Deno.bench(`floor: min(cap, base*2**(n-1)) + equal jitter, n=${shown}`, {
    group,
    baseline: true,
  }, () => {
    Math.random = random;
    const n = deliveries[index]!;
    const d = Math.min(CAP_MS, BASE_MS * 2 ** (n - 1));
    const half = Math.floor(d / 2);
    keep(half + Math.floor(random() * (d - half + 1)));
  });
  Deno.bench(`cockatiel: halfJitterGenerator(n-1, options)`, {
    group,
  }, () => {
    Math.random = random;
    const [delayMs] = halfJitterGenerator(
      deliveries[index]! - 1,
      cockatielOptions,
    );
    keep(delayMs);
  });
  Deno.bench(`retry: createTimeout(n-1, { randomize: true })`, {
    group,
  }, () => {
    Math.random = random;
    keep(retry.createTimeout(deliveries[index]! - 1, retryOptions));
  });
}
