/**
 * Webhook throughput, side by side in one run: (a) a bare Hono app that
 * answers 200, (b) our app on `MemoryStore`, (c) our app on `KvStore` over
 * a SQLite file, (d) our app on `PostgresStore` over a local PostgreSQL
 * server this run starts (loopback, fsync off; skipped where there are no
 * server binaries). Each is served on loopback, one at a time, and driven by
 * the same load: the npm `autocannon`, run from Node, sending HMAC-signed
 * generic-route deliveries that cycle through a pool of intents, with a
 * scripted in-process Sender. Prints req/s, p50 and p99 latency, the
 * answers by status, and the ratio to (a).
 *
 * `deno task bench:http [--seconds 10] [--connections 50] [--intents 20000] [--only a,b,c,d]`
 *
 * Two scenarios per store: `receipt` (settling intents whose receipt stays
 * pending: a delivery looks and answers 503 "waiting for … to confirm",
 * the common steady state) and `first` (authorized intents: a delivery
 * takes the lease, moves the intent to settling, broadcasts and records,
 * answering 503 "sent …, waiting for confirmation"). Those 503s are the
 * intended retries; anything else counts as an error.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { Hono } from "hono";
import {
  MemoryStore,
  ScriptedSender,
  type SenderScript,
  type Store,
} from "../mod.ts";
import postgres from "postgres";
import { KvStore } from "../store/kv.ts";
import { PostgresStore } from "../store/postgres.ts";
import {
  type OwnedPostgresServer,
  postgresBinDir,
  startPostgres,
} from "../support/postgres_server.ts";
import { createApp } from "../webhook/app.ts";

const AUTOCANNON = "autocannon@9.0.0";
const SECRET = "bench-secret-0123456789";

function flag(name: string, fallback: string): string {
  const index = Deno.args.indexOf(`--${name}`);
  return index >= 0 && Deno.args[index + 1] !== undefined
    ? Deno.args[index + 1]!
    : fallback;
}

const seconds = Number(flag("seconds", "10"));
const connections = Number(flag("connections", "50"));
const intents = Number(flag("intents", "20000"));
const only = new Set(flag("only", "a,b,c,d").split(","));

/** Installs autocannon once into a cache folder outside the repository. */
async function autocannonDir(): Promise<string> {
  const dir = `${Deno.env.get("HOME") ?? "/tmp"}/.cache/relayer-bench`;
  try {
    await Deno.stat(`${dir}/node_modules/autocannon/package.json`);
  } catch {
    console.error(`installing ${AUTOCANNON} into ${dir} …`);
    const { code } = await new Deno.Command("npm", {
      args: [
        "install",
        "--prefix",
        dir,
        "--no-audit",
        "--no-fund",
        "--silent",
        AUTOCANNON,
      ],
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (code !== 0) throw new Error(`npm install ${AUTOCANNON} failed`);
  }
  return dir;
}

interface LoadResult {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  statusCodeStats: Record<string, { count: number }>;
  statuses: { errors: number; timeouts: number };
}

async function load(dir: string, port: number): Promise<LoadResult> {
  const script = new URL("./http_load.mjs", import.meta.url).pathname;
  const { code, stdout, stderr } = await new Deno.Command("node", {
    args: [
      script,
      dir,
      `http://127.0.0.1:${port}`,
      SECRET,
      String(intents),
      String(connections),
      String(seconds),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(`the load failed: ${new TextDecoder().decode(stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(stdout));
}

type Scenario = "first" | "receipt";

/**
 * Our app over `store`, with a pool of intents:
 * - `first`: authorized intents, so a delivery broadcasts (lease, settling,
 *   send, record: the write path);
 * - `receipt`: settling intents with a sent tx whose receipt stays pending,
 *   so a delivery looks and answers retry (the common steady state).
 */
async function ourApp(store: Store, scenario: Scenario) {
  const scripts: Record<string, SenderScript> = {};
  const ids = Array.from({ length: intents }, (_, i) => `pi_${i}`);
  for (const id of ids) {
    scripts[id] = { sends: [{ txHash: `0x${id}` }], receipts: ["pending"] };
  }
  const now = Date.now();
  for (let i = 0; i < ids.length; i += 200) {
    await Promise.all(
      ids.slice(i, i + 200).map((id) =>
        store.createIntent(
          scenario === "first"
            ? { id, state: "authorized", hold: "pending" }
            : {
              id,
              state: "settling",
              hold: "pending",
              settlingSince: now,
              lastBroadcast: { outcome: "sent", txHash: `0x${id}`, at: now },
            },
        )
      ),
    );
  }
  return createApp({
    store,
    sender: new ScriptedSender(scripts),
    webhookSecret: SECRET,
  });
}

interface Server {
  id: string;
  name: string;
  open(): Promise<{ fetch: Hono["fetch"]; close(): void }>;
}

async function kvApp(scenario: Scenario) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_http_bench_" });
  const kv = await Deno.openKv(`${dir}/relayer.kv`);
  const app = await ourApp(new KvStore(kv), scenario);
  return {
    fetch: app.fetch,
    close() {
      kv.close();
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

// One PostgreSQL server for the run, started on first use.
let database: Promise<OwnedPostgresServer> | undefined;
let schemas = 0;

async function pgApp(scenario: Scenario) {
  const server = await (database ??= startPostgres());
  // A pool as wide as the load, so no delivery waits for a connection.
  const sql = postgres(server.url, { max: connections, onnotice: () => {} });
  const store = new PostgresStore(sql, { schema: `bench_${++schemas}` });
  await store.migrate();
  const app = await ourApp(store, scenario);
  return {
    fetch: app.fetch,
    close() {
      void sql.end({ timeout: 1 });
    },
  };
}

const hasPostgres = await postgresBinDir() !== null;

const servers: Server[] = [
  {
    id: "a",
    name: "(a) bare Hono, 200",
    open() {
      const app = new Hono().post(
        "/v1/deliveries",
        (c) => c.json({ ok: true }),
      );
      return Promise.resolve({ fetch: app.fetch, close() {} });
    },
  },
  ...(["receipt", "first"] as const).flatMap((scenario): Server[] => [
    {
      id: "b",
      name: `(b) our app, MemoryStore, ${scenario}`,
      async open() {
        const app = await ourApp(new MemoryStore(), scenario);
        return { fetch: app.fetch, close() {} };
      },
    },
    {
      id: "c",
      name: `(c) our app, KvStore on SQLite, ${scenario}`,
      open: () => kvApp(scenario),
    },
    ...(hasPostgres
      ? [{
        id: "d",
        name: `(d) our app, PostgresStore, ${scenario}`,
        open: () => pgApp(scenario),
      }]
      : []),
  ]),
];

if (import.meta.main) {
  const dir = await autocannonDir();
  const rows: { name: string; result: LoadResult }[] = [];
  for (const server of servers.filter((s) => only.has(s.id))) {
    const { fetch, close } = await server.open();
    const http = Deno.serve(
      { port: 0, hostname: "127.0.0.1", onListen() {} },
      fetch,
    );
    try {
      rows.push({ name: server.name, result: await load(dir, http.addr.port) });
    } finally {
      await http.shutdown();
      close();
    }
  }
  await (await database)?.stop();
  if (!hasPostgres && only.has("d")) {
    console.error("no PostgreSQL server binaries (initdb): (d) skipped");
  }
  const bare = rows.find((r) => r.name.startsWith("(a)"))?.result.rps;
  console.log(
    `${seconds} s each, ${connections} connections, ${intents} intents, Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores\n`,
  );
  console.log(
    "| server | req/s | p50 ms | p99 ms | 200 | 503 (retry) | other | vs (a) |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const { name, result } of rows) {
    const count = (status: string) =>
      result.statusCodeStats[status]?.count ?? 0;
    const other = result.requests - count("200") - count("503") +
      result.statuses.errors + result.statuses.timeouts;
    const ratio = bare ? `${Math.round((result.rps / bare) * 100)}%` : "-";
    console.log(
      `| ${name} | ${
        Math.round(result.rps)
      } | ${result.p50} | ${result.p99} | ${count("200")} | ${
        count("503")
      } | ${other} | ${ratio} |`,
    );
  }
}
