/**
 * The words of a refusal the store contract matches are listed in
 * docs/stores.md ("What the contract asks beyond the types"): the rules
 * live in `store/_rules.ts`, which the package does not export, so a
 * store of one's own learns them there or not at all. Before that list, a
 * store written from the docs alone failed the contract on 31 phrases
 * (`before its hold is recorded`, `holds are recorded before
 * authorization`, …) written nowhere but in the source.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** The regular expressions the contract holds error messages to. */
async function contractPhrases(): Promise<string[]> {
  const source = await Deno.readTextFile(
    new URL("testing/store_contract.ts", ROOT),
  );
  const found = new Set<string>();
  for (const line of source.split("\n")) {
    const code = line.trim();
    if (code.startsWith("/") && !/^\/[^/*]/.test(code)) continue; // comments
    if (code.startsWith("*")) continue;
    for (
      const match of code.matchAll(
        /(?:^|[\s(,!&|])\/((?:[^/\\\n]|\\.)+)\/(?=\.test\(error\.message\)|,$|\)|$)/g,
      )
    ) found.add(match[1]!);
  }
  return [...found];
}

/** The section of docs/stores.md that lists them. */
async function listed(): Promise<string> {
  const doc = await Deno.readTextFile(new URL("docs/stores.md", ROOT));
  const start = doc.indexOf("### What the contract asks beyond the types");
  assert.ok(start >= 0, "docs/stores.md has lost its section");
  return doc.slice(start, doc.indexOf("\n## ", start));
}

Deno.test("docs/stores.md lists every phrase the store contract matches in an error message", async () => {
  const phrases = await contractPhrases();
  assert.ok(phrases.length >= 30, `found only ${phrases.length}`);
  const section = await listed();
  const missing = phrases.filter((phrase) =>
    // The contract's ids (`pi_1`, `pi_\d+`) read `<id>` in the table.
    !new RegExp(phrase.replaceAll("pi_\\d+", "<id>").replaceAll("pi_1", "<id>"))
      .test(section)
  );
  assert.deepEqual(missing, []);
});
