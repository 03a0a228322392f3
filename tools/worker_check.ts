/**
 * Proves the module runs on Cloudflare Workers: bundles
 * `examples/cloudflare/worker.ts` with `deno bundle` (one bundle graph, so
 * every class exists once), installs the npm package `miniflare` (pinned;
 * it brings workerd) into a cache outside the repository, and runs the
 * Worker on workerd with and without `nodejs_compat`: signed QStash and
 * generic deliveries, the seed's three payments through Cloudflare Queues
 * (their end states must be the golden's), and the dead-letter queue.
 *
 * `deno task worker-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { bundle, npmInstall } from "./_npm_cache.ts";

/** The pinned Miniflare; its workerd is 1.20260730.1. */
export const MINIFLARE_VERSION = "4.20260730.0";
/** The compatibility date the Worker runs with. */
export const COMPATIBILITY_DATE = "2026-07-30";

const ROOT = new URL("..", import.meta.url).pathname;

if (import.meta.main) {
  const cache = await npmInstall("miniflare", MINIFLARE_VERSION);
  const workerd = JSON.parse(
    await Deno.readTextFile(`${cache}/node_modules/workerd/package.json`),
  ) as { version: string };
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
    await Deno.copyFile(
      `${ROOT}tools/_worker_check.mjs`,
      `${dir}/worker_check.mjs`,
    );
    await Deno.symlink(`${cache}/node_modules`, `${dir}/node_modules`);
    const child = new Deno.Command("node", {
      args: ["worker_check.mjs"],
      cwd: dir,
      env: {
        WORKER_SCRIPT: "worker.js",
        COMPAT_DATE: COMPATIBILITY_DATE,
        GOLDEN: `${ROOT}testdata/poison_job.golden.txt`,
      },
      stdin: "null",
    }).spawn();
    code = (await child.status).code;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  console.log(`worker-check: ${code === 0 ? "ok" : "FAILED"}`);
  Deno.exit(code);
}
