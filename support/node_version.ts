/**
 * Whether a real Node.js is on PATH, for the checks that run the module
 * under Node.
 *
 * @module
 */

/**
 * The version `node --version` prints, or `null` where there is no Node.js.
 * Deno 2.9 puts itself on a child's PATH as `node` when no real one is
 * installed (denoland/deno#34969; it answers `--version` as "deno …"), and
 * that stand-in proves nothing about Node, so it counts as absent.
 */
export async function nodeVersion(): Promise<string | null> {
  let stdout: Uint8Array;
  try {
    ({ stdout } = await new Deno.Command("node", {
      args: ["--version"],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output());
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const version = new TextDecoder().decode(stdout).trim();
  return /^v\d+\.\d+\.\d+/.test(version) ? version : null;
}
