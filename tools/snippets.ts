/**
 * Runs every code snippet of `README.md` and of `docs/*.md` as a user
 * would: from a project outside the repository that adds this package from
 * a local path.
 *
 * The project is a temporary folder with a `deno.json` that imports
 * `@relayer/poison` as `jsr:@relayer/poison@^<version>` and `links` it to
 * this repository (Deno's way to use a local copy of a JSR package, so its
 * own import map and exports apply, as they would from JSR), sets
 * `"unstable": ["kv"]` as the README tells Deno users to, and maps any
 * other bare import a snippet makes (`postgres`) to the version this
 * package pins, as `deno add npm:…` would.
 *
 * By the fence's info string (`ignore` is `deno test --doc`'s: it leaves
 * the block out of `deno task test`, not out of this check):
 * - `ts`: written to a file, type-checked (the files of every block at
 *   once, in one `deno check`; each alone where that names an error of no
 *   one block, or where the block declares globals, a module or a
 *   reference, which would reach the others) and run with `deno run`, no
 *   permissions; a
 *   line `expression; // { key: value, … }` must give those fields
 *   (see {@linkcode withPromisesChecked}), and a `console.log(x); // 503: …`
 *   must print a line that starts so;
 * - `ts ignore no-run`: type-checked only, the opt-out for a block that
 *   cannot run here (it needs the network, a server, a secret, or Node);
 *   `no-run` without `ignore` fails, as `deno task test` would run it;
 * - `ts postgres`: type-checked only (it needs a database); skipped, loudly,
 *   while the package does not export `./postgres`;
 * - `ts worker`: must be a verbatim part of `examples/cloudflare/worker.ts`,
 *   which `deno task worker-check` runs on workerd;
 * - a block with no language after "`deno task demo`": must equal
 *   `testdata/poison_job.golden.txt`;
 * - `sh local`: run verbatim by bash, from a copy of this repository's
 *   tracked files, as a new user would from a clone; its background jobs
 *   are stopped afterwards. It must end by listing the dead letter it
 *   promises (see {@linkcode checkLocalRun}). Ports 8000 and 9000 must be
 *   free, and `curl` installed;
 * - other `sh` and output blocks are listed, not run (the install lines
 *   need JSR; CI runs the task commands itself).
 *
 * `deno task snippets [file.md …]` (default: `README.md` and `docs/*.md`);
 * exits 1 if any snippet fails, and 2, running none, when a file given is
 * not there.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { fileURLToPath as fromFileUrl } from "node:url";
import { ROOT, runMain } from "./_check.ts";
import { INSTALL_TIMEOUT_MS, run } from "./_npm_cache.ts";

/** A fenced code block of a Markdown file. */
export interface Snippet {
  /** The 1-based line of its opening fence. */
  readonly line: number;
  /** The language (`ts`, `sh`, or `""`). */
  readonly lang: string;
  /** The words after the language. */
  readonly tags: readonly string[];
  /** Its text, ending in a newline. */
  readonly code: string;
}

/**
 * The fenced code blocks of `markdown`, in order: at the left margin, or
 * indented inside a list item (a step's code), its lines then taken out of
 * that indent, so that no block is left unchecked for where it sits.
 */
