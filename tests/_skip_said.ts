/**
 * The variable that says a suite's skip line was printed, once per run:
 * the files of a parallel run share one process's environment, and share
 * nothing else. Its name is one nothing else reads: the service names a
 * `RELAYER_*` variable, or a near miss of a setting, as not a setting
 * ("relayer: RELAYER_… is not a setting of the relayer"), and a child
 * that starts the service with the run's environment (tools/crash.ts)
 * would print that line.
 *
 * @module
 */

/** The variable set once `suites`' skip line is said (`"the PgBouncer suites"`). */
export function skipSaid(suites: string): string {
  return `POISON_TESTS_SKIP_SAID_${suites.replace(/\W+/g, "_").toUpperCase()}`;
}
