/**
 * What the bench scripts share to measure and report: the timing loop of
 * the Deno KV rate measurements (`kv_commits.ts`, and the commit ceiling
 * of `http_bench.ts`), the median (min–max) every table prints, and the
 * failed requests of an HTTP load.
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

/** What the HTTP load counted of one run, as far as its answers go. */
export interface Answers {
  /** Responses by status code. */
  readonly statusCodeStats: Readonly<Record<string, { count: number }>>;
  /**
   * Connection errors, timeouts included (autocannon counts a timeout in
   * both `errors` and `timeouts`). Its timeout, 10 s, outlasts a run, so a
   * request that hangs until the run ends is not counted here: it shows as
   * a low req/s.
   */
  readonly errors: number;
}

/**
 * The requests of `loads` answered with a status not in `expected`, by
 * status, and the connection errors and timeouts, summed over the loads.
 *
 * @example A 401 and a timeout among the expected 503s
 * ```ts
 * import { failuresOf } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * const failures = failuresOf([
 *   { statusCodeStats: { "503": { count: 90 }, "401": { count: 1 } }, errors: 1 },
 *   { statusCodeStats: { "503": { count: 99 } }, errors: 0 },
 * ]);
 * assert.deepEqual([...failures], [
 *   ["status 401", 1],
 *   ["connection errors or timeouts", 1],
 * ]);
 * ```
 *
 * @param loads The runs of one row.
 * @param expected The statuses the row's requests are meant to get.
 * @returns Failures by kind ("status 401", "connection errors or
 * timeouts"); empty if none.
 */
export function failuresOf(
  loads: readonly Answers[],
  expected: ReadonlySet<string> = new Set(["200", "503"]),
): Map<string, number> {
  const failures = new Map<string, number>();
  const add = (kind: string, n: number) => {
    if (n > 0) failures.set(kind, (failures.get(kind) ?? 0) + n);
  };
  for (const load of loads) {
    for (const [status, { count }] of Object.entries(load.statusCodeStats)) {
      if (!expected.has(status)) add(`status ${status}`, count);
    }
    add("connection errors or timeouts", load.errors);
  }
  return failures;
}
