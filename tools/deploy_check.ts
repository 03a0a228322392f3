/**
 * Proves what the docs say `main.ts` does on the oldest Deno they name,
 * Deno 2.5.0 (the version Deno Deploy's Runtime page names): installs
 * npm's Deno binary of that version (`@deno/linux-x64-glibc`, pinned) into
 * the cache outside the repository, and runs `tests/deploy_run_test.ts`
 * with `main.ts` on it, started as Deploy starts an entrypoint (`deno run`
 * with `DENO_AUTO_SERVE`, network and environment only). The tests
 * themselves run on this Deno: Deno 2.5.0 refuses `deno.json`'s
 * `test.sanitizeOps` (`unknown field`), which only `deno test` reads.
 * Then `Deno.openKv(url)` of a KV Connect database on it, as docs/routes.md
 * says it goes (resolved before any request, only the metadata endpoint
 * asked after, a refusal there not rejecting it: nothing of the data is
 * read, which is why the service reads once before it serves). Before it
 * runs, docs/routes.md and docs/reliability.md must name the pinned
 * version where they cite that test, so the docs say what runs.
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
import type { KvConnectOpening } from "./_kv_connect_probe.ts";

export type { KvConnectOpening };

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
    const line = docUnsaid(
      doc,
      await Deno.readTextFile(`${ROOT}${doc}`),
      version,
    );
    if (line !== undefined) wrong.push(line);
  }
  return wrong;
}

/**
 * Why `text`, the doc `doc`, does not say what runs: its paragraph citing
 * `tests/deploy_run_test.ts` is gone, or does not name `Deno <version>`
 * (across a line break too) and `deploy-check`.
 *
 * @example
 * ```ts
 * import { docUnsaid } from "./deploy_check.ts";
 * import assert from "node:assert/strict";
 *
 * const text = "Runs on Deno\n2.5.0 (`tests/deploy_run_test.ts`, deploy-check).";
 * assert.equal(docUnsaid("docs/routes.md", text, "2.5.0"), undefined);
 * assert.match(docUnsaid("docs/routes.md", text, "2.6.0")!, /does not name Deno 2\.6\.0/);
 * ```
 *
 * @param doc The doc's path, as the line names it.
 * @param text The doc's text.
 * @param version The pinned version.
 * @returns One line saying what is wrong; `undefined` where it says what runs.
 */
export function docUnsaid(
  doc: string,
  text: string,
  version: string,
): string | undefined {
  const paragraph = text.split(/\n\s*\n/).find((part) =>
    part.includes(`\`${TEST}\``)
  );
  if (paragraph === undefined) return `${doc} no longer cites \`${TEST}\``;
  if (
    !paragraph.replace(/\s+/g, " ").includes(`Deno ${version}`) ||
    !paragraph.includes("deploy-check")
  ) {
    return `${doc}'s paragraph citing \`${TEST}\` does not name Deno ${version} and deploy-check`;
  }
  return undefined;
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
  const opening = await kvConnectOpening(deno, version);
  if (opening !== undefined) {
    console.log(`deploy-check: FAIL ${opening}`);
    return 1;
  }
  console.log(
    `deploy-check: Deno.openKv() of a KV Connect database on Deno ${version} resolved before any request, then asked only the metadata endpoint, and stayed open though it refused: it reads no data, so the service's first read is what finds such a database`,
  );
  return wrong.length === 0 ? 0 : 1;
}

/**
 * What docs/routes.md says of `Deno.openKv(url)` on Deno 2.5 (the reason
 * the service reads a KV Connect database once before it serves): it
 * resolves before any request, asks only the metadata endpoint after, and
 * a refusal there does not reject it; `tools/_kv_connect_probe.ts` run on
 * `deno`.
 *
 * @returns What differs, on one line; `undefined` when it holds.
 */
async function kvConnectOpening(
  deno: string,
  version: string,
): Promise<string | undefined> {
  const label = `tools/_kv_connect_probe.ts on Deno ${version}`;
  const probed = await run(deno, [
    "run",
    "--no-config",
    "--unstable-kv",
    "--allow-net=127.0.0.1",
    "--allow-env=DENO_KV_ACCESS_TOKEN",
    "tools/_kv_connect_probe.ts",
  ], {
    cwd: ROOT,
    env: { DENO_KV_ACCESS_TOKEN: "deploy-check-kv-token-0123456789" },
    label,
  });
  const line = probed.out.split("\n").find((text) => text.startsWith("{"));
  if (probed.code !== 0 || line === undefined) {
    return `${label} exited ${probed.code} with no answer: ${probed.out.trim()}`;
  }
  return openingDiffers(JSON.parse(line) as KvConnectOpening, version, label);
}

/**
 * What differs between the probe's answer (`said`) and what docs/routes.md
 * says of `Deno.openKv(url)` on Deno `version`: run on another Deno, or
 * the opening did not resolve before any request, or asked more than the
 * metadata endpoint (`POST /kv {"supportedVersions":…}`) after.
 *
 * @example
 * ```ts
 * import { openingDiffers } from "./deploy_check.ts";
 * import assert from "node:assert/strict";
 *
 * const said = {
 *   deno: "2.5.0",
 *   opened: "resolved",
 *   atOpen: 0,
 *   requests: ['POST /kv {"supportedVersions":[1,2,3]}'],
 * };
 * assert.equal(openingDiffers(said, "2.5.0", "probe"), undefined);
 * assert.equal(openingDiffers({ ...said, atOpen: 1 }, "2.5.0", "probe")?.startsWith("probe: "), true);
 * ```
 *
 * @param said The probe's answer.
 * @param version The pinned version.
 * @param label What ran, as the line names it.
 * @returns What differs, on one line; `undefined` when it holds.
 */
export function openingDiffers(
  said: KvConnectOpening,
  version: string,
  label: string,
): string | undefined {
  const others = said.requests.filter((request) =>
    !/^POST \/kv \{"supportedVersions":/.test(request)
  );
  if (said.deno !== version) return `${label} ran on Deno ${said.deno}`;
  if (said.opened !== "resolved" || said.atOpen !== 0 || others.length > 0) {
    return `${label}: ${
      JSON.stringify(said)
    }, where docs/routes.md says the opening resolves before any request, then asks only the metadata endpoint, and a refusal there does not reject it: say there what Deno ${version} does`;
  }
  return undefined;
}

if (import.meta.main) {
  await runMain("deploy-check", deployCheck, { args: Deno.args });
}
