/**
 * `decide` on each call form, in one group with every other form and
 * alone, against the floor and the peers: `bench/peers_bench.ts` run
 * `--runs` times (default 3) whole, then once per form with `--filter`, so
 * that only the floor, the peers and that one form run.
 *
 * Why both. In one group, every form calls the same `decide`, so the
 * engine's type feedback for it mixes every form's policy argument; an app
 * that calls one form gives it one. The peers' rows are the same code in
 * both runs.
 *
 * Printed: each row's fastest sample as a multiple of the floor's fastest
 * sample in the same run (the floor is 1.00×), median (min–max) over the
 * runs, per random source. A peer's "alone" figure pools its rows of every
 * form's run (5 × `--runs` samples). A row Deno timed call by call is left
 * out of its run (see {@linkcode ratiosOf}); a cell with fewer samples
 * than that says how many it has.
 *
 * `deno task bench:forms [--runs 3]`
 *
 * With `--file F` (such as `--file backoff`, the file `deno bench backoff`
 * runs), it runs F whole `--runs` times instead and prints every group's
 * rows against that group's baseline.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { readArgs, spread as spreadOf, wholeFlag } from "./_measure.ts";

/** A row of the table: its label, and the words only its bench's name holds. */
export interface RowName {
  /** How the table names it. */
  readonly label: string;
  /** Words found in its bench's name and in no other bench's. */
  readonly words: string;
}

/** Each call form of `decide` in `peers_bench.ts`. */
export const FORMS: readonly RowName[] = [
  { label: "`decide(err, n)`", words: "no policy" },
  {
    label: "`decide(err, n, { maxDeliveries: 5 })`",
    words: "maxDeliveries: 5",
  },
  { label: "`decide(err, n, DEFAULT_POLICY)`", words: "DEFAULT_POLICY" },
  { label: "`decide(err, n, definePolicy(…))`", words: "definePolicy" },
  {
    label: "`decide(err, n, { maxDeliveries: 3 })`, exhausted",
    words: "exhausted",
  },
];

/** The peers, by the words that open their rows' names. */
export const PEERS: readonly RowName[] = [
  { label: "cockatiel `halfJitterGenerator`", words: "cockatiel:" },
  { label: "retry `createTimeout`", words: "retry:" },
];

/** Ours that are not `decide`: seen in one group only (no filter keeps them alone). */
export const OURS: readonly RowName[] = [
  { label: "ours `backoff(n)`", words: "ours: backoff(n)" },
  {
    label: 'ours `jitter(backoff(n), "equal")`',
    words: "ours: jitter(backoff(n)",
  },
];

/** The part of `deno bench --json`'s report this script reads. */
export interface BenchReport {
  /** One entry per bench that was run. */
  benches: {
    /** Its group, or `null` outside any group. */
    group: string | null;
    /** Its name. */
    name: string;
    /** Whether it is its group's baseline (here, the floor). */
    baseline: boolean;
    /** Its result: `ok` with its figures in ns, or `failed`. */
    results: {
      ok?: { min: number; highPrecision?: boolean };
      failed?: unknown;
    }[];
  }[];
}

/** One row of one run. */
export interface Ratio {
  /** The bench's group. */
  group: string;
  /** The bench's name. */
  name: string;
  /** Its fastest sample ÷ its group's floor's fastest sample. */
  ratio: number;
}

/**
 * The `--filter` that keeps the floor, the two peers and the one bench
 * whose name holds `words` (taken literally).
 *
 * @example
 * ```ts
 * import { filterFor } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * const filter = filterFor("maxDeliveries: 5");
 * const regex = new RegExp(filter.slice(1, -1));
 * assert.ok(regex.test("ours: decide(err, n, { maxDeliveries: 5 })"));
 * assert.ok(regex.test("cockatiel: halfJitterGenerator(n-1, options)"));
 * assert.ok(!regex.test("ours: decide(err, n) (no policy)"));
 * ```
 *
 * @param words Words from {@linkcode FORMS}.
 * @returns A regular expression between slashes, as `deno bench` takes it.
 */
export function filterFor(words: string): string {
  return `/floor|cockatiel|retry|${
    words.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&")
  }/`;
}

