/**
 * What the tests of a statement held behind another session's lock share
 * (postgres_faults_test.ts, postgres_look_test.ts,
 * postgres_read_cancelled_test.ts, postgres_own_cancel_test.ts): the wait
 * until the store's session waits on that lock, named by its client's
 * `application_name`.
 *
 * @module
 */

import type postgres from "postgres";

/**
 * The backend of the session named `applicationName` once it waits on a
 * lock (other than `except`'s: a backend ended before, on its way out),
 * read through `admin`; after 15 s (a loaded machine may take a
 * few to start the statement), an error that says `what` (`"the write"`,
 * `"the look"`) never waited.
 *
 * @example Cancel the store's write once it waits on the lock
 * ```ts ignore
 * const pid = await waitingOnLock(admin, "relayer_faults", "the write");
 * await admin`SELECT pg_cancel_backend(${pid})`;
 * ```
 */
export async function waitingOnLock(
  admin: postgres.Sql,
  applicationName: string,
  what: string,
  except?: number,
): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < 15_000) {
    const [row] = await admin`
      SELECT pid FROM pg_stat_activity
      WHERE application_name = ${applicationName}
        AND wait_event_type = 'Lock'
        AND pid IS DISTINCT FROM ${except ?? null}::int`;
    if (row) return row.pid as number;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${what} never waited on the lock`);
}
