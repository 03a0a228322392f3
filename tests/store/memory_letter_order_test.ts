/**
 * MemoryStore orders the dead letters of one millisecond by their job ids'
 * code points, as Deno KV (UTF-8 keys) and PostgreSQL (`COLLATE "C"`) do,
 * comparing UTF-16 code units with no copy: ids drawn around the edges
 * where code units and code points disagree (U+D7FF, U+E000, U+FF01,
 * U+FFFF, U+10000, an emoji), paged one by one and all at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { MemoryStore, type Store } from "../../mod.ts";
import { deadLetter } from "../../testing/_fixtures.ts";
import { runs } from "../_fc.ts";

/** The order the stores keep: code point by code point. */
function byCodePoints(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0)!);
  const y = [...b].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < x.length && i < y.length; i++) {
    if (x[i] !== y[i]) return x[i]! - y[i]!;
  }
  return x.length - y.length;
}

const EDGES = [
  "a",
  "b",
  "~",
  "\u00e9",
  "\ud7ff",
  "\ue000",
  "\uff01",
  "\uffff",
  "\u{10000}",
  "\u{103ff}", // its low surrogate U+DFFF, the last one
  "\u{1f600}",
  "\u{10ffff}",
];

/** Ids of 1 to 4 characters, each an edge, well-formed (no lone surrogate). */
const ids = fc.uniqueArray(
  fc.array(fc.constantFrom(...EDGES), { minLength: 1, maxLength: 4 })
    .map((chars) => chars.join("")),
  { minLength: 2, maxLength: 30 },
);

async function keep(store: Store, jobIds: readonly string[]): Promise<void> {
  for (const id of jobIds) await store.putDeadLetter(deadLetter(id, 5_000));
}

async function pages(store: Store, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<Store["listDeadLetters"]>> = await store
      .listDeadLetters({ limit, cursor });
    seen.push(...page.items.map((letter) => letter.jobId));
    cursor = page.cursor;
  } while (cursor !== null);
  return seen;
}

Deno.test("MemoryStore pages the letters of one millisecond in code point order, by one and all at once", async () => {
  await fc.assert(
    fc.asyncProperty(ids, async (jobIds) => {
      const store = new MemoryStore();
      await keep(store, jobIds);
      const all = await pages(store, 100);
      assert.equal(all.length, jobIds.length);
      assert.deepEqual(all, [...all].sort(byCodePoints));
      assert.deepEqual(await pages(store, 1), all);
      // A letter taken, then another kept: the next pages show each.
      const taken = await store.getDeadLetter(jobIds[0]!);
      await store.redrive(taken!.jobId, taken!.version);
      const rest = jobIds.slice(1).sort(byCodePoints);
      assert.deepEqual(await pages(store, 2), rest);
      await store.putDeadLetter(deadLetter("\u{1f600}new", 5_000));
      assert.deepEqual(
        await pages(store, 2),
        [...new Set([...rest, "\u{1f600}new"])].sort(byCodePoints),
      );
    }),
    { numRuns: runs(200) },
  );
});

Deno.test("MemoryStore answers a cursor past its last letter (the letters after it taken since) with an empty last page, repeating none", async () => {
  const store = new MemoryStore();
  await store.putDeadLetter(deadLetter("pi_0001/settle", 6_000));
  await store.putDeadLetter(deadLetter("pi_0002/settle", 5_000));
  const first = await store.listDeadLetters({ limit: 1 });
  assert.deepEqual(first.items.map((letter) => letter.jobId), [
    "pi_0001/settle",
  ]);
  assert.notEqual(first.cursor, null);
  const taken = await store.getDeadLetter("pi_0002/settle");
  await store.redrive(taken!.jobId, taken!.version);
  const next = await store.listDeadLetters({ limit: 1, cursor: first.cursor });
  assert.deepEqual(next.items, []);
  assert.equal(next.cursor, null);
});