/**
 * Each row's fastest sample as a multiple of its group's baseline (the
 * floor) in the same report. A row Deno timed call by call instead of in
 * batches (`highPrecision`, on a loaded machine) measured the timer, not
 * the code: it is left out, and so is every row of a group whose floor was.
 *
 * @example A row at one and a half times its floor
 * ```ts
 * import { ratiosOf } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * const ok = (min: number) => [{ ok: { min } }];
 * const ratios = ratiosOf({
 *   benches: [
 *     { group: "g", name: "floor", baseline: true, results: ok(10) },
 *     { group: "g", name: "ours", baseline: false, results: ok(15) },
 *   ],
 * });
 * assert.deepEqual(ratios, [{ group: "g", name: "ours", ratio: 1.5 }]);
 * ```
 *
 * @param report What `deno bench --json` printed.
 * @returns One ratio per row that is not a baseline and was timed in batches.
 * @throws {Error} If a row has no result, or a group has no baseline.
 */
export function ratiosOf(report: BenchReport): Ratio[] {
  const floors = new Map<string, number | undefined>();
  for (const bench of report.benches) {
    const ok = bench.results[0]?.ok;
    if (ok === undefined) {
      throw new Error(
        `The bench '${bench.name}' has no result: run it alone with 'deno bench' to see why`,
      );
    }
    if (bench.baseline) {
      floors.set(bench.group ?? "", ok.highPrecision ? undefined : ok.min);
    }
  }
  const ratios: Ratio[] = [];
  for (const bench of report.benches) {
    if (bench.baseline) continue;
    const group = bench.group ?? "";
    if (!floors.has(group)) {
      throw new Error(
        `The group '${group}' has no baseline: register the floor in it with 'floorAndPeers' (bench/_peers.ts)`,
      );
    }
    const floor = floors.get(group);
    const ok = bench.results[0]!.ok!;
    if (floor === undefined || ok.highPrecision) continue;
    ratios.push({ group, name: bench.name, ratio: ok.min / floor });
  }
  return ratios;
}

/**
 * `median× (min–max)` of `values`, the median of an even count being the
 * mean of the middle two; `–` for none.
 *
 * @example
 * ```ts
 * import { spread } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(spread([1.5, 1.25, 1.75]), "1.50× (1.25–1.75)");
 * ```
 *
 * @param values Ratios.
 * @returns The cell's text.
 */
export function spread(values: readonly number[]): string {
  return spreadOf(values, (v) => `${v.toFixed(2)}×`, (v) => v.toFixed(2));
}

/**
 * Checks that a bench whose name holds `words` ran (timed call by call or
 * not), so that a renamed row cannot drop out of the table unseen.
 *
 * @example
 * ```ts
 * import { assertRan } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * const report = {
 *   benches: [{ group: "g", name: "ours: decide(err, n) (no policy)", baseline: false, results: [] }],
 * };
 * assertRan(report, "no policy");
 * assert.throws(() => assertRan(report, "definePolicy"), /update FORMS/);
 * ```
 *
 * @param report What `deno bench --json` printed.
 * @param words Words from {@linkcode FORMS}.
 * @throws {Error} If no bench of the report has `words` in its name.
 */
export function assertRan(report: BenchReport, words: string): void {
  if (!report.benches.some(({ name }) => name.includes(words))) {
    throw new Error(
      `No bench of bench/peers_bench.ts has '${words}' in its name: update FORMS in bench/decide_forms.ts`,
    );
  }
}

/** A ratio, and whether its run held every form or one alone. */
export interface Seen extends Ratio {
  /** `"one group"`: the whole file ran; `"alone"`: one form's filter. */
  how: "one group" | "alone";
}

/**
 * The Markdown table of what `runs` runs saw: a row per peer and per form,
 * two columns (one group, alone) per random source.
 *
 * @example One run, the no-policy form seen in one group only
 * ```ts
 * import { table } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * const text = table([{
 *   group: "delivery 3, Math.random for every side",
 *   name: "ours: decide(err, n) (no policy)",
 *   ratio: 1.4,
 *   how: "one group",
 * }], 1);
 * const row = text.split("\n").find((line) => line.startsWith("| `decide(err, n)`"));
 * assert.equal(row, "| `decide(err, n)` | 1.40× (1.40–1.40) | –, n = 0 |");
 * ```
 *
 * @param seen Every ratio of every run.
 * @param runs How many times the whole file, and each form alone, ran.
 * @returns The table, a line per row.
 */
