/**
 * Webhook throughput, side by side in one run, repeated `--runs` times:
 *
 * - (a) a bare Hono app that answers 200;
 * - (f) a bare Hono app that asks the signer stub for one receipt per
 *   request and answers 503: the HTTP work a read-path delivery of (d)
 *   cannot avoid, with nothing of ours, so (d)'s bound on this machine;
 * - (b) our app on `MemoryStore`, with a scripted in-process Sender;
 * - (c) our app on `KvStore` over a SQLite file, same Sender;
 * - (d) `main.ts` as shipped: a separate process started with `deno serve`
 *   and the flags of `deno task start` (on a free port, writing only its
 *   temporary KV folder), `HttpSender` to the local signer stub
 *   (`examples/signer_stub.ts`, also started here), `KvStore` on a file,
 *   and its log line per delivery on stdout, a pipe this bench drains.
 *   Both children run this bench's own `deno` (`Deno.execPath()`) with a
 *   cleared environment: the settings (d) needs, and what the runtime
 *   needs to find its cache (see `childEnv`);
 * - (e) our app on `PostgresStore`, on a PostgreSQL server this run starts
 *   (loopback, a fresh schema per row; skipped without server binaries);
 * - (g) a diagnostic, read path only: (c) whose look-only deliveries keep
 *   no replay record, to price that record (DESIGN §15) on a file.
 *
 * (a), (f), (b), (c), (g) and (e) are served here on loopback, one at a time. All are
 * driven by the same load: the npm `autocannon`, run from Node
 * (`bench/http_load.mjs`), sending generic-route deliveries, each signed
 * afresh and each with its own signature (a replay would be a 401, except
 * in (g), which keeps no record of a look-only delivery).
 *
 * Two scenarios for each of (b)–(d):
 * - `read`: settling intents whose receipt stays pending, cycled through
 *   a pool: a delivery looks and answers 503 "waiting for … to confirm";
 *   its only write is the replay record;
 * - `write`: authorized intents, a fresh one for every request, never one
 *   twice: a delivery takes the lease, moves the intent to settling,
 *   broadcasts and records, and answers 503 "sent …". The load stops when
 *   the pool is used up or the time is over.
 *
 * Those 503s, with those reasons, are the intended retries (and (a)'s
 * 200 and (f)'s 503 their own fixed answers); anything else counts as an
 * error: another status, the app's own 503 "Delivery failed", a retry for
 * another reason, a connection error or a timeout.
 * On a SQLite file every commit waits for the disk, so each run also
 * measures the commit rate of a bare Deno KV file at the same
 * concurrency right before and right after each (c) and (d) row (their
 * mean is the ceiling), and reports (c) and (d) as a fraction of that
 * ceiling: deliveries/s × the store's writes per delivery (1 on the read
 * path, the replay record of a signed look; 2 on the write path) ÷
 * commits/s, the most an ungrouped store, one commit per write, could
 * serve. DESIGN §15 words it "commits per delivery", which was the same
 * number before `KvStore` grouped its commits; grouped, many writes share
 * one Deno KV commit, so the ratio counts writes, and a grouped store can
 * pass 100%. The Deno KV commits per delivery after grouping are counted
 * too and printed beside it; they do not enter the ratio. Writes and
 * commits are counted on (c)'s store; (d) runs the same store code in
 * another process, where neither is counted, and takes the writes per
 * delivery of (c)'s row of the same run and scenario (without row (c),
 * (d)'s ceiling column shows –).
 *
 * `deno task bench:http [--runs 3] [--seconds 8] [--connections 50] [--intents 20000] [--only a,f,b,c,g,d,e] [--kv-dir DIR] [--profile]`
 *
 * `--kv-dir DIR` puts the SQLite files of (c), (g), (d) and the commit-rate
 * measurement in DIR instead of the system's temporary folder. On a tmpfs
 * a commit waits for no disk, which shows what the CPU costs once commits
 * are not the bottleneck. Deno asks for `--allow-all` on paths under
 * `/dev`, so link a folder there: `mkdir -p /dev/shm/relayer && ln -sfn
 * /dev/shm/relayer /tmp/relayer_shm`, then `--kv-dir /tmp/relayer_shm`.
 *
 * `--profile` starts (d) with `--inspect` and prints where its CPU time
 * went during each load (V8's sampling profiler). The inspector slows it
 * down: profile in a separate run from the one whose figures you keep.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { MemoryStore, type Store } from "../mod.ts";
import postgres from "postgres";
import { type KvLike, KvStore } from "../store/kv.ts";
import { startArgs } from "../support/start_args.ts";
import { PostgresStore } from "../store/postgres.ts";
import {
  type OwnedPostgresServer,
  postgresBinDir,
  startPostgres,
} from "../support/postgres_server.ts";
import { createApp } from "../webhook/app.ts";
import {
  failuresOf,
  listFlag,
  median,
  perSecond,
  readArgs,
  spread,
  wholeFlag,
} from "./_measure.ts";
import {
  ANSWER_TEXT,
  type Scenario,
  scriptedSender,
  seedStore,
} from "./_scenarios.ts";
import {
  autocannonDir,
  childEnv,
  drain,
  listenedPort,
  LISTENING,
  type LoadResult,
  runLoad,
  SECRET,
  stop,
  waitFor,
} from "./_serve.ts";

/** The rows' ids, in the order they run. */
const IDS = ["a", "f", "b", "c", "g", "d", "e"] as const;

