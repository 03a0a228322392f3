/**
 * `main.ts` as a real process, the way `deno task start` runs it: for the
 * tests of its start, its refusals and its drain.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startArgs } from "../support/start_args.ts";
import { signHmac } from "./webhook/_signing.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** What a child `deno` needs from our environment, and nothing else. */
export function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { NO_COLOR: "1" };
  for (const name of ["HOME", "PATH", "DENO_DIR", "XDG_CACHE_HOME", "TMPDIR"]) {
    const value = Deno.env.get(name);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/**
 * A port free now, and the listener that holds it when `hold` is set.
 * Handed to a child to serve on, it may be another process's by the time
 * the child binds it (the machine is shared): a child that must serve is
 * started on port 0 instead ({@linkcode startMain} without a port), and
 * {@linkcode MainProcess.base} says where it listens; where it cannot be
 * (`deno serve --parallel`: on port 0 each isolate binds its own), it is
 * started again on another port probed when it is refused the first.
 */
export function freePort(
  hold = false,
): { port: number; listener?: Deno.Listener } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  if (hold) return { port, listener };
  listener.close();
  return { port };
}

/** A running `main.ts`. */
export interface MainProcess {
  /** The process. */
  readonly child: Deno.ChildProcess;
  /** Its exit code and all it wrote, once it ended. */
  ended(): Promise<{ code: number; stdout: string; stderr: string }>;
  /**
   * Its base URL (`http://127.0.0.1:PORT`) once it says it listens
   * (`relayer: listening on …`), or `null` if it ended first.
   */
  base(): Promise<string | null>;
  /** SIGKILL, if it still runs. */
  kill(): void;
}

/** Where and how {@linkcode startMain} runs `main.ts`. */
export interface StartOptions {
  /**
   * The port to serve on; 0 (the default) has the system pick a free one
   * as the child binds it ({@linkcode MainProcess.base} says which).
   */
  readonly port?: number;
  /** The one folder it may write. */
  readonly writeDir: string;
  /** Arguments added after `serve`. */
  readonly flags?: readonly string[];
  /** Arguments added after `main.ts`, which reach `main.ts` itself. */
  readonly args?: readonly string[];
  /** Called with each line the child writes to stdout, as it comes. */
  readonly onLine?: (line: string) => void;
  /** Shipped arguments left out. */
  readonly drop?: readonly string[];
  /**
   * A command, and its arguments, that runs `deno` (the path and its
   * arguments follow them), such as `setpriv` with some capability dropped.
   */
  readonly via?: readonly string[];
}

/**
 * Starts `main.ts` with the shipped flags on `port`, writing `writeDir`
 * only, with `env` and nothing else of ours; the shipped arguments in
 * `drop` are left out, and `flags` added; run by `via`, if given.
 */
export function startMain(
  env: Record<string, string>,
  options: StartOptions,
): MainProcess {
  const { port = 0, writeDir } = options;
  const [serve, ...shipped] = startArgs({ port, writeDir }).filter((arg) =>
    !options.drop?.includes(arg)
  );
  const args = [
    serve!,
    ...(options.flags ?? []),
    ...shipped,
    ...(options.args ?? []),
  ];
  const [command, ...before] = options.via ?? [];
  const child = new Deno.Command(command ?? Deno.execPath(), {
    args: command === undefined ? args : [...before, Deno.execPath(), ...args],
    cwd: ROOT,
    clearEnv: true,
    env: { ...baseEnv(), ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let said: (base: string | null) => void = () => {};
  const listening = new Promise<string | null>((resolve) => (said = resolve));
  const output = Promise.all([
    readLines(child.stdout, (line) => {
      options.onLine?.(line);
      const base = listeningOn(line);
      if (base !== null) said(base);
    }).finally(() => said(null)),
    new Response(child.stderr).text(),
  ]);
  output.catch(() => {});
  return {
    child,
    base: () => listening,
    async ended() {
      const [status, [stdout, stderr]] = await Promise.all([
        child.status,
        output,
      ]);
      return { code: status.code, stdout, stderr };
    },
    kill() {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
    },
  };
}

/** What {@linkcode startOnKv} saw of a `main.ts` it started and ended. */
export interface StartOnKv {
  /** Whether it said it listens before it ended. */
  readonly served: boolean;
  /** Its exit code (SIGKILL's once it served). */
  readonly code: number;
  /** All it wrote to stderr. */
  readonly stderr: string;
}

/**
 * Starts `main.ts` on the Deno KV file `kvPath` (`KV_PATH`, beside a signer
 * that never answers and a webhook secret), writing `dir` only, and ends it
 * (SIGKILL) as soon as it serves, or waits for it to end: the start's
 * checks of the file are all it ran. Killed too on `signal`'s abort.
 */
export async function startOnKv(
  kvPath: string,
  dir: string,
  signal?: AbortSignal,
): Promise<StartOnKv> {
  const service = startMain({
    SENDER_URL: "http://127.0.0.1:9/",
    WEBHOOK_SECRET: "start-secret-0123456789abcdef",
    KV_PATH: kvPath,
  }, { writeDir: dir });
  signal?.addEventListener("abort", service.kill);
  try {
    const served = await service.base() !== null;
    service.kill();
    const { code, stderr } = await service.ended();
    return { served, code, stderr };
  } finally {
    service.kill();
  }
}

/**
 * Where a line of `main.ts` says it listens (`relayer: listening on
 * http://127.0.0.1:PORT/`), without the trailing slash, or `null`.
 */
export function listeningOn(line: string): string | null {
  return /^relayer: listening on (http:\/\/127\.0\.0\.1:\d+)\/?$/
    .exec(line.trim())?.[1] ?? null;
}

/** All of `stream` as text, `onLine` called with each whole line as it comes. */
export async function readLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<string> {
  let text = "";
  let from = 0;
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    for (
      let end = text.indexOf("\n", from);
      end >= 0;
      end = text.indexOf("\n", from)
    ) {
      onLine(text.slice(from, end));
      from = end + 1;
    }
  }
  if (from < text.length) onLine(text.slice(from));
  return text;
}

/**
 * Waits until `base` answers `GET /healthz` with 200, or until `stop` is
 * aborted (then it returns at once, having left no fetch or timer behind).
 */
export async function healthy(
  base: string,
  stop?: AbortSignal,
): Promise<void> {
  while (!stop?.aborted) {
    try {
      const res = await fetch(`${base}/healthz`, { signal: stop ?? null });
      await res.body?.cancel();
      if (res.ok) return;
    } catch {
      // not listening yet, or stopped
    }
    // Stopped while the fetch was in flight: the abort has fired already, so
    // a wait would run its whole 50 ms past a test that has ended.
    if (stop?.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        stop?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, 50);
      stop?.addEventListener("abort", done);
    });
  }
}

/** One refusal line on stderr (Deno's own task and download lines aside), matching `pattern`, and no stack. */
export function assertOneLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.trim().split("\n").filter((line) =>
    !/^(Task|Download|Warning) /.test(line)
  );
  assert.equal(lines.length, 1, stderr);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(stderr, /\n\s+at /, "no stack");
}

/**
 * Delivery 1 of `intentId`'s settle job, posted to the generic route of the
 * service at `base`, signed with `secret` now.
 */
export function signedDelivery(
  base: string,
  secret: string,
  intentId: string,
): Promise<Response> {
  const body = JSON.stringify({
    job: { intentId, kind: "settle" },
    delivery: 1,
  });
  return fetch(`${base}/v1/deliveries`, {
    method: "POST",
    body,
    headers: {
      "x-signature": signHmac(secret, body),
    },
  });
}