export function table(seen: readonly Seen[], runs: number): string {
  const groups = [...new Set(seen.map(({ group }) => group))];
  const source = (group: string) => /LCG/.test(group) ? "LCG" : "`Math.random`";
  const lines = [
    `| row | ${
      groups.map((group) =>
        `${source(group)}, one group | ${source(group)}, alone`
      ).join(" | ")
    } |`,
    `| --- |${" ---: | ---: |".repeat(groups.length)}`,
  ];
  for (const row of [...PEERS, ...OURS, ...FORMS]) {
    // A peer runs in each form's filtered run; a form in its own only; ours
    // that are not `decide` in none.
    const expected = {
      "one group": runs,
      alone: PEERS.includes(row)
        ? runs * FORMS.length
        : OURS.includes(row)
        ? 0
        : runs,
    };
    const cells = groups.flatMap((group) =>
      (["one group", "alone"] as const).map((how) => {
        const values = seen.filter((one) =>
          one.how === how && one.group === group &&
          one.name.includes(row.words)
        ).map(({ ratio }) => ratio);
        const short = values.length < expected[how]
          ? `, n = ${values.length}`
          : "";
        return `${spread(values)}${short}`;
      })
    );
    lines.push(`| ${row.label} | ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

/**
 * The Markdown table of every group of a bench file run `runs` times
 * whole: a row per bench, its fastest sample ÷ its group's baseline's in
 * the same run, median (min–max).
 *
 * @example
 * ```ts
 * import { groupsTable } from "./decide_forms.ts";
 * import assert from "node:assert/strict";
 *
 * const text = groupsTable([
 *   { group: "g", name: "ours", ratio: 1.5 },
 *   { group: "g", name: "ours", ratio: 1.25 },
 * ], 2);
 * assert.equal(text.split("\n").at(-1), "| ours | 1.38× (1.25–1.50) |");
 * ```
 *
 * @param seen Every ratio of every run.
 * @param runs How many times the file ran.
 * @returns A heading and a table per group.
 */
export function groupsTable(seen: readonly Ratio[], runs: number): string {
  const lines: string[] = [];
  for (const group of new Set(seen.map(({ group }) => group))) {
    lines.push(`\n${group}\n`, "| row | vs the baseline |", "| --- | ---: |");
    const rows = seen.filter((one) => one.group === group);
    for (const name of new Set(rows.map(({ name }) => name))) {
      const values = rows.filter((one) => one.name === name).map(({ ratio }) =>
        ratio
      );
      const short = values.length < runs ? `, n = ${values.length}` : "";
      lines.push(`| ${name} | ${spread(values)}${short} |`);
    }
  }
  return lines.join("\n");
}

async function benchJson(
  filter?: string,
  file = "bench/peers_bench.ts",
): Promise<BenchReport> {
  const args = ["bench", "--json", file];
  if (filter !== undefined) args.push("--filter", filter);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: new URL("..", import.meta.url),
  }).output();
  const text = new TextDecoder().decode(stdout);
  if (code !== 0) {
    // A failed bench's error is in the JSON on stdout, not on stderr.
    let failures = "";
    try {
      failures = (JSON.parse(text) as BenchReport).benches
        .filter((bench) => bench.results[0]?.failed !== undefined)
        .map((bench) =>
          `${bench.name}: ${JSON.stringify(bench.results[0]!.failed)}`
        ).join("\n");
    } catch {
      // Not JSON: the bench did not start; stderr says why.
    }
    throw new Error(
      `deno ${args.join(" ")} failed (exit ${code}):\n${
        failures || new TextDecoder().decode(stderr)
      }`,
    );
  }
  return JSON.parse(text);
}

if (import.meta.main) {
  const { runs, file } = readArgs("bench:forms", () => {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        runs: { type: "string", default: "3" },
        file: { type: "string" },
      },
    });
    return { runs: wholeFlag("runs", values.runs), file: values.file };
  }, "[--runs 3] [--file backoff]");
  if (file !== undefined) {
    const seen: Ratio[] = [];
    for (let run = 1; run <= runs; run++) {
      console.error(`run ${run} of ${runs}: ${file}`);
      seen.push(...ratiosOf(await benchJson(undefined, file)));
    }
    console.log(
      `${runs} runs of ${file}; each row's fastest sample ÷ its group's baseline's, median (min–max)`,
    );
    console.log(groupsTable(seen, runs));
    Deno.exit(0);
  }
  const seen: Seen[] = [];
  for (let run = 1; run <= runs; run++) {
    console.error(`run ${run} of ${runs}: every form in one group`);
    for (const ratio of ratiosOf(await benchJson())) {
      seen.push({ how: "one group", ...ratio });
    }
    for (const form of FORMS) {
      console.error(`run ${run} of ${runs}: ${form.label} alone`);
      const report = await benchJson(filterFor(form.words));
      assertRan(report, form.words);
      for (const ratio of ratiosOf(report)) {
        seen.push({ how: "alone", ...ratio });
      }
    }
  }
  console.log(
    `${runs} runs; each row's fastest sample ÷ the floor's, median (min–max)\n`,
  );
  console.log(table(seen, runs));
}
