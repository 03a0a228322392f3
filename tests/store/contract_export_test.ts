/**
 * A store of one's own (a database this package does not ship) must be
 * checkable against the same contract as MemoryStore, KvStore and
 * PostgresStore: the contract is a published entry point, not a file under
 * `tests/`, which `deno publish` leaves out.
 *
 * @module
 */

import assert from "node:assert/strict";

const config = JSON.parse(
  await Deno.readTextFile(new URL("../../deno.json", import.meta.url)),
);

function isPublished(path: string): boolean {
  const include: string[] = config.publish.include;
  const relative = path.replace(/^\.\//, "");
  return include.some((entry) =>
    entry.endsWith("/") ? relative.startsWith(entry) : relative === entry
  );
}

Deno.test("the store contract is a published entry point (@relayer/poison/testing) that a store of one's own can run", async () => {
  const entry: string | undefined = config.exports["./testing"];
  assert.ok(entry, "deno.json exports no ./testing entry");
  assert.ok(
    isPublished(entry),
    `${entry} is not in deno.json's publish.include`,
  );
  const contract = await import(
    new URL(`../../${entry}`, import.meta.url).href
  );
  assert.equal(typeof contract.storeContract, "function");
  // It registers its tests through the runner it is handed: here, a list.
  const names: string[] = [];
  const { MemoryStore } = await import("../../mod.ts");
  contract.storeContract(
    "MyStore",
    () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
    { test: (definition: { name: string }) => names.push(definition.name) },
  );
  assert.ok(names.length > 30);
  assert.ok(names.every((name) => name.startsWith("MyStore ")));
});
