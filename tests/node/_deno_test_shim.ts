/**
 * Lets a suite written for `Deno.test` run under Node's test runner: where
 * there is no `Deno`, `Deno.test(name, fn)` registers `node:test`'s
 * `test(name, fn)`. Import it before the suite.
 *
 * @module
 */

import { test } from "node:test";

const g = globalThis as { Deno?: unknown };
if (g.Deno === undefined) {
  g.Deno = {
    test: (name: string, fn: () => Promise<void> | void) => test(name, fn),
  };
}
