/**
 * The seeded source of randomness the simulations, the crash test and the
 * property tests' worlds share, so a seed names one run everywhere.
 *
 * @module
 */

/** A seeded source of numbers in `[0, 1)`: mulberry32. */
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