const { runs, seconds, connections, intents, only, profile, kvDir } = readArgs(
  "bench:http",
  () => {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        runs: { type: "string", default: "3" },
        seconds: { type: "string", default: "8" },
        connections: { type: "string", default: "50" },
        intents: { type: "string", default: "20000" },
        only: { type: "string", default: IDS.join(",") },
        "kv-dir": { type: "string" },
        profile: { type: "boolean", default: false },
      },
    });
    return {
      runs: wholeFlag("runs", values.runs),
      seconds: wholeFlag("seconds", values.seconds),
      connections: wholeFlag("connections", values.connections),
      intents: wholeFlag("intents", values.intents),
      only: new Set<string>(listFlag("only", values.only, IDS)),
      profile: values.profile,
      kvDir: values["kv-dir"],
    };
  },
  "[--runs 3] [--seconds 8] [--connections 50] [--intents 20000] [--only a,f,b,c,g,d,e] [--kv-dir DIR] [--profile]",
);
const root = new URL("..", import.meta.url).pathname;

function load(
  dir: string,
  port: number,
  scenario: Scenario,
  pool: number,
  expected: Expected,
): Promise<LoadResult> {
  return runLoad({
    dir,
    port,
    mode: scenario === "read" ? "cycle" : "fresh",
    pool,
    connections,
    seconds,
    ...expected,
  });
}

/** A fresh temporary folder for a Deno KV file (in `--kv-dir`, if given). */
function kvTempDir(): Promise<string> {
  return Deno.makeTempDir({
    prefix: "relayer_http_bench_",
    ...(kvDir === undefined ? {} : { dir: kvDir }),
  });
}

/**
 * A Deno KV file in a fresh temporary folder, its intents created through
 * the store's own `createIntent`, 100 to a Deno KV commit (setup only: one
 * commit each would take longer than the measurement).
 */
async function seededKv(
  scenario: Scenario,
  count: number,
): Promise<{ dir: string; kv: Deno.Kv }> {
  const dir = await kvTempDir();
  const kv = await Deno.openKv(`${dir}/relayer.kv`);
  // KvStore groups the concurrent creates into a few commits.
  await seedStore(new KvStore(kv), scenario, count);
  return { dir, kv };
}

interface Running {
  port: number;
  /**
   * Commits counted on the store and deliveries answered, once the server
   * has closed (so no delivery is half done) (c and g only).
   */
  counts?: () => { writes: number; commits: number; answered: number };
  close(): Promise<void>;
}

/** Serves `fetch` here on loopback. */
function serveHere(
  fetch: (request: Request) => Response | Promise<Response>,
  extra: Partial<Running> = {},
  cleanup: () => void = () => {},
): Running {
  const http = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    fetch,
  );
  return {
    port: http.addr.port,
    ...extra,
    async close() {
      await http.shutdown();
      cleanup();
    },
  };
}

async function bareHono(): Promise<Running> {
  const app = new Hono().post("/v1/deliveries", (c) => c.json({ ok: true }));
  return await Promise.resolve(serveHere(app.fetch));
}

