/**
 * The arguments of `deno task start`, read from `deno.json`, for the
 * checks that run `main.ts` as shipped (the crash test, the shutdown test,
 * `bench:http`): the same flags, on another port and another folder.
 *
 * @module
 */

import config from "../deno.json" with { type: "json" };

/**
 * `deno task start` as arguments to `deno` (from `serve` on), with the
 * port and the folder `main.ts` may write replaced, and `flags` added
 * after `serve`. Run them with the repository root as the working folder.
 *
 * @param options The port, the writable folder and any flags to add.
 * @returns The arguments, ending with `main.ts`.
 * @throws {Error} If the task no longer has `--port` and `--allow-write=`.
 *
 * @example The shipped flags on another port
 * ```ts
 * import { startArgs } from "./start_args.ts";
 * import assert from "node:assert/strict";
 *
 * const args = startArgs({ port: 8123, writeDir: "/tmp/kv" });
 * assert.equal(args[0], "serve");
 * assert.equal(args[args.indexOf("--port") + 1], "8123");
 * assert.ok(args.includes("--allow-write=/tmp/kv"));
 * assert.equal(args.at(-1), "main.ts");
 * ```
 */
export function startArgs(
  options: { port: number; writeDir: string; flags?: readonly string[] },
): string[] {
  const [deno, serve, ...rest] = config.tasks.start.command.split(/\s+/);
  const port = rest.indexOf("--port");
  const write = rest.findIndex((arg) => arg.startsWith("--allow-write="));
  if (deno !== "deno" || serve !== "serve" || port < 0 || write < 0) {
    throw new Error(
      "Cannot read 'deno task start' as 'deno serve … --port N … --allow-write=DIR … main.ts': update support/start_args.ts with the task",
    );
  }
  rest[port + 1] = String(options.port);
  rest[write] = `--allow-write=${options.writeDir}`;
  return ["serve", ...(options.flags ?? []), ...rest];
}
