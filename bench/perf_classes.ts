/**
 * Counts one thread's `perf` samples by what they were doing: the profile
 * of (d) in `docs/performance_http.md`, "What bounds (d)".
 *
 * Each sample's whole stack is matched against the classes in order, and
 * counted once, in the first it matches: a sample in the signer call
 * counts there even when the relayer called it. Frames are matched by
 * their path within a checkout, so a profile of any checkout sorts alike.
 * A sample with no JavaScript frame at all is the runtime's own work; it
 * is split by the file its innermost frame lies in (Deno's binary, the C
 * library, the kernel).
 *
 * JIT frames are named only when the profiled process ran with
 * `DENO_V8_FLAGS=--perf-basic-prof` and its `/tmp/perf-<pid>.map` is there
 * when `perf script` runs. V8 reuses the addresses of collected code, so
 * copy the map when the recording ends and put it back before sorting.
 * A JIT frame `perf` could not name still counts as JavaScript; when most
 * are unnamed the script says the map is missing.
 *
 * ```sh
 * perf script -i perf.data --tid <tid> -F comm,tid,ip,sym,dso \
 *   | deno run bench/perf_classes.ts
 * ```
 *
 * @module
 */

// deno-lint-ignore-file no-console

/**
 * A class of samples: its name, and the frame text that marks it.
 *
 * @example
 * ```ts
 * import type { SampleClass } from "./perf_classes.ts";
 *
 * const hmac: SampleClass = { name: "the HMAC", pattern: /_auth\.ts/ };
 * ```
 */
export interface SampleClass {
  /** How the table names it. */
  readonly name: string;
  /** A sample belongs here when any frame of its stack matches. */
  readonly pattern: RegExp;
}

/** A frame of a file of a checkout, not of a package it depends on. */
const OURS = /file:\/\/\/(?!\S*\/(?:node_modules|registry\.npmjs\.org)\/)/;
/** A frame in JIT code: in the map V8 writes for `perf`. */
const JIT = /\(\/tmp\/perf-\d+\.map\)\s*$/;

/**
 * The classes, in the order a sample is matched against them. "The rest
 * of ours" is any file of the checkout that an earlier class did not
 * claim; the last class is any JavaScript at all.
 *
 * @example The first class a signer call's sample matches
 * ```ts
 * import { CLASSES } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const frame = "JS:+'#exchange file:///srv/app/relayer/http_sender.ts:1:1";
 * const first = CLASSES.find((c) => c.pattern.test(frame));
 * assert.equal(first?.name, "`HttpSender` and Deno's `fetch` under it");
 * ```
 */