/**
 * (f): a bare Hono app that asks the signer stub for one pending receipt
 * per request, with the runtime's `fetch`, and answers 503: the HTTP work
 * every read-path delivery of (d) must do, with nothing of ours.
 */
async function bareFetch(signerUrl: string): Promise<Running> {
  const app = new Hono().post("/v1/deliveries", async (c) => {
    const response = await fetch(`${signerUrl}/receipt/0xabc_pending`);
    const { status } = await response.json() as { status: string };
    return c.json({ status }, 503);
  });
  return await Promise.resolve(serveHere(app.fetch));
}

async function memoryApp(scenario: Scenario, pool: number): Promise<Running> {
  const store = new MemoryStore();
  await seedStore(store, scenario, pool);
  const app = createApp({
    store,
    sender: scriptedSender(scenario, pool),
    webhookSecret: SECRET,
  });
  return serveHere(app.fetch);
}

/** The Store methods that write: each one commit when it runs alone. */
const WRITES: ReadonlySet<PropertyKey> = new Set([
  "createIntent",
  "transition",
  "beginBroadcast",
  "recordBroadcast",
  "recordHold",
  "voidHold",
  "captureHold",
  "admit",
  "putDeadLetter",
  "redrive",
]);

/**
 * (c), or with `claims: false` (default `true`) the diagnostic (g): the
 * same app and store, but a delivery that only looks keeps no replay
 * record (`admit` with a claim alone answers at once and writes nothing).
 * What (g) serves above (c) is what DESIGN §15's replay record costs on a
 * file; the service as shipped always keeps it.
 */
async function kvApp(
  scenario: Scenario,
  pool: number,
  { claims = true } = {},
): Promise<Running> {
  const { dir, kv } = await seededKv(scenario, pool);
  let commits = 0;
  let answered = 0;
  const counted: KvLike = {
    getMany: kv.getMany.bind(kv),
    list: kv.list.bind(kv),
    atomic() {
      const atomic = kv.atomic();
      const commit = atomic.commit.bind(atomic);
      atomic.commit = () => {
        commits++;
        return commit();
      };
      return atomic;
    },
  };
  // The store's writes, counted by method call (each one commit on its
  // own); `commits` above counts what reached Deno KV after grouping.
  let writes = 0;
  const store = new KvStore(counted);
  const written = new Proxy(store, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (typeof value !== "function") return value;
      if (!claims && name === "admit") {
        return (admission: Parameters<Store["admit"]>[0]) => {
          if (admission.count === undefined) return Promise.resolve(null);
          writes++;
          return target.admit(admission);
        };
      }
      if (!WRITES.has(name)) return value.bind(target);
      return (...args: unknown[]) => {
        writes++;
        return value.apply(target, args);
      };
    },
  });
  const app = createApp({
    store: written,
    sender: scriptedSender(scenario, pool),
    webhookSecret: SECRET,
  });
  const fetch = async (request: Request) => {
    const response = await app.fetch(request);
    answered++;
    return response;
  };
  return serveHere(fetch, {
    counts: () => ({ writes, commits, answered }),
  }, () => {
    kv.close();
    Deno.removeSync(dir, { recursive: true });
  });
}

// (e): one PostgreSQL server for the whole run, started on first use; a
// fresh schema per row. Skipped where there are no server binaries.
let database: Promise<OwnedPostgresServer> | undefined;
let schemas = 0;
const hasPostgres = await postgresBinDir() !== null;

async function postgresApp(scenario: Scenario, pool: number): Promise<Running> {
  const server = await (database ??= startPostgres());
  // A pool as wide as the load, so no delivery waits for a connection.
  const sql = postgres(server.url, { max: connections, onnotice: () => {} });
  const store = new PostgresStore(sql, { schema: `bench_${++schemas}` });
  await store.migrate();
  await seedStore(store, scenario, pool);
  const app = createApp({
    store,
    sender: scriptedSender(scenario, pool),
    webhookSecret: SECRET,
  });
  return serveHere(app.fetch, {}, () => void sql.end({ timeout: 1 }));
}

