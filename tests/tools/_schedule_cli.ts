/**
 * `tools/schedule.ts` run as a user runs it (`deno task schedule`), for
 * the tests of its command line (schedule_test.ts) and of the command a
 * service's refusal prints (config_retention_schedule_test.ts).
 *
 * @module
 */

import { runTool } from "./_run_tool.ts";

/**
 * Runs `tools/schedule.ts` with `args` (and `permissions`, none unless
 * given) from the repository's root; returns its exit code and what it
 * printed.
 *
 * @example The default schedule
 * ```ts ignore
 * const { code, stdout } = await runSchedule([]);
 * ```
 */
export async function runSchedule(
  args: readonly string[],
  permissions: readonly string[] = [],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return await runTool("schedule.ts", args, { permissions });
}
