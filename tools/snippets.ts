/**
 * Runs every code snippet of `README.md` as a user would: from a project
 * outside the repository that adds this package from a local path.
 *
 * The project is a temporary folder with a `deno.json` that imports
 * `@relayer/poison` as `jsr:@relayer/poison@^<version>` and `links` it to
 * this repository (Deno's way to use a local copy of a JSR package, so its
 * own import map and exports apply, as they would from JSR), sets
 * `"unstable": ["kv"]` as the README tells Deno KV users to, and maps any
 * other bare import a snippet makes (`postgres`) to the version this
 * package pins, as `deno add npm:…` would.
 *
 * By the fence's info string:
 * - `ts`: written to a file and run with `deno run`, no permissions;
 * - `ts postgres`: type-checked only (it needs a database); skipped, loudly,
 *   while the package does not export `./postgres`;
 * - `ts worker`: must be a verbatim part of `examples/cloudflare/worker.ts`,
 *   which `deno task worker-check` runs on workerd;
 * - a block with no language after "`deno task demo`": must equal
 *   `testdata/poison_job.golden.txt`;
 * - `sh` and other output blocks are listed, not run (the install lines
 *   need JSR; CI runs the task commands itself).
 *
 * `deno task snippets`; exits 1 if any snippet fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
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

/** The fenced code blocks of `markdown`, in order. */
export function snippetsOf(markdown: string): Snippet[] {
  const lines = markdown.split("\n");
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== "```"; i++) body.push(lines[i]!);
    found.push({
      line: start + 1,
      lang: open[1]!,
      tags: open[2]!.split(/\s+/).filter(Boolean),
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

/**
 * Runs every snippet of `README.md` and prints one line each, then a count.
 *
 * @returns The exit code: 1 if any snippet failed.
 * @throws {CheckError} If a snippet runs past its deadline.
 */
async function checkSnippets(): Promise<number> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    version: string;
    exports: Record<string, string>;
    imports: Record<string, string>;
  };
  const readme = await Deno.readTextFile(`${ROOT}README.md`);
  const snippets = snippetsOf(readme);
  const dir = await Deno.makeTempDir({ prefix: "relayer_snippets_" });
  const results: string[] = [];
  let failed = 0;
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

    for (const [index, snippet] of snippets.entries()) {
      const where = `README.md:${snippet.line}`;
      const first = snippet.code.split("\n")[0]!.slice(0, 60);
      // A snippet's first run may fetch its packages into a cold Deno cache.
      const deadline = {
        label: `the snippet at ${where}`,
        timeoutMs: INSTALL_TIMEOUT_MS,
      };
      const report = (status: string, detail = "") => {
        results.push(
          `${status.padEnd(8)} ${where.padEnd(14)} ${snippet.lang || "text"} ${
            snippet.tags.join(" ")
          }  ${first}${detail ? `\n${detail}` : ""}`,
        );
        if (status === "FAIL") failed++;
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
        await Deno.writeTextFile(file, snippet.code);
        if (snippet.tags.includes("postgres")) {
          if (!config.exports["./postgres"]) {
            report("SKIP", "  the package does not export ./postgres yet");
            continue;
          }
          const checked = await run(
            Deno.execPath(),
            ["check", "--quiet", file],
            { cwd: dir, env, ...deadline },
          );
          checked.code === 0 ? report("ok") : report("FAIL", checked.out);
          continue;
        }
        const ran = await run(Deno.execPath(), [
          "run",
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
      } else {
        report("not run");
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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

if (import.meta.main) await runMain("snippets", checkSnippets);
