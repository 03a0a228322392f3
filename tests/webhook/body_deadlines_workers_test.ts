/**
 * Which timer a body read runs under: on Cloudflare Workers, told by
 * `navigator.userAgent` or (a compatibility date before 2022-03-21, no
 * `navigator`) by the `WebSocketPair` global, each read keeps its own
 * `setTimeout`, as a timer there ends with the request that set it; off
 * Workers the reads share one `setInterval`. The 408 a held body gets is
 * the same under both, so only the timers tell them apart.
 */

import assert from "node:assert/strict";
import { bodyDeadlines } from "../../webhook/_deadlines.ts";

/** The timers `read` set under `bodyDeadlines(40, …)`, by kind. */
async function timersOf(): Promise<{ timeouts: number[]; intervals: number }> {
  const timeouts: number[] = [];
  let intervals = 0;
  const { setTimeout: setT, setInterval: setI } = globalThis;
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    timeouts.push(ms ?? 0);
    return setT(fn, ms);
  }) as typeof setTimeout;
  globalThis.setInterval = ((fn: () => void, ms?: number) => {
    intervals++;
    return setI(fn, ms);
  }) as typeof setInterval;
  try {
    const within = bodyDeadlines(40, () => new Error("late"));
    // Two reads at once, both done before the deadline.
    const reads = await Promise.all([
      within(() => Promise.resolve("a")),
      within(() => Promise.resolve("b")),
    ]);
    assert.deepEqual(reads, ["a", "b"]);
  } finally {
    globalThis.setTimeout = setT;
    globalThis.setInterval = setI;
  }
  return { timeouts, intervals };
}

/** Runs `body` with `name` defined on `globalThis` as `value`. */
async function withGlobal<T>(
  name: string,
  value: unknown,
  body: () => Promise<T>,
): Promise<T> {
  const had = Object.getOwnPropertyDescriptor(globalThis, name);
  Object.defineProperty(globalThis, name, { value, configurable: true });
  try {
    return await body();
  } finally {
    if (had) Object.defineProperty(globalThis, name, had);
    else delete (globalThis as Record<string, unknown>)[name];
  }
}

Deno.test("bodyDeadlines() off Workers shares one interval among the reads in flight, with no timer per read", async () => {
  const { timeouts, intervals } = await timersOf();
  assert.deepEqual([timeouts, intervals], [[], 1]);
});

Deno.test("bodyDeadlines() on Workers told by navigator.userAgent gives each read its own timeout, no shared interval", async () => {
  const { timeouts, intervals } = await withGlobal(
    "navigator",
    { userAgent: "Cloudflare-Workers" },
    timersOf,
  );
  assert.deepEqual([timeouts, intervals], [[40, 40], 0]);
});

Deno.test("bodyDeadlines() on a Worker with no navigator (compatibility date before 2022-03-21) is told by WebSocketPair: each read its own timeout", async () => {
  const { timeouts, intervals } = await withGlobal(
    "navigator",
    undefined,
    () => withGlobal("WebSocketPair", function WebSocketPair() {}, timersOf),
  );
  assert.deepEqual([timeouts, intervals], [[40, 40], 0]);
});
