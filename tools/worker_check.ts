/**
 * Proves the module runs on Cloudflare Workers: bundles
 * `examples/cloudflare/worker.ts` with `deno bundle` (one bundle graph, so
 * every class exists once), installs the npm package `miniflare` (pinned;
 * it brings workerd) into a cache outside the repository, and runs the
 * Worker on workerd with and without `nodejs_compat` (without, its policy,
 * `SENDER_TIMEOUT` and `RELAYER_INSECURE_DEV` as wrangler.toml's `[vars]`
 * written unquoted: JSON bindings, numbers and booleans; and two such
 * values it must refuse at start, `RELAYER_INSECURE_DEV = true` and a
 * `WEBHOOK_SECRET` past 2^53, each with its `Uncaught` line; and a
 * `CLOUDFLARE_MESSAGE_RETENTION` the queue handler refuses, alone and with
 * a `CLOUDFLARE_DELIVERY_DELAY` it counts, refused at start too, by
 * `workerConfig` in the Worker's global scope, naming the setting; and
 * settings only
 * `main.ts` reads, with values it refuses, which the Worker starts beside
 * and names once, on its first request): signed QStash and
 * generic deliveries, QStash's failure callback, a Pub/Sub push and a push
 * from Pub/Sub's dead-letter topic (Google's RS256 tokens, the keys fetched
 * from Google's URL, which Miniflare's outbound service answers with a test
 * key), forgeries only the signature check refuses (a wrong MAC, or another
 * secret's, at the current time; QStash's claims signed with another key;
 * Google's claims and `kid` signed by another RSA key), QStash bodies
 * signed over their bytes (a job after a byte order mark taken; bytes that
 * are not UTF-8 answered 489 and kept as an unreadable letter naming their
 * intent, by Content-Length or chunked, and so by the failure callback,
 * and as a Cloudflare Queues message on either queue acked unread and kept
 * so too; a job after a byte order mark sent through the producer as
 * `"text"` and as `"bytes"` delivered as its job), the seed's three
 * payments through Cloudflare Queues
 * (their end states must be the golden's), and the dead-letter queue;
 * bodies held back under `BODY_TIMEOUT` 1s, two overlapping and one begun
 * after the first was answered, each answered 408 in time, on the check's
 * compatibility date and on 2022-01-01, before Workers had a `navigator`
 * (a read's timer belongs to its own request there: one timer shared by
 * every read ended with the request that set it, and the later reads
 * waited on); then
 * `tools/_outage_worker.ts` through a store outage, from the jobs queue to
 * its dead-letter queue and back to a resolved intent; that message must
 * reach the dead-letter queue with its `message.id` (what the give-up
 * marks), and a late copy of it on the jobs queue (a `queue` event with
 * that id) must be acked and send nothing, where a message with another id
 * sends; and a consumer that throws (the handler never runs) must get each
 * message back after the consumer's `retryDelay`, and one that retries
 * with `delaySeconds` after that delay, whatever its `retryDelay`
 * (what `wrangler.toml`'s `retry_delay` rests on); and `qstashPublisher`,
 * built in a Worker's global scope (`tools/_publish_worker.ts`): a publish
 * taken, a 429's wait, a late answer failed near its bound, nothing
 * written to the Worker's output. The policy's delays
 * are 3 s, longer than the consumers' batch timeout (1 s), and the wait
 * from the queue letting a retried job go to its next delivery must show
 * them (at least 3 s, under twice that and the batch timeout): a
 * `message.retry()` without `delaySeconds` comes back at the next batch.
 * Then `PostgresStore`
 * on workerd: `examples/cloudflare/postgres_worker.ts` as it is, wrapped by
 * `tools/_postgres_worker.ts`, reaching the server through Miniflare's local
 * Hyperdrive, with `nodejs_compat`, bundled with
 * postgres.js's Workers build (`cloudflare:sockets`; the bundle is checked
 * to be it), against a real PostgreSQL server it starts (Debian's
 * `postgresql` binaries; where they are missing it says so, and under
 * `CI=true` it fails), a client per request and one app per isolate: what
 * the app keeps across requests (20 `GET /readyz` at once open at most 2
 * server sessions, 10 pushes with made-up `kid`s fetch Google's keys at
 * most once, a forged Google token is refused), `migrate()`, the ops
 * routes, a signed delivery, its replay and a forgery, the
 * store's write-ahead and refusals called directly (one of them a
 * write-ahead refused by its message's give-up mark), the seed's three
 * payments on Miniflare's local Queues and a give-up on the dead-letter
 * queue, each end state read back by a new workerd from the database, and
 * no session PostgreSQL counts as dropped without its client ended; and the
 * example's client over `verify-full` TLS on a second server whose
 * certificate names `127.0.0.1` alone, its CA the local workerd's only
 * trust (`SSL_CERT_FILE`): taken at that address, refused by `localhost`. A
 * workerd that cannot run is told apart from a Worker that fails to load:
 * the first says to delete the cache, the second prints workerd's own
 * output (its `Uncaught` line) and blames the code
 * (`tools/_workerd_start.mjs`).
 *
 * The steps wait on real queues and timers far more than they compute, so
 * they run side by side, each on a workerd of its own: the Node side runs
 * four at once (each step's lines together, in a fixed order), and the
 * PostgreSQL part runs beside it, its lines printed after. The Worker's
 * steps run with `LEASE` 15 s (and `SENDER_TIMEOUT` 5 s, as `LEASE` must
 * be at least twice it), so the redriven job waits out a shorter lease;
 * that its first delivery was busy is checked, not assumed.
 *
 * `deno task worker-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { CheckError, ROOT, runMain } from "./_check.ts";
import {
  bundle,
  denoInfo,
  npmInstall,
  requireNode,
  run,
} from "./_npm_cache.ts";
import { withPostgres } from "./_postgres_check.ts";
import {
  type OwnedPostgresServer,
  postgresBinDir,
  startPostgres,
} from "../support/postgres_server.ts";
import { testCertificates } from "../support/test_tls.ts";
import { resendProbe } from "./_resend_probe.ts";

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
 * The file of postgres.js's Workers build (its package's `workerd` export)
 * in Deno's npm cache, for the version `deno.json` pins: found with
 * `deno info`, wherever `DENO_DIR` puts the cache.
 *
 * @throws {CheckError} If `deno info` fails or names no such file.
 */
