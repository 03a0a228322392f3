/**
 * Tests of `bench/perf_classes.ts`: a sample counts once, in the first
 * class it matches, wherever on its stack the mark is; a sample with no
 * JavaScript frame is split by its innermost frame's file; this
 * repository's frames are found wherever it is checked out; and the script
 * refuses empty input with one line.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CLASSES, sortSamples } from "../bench/perf_classes.ts";

const ROOT = new URL("../", import.meta.url).href;

/** One sample of `perf script -F comm,tid,ip,sym,dso`, innermost first. */
function sample(...frames: string[]): string {
  return ["deno 42/42", ...frames.map((f, i) => `\t${i + 1} ${f}`)].join(
    "\n",
  );
}

const js = (name: string) => `JS:+'${name} (/tmp/perf-42.map)`;

Deno.test("sortSamples() counts a sample once, in the first class any frame of its stack matches", () => {
  const text = [
    // The signer call made from the relayer: the signer's class, which
    // comes first, though a frame of ours is innermost.
    sample(
      js(`readText ${ROOT}relayer/http_sender.ts:1:1`),
      js(`deliver ${ROOT}relayer/relayer.ts:2:2`),
    ),
    sample(
      "7f00 [unknown] (/usr/bin/deno)",
      js(`deliver ${ROOT}relayer/relayer.ts:2:2`),
    ),
    sample(js("getMany ext:deno_kv/01_db.ts:1:1")),
    sample(js(`#run ${ROOT}store/_group_read.ts:1:1`)),
    sample(js(`flush ${ROOT}main.ts:1:1`)),
    sample(js("runMicrotasks ext:core/01_core.js:1:1")),
  ].join("\n\n");
  const sorted = sortSamples(text);
  assert.equal(sorted.total, 6);
  assert.deepEqual(
    Object.fromEntries([...sorted.classes].filter(([, n]) => n > 0)),
    {
      "`HttpSender` and Deno's `fetch` under it": 1,
      "the rest of ours": 1,
      "Deno KV's read (`#get`, group read, `getMany`)": 2,
      "the log": 1,
      "any other JavaScript (event loop, promises, streams)": 1,
    },
  );
  assert.equal(sorted.native.size, 0);
});

Deno.test("sortSamples() splits samples with no JavaScript frame by the file of the innermost frame", () => {
  const text = [
    sample(
      "ffff _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)",
      "7f00 [unknown] (/root/deno)",
    ),
    sample("ffff pvm_irq_enable ([kernel.kallsyms])"),
    sample("7f00 [unknown] (/root/deno)"),
    sample("7f01 [unknown] (/root/deno)", "7f02 [unknown] (/root/deno)"),
  ].join("\n\n");
  const sorted = sortSamples(text);
  assert.equal(sorted.total, 4);
  assert.deepEqual(Object.fromEntries(sorted.native), {
    "libc.so.6": 1,
    "[kernel.kallsyms]": 1,
    "deno": 2,
  });
  assert.ok([...sorted.classes.values()].every((n) => n === 0));
});

Deno.test("sortSamples() skips paragraphs with no frame, and the classes keep the order a sample is matched in", () => {
  const sorted = sortSamples("\n\ndeno 42/42\n\n" + sample(js("x")) + "\n\n");
  assert.equal(sorted.total, 1);
  // The catch-alls come last: a class after them could never match.
  const names = CLASSES.map((c) => c.name);
  assert.equal(
    names.at(-1),
    "any other JavaScript (event loop, promises, streams)",
  );
  assert.ok(names.indexOf("the rest of ours") > names.indexOf("the HMAC"));
  assert.ok(
    names.indexOf("the rest of ours") >
      names.indexOf("`HttpSender` and Deno's `fetch` under it"),
  );
});

Deno.test("perf_classes.ts refuses empty input with one line and exit code 2", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", new URL("../bench/perf_classes.ts", import.meta.url).href],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode("\n"));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  assert.equal(code, 2);
  assert.equal(new TextDecoder().decode(stdout), "");
  const lines = new TextDecoder().decode(stderr).trim().split("\n");
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /^No samples on stdin: pipe in 'perf script/);
});
