/**
 * The contention simulation of the AWS Architecture Blog post "Exponential
 * Backoff And Jitter" (Marc Brooker, 2015), re-created from its simulator,
 * `src/backoff_simulator.py` in `awslabs/aws-arch-backoff-simulator`.
 *
 * N clients each update one shared row once, with optimistic concurrency:
 * read the version, then write conditionally on it. A client whose write
 * loses backs off, then starts again from the read. Each message crosses the
 * network in `|Normal(10, 2)|` ms. A trial ends when every client has
 * written; `time` is then the virtual clock (the last client's success
 * reaching it) and `calls` counts the writes, as the simulator does: its
 * server counts a call in `write` only, never in `read`.
 *
 * The model runs on a virtual clock, a priority queue of messages, and a
 * seeded PRNG (mulberry32, Box–Muller for the Normal), so a seed names one
 * exact result. The exponential, full and equal strategies are this
 * module's own {@linkcode backoff} and {@linkcode jitter}; decorrelated and
 * none have no counterpart there and are written inline.
 *
 * `deno task simulate [--seed N] [--out file.csv]` prints the CSV
 * (`clients,time,calls,Algorithm`) and writes `docs/backoff_simulation.csv`
 * and `docs/backoff_simulation.svg`.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { mulberry32 } from "../support/prng.ts";
import { parseArgs } from "node:util";
import { readArgs, refuseArgs } from "./_measure.ts";
import { backoff, jitter } from "../mod.ts";
import * as Plot from "@observablehq/plot";
import { chartSvg, PALETTE } from "../support/chart.ts";

/** The simulator's names for its strategies, in its output order. */
export type Algorithm =
  | "Exponential"
  | "Decorr"
  | "EqualJitter"
  | "FullJitter"
  | "None";

/** Every {@linkcode Algorithm}, in the simulator's order. */
export const ALGORITHMS: readonly Algorithm[] = [
  "Exponential",
  "Decorr",
  "EqualJitter",
  "FullJitter",
  "None",
];

/** One line of the result: one client count under one algorithm. */
export interface Row {
  /** How many clients contended for the row. */
  clients: number;
  /**
   * When the last client finished, in virtual ms, averaged over the trials
   * and truncated to an integer (the simulator prints `tm/100` with `%d`).
   */
  time: number;
  /**
   * Writes per trial (failed and successful), averaged over the trials and
   * truncated to an integer (the simulator prints `calls/100` with `%d`).
   */
  calls: number;
  /** The backoff strategy. */
  algorithm: Algorithm;
}

/** One backoff a client took, for {@linkcode SimulateOptions.onBackoff}. */
export interface BackoffEvent {
  /** The strategy that chose the delay. */
  algorithm: Algorithm;
  /** The simulator's attempt counter: 1 after the first failed write. */
  attempt: number;
  /** The delay chosen, in ms. */
  delayMs: number;
  /** The un-jittered exponential delay for this attempt, in ms. */
  exponentialMs: number;
}

/** Options for {@linkcode simulate}. */
export interface SimulateOptions {
  /**
   * The client counts to simulate.
   *
   * @default {[10, 20, …, 190]}
   */
  clients?: readonly number[];
  /**
   * The strategies to simulate.
   *
   * @default {ALGORITHMS}
   */
  algorithms?: readonly Algorithm[];
  /**
   * Trials per client count and algorithm.
   *
   * @default {100}
   */
  trials?: number;
  /**
   * The PRNG seed (any 32-bit integer).
   *
   * @default {2015}
   */
  seed?: number;
  /**
   * The backoff base, in ms.
   *
   * @default {5}
   */
  baseMs?: number;
  /**
   * The backoff cap, in ms.
   *
   * @default {2000}
   */
  capMs?: number;
  /**
   * The mean one-way network delay, in ms.
   *
   * @default {10}
   */
  netMeanMs?: number;
  /**
   * The standard deviation of the one-way network delay, in ms.
   *
   * @default {2}
   */
  netSdMs?: number;
  /** Called for every backoff any client takes (for tests and analysis). */
  onBackoff?: (event: BackoffEvent) => void;
}

/** The simulator's client counts: `xrange(1, 20)` times 10. */
export const DEFAULT_CLIENTS: readonly number[] = Array.from(
  { length: 19 },
  (_, i) => (i + 1) * 10,
);

// Each (client count, algorithm) cell gets its own stream, derived from the
// seed: a run over 10..50 then gives the same rows at those counts as the full
// run with the same trials, and dropping an algorithm changes no other row.
function cellSeed(seed: number, clients: number, algorithm: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13) ^ clients, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16) ^ (algorithm + 1), 0x27d4eb2f);
  return (h ^ (h >>> 15)) >>> 0;
}

