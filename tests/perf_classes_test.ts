/**
 * Tests of `bench/perf_classes.ts`: each class claims its own frames, from
 * any checkout; a sample counts once, in the first class it matches; a
 * sample with no JavaScript frame is split by its innermost frame's file,
 * and an unnamed JIT frame is still JavaScript; the threads and the
 * unnamed JIT frames are counted; and the script refuses input it cannot
 * read with one line, and warns when the counts may mislead.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CLASSES, countByClass } from "../bench/perf_classes.ts";

/** A checkout that is not this one: frames are matched by their path in it. */
const ROOT = "file:///srv/elsewhere/relayer/";

/** One sample of `perf script -F comm,tid,ip,sym,dso`, innermost first. */
function sample(...frames: string[]): string {
  return ["deno 42", ...frames.map((f, i) => `\t    ${i + 1} ${f}`)].join("\n");
}

const js = (name: string) => `JS:+'${name} (/tmp/perf-42.map)`;

/** The class each frame alone is counted in. */
const ONE_FRAME_EACH: readonly (readonly [string, string])[] = [
  ["the log", js(`flush ${ROOT}main.ts:1:1`)],
  [
    "`HttpSender` and Deno's `fetch` under it",
    js(`#exchange ${ROOT}relayer/http_sender.ts:1:1`),
  ],
  [
    "`HttpSender` and Deno's `fetch` under it",
    js("fetch ext:deno_fetch/26_fetch.js:1:1"),
  ],
  [
    "group commit and Deno KV's commit",
    js(`#run ${ROOT}store/_group_commit.ts:1:1`),
  ],
  ["group commit and Deno KV's commit", js("commit ext:deno_kv/01_db.ts:1:1")],
  [
    "Deno KV's read (`#get`, group read, `getMany`)",
    js("getMany ext:deno_kv/01_db.ts:1:1"),
  ],
  [
    "Deno KV's read (`#get`, group read, `getMany`)",
    js(`#get ${ROOT}store/kv.ts:1:1`),
  ],
  [
    "Deno KV's read (`#get`, group read, `getMany`)",
    js(`#run ${ROOT}store/_group_read.ts:1:1`),
  ],
  ["the HMAC", js(`verify ${ROOT}webhook/_auth.ts:1:1`)],
  [
    "the HMAC",
    js(
      "hmac file:///root/.cache/deno/npm/registry.npmjs.org/@noble/hashes/1.0.0/hmac.js:1:1",
    ),
  ],
  ["the rest of ours", js(`deliver ${ROOT}relayer/relayer.ts:1:1`)],
  ["the rest of ours", js(`pipeline ${ROOT}main.ts:1:1`)],
  [
    "Hono",
    js(
      "dispatch file:///root/.cache/deno/npm/registry.npmjs.org/hono/4.13.19/dist/hono-base.js:1:1",
    ),
  ],
  [
    "Hono",
    js(
      "dispatch file:///srv/elsewhere/relayer/node_modules/hono/dist/hono-base.js:1:1",
    ),
  ],
  ["`Deno.serve`'s JavaScript", js("mapped ext:deno_http/00_serve.ts:1:1")],
  ["the timer machinery", js("createTimer ext:core/02_timers.js:1:1")],
  [
    "the timer machinery",
    js("setTimeout ext:deno_node/internal/timers.mjs:1:1"),
  ],
  [
    "any other JavaScript (event loop, promises, streams)",
    js("runMicrotasks ext:core/01_core.js:1:1"),
  ],
  [
    "any other JavaScript (event loop, promises, streams)",
    "7f00 [unknown] (/tmp/perf-42.map)",
  ],
];

Deno.test("countByClass() counts each frame in its own class, whatever the checkout's path", () => {
  for (const [name, frame] of ONE_FRAME_EACH) {
    const counts = countByClass(sample(frame));
    assert.equal(counts.total, 1);
    assert.equal(counts.classes.get(name), 1, `${frame} belongs to ${name}`);
    assert.equal(counts.native.size, 0, frame);
  }
  // Every class is reached by some frame.
  assert.deepEqual(
    new Set(ONE_FRAME_EACH.map(([name]) => name)),
    new Set(CLASSES.map((c) => c.name)),
  );
});

