/**
 * The seeded source of randomness the simulations, the crash test and the
 * property tests' worlds share, so a seed names one run everywhere.
 *
 * @module
 */

/**
 * A seeded source of numbers in `[0, 1)`: mulberry32.
 *
 * @param seed Any 32-bit integer; the same seed gives the same sequence.
 * @returns The generator.
 *
 * @example Same seed, same numbers
 * ```ts
 * import { mulberry32 } from "./prng.ts";
 * import assert from "node:assert/strict";
 *
 * const a = mulberry32(7);
 * const b = mulberry32(7);
 * assert.equal(a(), b());
 * assert.ok(a() < 1);
 * ```
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