export function snippetsOf(markdown: string): Snippet[] {
  const lines = markdown.split("\n");
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!;
    const start = i;
    const body: string[] = [];
    // Its closing fence at any indent, as Markdown reads it (one closed
    // at another indent than it opened ran to the end of the file, and
    // took every block after it with it, unchecked).
    for (i++; i < lines.length && !/^ *```\s*$/.test(lines[i]!); i++) {
      const line = lines[i]!;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line);
    }
    found.push({
      line: start + 1,
      lang: open[2]!,
      tags: open[3]!.split(/\s+/).filter(Boolean),
      code: body.join("\n") + "\n",
    });
  }
  return found;
}

/** The bare specifiers `code` imports (not `@relayer/poison`, not `node:`). */
function bareImports(code: string): string[] {
  const names = new Set<string>();
  for (const [, spec] of code.matchAll(/from\s+"([^"]+)"/g)) {
    if (
      spec!.startsWith(".") || spec!.startsWith("@relayer/poison") ||
      /^[a-z]+:/.test(spec!)
    ) continue;
    names.add(spec!);
  }
  return [...names];
}

/** The job the README's local run poisons, and what its dead letter must say. */
const LOCAL_RUN_LETTER = {
  jobId: "pi_0002_notsent/settle",
  resolution: "nothing was sent, so the intent failed",
} as const;

/**
 * What a snippet's `// { key: value, … }` comments promise, made
 * checkable: after `expression;` on its line, on the line after such a
 * statement, or after `const x = expression;` (the value given to `x`).
 * Each becomes a call that compares the value's fields with the
 * comment's (a string in quotes, a bare word or number, or an inclusive
 * range `a…b`) and throws, naming the line of its file, when one differs. Other
 * lines stay as they are.
 *
 * @param code The snippet.
 * @param firstLine The line of its file that the snippet's first line is.
 * @param file The file the snippet is in, as its failures name it.
 * @returns The code to run.
 *
 * @example A promise on a declared value
 * ```ts
 * import assert from "node:assert/strict";
 * import { withPromisesChecked } from "./snippets.ts";
 *
 * const code = withPromisesChecked(
 *   'const d = { action: "retry", delayMs: 3000 }; // { action: "retry", delayMs: 2500…5000 }',
 *   40,
 *   "docs/policy.md",
 * );
 * assert.match(
 *   code,
 *   /^const d = __promised\(40, \{ action: "retry", delayMs: 3000 \}, /,
 * );
 * assert.match(code, /docs\/policy\.md:/);
 * // Without such a comment, the code is left as it is.
 * assert.equal(withPromisesChecked("const x = 1;", 1), "const x = 1;");
 * ```
 */
export function withPromisesChecked(
  code: string,
  firstLine: number,
  file = "README.md",
): string {
  let checked = 0;
  const lines = code.split("\n");
  const call = (i: number, expression: string, promise: string) => {
    checked++;
    return `__promised(${firstLine + i}, ${expression}, ${
      JSON.stringify(promise.trim())
    })`;
  };
  for (const [i, line] of lines.entries()) {
    // `const x = expression; // { … }`: the value given to x.
    const declared =
      /^(\s*(?:const|let|var)\s+[\w$]+\s*=\s*)(.+?);\s*\/\/\s*\{(.+)\}\s*$/
        .exec(line);
    if (declared) {
      lines[i] = `${declared[1]}${call(i, declared[2]!, declared[3]!)};`;
      continue;
    }
    // `expression; // { … }`, or the comment alone on the line after it.
    const same = /^(\s*)(.+?);\s*\/\/\s*\{(.+)\}\s*$/.exec(line);
    const next = /^\s*\/\/\s*\{(.+)\}\s*$/.exec(line);
    const before = next && i > 0
      ? /^(\s*)([^/].*?);\s*$/.exec(lines[i - 1]!)
      : null;
    const [at, indent, expression, promise] = same
      ? [i, same[1]!, same[2]!, same[3]!]
      : before
      ? [i - 1, before[1]!, before[2]!, next![1]!]
      : [];
    if (
      at === undefined || lines[at]!.includes("__promised(") ||
      /^(const|let|var|import|export|return|type|interface)\b/.test(expression!)
    ) continue;
    lines[at] = `${indent}${call(at, expression!, promise!)};`;
  }
  if (checked === 0) return code;
  return `${lines.join("\n")}
function __promised<T>(line: number, value: T, promised: string): T {
  const fields = value as Record<string, unknown>;
  for (const [, key, raw] of promised.matchAll(/(\\w+):\\s*("(?:[^"\\\\]|\\\\.)*"|[^,]+)/g)) {
    const text = raw!.trim();
    const actual = fields?.[key!];
    const range = /^(-?[\\d.]+)…(-?[\\d.]+)$/.exec(text);
    const ok = range
      ? typeof actual === "number" && actual >= Number(range[1]) && actual <= Number(range[2])
      : text.startsWith('"')
      ? actual === JSON.parse(text)
      : String(actual) === text;
    if (!ok) {
      throw new Error(\`${file}:\${line}: \${key} is \${JSON.stringify(actual)}, its comment says \${text}\`);
    }
  }
  return value;
}
`;
}

/**
 * Where the JSON object that starts at `start` ends (its closing brace,
 * plus one), or the text's length if it does not close.
 */
function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const char = text[i];
    if (inString) {
      if (char === "\\") i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === "{" || char === "[") depth++;
    else if ((char === "}" || char === "]") && --depth === 0) return i + 1;
  }
  return text.length;
}

