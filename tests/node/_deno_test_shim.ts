/**
 * Lets a suite written for `Deno.test` run under Node's test runner: where
 * there is no `Deno`, `Deno.test(name, fn)` registers `node:test`'s
 * `test(name, fn)`, and `Deno.test({ name, ignore }, fn)` the same, skipped
 * when `ignore` is true. The body gets a context whose `step(name, fn)` is
 * a subtest. Import it before the suite.
 *
 * @module
 */

import { test, type TestContext } from "node:test";

/** What the suites use of Deno's test context. */
interface StepContext {
  step(name: string, fn: () => Promise<void> | void): Promise<unknown>;
}

type Body = (t: StepContext) => Promise<void> | void;

const g = globalThis as { Deno?: unknown };
if (g.Deno === undefined) {
  const run = (fn: Body) => (t: TestContext) =>
    fn({ step: (name, step) => t.test(name, () => step()) });
  g.Deno = {
    test: (
      definition: string | { name: string; ignore?: boolean },
      fn: Body,
    ) =>
      typeof definition === "string"
        ? test(definition, run(fn))
        : test(definition.name, { skip: definition.ignore === true }, run(fn)),
  };
}
