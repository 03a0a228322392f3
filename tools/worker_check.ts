/**
 * Proves the module runs on Cloudflare Workers: bundles
 * `examples/cloudflare/worker.ts` with `deno bundle` (one bundle graph, so
 * every class exists once), installs the npm package `miniflare` (pinned;
 * it brings workerd) into a cache outside the repository, and runs the
 * Worker on workerd with and without `nodejs_compat`: signed QStash and
 * generic deliveries, QStash's failure callback, a Pub/Sub push and a push
 * from Pub/Sub's dead-letter topic (Google's RS256 tokens, the keys fetched
 * from Google's URL, which Miniflare's outbound service answers with a test
 * key), the seed's three payments through Cloudflare Queues
 * (their end states must be the golden's), and the dead-letter queue; then
 * `tools/_outage_worker.ts` through a store outage, from the jobs queue to
 * its dead-letter queue and back to a resolved intent. A workerd that cannot
 * run is told apart from a Worker that fails to load: the first says to
 * delete the cache, the second prints workerd's own output (its `Uncaught`
 * line) and blames the code (`tools/_workerd_start.mjs`).
 *
 * `deno task worker-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { CheckError, ROOT, runMain } from "./_check.ts";
import { bundle, npmInstall, requireNode, run } from "./_npm_cache.ts";

/** The pinned Miniflare; its workerd is 1.20260730.1. */
export const MINIFLARE_VERSION = "4.20260730.0";
/** The compatibility date the Worker runs with. */
export const COMPATIBILITY_DATE = "2026-07-30";

/**
 * How long the Node side may run: longer than its own waits (up to about
 * two minutes per compatibility setting) plus workerd's start, so its own
 * message says what went wrong whenever it can.
 */
const WORKER_CHECK_TIMEOUT_MS = 6 * 60_000;

/**
 * The check: the Worker bundled, then run on workerd by
 * `tools/_worker_check.mjs` under Node.
 *
 * @returns The exit code: 0 if every step passed.
 * @throws {CheckError} If a setup step fails (install, bundle, Node, the deadline).
 */
async function workerCheck(): Promise<number> {
  await requireNode();
  const cache = await npmInstall("miniflare", MINIFLARE_VERSION);
  let workerd: { version: string };
  try {
    workerd = JSON.parse(
      await Deno.readTextFile(`${cache}/node_modules/workerd/package.json`),
    );
  } catch (error) {
    throw new CheckError(
      `the cached miniflare has no readable workerd: delete ${cache} and run again`,
      { cause: error },
    );
  }
  console.log(
    `worker-check: miniflare ${MINIFLARE_VERSION}, workerd ${workerd.version}, compatibility date ${COMPATIBILITY_DATE}`,
  );
  const dir = await Deno.makeTempDir({ prefix: "relayer_worker_check_" });
  let code = 1;
  try {
    await bundle("examples/cloudflare/worker.ts", `${dir}/worker.js`, {
      platform: "browser",
      external: ["cloudflare:workers"],
    });
    await bundle("tools/_outage_worker.ts", `${dir}/outage.js`, {
      platform: "browser",
    });
    await Deno.copyFile(
      `${ROOT}tools/_worker_check.mjs`,
      `${dir}/worker_check.mjs`,
    );
    await Deno.copyFile(
      `${ROOT}tools/_workerd_start.mjs`,
      `${dir}/_workerd_start.mjs`,
    );
    await Deno.symlink(`${cache}/node_modules`, `${dir}/node_modules`);
    ({ code } = await run("node", ["worker_check.mjs"], {
      cwd: dir,
      env: {
        WORKER_SCRIPT: "worker.js",
        OUTAGE_SCRIPT: "outage.js",
        COMPAT_DATE: COMPATIBILITY_DATE,
        GOLDEN: `${ROOT}testdata/poison_job.golden.txt`,
        MINIFLARE_CACHE: cache,
      },
      label: "the Worker on workerd (node worker_check.mjs)",
      timeoutMs: WORKER_CHECK_TIMEOUT_MS,
      inherit: true,
    }));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  console.log(`worker-check: ${code === 0 ? "ok" : "FAILED"}`);
  return code;
}

if (import.meta.main) await runMain("worker-check", workerCheck);
