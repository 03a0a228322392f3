/**
 * Pinned npm packages for the runtime checks, each with its whole tree
 * locked (`support/npm_locks/`), installed once into a cache outside the
 * repository (`$HOME/.cache/relayer-poison/<name>-<version>`, or
 * `RELAYER_CACHE`) with the ordinary npm client's `npm ci`. A fresh machine needs
 * only Node and npm. Also what every runtime check does with them: run a
 * command under a deadline ({@linkcode run}) and bundle an entry point
 * ({@linkcode bundle}). Each failure is a {@linkcode CheckError} that says
 * what failed and what to do.
 *
 * @module
 */

import { formatDuration } from "../policy/format_duration.ts";
import { lockedInstall } from "../support/npm_lock.ts";
import { nodeVersion, wrongNode } from "../support/node_version.ts";
import { CheckError, errorLine, firstLine, ROOT } from "./_check.ts";

const decoder = new TextDecoder();

/** How long an install may take (`npm install`, or `deno bundle` on a cold Deno cache): 5 minutes. */
export const INSTALL_TIMEOUT_MS = 5 * 60_000;
/** How long one run of a check's program may take: 3 minutes. */
export const CHECK_TIMEOUT_MS = 3 * 60_000;

/** What to do when a program is not on PATH, for the ones the checks call by name. */
const INSTALL_HINTS: Record<string, string> = {
  npm: "install Node.js 20 with npm, or add their folder to PATH",
  node: "install Node.js 20, or add its folder to PATH",
};

/** What `deno info --json` says of a module graph: the fields the checks read. */
export interface DenoInfo {
  readonly modules: readonly { kind?: string; npmPackage?: string }[];
  readonly npmPackages: Readonly<
    Record<string, { name: string; dependencies: string[]; localPath?: string }>
  >;
}

/**
 * The module graph of `target` (a file, or an import `deno.json` maps),
 * from `deno info --json` run at the repository root: where Deno's npm
 * cache holds each npm package of it, wherever `DENO_DIR` puts the cache.
 *
 * @param target What `deno info` is given.
 * @returns Its answer.
 * @throws {CheckError} If `deno info` fails, or runs past
 * {@linkcode INSTALL_TIMEOUT_MS} (a cold cache downloads the graph).
 */
export async function denoInfo(target: string): Promise<DenoInfo> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", target],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(INSTALL_TIMEOUT_MS),
  }).output();
  if (code !== 0) {
    throw new CheckError(
      `deno info ${target} failed (${
        firstLine(decoder.decode(stderr))
      }): run \`deno info ${target}\` from the repository root to see why`,
    );
  }
  return JSON.parse(decoder.decode(stdout)) as DenoInfo;
}

/**
 * The cache folder of the runtime checks.
 *
 * @throws {CheckError} If neither `HOME` nor `RELAYER_CACHE` is set.
 */
export function cacheRoot(): string {
  const explicit = Deno.env.get("RELAYER_CACHE");
  if (explicit) return explicit;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) {
    throw new CheckError(
      "no folder for the npm cache: set HOME, or RELAYER_CACHE to a folder outside the repository",
    );
  }
  return `${home}/.cache/relayer-poison`;
}

/** The line of npm's output that says what went wrong, without its stack trace. */
function npmError(out: string): string {
  const lines = out.split("\n").map((line) =>
    line.replace(/^npm (?:error|ERR!)\s?/, "").trim()
  );
  return lines.find((line) =>
    line !== "" && !/^(code|syscall|errno|at) /.test(line) &&
    !/^(A complete log|Log files)/.test(line)
  ) ?? firstLine(out);
}

/**
 * Installs `name@version` and exactly the tree its committed lock names
 * (`support/npm_locks/`, see `support/npm_lock.ts`) into its own folder of
 * the cache with `npm ci`, unless that tree is there already, and returns
 * the folder (its `node_modules` holds the package).
 *
 * @param name The npm package (`"miniflare"`, `"@deno/kv"`).
 * @param version Its exact version.
 * @returns The package's folder of the cache.
 * @throws {CheckError} If no lock is committed for the pin, or npm is
 * missing, fails, or takes longer than {@linkcode INSTALL_TIMEOUT_MS}.
 */
