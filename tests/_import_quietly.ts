/**
 * Imports the modules named on the command line, in this order, with
 * randomness, timers, fetch and the other objects a Worker's global scope
 * refuses (an `AbortController`, a `Response` with a body, …) turned into
 * errors ({@linkcode withoutSideEffects}): a module's top level runs once per
 * process, so `tests/construction_test.ts`, which imports the package
 * statically, cannot watch it and runs this in a process of its own.
 * Workers refuse a timer or `crypto.getRandomValues` at the top level when
 * the Worker loads (`deno task worker-check` sees that, minutes later),
 * but a `fetch` there is only a rejected promise, and `Math.random` is
 * allowed; on Deno, Node and Bun each runs when the module is imported.
 * Prints `imported quietly: <modules>` and exits 0, or the first call's
 * stack and exits 1.
 *
 * `deno run --no-check tests/_import_quietly.ts mod.ts webhook/app.ts`
 * (paths from the repository root).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { withoutSideEffects } from "./_side_effects.ts";

if (import.meta.main) {
  const root = new URL("../", import.meta.url);
  try {
    await withoutSideEffects(async () => {
      for (const path of Deno.args) await import(new URL(path, root).href);
    });
    console.log(`imported quietly: ${Deno.args.join(", ")}`);
  } catch (error) {
    console.error(
      error instanceof Error ? error.stack ?? error.message : String(error),
    );
    Deno.exit(1);
  }
}
