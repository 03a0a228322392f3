/**
 * Proves the module runs on Bun: installs the npm package `bun` (pinned)
 * into a cache outside the repository, runs the demo from source under Bun
 * and compares it with the golden output byte for byte, then serves the
 * webhook under `Bun.serve` from one `deno bundle` of
 * `tools/_bun_webhook.ts` (Bun ignores `deno.json`'s import map; one bundle
 * graph, so every class exists once) and answers signed QStash and generic
 * deliveries, QStash's failure callback, a Pub/Sub push and a push from
 * Pub/Sub's dead-letter topic (Google's keys fetched by `googleJwks` from a
 * stand-in), each exactly, publishes a job with `qstashPublisher` to a
 * stand-in of QStash's API, keeps a push and a QStash
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
 * own streams against that server (`tools/_postgres_socket_probe.ts`),
 * and docs/api.md's Bun service there, from the tarball its "From Node"
 * describes, added with `bun add` and run as `bun service.ts`; and
 * docs/queues.md's `bun build` of `postgres_worker.ts` for workerd, run on
 * Miniflare (worker-check's pin) with `wrangler.toml` as its options and
 * `DATABASE_URL` that server: a signed delivery, a job settled, one
 * declared poison (wrangler-check's walk).
 *
 * `deno task bun-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { signer } from "../examples/signer_stub.ts";
import { PostgresStore } from "../store/postgres.ts";
import { errorLine, ROOT, runMain } from "./_check.ts";
import {
  bundle,
  cachedVersion,
  cacheRoot,
  npmInstall,
  requireNode,
  run,
} from "./_npm_cache.ts";
import { withPostgres } from "./_postgres_check.ts";
import { resendProbe } from "./_resend_probe.ts";
import { socketProbe } from "./_postgres_socket_probe.ts";
import { apiBlock, runDocsService } from "./_docs_service_run.ts";
import {
  devVars,
  migrateScriptRun,
  packTarball,
  refusalUnseen,
  walk,
} from "./wrangler_check.ts";
import { COMPATIBILITY_DATE, MINIFLARE_VERSION } from "./worker_check.ts";

/** The pinned Bun. */
export const BUN_VERSION = "1.4.5";

/**
 * docs/api.md's Bun service on PostgreSQL, run as its "From Bun" says:
 * the tarball and the docs' `postgres` added with `bun add` to a project
 * of its own, `bun service.ts` (Bun runs the package's TypeScript as it
 * is), on the server at `url`; `runDocsService`'s checks.
 *
 * @returns Whether it held.
 */
async function bunService(
  bun: string,
  env: Record<string, string>,
  dir: string,
  url: string,
  version: string,
): Promise<boolean> {
  const label =
    `[bun service.ts] docs/api.md's Bun service from the tarball on Bun ${version}`;
  const docs = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const source = apiBlock(docs, "From Bun", "new PostgresStore(");
  const pin = /`bun add postgres@(\d+\.\d+\.\d+)`/.exec(docs)?.[1];
  if (source === undefined || pin === undefined) {
    console.log(
      `bun-check: FAIL ${label}: docs/api.md's From Bun has no service on PostgresStore, or no \`bun add postgres@<version>\``,
    );
    return false;
  }
  await Deno.mkdir(`${dir}/tarball`);
  const tarball = await packTarball(`${dir}/tarball`);
  const project = `${dir}/bun_service`;
  await Deno.mkdir(project);
  await Deno.writeTextFile(
    `${project}/package.json`,
    JSON.stringify({ name: "relayer-service", private: true, type: "module" }),
  );
  for (const what of [tarball, `postgres@${pin}`]) {
    const added = await run(bun, ["add", what], {
      cwd: project,
      env,
      label: `bun add ${what}`,
    });
    if (added.code !== 0) {
      console.log(
        `bun-check: FAIL ${label}: bun add ${what} failed (${
          errorLine(added.out)
        }): check that the npm registry answers (npm ping), then run again`,
      );
      return false;
    }
  }
  // docs/queues.md's migration script, run as step 3 says: `bun migrate.mts`.
  const migrated = await migrateScriptRun(project, url, [bun]);
  console.log(
    migrated === undefined
      ? "  [bun migrate.mts] docs/queues.md's migration script from the tarball: exit 0, the store's schema made on a new database"
      : `bun-check: FAIL [bun migrate.mts] ${migrated}`,
  );
  const built = await bunBuild(bun, env, project, url) &&
    migrated === undefined;
  const wrong = await runDocsService({
    source,
    project,
    command: bun,
    args: [],
    env,
    databaseUrl: url,
    opsToken: "bun-check-ops-0123456789",
    webhookSecret: "bun-check-secret-0123456789",
  });
  console.log(
    wrong === undefined
      ? `  ${label}: RELAYER_INSECURE_DEV refused off loopback and with a public PUBLIC_URL, naming bun service.ts; its two start lines, /readyz 200, an intent created (201), its drain said and exit 0 on SIGTERM`
      : `bun-check: FAIL ${label}: ${wrong}`,
  );
  return wrong === undefined && built;
}