export async function npmInstall(
  name: string,
  version: string,
): Promise<string> {
  const dir = `${cacheRoot()}/${name.replace("/", "+")}-${version}`;
  let args: string[] | null;
  try {
    args = await lockedInstall(name, version, dir);
  } catch (error) {
    throw new CheckError((error as Error).message, { cause: error });
  }
  if (args === null) return dir;
  const retry =
    `check that the npm registry answers (npm ping), then run again; if it still fails, delete ${dir}`;
  const { code, out } = await run("npm", args, {
    label: `npm ci ${name}@${version}`,
    timeoutMs: INSTALL_TIMEOUT_MS,
    ifSlow: retry,
  });
  if (code !== 0) {
    throw new CheckError(
      `npm ci ${name}@${version} failed (${npmError(out)}): ${retry}`,
    );
  }
  return dir;
}

/** How {@linkcode run} runs a command. */
export interface RunOptions {
  /** Its working directory. @default the caller's */
  readonly cwd?: string;
  /** Environment variables added to the caller's. @default {} */
  readonly env?: Record<string, string>;
  /** What it is called in messages. @default the program's name and its arguments */
  readonly label?: string;
  /** How long it may run before it is stopped (SIGTERM). @default CHECK_TIMEOUT_MS */
  readonly timeoutMs?: number;
  /**
   * How much CPU time it may use before it is stopped (SIGTERM), read each
   * second with `ps` where it runs: a bound a loaded machine does not
   * stretch, as it stretches the wall time of a program that computes
   * (`tsc`), so `timeoutMs` can be long. @default no bound
   */
  readonly cpuTimeoutMs?: number;
  /** What to do when it runs past `timeoutMs`. @default run it by hand to see where it stops */
  readonly ifSlow?: string;
  /** What to do when the program is not there. @default install it, or add its folder to PATH */
  readonly ifMissing?: string;
  /** Print its output as it comes (then `out` is `""`) instead of collecting it. @default false */
  readonly inherit?: boolean;
}

/**
 * Runs a command under a deadline.
 *
 * @param command The program: a name looked up on PATH, or a path.
 * @param args Its arguments.
 * @param options Where, with what, for how long; see {@linkcode RunOptions}.
 * @returns Its exit code and its output, stdout then stderr.
 * @throws {CheckError} If the program is missing; a {@linkcode RunStopped}
 * if it runs past its deadline (it is stopped first), with its output.
 */
export async function run(
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<{ code: number; out: string }> {
  const {
    timeoutMs = CHECK_TIMEOUT_MS,
    cpuTimeoutMs,
    inherit = false,
  } = options;
  const program = command.split("/").pop()!;
  const label = options.label ?? [program, ...args].join(" ");
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const io = inherit ? "inherit" : "piped";
  let result: Deno.CommandOutput;
  /** The CPU time it had used when it was stopped for it, if it was. */
  let cpuUsedMs: number | undefined;
  let cpuTimer: ReturnType<typeof setInterval> | undefined;
  /** A read of its CPU time under way, awaited before the run returns. */
  let reading: Promise<void> | undefined;
  try {
    const child = new Deno.Command(command, {
      args,
      ...(options.cwd ? { cwd: options.cwd } : {}),
      ...(options.env ? { env: options.env } : {}),
      stdin: "null",
      stdout: io,
      stderr: io,
      signal: controller.signal,
    }).spawn();
    if (cpuTimeoutMs !== undefined) {
      cpuTimer = setInterval(() => {
        if (reading !== undefined || controller.signal.aborted) return;
        reading = cpuTimeMs(child.pid).then((used) => {
          reading = undefined;
          if (used === null) clearInterval(cpuTimer);
          else if (used >= cpuTimeoutMs && !controller.signal.aborted) {
            cpuUsedMs = used;
            controller.abort();
          }
        });
      }, CPU_POLL_MS);
    }
    result = await child.output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new CheckError(
        `${command} not found: ${
          options.ifMissing ?? INSTALL_HINTS[program] ??
            "install it, or add its folder to PATH"
        }`,
        { cause: error },
      );
    }
    throw error;
  } finally {
    clearTimeout(timer);
    clearInterval(cpuTimer);
    await reading;
  }
  if (controller.signal.aborted) {
    const whatToDo = options.ifSlow ??
      "run it again; if it stops again, run it by hand to see where it hangs";
    throw new RunStopped(
      cpuUsedMs !== undefined
        ? `${label} used ${formatDuration(cpuUsedMs)} of CPU time, past its ${
          formatDuration(cpuTimeoutMs!)
        }, and was stopped (a bound on CPU time, which a loaded machine does not stretch): ${whatToDo}`
        : `${label} did not finish within ${
          formatDuration(timeoutMs)
        } and was stopped${await loadSaid()}: ${whatToDo}`,
      inherit
        ? ""
        : decoder.decode(result.stdout) + decoder.decode(result.stderr),
    );
  }
  return {
    code: result.code,
    out: inherit
      ? ""
      : decoder.decode(result.stdout) + decoder.decode(result.stderr),
  };
}

