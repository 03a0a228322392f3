/**
 * The README and docs/ as the published package shows them: every
 * relative link resolves to a file that ships, and every #anchor to a
 * heading of its page.
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

/**
 * A heading's anchor as GitHub makes it: lower case, punctuation but `-`
 * and `_` dropped, each space a `-`; a repeated one gains `-1`, `-2`, ….
 */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1") // a link's text only
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

Deno.test("every #anchor of a link in the README and docs/ names a heading of the page it points at", async () => {
  const broken: string[] = [];
  const texts = new Map<string, string>();
  const read = async (path: string) => {
    if (!texts.has(path)) {
      texts.set(path, await Deno.readTextFile(join(ROOT, path)));
    }
    return texts.get(path)!;
  };
  let checked = 0;
  for (const page of pages) {
    const text = await read(page);
    for (
      const [, target, anchor] of text.matchAll(/\]\(([^)#\s]*)#([^)\s]+)\)/g)
    ) {
      if (/^[a-z][a-z+.-]*:/.test(target!)) continue; // https:, mailto:
      if (target !== "" && !target!.endsWith(".md")) continue; // a source line
      const path = target === ""
        ? page
        : posix.normalize(posix.join(posix.dirname(page), target!));
      checked++;
      if (!anchorsOf(await read(path)).has(decodeURIComponent(anchor!))) {
        broken.push(`${page}: ${target}#${anchor} names no heading of ${path}`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked > 10, `only ${checked} anchors checked`);
});

/**
 * The files whose text names a page's anchor outside a Markdown link: the
 * README's install lines, and the messages the service writes.
 */
async function textsNamingAnchors(): Promise<string[]> {
  const files = [...pages, "main.ts"];
  const walk = async (dir: string) => {
    for await (const entry of Deno.readDir(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) await walk(path);
      else if (entry.name.endsWith(".ts")) files.push(path);
    }
  };
  for (const dir of ["policy", "store", "relayer", "webhook", "cloudflare"]) {
    await walk(dir);
  }
  return files;
}

Deno.test("every page#anchor the README, docs/ and the service's messages name in plain text names a heading of that page", async () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of await textsNamingAnchors()) {
    const text = await Deno.readTextFile(join(ROOT, file));
    // A Markdown link's own target is the test above's.
    const plain = text.replace(/\]\([^)\s]*\)/g, "]()");
    for (
      const [, dir, page, anchor] of plain.matchAll(
        /\b(docs\/)?([a-z_]+\.md)#([a-z0-9_-]+)/g,
      )
    ) {
      // In a page of docs/, a bare name is its neighbour; elsewhere, a path
      // from the root.
      const path = dir === undefined && file.startsWith("docs/")
        ? `docs/${page}`
        : `${dir ?? ""}${page}`;
      checked++;
      let headings: Set<string>;
      try {
        headings = anchorsOf(await Deno.readTextFile(join(ROOT, path)));
      } catch {
        broken.push(`${file}: ${path} does not exist`);
        continue;
      }
      if (!headings.has(anchor!)) {
        broken.push(`${file}: ${path}#${anchor} names no heading of ${path}`);
      }
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked >= 3, `only ${checked} anchors checked`);
});