/**
 * Whether the output of the README's local run ends as the README says:
 * its last line that lists dead letters holds the letter of
 * `pi_0002_notsent/settle`, failed because nothing was sent.
 *
 * @param out What the block printed, stdout and stderr.
 * @returns `null` if it did, else what is wrong.
 */
export function checkLocalRun(out: string): string | null {
  // The server's own lines share the terminal, so the list may be followed
  // on its line by theirs: take the one JSON object that starts there.
  const start = out.lastIndexOf('{"items"');
  if (start < 0) return "it listed no dead letters";
  const listed = out.slice(start, jsonEnd(out, start));
  let items: unknown;
  try {
    items = (JSON.parse(listed) as { items?: unknown }).items;
  } catch {
    return `its dead-letter list is not JSON: ${listed.slice(0, 200)}`;
  }
  const letter = Array.isArray(items)
    ? (items as { jobId?: unknown; resolution?: unknown }[]).find((item) =>
      item?.jobId === LOCAL_RUN_LETTER.jobId
    )
    : undefined;
  if (letter === undefined) {
    return `no dead letter for ${LOCAL_RUN_LETTER.jobId}: ${
      listed.slice(0, 200)
    }`;
  }
  return letter.resolution === LOCAL_RUN_LETTER.resolution
    ? null
    : `the dead letter of ${LOCAL_RUN_LETTER.jobId} says ${
      JSON.stringify(letter.resolution)
    }, not ${JSON.stringify(LOCAL_RUN_LETTER.resolution)}`;
}

/** The ports the README's local run listens on. */
const LOCAL_RUN_PORTS = [8000, 9000] as const;

/**
 * Runs a `sh local` block as a new user would, from a copy of the
 * repository's tracked files, with this Deno first on PATH; stops its
 * background jobs (each in a process group of its own) when it ends.
 *
 * @returns Its exit code and output, or why it could not run.
 */
async function runLocalBlock(
  code: string,
  env: Record<string, string>,
): Promise<{ code: number; out: string } | { cannot: string }> {
  for (const port of LOCAL_RUN_PORTS) {
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
    } catch (error) {
      if (!(error instanceof Deno.errors.AddrInUse)) throw error;
      return {
        cannot: `port ${port} is taken, and the README's local run listens on ${
          LOCAL_RUN_PORTS.join(" and ")
        }: stop what uses it and run again`,
      };
    }
  }
  const curl = await run("sh", ["-c", "command -v curl"]);
  if (curl.code !== 0) {
    return {
      cannot: "curl is not installed, and the README's local run uses it",
    };
  }
  const files = await run("git", ["-C", ROOT, "ls-files", "-z"], {
    ifMissing:
      "install git: the local run copies the repository's tracked files",
  });
  if (files.code !== 0) return { cannot: `git ls-files: ${files.out}` };
  const copy = await Deno.makeTempDir({ prefix: "relayer_local_run_" });
  try {
    for (const file of files.out.split("\0").filter(Boolean)) {
      const to = `${copy}/${file}`;
      await Deno.mkdir(to.slice(0, to.lastIndexOf("/")), { recursive: true });
      await Deno.copyFile(`${ROOT}${file}`, to);
    }
    // `deno` in the block is this Deno, also where only `npx deno` exists.
    await Deno.mkdir(`${copy}/.bin`);
    await Deno.symlink(Deno.execPath(), `${copy}/.bin/deno`);
    await Deno.writeTextFile(`${copy}/.local_run.sh`, code);
    const wrapper = [
      "set -m", // each background job in a process group of its own
      'stop() { for job in $(jobs -p); do kill -TERM -- "-$job" 2>/dev/null; done; wait; }',
      "trap stop EXIT",
      "trap 'exit 143' TERM",
      "source ./.local_run.sh",
    ].join("\n");
    return await run("bash", ["-c", wrapper], {
      cwd: copy,
      env: { ...env, PATH: `${copy}/.bin:${env.PATH ?? ""}` },
      label: "the README's local run",
      timeoutMs: 90_000,
    });
  } finally {
    await Deno.remove(copy, { recursive: true });
  }
}

