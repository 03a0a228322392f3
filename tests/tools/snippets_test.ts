/**
 * The README's local run is checked as it ends: `deno task snippets` runs
 * the `sh local` block and reads its last dead-letter list with
 * `checkLocalRun`.
 */
import assert from "node:assert/strict";
import {
  checkLocalRun,
  snippetResults,
  snippetsOf,
  withPromisesChecked,
} from "../../tools/snippets.ts";

const LETTER = {
  jobId: "pi_0002_notsent/settle",
  intentId: "pi_0002_notsent",
  resolution: "nothing was sent, so the intent failed",
};

Deno.test("the README has one local run, which lists dead letters at its end", async () => {
  const readme = await Deno.readTextFile(
    new URL("../../README.md", import.meta.url),
  );
  const local = snippetsOf(readme).filter((s) =>
    s.lang === "sh" && s.tags.includes("local")
  );
  assert.equal(local.length, 1);
  const last = local[0]!.code.trimEnd().split("\n").pop()!;
  assert.match(last, /\/v1\/dead-letters/);
  assert.match(local[0]!.code, /pi_0002_notsent/);
});

Deno.test("checkLocalRun takes the list even when the server's lines follow it on its line", () => {
  const list = JSON.stringify({ items: [LETTER], cursor: null });
  assert.equal(checkLocalRun(`{"intent":{}}\n${list}`), null);
  assert.equal(
    checkLocalRun(`${list}relayer: SIGTERM: draining (at most 8s)\n`),
    null,
  );
  // A brace inside a string does not end the list early.
  const braced = { ...LETTER, lastError: "send: } {" };
  assert.equal(
    checkLocalRun(JSON.stringify({ items: [braced], cursor: null }) + "}x"),
    null,
  );
});

Deno.test("checkLocalRun says what is wrong when the run did not end as promised", () => {
  assert.equal(
    checkLocalRun("relayer: listening\n"),
    "it listed no dead letters",
  );
  assert.match(
    checkLocalRun(`{"items":[],"cursor":null}`)!,
    /^no dead letter for pi_0002_notsent\/settle/,
  );
  const review = {
    ...LETTER,
    resolution: "last broadcast unknown, needs review",
  };
  assert.match(
    checkLocalRun(JSON.stringify({ items: [review], cursor: null }))!,
    /says "last broadcast unknown, needs review", not "nothing was sent/,
  );
  assert.match(checkLocalRun(`{"items":[{"jobId"`)!, /is not JSON/);
  // The last list counts: an earlier good one does not hide a later empty one.
  const good = JSON.stringify({ items: [LETTER], cursor: null });
  assert.match(
    checkLocalRun(`${good}\n{"items":[],"cursor":null}`)!,
    /^no dead letter/,
  );
});

