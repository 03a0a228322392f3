/**
 * Sorts one thread's `perf` samples by what they were doing: the profile
 * of (d) in `docs/performance_http.md`, "What bounds (d)".
 *
 * Each sample's whole stack is matched against the classes in order, and
 * counted once, in the first it matches: a sample in the signer call
 * counts there even when the relayer called it. A sample with no
 * JavaScript frame at all is the runtime's own work; it is split by the
 * file its innermost frame lies in (Deno's binary, the C library, the
 * kernel). JIT frames are named only when the profiled process ran with
 * `DENO_V8_FLAGS=--perf-basic-prof` and its `/tmp/perf-<pid>.map` is
 * still there.
 *
 * ```sh
 * perf script -i perf.data --tid <tid> -F comm,tid,ip,sym,dso \
 *   | deno run bench/perf_classes.ts
 * ```
 *
 * @module
 */

// deno-lint-ignore-file no-console

/** A class of samples: its name, and the stack text that marks it. */
export interface SampleClass {
  /** How the table names it. */
  readonly name: string;
  /** A sample belongs here when any frame's text matches. */
  readonly marks: RegExp;
}

/** This repository's files, as V8 names their frames. */
const OURS = new URL("../", import.meta.url).href;
const escaped = OURS.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The classes, in the order a sample is matched against them. */
export const CLASSES: readonly SampleClass[] = [
  {
    name: "the log",
    marks: new RegExp(`(flush|line) ${escaped}main\\.ts`),
  },
  {
    name: "`HttpSender` and Deno's `fetch` under it",
    marks: /http_sender\.ts|deno_fetch\/26_fetch\.js/,
  },
  {
    name: "group commit and Deno KV's commit",
    marks: /_group_commit\.ts|doAtomicWrite|commit ext:deno_kv/,
  },
  {
    name: "Deno KV's read (`#get`, group read, `getMany`)",
    marks: new RegExp(
      `getMany ext:deno_kv|#get ${escaped}store/kv\\.ts|_group_read\\.ts`,
    ),
  },
  { name: "the HMAC", marks: /_auth\.ts|@noble\/hashes/ },
  { name: "the rest of ours", marks: new RegExp(escaped) },
  { name: "Hono", marks: /\/hono\// },
  { name: "`Deno.serve`'s JavaScript", marks: /deno_http\/00_serve/ },
  {
    name: "the timer machinery",
    marks: /02_timers\.js|internal\/timers\.mjs/,
  },
  {
    name: "any other JavaScript (event loop, promises, streams)",
    marks: /JS:/,
  },
];

/** What {@linkcode sortSamples} counted. */
export interface Sorted {
  /** Every sample. */
  readonly total: number;
  /** Samples per class name, in the order of the classes. */
  readonly classes: ReadonlyMap<string, number>;
  /** Samples with no JavaScript frame, by their innermost frame's file. */
  readonly native: ReadonlyMap<string, number>;
}

/**
 * Counts the samples of `perf script` text by class.
 *
 * @example A sample in the signer call, and one with no JavaScript frame
 * ```ts
 * import { sortSamples } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const text = [
 *   "deno 7",
 *   "  1 JS:+'#exchange file:///x/http_sender.ts:1:1 (/tmp/perf-7.map)",
 *   "",
 *   "deno 7",
 *   "  2 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)",
 * ].join("\n");
 * const sorted = sortSamples(text);
 * assert.equal(sorted.total, 2);
 * assert.equal(sorted.classes.get("`HttpSender` and Deno's `fetch` under it"), 1);
 * assert.equal(sorted.native.get("libc.so.6"), 1);
 * ```
 *
 * @param text What `perf script -F comm,tid,ip,sym,dso` printed: one
 * sample per paragraph, a header line, then its frames innermost first.
 * @param classes The classes, in the order to match them.
 * @returns The counts.
 */
export function sortSamples(
  text: string,
  classes: readonly SampleClass[] = CLASSES,
): Sorted {
  const counts = new Map<string, number>(classes.map((c) => [c.name, 0]));
  const native = new Map<string, number>();
  let total = 0;
  for (const sample of text.split(/\n\s*\n/)) {
    const frames = sample.split("\n").slice(1).filter((l) => l.trim() !== "");
    if (frames.length === 0) continue;
    total++;
    const match = classes.find((c) => frames.some((f) => c.marks.test(f)));
    if (match !== undefined) {
      counts.set(match.name, counts.get(match.name)! + 1);
      continue;
    }
    const file = /\(([^()]*)\)\s*$/.exec(frames[0]!)?.[1] ?? "unknown";
    const key = file.startsWith("[") ? file : file.split("/").at(-1)!;
    native.set(key, (native.get(key) ?? 0) + 1);
  }
  return { total, classes: counts, native };
}

/**
 * The counts as a Markdown table of shares, largest first.
 *
 * @example
 * ```ts
 * import { formatSorted } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const table = formatSorted({
 *   total: 4,
 *   classes: new Map([["the HMAC", 1]]),
 *   native: new Map([["libc.so.6", 3]]),
 * });
 * assert.match(table, /\| no JavaScript frame \| 75\.0% \|/);
 * assert.match(table, /\| … in libc\.so\.6 \| 75\.0% \|/);
 * ```
 *
 * @param sorted What {@linkcode sortSamples} counted.
 * @returns The table, then the number of samples.
 */
export function formatSorted(sorted: Sorted): string {
  const share = (n: number) => `${(100 * n / sorted.total).toFixed(1)}%`;
  const byCount = (m: ReadonlyMap<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]);
  const nativeTotal = [...sorted.native.values()].reduce((a, b) => a + b, 0);
  const rows = [
    ["no JavaScript frame", nativeTotal] as const,
    ...byCount(sorted.classes),
  ].sort((a, b) => b[1] - a[1]);
  const lines = ["| class | share |", "| --- | ---: |"];
  for (const [name, n] of rows) {
    lines.push(`| ${name} | ${share(n)} |`);
    if (name === "no JavaScript frame") {
      for (const [file, m] of byCount(sorted.native)) {
        lines.push(`| … in ${file} | ${share(m)} |`);
      }
    }
  }
  lines.push("", `${sorted.total} samples`);
  return lines.join("\n");
}

if (import.meta.main) {
  const text = await new Response(Deno.stdin.readable).text();
  const sorted = sortSamples(text);
  if (sorted.total === 0) {
    console.error(
      "No samples on stdin: pipe in 'perf script -i perf.data --tid <tid> -F comm,tid,ip,sym,dso'",
    );
    Deno.exit(2);
  }
  console.log(formatSorted(sorted));
}
