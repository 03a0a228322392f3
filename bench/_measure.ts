/**
 * What the bench scripts share to measure and report: the timing loop of
 * the Deno KV rate measurements (`kv_commits.ts`, and the commit ceiling
 * of `http_bench.ts`), and the median (min–max) every table prints.
 *
 * @module
 */

/**
 * Runs `op` `inFlight` at a time for `ms` (2 s by default); returns the
 * units (commits, writes, reads) it reports done, per second. Each worker
 * passes its number and its own count of calls, for keys that never
 * collide. An operation started before the time is up counts: every one
 * has finished when the clock is read.
 *
 * @param inFlight How many operations run at once.
 * @param op One operation; resolves to the units it did.
 * @param ms How long to run.
 * @returns Units per second.
 */
export async function perSecond(
  inFlight: number,
  op: (worker: number, i: number) => Promise<number>,
  ms = 2000,
): Promise<number> {
  let units = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: inFlight }, async (_, worker) => {
      for (let i = 0; performance.now() < end; i++) {
        // Awaited first: `units += await op()` would read `units` before
        // the wait and lose what other workers added meanwhile.
        const done = await op(worker, i);
        units += done;
      }
    }),
  );
  return units / ((performance.now() - start) / 1000);
}

/**
 * The median of `values`, the mean of the middle two for an even count.
 *
 * @param values Figures of repeated runs; at least one.
 * @returns Their median.
 */
export function median(values: readonly number[]): number {
  const sorted = values.toSorted((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? sorted[mid]!
    : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * `median (min–max)` of `values`, each written with `format` (the ends with
 * `ends`, if given); `–` for none.
 *
 * @param values Figures of repeated runs.
 * @param format How to write the median (and the ends).
 * @param ends How to write the min and the max, if not as the median.
 * @returns The cell's text.
 */
export function spread(
  values: readonly number[],
  format: (value: number) => string,
  ends: (value: number) => string = format,
): string {
  if (values.length === 0) return "–";
  return `${format(median(values))} (${ends(Math.min(...values))}–${
    ends(Math.max(...values))
  })`;
}
