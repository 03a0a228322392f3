/**
 * The side effects a construction must not have, as a Cloudflare Worker's
 * global scope refuses them: randomness, timers, fetch, and the objects
 * workerd ties to a request ({@linkcode withoutSideEffects}). Shared by `tests/construction_test.ts`
 * (what the constructors do) and `tests/_import_quietly.ts` (what the
 * modules' top levels do, in a process of their own). It imports nothing
 * of the package, so a module imported after it runs its top level under
 * the traps.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * What workerd (1.20260730.1) refuses in a Worker's global scope with
 * "Disallowed operation called within global scope" though it is neither
 * randomness, a timer nor a fetch: an `AbortController`, the signals
 * `AbortSignal.timeout()`, `.any()` and `.abort()` make, a `Response` or a
 * `Request` with a body (`Response.json()`, `Response.redirect()` too),
 * `crypto.subtle.generateKey()` (random), a `TextEncoderStream` and a
 * `CompressionStream`. Each, at a Worker's top level, stops it loading;
 * Deno, Node and Bun allow them all. (Seen by loading a one-line Worker
 * of each on Miniflare 4.20260730.0; `Response(null)`, a `Request`
 * without a body, `Headers`, `Blob`, `EventTarget`, `FormData`,
 * `crypto.subtle.digest()`, `importKey()` and `sign()` with HMAC load.)
 */
const REQUEST_BOUND = {
  classes: ["AbortController", "TextEncoderStream", "CompressionStream"],
  statics: [
    ["AbortSignal", "timeout"],
    ["AbortSignal", "any"],
    ["AbortSignal", "abort"],
    ["Response", "json"],
    ["Response", "redirect"],
  ],
  /** Constructed with a body (their second argument's `body`, or Response's first). */
  withBody: ["Response", "Request"],
} as const;

/**
 * Runs `build` with randomness, timers, fetch and what else a Cloudflare
 * Worker's global scope refuses ({@linkcode REQUEST_BOUND}) turned into
 * errors, as that scope does, and keeps them so for a few
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
  const refuse = (what: string): void => {
    const call = new Error(`${what} called ${when}`);
    fired.push(call.stack ?? call.message);
    if (when === "during construction") throw call;
  };
  const forbidden = (what: string, harmless: Fn): Fn => (...args) => {
    refuse(what);
    return harmless(...args);
  };
  // A constructor behind a Proxy: `instanceof` and its statics still work.
  // deno-lint-ignore no-explicit-any
  type Class = new (...args: any[]) => any;
  const forbiddenClass = (
    what: string,
    target: Class,
    applies: (args: unknown[]) => boolean,
  ): Class => {
    const proxy: Class = new Proxy(target, {
      construct(target, args, newTarget) {
        if (applies(args)) refuse(what);
        // Built as the class itself, unless a subclass of the proxy is.
        return Reflect.construct(
          target,
          args,
          newTarget === proxy ? target : newTarget,
        );
      },
    });
    return proxy;
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
    generateKey: Object.getOwnPropertyDescriptor(crypto.subtle, "generateKey"),
    classes: new Map<string, Class>(),
    statics: new Map<string, Fn>(),
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
  const subtle = crypto.subtle;
  const generateKey = subtle.generateKey.bind(subtle);
  Object.defineProperty(subtle, "generateKey", {
    configurable: true,
    writable: true,
    value: forbidden("crypto.subtle.generateKey", generateKey),
  });
  for (const [name, method] of REQUEST_BOUND.statics) {
    const target = g[name];
    const original = target[method] as Fn;
    saved.statics.set(`${name}.${method}`, original);
    target[method] = forbidden(
      `${name}.${method}`,
      (...args) => original.apply(target, args),
    );
  }
  // Response's body is its first argument, Request's its init's `body`.
  // deno-lint-ignore no-explicit-any
  const bodyOf = (name: string, args: any[]): unknown =>
    name === "Response" ? args[0] : args[1]?.body;
  type Trap = [
    name: string,
    what: string,
    applies: (args: unknown[]) => boolean,
  ];
  const trapped: Trap[] = [
    ...REQUEST_BOUND.classes.map((name): Trap => [
      name,
      `new ${name}`,
      () => true,
    ]),
    ...REQUEST_BOUND.withBody.map((name): Trap => [
      name,
      `new ${name} with a body`,
      (args) => bodyOf(name, args) != null,
    ]),
  ];
  for (const [name, what, applies] of trapped) {
    const target = g[name] as Class;
    saved.classes.set(name, target);
    g[name] = forbiddenClass(what, target, applies);
  }
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
    if (saved.generateKey) {
      Object.defineProperty(crypto.subtle, "generateKey", saved.generateKey);
    } else {
      delete (crypto.subtle as { generateKey?: unknown }).generateKey;
    }
    for (const [key, original] of saved.statics) {
      const [name, method] = key.split(".") as [string, string];
      g[name][method] = original;
    }
    for (const [name, original] of saved.classes) g[name] = original;
  }
}
