/**
 * Writes the committed npm lock of each pin given, for the checks and
 * benches that install from `support/npm_locks/` (see
 * `support/npm_lock.ts`): `npm install --package-lock-only` in a scratch
 * folder, so nothing is installed and no script runs.
 *
 * `deno task npm-locks bun@1.4.5 miniflare@4.20260730.0`; then review the
 * new lock (`git diff support/npm_locks`) and commit it with the pin.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError, runMain } from "./_check.ts";
import { INSTALL_TIMEOUT_MS, run } from "./_npm_cache.ts";
import { lockPath, manifestOf } from "../support/npm_lock.ts";

/** `name@version`, with an exact version; `@scope/name@version` too. */
function parseSpec(spec: string): { name: string; version: string } {
  const at = spec.lastIndexOf("@");
  const name = spec.slice(0, at);
  const version = spec.slice(at + 1);
  if (at <= 0 || !/^\d+\.\d+\.\d+(?:[-+][\w.-]+)?$/.test(version)) {
    throw new CheckError(
      `${
        JSON.stringify(spec)
      } is not name@version with an exact version: write it as bun@1.4.5 or @deno/kv@0.14.0`,
    );
  }
  return { name, version };
}

async function writeLocks(specs: readonly string[]): Promise<number> {
  if (specs.length === 0) {
    throw new CheckError(
      "no pin given: name each as name@version, e.g. deno task npm-locks bun@1.4.5",
    );
  }
  for (const { name, version } of specs.map(parseSpec)) {
    const scratch = await Deno.makeTempDir({ prefix: "relayer_npm_lock_" });
    try {
      await Deno.writeTextFile(
        `${scratch}/package.json`,
        manifestOf(name, version),
      );
      const { code, out } = await run("npm", [
        "install",
        "--package-lock-only",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        // npm refuses to lock a package built for another platform
        // (EBADPLATFORM), even though it installs nothing here: Node's
        // binaries are locked for each platform that publishes them, and
        // --force skips only that check in a lock of one package.
        ...(/^node-(linux|darwin|win)-(x64|arm64)$/.test(name)
          ? ["--force"]
          : []),
      ], {
        cwd: scratch,
        label: `npm install --package-lock-only ${name}@${version}`,
        timeoutMs: INSTALL_TIMEOUT_MS,
      });
      if (code !== 0) {
        throw new CheckError(
          `npm could not lock ${name}@${version} (${
            out.trim().split("\n")[0]
          }): check the version exists (npm view ${name}@${version} version)`,
        );
      }
      // The lock's name is its folder's: the cache folder's, not scratch's.
      const lock = JSON.parse(
        await Deno.readTextFile(`${scratch}/package-lock.json`),
      );
      lock.name = `${name.replace("/", "+")}-${version}`;
      await Deno.writeTextFile(
        lockPath(name, version),
        `${JSON.stringify(lock, null, 2)}\n`,
      );
      console.log(`npm-locks: wrote ${lockPath(name, version)}`);
    } finally {
      await Deno.remove(scratch, { recursive: true });
    }
  }
  return 0;
}

if (import.meta.main) {
  await runMain("npm-locks", () => writeLocks(Deno.args));
}