Deno.test("countByClass() counts a sample once, in the first class any frame of its stack matches", () => {
  // The signer call made from the relayer, the signer's frame outermost:
  // the signer's class, which comes first.
  const counts = countByClass(sample(
    js("readableStreamCollectIntoUint8Array ext:deno_web/06_streams.js:1:1"),
    js(`deliver ${ROOT}relayer/relayer.ts:2:2`),
    js(`readText ${ROOT}relayer/http_sender.ts:1:1`),
  ));
  assert.deepEqual(
    [...counts.classes].filter(([, n]) => n > 0),
    [["`HttpSender` and Deno's `fetch` under it", 1]],
  );
  assert.deepEqual(CLASSES.map((c) => c.name), [
    "the log",
    "`HttpSender` and Deno's `fetch` under it",
    "group commit and Deno KV's commit",
    "Deno KV's read (`#get`, group read, `getMany`)",
    "the HMAC",
    "the rest of ours",
    "Hono",
    "`Deno.serve`'s JavaScript",
    "the timer machinery",
    "any other JavaScript (event loop, promises, streams)",
  ]);
});

Deno.test("countByClass() splits samples with no JavaScript frame by the file of the innermost frame", () => {
  const text = [
    sample(
      "ffff _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)",
      "7f00 [unknown] (/root/deno)",
    ),
    sample("ffff pvm_irq_enable ([kernel.kallsyms])"),
    sample("7f00 [unknown] (/root/deno)"),
    sample("7f01 [unknown] (/root/deno)", "7f02 [unknown] (/root/deno)"),
  ].join("\n\n");
  const counts = countByClass(text);
  assert.equal(counts.total, 4);
  assert.deepEqual(Object.fromEntries(counts.native), {
    "libc.so.6": 1,
    "[kernel.kallsyms]": 1,
    "deno": 2,
  });
  assert.ok([...counts.classes.values()].every((n) => n === 0));
});

Deno.test("countByClass() counts the threads and the JIT frames perf could not name, and skips samples with no frame", () => {
  const text = [
    "deno 42",
    sample(
      js("a ext:core/01_core.js:1:1"),
      "7f00 [unknown] (/tmp/perf-42.map)",
    ),
    "deno 41/43\n\t    7f00 [unknown] (/tmp/perf-41.map)",
    "",
  ].join("\n\n");
  const counts = countByClass(text);
  assert.equal(counts.total, 2);
  assert.deepEqual([...counts.threads].sort(), ["42", "43"]);
  assert.deepEqual(counts.jit, { frames: 3, unnamed: 2 });
});

Deno.test("countByClass() refuses a recording without call chains, naming the fix", () => {
  const flat = [
    "deno 42   7f00 [unknown] (/root/deno)",
    "deno 42   7f01 [unknown] (/root/deno)",
  ].join("\n");
  assert.throws(() => countByClass(flat), (error: unknown) => {
    assert.ok(error instanceof SyntaxError);
    assert.match(error.message, /must open with a 'comm tid' line/);
    assert.match(error.message, /perf record -g/);
    return true;
  });
});

/** Runs the script on `input`; its exit code and what it printed. */
async function run(input: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", new URL("../bench/perf_classes.ts", import.meta.url).href],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code, stdout: text(stdout), stderr: text(stderr) };
}

Deno.test("perf_classes.ts refuses empty or flat input with one line and exit code 2", async () => {
  for (const input of ["\n", "deno 42   7f00 [unknown] (/root/deno)\n"]) {
    const { code, stdout, stderr } = await run(input);
    assert.equal(code, 2);
    assert.equal(stdout, "");
    assert.equal(stderr.trim().split("\n").length, 1, stderr);
    assert.doesNotMatch(stderr, /\s+at\s/); // no stack trace
  }
});

Deno.test("perf_classes.ts warns when threads are mixed or the JIT map is missing, and still prints the table", async () => {
  const { code, stdout, stderr } = await run(
    [
      "deno 1",
      "\t1 [unknown] (/tmp/perf-1.map)",
      "",
      "deno 2",
      "\t1 [unknown] (/tmp/perf-2.map)",
    ]
      .join("\n"),
  );
  assert.equal(code, 0);
  assert.match(stderr, /samples are of 2 threads/);
  assert.match(stderr, /2 of 2 JIT frames are unnamed/);
  assert.match(
    stdout,
    /\| any other JavaScript \(event loop, promises, streams\) \| 100\.0% \|/,
  );
  assert.match(stdout.trim(), /2 samples$/);
});
