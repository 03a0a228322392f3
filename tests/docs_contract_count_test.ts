/**
 * What docs/postgres.md says PostgreSQL runs of the store contract, held
 * to the contract: how many tests it registers, and how many of them a
 * store without a commit gap runs (its commit-gap test is left out).
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../mod.ts";
import { storeContract } from "../testing/store_contract.ts";

/** The tests `storeContract` registers for a store, and those it ignores. */
function registered(commitGap: boolean): { total: number; ignored: number } {
  let total = 0;
  let ignored = 0;
  const count = (definition: unknown) => {
    total++;
    if (
      typeof definition === "object" && definition !== null &&
      (definition as { ignore?: unknown }).ignore === true
    ) ignored++;
  };
  storeContract(
    "counted",
    () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
    { test: count as unknown as typeof Deno.test, commitGap },
  );
  return { total, ignored };
}

Deno.test("docs/postgres.md counts the store contract's tests that PostgreSQL runs as the contract registers them", async () => {
  const text = await Deno.readTextFile(
    new URL("../docs/postgres.md", import.meta.url),
  );
  const said = /store contract \((\d+) of its (\d+) tests/.exec(text);
  assert.ok(said, "docs/postgres.md no longer counts the contract's tests");
  const { total, ignored } = registered(false);
  // PostgresStore runs it as tests/store/postgres_test.ts does: no commit gap.
  assert.deepEqual(
    { runs: Number(said[1]), of: Number(said[2]) },
    { runs: total - ignored, of: total },
  );
  // The one it leaves out is the commit-gap test, run where a store has one.
  assert.equal(registered(true).ignored, 0);
  assert.ok(ignored > 0);
});
