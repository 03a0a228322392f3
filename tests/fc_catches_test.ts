/**
 * `catches` / `catchesAsync` prove a property can fail on a broken twin:
 * their verdict must not hang on `FC_SEED`, `FC_PATH` or `FC_RUNS`, which
 * replay or narrow the properties themselves.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { catches, catchesAsync } from "./_fc.ts";

/** Runs `fn` under the global settings `FC_SEED=7 FC_PATH=3:0 FC_RUNS=1` would give, then restores them. */
async function underNarrowGlobal<T>(fn: () => T | Promise<T>): Promise<T> {
  const saved = fc.readConfigureGlobal();
  // `path` is not in GlobalParameters' type, but fast-check reads it (as
  // tests/_fc.ts sets it from FC_PATH).
  const narrow = { seed: 7, path: "3:0", numRuns: 1 };
  fc.configureGlobal({ ...saved, ...narrow });
  try {
    return await fn();
  } finally {
    fc.configureGlobal(saved);
  }
}

/** Fails only on 1 in 200 values: one run, or a replay of one path, misses it. */
const rare = (seen: number[]) =>
  fc.property(fc.integer({ min: 0, max: 199 }), (n) => {
    seen.push(n);
    return n !== 123;
  });

const rareAsync = (seen: number[]) =>
  fc.asyncProperty(fc.integer({ min: 0, max: 199 }), (n) => {
    seen.push(n);
    return Promise.resolve(n !== 123);
  });

/**
 * Checks that `check`, run free and then under narrow global settings,
 * catches the rare bug both times from the same cases.
 */
async function assertOwnCases(
  check: (seen: number[]) => boolean | Promise<boolean>,
): Promise<void> {
  const free: number[] = [];
  const narrowed: number[] = [];
  const caughtFree = await check(free);
  const caughtNarrowed = await underNarrowGlobal(() => check(narrowed));
  assert.equal(caughtFree, true);
  assert.equal(caughtNarrowed, true, "a global seed, path or runs hid the bug");
  assert.deepEqual(
    narrowed.slice(0, 50),
    free.slice(0, 50),
    "the global settings changed the cases",
  );
}

Deno.test("catches() draws its own cases: a global seed, path or run count neither changes nor narrows them", async () => {
  await assertOwnCases((seen) => catches(rare(seen), 2000));
});

Deno.test("catchesAsync() draws its own cases: a global seed, path or run count neither changes nor narrows them", async () => {
  await assertOwnCases((seen) => catchesAsync(rareAsync(seen), 2000));
});

Deno.test("catches() runs as many cases as asked, whatever FC_RUNS says", async () => {
  let runs = 0;
  const never = fc.property(fc.nat(), () => {
    runs++;
    return true;
  });
  assert.equal(await underNarrowGlobal(() => catches(never, 250)), false);
  assert.equal(runs, 250);
});

Deno.test("catchesAsync() runs as many cases as asked, whatever FC_RUNS says", async () => {
  let runs = 0;
  const never = fc.asyncProperty(fc.nat(), () => {
    runs++;
    return Promise.resolve(true);
  });
  assert.equal(await underNarrowGlobal(() => catchesAsync(never, 250)), false);
  assert.equal(runs, 250);
});