/** `README.md` and every `docs/*.md`, as paths from the repository's root. */
async function markdownFiles(): Promise<string[]> {
  const docs: string[] = [];
  for await (const entry of Deno.readDir(`${ROOT}docs`)) {
    if (entry.isFile && entry.name.endsWith(".md")) {
      docs.push(`docs/${entry.name}`);
    }
  }
  return ["README.md", ...docs.sort()];
}

/**
 * Runs every snippet of `files` (paths from the repository's root, or
 * absolute): one line each, `<status> <file>:<line> <info string> <start>`,
 * the status `ok`, `FAIL` (then what failed, on the lines after), `SKIP` or
 * `not run`.
 *
 * @param files The Markdown files; by default `README.md` and `docs/*.md`.
 * @returns One line per snippet, in order.
 * @throws {CheckError} If a snippet runs past its deadline.
 *
 * @example A file whose only block is not run
 * ```ts
 * import assert from "node:assert/strict";
 * import { snippetResults } from "./snippets.ts";
 *
 * const file = await Deno.makeTempFile({ suffix: ".md" });
 * try {
 *   const fence = "`".repeat(3);
 *   await Deno.writeTextFile(
 *     file,
 *     `# Notes\n\n${fence}text\nan output\n${fence}\n`,
 *   );
 *   const [line, ...rest] = await snippetResults([file]);
 *   assert.match(line!, /^not run +\S+\.md:\d+ +text +an output$/);
 *   assert.deepEqual(rest, []);
 * } finally {
 *   await Deno.remove(file);
 * }
 * ```
 */
