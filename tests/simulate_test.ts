/**
 * Tests of the AWS backoff simulation (`bench/simulate.ts`): replayable by
 * seed, every client finishes, the blog's ordering of the strategies holds,
 * and equal jitter keeps its floor.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Algorithm,
  ALGORITHMS,
  type BackoffEvent,
  type Row,
  simulate,
  toCsv,
  toSvg,
} from "../bench/simulate.ts";
import { count, marks } from "./_svg.ts";

function at(rows: readonly Row[], clients: number, algorithm: Algorithm): Row {
  const row = rows.find((r) =>
    r.clients === clients && r.algorithm === algorithm
  );
  assert.ok(row, `no row for ${clients} clients, ${algorithm}`);
  return row;
}

Deno.test("simulate() gives the same rows for the same seed", () => {
  const options = { clients: [10, 30], trials: 5, seed: 42 };
  const rows = simulate(options);
  assert.deepEqual(simulate(options), rows);
  assert.notDeepEqual(simulate({ ...options, seed: 43 }), rows);
});

Deno.test("simulate() gives a cell the same row whatever else runs", () => {
  const full = simulate({ clients: [10, 20, 30], trials: 5, seed: 9 });
  const one = simulate({
    clients: [20],
    algorithms: ["FullJitter"],
    trials: 5,
    seed: 9,
  });
  assert.deepEqual(one, [at(full, 20, "FullJitter")]);
});

Deno.test("simulate() finishes every algorithm for 10 clients", () => {
  const rows = simulate({ clients: [10], trials: 20, seed: 1 });
  assert.deepEqual(rows.map((r) => r.algorithm), ALGORITHMS);
  for (const row of rows) {
    // The simulator counts writes only, and each client writes at least
    // once: its last write is the one that succeeds.
    assert.ok(row.calls >= row.clients, `${row.algorithm}: ${row.calls}`);
    // A read and a write, each there and back: at least 4 network legs.
    assert.ok(row.time > 0, `${row.algorithm}: ${row.time}`);
  }
});

Deno.test("simulate() counts one lost write per backoff", () => {
  for (const algorithm of ALGORITHMS) {
    let backoffs = 0;
    const [row] = simulate({
      clients: [25],
      algorithms: [algorithm],
      trials: 1,
      seed: 3,
      onBackoff: () => backoffs++,
    });
    // One trial, so the average is the count: every client wins once.
    assert.equal(row?.calls, 25 + backoffs, algorithm);
  }
});

Deno.test("simulate() finds the blog's order of the strategies at 50 clients", () => {
  for (const seed of [1, 2, 3]) {
    const rows = simulate({ clients: [10, 20, 30, 40, 50], trials: 20, seed });
    const full = at(rows, 50, "FullJitter");
    const equal = at(rows, 50, "EqualJitter");
    const worst = Math.min(
      at(rows, 50, "Exponential").calls,
      at(rows, 50, "None").calls,
    );
    // Jitter needs well under two thirds of the calls of no jitter or no
    // backoff; equal jitter needs more calls than full jitter, and longer.
    assert.ok(equal.calls * 1.5 < worst, `seed ${seed}: ${equal.calls}`);
    assert.ok(full.calls * 1.5 < worst, `seed ${seed}: ${full.calls}`);
    assert.ok(equal.calls > full.calls, `seed ${seed}`);
    assert.ok(equal.time > full.time, `seed ${seed}`);
  }
});

Deno.test("simulate() maps the attempt onto backoff()'s 1-based delivery", () => {
  const exponential: BackoffEvent[] = [];
  simulate({
    clients: [30],
    algorithms: ["Exponential"],
    trials: 3,
    seed: 5,
    onBackoff: (e) => exponential.push(e),
  });
  // The simulator's expo(n) = min(cap, 2^n × base): 10 ms after the first
  // lost write, 2000 ms from attempt 9 on.
  for (const e of exponential) {
    assert.equal(e.exponentialMs, Math.min(2000, 5 * 2 ** e.attempt));
    assert.equal(e.delayMs, e.exponentialMs);
  }
  assert.ok(exponential.some((e) => e.attempt === 1 && e.delayMs === 10));
});

Deno.test("simulate() never lets equal jitter wait less than half the exponential delay", () => {
  const delays: Record<string, BackoffEvent[]> = {};
  simulate({
    clients: [10, 50],
    algorithms: ["EqualJitter", "FullJitter"],
    trials: 10,
    seed: 11,
    onBackoff: (e) => (delays[e.algorithm] ??= []).push(e),
  });
  const equal = delays["EqualJitter"] ?? [];
  const full = delays["FullJitter"] ?? [];
  assert.ok(equal.length > 1000);
  for (const e of equal) {
    assert.ok(e.delayMs >= e.exponentialMs / 2, JSON.stringify(e));
    assert.ok(e.delayMs <= e.exponentialMs, JSON.stringify(e));
  }
  // The same check catches full jitter, which has no floor.
  assert.ok(full.some((e) => e.delayMs < e.exponentialMs / 2));
});

Deno.test("simulate() refuses a count that is not a positive integer", () => {
  assert.throws(() => simulate({ trials: 0 }), RangeError);
  assert.throws(() => simulate({ clients: [10, 2.5] }), RangeError);
});

Deno.test("toCsv() and toSvg() draw every row", () => {
  const rows = simulate({ clients: [10, 20], trials: 2, seed: 1 });
  const csv = toCsv(rows).trimEnd().split("\n");
  assert.equal(csv[0], "clients,time,calls,Algorithm");
  assert.equal(csv.length, 1 + 2 * ALGORITHMS.length);
  const svg = toSvg(rows);
  // Two panels, each with one line per algorithm and a dot per row.
  const lines = marks(svg, "line");
  assert.equal(lines.length, 2);
  for (const line of lines) {
    assert.equal(count(line, /<path /g), ALGORITHMS.length);
  }
  assert.equal(
    count(marks(svg, "dot").join(""), /<circle /g),
    2 * rows.length,
  );
  for (const algorithm of ALGORITHMS) {
    assert.match(svg, new RegExp(`>${algorithm}<`));
  }
  assert.match(svg, />completion time \(ms, log scale\)</);
});
