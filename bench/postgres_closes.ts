/**
 * What closes of the pool's connections cost PostgresStore's writes: a
 * server this run starts (loopback, fsync off), `--writers` callers each
 * writing an intent three times (`createIntent`, then `transition`s to
 * `authorized` and to `settling`) for `--span` milliseconds on a client of
 * `--pools` connections, while a client of its own ends one of the store's
 * server sessions (`pg_terminate_backend` on a pid of the store's
 * `application_name`, picked by a seeded PRNG) every 100 ms, and, in a
 * second row, every 1 s. The client reconnects as `main.ts`'s does
 * (`backoff: reconnectBackoffS`). Since a close came to send a round of
 * `SELECT 1` probes (one more than the pool has connections) before the
 * writes' turn for a connection passes on (`store/_reserve_turns.ts`),
 * it prints, per pool: writes a second (completed within the span) and
 * the p50 and p99 of a write's time (every write that succeeded), median
 * of 3 rounds with min–max, after a round not counted, of this code with
 * the closes, of this code without them, and, with `--old`, of a store of
 * another checkout with the closes; and the ratios of this code's figures
 * over the others', taken round by round. Each run takes a fresh client and
 * schema; the variants' order is reversed every other round. Writes that
 * failed (a close under a write fails it: "it may have landed or not") are
 * counted by message, beside the longest write and any left unanswered.
 *
 * `--probes` runs a small count instead: on this code (and the `--old`
 * one), a close every 500 ms under the same writers, through a `Proxy` of
 * the client that counts the probes each close sent, and times, from the
 * close, the last probe's answer and the next `reserve()` of a write (the
 * turn passed on), beside one `SELECT 1` round trip on the same server.
 *
 * The comparison in docs/postgres.md was made with `--old` on the store
 * before the probes (a worktree of commit `942834b~1`):
 *
 * `git worktree add /tmp/old 942834b~1 && deno run --allow-read
 * --allow-write --allow-run --allow-net=127.0.0.1 --allow-env
 * bench/postgres_closes.ts --old /tmp/old/store/postgres.ts [--pools 4,10]
 * [--writers 16] [--span 4000] [--probes]`. The old store is loaded by a
 * dynamic import: this file imports only this checkout's code.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import postgres from "postgres";
import {
  isTypeFetchLost,
  PostgresStore,
  reconnectBackoffS,
} from "../store/postgres.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { mulberry32 } from "../support/prng.ts";
import { median, readArgs, spread } from "./_measure.ts";

const args = readArgs("bench/postgres_closes.ts", () => {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      pools: { type: "string", default: "4,10" },
      writers: { type: "string", default: "16" },
      span: { type: "string", default: "4000" },
      old: { type: "string" },
      probes: { type: "boolean", default: false },
    },
  });
  const pools = values.pools.split(",").map(Number);
  if (pools.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 50)) {
    throw new TypeError(
      "--pools must be whole numbers from 1 to 50, by commas",
    );
  }
  const writers = Number(values.writers);
  if (!Number.isSafeInteger(writers) || writers < 1) {
    throw new TypeError("--writers must be a whole number of at least 1");
  }
  const span = Number(values.span);
  if (!Number.isSafeInteger(span) || span < 500) {
    throw new TypeError("--span must be a whole number of at least 500 (ms)");
  }
  return { pools, writers, span, old: values.old, probes: values.probes };
});

type StoreClass = typeof PostgresStore;
const OldStore = args.old === undefined ? undefined : (await import(
  pathToFileURL(resolve(args.old)).href
) as { PostgresStore: StoreClass }).PostgresStore;

/** How long a write may take before the run stops waiting for it (the store bounds each wait at its 10 s `connectionWaitMs`). */
const STRAGGLER_MS = 30_000;

const server = await startPostgres();
const admin = postgres(server.url, {
  max: 1,
  onnotice: () => {},
  connection: { application_name: "closes_bench_admin" },
});
let runs = 0;
/** The run under way, and the rejections no one handled in each run. */
let current = "";
// Kept, counted and printed at the end: one that is not postgres.js's
// dropped type fetch (which main.ts keeps the process through) would end
// the service.
const unhandled = new Map<string, number>();
globalThis.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  const reason = event.reason as { message?: unknown; query?: unknown };
  const what = isTypeFetchLost(event.reason)
    ? "postgres.js's type fetch lost (main.ts keeps the process)"
    : `NOT the type fetch: ${String(reason?.message ?? reason)}; query: ${
      String(reason?.query).slice(0, 60)
    }`;
  const key = `${current}: ${what}`;
  unhandled.set(key, (unhandled.get(key) ?? 0) + 1);
});