/**
 * A program {@linkcode run} stopped at its deadline (wall time or CPU
 * time), with what it printed until then: where it was when it stopped.
 */
export class RunStopped extends CheckError {
  /**
   * @param message What was stopped and why, then what to do, on one line.
   * @param out What it printed before it was stopped, stdout then stderr
   * (`""` when its output was not collected).
   */
  constructor(message: string, readonly out: string) {
    super(message);
  }
}

/** How often {@linkcode run} reads the CPU time of a program it bounds so. */
const CPU_POLL_MS = 1_000;

/**
 * The CPU time process `pid` has used (user and system, all its threads),
 * in ms, as `ps -o time=` says it (`[DD-]HH:MM:SS` on Linux, to the
 * second; `M:SS.ss` on macOS); `null` where `ps` cannot say (no `ps`, or
 * the process gone). Deno reads `/proc` only with every permission.
 */
export async function cpuTimeMs(pid: number): Promise<number | null> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("ps", {
      args: ["-o", "time=", "-p", String(pid)],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output();
  } catch {
    return null;
  }
  const match = /^\s*(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*$/.exec(
    decoder.decode(out.stdout),
  );
  if (!out.success || match === null) return null;
  const [, days = "0", hours = "0", minutes, seconds] = match;
  return Math.round(
    (((Number(days) * 24 + Number(hours)) * 60 + Number(minutes)) * 60 +
      Number(seconds)) * 1000,
  );
}

/** The machine's load, as a run that ran out of time names it: "" where `uptime` cannot say. */
async function loadSaid(): Promise<string> {
  let text: string;
  try {
    const out = await new Deno.Command("uptime", {
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).output();
    text = decoder.decode(out.stdout);
  } catch {
    return "";
  }
  const load = Number(/load averages?: ([\d.]+)/.exec(text)?.[1]);
  if (!Number.isFinite(load)) return "";
  const cores = navigator.hardwareConcurrency;
  return ` (load average ${load.toFixed(1)} on ${cores} cores${
    load > cores ? ": the machine was busy, which may be why" : ""
  })`;
}

/** A runtime's binary in the cache, as {@linkcode cachedVersion} checks it. */
export interface CachedBinary {
  /** The runtime's name in messages (`"Node"`, `"Bun"`). */
  readonly runtime: string;
  /** The pinned version (`"24.22.3"`). */
  readonly pin: string;
  /** What `--version` must print, exactly (`"v24.22.3"`, `"1.4.5"`); its first line only with `firstLine`. */
  readonly expected: string;
  /**
   * Whether only the first line of `--version` is held to `expected`
   * (Deno prints its V8's and TypeScript's versions on the next two).
   * @default false
   */
  readonly firstLine?: boolean;
  /** The binary. */
  readonly command: string;
  /** Its package's folder of the cache, which messages ask to delete. */
  readonly cache: string;
  /** What to do when the binary does not start: after "run <check> where …". */
  readonly ifNotStarting: string;
  /** Environment variables for the run. @default {} */
  readonly env?: Record<string, string>;
}

/**
 * Checks that a runtime installed into the cache starts here and is the
 * pinned version: its `--version` must exit 0 and print `expected` (as its
 * first line, with `firstLine`). The
 * cache is keyed by the pin, so another version there means a folder
 * written by hand or half replaced.
 *
 * @param binary The runtime, its pin and where it is.
 * @returns What `--version` printed (`expected`: its first line, with `firstLine`).
 * @throws {CheckError} If the binary is missing, does not start (with its
 * error line), or answers another version.
 */
export async function cachedVersion(binary: CachedBinary): Promise<string> {
  const { runtime, pin, cache } = binary;
  const { code, out } = await run(binary.command, ["--version"], {
    ...(binary.env ? { env: binary.env } : {}),
    ifMissing:
      `the cached ${runtime} ${pin} is incomplete: delete ${cache} and run again`,
  });
  if (code !== 0) {
    // Official Linux binaries need a newer C library than some machines have.
    throw new CheckError(
      `the cached ${runtime} ${pin} does not start here (${
        errorLine(out)
      }): run ${binary.ifNotStarting}, or delete ${cache} and run again if it is incomplete`,
    );
  }
  const version = binary.firstLine ? firstLine(out) : out.trim();
  if (version !== binary.expected) {
    throw new CheckError(
      `the cached ${runtime} in ${cache} answers ${
        JSON.stringify(version)
      }, not ${binary.expected}: delete ${cache} and run again`,
    );
  }
  return version;
}

/**
 * The version of the real Node.js on PATH, for the checks that run under it.
 *
 * @param options `major`: the only major version accepted (node-check
 * runs Node 20 from PATH, so it refuses any other there); absent, any real Node will do
 * (worker-check runs Miniflare under it, and proves nothing about Node).
 * @returns What `node --version` prints (`"v20.20.2"`).
 * @throws {CheckError} If there is none (Deno's own `node` stand-in does
 * not count), or its major is not `major`.
 */
export async function requireNode(
  options: { readonly major?: number } = {},
): Promise<string> {
  const version = await nodeVersion();
  if (version === null) {
    throw new CheckError(
      "no Node.js on PATH (Deno's own `node` stand-in does not count): install Node.js 20, or add its folder to PATH",
    );
  }
  const wrong = options.major === undefined
    ? null
    : wrongNode(version, options.major);
  if (wrong !== null) throw new CheckError(wrong);
  return version;
}

/**
 * Bundles `entry` (a path from the repository root) into the one file
 * `out` with `deno bundle`, for `platform`, leaving `external` imports as
 * they are.
 *
 * @param entry The entry point, from the repository root.
 * @param out The bundle's path.
 * @param options `platform`, the `external` imports to leave alone, and an
 * `importMap` file that replaces `deno.json`'s imports (`deno bundle` has
 * no `--conditions`: a map stands in for an export condition).
 * @throws {CheckError} If `deno bundle` fails (with its first error line)
 * or takes longer than {@linkcode INSTALL_TIMEOUT_MS}.
 */
export async function bundle(
  entry: string,
  out: string,
  { platform, external = [], importMap }: {
    platform: "browser" | "node";
    external?: readonly string[];
    importMap?: string;
  },
): Promise<void> {
  const flags = [
    "--platform",
    platform,
    ...external.flatMap((name) => ["--external", name]),
    ...(importMap === undefined ? [] : ["--import-map", importMap]),
  ];
  const { code, out: text } = await run(Deno.execPath(), [
    "bundle",
    "--quiet",
    ...flags,
    "-o",
    out,
    entry,
  ], {
    cwd: ROOT,
    label: `deno bundle ${entry}`,
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
  if (code !== 0) {
    throw new CheckError(
      `deno bundle ${entry} failed (${errorLine(text)}): run \`deno ${
        ["bundle", ...flags, entry].join(" ")
      } >/dev/null\` from the repository root to see the whole error`,
    );
  }
}