/** The local signer stub, in its own process, as `deno task signer` runs it. */
async function signerStub(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-env=PORT",
      `${root}examples/signer_stub.ts`,
    ],
    clearEnv: true,
    // Port 0: the system picks a free one as it binds, and it says which.
    env: childEnv({ PORT: "0" }, ["DENO_V8_FLAGS"]),
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const { port: listened, drained } = listenedPort(
    child.stdout,
    LISTENING.signer,
  );
  const port = await listened;
  if (port === null) {
    await stop(child);
    throw new Error("the signer stub did not start");
  }
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/health`, "the signer stub");
  return {
    url,
    async stop() {
      await stop(child);
      await drained;
    },
  };
}

/** `main.ts` under `deno serve`, with the flags of `deno task start`. */
async function shipped(
  scenario: Scenario,
  pool: number,
  signerUrl: string,
): Promise<Running> {
  const { dir, kv } = await seededKv(scenario, pool);
  kv.close();
  // Port 0 for the service and its inspector: the system picks free ones
  // as they bind, and each says which.
  const child = new Deno.Command(Deno.execPath(), {
    args: startArgs({
      port: 0,
      writeDir: dir,
      flags: profile ? ["--inspect=127.0.0.1:0"] : [],
    }),
    cwd: root,
    // The settings of the service as shipped with the local signer, and
    // only those (see `childEnv`).
    clearEnv: true,
    // `DENO_V8_FLAGS` passes on purpose: the `perf` recipe in
    // docs/performance_http.md sets it for `main.ts`.
    env: childEnv({
      WEBHOOK_SECRET: SECRET,
      SENDER_URL: signerUrl,
      KV_PATH: `${dir}/relayer.kv`,
    }, ["DENO_V8_FLAGS"]),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const { port: listened, drained: logged } = listenedPort(
    child.stdout,
    LISTENING.main,
  );
  const { port: inspected, drained: errors } = profile
    ? listenedPort(child.stderr, LISTENING.inspector)
    : { port: Promise.resolve(null), drained: drain(child.stderr) };
  const port = await listened;
  const inspect = profile ? await inspected : undefined;
  if (port === null || inspect === null) {
    await stop(child);
    await Promise.all([logged, errors]);
    Deno.removeSync(dir, { recursive: true });
    throw new Error("main.ts did not start");
  }
  await waitFor(`http://127.0.0.1:${port}/healthz`, "main.ts");
  const profiler = inspect === undefined
    ? undefined
    : await startProfile(inspect);
  return {
    port,
    async close() {
      if (profiler) {
        console.error(`profile of (d) ${scenario}:\n${await profiler()}`);
      }
      await stop(child);
      await Promise.all([logged, errors]);
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/**
 * Starts V8's sampling profiler in the process whose inspector listens on
 * `port` (Chrome DevTools Protocol); the function it returns stops it and
 * tells where the samples fell: by script and by function, self time.
 */
async function startProfile(port: number): Promise<() => Promise<string>> {
  const [target] = await (await fetch(`http://127.0.0.1:${port}/json/list`))
    .json() as { webSocketDebuggerUrl: string }[];
  const socket = new WebSocket(target!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  const waiting = new Map<number, (result: unknown) => void>();
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    waiting.get(message.id)?.(message.result);
  };
  let id = 0;
  const send = (method: string, params = {}) =>
    new Promise<unknown>((resolve) => {
      waiting.set(++id, resolve);
      socket.send(JSON.stringify({ id, method, params }));
    });
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 200 });
  await send("Profiler.start");
  return async () => {
    const { profile } = await send("Profiler.stop") as {
      profile: { nodes: ProfileNode[]; samples: number[] };
    };
    socket.close();
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
    const parents = new Map<number, number>();
    for (const node of profile.nodes) {
      for (const child of node.children ?? []) parents.set(child, node.id);
    }
    // The innermost frame of ours or of a library (not the runtime's).
    const owner = (id: number | undefined): string => {
      for (; id !== undefined; id = parents.get(id)) {
        const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
        if (url.startsWith("file://")) {
          return `${functionName || "(anonymous)"} ${
            url.replace(`file://${root}`, "").replace(
              /^.*\/node_modules\/(?:\.deno\/)?([^/]+)\/.*$/,
              "npm:$1",
            )
          }:${lineNumber + 1}`;
        }
      }
      return "(the runtime alone)";
    };
    const byOwner = new Map<string, number>();
    const byScript = new Map<string, number>();
    const byFunction = new Map<string, number>();
    let busy = 0;
    let inspector = 0;
    for (const sample of profile.samples) {
      const { functionName, url, lineNumber } = nodes.get(sample)!.callFrame;
      if (functionName === "(idle)") continue;
      // The inspector's own work (it reports every fetch as a network
      // event while attached) is the profiler's cost, not the service's.
      if (/inspector/.test(functionName) || /inspector/.test(url)) {
        inspector++;
        continue;
      }
      busy++;
      const script = url.replace(`file://${root}`, "").replace(
        /^.*\/node_modules\/(?:\.deno\/)?([^/]+)\/.*$/,
        "npm:$1",
      ) || functionName;
      byScript.set(script, (byScript.get(script) ?? 0) + 1);
      const name = `${functionName || "(anonymous)"} ${script}:${
        lineNumber + 1
      }`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + 1);
      const mine = owner(sample);
      byOwner.set(mine, (byOwner.get(mine) ?? 0) + 1);
    }
    const top = (counts: Map<string, number>, n: number) =>
      [...counts].sort((x, y) => y[1] - x[1]).slice(0, n).map(([k, v]) =>
        `  ${(v / busy * 100).toFixed(1).padStart(5)}%  ${k}`
      ).join("\n");
    return `${busy} busy samples (and ${inspector} of the inspector itself, left out); self time by script:\n${
      top(byScript, 12)
    }\nby function:\n${
      top(byFunction, 25)
    }\nby the innermost frame of ours or a library's (the runtime's work it called included):\n${
      top(byOwner, 25)
    }`;
  };
}

