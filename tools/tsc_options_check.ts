/**
 * Proves the other half of docs/api.md#from-node's sentence on compiler
 * options: the package's sources and the section's two services, which
 * `tests/node/node_types_test.ts` compiles under the options the sentence
 * says they compile under, do not compile under those it says they do not
 * ("but not under `…`"). One `tsc` run (pinned, `tools/_worker_tsc.ts`),
 * as a Node project compiles them, with every such option set beside the
 * others: each option's own error must be there, in the package's own
 * files (each has a code no other option gives, {@linkcode OPTION_ERRORS}),
 * and no other error may be, there or in the services.
 *
 * `deno task tsc-options-check`; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { ROOT, runMain } from "./_check.ts";
import { run } from "./_npm_cache.ts";
import {
  installTsc,
  nodeProject,
  type TscInstall,
  workerTsc,
} from "./_worker_tsc.ts";
import { refusalUnseen } from "./wrangler_check.ts";

/**
 * The error each option the sentence may name gives `tsc`, and only it:
 * the code that shows the sources fail under that option.
 */
export const OPTION_ERRORS: Readonly<Record<string, string>> = {
  // "Property 'x' comes from an index signature, so it must be accessed with ['x']."
  noPropertyAccessFromIndexSignature: "TS4111",
  // "Not all code paths return a value."
  noImplicitReturns: "TS7030",
  // "This syntax is not allowed when 'erasableSyntaxOnly' is enabled."
  erasableSyntaxOnly: "TS1294",
};

/**
 * The check: the sentence's options read, one `tsc` run with all of them,
 * each one's error found and no other.
 *
 * @returns The exit code: 0 if the sentence holds.
 * @throws {CheckError} If TypeScript cannot be installed or run, or the
 * section does not say which options.
 */
async function tscOptionsCheck(): Promise<number> {
  const { lane, notUnder } = await nodeProject();
  const unknown = notUnder.filter((option) => !(option in OPTION_ERRORS));
  if (unknown.length > 0) {
    console.log(
      `tsc-options-check: FAIL docs/api.md#from-node says the sources do not compile under ${
        unknown.join(", ")
      }, whose error this check does not know: add it to OPTION_ERRORS (tools/tsc_options_check.ts)`,
    );
    return 1;
  }
  const install = await installTsc();
  const errors = await workerTsc(install, {
    ...lane,
    compilerOptions: {
      ...lane.compilerOptions,
      ...Object.fromEntries(notUnder.map((option) => [option, true])),
    },
  });
  const verdict = tscOptionsVerdict(
    notUnder,
    errors,
    Object.keys(lane.extra ?? {}),
  );
  for (const line of verdict.lines) console.log(line);
  const quoted = await quotedErrors(install);
  return verdict.ok && quoted ? 0 : 1;
}

/**
 * The two errors of the pinned `tsc` docs/api.md#from-node quotes, each
 * from a project of one file that imports `node:net` (as the
 * `postgres-socket` entry does): `allowImportingTsExtensions` without
 * `noEmit` (TS5096), and, with `noEmit`, `"types": []` (TS2591, Node's
 * types not named). About 1.5 s of CPU, the default libs left unread.
 *
 * @returns Whether each run failed with the docs' words.
 */
