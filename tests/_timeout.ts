/**
 * A time limit for tests. `Deno.test` has none, so a hung end-to-end test
 * (a socket that never answers, a child that never exits) would stall the
 * run until CI kills it. Wrap the test body instead:
 *
 * ```ts
 * Deno.test("the service drains on SIGTERM", timeout(20_000, async (t, signal) => {
 *   // ... signal aborts when the time is up: kill children, close servers
 * }));
 * ```
 *
 * On expiry the test fails at once with "timed out after 20s", and the
 * signal aborts so the body can release what it holds.
 *
 * @module
 */

/** The default limit: generous for a loaded 2-core machine, short for CI. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** The error a test that ran out of time fails with. */
export class TestTimeout extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms / 1000}s`);
    this.name = "TestTimeout";
  }
}

/**
 * Runs `fn`, failing with {@linkcode TestTimeout} if it has not settled
 * within `ms`; `signal` aborts at that moment.
 */
export async function withTimeout<T>(
  fn: (signal: AbortSignal) => Promise<T>,
  ms: number = DEFAULT_TIMEOUT_MS,
): Promise<T> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new TestTimeout(ms);
      reject(error); // first: a body that settles on abort must not win the race
      controller.abort(error);
    }, ms);
  });
  try {
    return await Promise.race([fn(controller.signal), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A `Deno.test` body limited to `ms`: `Deno.test(name, timeout(ms, fn))`. */
export function timeout(
  ms: number,
  fn: (t: Deno.TestContext, signal: AbortSignal) => Promise<void>,
): (t: Deno.TestContext) => Promise<void> {
  return (t) => withTimeout((signal) => fn(t, signal), ms);
}

/**
 * `promise`, or a failure saying `what` did not answer within `ms` (the
 * promise itself left to settle): a call the test expects an answer from,
 * bounded apart from the whole test's {@linkcode timeout}.
 */
export async function inTime<T>(promise: Promise<T>, ms: number, what: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${what}: no answer within ${ms}ms`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