// Message kinds. The simulator's message is (time, handler, reply_to,
// payload); the handler is always one of these four, in this cycle.
const SERVER_READ = 0;
const CLIENT_READ_RSP = 1;
const SERVER_WRITE = 2;
const CLIENT_WRITE_RSP = 3;

/**
 * The message queue: a binary min-heap ordered by delivery time, then by
 * the order messages were sent. In this model every client has exactly one
 * message in flight (its read, the reply, its write, the reply, or the read
 * after a backoff), so the heap holds client ids and each client's one
 * message lives in typed arrays indexed by client. Handling a message and
 * sending the next one is then a single sift-down of the top instead of a
 * pop and a push: a full run handles about 60 million messages.
 *
 * Ties in time are measure-zero with continuous delays; the send order
 * makes them deterministic anyway (Python's heapq would go on to compare
 * bound methods).
 */
class Queue {
  readonly time: Float64Array;
  readonly kind: Uint8Array;
  readonly payload: Float64Array;
  readonly #seq: Float64Array;
  readonly #heap: Int32Array;
  #size = 0;
  #sent = 0;

  constructor(clients: number) {
    this.time = new Float64Array(clients);
    this.kind = new Uint8Array(clients);
    this.payload = new Float64Array(clients);
    this.#seq = new Float64Array(clients);
    this.#heap = new Int32Array(clients);
  }

  get size(): number {
    return this.#size;
  }

  /** The client whose message arrives first. */
  get top(): number {
    return this.#heap[0]!;
  }

  /** Sends the first message of `client`, which has none in flight. */
  add(client: number, time: number, kind: number, payload: number): void {
    this.#write(client, time, kind, payload);
    const heap = this.#heap;
    let i = this.#size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.#before(heap[parent]!, client)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = client;
  }

  /** Replaces the top client's message with its next one. */
  replaceTop(time: number, kind: number, payload: number): void {
    this.#write(this.#heap[0]!, time, kind, payload);
    this.#siftDown(this.#heap[0]!);
  }

  /** Removes the top client: it has nothing more to send. */
  removeTop(): void {
    const last = this.#heap[--this.#size]!;
    if (this.#size > 0) this.#siftDown(last);
  }

  #write(client: number, time: number, kind: number, payload: number): void {
    this.time[client] = time;
    this.kind[client] = kind;
    this.payload[client] = payload;
    this.#seq[client] = this.#sent++;
  }

  #siftDown(client: number): void {
    const heap = this.#heap;
    const size = this.#size;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= size) break;
      if (child + 1 < size && this.#before(heap[child + 1]!, heap[child]!)) {
        child++;
      }
      if (this.#before(client, heap[child]!)) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = client;
  }

  #before(a: number, b: number): boolean {
    const ta = this.time[a]!;
    const tb = this.time[b]!;
    return ta < tb || (ta === tb && this.#seq[a]! < this.#seq[b]!);
  }
}

/** `|Normal(mean, sd)|` by Box–Muller, keeping the second value for later. */
function network(
  random: () => number,
  mean: number,
  sd: number,
): () => number {
  let spare = Number.NaN;
  return () => {
    let z: number;
    if (Number.isNaN(spare)) {
      const u = 1 - random(); // (0, 1]: log(0) never happens
      const r = Math.sqrt(-2 * Math.log(u));
      const theta = 2 * Math.PI * random();
      z = r * Math.cos(theta);
      spare = r * Math.sin(theta);
    } else {
      z = spare;
      spare = Number.NaN;
    }
    return Math.abs(mean + sd * z);
  };
}

interface Model {
  baseMs: number;
  capMs: number;
  onBackoff: SimulateOptions["onBackoff"];
}

interface Trial {
  time: number;
  calls: number;
}

