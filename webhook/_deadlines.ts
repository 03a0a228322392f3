/**
 * The deadlines of request body reads (`bodyTimeoutMs`): one timer for
 * all the reads an app has in flight, not one per read. A timer per read
 * cost the app about a fifth of its read path's throughput over HTTP on
 * Deno.serve (`deno task bench:http --only b`, 3 alternated rounds), where
 * the reads are most often done in a millisecond and the timer is only
 * cleared. On Cloudflare Workers a timer is the request's own and does not
 * outlive it, so there each read keeps its own.
 *
 * @module
 */

import { onWorkers } from "../store/_on_workers.ts";

/** A read that is told, by `late`, once its deadline passed. */
export type TimedRead<T> = (late: () => Error | undefined) => Promise<T>;

/**
 * Runs body reads against one deadline: `within(read)` settles as `read`
 * does, or rejects with `expired()`'s error once `timeoutMs` passed (at
 * most a quarter more: the shared timer ticks every quarter of it), and
 * `late()` then returns that error to the read, which stops at its next
 * chunk. No timer runs while no read is in flight; building it sets none.
 *
 * @example
 * ```ts ignore
 * const within = bodyDeadlines(30_000, () => new Error("late"));
 * const bytes = await within(() => request.arrayBuffer());
 * ```
 */
export function bodyDeadlines(
  timeoutMs: number,
  expired: () => Error,
): <T>(read: TimedRead<T>) => Promise<T> {
  const tickMs = Math.max(1, Math.floor(timeoutMs / 4));
  // Never early: a read begun just after a tick has a whole tick less.
  const ticks = Math.ceil(timeoutMs / tickMs) + 1;
  const pending = new Set<Pending>();
  let timer: ReturnType<typeof setInterval> | undefined;

  function sweep(): void {
    for (const read of pending) {
      if (--read.ticksLeft > 0) continue;
      pending.delete(read);
      read.expire();
    }
    stopIfIdle();
  }

  function stopIfIdle(): void {
    if (pending.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  function ownTimer<T>(read: TimedRead<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let error: Error | undefined;
      const own = setTimeout(() => {
        error = expired();
        reject(error);
      }, timeoutMs);
      let reading: Promise<T>;
      try {
        reading = read(() => error);
      } catch (thrown) {
        clearTimeout(own);
        reject(thrown);
        return;
      }
      // Settled after the deadline, its answer is unheard.
      reading.then((value) => {
        clearTimeout(own);
        resolve(value);
      }, (thrown: unknown) => {
        clearTimeout(own);
        reject(thrown);
      });
    });
  }

  function shared<T>(read: TimedRead<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let error: Error | undefined;
      const entry: Pending = {
        ticksLeft: ticks,
        expire: () => {
          error = expired();
          reject(error);
        },
      };
      let reading: Promise<T>;
      try {
        reading = read(() => error);
      } catch (thrown) {
        reject(thrown);
        return;
      }
      pending.add(entry);
      timer ??= setInterval(sweep, tickMs);
      const done = () => {
        pending.delete(entry);
        stopIfIdle();
      };
      // Settled after the deadline, its answer is unheard.
      reading.then((value) => {
        done();
        resolve(value);
      }, (thrown: unknown) => {
        done();
        reject(thrown);
      });
    });
  }

  let within: (<T>(read: TimedRead<T>) => Promise<T>) | undefined;
  // Decided at the first read, not when built: nothing is read from the
  // platform at construction.
  return <T>(read: TimedRead<T>): Promise<T> => {
    within ??= onWorkers() ? ownTimer : shared;
    return within(read);
  };
}

/** A read in flight under the shared timer. */
interface Pending {
  /** The ticks it has left before its deadline. */
  ticksLeft: number;
  /** Rejects it with the deadline's error. */
  readonly expire: () => void;
}
