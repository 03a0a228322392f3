/**
 * Whether a real Node.js is on PATH, and whether it is the Node the module
 * promises (Node 20), for the checks that run the module under it.
 *
 * @module
 */

/**
 * The Node.js major version the module promises and the checks prove: a
 * check that ran on any other would prove something else.
 */
export const NODE_MAJOR = 20;

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

/**
 * Why `version` (as `node --version` prints it) is not the Node the module
 * promises, in one line that says what was found and what to do; `null`
 * when its major is `major`.
 *
 * @example
 * ```ts
 * import { wrongNode } from "./node_version.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(wrongNode("v20.20.2"), null);
 * assert.match(wrongNode("v18.0.0")!, /^found Node v18\.0\.0 on PATH/);
 * ```
 */
export function wrongNode(
  version: string,
  major: number = NODE_MAJOR,
): string | null {
  if (Number(/^v(\d+)\./.exec(version)?.[1]) === major) return null;
  return `found Node ${version} on PATH, but the module promises Node ${major} and this proves it only there: install Node.js ${major} (nvm install ${major}, or https://nodejs.org/en/download) and put it first on PATH`;
}