/** One trial: `setup_sim` then `run_sim` of the simulator. */
function trial(
  clients: number,
  algorithm: Algorithm,
  random: () => number,
  delay: () => number,
  model: Model,
): Trial {
  const { baseMs, capMs, onBackoff } = model;
  const attempt = new Int32Array(clients);
  // Decorrelated keeps its last sleep per client, starting at the base.
  const sleep = new Float64Array(clients).fill(baseMs);
  let version = 0;
  let calls = 0;

  const pause = (client: number): number => {
    const n = ++attempt[client]!;
    // The simulator's expo(n) is min(cap, 2^n × base) with n >= 1 after the
    // first lost write, so its first pause is 2 × base. Our backoff(delivery)
    // is min(cap, base × 2^(delivery − 1)) with delivery 1 → base: the same
    // value is backoff(n + 1).
    const exponentialMs = backoff(n + 1, { baseMs, capMs });
    // Our jitter gives whole milliseconds ([0, d] full, [floor(d/2), d]
    // equal) where the simulator draws a continuous uniform; the bounds and
    // the means (d/2, about 3d/4) are the same.
    let delayMs: number;
    switch (algorithm) {
      case "Exponential":
        delayMs = jitter(exponentialMs, "none", random);
        break;
      case "FullJitter":
        delayMs = jitter(exponentialMs, "full", random);
        break;
      case "EqualJitter":
        delayMs = jitter(exponentialMs, "equal", random);
        break;
      case "Decorr": {
        // min(cap, uniform(base, sleep × 3)); Python's uniform(a, b) is
        // a + (b − a) × random().
        const prev = sleep[client]!;
        delayMs = Math.min(capMs, baseMs + (prev * 3 - baseMs) * random());
        sleep[client] = delayMs;
        break;
      }
      case "None":
        delayMs = 0;
        break;
    }
    onBackoff?.({ algorithm, attempt: n, delayMs, exponentialMs });
    return delayMs;
  };

  // Every client sends its first read at time 0.
  const queue = new Queue(clients);
  for (let c = 0; c < clients; c++) queue.add(c, delay(), SERVER_READ, 0);

  let now = 0;
  while (queue.size > 0) {
    const c = queue.top;
    now = queue.time[c]!;
    const payload = queue.payload[c]!;
    switch (queue.kind[c]) {
      case SERVER_READ:
        // The version is the one at the server when the read arrives.
        queue.replaceTop(now + delay(), CLIENT_READ_RSP, version);
        break;
      case CLIENT_READ_RSP:
        queue.replaceTop(now + delay(), SERVER_WRITE, payload);
        break;
      case SERVER_WRITE: {
        calls++;
        const ok = payload === version;
        if (ok) version++;
        queue.replaceTop(now + delay(), CLIENT_WRITE_RSP, ok ? 1 : 0);
        break;
      }
      case CLIENT_WRITE_RSP:
        if (payload === 0) {
          // The simulator draws the network delay, then the backoff, and
          // adds both to the read's arrival time.
          const d = delay();
          queue.replaceTop(now + d + pause(c), SERVER_READ, 0);
        } else {
          queue.removeTop();
        }
        break;
    }
  }
  return { time: now, calls };
}

function checkCount(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(
      `Cannot simulate as '${name}' must be an integer >= ${min}: current value is ${value}`,
    );
  }
}

/**
 * Runs the simulation: for each client count, for each algorithm, `trials`
 * independent trials, averaged the simulator's way (the sums divided by the
 * trials, truncated to integers).
 *
 * @param options The client counts, algorithms, trials, seed and model.
 * @returns One row per client count per algorithm, counts outermost.
 * @throws {RangeError} If a client count, `trials`, `baseMs` or `capMs` is
 * not a positive integer.
 *
 * @example Same seed, same rows
 * ```ts
 * import { simulate } from "./simulate.ts";
 * import assert from "node:assert/strict";
 *
 * const options = { clients: [10], trials: 5, seed: 7 };
 * assert.deepEqual(simulate(options), simulate(options));
 * ```
 */
export function simulate(options: SimulateOptions = {}): Row[] {
  const {
    clients = DEFAULT_CLIENTS,
    algorithms = ALGORITHMS,
    trials = 100,
    seed = 2015,
    baseMs = 5,
    capMs = 2000,
    netMeanMs = 10,
    netSdMs = 2,
  } = options;
  checkCount("trials", trials, 1);
  checkCount("baseMs", baseMs, 1);
  checkCount("capMs", capMs, 1);
  for (const n of clients) checkCount("clients", n, 1);
  const model: Model = { baseMs, capMs, onBackoff: options.onBackoff };

  const rows: Row[] = [];
  for (const n of clients) {
    for (const algorithm of algorithms) {
      const random = mulberry32(
        cellSeed(seed, n, ALGORITHMS.indexOf(algorithm)),
      );
      const delay = network(random, netMeanMs, netSdMs);
      let time = 0;
      let calls = 0;
      for (let t = 0; t < trials; t++) {
        const result = trial(n, algorithm, random, delay, model);
        time += result.time;
        calls += result.calls;
      }
      rows.push({
        clients: n,
        time: Math.trunc(time / trials),
        calls: Math.trunc(calls / trials),
        algorithm,
      });
    }
  }
  return rows;
}

/**
 * The rows as the simulator's CSV: `clients,time,calls,Algorithm`.
 *
 * @param rows The rows from {@linkcode simulate}.
 * @returns The CSV text, header first, one line per row, ending in `\n`.
 */
export function toCsv(rows: readonly Row[]): string {
  const lines = ["clients,time,calls,Algorithm"];
  for (const r of rows) {
    lines.push(`${r.clients},${r.time},${r.calls},${r.algorithm}`);
  }
  return lines.join("\n") + "\n";
}

