/**
 * Tests of `bench/decide_forms.ts`: each row as a multiple of its own
 * group's floor, what is left out, the median (min–max) it prints, the
 * table's pooling, and that each form's filter picks exactly the floor, the
 * peers and that form from the bench files, so a renamed row cannot drop
 * out of the table unseen.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  assertRan,
  type BenchReport,
  filterFor,
  FORMS,
  OURS,
  PEERS,
  ratiosOf,
  type Seen,
  spread,
  table,
} from "../bench/decide_forms.ts";

/** A bench of one result; `timed` marks it as timed call by call. */
function row(
  group: string,
  name: string,
  min: number,
  baseline = false,
  timed = false,
): BenchReport["benches"][number] {
  const ok = timed ? { min, highPrecision: true } : { min };
  return { group, name, baseline, results: [{ ok }] };
}

function timed(
  group: string,
  name: string,
  min: number,
  baseline = false,
): BenchReport["benches"][number] {
  return row(group, name, min, baseline, true);
}

/** The names `Deno.bench` is given in the bench files `bench:forms` runs. */
async function benchNames(): Promise<string[]> {
  const sources = await Promise.all(
    ["../bench/peers_bench.ts", "../bench/_peers.ts"].map((path) =>
      Deno.readTextFile(new URL(path, import.meta.url))
    ),
  );
  return sources.flatMap((source) =>
    [...source.matchAll(/Deno\.bench\(\s*`([^`]*)`/g)].map((match) => match[1]!)
  );
}

Deno.test("ratiosOf() divides each row by the floor of its own group", () => {
  const report: BenchReport = {
    benches: [
      row("a", "floor", 10, true),
      row("a", "ours", 15),
      row("b", "floor", 20, true),
      row("b", "ours", 15),
    ],
  };
  assert.deepEqual(ratiosOf(report), [
    { group: "a", name: "ours", ratio: 1.5 },
    { group: "b", name: "ours", ratio: 0.75 },
  ]);
});

Deno.test("ratiosOf() leaves out what Deno timed call by call", () => {
  const report: BenchReport = {
    benches: [
      row("a", "floor", 10, true),
      timed("a", "one call at a time", 50),
      row("a", "batched", 12),
      timed("b", "floor", 40, true),
      row("b", "batched", 12),
    ],
  };
  assert.deepEqual(ratiosOf(report), [
    { group: "a", name: "batched", ratio: 1.2 },
  ]);
});

Deno.test("ratiosOf() refuses a row without a result and a group without a floor", () => {
  assert.throws(
    () =>
      ratiosOf({
        benches: [row("a", "floor", 10, true), {
          group: "a",
          name: "broken",
          baseline: false,
          results: [{ failed: "boom" }],
        }],
      }),
    /The bench 'broken' has no result: run it alone/,
  );
  assert.throws(
    () => ratiosOf({ benches: [row("a", "ours", 10)] }),
    /The group 'a' has no baseline: register the floor/,
  );
});

Deno.test("spread() prints the median with the min–max", () => {
  assert.equal(spread([1.5, 1.2, 1.9]), "1.50× (1.20–1.90)");
  assert.equal(spread([2, 1]), "1.50× (1.00–2.00)");
  assert.equal(spread([1.1, 1.4, 1.2, 1.3]), "1.25× (1.10–1.40)");
  assert.equal(spread([]), "–");
});

Deno.test("assertRan() refuses a report without the form's bench", () => {
  const report: BenchReport = {
    benches: [
      row("a", "floor", 10, true),
      timed("a", "ours: decide(err, n) (no policy)", 12),
    ],
  };
  assertRan(report, "no policy");
  assert.throws(
    () => assertRan(report, "definePolicy"),
    /No bench of bench\/peers_bench.ts has 'definePolicy' in its name: update FORMS/,
  );
});

Deno.test("table() pools a peer over every form's run and counts short cells", () => {
  const seen: Seen[] = [];
  const add = (how: Seen["how"], name: string, ratio: number) =>
    seen.push({ how, group: "delivery 3, Math.random", name, ratio });
  // One run: the whole file, then each form alone.
  add("one group", "retry: createTimeout", 1.7);
  add("one group", "ours: decide(err, n) (no policy)", 1.4);
  for (const [index, form] of FORMS.entries()) {
    add("alone", "retry: createTimeout", 1.6 + index / 100);
    if (form.words !== "exhausted") add("alone", `ours: ${form.words}`, 1.3);
  }
  const lines = table(seen, 1).split("\n");
  assert.equal(
    lines[0],
    "| row | `Math.random`, one group | `Math.random`, alone |",
  );
  const retry = lines.find((line) => line.startsWith("| retry"));
  assert.equal(
    retry,
    "| retry `createTimeout` | 1.70× (1.70–1.70) | 1.62× (1.60–1.64) |",
  );
  const cockatiel = lines.find((line) => line.startsWith("| cockatiel"));
  assert.equal(
    cockatiel,
    "| cockatiel `halfJitterGenerator` | –, n = 0 | –, n = 0 |",
  );
  const exhausted = lines.find((line) => line.includes("exhausted"));
  assert.match(exhausted!, /\| –, n = 0 \| –, n = 0 \|$/);
  // Ours that are not decide are seen in one group only: no short cell.
  const backoff = lines.find((line) => line.startsWith("| ours `backoff"));
  assert.equal(backoff, "| ours `backoff(n)` | –, n = 0 | – |");
  assert.equal(lines.length, 2 + PEERS.length + OURS.length + FORMS.length);
});

Deno.test("FORMS, PEERS and OURS each name exactly one bench row", async () => {
  const names = await benchNames();
  assert.ok(names.length >= 10, `found only ${names.length} bench names`);
  for (const { words } of [...FORMS, ...PEERS, ...OURS]) {
    const matched = names.filter((name) => name.includes(words));
    assert.equal(matched.length, 1, `'${words}' names ${matched.join(", ")}`);
  }
});

Deno.test("filterFor() keeps the floor, the peers and one form", async () => {
  const names = await benchNames();
  for (const { words } of FORMS) {
    const filter = filterFor(words);
    assert.match(filter, /^\/.*\/$/);
    const pattern = new RegExp(filter.slice(1, -1));
    const kept = names.filter((name) => pattern.test(name));
    assert.equal(kept.length, 4, `'${words}' keeps ${kept.join(", ")}`);
    assert.ok(kept.some((name) => name.includes(words)));
  }
  // Words are taken literally.
  const literal = new RegExp(filterFor("decide(err, n)").slice(1, -1));
  assert.equal(literal.test("ours: decide(err, n) (no policy)"), true);
  assert.equal(literal.test("ours: decideerr, n"), false);
});
