/**
 * What the HTTP benches (`http_bench.ts`, `cpu_per_request.ts`) share to
 * start servers in child processes and load them: the port a child says it
 * listens on (it binds port 0),
 * waiting for a server to answer, a child's output drained and the child
 * stopped, the environment a child `deno` gets, and the autocannon load of
 * `http_load.mjs` with the secret it signs with.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { lockedInstall } from "../support/npm_lock.ts";

/** The npm load generator, at the version its committed lock pins. */
export const AUTOCANNON = "autocannon@9.0.0";

/**
 * The webhook secret the load signs its deliveries with (and the served
 * app checks them with).
 */
export const SECRET = "bench-secret-0123456789";

/**
 * Installs autocannon, with exactly the tree its committed lock names
 * (`support/npm_locks/`), once into a cache folder outside the repository.
 *
 * @returns The folder it is installed in.
 *
 * @example
 * ```ts ignore
 * import { autocannonDir } from "./_serve.ts";
 *
 * const dir = await autocannonDir(); // installs on first use only
 * ```
 */
export async function autocannonDir(): Promise<string> {
  const [name, version] = AUTOCANNON.split("@") as [string, string];
  const dir = `${
    Deno.env.get("HOME") ?? "/tmp"
  }/.cache/relayer-bench/${name}-${version}`;
  const args = await lockedInstall(name, version, dir);
  if (args !== null) {
    console.error(`installing ${AUTOCANNON} into ${dir} …`);
    const { code } = await new Deno.Command("npm", {
      args,
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (code !== 0) throw new Error(`npm ci ${AUTOCANNON} failed`);
  }
  return dir;
}

/** What `http_load.mjs` prints of one load. */
export interface LoadResult {
  requests: number;
  duration: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  statusCodeStats: Record<string, { count: number }>;
  wrongBodies: { count: number; first: string };
}

/** One load of `http_load.mjs` (its arguments, in its words). */
export interface Load {
  /** autocannon's folder, from {@linkcode autocannonDir}. */
  dir: string;
  /** The served port on 127.0.0.1. */
  port: number;
  /** `cycle` through `pool` settling intents, or a `fresh` one each. */
  mode: "cycle" | "fresh";
  pool: number;
  connections: number;
  /** How long the load lasts; ignored with `amount`. */
  seconds: number;
  /** The status every answer must have, and text its body must hold. */
  status: string;
  text: string;
  /** Exactly this many requests (`cycle` only). */
  amount?: number;
}

/**
 * Runs `http_load.mjs` with Node, signed deliveries to the server on
 * `load.port`, and returns what it measured.
 *
 * @throws {Error} If the load exits non-zero, with what it wrote to stderr.
 *
 * @example
 * ```ts ignore
 * import { autocannonDir, runLoad } from "./_serve.ts";
 *
 * const result = await runLoad({
 *   dir: await autocannonDir(),
 *   port: 8000,
 *   mode: "cycle",
 *   pool: 100,
 *   connections: 10,
 *   seconds: 2,
 *   status: "200",
 *   text: '{"ok":true}',
 * });
 * console.log(result.rps);
 * ```
 */
export async function runLoad(load: Load): Promise<LoadResult> {
  const script = new URL("./http_load.mjs", import.meta.url).pathname;
  const { code, stdout, stderr } = await new Deno.Command("node", {
    args: [
      script,
      load.dir,
      `http://127.0.0.1:${load.port}`,
      SECRET,
      load.mode,
      String(load.pool),
      String(load.connections),
      String(load.seconds),
      load.status,
      load.text,
      ...(load.amount === undefined ? [] : [String(load.amount)]),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(`the load failed: ${new TextDecoder().decode(stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(stdout));
}

/**
 * The lines a child prints where it listens, its port the first group:
 * `main.ts` (stdout), the signer stub (`examples/signer_stub.ts`, stdout)
 * and Deno's inspector (`--inspect`, stderr).
 *
 * @example
 * ```ts
 * import { LISTENING } from "./_serve.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   LISTENING.main.exec("relayer: listening on http://127.0.0.1:8000/")?.[1],
 *   "8000",
 * );
 * ```
 */
export const LISTENING = {
  main: /^relayer: listening on http:\/\/127\.0\.0\.1:(\d+)\/?$/,
  signer: /^signer stub on http:\/\/127\.0\.0\.1:(\d+)$/,
  inspector: /^Debugger listening on ws:\/\/127\.0\.0\.1:(\d+)\//,
} as const;

/**
 * Reads a child's output to the end, as {@linkcode drain} does, and finds
 * the port it says it listens on: the first group of the first line
 * `pattern` matches. A child serves on port 0, so the system picks a free
 * port as it binds it; a port probed free and handed over may be another
 * process's by then (the machine is shared).
 *
 * @example
 * ```ts
 * import { listenedPort } from "./_serve.ts";
 * import assert from "node:assert/strict";
 *
 * const { port, drained } = listenedPort(
 *   ReadableStream.from([
 *     new TextEncoder().encode("signer stub on http://127.0.0.1:41"),
 *     new TextEncoder().encode("23\nmore\n"),
 *   ]),
 *   /^signer stub on http:\/\/127\.0\.0\.1:(\d+)$/,
 * );
 * assert.equal(await port, 4123);
 * assert.equal(await drained, 2);
 * ```
 *
 * @param stream The child's stdout or stderr.
 * @param pattern A line's pattern, the port its first group.
 * @returns The port (`null` if the output ended with no such line), and
 *   the count of lines once the output ended.
 */
export function listenedPort(
  stream: ReadableStream<Uint8Array>,
  pattern: RegExp,
): { port: Promise<number | null>; drained: Promise<number> } {
  let found: (port: number | null) => void = () => {};
  const port = new Promise<number | null>((resolve) => (found = resolve));
  const drained = (async () => {
    let lines = 0;
    // The text of the lines not yet read, until the port is found.
    let pending: string | null = "";
    const decoder = new TextDecoder();
    try {
      for await (const chunk of stream) {
        for (const byte of chunk) if (byte === 10) lines++;
        if (pending === null) continue;
        pending += decoder.decode(chunk, { stream: true });
        const whole: string[] = pending.split("\n");
        pending = whole.pop()!;
        for (const line of whole) {
          const match = pattern.exec(line.trimEnd());
          if (match?.[1] !== undefined) {
            found(Number(match[1]));
            pending = null;
            break;
          }
        }
      }
      return lines;
    } finally {
      found(null);
    }
  })();
  return { port, drained };
}

/**
 * Resolves once `url` answers (any status), asking every 50 ms.
 *
 * @throws {Error} `<what> did not start` after 200 tries.
 *
 * @example
 * ```ts
 * import { waitFor } from "./_serve.ts";
 *
 * const server = Deno.serve(
 *   { port: 0, hostname: "127.0.0.1", onListen() {} },
 *   () => new Response("ok"),
 * );
 * await waitFor(`http://127.0.0.1:${server.addr.port}/`, "the server");
 * await server.shutdown();
 * ```
 */
export async function waitFor(url: string, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(url);
      await res.body?.cancel();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`${what} did not start`);
}

/**
 * Reads a child's output to the end, counting lines, so its writes never
 * block.
 *
 * @example
 * ```ts
 * import { drain } from "./_serve.ts";
 * import assert from "node:assert/strict";
 *
 * const lines = await drain(ReadableStream.from([
 *   new TextEncoder().encode("one\ntwo\n"),
 * ]));
 * assert.equal(lines, 2);
 * ```
 */
export function drain(stream: ReadableStream<Uint8Array>): Promise<number> {
  return (async () => {
    let lines = 0;
    for await (const chunk of stream) {
      for (const byte of chunk) if (byte === 10) lines++;
    }
    return lines;
  })();
}

/**
 * Sends `child` SIGTERM (if it still runs) and waits for it to exit.
 *
 * @example
 * ```ts ignore
 * import { stop } from "./_serve.ts";
 *
 * const child = new Deno.Command("sleep", { args: ["60"] }).spawn();
 * await stop(child);
 * ```
 */
export async function stop(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGTERM");
  } catch {
    // already gone
  }
  await child.status;
}

/**
 * The environment of a child `deno`: `own`, and of the caller's only where
 * to find programs and the module cache (and the names in `also`), so that
 * a `DATABASE_URL`, `KV_QUEUE` or `RELAYER_INSECURE_DEV` in the shell
 * cannot change what a bench measures.
 *
 * @example
 * ```ts
 * import { childEnv } from "./_serve.ts";
 * import assert from "node:assert/strict";
 *
 * const env = childEnv({ PORT: "8000" });
 * assert.equal(env.PORT, "8000");
 * assert.equal(env.DATABASE_URL, undefined);
 * ```
 */
export function childEnv(
  own: Record<string, string>,
  also: readonly string[] = [],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (
    const name of [
      "PATH",
      "HOME",
      "DENO_DIR",
      "XDG_CACHE_HOME",
      "TMPDIR",
      ...also,
    ]
  ) {
    const value = Deno.env.get(name);
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...own };
}