/**
 * docs/queues.md's `bun build` of `postgres_worker.ts` without Wrangler, in
 * `project` (the tarball and `postgres` added): as written, it must bundle
 * postgres.js's Workers build (`cloudflare:sockets`, no `node:net`), and
 * without `--conditions=workerd` it must fail on `perf_hooks`, as the docs
 * say. Then that bundle runs on Miniflare (`bundleOnMiniflare`).
 *
 * @returns Whether it held.
 */
async function bunBuild(
  bun: string,
  env: Record<string, string>,
  project: string,
  url: string,
): Promise<boolean> {
  const label = "[bun build] docs/queues.md's postgres_worker.ts for workerd";
  const docs = await Deno.readTextFile(`${ROOT}docs/queues.md`);
  const command = /`bun build (postgres_worker\.ts [^`]*)`/.exec(docs)?.[1];
  if (command === undefined) {
    console.log(
      `bun-check: FAIL ${label}: docs/queues.md has no \`bun build postgres_worker.ts …\``,
    );
    return false;
  }
  const args = ["build", ...command.split(" ").map((a) => a.replace(/'/g, ""))];
  const out = /--outfile=(\S+)/.exec(command)?.[1];
  await Deno.copyFile(
    `${ROOT}examples/cloudflare/postgres_worker.ts`,
    `${project}/postgres_worker.ts`,
  );
  const ran = await run(bun, args, { cwd: project, env, label: "bun build" });
  const bundled = ran.code === 0 && out !== undefined
    ? await Deno.readTextFile(`${project}/${out}`)
    : "";
  if (
    !/(?:from |import\()\s*["']cloudflare:sockets["']/.test(bundled) ||
    /(?:from |import\()\s*["']node:(?:net|tls)["']/.test(bundled)
  ) {
    console.log(
      `bun-check: FAIL ${label}: ${
        ran.code === 0
          ? `${out} is not postgres.js's Workers build (no cloudflare:sockets, or node:net)`
          : errorLine(ran.out)
      }`,
    );
    return false;
  }
  const without = args.filter((a) => a !== "--conditions=workerd");
  const wrong = refusalUnseen(
    { doc: "docs/queues.md", text: docs, quote: "perf_hooks" },
    await run(bun, without, { cwd: project, env, label: "bun build" }),
  );
  console.log(
    wrong === undefined
      ? `  ${label}: bundled as written (cloudflare:sockets, no node:net), refused on perf_hooks without --conditions=workerd`
      : `bun-check: FAIL ${label} without --conditions=workerd: ${wrong}`,
  );
  const served = await bundleOnMiniflare(`${project}/${out}`, url);
  return wrong === undefined && served;
}

/** The options docs/queues.md says to give Miniflare for a bundle. */
interface MiniflareOptions {
  bindings: Record<string, string>;
  queueProducers: Record<string, { queueName: string }>;
  queueConsumers: Record<
    string,
    { maxRetries?: number; deadLetterQueue?: string; retryDelay?: number }
  >;
}

/**
 * What docs/queues.md says to give Miniflare, which does not read
 * `wrangler.toml`: its `[vars]` (and the secrets, added by the caller) as
 * `bindings`, each producer in `queueProducers` and each consumer in
 * `queueConsumers` with its `maxRetries`, `deadLetterQueue` and
 * `retryDelay`. Reads the flat subset of TOML `wrangler.toml` is written in.
 */
function miniflareOptions(toml: string): MiniflareOptions {
  const options: MiniflareOptions = {
    bindings: {},
    queueProducers: {},
    queueConsumers: {},
  };
  let table = "";
  let entry: Record<string, string | number> = {};
  const flush = () => {
    if (table === "queues.producers") {
      options.queueProducers[String(entry.binding)] = {
        queueName: String(entry.queue),
      };
    } else if (table === "queues.consumers") {
      options.queueConsumers[String(entry.queue)] = {
        ...(entry.max_retries === undefined
          ? {}
          : { maxRetries: Number(entry.max_retries) }),
        ...(entry.dead_letter_queue === undefined
          ? {}
          : { deadLetterQueue: String(entry.dead_letter_queue) }),
        ...(entry.retry_delay === undefined
          ? {}
          : { retryDelay: Number(entry.retry_delay) }),
      };
    }
    entry = {};
  };
  for (const line of toml.split("\n")) {
    const header = /^\[{1,2}([\w.]+)\]{1,2}/.exec(line);
    if (header) {
      flush();
      table = header[1]!;
      continue;
    }
    const pair = /^(\w+)\s*=\s*("[^"]*"|\d+)/.exec(line);
    if (!pair) continue;
    const value = pair[2]!.startsWith('"')
      ? pair[2]!.slice(1, -1)
      : Number(pair[2]);
    if (table === "vars") options.bindings[pair[1]!] = String(value);
    else entry[pair[1]!] = value;
  }
  flush();
  return options;
}

/**
 * The `bun build` bundle run as docs/queues.md says, without Wrangler: on
 * Miniflare (worker-check's pin, under the Node on PATH), given
 * `wrangler.toml` as options (`miniflareOptions`), with `nodejs_compat` as
 * step 3 sets, the secrets and `DATABASE_URL` (the server at `url`,
 * migrated first) as bindings and the signer stub as `SENDER_URL`; then
 * wrangler-check's walk through it (`walk`): a signed delivery waits for
 * its confirmation, the job put on Miniflare's local queue settles its
 * intent, a job the signer declares not sent fails its intent with a dead
 * letter.
 *
 * @returns Whether it held.
 */
async function bundleOnMiniflare(
  script: string,
  url: string,
): Promise<boolean> {
  const label =
    "[bun build → Miniflare] docs/queues.md's postgres_worker.ts bundle";
  const began = Date.now();
  await requireNode();
  const cache = await npmInstall("miniflare", MINIFLARE_VERSION);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await new PostgresStore(sql).migrate();
  } finally {
    await sql.end();
  }
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    signer,
  );
  const dir = await Deno.makeTempDir({ prefix: "relayer_bun_miniflare_" });
  let child: Deno.ChildProcess | undefined;
  let said = "";
  try {
    await Deno.symlink(`${cache}/node_modules`, `${dir}/node_modules`);
    await Deno.copyFile(
      `${ROOT}tools/_bun_bundle_miniflare.mjs`,
      `${dir}/run.mjs`,
    );
    // Beside the runner: workerd names a module by its path from the
    // working directory, and refuses one above it ("..").
    await Deno.copyFile(script, `${dir}/worker.js`);
    const options = miniflareOptions(
      await Deno.readTextFile(`${ROOT}examples/cloudflare/wrangler.toml`),
    );
    for (
      const line of devVars(`http://127.0.0.1:${server.addr.port}`).split(
        "\n",
      )
    ) {
      const at = line.indexOf("=");
      if (at > 0) options.bindings[line.slice(0, at)] = line.slice(at + 1);
    }
    options.bindings.DATABASE_URL = url;
    child = new Deno.Command("node", {
      args: ["run.mjs"],
      cwd: dir,
      env: {
        SCRIPT: "worker.js",
        COMPAT_DATE: COMPATIBILITY_DATE,
        MINIFLARE_OPTIONS: JSON.stringify(options),
      },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const decoder = new TextDecoder();
    const drained = [child.stdout, child.stderr].map((stream) =>
      stream.pipeTo(
        new WritableStream({
          write: (chunk) => {
            said += decoder.decode(chunk, { stream: true });
          },
        }),
      )
    );
    let ended = false;
    const status = child.status.finally(() => ended = true);
    const deadline = Date.now() + 60_000;
    while (!ended && !/^ready /m.test(said) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const base = /^ready (\S+)/m.exec(said)?.[1];
    const wrong = base === undefined
      ? [`Miniflare did not serve it: ${errorLine(said)}`]
      : await walk(base, "bb");
    await child.stdin.close();
    const timer = setTimeout(() => child?.kill("SIGKILL"), 10_000);
    await status;
    clearTimeout(timer);
    await Promise.all(drained);
    child = undefined;
    for (const line of wrong) console.log(`bun-check: FAIL ${label}: ${line}`);
    if (wrong.length === 0) {
      console.log(
        `  ${label} on Miniflare ${MINIFLARE_VERSION} with wrangler.toml as options: a signed delivery waited for its confirmation, its queued job settled the intent, a job not sent failed its intent with a dead letter (${
          ((Date.now() - began) / 1000).toFixed(1)
        } s)`,
      );
    } else if (said.trim()) {
      console.log(said.trimEnd());
    }
    return wrong.length === 0;
  } finally {
    if (child !== undefined) {
      child.kill("SIGKILL");
      await child.status;
    }
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

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
        "bun-check: Bun.serve answered the signed QStash and generic deliveries, QStash's failure callback, both Pub/Sub pushes (Google's keys fetched by googleJwks) and /readyz (and HEAD /readyz with its GET's Content-Length), and refused the forged generic, QStash and Pub/Sub deliveries with 401; kept a push (204) and a QStash message (489) over the limit as dead letters, by Content-Length or chunked, and nothing of a push whose client left mid-body; took a QStash job after a byte order mark and kept one signed over bytes that are not UTF-8 (489) as an unreadable letter naming its intent, as did its failure callback; qstashPublisher published a job to QStash's API with its retries and failure callback",
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
      // The docs' service from the tarball, as an adopter runs it.
      const service = await bunService(bun, env, dir, url, version);
      return contract && socket && service;
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

if (import.meta.main) {
  await runMain("bun-check", bunCheck, { args: Deno.args });
}