/** Runs `code` as a module of its own. */
async function runModule(code: string): Promise<void> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, code);
    await import(`file://${file}`);
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("withPromisesChecked makes a snippet's `expression; // { … }` comments checks", async () => {
  const code = [
    'const value = { action: "retry", delayMs: 3000, reason: "rpc timeout" };',
    'const same = value; // { action: "poison" } is not a promise: a declaration',
    'value; // { action: "retry", delayMs: 2500…5000, reason: "rpc timeout" }',
  ].join("\n");
  const checked = withPromisesChecked(code, 10);
  assert.match(checked, /^__promised\(12, value, "action: \\"retry\\", /m);
  assert.match(checked, /^const same = value; \/\/ \{ action/m);
  await runModule(checked);
  // A field that differs, a number out of its range: named with the line.
  await assert.rejects(
    runModule(
      withPromisesChecked(
        code.replace("delayMs: 2500…5000", "delayMs: 1…2"),
        10,
      ),
    ),
    /README\.md:12: delayMs is 3000, its comment says 1…2/,
  );
  await assert.rejects(
    runModule(
      withPromisesChecked(
        code.replace('// { action: "retry"', '// { action: "poison"'),
        10,
      ),
    ),
    /README\.md:12: action is "retry", its comment says "poison"/,
  );
  assert.equal(
    withPromisesChecked("console.log(1);\n", 1),
    "console.log(1);\n",
  );
});

Deno.test("withPromisesChecked also checks a comment on the line after a statement, and a declared value", async () => {
  const code = [
    'const fail = () => ({ action: "fail", text: "nothing was sent" });',
    "fail();",
    '// { action: "fail", text: "nothing was sent" }',
    'const kept = fail(); // { action: "fail" }',
    "console.log(kept.action);",
  ].join("\n");
  const checked = withPromisesChecked(code, 1);
  assert.match(checked, /^__promised\(2, fail\(\), "action: \\"fail\\", /m);
  assert.match(checked, /^const kept = __promised\(4, fail\(\), /m);
  await runModule(checked);
  await assert.rejects(
    runModule(
      withPromisesChecked(
        code.replace(
          '// { action: "fail", text',
          '// { action: "review", text',
        ),
        1,
      ),
    ),
    /README\.md:2: action is "fail", its comment says "review"/,
  );
  await assert.rejects(
    runModule(
      withPromisesChecked(
        code.replace(
          'kept = fail(); // { action: "fail" }',
          'kept = fail(); // { text: "sent" }',
        ),
        1,
      ),
    ),
    /README\.md:4: text is "nothing was sent", its comment says "sent"/,
  );
});

Deno.test("snippetResults() type-checks and runs a doc's ts blocks from a project that links the package, and fails a broken one", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_snippets_test_" });
  const file = `${dir}/doc.md`;
  const fence = "```";
  const blocks = [
    // Each block's fence is on line 3, 9, 15, 20, 25, 30, 35 and 44.
    // 3: runs, and its promise holds.
    'import { backoff } from "@relayer/poison";\nbackoff(2, { baseMs: 5000, capMs: 120000 }); // { }',
    // 9: a type error, which deno run alone would not see.
    'import { backoff } from "@relayer/poison";\nconst d: string = backoff(1, { baseMs: 5000, capMs: 120000 });',
    // 15: type-checks, and throws when run.
    'throw new Error("ran");',
    // 20: type-checked only, and needs the network: not run.
    'await fetch("http://192.0.2.1:9/");',
    // 25: type-checked only, with a type error.
    'const n: number = "one";',
    // 30: no-run, but deno test --doc would run it.
    'await fetch("http://192.0.2.1:9/");',
    // 35: declares a global, checked alone, with a type error.
    'declare global {\n  var docGlobal: number;\n}\nglobalThis.docGlobal = "one";\nexport {};',
    // 44: runs, but type-checks only beside 35's global, not alone.
    "const v: number | undefined = globalThis.docGlobal;\nconsole.log(v);",
  ];
  const tags = [
    "ts",
    "ts",
    "ts",
    "ts ignore no-run",
    "ts ignore no-run",
    "ts no-run",
    "ts",
    "ts",
  ];
  const markdown = blocks.map((code, i) =>
    `# ${i}\n\n${fence}${tags[i]}\n${code}\n${fence}\n`
  ).join("");
  try {
    await Deno.writeTextFile(file, markdown);
    const results = await snippetResults([file]);
    const status = Object.fromEntries(
      results.map((r) => {
        const [, head, at] = /^(\S+(?: run)?)\s+\S+:(\d+)/.exec(r)!;
        return [Number(at), head];
      }),
    );
    assert.deepEqual(status, {
      3: "ok",
      9: "FAIL",
      15: "FAIL",
      20: "ok",
      25: "FAIL",
      30: "FAIL",
      35: "FAIL",
      44: "FAIL",
    }, results.join("\n"));
    const detail = (line: number) =>
      results.find((r) => r.includes(`doc.md:${line} `))!;
    assert.match(detail(9), /TS2322/);
    assert.match(detail(15), /Error: ran/);
    assert.match(detail(25), /TS2322/);
    assert.match(detail(30), /marked no-run without ignore/);
    assert.match(detail(35), /TS2322/);
    assert.match(detail(44), /TS7017/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("every ts block of docs/*.md carries only the markers tools/snippets.ts knows", async () => {
  const docs = new URL("../../docs/", import.meta.url);
  for await (const entry of Deno.readDir(docs)) {
    if (!entry.name.endsWith(".md")) continue;
    const text = await Deno.readTextFile(new URL(entry.name, docs));
    for (const block of snippetsOf(text)) {
      if (block.lang !== "ts") continue;
      // A misspelt marker (no_run) would leave the block to run.
      const known = block.tags.every((t) =>
        ["ignore", "no-run", "postgres", "worker"].includes(t)
      );
      assert.ok(known, `docs/${entry.name}:${block.line}: ts ${block.tags}`);
    }
  }
});

Deno.test("snippetsOf finds a block fenced inside a list item, its lines taken out of the item's indent", () => {
  const markdown = [
    "1. A step:",
    "",
    "   ```ts ignore no-run",
    "   const a = 1;",
    "   if (a) {",
    "     console.log(a);",
    "   }",
    "   ```",
    "2. The next.",
    "",
    "```sh",
    "echo top",
    "```",
  ].join("\n");
  assert.deepEqual(snippetsOf(markdown), [
    {
      line: 3,
      lang: "ts",
      tags: ["ignore", "no-run"],
      code: "const a = 1;\nif (a) {\n  console.log(a);\n}\n",
    },
    { line: 11, lang: "sh", tags: [], code: "echo top\n" },
  ]);
});

Deno.test("snippetsOf ends a block at a closing fence indented otherwise than its opening, or with spaces after it, and reads the blocks after it", () => {
  const markdown = [
    "1. A step:",
    "",
    "   ```ts ignore no-run",
    "   const a = 1;",
    "```",
    "2. Another:",
    "",
    "   ```ts",
    "   const b = 2;",
    "   ```  ",
    "",
    "```ts",
    "const c = 3;",
    "```",
  ].join("\n");
  assert.deepEqual(snippetsOf(markdown).map((s) => [s.line, s.code]), [
    [3, "const a = 1;\n"],
    [8, "const b = 2;\n"],
    [12, "const c = 3;\n"],
  ]);
});

Deno.test("the README's and the docs' worker blocks are verbatim parts of examples/cloudflare/worker.ts", async () => {
  const worker = await Deno.readTextFile(
    new URL("../../examples/cloudflare/worker.ts", import.meta.url),
  );
  const files = [
    "README.md",
    ...[...Deno.readDirSync(new URL("../../docs/", import.meta.url))]
      .filter((entry) => entry.name.endsWith(".md"))
      .map((entry) => `docs/${entry.name}`),
  ];
  let blocks = 0;
  for (const file of files) {
    const markdown = await Deno.readTextFile(
      new URL(`../../${file}`, import.meta.url),
    );
    for (const snippet of snippetsOf(markdown)) {
      if (!snippet.tags.includes("worker")) continue;
      blocks++;
      assert.ok(
        worker.includes(snippet.code),
        `${file}: a ts worker block is not a verbatim part of examples/cloudflare/worker.ts`,
      );
    }
  }
  assert.ok(blocks >= 1, "the README has a ts worker block");
});
