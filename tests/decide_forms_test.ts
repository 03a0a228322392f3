/**
 * Tests of `bench/decide_forms.ts`: each row as a multiple of its own
 * group's floor, the median (min–max) it prints, and that each form's and
 * peer's words pick exactly one row of the bench files, so a renamed row
 * cannot drop out of the table unseen.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type BenchReport,
  FORMS,
  PEERS,
  ratiosOf,
  spread,
} from "../bench/decide_forms.ts";

function row(
  group: string,
  name: string,
  min: number,
  baseline = false,
): BenchReport["benches"][number] {
  return { group, name, baseline, results: [{ ok: { min } }] };
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

Deno.test("ratiosOf() refuses a failed row and a group without a floor", () => {
  assert.throws(
    () =>
      ratiosOf({
        benches: [row("a", "floor", 10, true), {
          group: "a",
          name: "broken",
          baseline: false,
          results: [{}],
        }],
      }),
    /The bench 'broken' has no result/,
  );
  assert.throws(
    () => ratiosOf({ benches: [row("a", "ours", 10)] }),
    /The group 'a' has no baseline/,
  );
});

Deno.test("ratiosOf() leaves out what Deno timed call by call", () => {
  const timed = (
    group: string,
    name: string,
    min: number,
    baseline = false,
  ) => ({
    ...row(group, name, min, baseline),
    results: [{ ok: { min, highPrecision: true } }],
  });
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

Deno.test("spread() prints the median with the min–max", () => {
  assert.equal(spread([1.5, 1.2, 1.9]), "1.50× (1.20–1.90)");
  assert.equal(spread([2, 1]), "1.00× (1.00–2.00)");
  assert.equal(spread([]), "–");
});

Deno.test("each form's and peer's words name exactly one bench row", async () => {
  const names = [
    await Deno.readTextFile(
      new URL("../bench/peers_bench.ts", import.meta.url),
    ),
    await Deno.readTextFile(new URL("../bench/_peers.ts", import.meta.url)),
  ].flatMap((source) =>
    [...source.matchAll(/Deno\.bench\(\s*`([^`]*)`/g)].map((match) => match[1]!)
  );
  assert.ok(names.length >= 10, `found only ${names.length} bench names`);
  for (const { words } of [...FORMS, ...PEERS]) {
    const matched = names.filter((name) => name.includes(words));
    assert.equal(matched.length, 1, `'${words}' names ${matched.join(", ")}`);
  }
  // The filter of a form's run keeps the floor, the peers and that form.
  for (const { words } of FORMS) {
    const kept = names.filter((name) =>
      /floor|cockatiel|retry/.test(name) || name.includes(words)
    );
    assert.equal(kept.length, 4, `'${words}' keeps ${kept.join(", ")}`);
  }
});
