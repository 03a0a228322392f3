/**
 * How long this process has seen a send's write-ahead with no record, for
 * the resolve route. An intent in review whose `broadcasting` is set
 * carries the write-ahead of a send whose record never landed: that send
 * crashed, or it still runs in some instance (it outlived its lease: the
 * wall clock stepped forward, a Sender slower than the lease) and its tx
 * may leave after the operator looked the nonce up. Only the store says
 * so to every instance (another process, another isolate of a Worker, a
 * process restarted since); no clock does: the write-ahead's time is the
 * sending instance's wall clock, which is the clock that stepped. So the
 * wait is counted from when this process first saw the write-ahead, on
 * the monotonic clock: the send began before that, and ends within its
 * lease (every send must, `LEASE` ≥ 2 × `SENDER_TIMEOUT`). A process that
 * has not seen it (restarted, another isolate) waits from now: longer,
 * never shorter.
 *
 * @module
 */

/** The most write-aheads kept: one forgotten is waited for again. */
const MAX_SEEN = 10_000;

/**
 * A memory of write-aheads seen unrecorded.
 *
 * @param mono The monotonic clock, in milliseconds (for tests).
 * @returns `left(intentId, broadcasting, ms)`: how many milliseconds of a
 *   wait of `ms` from this process's first sight of that write-ahead are
 *   left (0 once it has passed); the first call for it starts the wait.
 *
 * @example The first sight starts the wait
 * ```ts
 * import { writeAheadsSeen } from "./_write_aheads.ts";
 * import assert from "node:assert/strict";
 *
 * let mono = 0;
 * const left = writeAheadsSeen(() => mono);
 * assert.equal(left("pi_0001", 1_000, 30_000), 30_000);
 * mono += 10_000;
 * assert.equal(left("pi_0001", 1_000, 30_000), 20_000);
 * mono += 20_000;
 * assert.equal(left("pi_0001", 1_000, 30_000), 0);
 * ```
 */
export function writeAheadsSeen(
  mono: () => number = () => performance.now(),
): (intentId: string, broadcasting: number | string, ms: number) => number {
  const seen = new Map<string, number>();
  // Read by its furthest reading: where it steps with the wall clock
  // (workerd reads Date.now()), a step back does not lengthen a wait.
  let furthest = -Infinity;
  return (intentId, broadcasting, ms) => {
    furthest = Math.max(furthest, mono());
    const key = `${intentId}\0${broadcasting}`;
    let first = seen.get(key);
    if (first === undefined) {
      first = furthest;
      if (seen.size >= MAX_SEEN) {
        seen.delete(seen.keys().next().value!);
      }
      seen.set(key, first);
    }
    // The time passed first, then the bound less it: (first + ms) −
    // furthest rounds in floating point (30,000.000000000004 at some
    // readings) and would ask for a millisecond, and a second, more.
    return Math.max(0, Math.ceil(ms - (furthest - first)));
  };
}