async function quotedErrors(install: TscInstall): Promise<boolean> {
  const text = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const dir = await Deno.makeTempDir({ prefix: "relayer_tsc_quotes_" });
  let ok = true;
  try {
    await Deno.writeTextFile(
      `${dir}/socket.ts`,
      'import { connect } from "node:net";\nexport const open = connect;\n',
    );
    const runs: [string, Record<string, unknown>, string][] = [
      [
        "allowImportingTsExtensions without noEmit",
        // No lib: the option's error needs none, and a lib's load is most of a run.
        { noLib: true },
        "error TS5096: Option 'allowImportingTsExtensions' can only be used when one of 'noEmit',",
      ],
      [
        "Node's types not named in types",
        { noEmit: true, types: [], lib: ["es5"] },
        "Cannot find name 'node:net'. Do you need to install type definitions for node?",
      ],
    ];
    for (const [what, options, quote] of runs) {
      await Deno.writeTextFile(
        `${dir}/tsconfig.json`,
        JSON.stringify({
          compilerOptions: {
            module: "esnext",
            moduleResolution: "bundler",
            allowImportingTsExtensions: true,
            strict: true,
            ...options,
          },
          files: ["socket.ts"],
        }),
      );
      const wrong = refusalUnseen(
        { doc: "docs/api.md", text, quote },
        await run("node", [install.tsc, "-p", dir], { label: "tsc" }),
      );
      if (wrong === undefined) {
        console.log(`  ${what}: tsc says what docs/api.md#from-node quotes`);
      } else {
        ok = false;
        console.log(`tsc-options-check: FAIL ${what}: ${wrong}`);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  return ok;
}

/**
 * The check's verdict on `tsc`'s errors under every option of `notUnder`:
 * each option's own error ({@linkcode OPTION_ERRORS}) found in the
 * package's sources (a file of `extra`, the docs' services, does not
 * count), and no error of another code anywhere. A pure function of what
 * `tsc` said, so its refusals are tested without running `tsc`.
 *
 * @example
 * ```ts
 * import { tscOptionsVerdict } from "./tsc_options_check.ts";
 * import assert from "node:assert/strict";
 *
 * const verdict = tscOptionsVerdict(["noImplicitReturns"], [
 *   "policy/decide.ts(3,10): error TS7030: Not all code paths return a value.",
 * ], []);
 * assert.equal(verdict.ok, true);
 * assert.equal(tscOptionsVerdict(["noImplicitReturns"], [], []).ok, false);
 * ```
 *
 * @param notUnder The options the sentence says the sources do not compile under.
 * @param errors Each error `tsc` reported, paths from the repository root.
 * @param extra The files that are not the package's own (the lane's extra files).
 * @returns Whether the sentence holds, and the lines that say so or what fails.
 */
export function tscOptionsVerdict(
  notUnder: readonly string[],
  errors: readonly string[],
  extra: readonly string[],
): { ok: boolean; lines: string[] } {
  const lines: string[] = [];
  // The claim is the package's: an option only the docs' services (the
  // lane's extra files, an adopter's own code) fail under does not count.
  const own = errors.filter((error) =>
    !extra.some((name) => error.startsWith(`${name}(`))
  );
  const byCode = Map.groupBy(
    own,
    (error) => /error (TS\d+)/.exec(error)?.[1] ?? "",
  );
  let ok = true;
  for (const option of notUnder) {
    const code = OPTION_ERRORS[option]!;
    const found = byCode.get(code) ?? [];
    if (found.length === 0) {
      ok = false;
      lines.push(
        `tsc-options-check: FAIL the package's sources compile under ${option} (no ${code} in them), where docs/api.md#from-node says they do not: move it to the options they compile under`,
      );
    } else {
      lines.push(
        `  ${option}: ${found.length} × ${code} in the package's sources, e.g. ${
          found[0]!.split("\n")[0]
        }`,
      );
    }
  }
  const expected = new Set(notUnder.map((option) => OPTION_ERRORS[option]));
  const other = errors.filter((error) =>
    !expected.has(/error (TS\d+)/.exec(error)?.[1])
  );
  if (other.length > 0) {
    ok = false;
    lines.push(
      `tsc-options-check: FAIL ${other.length} error(s) no option of the sentence gives, so the sources fail for another reason too (tests/node/node_types_test.ts shows it alone):\n${
        other.join("\n")
      }`,
    );
  }
  if (ok) {
    lines.push(
      `tsc-options-check: as docs/api.md#from-node says, the sources do not compile under ${
        notUnder.join(", ")
      }: each gives its own error and nothing else fails`,
    );
  }
  return { ok, lines };
}

if (import.meta.main) {
  await runMain("tsc-options-check", tscOptionsCheck, { args: Deno.args });
}
