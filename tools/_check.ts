/**
 * What every tool's entry point shares: the repository root as a file
 * path, and a failure printed as one line that says what failed and what to
 * do, never a stack trace ({@linkcode runMain}).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { fileURLToPath } from "node:url";
import { argumentsNamed } from "../main.ts";

/**
 * The repository root as a file path, ending in `/`. Decoded: a clone
 * under a folder with a space or a `%` in its name is read where it is.
 */
export const ROOT: string = fileURLToPath(new URL("..", import.meta.url));

/**
 * A failure whose message already says what failed and what to do
 * (`"<what failed>: <what to do>"`), printed as it is by
 * {@linkcode runMain}.
 */
export class CheckError extends Error {
  /**
   * @param message What failed, then what to do, on one line.
   * @param options The error that caused it, if any.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CheckError";
  }
}

/**
 * The first line of `text` that says something, trimmed (`""` if none), to
 * quote a tool's output in a one-line message.
 */
export function firstLine(text: string): string {
  // deno-lint-ignore no-control-regex
  const plain = text.replace(/\x1b\[[0-9;]*m/g, "");
  return plain.split("\n").map((line) => line.trim()).find(Boolean) ?? "";
}

/**
 * The line of a tool's output that says what went wrong: the first that
 * mentions an error, else the last that says something (the cause, after
 * the preamble).
 */
export function errorLine(text: string): string {
  // deno-lint-ignore no-control-regex
  const lines = text.replace(/\x1b\[[0-9;]*m/g, "").split("\n").map((line) =>
    line.trim()
  ).filter(Boolean);
  return lines.find((line) => /\b(error|fatal)\b/i.test(line)) ??
    lines.at(-1) ?? "";
}

/**
 * `error` as one line, `"<what failed>: <what to do>"`: a
 * {@linkcode CheckError}'s message as it is; a program that could not be
 * spawned named as missing; anything else by the first line of its message.
 */
export function describeFailure(error: unknown): string {
  if (error instanceof CheckError) return firstLine(error.message);
  if (error instanceof Deno.errors.NotFound) {
    const spawn = /Failed to spawn '([^']+)'/.exec(error.message);
    if (spawn) {
      return `${
        spawn[1]
      } is not installed or not on PATH: install it (or add its folder to PATH) and run again`;
    }
  }
  if (error instanceof Deno.errors.NotCapable) {
    return `${
      firstLine(error.message)
    }: run it through its deno task (deno.json grants the permissions it needs)`;
  }
  const message = error instanceof Error
    ? firstLine(error.message)
    : String(error);
  return `${
    message || "failed without a message"
  }: unexpected; run it again, and report it with the output above if it repeats`;
}

/**
 * The line that refuses the arguments a tool that reads none was given, or
 * `undefined` for none: `deno task node-check --node 22` ran all four Nodes
 * with the flag ignored. A flag is named up to its `=`; any other argument
 * (a value, which may be a secret) only counted.
 *
 * @example A Node asked for
 * ```ts
 * import { argumentsRefusal } from "./_check.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   argumentsRefusal("node-check", ["--node", "22"]),
 *   "node-check: it reads no arguments, so it refuses --node and 1 other argument (not shown): run deno task node-check with none; nothing was run",
 * );
 * assert.equal(argumentsRefusal("node-check", []), undefined);
 * ```
 */
export function argumentsRefusal(
  name: string,
  args: readonly string[],
): string | undefined {
  if (args.length === 0) return undefined;
  return `${name}: it reads no arguments, so it refuses ${
    argumentsNamed(args)
  }: run deno task ${name} with none; nothing was run`;
}

/**
 * Runs a tool's entry point and exits with its code (0 if it returns
 * none). A failure it throws prints one line, `"<name>: <what failed>:
 * <what to do>"`, on stderr and exits 1.
 *
 * @param name The tool's name, the prefix of its lines (`"bun-check"`).
 * @param main The entry point; returns the exit code, or nothing for 0.
 * @param options `args`, for a tool that reads no arguments: its command
 *   line's, each refused before `main` runs (exit 2,
 *   {@linkcode argumentsRefusal}).
 * @returns Never: the process exits.
 */
export async function runMain(
  name: string,
  main: () => Promise<number | void>,
  options: { readonly args?: readonly string[] } = {},
): Promise<never> {
  const refusal = argumentsRefusal(name, options.args ?? []);
  if (refusal !== undefined) {
    console.error(refusal);
    Deno.exit(2);
  }
  let code: number;
  try {
    code = (await main()) ?? 0;
  } catch (error) {
    console.error(`${name}: ${describeFailure(error)}`);
    code = 1;
  }
  Deno.exit(code);
}