/**
 * The rows as two charts side by side: calls and completion time against
 * the number of clients, one line per algorithm.
 *
 * @param rows The rows from {@linkcode simulate}.
 * @returns The SVG document.
 */
export function toSvg(rows: readonly Row[]): string {
  const algorithms = ALGORITHMS.filter((a) =>
    rows.some((r) => r.algorithm === a)
  );
  const color = {
    domain: algorithms,
    range: algorithms.map((a) => PALETTE[ALGORITHMS.indexOf(a)]!),
  };
  const maxClients = Math.max(...rows.map((r) => r.clients));
  const panel = (
    title: string,
    y: "calls" | "time",
    label: string,
    type: "linear" | "log",
  ): Plot.PlotOptions => {
    const values = rows.map((r) => r[y]);
    // A log axis gets 1-2 ticks over the decades the data spans (Plot
    // leaves a 5 unlabelled on a log axis).
    const low = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...values))));
    const high = 10 ** Math.ceil(Math.log10(Math.max(2, ...values)));
    const ticks = [];
    for (let d = low; d < high; d *= 10) ticks.push(d, 2 * d);
    ticks.push(high);
    const logTicks = ticks.filter((t) =>
      t >= Math.min(...values) / 2 && t <= Math.max(...values) * 2
    );
    return {
      marginTop: 36,
      marginLeft: 64,
      marginRight: 24,
      marginBottom: 44,
      color,
      x: {
        label: "clients",
        labelAnchor: "center",
        labelArrow: "none",
        domain: [0, Math.ceil(maxClients / 50) * 50],
        tickFormat: "d",
      },
      y: {
        type,
        label,
        labelAnchor: "center",
        labelArrow: "none",
        grid: true,
        tickFormat: (v: number) => v >= 1000 ? `${v / 1000}k` : String(v),
        ...(type === "log"
          ? { domain: [logTicks[0]!, logTicks.at(-1)!], ticks: logTicks }
          : { nice: true }),
      },
      marks: [
        Plot.text([title], {
          frameAnchor: "top",
          dy: -26,
          fontSize: 14,
          fontWeight: "bold",
        }),
        ...(type === "linear" ? [Plot.ruleY([0])] : []),
        Plot.lineY(rows, {
          x: "clients",
          y,
          z: "algorithm",
          stroke: "algorithm",
          strokeWidth: 2,
        }),
        Plot.dot(rows, { x: "clients", y, fill: "algorithm", r: 2.5 }),
      ],
    };
  };
  return chartSvg([
    panel("Calls vs clients", "calls", "calls (writes per trial)", "linear"),
    // Exponential without jitter runs 10–30 times longer than the rest; on
    // a linear axis the other four would lie flat on zero.
    panel(
      "Completion time vs clients",
      "time",
      "completion time (ms, log scale)",
      "log",
    ),
  ], {
    title: "Exponential backoff and jitter: N clients, one row, OCC writes",
    legend: algorithms.map((a, i) => ({ label: a, color: color.range[i]! })),
    width: 900,
    height: 400,
  });
}

if (import.meta.main) {
  const { values } = readArgs("simulate", () =>
    parseArgs({
      args: Deno.args,
      options: { seed: { type: "string" }, out: { type: "string" } },
    }), "[--seed N] [--out docs/FILE.csv]");
  const seed = values.seed === undefined ? 2015 : Number(values.seed);
  if (!Number.isInteger(seed)) {
    refuseArgs("simulate", `--seed must be an integer: ${values.seed}`);
  }
  // Refused before the run: the task may write under docs/ only, and a
  // refusal after a minute of simulation would lose it.
  if (
    values.out !== undefined &&
    (await Deno.permissions.query({ name: "write", path: values.out }))
        .state !== "granted"
  ) {
    refuseArgs(
      "simulate",
      `--out ${values.out}: this run may not write there (deno task simulate writes under docs/ only): give a path in docs/, such as docs/seed${seed}.csv`,
    );
  }
  const started = performance.now();
  const rows = simulate({ seed });
  const seconds = (performance.now() - started) / 1000;
  const csv = toCsv(rows);
  console.log(csv.trimEnd());
  if (values.out !== undefined) await Deno.writeTextFile(values.out, csv);
  const docs = new URL("../docs/", import.meta.url);
  await Deno.mkdir(docs, { recursive: true });
  await Deno.writeTextFile(new URL("backoff_simulation.csv", docs), csv);
  await Deno.writeTextFile(
    new URL("backoff_simulation.svg", docs),
    toSvg(rows),
  );
  console.error(
    `simulate: seed ${seed}, ${rows.length} rows in ${seconds.toFixed(1)} s`,
  );
}
