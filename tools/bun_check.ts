/**
 * Proves the module runs on Bun: installs the npm package `bun` (pinned)
 * into a cache outside the repository, runs the demo from source under Bun
 * and compares it with the golden output byte for byte, then serves the
 * webhook under `Bun.serve` from one `deno bundle` of
 * `tools/_bun_webhook.ts` (Bun ignores `deno.json`'s import map; one bundle
 * graph, so every class exists once) and answers signed QStash and generic
 * deliveries, QStash's failure callback, a Pub/Sub push and a push from
 * Pub/Sub's dead-letter topic, each exactly, keeps a push and a QStash
 * message over the limit as dead letters (204, and 489), and nothing of a
 * push whose client left mid-body, takes a QStash job after a byte order
 * mark and keeps one signed over bytes that are not UTF-8 as an unreadable
 * letter naming its intent (489), and refuses forgeries that
 * only the signature check can catch (a wrong MAC at the current time,
 * QStash's and Google's claims signed with another key); then runs the store contract
 * on `PostgresStore` over postgres.js (bundled in) under `bun test`,
 * against a real PostgreSQL server it starts (Debian's `postgresql`
 * binaries; where they are missing it says so, in its last line too, and
 * under `CI=true` it fails), and `answeredSocketOption`'s socket on Bun's
 * own streams against that server (`tools/_postgres_socket_probe.ts`).
 *
 * `deno task bun-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { ROOT, runMain } from "./_check.ts";
import {
  bundle,
  cachedVersion,
  cacheRoot,
  npmInstall,
  run,
} from "./_npm_cache.ts";
import { withPostgres } from "./_postgres_check.ts";
import { resendProbe } from "./_resend_probe.ts";
import { socketProbe } from "./_postgres_socket_probe.ts";

/** The pinned Bun. */
export const BUN_VERSION = "1.4.5";

/**
 * The check: Bun's version, the demo from source, the webhook under
 * `Bun.serve`, `PostgresStore`'s contract under `bun test`.
 *
 * @returns The exit code: 0 if every step passed.
 * @throws {CheckError} If Bun cannot be installed or run, or the bundle fails.
 */
async function bunCheck(): Promise<number> {
  const cache = await npmInstall("bun", BUN_VERSION);
  const bun = `${cache}/node_modules/.bin/bun`;
  const broken = `the cached Bun is incomplete: delete ${cache} and run again`;
  // Bun's own caches stay out of the repository too.
  const env = {
    BUN_INSTALL_CACHE_DIR: `${cacheRoot()}/bun-install-cache`,
    BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
    NO_COLOR: "1",
  };
  const version = await cachedVersion({
    runtime: "Bun",
    pin: BUN_VERSION,
    expected: BUN_VERSION,
    command: bun,
    cache,
    env,
    ifNotStarting: "bun-check where Bun's official Linux binaries run",
  });
  console.log(`bun-check: Bun ${version}`);
  let ok = true;
  // Whether the PostgreSQL part ran: a skip must show in the last line,
  // which is all a glance at the output reads.
  let postgresRan = false;

  // The demo from source: Bun runs the TypeScript files as they are.
  const demo = await run(bun, ["run", "examples/poison_job.ts"], {
    cwd: ROOT,
    env,
    label: "bun run examples/poison_job.ts",
    ifMissing: broken,
  });
  const golden = await Deno.readTextFile(
    `${ROOT}testdata/poison_job.golden.txt`,
  );
  if (demo.code === 0 && demo.out === golden) {
    console.log("bun-check: demo from source matches the golden output");
  } else {
    ok = false;
    console.log(`bun-check: FAIL demo from source:\n${demo.out}`);
  }

  // The webhook under Bun.serve, from one bundle.
  const dir = await Deno.makeTempDir({ prefix: "relayer_bun_check_" });
  try {
    await bundle("tools/_bun_webhook.ts", `${dir}/webhook.js`, {
      platform: "browser",
    });
    const served = await run(bun, ["run", "webhook.js"], {
      cwd: dir,
      env,
      label: "bun run webhook.js (the webhook under Bun.serve)",
      ifMissing: broken,
    });
    console.log(served.out.trimEnd());
    if (served.code === 0) {
      console.log(
        "bun-check: Bun.serve answered the signed QStash and generic deliveries, QStash's failure callback, both Pub/Sub pushes and /readyz (and HEAD /readyz with its GET's Content-Length), and refused the forged generic, QStash and Pub/Sub deliveries with 401; kept a push (204) and a QStash message (489) over the limit as dead letters, by Content-Length or chunked, and nothing of a push whose client left mid-body; took a QStash job after a byte order mark and kept one signed over bytes that are not UTF-8 (489) as an unreadable letter naming its intent, as did its failure callback",
      );
    } else {
      ok = false;
      console.log("bun-check: FAIL webhook under Bun.serve");
    }
    // A send whose kept-alive connection dies after carrying it is sent once.
    ok = await resendProbe(dir, [
      { label: `Bun ${version}`, command: bun, args: ["run"], env },
    ]) && ok;

    // PostgresStore over postgres.js (bundled in), on a real server, under
    // Bun's own runner (the contract registers through bun:test).
    const title = "bun-check: PostgresStore contract under bun test";
    ok = await withPostgres(title, async (url, socketDir) => {
      postgresRan = true;
      await bundle("tests/node/pg_contract_node.ts", `${dir}/pg_contract.mjs`, {
        platform: "node",
      });
      const tested = await run(bun, ["test", "./pg_contract.mjs"], {
        cwd: dir,
        env: { ...env, RELAYER_PG_URL: url },
        label: "bun test pg_contract.mjs",
        ifMissing: broken,
      });
      const counts: Record<string, number> = {};
      for (const line of tested.out.split("\n")) {
        const found = /^ (\d+) (pass|skip|fail)$/.exec(line);
        if (found) counts[found[2]!] = Number(found[1]);
      }
      console.log(
        `${title}: ${counts.pass ?? 0} pass, ${counts.skip ?? 0} skip, ${
          counts.fail ?? 0
        } fail`,
      );
      // Passing means tests ran: only the commit-gap test (a KvStore hook) may skip.
      const contract = tested.code === 0 && !!counts.pass &&
        (counts.skip ?? 0) <= 1;
      if (!contract) console.log(tested.out);
      // answeredSocketOption's socket on Bun's own streams.
      const socket = await socketProbe(dir, url, socketDir, [
        { label: `Bun ${version}`, command: bun, args: ["run"], env },
      ]);
      return contract && socket;
    }) && ok;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  console.log(
    `bun-check: ${
      !ok ? "FAILED" : postgresRan ? "ok" : "ok, PostgreSQL part SKIPPED"
    }`,
  );
  return ok ? 0 : 1;
}

if (import.meta.main) await runMain("bun-check", bunCheck);
