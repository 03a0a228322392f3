/**
 * `whileLocked`, the retry of a Deno KV commit (or open) that a SQLite
 * file another handle holds refuses as "database is locked", having
 * written nothing: the store's group commits, the local queue's requeue
 * and line-end commits, and the start's open all go through it. Its
 * bound is what turns a lock held for good (a `sqlite3` session left in a
 * transaction) into an error an operator reads, rather than a delivery,
 * a requeue or a start that waits with no end; its waits are what let a
 * lock held for a few seconds (a checkpoint, a backup) end before it
 * gives up. Its timers are counted, not waited for, on a clock that moves
 * by each wait (and by each try, where a test says so).
 *
 * @module
 */

import assert from "node:assert/strict";
import { whileLocked } from "../../store/_group_commit.ts";

/** Deno KV's refusal of a commit while another handle holds the file. */
const locked = () => new TypeError("database is locked");

/** The clock `performance.now()` reads under {@linkcode counted}. */
interface Clock {
  ms: number;
}

/**
 * Runs `call` with `setTimeout` firing at once and `performance.now()`
 * reading `clock`, which each wait moves on by its length; returns what it
 * settled to and the waits it asked for, in order.
 */
async function counted<T>(
  call: (clock: Clock) => Promise<T>,
): Promise<{ result: PromiseSettledResult<T>; waits: number[] }> {
  const waits: number[] = [];
  const clock: Clock = { ms: 1_000 };
  const { setTimeout: setT } = globalThis;
  const now = performance.now;
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    waits.push(ms ?? 0);
    clock.ms += ms ?? 0;
    queueMicrotask(fn);
    return 0;
  }) as unknown as typeof setTimeout;
  performance.now = () => clock.ms;
  try {
    const [result] = await Promise.allSettled([call(clock)]);
    return { result: result!, waits };
  } finally {
    globalThis.setTimeout = setT;
    performance.now = now;
  }
}

Deno.test("whileLocked: a file locked for good is tried every 1, 2, 4, 8, then 16 ms until 5 s have passed, then its last refusal is thrown", async () => {
  let tries = 0;
  let last: Error | undefined;
  const { result, waits } = await counted(() =>
    whileLocked((attempt) => {
      tries++;
      assert.equal(attempt, tries);
      // A loop with no bound is ended here, for the assertions to say so.
      if (tries > 1_000) return Promise.resolve("still trying");
      last = locked();
      return Promise.reject(last);
    })
  );
  assert.equal(result.status, "rejected");
  assert.equal((result as PromiseRejectedResult).reason, last);
  // 15 ms, then 312 waits of 16 ms: 5,007 ms when the last try is refused.
  assert.equal(tries, 317);
  assert.deepEqual(waits, [1, 2, 4, 8, ...Array(312).fill(16)]);
});

Deno.test("whileLocked: a file locked for good is refused 5 s after the first try, not later, however long each try takes (a loaded machine)", async () => {
  let tries = 0;
  let started = 0;
  let refusedAt = 0;
  const { result } = await counted((clock) => {
    started = clock.ms;
    return whileLocked(() => {
      tries++;
      if (tries > 1_000) return Promise.resolve("still trying");
      // Each try takes 40 ms: a commit's trip to SQLite's thread on a
      // machine whose cores are all busy.
      clock.ms += 40;
      refusedAt = clock.ms;
      return Promise.reject(locked());
    });
  });
  assert.equal(result.status, "rejected");
  const tookMs = refusedAt - started;
  // The last try starts before 5 s have passed (one wait and one try at most past it).
  assert.ok(
    tookMs >= 5_000 && tookMs < 5_000 + 16 + 40,
    `refused ${tookMs} ms after the first try, after ${tries} tries`,
  );
});

Deno.test("whileLocked: a lock that ends is waited out, and the try that follows answers", async () => {
  let tries = 0;
  const { result, waits } = await counted(() =>
    whileLocked(() =>
      ++tries < 40 ? Promise.reject(locked()) : Promise.resolve("ok")
    )
  );
  assert.deepEqual(result, { status: "fulfilled", value: "ok" });
  assert.equal(tries, 40);
  assert.equal(waits.length, 39);
});

Deno.test("whileLocked: any other error (a damaged file: the commit's outcome unknown) is thrown at once, never tried again", async () => {
  const error = new TypeError("database disk image is malformed");
  let tries = 0;
  const { result, waits } = await counted(() =>
    whileLocked(() => {
      tries++;
      return Promise.reject(error);
    })
  );
  assert.deepEqual(result, { status: "rejected", reason: error });
  assert.equal(tries, 1);
  assert.deepEqual(waits, []);
});

Deno.test("whileLocked: a caller's own test of a lock decides what is tried again", async () => {
  let tries = 0;
  const { result } = await counted(() =>
    whileLocked(
      () =>
        ++tries < 3
          ? Promise.reject(new Error("busy"))
          : Promise.resolve(tries),
      (error) => error instanceof Error && error.message === "busy",
    )
  );
  assert.deepEqual(result, { status: "fulfilled", value: 3 });
});

Deno.test("whileLocked: a refusal that comes 5 s to the millisecond after the first try began is the last", async () => {
  let tries = 0;
  const { result, waits } = await counted((clock) =>
    whileLocked(() => {
      tries++;
      if (tries > 1_000) return Promise.resolve("still trying");
      clock.ms += 5_000; // the first try alone takes the 5 s
      return Promise.reject(locked());
    })
  );
  assert.equal(result.status, "rejected");
  assert.equal(tries, 1);
  assert.deepEqual(waits, []);
});
