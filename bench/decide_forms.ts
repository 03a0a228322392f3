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
 * runs, per random source; a row Deno timed call by call is left out of
 * its run (see {@linkcode ratiosOf}). A peer's "alone" figure pools its
 * rows of every form's run (5 × `--runs` samples).
 *
 * `deno task bench:forms [--runs 3]`
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";

/** Each call form of `decide` in `peers_bench.ts`: a label, and the words only its row's name holds. */
export const FORMS: readonly { label: string; words: string }[] = [
  { label: "decide(err, n)", words: "no policy" },
  { label: "decide(err, n, { maxDeliveries: 5 })", words: "maxDeliveries: 5" },
  { label: "decide(err, n, DEFAULT_POLICY)", words: "DEFAULT_POLICY" },
  { label: "decide(err, n, definePolicy(…))", words: "definePolicy" },
  {
    label: "decide(err, n, { maxDeliveries: 3 }), exhausted",
    words: "exhausted",
  },
];

/** The peers, by the words that open their rows' names. */
export const PEERS: readonly { label: string; words: string }[] = [
  { label: "cockatiel `halfJitterGenerator`", words: "cockatiel:" },
  { label: "retry `createTimeout`", words: "retry:" },
];

/** The part of `deno bench --json`'s report this script reads. */
export interface BenchReport {
  benches: {
    group: string | null;
    name: string;
    baseline: boolean;
    results: { ok?: { min: number; highPrecision?: boolean } }[];
  }[];
}

/** One row of one run: its group, its name, its fastest sample ÷ the floor's. */
export interface Ratio {
  group: string;
  name: string;
  ratio: number;
}

/**
 * Each row's fastest sample as a multiple of its group's baseline (the
 * floor) in the same report. A row Deno timed call by call instead of in
 * batches (`highPrecision`, on a loaded machine) measured the timer, not
 * the code: it is left out, and so is every row of a group whose floor was.
 *
 * @throws {Error} If a row failed, or a group has no baseline.
 */
export function ratiosOf(report: BenchReport): Ratio[] {
  const floors = new Map<string, number | undefined>();
  for (const bench of report.benches) {
    const ok = bench.results[0]?.ok;
    if (ok === undefined) {
      throw new Error(
        `The bench '${bench.name}' has no result: run it alone to see why`,
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
        `The group '${group}' has no baseline: it needs the floor`,
      );
    }
    const floor = floors.get(group);
    const ok = bench.results[0]!.ok!;
    if (floor === undefined || ok.highPrecision) continue;
    ratios.push({ group, name: bench.name, ratio: ok.min / floor });
  }
  return ratios;
}

/** `median× (min–max)` of `values`; the median of an even count is the lower middle one. */
export function spread(values: readonly number[]): string {
  if (values.length === 0) return "–";
  const sorted = values.toSorted((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return `${median.toFixed(2)}× (${sorted[0]!.toFixed(2)}–${
    sorted.at(-1)!.toFixed(2)
  })`;
}

async function benchJson(filter?: string): Promise<BenchReport> {
  const args = ["bench", "--json", "bench/peers_bench.ts"];
  if (filter !== undefined) args.push("--filter", filter);
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: new URL("..", import.meta.url),
  }).output();
  if (code !== 0) {
    throw new Error(
      `deno ${args.join(" ")} failed (exit ${code}):\n${
        new TextDecoder().decode(stderr)
      }`,
    );
  }
  return JSON.parse(new TextDecoder().decode(stdout));
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { runs: { type: "string", default: "3" } },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) {
    throw new RangeError(
      `Cannot run as '--runs' must be an integer >= 1: current value is ${values.runs}`,
    );
  }
  const seen: (Ratio & { how: "one group" | "alone" })[] = [];
  for (let run = 1; run <= runs; run++) {
    console.error(`run ${run} of ${runs}: every form in one group`);
    for (const ratio of ratiosOf(await benchJson())) {
      seen.push({ how: "one group", ...ratio });
    }
    for (const form of FORMS) {
      console.error(`run ${run} of ${runs}: ${form.label} alone`);
      const report = await benchJson(`/floor|cockatiel|retry|${form.words}/`);
      const ratios = ratiosOf(report);
      if (!ratios.some(({ name }) => name.includes(form.words))) {
        throw new Error(
          `No row of bench/peers_bench.ts has '${form.words}' in its name: update FORMS in bench/decide_forms.ts`,
        );
      }
      for (const ratio of ratios) seen.push({ how: "alone", ...ratio });
    }
  }
  const groups = [...new Set(seen.map(({ group }) => group))];
  const find = (how: string, group: string, words: string) =>
    seen.filter((row) =>
      row.how === how && row.group === group && row.name.includes(words)
    ).map(({ ratio }) => ratio);
  console.log(
    `${runs} runs; each row's fastest sample ÷ the floor's, median (min–max)\n`,
  );
  console.log(
    `| row | ${
      groups.map((group) => {
        const source = group.replace(/^delivery \d+, | for every side$/g, "");
        return `${source}: one group | ${source}: alone`;
      }).join(" | ")
    } |`,
  );
  console.log(`| --- |${" ---: | ---: |".repeat(groups.length)}`);
  for (const row of [...PEERS, ...FORMS]) {
    const cells = groups.flatMap((group) => [
      spread(find("one group", group, row.words)),
      spread(find("alone", group, row.words)),
    ]);
    console.log(`| ${row.label} | ${cells.join(" | ")} |`);
  }
}
