/**
 * Whether a command the tests need runs on this machine.
 *
 * @module
 */

/** Whether `command` runs here (it exits 0 with `args`). */
export async function runs(command: string, args: string[]): Promise<boolean> {
  try {
    const { success } = await new Deno.Command(command, {
      args,
      stdout: "null",
      stderr: "null",
    }).output();
    return success;
  } catch {
    return false;
  }
}
