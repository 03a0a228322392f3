/**
 * The tsc of a type-check test, installed pinned, or `null` (with a line
 * saying so) where it cannot be installed outside CI; under `CI=true` a
 * failed install fails the test file, as the check must run there.
 *
 * @module
 */

import type { TscInstall } from "../tools/_worker_tsc.ts";

/** What a type-check test names in its CI failure and its skip line. */
export interface TscCheck {
  /** Whose types, as in "tsc under Node's types". */
  readonly types: string;
  /** The check, as in "the Node type check must run in CI". */
  readonly check: string;
  /** The types package, as in "(tsc under @types/node)". */
  readonly pkg: string;
}

/**
 * `install()`, or `null` outside CI when it fails.
 *
 * @param install The pinned install (`installTsc`, `installBunTsc`).
 * @param what How the check is named.
 * @returns The installed tsc, or `null` to skip.
 */
export async function tscOrSkip(
  install: () => Promise<TscInstall>,
  what: TscCheck,
): Promise<TscInstall | null> {
  try {
    return await install();
  } catch (error) {
    const why = (error as Error).message;
    if (Deno.env.get("CI") === "true") {
      throw new Error(
        `CI=true and tsc under ${what.types} types cannot be installed (${why}); ${what.check} must run in CI`,
      );
    }
    // deno-lint-ignore no-console -- the skip must show in the run's output
    console.error(
      `\n!!! SKIPPING ${what.check} (tsc under ${what.pkg}): ${why} !!!\n`,
    );
    return null;
  }
}