export async function snippetResults(
  files?: readonly string[],
): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    version: string;
    exports: Record<string, string>;
    imports: Record<string, string>;
  };
  const snippets: (Snippet & { file: string })[] = [];
  for (const file of files ?? await markdownFiles()) {
    const text = await Deno.readTextFile(
      file.startsWith("/") ? file : `${ROOT}${file}`,
    );
    const name = file.startsWith(ROOT) ? file.slice(ROOT.length) : file;
    snippets.push(...snippetsOf(text).map((s) => ({ ...s, file: name })));
  }
  const dir = await Deno.makeTempDir({ prefix: "relayer_snippets_" });
  const results: string[] = [];
  try {
    const imports: Record<string, string> = {
      "@relayer/poison": `jsr:@relayer/poison@^${config.version}`,
    };
    for (const snippet of snippets) {
      for (const name of bareImports(snippet.code)) {
        const pinned = config.imports[name];
        if (pinned) imports[name] = pinned;
      }
    }
    await Deno.writeTextFile(
      `${dir}/deno.json`,
      JSON.stringify({ imports, links: [ROOT], unstable: ["kv"] }, null, 2),
    );
    const golden = await Deno.readTextFile(
      `${ROOT}testdata/poison_job.golden.txt`,
    );
    const worker = await Deno.readTextFile(
      `${ROOT}examples/cloudflare/worker.ts`,
    );
    const env = { ...Deno.env.toObject(), NO_COLOR: "1" };
    // Each ts and js block's file, and which of them deno type-checks: all
    // at once, one program, where that says which file each error is in.
    const files = new Map<number, string>();
    for (const [index, snippet] of snippets.entries()) {
      if (
        (snippet.lang === "ts" || snippet.lang === "js") &&
        !snippet.tags.includes("worker")
      ) {
        const file = `${dir}/snippet_${index}.${snippet.lang}`;
        await Deno.writeTextFile(
          file,
          withPromisesChecked(snippet.code, snippet.line + 1, snippet.file),
        );
        const noRun = snippet.tags.includes("no-run");
        const skipped = !noRun && snippet.tags.includes("postgres") &&
          !config.exports["./postgres"];
        // A block that declares for the whole program is checked alone: in
        // one program with the others, its globals would type-check a block
        // that does not type-check in its reader's editor.
        if (
          !(noRun && !snippet.tags.includes("ignore")) && !skipped &&
          !declaresForAll(snippet.code)
        ) {
          files.set(index, file);
        }
      }
    }
    const checks = await checkedTogether([...files.values()], dir, env);
    /** What `deno check` says of `file` alone: "" where it type-checks. */
    const checkedAlone = async (file: string) => {
      const checked = await run(Deno.execPath(), ["check", "--quiet", file], {
        cwd: dir,
        env,
        label: `deno check ${file}`,
        timeoutMs: INSTALL_TIMEOUT_MS,
      });
      return checked.code === 0 ? "" : checked.out;
    };

    for (const [index, snippet] of snippets.entries()) {
      const where = `${snippet.file}:${snippet.line}`;
      const first = snippet.code.split("\n")[0]!.slice(0, 60);
      // A snippet's first run may fetch its packages into a cold Deno cache.
      const deadline = {
        label: `the snippet at ${where}`,
        timeoutMs: INSTALL_TIMEOUT_MS,
      };
      const report = (status: string, detail = "") => {
        results.push(
          `${status.padEnd(8)} ${where.padEnd(22)} ${snippet.lang || "text"} ${
            snippet.tags.join(" ")
          }  ${first}${detail ? `\n${detail}` : ""}`,
        );
      };
      if (snippet.lang === "ts" || snippet.lang === "js") {
        if (snippet.tags.includes("worker")) {
          worker.includes(snippet.code) ? report("ok", "") : report(
            "FAIL",
            "  not a verbatim part of examples/cloudflare/worker.ts",
          );
          continue;
        }
        const file = `${dir}/snippet_${index}.${snippet.lang}`;
        const noRun = snippet.tags.includes("no-run");
        if (noRun && !snippet.tags.includes("ignore")) {
          report(
            "FAIL",
            "  marked no-run without ignore: deno test --doc would run it (write ```ts ignore no-run)",
          );
          continue;
        }
        if (noRun || snippet.tags.includes("postgres")) {
          if (!noRun && !config.exports["./postgres"]) {
            report("SKIP", "  the package does not export ./postgres yet");
            continue;
          }
          const errors = checks?.get(file) ?? await checkedAlone(file);
          errors === "" ? report("ok") : report("FAIL", errors);
          continue;
        }
        // Type-checked: deno run does not type-check by default, and a
        // block that runs but does not type-check fails its reader's editor.
        const errors = checks?.get(file) ?? await checkedAlone(file);
        if (errors !== "") {
          report("FAIL", errors);
          continue;
        }
        const ran = await run(Deno.execPath(), [
          "run",
          "--no-check",
          "--quiet",
          "--no-prompt",
          file,
        ], { cwd: dir, env, ...deadline });
        // `console.log(x); // 503: …` promises that the line printed starts with 503.
        const promised = [...snippet.code.matchAll(
          /console\.log\(.*\);\s*\/\/\s*([^\s:]+)/g,
        )].map((m) => m[1]!);
        const printed = ran.out.trimEnd().split("\n");
        const broken = promised.find((p, i) => !printed[i]?.startsWith(p));
        if (ran.code !== 0) report("FAIL", ran.out);
        else if (broken !== undefined) {
          report(
            "FAIL",
            `  printed ${JSON.stringify(printed)}, the comments say ${
              JSON.stringify(promised)
            }`,
          );
        } else report("ok");
      } else if (snippet.lang === "" && snippet.code.startsWith("policy  ")) {
        snippet.code === golden
          ? report("ok", "")
          : report("FAIL", "  differs from testdata/poison_job.golden.txt");
      } else if (snippet.lang === "sh" && snippet.tags.includes("local")) {
        const ran = await runLocalBlock(snippet.code, env);
        if ("cannot" in ran) report("FAIL", `  ${ran.cannot}`);
        else if (ran.code !== 0) {
          report("FAIL", `  exited ${ran.code}:\n${ran.out}`);
        } else {
          const wrong = checkLocalRun(ran.out);
          wrong === null
            ? report("ok")
            : report("FAIL", `  ${wrong}:\n${ran.out}`);
        }
      } else {
        report("not run");
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  return results;
}

/**
 * Whether `code` declares something for every file of a program it is
 * checked in: a `declare global` or `declare module "…"` block, or a
 * triple-slash reference (a lib or types for all).
 */
function declaresForAll(code: string): boolean {
  return /\bdeclare\s+(?:global\b|module\s*["'`])|^\s*\/\/\/\s*<reference\b/m
    .test(code);
}

/**
 * `deno check` of `files` at once, in `dir`, with `env`: what it says of
 * each file, "" where it type-checks; `null` where it does not type-check
 * and not every error it names is in one of `files` (each file is then
 * checked alone, as a reader's editor would).
 */
async function checkedTogether(
  files: readonly string[],
  dir: string,
  env: Record<string, string>,
): Promise<Map<string, string> | null> {
  if (files.length === 0) return new Map();
  const checked = await run(Deno.execPath(), ["check", "--quiet", ...files], {
    cwd: dir,
    env,
    label: `deno check of ${files.length} snippets`,
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
  const said = new Map(files.map((file) => [file, ""]));
  if (checked.code === 0) return said;
  // TS2322 [ERROR]: … then the source line, its caret, and
  // "    at file:///…/snippet_1.ts:2:7"; a blank line between errors.
  const blocks = checked.out.split(/\n\s*\n/).filter((block) =>
    !/^(Found \d+ errors?\.|error: Type checking failed\.|Stack backtrace:)/
      .test(block.trim()) &&
    block.trim() !== ""
  );
  if (blocks.length === 0) return null;
  for (const block of blocks) {
    if (!/^TS\d+ \[ERROR\]: /.test(block.trim())) return null;
    const at = [...block.matchAll(/^\s+at (file:\/\/\S+):\d+:\d+$/gm)]
      .map((m) => fromFileUrl(m[1]!));
    const file = at.length === 1 ? at[0]! : undefined;
    if (file === undefined || !said.has(file)) return null;
    const before = said.get(file);
    said.set(file, before ? `${before}\n\n${block.trim()}` : block.trim());
  }
  return said;
}

/**
 * Runs every snippet of `files` ({@linkcode snippetResults}) and prints one
 * line each, then a count.
 *
 * @param files The Markdown files; by default `README.md` and `docs/*.md`.
 * @returns The exit code: 1 if any snippet failed, 2 for a file not there.
 */
async function checkSnippets(files?: readonly string[]): Promise<number> {
  for (const file of files ?? []) {
    const path = file.startsWith("/") ? file : `${ROOT}${file}`;
    if (!await Deno.stat(path).then((s) => s.isFile, () => false)) {
      console.error(
        `snippets: there is no file ${file}: give Markdown files by their path from the repository's root (README.md, docs/api.md), or none for README.md and docs/*.md; nothing was run`,
      );
      return 2;
    }
  }
  const results = await snippetResults(files);
  const failed = results.filter((r) => r.startsWith("FAIL")).length;
  console.log(results.join("\n"));
  const ran = results.filter((r) => r.startsWith("ok")).length;
  console.log(
    `snippets: ${ran} ok, ${failed} failed, ${
      results.filter((r) => r.startsWith("SKIP")).length
    } skipped, ${
      results.filter((r) => r.startsWith("not run")).length
    } not run (shell or output)`,
  );
  return failed > 0 ? 1 : 0;
}

if (import.meta.main) {
  await runMain(
    "snippets",
    () => checkSnippets(Deno.args.length > 0 ? Deno.args : undefined),
  );
}