/**
 * Commits/s of a bare Deno KV on a SQLite file, `connections` commits in
 * flight, for 2 s each (or a row's `--seconds`, if shorter): one small
 * `set` per commit (the ceiling); then a
 * read of 4 keys before each checked commit, the shape of a delivery's
 * look and write (`pairs`: read-and-commit pairs per second).
 */
async function commitRate(): Promise<{ commits: number; pairs: number }> {
  const dir = await kvTempDir();
  const kv = await Deno.openKv(`${dir}/rate.kv`);
  const ms = Math.min(2000, seconds * 1000);
  const commits = await perSecond(connections, async (worker, i) => {
    await kv.atomic().set(["rate", worker, i], { at: i }).commit();
    return 1;
  }, ms);
  const pairs = await perSecond(connections, async (worker, i) => {
    const key = ["pair", worker, i];
    await kv.getMany([key, ["rate", worker, i], ["rate", worker, 0], ["x"]]);
    await kv.atomic().check({ key, versionstamp: null }).set(key, { at: i })
      .commit();
    return 1;
  }, ms);
  kv.close();
  await Deno.remove(dir, { recursive: true });
  return { commits, pairs };
}

interface Row {
  id: string;
  name: string;
  scenario?: Scenario;
}

/** What every answer of a row must be: its status, and text its body holds. */
interface Expected {
  status: string;
  text: string;
}

/**
 * The answer a row is built to give. A delivery's 503 is the intended
 * retry only with the scenario's reason: the app also answers 503 when its
 * store fails ("Delivery failed") and for an intent it cannot find.
 */
function expectedOf(row: Row): Expected {
  if (row.id === "a") return { status: "200", text: '{"ok":true}' };
  if (row.id === "f") return { status: "503", text: '{"status":"pending"}' };
  return { status: "503", text: ANSWER_TEXT[row.scenario ?? "read"] };
}

const ROWS: Row[] = [
  { id: "a", name: "(a) bare Hono, 200" },
  { id: "f", name: "(f) bare Hono, one signer fetch, 503" },
  ...(["read", "write"] as const).flatMap((scenario): Row[] => [
    { id: "b", name: `(b) app, MemoryStore, ${scenario}`, scenario },
    { id: "c", name: `(c) app, KvStore file, ${scenario}`, scenario },
    ...(scenario === "read"
      ? [{
        id: "g",
        name: "(g) (c) without its replay record, read",
        scenario,
      }]
      : []),
    { id: "d", name: `(d) main.ts served, ${scenario}`, scenario },
    ...(hasPostgres
      ? [{ id: "e", name: `(e) app, PostgresStore, ${scenario}`, scenario }]
      : []),
  ]),
].filter((row) => only.has(row.id));

