/**
 * `main.ts` as a real process, the way `deno task start` runs it: for the
 * tests of its start, its refusals and its drain.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startArgs } from "../support/start_args.ts";

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

/** A port free now, and the listener that holds it when `hold` is set. */
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
  /** SIGKILL, if it still runs. */
  kill(): void;
}

/** Where and how {@linkcode startMain} runs `main.ts`. */
export interface StartOptions {
  /** The port to serve on. */
  readonly port: number;
  /** The one folder it may write. */
  readonly writeDir: string;
  /** Arguments added after `serve`. */
  readonly flags?: readonly string[];
  /** Shipped arguments left out. */
  readonly drop?: readonly string[];
}

/**
 * Starts `main.ts` with the shipped flags on `port`, writing `writeDir`
 * only, with `env` and nothing else of ours; the shipped arguments in
 * `drop` are left out, and `flags` added.
 */
export function startMain(
  env: Record<string, string>,
  options: StartOptions,
): MainProcess {
  const { port, writeDir } = options;
  const [serve, ...shipped] = startArgs({ port, writeDir }).filter((arg) =>
    !options.drop?.includes(arg)
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [serve!, ...(options.flags ?? []), ...shipped],
    cwd: ROOT,
    clearEnv: true,
    env: { ...baseEnv(), ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  output.catch(() => {});
  return {
    child,
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
