/**
 * The timing loop of the Deno KV rate measurements (`kv_commits.ts`, and
 * the commit ceiling of `http_bench.ts`).
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