async function postgresWorkersBuild(): Promise<string> {
  const todo =
    "run `deno info --json postgres` from the repository root to see why";
  const info = await denoInfo("postgres");
  const pkg = info.modules.find((module) => module.kind === "npm")?.npmPackage;
  const dir = pkg === undefined ? undefined : info.npmPackages[pkg]?.localPath;
  const file = `${dir}/cf/src/index.js`;
  try {
    if (dir !== undefined && (await Deno.stat(file)).isFile) return file;
  } catch {
    // Said below.
  }
  throw new CheckError(
    `postgres.js's Workers build is not at ${file}: ${todo}`,
  );
}

/**
 * Refuses, before anything runs, a machine where the PostgreSQL part will
 * run (its server binaries are here, or `CI=true` asks for it) but
 * `openssl`, which makes the certificates of its TLS step, is missing:
 * found only after the Worker's steps, it failed the check as an
 * unexpected error.
 *
 * @throws {CheckError} If `openssl` does not run, naming what to install.
 */
export async function requireOpenssl(): Promise<void> {
  if (Deno.env.get("CI") !== "true" && await postgresBinDir() === null) {
    return;
  }
  let runs = false;
  try {
    runs = (await new Deno.Command("openssl", {
      args: ["version"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output()).success;
  } catch {
    // Not found, or not runnable: said below.
  }
  if (!runs) {
    throw new CheckError(
      "no openssl on the PATH, and the PostgreSQL part's TLS step (workerd to a server under sslmode=verify-full) makes its certificates with it: install it (Debian's openssl package: apt-get install openssl) and run again",
    );
  }
}

/**
 * `PostgresStore` on workerd: `tools/_postgres_worker.ts` bundled with
 * postgres.js's Workers build, run on workerd by `tools/_worker_check.mjs`
 * against the server at `url`.
 *
 * It runs beside the Worker's own steps, so what it says is collected in
 * `said` (printed after them) rather than printed as it comes.
 *
 * @param dir The check's temp dir (the Node side and `node_modules` are there).
 * @param cache The cached miniflare's folder, named when it looks broken.
 * @param url The PostgreSQL server.
 * @param said Where its output goes, line by line.
 * @returns Whether every step passed.
 */
async function postgresOnWorkerd(
  dir: string,
  cache: string,
  url: string,
  said: string[],
): Promise<boolean> {
  // `deno bundle` has no --conditions: the import map stands in for the
  // `workerd` export condition, which picks the Workers build. It replaces
  // deno.json's imports, so it carries them (a relative one made absolute,
  // as the map lives elsewhere) and the package's own exports, which the
  // example imports by name.
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    name: string;
    imports: Record<string, string>;
    exports: Record<string, string>;
  };
  const root = pathToFileURL(ROOT);
  const absolute = (target: string) =>
    target.startsWith("./") || target.startsWith("../")
      ? new URL(target, root).href
      : target;
  const imports: Record<string, string> = {};
  for (const [name, target] of Object.entries(config.imports)) {
    imports[name] = absolute(target);
  }
  for (const [path, file] of Object.entries(config.exports)) {
    imports[`${config.name}${path.slice(1)}`] = absolute(file);
  }
  imports.postgres = pathToFileURL(await postgresWorkersBuild()).href;
  // Beside the repository's temp dirs: kept if the bundle fails, so the
  // command its error gives can be run.
  const map = `${dir}/import_map.json`;
  await Deno.writeTextFile(map, JSON.stringify({ imports }, null, 2));
  try {
    await bundle("tools/_postgres_worker.ts", `${dir}/postgres_worker.js`, {
      platform: "browser",
      external: ["cloudflare:sockets", "cloudflare:workers"],
      importMap: map,
    });
  } catch (error) {
    const kept = await Deno.makeTempFile({
      prefix: "relayer_worker_check_import_map_",
      suffix: ".json",
    });
    await Deno.copyFile(map, kept);
    throw new CheckError(
      `${
        (error as Error).message.replaceAll(map, kept)
      } (the import map is kept at ${kept})`,
      { cause: error },
    );
  }
  // The Workers build, not the Node build (which workerd would also run
  // under nodejs_compat): sockets from cloudflare:sockets (imported when the
  // first connection opens), none from node:net or node:tls.
  const bundled = await Deno.readTextFile(`${dir}/postgres_worker.js`);
  if (
    !/(?:from |import\()\s*["']cloudflare:sockets["']/.test(bundled) ||
    /(?:from |import\()\s*["']node:(?:net|tls)["']/.test(bundled)
  ) {
    throw new CheckError(
      "the PostgreSQL Worker's bundle is not postgres.js's Workers build (no cloudflare:sockets, or node:net and node:tls): check the import map in tools/worker_check.ts",
    );
  }
  // And a server over TLS whose certificate names its IP address alone,
  // its CA the only one workerd trusts (SSL_CERT_FILE, which workerd's TLS
  // reads in place of the system's): the example at an address.
  const certificates = await testCertificates(["127.0.0.1"]);
  let tlsServer: OwnedPostgresServer | undefined;
  let code: number;
  let out: string;
  try {
    tlsServer = await startPostgres({ tls: certificates });
    ({ code, out } = await run("node", ["worker_check.mjs"], {
      cwd: dir,
      env: {
        POSTGRES_SCRIPT: "postgres_worker.js",
        DATABASE_URL: url,
        TLS_DATABASE_URL: `${tlsServer.url}?sslmode=verify-full`,
        SSL_CERT_FILE: certificates.caFile,
        COMPAT_DATE: COMPATIBILITY_DATE,
        GOLDEN: `${ROOT}testdata/poison_job.golden.txt`,
        MINIFLARE_CACHE: cache,
      },
      label: "PostgresStore on workerd (node worker_check.mjs)",
    }));
  } finally {
    await tlsServer?.stop();
    await certificates.remove();
  }
  said.push(...out.trimEnd().split("\n").filter(Boolean));
  if (code !== 0) return false;
  // Every client the Worker opened was ended (its Terminate sent), not
  // dropped with the request: PostgreSQL counts the dropped ones.
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const [row] = await sql<{ abandoned: number }[]>`
      SELECT sessions_abandoned::int AS abandoned FROM pg_stat_database
      WHERE datname = current_database()`;
    if (row?.abandoned !== 0) {
      said.push(
        `worker-check: FAIL ${row?.abandoned} PostgreSQL sessions of the Worker were dropped, not ended: end each request's client (ctx.waitUntil(sql.end()))`,
      );
      return false;
    }
    said.push(
      "  [PostgresStore, nodejs_compat] every client the Worker opened was ended: PostgreSQL counts no abandoned session",
    );
    return true;
  } finally {
    await sql.end();
  }
}

/**
 * The check: the Worker bundled, then run on workerd by
 * `tools/_worker_check.mjs` under Node; then `PostgresStore` on workerd.
 *
 * @returns The exit code: 0 if every step passed.
 * @throws {CheckError} If a setup step fails (openssl, install, bundle, Node, the deadline).
 */
async function workerCheck(): Promise<number> {
  await requireOpenssl();
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
  // Interrupted, the dir goes too (the PostgreSQL server's watchdog stops it).
  const interrupted = (signal: "SIGINT" | "SIGTERM") => () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // gone already
    }
    Deno.exit(signal === "SIGINT" ? 130 : 143);
  };
  const listeners = (["SIGINT", "SIGTERM"] as const).map((signal) => {
    const listener = interrupted(signal);
    Deno.addSignalListener(signal, listener);
    return [signal, listener] as const;
  });
  let ok = false;
  // Whether the PostgreSQL part ran: a skip must show in the last line.
  let postgresRan = false;
  // The PostgreSQL part, once begun (it never rejects: its error is kept),
  // and what it said.
  let postgresPart: Promise<{ passed: boolean; error: unknown }> | undefined;
  const said: string[] = [];
  try {
    await bundle("examples/cloudflare/worker.ts", `${dir}/worker.js`, {
      platform: "browser",
      external: ["cloudflare:workers"],
    });
    await bundle("tools/_outage_worker.ts", `${dir}/outage.js`, {
      platform: "browser",
    });
    await bundle("tools/_publish_worker.ts", `${dir}/publish.js`, {
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
    // PostgresStore on workerd runs beside the Worker's steps (each waits
    // on queues more than it computes); what it says follows theirs.
    postgresPart = withPostgres(
      "worker-check: PostgresStore on workerd",
      (url) => {
        postgresRan = true;
        return postgresOnWorkerd(dir, cache, url, said);
      },
    ).then(
      (passed) => ({ passed, error: undefined }),
      (error: unknown) => ({ passed: false, error }),
    );
    const { code } = await run("node", ["worker_check.mjs"], {
      cwd: dir,
      env: {
        WORKER_SCRIPT: "worker.js",
        OUTAGE_SCRIPT: "outage.js",
        PUBLISH_SCRIPT: "publish.js",
        COMPAT_DATE: COMPATIBILITY_DATE,
        GOLDEN: `${ROOT}testdata/poison_job.golden.txt`,
        MINIFLARE_CACHE: cache,
      },
      label: "the Worker on workerd (node worker_check.mjs)",
      timeoutMs: WORKER_CHECK_TIMEOUT_MS,
      inherit: true,
    });
    ok = code === 0;
    // A send whose kept-alive connection dies after carrying it is sent once.
    ok = await resendProbe(dir, [{
      label: `workerd ${workerd.version}`,
      command: "node",
      workerd: { compatibilityDate: COMPATIBILITY_DATE },
    }]) && ok;
    const postgresResult = await postgresPart;
    for (const line of said.splice(0)) console.log(line);
    if (postgresResult.error !== undefined) throw postgresResult.error;
    ok = postgresResult.passed && ok;
  } finally {
    // A setup step that failed meanwhile leaves it running: it ends (and
    // stops its server) before the dir it runs in goes.
    await postgresPart;
    for (const line of said.splice(0)) console.log(line);
    for (const [signal, listener] of listeners) {
      Deno.removeSignalListener(signal, listener);
    }
    await Deno.remove(dir, { recursive: true });
  }
  console.log(
    `worker-check: ${
      !ok ? "FAILED" : postgresRan ? "ok" : "ok, PostgreSQL part SKIPPED"
    }`,
  );
  return ok ? 0 : 1;
}

if (import.meta.main) {
  await runMain("worker-check", workerCheck, { args: Deno.args });
}
