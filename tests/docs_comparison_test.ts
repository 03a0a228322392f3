/**
 * docs/comparison.md's cockatiel column, held to cockatiel itself (the
 * version deno.json pins, the one the benches run): what its limit counts,
 * its default, and its default delay. The row gave every other tool's
 * default and none for cockatiel, whose `maxAttempts` is unlimited unless
 * set: a reader took the limit as bounded, as the others' are.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handleAll, retry } from "cockatiel";

const doc = await Deno.readTextFile(
  new URL("../docs/comparison.md", import.meta.url),
);

/** The cell of `row` (its first cell's text) in the column of `tool`. */
function cell(row: string, tool: string): string {
  const lines = doc.split("\n").filter((line) => line.startsWith("|"));
  const heads = lines[0]!.split("|").map((c) => c.trim());
  const column = heads.findIndex((head) => head === tool);
  assert.ok(column > 0, `no column ${tool}`);
  const line = lines.find((l) => l.split("|")[1]!.trim() === row);
  assert.ok(line !== undefined, `no row ${row}`);
  return line.split("|")[column]!.trim();
}

/** How many times a call that always fails runs under `policy`, at most `cut`. */
async function calls(
  policy: ReturnType<typeof retry>,
  cut: number,
): Promise<{ count: number }> {
  let count = 0;
  await policy.execute(() => {
    count++;
    if (count >= cut) return "given up on by the test";
    throw new Error("fails");
  }).catch(() => {});
  return { count };
}

Deno.test("docs/comparison.md says what cockatiel's limit counts and its default, as cockatiel 4.0.0 runs: retries after the first, unlimited unless maxAttempts is set", async () => {
  const said = cell("what the limit counts", "cockatiel");
  // maxAttempts 2: the first call and 2 retries.
  assert.equal(
    (await calls(retry(handleAll, { maxAttempts: 2 }), 100)).count,
    3,
  );
  assert.match(said, /^retries after the first \(`maxAttempts`/);
  // Not set: it retries until the call succeeds (here the 200th call, which
  // the test ends by returning), with no delay between.
  const unset = await calls(retry(handleAll, {}), 200);
  assert.equal(unset.count, 200);
  assert.match(said, /\(`maxAttempts` unlimited\)$/);
  assert.match(
    cell("a floor under the jittered delay", "cockatiel"),
    /no backoff at all unless configured/,
  );
});
