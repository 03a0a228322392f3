/**
 * Proves what the docs say `main.ts` does on the oldest Deno they name,
 * Deno 2.5.0 (the version Deno Deploy's Runtime page names): installs
 * npm's Deno binary of that version (`@deno/linux-x64-glibc`, pinned) into
 * the cache outside the repository, and runs `tests/deploy_run_test.ts`
 * with `main.ts` on it, started as Deploy starts an entrypoint (`deno run`
 * with `DENO_AUTO_SERVE`, network and environment only). The tests
 * themselves run on this Deno: Deno 2.5.0 refuses `deno.json`'s
 * `test.sanitizeOps` (`unknown field`), which only `deno test` reads.
 * Before it runs, docs/routes.md and docs/reliability.md must name the
 * pinned version where they cite that test, so the docs say what runs.
 *
 * npm publishes that binary for Linux on x86-64 (glibc) alone; elsewhere
 * the check says so in one line and skips, and under `CI=true` it fails.
 *
 * `deno task deploy-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError, ROOT, runMain } from "./_check.ts";
import { cachedVersion, npmInstall, run } from "./_npm_cache.ts";

/** The Deno that Deno Deploy's Runtime page names, which the docs name too. */
export const DEPLOY_DENO_VERSION = "2.5.0";

/**
 * The environment variable that names the Deno `tests/deploy_run_test.ts`
 * runs `main.ts` on (absent: the Deno that runs the test).
 */
export const MAIN_DENO = "RELAYER_MAIN_DENO";

/** The test file the docs cite for the claim, from the repository root. */
const TEST = "tests/deploy_run_test.ts";

/** The docs that cite {@linkcode TEST} for Deno {@linkcode DEPLOY_DENO_VERSION}. */
const DOCS = ["docs/routes.md", "docs/reliability.md"] as const;

/**
 * The docs whose paragraph citing {@linkcode TEST} does not name
 * `Deno <version>` and `deploy-check`, each with why.
 *
 * @param version The pinned version.
 * @returns One line per doc that does not say what runs; `[]` when all do.
 */
async function unsaid(version: string): Promise<string[]> {
  const wrong: string[] = [];
  for (const doc of DOCS) {
    const text = await Deno.readTextFile(`${ROOT}${doc}`);
    const paragraph = text.split(/\n\s*\n/).find((part) =>
      part.includes(`\`${TEST}\``)
    );
    if (paragraph === undefined) {
      wrong.push(`${doc} no longer cites \`${TEST}\``);
    } else if (
      !paragraph.replace(/\s+/g, " ").includes(`Deno ${version}`) ||
      !paragraph.includes("deploy-check")
    ) {
      wrong.push(
        `${doc}'s paragraph citing \`${TEST}\` does not name Deno ${version} and deploy-check`,
      );
    }
  }
  return wrong;
}

/**
 * The check: the docs name the pin, Deno 2.5.0 is installed and answers
 * its version, and `tests/deploy_run_test.ts` passes with `main.ts` on it.
 *
 * @returns The exit code: 0 if every step passed.
 * @throws {CheckError} If Deno 2.5.0 cannot be installed or run.
 */
async function deployCheck(): Promise<number> {
  const version = DEPLOY_DENO_VERSION;
  const wrong = await unsaid(version);
  for (const line of wrong) {
    console.log(
      `deploy-check: FAIL ${line}: say there what runs (main.ts on Deno ${version}, by deno task deploy-check)`,
    );
  }
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    const missing =
      `npm publishes Deno ${version} here only for linux-x64 (@deno/linux-x64-glibc), not ${Deno.build.os}-${Deno.build.arch}: run deploy-check on Linux x86-64, as CI does`;
    if (Deno.env.get("CI") === "true") throw new CheckError(missing);
    console.log(`deploy-check: SKIPPED, ${missing}`);
    return wrong.length === 0 ? 0 : 1;
  }
  const name = "@deno/linux-x64-glibc";
  const cache = await npmInstall(name, version);
  const deno = `${cache}/node_modules/${name}/deno`;
  const said = await cachedVersion({
    runtime: "Deno",
    pin: version,
    expected: `deno ${version} (stable, release, x86_64-unknown-linux-gnu)`,
    firstLine: true,
    command: deno,
    cache,
    ifNotStarting:
      "deploy-check where Deno's official Linux binaries run (glibc 2.27 or newer)",
  });
  console.log(`deploy-check: ${said}`);
  const label =
    `deno test ${TEST}, main.ts on Deno ${version} (deno run, DENO_AUTO_SERVE, network and environment only)`;
  const tested = await run(Deno.execPath(), [
    "test",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    "--allow-run",
    "--allow-net=127.0.0.1,localhost",
    TEST,
  ], { cwd: ROOT, env: { [MAIN_DENO]: deno, NO_COLOR: "1" }, label });
  console.log(tested.out.trimEnd());
  if (tested.code !== 0) {
    console.log(`deploy-check: FAIL ${label}`);
    return 1;
  }
  console.log(
    `deploy-check: ${TEST} passed with main.ts on Deno ${version}: without DENO_AUTO_SERVE it exits 1 saying how to serve it, an --allow-net that leaves out its address is refused in one line, and served so it answers a signed delivery end to end`,
  );
  return wrong.length === 0 ? 0 : 1;
}

if (import.meta.main) await runMain("deploy-check", deployCheck);
