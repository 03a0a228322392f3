/**
 * The npm packages the checks and benches install outside the repository
 * (Bun, Miniflare, `@deno/kv`, autocannon, and TypeScript with Cloudflare's
 * and Node's types for the Worker type check) are pinned whole: each pin has
 * a committed `package-lock.json` in `support/npm_locks/`, with the
 * integrity hash of every package in its tree, and is installed with
 * `npm ci`, which installs exactly that tree or fails. A pin alone would
 * let the packages under it float to whatever the registry serves today.
 *
 * `deno task npm-locks <name@version>…` writes the lock of a new pin.
 *
 * @module
 */

import { fileURLToPath } from "node:url";

/** The folder of the committed locks, as a file path ending in `/`. */
export const LOCKS_DIR: string = fileURLToPath(
  new URL("./npm_locks/", import.meta.url),
);

/**
 * The committed lock's file for `name@version`.
 *
 * @param name The npm package (`"@deno/kv"`).
 * @param version Its exact version.
 * @returns Its path under {@linkcode LOCKS_DIR}.
 *
 * @example A scoped package
 * ```ts
 * import { lockPath } from "./npm_lock.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(lockPath("@deno/kv", "0.14.0"), /npm_locks\/@deno\+kv-0\.14\.0\.json$/);
 * ```
 */
export function lockPath(name: string, version: string): string {
  return `${LOCKS_DIR}${name.replace("/", "+")}-${version}.json`;
}

/**
 * The `package.json` a lock of `name@version` belongs to.
 *
 * @param name The npm package.
 * @param version Its exact version.
 * @returns The manifest's text.
 *
 * @example One exact dependency
 * ```ts
 * import { manifestOf } from "./npm_lock.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(JSON.parse(manifestOf("bun", "1.4.5")).dependencies, { bun: "1.4.5" });
 * ```
 */
export function manifestOf(name: string, version: string): string {
  return `${
    JSON.stringify({ private: true, dependencies: { [name]: version } })
  }\n`;
}

async function textOr(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/**
 * Readies `dir` for an exact install of `name@version` from its committed
 * lock. Returns the arguments of the `npm` command that installs it, or
 * `null` when `dir` already holds that very tree (installed from the same
 * lock). Run the command with `npm` on PATH.
 *
 * @param name The npm package.
 * @param version Its exact version.
 * @param dir The cache folder to install into (created if missing).
 * @returns `npm`'s arguments (`ci --prefix dir …`), or `null`.
 * @throws {Error} If no lock is committed for `name@version`, naming the
 * command that writes one.
 *
 * @example Install autocannon into a cache folder
 * ```ts ignore
 * import { lockedInstall } from "./npm_lock.ts";
 *
 * const dir = `${Deno.env.get("HOME")}/.cache/relayer-poison/autocannon-9.0.0`;
 * const args = await lockedInstall("autocannon", "9.0.0", dir);
 * if (args) await new Deno.Command("npm", { args }).output();
 * ```
 */
export async function lockedInstall(
  name: string,
  version: string,
  dir: string,
): Promise<string[] | null> {
  const lock = await textOr(lockPath(name, version));
  if (lock === null) {
    throw new Error(
      `no committed npm lock for ${name}@${version} (${
        lockPath(name, version)
      }): run deno task npm-locks ${name}@${version}, review the lock and commit it`,
    );
  }
  const manifest = manifestOf(name, version);
  // npm writes node_modules/.package-lock.json once an install completes.
  const installed = await textOr(`${dir}/node_modules/.package-lock.json`);
  if (
    installed !== null &&
    await textOr(`${dir}/package-lock.json`) === lock &&
    await textOr(`${dir}/package.json`) === manifest
  ) {
    return null;
  }
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(`${dir}/package.json`, manifest);
  await Deno.writeTextFile(`${dir}/package-lock.json`, lock);
  return [
    "ci",
    "--prefix",
    dir,
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
  ];
}