interface Measured {
  result: LoadResult;
  /** Commits/s of a bare Deno KV file, measured around the row (c, d). */
  rate?: number;
  /** Read-and-commit pairs/s of the same, measured right after `rate`. */
  pairs?: number;
  /** Store writes per delivery (each one commit on its own) (c and g only). */
  writesPerDelivery?: number;
  /** Deno KV commits per delivery, after grouping (c and g only). */
  commitsPerDelivery?: number;
}

/** Requests of one run of `row` that did not get its answer (see {@linkcode failuresOf}). */
function failedIn(row: Row, result: LoadResult): number {
  return [...failuresOf([result], expectedOf(row).status).values()].reduce(
    (a, b) => a + b,
    0,
  );
}

const pct = (v: number) => `${Math.round(v * 100)}%`;
const int = (v: number) => Math.round(v).toLocaleString("en-US");

if (import.meta.main) {
  const dir = await autocannonDir();
  const signer = only.has("d") || only.has("f")
    ? await signerStub()
    : undefined;
  const perRun: { rows: Map<string, Measured> }[] = [];
  try {
    for (let run = 1; run <= runs; run++) {
      const rows = new Map<string, Measured>();
      let bareRps = 0;
      for (const row of ROWS) {
        const kvRow = row.id === "c" || row.id === "d";
        const before = kvRow ? await commitRate() : undefined;
        const rate = before?.commits;
        // A write pool one request never uses twice: sized from what the
        // same run measured, and the load stops at the time limit anyway.
        const pool = row.scenario !== "write"
          ? intents
          : row.id === "b"
          ? Math.ceil(Math.max(bareRps, 2000) * seconds * 1.2)
          : row.id === "e"
          ? Math.ceil(1500 * seconds * 1.2)
          : Math.ceil(Math.max(rate!, 3000) * seconds * 1.5);
        const server = row.id === "a"
          ? await bareHono()
          : row.id === "f"
          ? await bareFetch(signer!.url)
          : row.id === "b"
          ? await memoryApp(row.scenario!, pool)
          : row.id === "c"
          ? await kvApp(row.scenario!, pool)
          : row.id === "g"
          ? await kvApp(row.scenario!, pool, { claims: false })
          : row.id === "e"
          ? await postgresApp(row.scenario!, pool)
          : await shipped(row.scenario!, pool, signer!.url);
        let result: LoadResult;
        try {
          result = await load(
            dir,
            server.port,
            row.scenario ?? "read",
            pool,
            expectedOf(row),
          );
        } finally {
          await server.close();
        }
        if (row.id === "a") bareRps = result.rps;
        // The disk's rate drifts: the ceiling is the mean of a measurement
        // right before the row and one right after it.
        const after = kvRow ? await commitRate() : undefined;
        const ceiling = before && after
          ? {
            commits: (before.commits + after.commits) / 2,
            pairs: (before.pairs + after.pairs) / 2,
          }
          : undefined;
        const counts = server.counts?.();
        const measured: Measured = {
          result,
          ...(ceiling === undefined
            ? {}
            : { rate: ceiling.commits, pairs: ceiling.pairs }),
          ...(counts
            ? {
              writesPerDelivery: counts.writes / counts.answered,
              commitsPerDelivery: counts.commits / counts.answered,
            }
            : {}),
        };
        rows.set(row.name, measured);
        console.error(
          `run ${run}/${runs}: ${row.name}: ${int(result.rps)} req/s, ${
            failedIn(row, result)
          } errors${
            measured.commitsPerDelivery === undefined
              ? ""
              : `, ${measured.writesPerDelivery!.toFixed(2)} writes and ${
                measured.commitsPerDelivery.toFixed(2)
              } Deno KV commits per delivery`
          }${
            ceiling === undefined
              ? ""
              : `; Deno KV file ${int(ceiling.commits)} commits/s, ${
                int(ceiling.pairs)
              } read-and-commit pairs/s`
          }`,
        );
      }
      perRun.push({ rows });
    }
  } finally {
    await signer?.stop();
    await (await database)?.stop();
  }

  console.log(
    `${runs} runs, ${seconds} s each, ${connections} connections, ${intents} read intents, Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores; median (min–max)\n`,
  );
  console.log(
    "| server | req/s | vs (a) | p50 ms | p99 ms | errors | writes/delivery | KV commits/delivery | of the commit ceiling |",
  );
  console.log(
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const row of ROWS) {
    const measured = perRun.map((r) => r.rows.get(row.name)!);
    const bare = perRun.map((r) =>
      r.rows.get("(a) bare Hono, 200")?.result.rps
    );
    const ratios = measured.flatMap((m, i) =>
      row.id !== "a" && bare[i] ? [m.result.rps / bare[i]!] : []
    );
    // (d) runs the store code (c) counted: its writes per delivery. Its
    // Deno KV commits are not counted (another process groups them).
    const wpd = (i: number) =>
      measured[i]!.writesPerDelivery ??
        (row.id === "d"
          ? perRun[i]!.rows.get(`(c) app, KvStore file, ${row.scenario}`)
            ?.writesPerDelivery
          : undefined);
    const perDelivery = measured.flatMap((_, i) => wpd(i) ?? []);
    const commitsPer = measured.flatMap((m) => m.commitsPerDelivery ?? []);
    // The ceiling is one write per commit, as it was before grouping:
    // deliveries/s × writes per delivery ÷ the bare commit rate. Grouped,
    // a run can pass 100%.
    const ceiling = row.id === "c" || row.id === "d"
      ? measured.flatMap((m, i) =>
        wpd(i) === undefined ? [] : [m.result.rps * wpd(i)! / m.rate!]
      )
      : [];
    console.log(
      `| ${row.name} | ${spread(measured.map((m) => m.result.rps), int)} | ${
        row.id === "a" ? "100%" : spread(ratios, pct)
      } | ${median(measured.map((m) => m.result.p50))} | ${
        median(measured.map((m) => m.result.p99))
      } | ${measured.reduce((sum, m) => sum + failedIn(row, m.result), 0)} | ${
        perDelivery.length ? spread(perDelivery, (v) => v.toFixed(2)) : "–"
      } | ${
        commitsPer.length ? spread(commitsPer, (v) => v.toFixed(2)) : "–"
      } | ${ceiling.length ? spread(ceiling, pct) : "–"} |`,
    );
  }
  const all = perRun.flatMap((r) => [...r.rows.values()]);
  console.log(
    `\nDeno KV on a SQLite file, ${connections} in flight, the mean of a measurement before and one after each (c) and (d) row: ${
      spread(all.flatMap((m) => m.rate ?? []), int)
    } commits/s (the ceiling above); ${
      spread(all.flatMap((m) => m.pairs ?? []), int)
    } read-and-commit pairs/s (a read of 4 keys, then a checked commit)`,
  );
  // (g) prices the replay record against (c) of the same run: the pairs
  // are printed, since the table's medians and extremes do not keep them.
  const pairs = perRun.flatMap((r) => {
    const c = r.rows.get("(c) app, KvStore file, read")?.result.rps;
    const g = r.rows.get("(g) (c) without its replay record, read")?.result
      .rps;
    return c && g ? [{ c, g }] : [];
  });
  if (pairs.length > 0) {
    console.log(
      `\n(g) against (c), read, run by run: ${
        pairs.map(({ c, g }) =>
          `${int(g)} / ${int(c)} = ${(g / c).toFixed(2)}×`
        ).join("; ")
      }; the record's share of (c)'s time per delivery (1 − c/g): ${
        spread(pairs.map(({ c, g }) => 1 - c / g), pct)
      }`,
    );
  }
  // A row whose requests failed measured the failures, not the service:
  // say which and how, and exit non-zero, so that a script that checks the
  // exit status drops the figures.
  const failed = ROWS.flatMap((row) => {
    const failures = failuresOf(
      perRun.map((r) => r.rows.get(row.name)!.result),
      expectedOf(row).status,
    );
    return failures.size === 0 ? [] : [
      `${row.name} (${
        [...failures].map(([kind, n]) => `${kind}: ${n}`).join(", ")
      })`,
    ];
  });
  if (failed.length > 0) {
    console.error(
      `\nSome requests did not get their row's answer (another status, the app's own 503 or a retry for another reason, a connection error or a timeout): ${
        failed.join("; ")
      }. Those rows measured failures, not the service.`,
    );
    Deno.exit(1);
  }
}