export const CLASSES: readonly SampleClass[] = [
  {
    name: "the log",
    pattern: /[^\w$](?:flush|line) file:\/\/\/\S*\/main\.ts:/,
  },
  {
    name: "`HttpSender` and Deno's `fetch` under it",
    pattern: /\/http_sender\.ts:|deno_fetch\/26_fetch\.js/,
  },
  {
    name: "group commit and Deno KV's commit",
    pattern: /\/_group_commit\.ts:|doAtomicWrite|[^\w$]commit ext:deno_kv/,
  },
  {
    name: "Deno KV's read (`#get`, group read, `getMany`)",
    pattern:
      /getMany ext:deno_kv|#get file:\/\/\/\S*\/store\/kv\.ts:|\/_group_read\.ts:/,
  },
  { name: "the HMAC", pattern: /\/_auth\.ts:|@noble\/hashes/ },
  { name: "the rest of ours", pattern: OURS },
  { name: "Hono", pattern: /\/hono\// },
  { name: "`Deno.serve`'s JavaScript", pattern: /deno_http\/00_serve/ },
  {
    name: "the timer machinery",
    pattern: /02_timers\.js|\/timers\.m?[jt]s:/,
  },
  {
    name: "any other JavaScript (event loop, promises, streams)",
    pattern: new RegExp(`JS:|${JIT.source}`),
  },
];

/**
 * What {@linkcode countByClass} counted.
 *
 * @example
 * ```ts
 * import { countByClass } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const counts = countByClass("deno 7\n\t1 malloc (/usr/lib/libc.so.6)");
 * assert.equal(counts.total, 1);
 * assert.equal(counts.native.get("libc.so.6"), 1);
 * ```
 */
export interface ClassCounts {
  /** Every sample. */
  readonly total: number;
  /** Samples per class name, in the order of the classes. */
  readonly classes: ReadonlyMap<string, number>;
  /** Samples with no JavaScript frame, by their innermost frame's file. */
  readonly native: ReadonlyMap<string, number>;
  /** The threads the samples came from. */
  readonly threads: ReadonlySet<string>;
  /** Frames in JIT code, and how many of them `perf` could not name. */
  readonly jit: { readonly frames: number; readonly unnamed: number };
}

/**
 * Counts the samples of `perf script` text by class.
 *
 * @example A sample in the signer call, and one with no JavaScript frame
 * ```ts
 * import { countByClass } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const text = [
 *   "deno 7",
 *   "\t1 JS:+'#exchange file:///x/relayer/http_sender.ts:1:1 (/tmp/perf-7.map)",
 *   "",
 *   "deno 7",
 *   "\t2 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)",
 * ].join("\n");
 * const counts = countByClass(text);
 * assert.equal(counts.total, 2);
 * assert.equal(counts.classes.get("`HttpSender` and Deno's `fetch` under it"), 1);
 * assert.equal(counts.native.get("libc.so.6"), 1);
 * ```
 *
 * @param text What `perf script -F comm,tid,ip,sym,dso` printed for a
 * recording with call chains (`perf record -g`): one sample per paragraph,
 * a `comm tid` line, then its frames innermost first.
 * @param classes The classes, in the order to match them.
 * @returns The counts.
 * @throws {SyntaxError} If a sample does not open with a `comm tid` line,
 * as when the recording has no call chains.
 */
export function countByClass(
  text: string,
  classes: readonly SampleClass[] = CLASSES,
): ClassCounts {
  const counts = new Map<string, number>(classes.map((c) => [c.name, 0]));
  const native = new Map<string, number>();
  const threads = new Set<string>();
  let total = 0;
  let jitFrames = 0;
  let unnamed = 0;
  for (const sample of text.split(/\n\s*\n/)) {
    const lines = sample.split("\n").filter((l) => l.trim() !== "");
    if (lines.length === 0) continue;
    const thread = /\s(\d+)(?:\/(\d+))?\s*$/.exec(lines[0]!);
    if (thread === null) {
      throw new SyntaxError(
        `Cannot count samples as a sample must open with a 'comm tid' line: current first line is '${
          lines[0]!.trim().slice(0, 80)
        }'. Record with 'perf record -g' and print with 'perf script -F comm,tid,ip,sym,dso'`,
      );
    }
    threads.add(thread[2] ?? thread[1]!);
    const frames = lines.slice(1);
    if (frames.length === 0) continue;
    total++;
    for (const frame of frames) {
      if (!JIT.test(frame)) continue;
      jitFrames++;
      if (/\s\[unknown\]\s/.test(frame)) unnamed++;
    }
    const match = classes.find((c) => frames.some((f) => c.pattern.test(f)));
    if (match !== undefined) {
      counts.set(match.name, counts.get(match.name)! + 1);
      continue;
    }
    const file = /\(([^()]*)\)\s*$/.exec(frames[0]!)?.[1] ?? "unknown";
    const key = file.startsWith("[") ? file : file.split("/").at(-1)!;
    native.set(key, (native.get(key) ?? 0) + 1);
  }
  return {
    total,
    classes: counts,
    native,
    threads,
    jit: { frames: jitFrames, unnamed },
  };
}

/**
 * The counts as a Markdown table of shares, largest first.
 *
 * @example The runtime's own work, split by file
 * ```ts
 * import { formatShares } from "./perf_classes.ts";
 * import assert from "node:assert/strict";
 *
 * const table = formatShares({
 *   total: 4,
 *   classes: new Map([["the HMAC", 1]]),
 *   native: new Map([["libc.so.6", 3]]),
 *   threads: new Set(["7"]),
 *   jit: { frames: 1, unnamed: 0 },
 * });
 * assert.match(table, /\| no JavaScript frame \| 75\.0% \|/);
 * assert.match(table, /\| … in libc\.so\.6 \| 75\.0% \|/);
 * ```
 *
 * @param counts What {@linkcode countByClass} counted.
 * @returns The table, then the number of samples.
 */
export function formatShares(counts: ClassCounts): string {
  const share = (n: number) =>
    counts.total === 0 ? "–" : `${(100 * n / counts.total).toFixed(1)}%`;
  const byCount = (m: ReadonlyMap<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]);
  const nativeTotal = [...counts.native.values()].reduce((a, b) => a + b, 0);
  const rows = [
    ["no JavaScript frame", nativeTotal] as const,
    ...byCount(counts.classes),
  ].sort((a, b) => b[1] - a[1]);
  const lines = ["| class | share |", "| --- | ---: |"];
  for (const [name, n] of rows) {
    lines.push(`| ${name} | ${share(n)} |`);
    if (name === "no JavaScript frame") {
      for (const [file, m] of byCount(counts.native)) {
        lines.push(`| … in ${file} | ${share(m)} |`);
      }
    }
  }
  lines.push("", `${counts.total} samples`);
  return lines.join("\n");
}

if (import.meta.main) {
  const text = await new Response(Deno.stdin.readable).text();
  let counts: ClassCounts;
  try {
    counts = countByClass(text);
  } catch (error) {
    console.error((error as Error).message);
    Deno.exit(2);
  }
  if (counts.total === 0) {
    console.error(
      "No samples on stdin: pipe in 'perf script -i perf.data --tid <tid> -F comm,tid,ip,sym,dso'",
    );
    Deno.exit(2);
  }
  if (counts.threads.size > 1) {
    console.error(
      `Warning: the samples are of ${counts.threads.size} threads, counted together; pass 'perf script --tid <tid>' to count one`,
    );
  }
  if (counts.jit.unnamed * 2 > counts.jit.frames) {
    console.error(
      `Warning: ${counts.jit.unnamed} of ${counts.jit.frames} JIT frames are unnamed: run with DENO_V8_FLAGS=--perf-basic-prof and keep /tmp/perf-<pid>.map for 'perf script'`,
    );
  }
  console.log(formatShares(counts));
}
