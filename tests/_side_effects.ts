/**
 * The side effects a construction must not have, as a Cloudflare Worker's
 * global scope refuses them: randomness, timers and fetch
 * ({@linkcode withoutSideEffects}). Shared by `tests/construction_test.ts`
 * (what the constructors do) and `tests/_import_quietly.ts` (what the
 * modules' top levels do, in a process of their own). It imports nothing
 * of the package, so a module imported after it runs its top level under
 * the traps.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * Runs `build` with randomness, timers and fetch turned into errors, as a
 * Cloudflare Worker's global scope does, and keeps them so for a few
 * microtask turns and one macrotask after it returns: a construction that
 * leaves a promise behind (`Promise.resolve().then(() => setTimeout(…))`)
 * is still in the global scope when that promise runs. A call during
 * `build` throws, as workerd's does; a call after is recorded rather than
 * thrown (a throw in a detached callback would surface as an unhandled
 * rejection, far from here), and either fails the run with its stack.
 * `build` may return a promise (a dynamic `import()`, whose module runs
 * its top level then): what it does until that settles is "during".
 */
export async function withoutSideEffects<T>(
  build: () => T | Promise<T>,
): Promise<T> {
  const fired: string[] = [];
  let when = "during construction";
  // deno-lint-ignore no-explicit-any
  type Fn = (...args: any[]) => any;
  const forbidden = (what: string, harmless: Fn): Fn => (...args) => {
    const call = new Error(`${what} called ${when}`);
    fired.push(call.stack ?? call.message);
    if (when === "during construction") throw call;
    return harmless(...args);
  };
  // deno-lint-ignore no-explicit-any
  const c = crypto as any;
  // deno-lint-ignore no-explicit-any
  const g = globalThis as any;
  const saved = {
    randomUUID: c.randomUUID,
    getRandomValues: c.getRandomValues,
    random: Math.random,
    setTimeout: g.setTimeout,
    setInterval: g.setInterval,
    setImmediate: g.setImmediate,
    fetch: g.fetch,
  };
  c.randomUUID = forbidden(
    "crypto.randomUUID",
    () => "00000000-0000-4000-8000-000000000000",
  );
  c.getRandomValues = forbidden("crypto.getRandomValues", <A>(a: A) => a);
  Math.random = forbidden("Math.random", () => 0.5);
  g.setTimeout = forbidden("setTimeout", () => 0);
  g.setInterval = forbidden("setInterval", () => 0);
  g.setImmediate = forbidden("setImmediate", () => 0);
  g.fetch = forbidden("fetch", () => new Promise(() => {}));
  try {
    const result = build();
    // Awaited only if it is a promise: a turn spent on a plain value would
    // run a then the build left behind while the calls still throw.
    const built = result instanceof Promise ? await result : result;
    when = "after construction returned";
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    // One macrotask, on the real timer: a chain of promises longer than
    // the turns above has run by then.
    await new Promise((resolve) => saved.setTimeout(resolve, 0));
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    assert.deepEqual(
      fired,
      [],
      `side effects of construction:\n${fired.join("\n")}`,
    );
    return built;
  } finally {
    c.randomUUID = saved.randomUUID;
    c.getRandomValues = saved.getRandomValues;
    Math.random = saved.random;
    g.setTimeout = saved.setTimeout;
    g.setInterval = saved.setInterval;
    g.setImmediate = saved.setImmediate;
    g.fetch = saved.fetch;
  }
}