/** What one run saw. */
interface Sample {
  /** Writes that succeeded within the span, a second. */
  rate: number;
  /** Milliseconds of each write that succeeded. */
  times: number[];
  /** Failed writes by message (numbers and ids left out). */
  errors: Map<string, number>;
  /** Sessions ended. */
  closes: number;
  /** Times the closing client found no session of the store's, or ended none. */
  missed: number;
  /** Writes still unanswered `STRAGGLER_MS` after the span. */
  unanswered: number;
}

/** Hooks of a run (the probe count's). */
interface Hooks {
  /** The client the store is given, made of the run's own. */
  wrap?(sql: postgres.Sql): postgres.Sql;
  /** Called at each close of a connection of the run's client. */
  onclose?(): void;
  /** Called once the span is over, before the client is ended. */
  ending?(): void;
}

/**
 * `writers` callers writing on a fresh client of `max` connections and a
 * fresh schema of `Store` for `span` ms, one of the client's sessions
 * ended every `every` ms (never, if `null`).
 */
async function run(
  Store: StoreClass,
  max: number,
  every: number | null,
  hooks: Hooks = {},
): Promise<Sample> {
  const n = ++runs;
  current = `run ${n}: ${
    Store === PostgresStore ? "this code" : "--old"
  }, ${max} connections, ${every ?? "no"} closes`;
  const name = `closes_bench_${n}`;
  const client = postgres(server.url, {
    max,
    onnotice: () => {},
    // As main.ts's client: postgres.js's own backoff grows to 20 s as
    // sessions end with an error in a row, and closes every 100 ms would
    // measure that instead.
    backoff: reconnectBackoffS,
    onclose: () => hooks.onclose?.(),
    connection: { application_name: name },
  });
  const sql = hooks.wrap?.(client) ?? client;
  const store = new Store(sql, { schema: `closes_${n}` });
  await store.migrate();
  // Every connection of the pool open before the clock starts.
  await Promise.all(
    Array.from({ length: max }, () => client`SELECT pg_sleep(0.02)`),
  );
  const times: number[] = [];
  const errors = new Map<string, number>();
  let done = 0;
  let pending = 0;
  const started = performance.now();
  const until = started + args.span;
  /** One write, timed; whether it succeeded. */
  const timed = async <T>(write: () => Promise<T>): Promise<T | null> => {
    const t = performance.now();
    pending++;
    try {
      const result = await write();
      const end = performance.now();
      times.push(end - t);
      if (end <= until) done++;
      return result;
    } catch (error) {
      const text = (error instanceof Error ? error.message : String(error))
        .replace(/pc_\d+_\d+/g, "…").replace(/\d+/g, "N").slice(0, 90);
      errors.set(text, (errors.get(text) ?? 0) + 1);
      return null;
    } finally {
      pending--;
    }
  };
  const writing = Promise.all(
    Array.from({ length: args.writers }, async (_, w) => {
      for (let i = 0; performance.now() < until; i++) {
        const id = `pc_${w}_${i}`;
        const created = await timed(() =>
          store.createIntent({ id, state: "created", hold: "pending" })
        );
        if (created === null || performance.now() >= until) continue;
        const authorized = await timed(() =>
          store.transition(id, {
            from: "created",
            to: "authorized",
            version: created.version,
            at: Date.now(),
          })
        );
        if (authorized === null || performance.now() >= until) continue;
        await timed(() =>
          store.transition(id, {
            from: "authorized",
            to: "settling",
            version: authorized.version,
            at: Date.now(),
          })
        );
      }
    }),
  );
  let closes = 0;
  let missed = 0;
  const closing = (async () => {
    if (every === null) return;
    const random = mulberry32(n);
    for (let k = 1; started + k * every < until; k++) {
      const wait = started + k * every - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const pids = await admin<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity WHERE application_name = ${name}`;
      if (pids.length === 0) {
        missed++;
        continue;
      }
      const pid = pids[Math.floor(random() * pids.length)]!.pid;
      const [ended] = await admin<{ ok: boolean }[]>`
        SELECT pg_terminate_backend(${pid}) AS ok`;
      if (ended?.ok) closes++;
      else missed++;
    }
  })();
  await closing;
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    writing,
    new Promise((r) =>
      timer = setTimeout(r, until - performance.now() + STRAGGLER_MS)
    ),
  ]);
  clearTimeout(timer);
  const unanswered = pending;
  hooks.ending?.();
  store.close();
  await client.end({ timeout: 1 });
  await admin.unsafe(`DROP SCHEMA "closes_${n}" CASCADE`);
  return {
    rate: done / args.span * 1000,
    times,
    errors,
    closes,
    missed,
    unanswered,
  };
}

/** The `p`th percentile of `values` (nearest rank). */
function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = values.toSorted((x, y) => x - y);
  return sorted[
    Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)
  ]!;
}

const f0 = (v: number) => v.toFixed(0);
const f1 = (v: number) => v.toFixed(1);
const f2 = (v: number) => v.toFixed(2);

/** The machine's load averages over 1, 5 and 15 minutes, as `uptime` prints them. */
async function load(): Promise<string> {
  try {
    const { stdout } = await new Deno.Command("uptime", { stdout: "piped" })
      .output();
    return new TextDecoder().decode(stdout).split("load average:")[1]?.trim() ??
      "?";
  } catch {
    return "?";
  }
}

if (args.probes) await countProbes();
else await compare();
await admin.end();
await server.stop();

/** The table: each pool, each variant, alternated round by round. */
async function compare(): Promise<void> {
  type Variant = { name: string; Store: StoreClass; every: number | null };
  for (const max of args.pools) {
    const variants: Variant[] = [
      {
        name: "this code, a close every 100 ms",
        Store: PostgresStore,
        every: 100,
      },
      {
        name: "this code, a close every 1 s",
        Store: PostgresStore,
        every: 1000,
      },
      { name: "this code, no close", Store: PostgresStore, every: null },
    ];
    if (OldStore !== undefined) {
      variants.push(
        { name: "--old, a close every 100 ms", Store: OldStore, every: 100 },
        { name: "--old, a close every 1 s", Store: OldStore, every: 1000 },
      );
    }
    const samples = variants.map(() => [] as Sample[]);
    const loads: string[] = [];
    for (let r = 0; r <= 3; r++) {
      const order = variants.map((_, i) => i);
      if (r % 2 === 1) order.reverse();
      loads.push(await load());
      for (const i of order) {
        const v = variants[i]!;
        const sample = await run(v.Store, max, v.every);
        // Round 0 is not counted: the code compiles, the server warms.
        if (r > 0) samples[i]!.push(sample);
      }
    }
    loads.push(await load());
    console.log(
      `\n${args.writers} writers, a client of ${max} connections, ${args.span} ms a run; median of 3 rounds (min–max); load at each round's start and the end: ${
        loads.join(" | ")
      }`,
    );
    console.log(
      "| variant | writes/s | p50 ms | p99 ms | longest ms | closes (missed) | failed writes | unanswered |",
    );
    console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
    variants.forEach((v, i) => {
      const s = samples[i]!;
      const failed = s.map((x) =>
        [...x.errors.values()].reduce((a, b) => a + b, 0)
      );
      console.log(
        `| ${v.name} | ${spread(s.map((x) => x.rate), f0)} | ${
          spread(s.map((x) => percentile(x.times, 50)), f1)
        } | ${spread(s.map((x) => percentile(x.times, 99)), f1)} | ${
          f0(Math.max(...s.map((x) => Math.max(...x.times))))
        } | ${s.map((x) => x.closes).join(", ")} (missed ${
          s.map((x) => x.missed).join(", ")
        }) | ${failed.join(", ")} | ${s.map((x) => x.unanswered).join(", ")} |`,
      );
    });
    const ratio = (a: number, b: number, of: (x: Sample) => number) =>
      spread(
        samples[a]!.map((x, r) => of(x) / of(samples[b]![r]!)),
        f2,
      );
    const rate = (x: Sample) => x.rate;
    const p99 = (x: Sample) => percentile(x.times, 99);
    console.log(
      `this code with closes ÷ without, per round: every 100 ms ${
        ratio(0, 2, rate)
      }× writes/s, ${ratio(0, 2, p99)}× p99; every 1 s ${
        ratio(1, 2, rate)
      }× writes/s, ${ratio(1, 2, p99)}× p99`,
    );
    if (OldStore !== undefined) {
      console.log(
        `this code ÷ --old, both with closes, per round: every 100 ms ${
          ratio(0, 3, rate)
        }× writes/s, ${ratio(0, 3, p99)}× p99; every 1 s ${
          ratio(1, 4, rate)
        }× writes/s, ${ratio(1, 4, p99)}× p99`,
      );
    }
    variants.forEach((v, i) => {
      const errors = new Map<string, number>();
      for (const s of samples[i]!) {
        for (const [text, count] of s.errors) {
          errors.set(text, (errors.get(text) ?? 0) + count);
        }
      }
      for (const [text, count] of errors) {
        console.log(`  ${v.name}, failed ${count}×: ${text}`);
      }
    });
  }
}

/**
 * The probe count: per close, the probes sent after it (before the next
 * close), and the milliseconds from the close to the last one's answer and
 * to the next `reserve()` after that.
 */
async function countProbes(): Promise<void> {
  // One `SELECT 1` round trip on an open connection, for scale.
  for (let i = 0; i < 20; i++) await admin`SELECT 1`;
  const trips: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    await admin`SELECT 1`;
    trips.push(performance.now() - t);
  }
  console.log(
    `one SELECT 1 round trip: median ${f2(median(trips))} ms, p99 ${
      f2(percentile(trips, 99))
    } ms (200, one after another); load ${await load()}`,
  );
  const stores: [string, StoreClass][] = [["this code", PostgresStore]];
  if (OldStore !== undefined) stores.push(["--old", OldStore]);
  for (const max of args.pools) {
    for (const [label, Store] of stores) {
      // Per close: its time, the probes sent after it and their answers' times.
      const closes: {
        at: number;
        probes: number;
        answered: number[];
        reserve?: number;
      }[] = [];
      const reserves: number[] = [];
      let counting = false;
      let open = 0;
      const wrap = (sql: postgres.Sql) =>
        new Proxy(sql, {
          get(target, key, receiver) {
            const value = Reflect.get(target, key, receiver);
            if (key === "reserve") {
              return (...a: unknown[]) => {
                if (counting) reserves.push(performance.now());
                return (value as (...a: unknown[]) => unknown)(...a);
              };
            }
            if (key !== "unsafe") return value;
            return (...a: unknown[]) => {
              const query = (value as (
                ...a: unknown[]
              ) => postgres.PendingQuery<postgres.Row[]>)(
                ...a,
              );
              const options = a[2] as { onexecute?: unknown } | undefined;
              const close = closes.at(-1);
              if (
                counting && close !== undefined && a[0] === "SELECT 1" &&
                typeof options?.onexecute === "function"
              ) {
                close.probes++;
                const execute = query.execute;
                query.execute = function () {
                  const sent = execute.call(this);
                  const answered = () => close.answered.push(performance.now());
                  sent.then(answered, answered);
                  return sent;
                };
              }
              return query;
            };
          },
        });
      counting = true;
      const sample = await run(Store, max, 500, {
        wrap,
        onclose: () => {
          if (counting) {
            closes.push({ at: performance.now(), probes: 0, answered: [] });
          }
        },
        ending: () => {
          counting = false;
          open = closes.filter((c) => c.answered.length < c.probes).length;
        },
      });
      // Rounds answered in full before the span's end.
      const probed = closes.filter((c) =>
        c.probes > 0 && c.answered.length === c.probes
      );
      const toAnswer = probed.map((c) => Math.max(...c.answered) - c.at);
      // The first reserve() after the close: the turn passed on.
      const toReserve = closes.map((c) => {
        const next = reserves.find((t) => t >= c.at);
        return next === undefined ? NaN : next - c.at;
      }).filter((v) => !Number.isNaN(v));
      console.log(
        `${label}, a client of ${max}, ${args.writers} writers, a close every 500 ms (load ${await load()}): ${closes.length} closes (${sample.closes} by the bench), ${
          closes.filter((c) => c.probes > 0).length
        } with probes (${open} with one still unanswered at the end), probes per close: ${
          [...new Set(closes.map((c) => c.probes))].join("/")
        }; close → last probe answered: median ${
          probed.length ? f2(median(toAnswer)) : "–"
        } ms, max ${
          probed.length ? f2(Math.max(...toAnswer)) : "–"
        }; close → next reserve(): median ${
          toReserve.length ? f2(median(toReserve)) : "–"
        } ms, max ${toReserve.length ? f2(Math.max(...toReserve)) : "–"}; ${
          f0(sample.rate)
        } writes/s, ${
          [...sample.errors.values()].reduce((a, b) => a + b, 0)
        } failed`,
      );
    }
  }
}
for (const [what, count] of unhandled) {
  console.log(`unhandled rejection ${count}×, ${what}`);
}
