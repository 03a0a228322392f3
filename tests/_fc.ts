/**
 * Shared fast-check settings: a failure prints its seed and path, and
 * `FC_SEED` / `FC_PATH` / `FC_RUNS` replay or widen a run without editing a
 * test.
 *
 * @module
 */

import fc from "fast-check";

function env(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // no --allow-env: run with the defaults
  }
}

const seed = env("FC_SEED") === undefined ? undefined : Number(env("FC_SEED"));
const numRuns = env("FC_RUNS") === undefined
  ? undefined
  : Number(env("FC_RUNS"));
const path = env("FC_PATH");

fc.configureGlobal({
  ...(seed === undefined ? {} : { seed }),
  ...(path === undefined ? {} : { path }),
  ...(numRuns === undefined ? {} : { numRuns }),
});

/** `n` runs, unless `FC_RUNS` asks for another number. */
export function runs(n: number): number {
  return numRuns ?? n;
}

/**
 * The seed of every `catches` / `catchesAsync` run: fixed, so a verdict on a
 * broken twin is the same on every run, whatever `FC_SEED` replays.
 */
export const CATCHES_SEED = 1;

/**
 * Runs `property` on a deliberately broken twin and returns whether
 * fast-check found a counterexample: proof that the property can fail.
 * It runs `numRuns` cases from `CATCHES_SEED` whatever `FC_SEED`,
 * `FC_PATH` and `FC_RUNS` say (they replay or narrow the properties
 * themselves, and would narrow this proof with them).
 */
export function catches<Ts>(
  property: fc.IProperty<Ts>,
  numRuns = 300,
): boolean {
  return fc.check(property, fixedRun(CATCHES_SEED, numRuns)).failed;
}

/** The same for async properties. */
export async function catchesAsync<Ts>(
  property: fc.IAsyncProperty<Ts>,
  numRuns = 300,
): Promise<boolean> {
  return (await fc.check(property, fixedRun(CATCHES_SEED, numRuns))).failed;
}

/**
 * Settings for a run pinned to `seed` and `numRuns` (a proof, a reach
 * count, a race pinned as found), which `FC_SEED`, `FC_PATH` and
 * `FC_RUNS` leave alone: the global `path` of a replay would otherwise
 * walk this run to one case.
 */
export function fixedRun(seed: number, numRuns: number): {
  seed: number;
  numRuns: number;
  path: string;
} {
  // An empty path walks no replay: the run draws its cases afresh.
  return { seed, numRuns, path: "" };
}

/** Delivery numbers that reach the interesting cases: small, around 2^31 and 2^53, and up to 1e300. */
export const anyDelivery: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: 1, max: 40 }),
  fc.integer({ min: 1, max: 2 ** 31 + 100 }),
  fc.constantFrom(
    31,
    32,
    33,
    63,
    64,
    65,
    1e9,
    2 ** 31,
    2 ** 32,
    2 ** 53,
    1e300,
  ),
  fc.double({ min: 1, max: 1e300, noNaN: true }).map(Math.floor),
);

/** Everything a broken `random` could return. */
export const anyRandomOutput: fc.Arbitrary<number> = fc.oneof(
  fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  fc.constantFrom(
    0,
    1 - Number.EPSILON / 2,
    1,
    Number.NaN,
    -0.1,
    1.5,
    -Infinity,
    Infinity,
    -0,
  ),
  fc.double(),
);

/**
 * `fn`, whose promise counts as handled from the start, for
 * `fc.scheduler().scheduleFunction`: the scheduler attaches its handler
 * only when it releases the call, and a store may reject before that (an
 * unhandled rejection would end the test file).
 */
export function handled<A extends unknown[], R>(
  fn: (...args: A) => Promise<R>,
): (...args: A) => Promise<R> {
  const wrapped = (...args: A) => {
    const promise = fn(...args);
    promise.catch(() => {});
    return promise;
  };
  Object.defineProperty(wrapped, "name", { value: fn.name });
  return wrapped;
}
