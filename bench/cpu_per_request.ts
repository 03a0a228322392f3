/**
 * CPU time per request of the serving process, on the read path of
 * `deno task bench:http`: (a) a bare Hono app that answers 200, (f) one that
 * asks the signer stub for one receipt per request (the HTTP work of a
 * read-path delivery, with nothing of ours), and (d)
 * `main.ts` as shipped (`deno serve` with the flags of `deno task start`,
 * `HttpSender` to the local signer stub, `KvStore` on a file, its log on
 * a pipe this script drains). Req/s depends on what else the machine is
 * doing; the CPU a process spends per request much less, so this is the
 * figure to compare two versions of the code by.
 *
 * Each server runs in its own process. After a warm-up load, the same
 * autocannon load as `bench:http` (`bench/http_load.mjs`, signed
 * deliveries cycling through settling intents) sends a fixed number of
 * requests, and the process's user and system time (`/proc/<pid>/stat`,
 * all its threads, the Deno KV thread included) is read before and after:
 * CPU µs per request = the difference ÷ the requests. The signer stub's
 * and the load's CPU are not counted.
 *
 * `--against DIR` runs a second checkout's `main.ts` as row (d′),
 * alternating with this checkout's (d) run by run (d, d′, then d′, d, …),
 * to compare a change with its base side by side. The checkout must hold
 * this script too: each one seeds its own Deno KV file with its own store.
 *
 * `deno task bench:cpu [--runs 3] [--requests 20000] [--warmup 3000] [--connections 50] [--intents 20000] [--only a,f,d] [--against DIR]`
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { Hono } from "hono";
import { KvStore } from "../store/kv.ts";
import { startArgs } from "../support/start_args.ts";
import {
  failuresOf,
  listFlag,
  median,
  readArgs,
  spread,
  wholeFlag,
} from "./_measure.ts";
import { ANSWER_TEXT, seedStore } from "./_scenarios.ts";
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

const IDS = ["a", "f", "d"] as const;

const args = readArgs(
  "bench:cpu",
  () => {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        runs: { type: "string", default: "3" },
        requests: { type: "string", default: "20000" },
        warmup: { type: "string", default: "3000" },
        connections: { type: "string", default: "50" },
        intents: { type: "string", default: "20000" },
        only: { type: "string", default: IDS.join(",") },
        against: { type: "string" },
        // Internal: this script run as (a)'s server, or to seed a KV file.
        bare: { type: "boolean" },
        signer: { type: "string" },
        seed: { type: "string" },
      },
    });
    return {
      runs: wholeFlag("runs", values.runs),
      requests: wholeFlag("requests", values.requests),
      warmup: wholeFlag("warmup", values.warmup),
      connections: wholeFlag("connections", values.connections),
      intents: wholeFlag("intents", values.intents),
      only: new Set<string>(listFlag("only", values.only, IDS)),
      against: values.against,
      bare: values.bare ?? false,
      signer: values.signer,
      seed: values.seed,
    };
  },
  "[--runs 3] [--requests 20000] [--warmup 3000] [--connections 50] [--intents 20000] [--only a,f,d] [--against DIR]",
);
const root = new URL("..", import.meta.url).pathname;

/**
 * `/proc/<pid>/stat`'s user + system time of a process, in seconds (read
 * with `cat`: Deno asks for `--allow-all` to read under `/proc`).
 */
async function cpuSeconds(pid: number, tick: number): Promise<number> {
  const { stdout } = await new Deno.Command("cat", {
    args: [`/proc/${pid}/stat`],
  }).output();
  const stat = new TextDecoder().decode(stdout);
  // Fields after the command name (which may hold spaces): state is
  // field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / tick;
}

async function clockTick(): Promise<number> {
  const { stdout } = await new Deno.Command("getconf", { args: ["CLK_TCK"] })
    .output();
  return Number(new TextDecoder().decode(stdout).trim()) || 100;
}

/** Sends exactly `amount` read-path deliveries (or (a)'s requests). */
function load(
  dir: string,
  port: number,
  amount: number,
  status: string,
  text: string,
): Promise<LoadResult> {
  return runLoad({
    dir,
    port,
    mode: "cycle",
    pool: args.intents,
    connections: args.connections,
    seconds: 0,
    status,
    text,
    amount,
  });
}

