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
 * @example Two workers, each unit a resolved promise, for 20 ms
 * ```ts
 * import { perSecond } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * const keys = new Set<string>();
 * const rate = await perSecond(2, async (worker, i) => {
 *   keys.add(`${worker}/${i}`);
 *   return await Promise.resolve(1);
 * }, 20);
 * assert.ok(rate > 0);
 * // Every call had a key of its own.
 * assert.ok(keys.size > 2);
 * ```
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
 * @example
 * ```ts
 * import { median } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(median([3, 1, 2]), 2);
 * assert.equal(median([4, 1, 3, 2]), 2.5);
 * ```
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
 * @example
 * ```ts
 * import { spread } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * const pct = (v: number) => `${Math.round(v * 100)}%`;
 * assert.equal(spread([0.25, 0.2, 0.3], pct), "25% (20%–30%)");
 * assert.equal(spread([], pct), "–");
 * ```
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

/**
 * Reads a bench script's command line with `read`. What it throws (an
 * unknown flag, a value out of range) is printed as one line naming the
 * script, without a stack, and the script exits with code 2.
 *
 * @example
 * ```ts
 * import { readArgs, wholeFlag } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * const runs = readArgs("bench:x", () => wholeFlag("runs", "3"));
 * assert.equal(runs, 3);
 * ```
 *
 * @param script How the user runs the script (`bench:http`).
 * @param read Parses and checks `Deno.args`.
 * @param usage The flags it takes (`[--runs 3] [--kv-dir DIR]`), printed
 *   after a refusal as `usage: deno task <script> <usage>`: an unknown
 *   flag (`--help`) said only that it was unknown.
 * @returns What `read` returned.
 */
export function readArgs<T>(script: string, read: () => T, usage?: string): T {
  try {
    return read();
  } catch (error) {
    // deno-lint-ignore no-console
    console.error(
      `${script}: ${error instanceof Error ? error.message : String(error)}${
        usage === undefined ? "" : `\nusage: deno task ${script} ${usage}`
      }`,
    );
    Deno.exit(2);
  }
}

/**
 * Refuses a bad command-line flag in one line (`script: message`) and
 * exits 2, as {@linkcode readArgs} does, with no stack trace.
 *
 * @example
 * ```ts ignore
 * import { refuseArgs } from "./_measure.ts";
 *
 * refuseArgs("bench:x", "--runs must be a whole number of at least 1");
 * ```
 *
 * @param script How the user runs the script (`bench:http`).
 * @param message What was wrong and what to give instead.
 */
export function refuseArgs(script: string, message: string): never {
  // deno-lint-ignore no-console
  console.error(`${script}: ${message}`);
  Deno.exit(2);
}

/**
 * A command-line flag that must list, comma-separated, names among
 * `allowed`.
 *
 * @example
 * ```ts
 * import { listFlag } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(listFlag("only", "a,c", ["a", "b", "c"]), ["a", "c"]);
 * assert.throws(() => listFlag("only", "a,x", ["a", "b"]), /'--only' must list a, b/);
 * ```
 *
 * @param name The flag's name, without its dashes.
 * @param value What the command line gave.
 * @param allowed The names it may list.
 * @returns The names listed, in their order.
 * @throws {RangeError} If a name listed is not allowed.
 */
export function listFlag<T extends string>(
  name: string,
  value: string,
  allowed: readonly T[],
): T[] {
  const names = value.split(",");
  for (const listed of names) {
    if (!(allowed as readonly string[]).includes(listed)) {
      throw new RangeError(
        `Cannot run as '--${name}' must list ${
          allowed.join(", ")
        } (any of them, comma-separated): current value is ${value}`,
      );
    }
  }
  return names as T[];
}

/**
 * A command-line flag that must be a whole number >= 1, read as one.
 *
 * @example
 * ```ts
 * import { wholeFlag } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(wholeFlag("runs", "3"), 3);
 * assert.throws(() => wholeFlag("runs", "0"), /'--runs' must be an integer >= 1/);
 * ```
 *
 * @param name The flag's name, without its dashes.
 * @param value What the command line gave.
 * @returns The number.
 * @throws {RangeError} If `value` is not a whole number >= 1.
 */
export function wholeFlag(name: string, value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isSafeInteger(n) || n < 1) {
    throw new RangeError(
      `Cannot run as '--${name}' must be an integer >= 1: current value is ${value}`,
    );
  }
  return n;
}

/** What the HTTP load counted of one run, as far as its answers go. */
export interface Answers {
  /** Responses by status code. */
  readonly statusCodeStats: Readonly<Record<string, { count: number }>>;
  /**
   * Responses of the expected status whose body lacked the expected text:
   * how many, and the first one's body (its start).
   */
  readonly wrongBodies: { readonly count: number; readonly first: string };
  /**
   * Connection errors, timeouts included (autocannon counts a timeout in
   * both `errors` and `timeouts`). Its timeout, 10 s, outlasts a run, so a
   * request that hangs until the run ends is not counted here: it shows as
   * a low req/s.
   */
  readonly errors: number;
}

/**
 * The requests of `loads` that did not get the row's answer, by kind,
 * summed over the loads: another status, the expected status with a body
 * that is not the row's (the app's own 503 when its store fails, say, or a
 * retry for an intent that is not there), a connection error or a timeout.
 *
 * @example A 401, a store failure and a timeout among the expected 503s
 * ```ts
 * import { failuresOf } from "./_measure.ts";
 * import assert from "node:assert/strict";
 *
 * const failures = failuresOf([
 *   {
 *     statusCodeStats: { "503": { count: 90 }, "401": { count: 1 } },
 *     wrongBodies: { count: 2, first: '{"type":"urn:relayer:problem:delivery-failed"}' },
 *     errors: 1,
 *   },
 *   {
 *     statusCodeStats: { "503": { count: 99 } },
 *     wrongBodies: { count: 0, first: "" },
 *     errors: 0,
 *   },
 * ], "503");
 * assert.deepEqual([...failures], [
 *   ["status 401", 1],
 *   ['503 with another body (the first: {"type":"urn:relayer:problem:delivery-failed"})', 2],
 *   ["connection errors or timeouts", 1],
 * ]);
 * ```
 *
 * @param loads The runs of one row.
 * @param status The status the row's requests are meant to get.
 * @returns Failures by kind ("status 401", "503 with another body (the
 * first: …)", "connection errors or timeouts"); empty if none.
 */
export function failuresOf(
  loads: readonly Answers[],
  status: string,
): Map<string, number> {
  const failures = new Map<string, number>();
  const add = (kind: string, n: number) => {
    if (n > 0) failures.set(kind, (failures.get(kind) ?? 0) + n);
  };
  // The first run's example names the kind, so the runs' counts add up.
  let wrongBody: string | undefined;
  for (const load of loads) {
    for (const [code, { count }] of Object.entries(load.statusCodeStats)) {
      if (code !== status) add(`status ${code}`, count);
    }
    const { count, first } = load.wrongBodies;
    if (count > 0) {
      wrongBody ??= `${status} with another body (the first: ${first})`;
      add(wrongBody, count);
    }
    add("connection errors or timeouts", load.errors);
  }
  return failures;
}
