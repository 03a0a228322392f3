/**
 * Lets a suite written for `Deno.test` run under Node's test runner: where
 * there is no `Deno`, `Deno.test(name, fn)` registers `node:test`'s
 * `test(name, fn)`, and `Deno.test({ name, ignore }, fn)` the same, skipped
 * when `ignore` is true. Import it before the suite.
 *
 * @module
 */

import { test } from "node:test";

type Body = () => Promise<void> | void;

const g = globalThis as { Deno?: unknown };
if (g.Deno === undefined) {
  g.Deno = {
    test: (
      definition: string | { name: string; ignore?: boolean },
      fn: Body,
    ) =>
      typeof definition === "string"
        ? test(definition, fn)
        : test(definition.name, { skip: definition.ignore === true }, fn),
  };
}