interface Server {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Spawns a `deno` child serving on port 0 and returns it once it said its
 * port (a line of its stdout that `listening` matches) and `health` answers.
 */
async function spawn(
  argv: string[],
  cwd: string,
  env: Record<string, string>,
  listening: RegExp,
  health: string,
): Promise<Server> {
  const child = new Deno.Command(Deno.execPath(), {
    args: argv,
    cwd,
    clearEnv: true,
    env: childEnv(env),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const { port: listened, drained: logged } = listenedPort(
    child.stdout,
    listening,
  );
  const drained = Promise.all([logged, drain(child.stderr)]);
  const port = await listened;
  if (port === null) {
    await stop(child);
    await drained;
    throw new Error(`${argv.at(-1)} did not start`);
  }
  await waitFor(`http://127.0.0.1:${port}${health}`, argv.at(-1)!);
  return {
    port,
    pid: child.pid,
    async stop() {
      await stop(child);
      await drained;
    },
  };
}

/** The signer stub, as `deno task signer` runs it. */
function signerStub(): Promise<Server> {
  return spawn(
    [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-env=PORT",
      `${root}examples/signer_stub.ts`,
    ],
    root,
    { PORT: "0" },
    LISTENING.signer,
    "/health",
  );
}

/** What (a)'s and (f)'s server prints where it listens. */
const BARE_LISTENING = /^bare hono on http:\/\/127\.0\.0\.1:(\d+)$/;

/**
 * (a): this script, serving a bare Hono app in its own process; (f) with
 * `signerUrl`: one that asks the signer stub for one pending receipt per
 * request and answers 503, as `bench:http`'s (f).
 */
function bareHono(signerUrl?: string): Promise<Server> {
  return spawn(
    [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-env",
      `${root}bench/cpu_per_request.ts`,
      "--bare",
      ...(signerUrl === undefined ? [] : ["--signer", signerUrl]),
    ],
    root,
    {},
    BARE_LISTENING,
    "/",
  );
}

/** (d): `checkout`'s `main.ts` as shipped, on a KV file its store seeded. */
async function shipped(checkout: string, signerUrl: string): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_cpu_bench_" });
  const seeding = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      `${checkout}/bench/cpu_per_request.ts`,
      "--intents",
      String(args.intents),
      "--seed",
      `${dir}/relayer.kv`,
    ],
    cwd: checkout,
    stderr: "inherit",
  }).output();
  if (seeding.code !== 0) throw new Error(`seeding in ${checkout} failed`);
  const server = await spawn(
    startArgs({ port: 0, writeDir: dir }),
    checkout,
    {
      WEBHOOK_SECRET: SECRET,
      SENDER_URL: signerUrl,
      KV_PATH: `${dir}/relayer.kv`,
    },
    LISTENING.main,
    "/healthz",
  );
  return {
    ...server,
    async stop() {
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

interface Row {
  name: string;
  /** Requests per measured load: (a)'s cost little, so it sends more. */
  requests: number;
  status: string;
  text: string;
  start(signerUrl: string): Promise<Server>;
}

if (args.bare) {
  const signerUrl = args.signer;
  const app = new Hono()
    .get("/", (c) => c.text("ok"))
    .post("/v1/deliveries", async (c) => {
      if (signerUrl === undefined) return c.json({ ok: true });
      const response = await fetch(`${signerUrl}/receipt/0xabc_pending`);
      const { status } = await response.json() as { status: string };
      return c.json({ status }, 503);
    });
  Deno.serve(
    {
      port: 0,
      hostname: "127.0.0.1",
      // The port the system picked, for the script that spawned this one.
      onListen: ({ port }) =>
        console.log(`bare hono on http://127.0.0.1:${port}`),
    },
    app.fetch,
  );
} else if (args.seed !== undefined) {
  const kv = await Deno.openKv(args.seed);
  await seedStore(new KvStore(kv), "read", args.intents);
  kv.close();
} else if (import.meta.main) {
  const tick = await clockTick();
  const dir = await autocannonDir();
  const read = { status: "503", text: ANSWER_TEXT.read };
  const rows: Row[] = [
    ...(args.only.has("a")
      ? [{
        name: "(a) bare Hono, 200",
        // At 10–30 µs each, 5× the requests keep the 10 ms clock tick of
        // /proc/<pid>/stat under 1% of the measurement.
        requests: args.requests * 5,
        status: "200",
        text: '{"ok":true}',
        start: () => bareHono(),
      }]
      : []),
    ...(args.only.has("f")
      ? [{
        name: "(f) bare Hono, one signer fetch, 503",
        requests: args.requests,
        status: "503",
        text: '{"status":"pending"}',
        start: (url: string) => bareHono(url),
      }]
      : []),
    ...(args.only.has("d")
      ? [{
        name: "(d) main.ts, read",
        requests: args.requests,
        ...read,
        start: (url: string) => shipped(root.replace(/\/$/, ""), url),
      }]
      : []),
    ...(args.only.has("d") && args.against !== undefined
      ? [{
        name: `(d′) main.ts of ${args.against}, read`,
        requests: args.requests,
        ...read,
        start: (url: string) => shipped(args.against!, url),
      }]
      : []),
  ];
  const signer = await signerStub();
  const signerUrl = `http://127.0.0.1:${signer.port}`;
  const perRow = new Map(rows.map((row) => [row.name, [] as {
    us: number;
    rps: number;
    result: LoadResult;
  }[]]));
  try {
    for (let run = 1; run <= args.runs; run++) {
      // (d) and (d′) swap places every run, so neither always goes first.
      const order = run % 2 === 1 ? rows : [
        ...rows.filter((row) => !row.name.startsWith("(d")),
        ...rows.filter((row) => row.name.startsWith("(d")).reverse(),
      ];
      for (const row of order) {
        const server = await row.start(signerUrl);
        try {
          await load(dir, server.port, args.warmup, row.status, row.text);
          const before = await cpuSeconds(server.pid, tick);
          const result = await load(
            dir,
            server.port,
            row.requests,
            row.status,
            row.text,
          );
          const after = await cpuSeconds(server.pid, tick);
          const us = (after - before) * 1e6 / result.requests;
          perRow.get(row.name)!.push({ us, rps: result.rps, result });
          console.error(
            `run ${run}/${args.runs}: ${row.name}: ${
              us.toFixed(0)
            } µs CPU per request, ${Math.round(result.rps)} req/s, ${
              [...failuresOf([result], row.status).values()].reduce(
                (a, b) => a + b,
                0,
              )
            } failed`,
          );
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    await signer.stop();
  }

  console.log(
    `${args.runs} runs, ${args.requests} requests each ((a) ${
      args.requests * 5
    }) after ${args.warmup} to warm up, ${args.connections} connections, Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores; median (min–max)\n`,
  );
  console.log("| server | CPU µs per request | vs (a) | req/s |");
  console.log("| --- | ---: | ---: | ---: |");
  const bare = perRow.get("(a) bare Hono, 200");
  for (const row of rows) {
    const runs = perRow.get(row.name)!;
    const us = runs.map((r) => r.us);
    console.log(
      `| ${row.name} | ${spread(us, (v) => v.toFixed(0))} | ${
        bare && !row.name.startsWith("(a)")
          ? `${(median(us) / median(bare.map((r) => r.us))).toFixed(1)}×`
          : "–"
      } | ${spread(runs.map((r) => r.rps), (v) => Math.round(v).toString())} |`,
    );
  }
  // (d′) against (d) run by run: the two ran one after the other.
  const mine = perRow.get("(d) main.ts, read");
  const theirs = rows.find((row) => row.name.startsWith("(d′)"));
  if (mine && theirs) {
    const ratios = perRow.get(theirs.name)!.map((r, i) => r.us / mine[i]!.us);
    console.log(
      `\n(d′) ÷ (d), CPU per request, run by run: ${
        ratios.map((v) => v.toFixed(3)).join(", ")
      }; median ${spread(ratios, (v) => v.toFixed(3))}`,
    );
  }
  const failed = rows.flatMap((row) => {
    const failures = failuresOf(
      perRow.get(row.name)!.map((r) => r.result),
      row.status,
    );
    return failures.size === 0 ? [] : [
      `${row.name} (${
        [...failures].map(([kind, n]) => `${kind}: ${n}`).join(", ")
      })`,
    ];
  });
  if (failed.length > 0) {
    console.error(
      `\nSome requests did not get their row's answer: ${
        failed.join("; ")
      }. Those rows measured failures, not the service.`,
    );
    Deno.exit(1);
  }
}
