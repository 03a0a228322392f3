/**
 * The README and docs/ as the published package shows them: every
 * relative link resolves to a file that ships.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join, posix } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** What `deno publish` ships: deno.json's `publish.include`. */
const config = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
const published: string[] = config.publish.include;

function isPublished(path: string): boolean {
  return published.some((entry) =>
    entry.endsWith("/") ? path.startsWith(entry) : path === entry
  );
}

/** The Markdown files a reader of the package sees. */
const pages = [
  "README.md",
  ...[...Deno.readDirSync(join(ROOT, "docs"))]
    .filter((entry) => entry.name.endsWith(".md"))
    .map((entry) => `docs/${entry.name}`),
];

Deno.test("every relative link in the README and docs/ names a file that exists and is published, so it works on JSR too", async () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = await Deno.readTextFile(join(ROOT, page));
    for (
      const [, target] of text.matchAll(
        /\]\(([^)#\s]+)(?:#[^)\s]*)?(?:\s+"[^"]*")?\)/g,
      )
    ) {
      if (/^[a-z][a-z+.-]*:/.test(target!)) continue; // https:, mailto:
      // Package paths use `/` on every OS, as publish.include does.
      const path = posix.normalize(posix.join(posix.dirname(page), target!));
      let exists = true;
      try {
        await Deno.stat(join(ROOT, path));
      } catch {
        exists = false;
      }
      if (!exists) broken.push(`${page}: ${target} does not exist`);
      else if (!isPublished(path)) {
        broken.push(`${page}: ${target} is not in deno.json's publish.include`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(pages.length > 5);
});
