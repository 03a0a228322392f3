/**
 * What the tests of PostgreSQL's write guard (`in_write_only`,
 * `refuse_outside()`) write, and how they read what came of it
 * (postgres_outside_write_test.ts, postgres_pgbouncer_test.ts).
 *
 * @module
 */

import { WRITE_MARK } from "../../store/_postgres_schema.ts";

/**
 * A bump of `pi_1`'s version in `schema`, beginning with `mark` (this
 * version's, unless another is given): a statement marked as the store's.
 */
export function markedBump(schema: string, mark: string = WRITE_MARK): string {
  return `${mark}UPDATE "${schema}".intents SET version = version + 1 WHERE id = 'pi_1'`;
}

/**
 * What `write` came to: `"landed"`, or the SQLSTATE it failed with (its
 * message where it has none).
 */
export function outcome(write: Promise<unknown>): Promise<string> {
  return write.then(
    () => "landed",
    (error: Error & { code?: string }) => error.code ?? String(error),
  );
}
