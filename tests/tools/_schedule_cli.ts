/**
 * `tools/schedule.ts` run as a user runs it (`deno task schedule`), for
 * the tests of its command line (schedule_test.ts) and of the command a
 * service's refusal prints (config_retention_schedule_test.ts).
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { runTool } from "./_run_tool.ts";

/** What the tool answered: its exit code and what it printed. */
export interface ScheduleRun {
  code: number;
  stdout: string;
  stderr: string;
}

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
): Promise<ScheduleRun> {
  return await runTool("schedule.ts", args, { permissions });
}

/** The repository root, ending in `/`. */
const ROOT: string = fileURLToPath(new URL("../../", import.meta.url));

/**
 * One process, with the tool's permissions (none), that runs the tool's
 * command line (`main()`) for each `run(args)` in turn and answers as
 * `runSchedule(args)` would: for a test of many command lines, where the
 * test is about what the tool prints and exits with, not its start (the
 * start itself, `Deno.args` to `Deno.exit`, is runSchedule's to prove).
 * Dispose of it (`await using`) to end it.
 *
 * @example Two command lines in one process
 * ```ts ignore
 * await using schedule = scheduleSession();
 * const { code } = await schedule.run(["--max-deliveries", "3"]);
 * ```
 */
export function scheduleSession(): {
  run(args: readonly string[]): Promise<ScheduleRun>;
  [Symbol.asyncDispose](): Promise<void>;
} {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}tests/tools/_schedule_many.ts`,
    ],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  const reader = child.stdout.getReader();
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let buffered = "";
  // One run at a time: each answer is the next line.
  let queue: Promise<unknown> = Promise.resolve();
  async function answer(args: readonly string[]): Promise<ScheduleRun> {
    await writer.write(encoder.encode(`${JSON.stringify(args)}\n`));
    let end;
    while ((end = buffered.indexOf("\n")) < 0) {
      const { value, done } = await reader.read();
      if (done) {
        throw new Error(
          `tests/tools/_schedule_many.ts ended before answering ${
            JSON.stringify(args)
          }`,
        );
      }
      buffered += decoder.decode(value, { stream: true });
    }
    const line = buffered.slice(0, end);
    buffered = buffered.slice(end + 1);
    return JSON.parse(line);
  }
  return {
    run(args) {
      const next = queue.then(() => answer(args));
      queue = next.catch(() => {});
      return next;
    },
    async [Symbol.asyncDispose]() {
      await queue;
      await writer.close();
      while (!(await reader.read()).done);
      reader.releaseLock();
      const { code } = await child.status;
      if (code !== 0) {
        throw new Error(`tests/tools/_schedule_many.ts exited ${code}`);
      }
    },
  };
}
