/**
 * Pinned npm packages for the runtime checks, installed once into a cache
 * outside the repository (`$HOME/.cache/relayer-poison/<name>-<version>`,
 * or `RELAYER_CACHE`), with the ordinary npm client. A fresh machine needs
 * only Node and npm. Also what every runtime check does with them: run a
 * command ({@linkcode run}) and bundle an entry point ({@linkcode bundle}).
 *
 * @module
 */

const decoder = new TextDecoder();
const ROOT = new URL("..", import.meta.url).pathname;

/** The cache folder of the runtime checks. */
export function cacheRoot(): string {
  const explicit = Deno.env.get("RELAYER_CACHE");
  if (explicit) return explicit;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) throw new Error("Set HOME or RELAYER_CACHE for the npm cache");
  return `${home}/.cache/relayer-poison`;
}

/**
 * Installs `name@version` (exactly that version) into its own folder of the
 * cache unless it is there already, and returns the folder (its
 * `node_modules` holds the package).
 */
export async function npmInstall(
  name: string,
  version: string,
): Promise<string> {
  const dir = `${cacheRoot()}/${name.replace("/", "+")}-${version}`;
  const marker = `${dir}/node_modules/${name}/package.json`;
  try {
    const installed = JSON.parse(await Deno.readTextFile(marker)) as {
      version?: string;
    };
    if (installed.version === version) return dir;
  } catch {
    // not installed yet
  }
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(
    `${dir}/package.json`,
    JSON.stringify({ private: true, dependencies: { [name]: version } }),
  );
  const { code, stdout, stderr } = await new Deno.Command("npm", {
    args: [
      "install",
      "--prefix",
      dir,
      "--no-audit",
      "--no-fund",
      "--save-exact",
      "--loglevel=error",
      `${name}@${version}`,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(
      `npm install ${name}@${version} failed:\n${decoder.decode(stdout)}${
        decoder.decode(stderr)
      }`,
    );
  }
  return dir;
}

/** Runs a command; returns its exit code and its output, stdout then stderr. */
export async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(command, {
    args,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    ...(options.env ? { env: options.env } : {}),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code, out: decoder.decode(stdout) + decoder.decode(stderr) };
}

/**
 * Bundles `entry` (a path from the repository root) into the one file
 * `out` with `deno bundle`, for `platform`, leaving `external` imports as
 * they are.
 *
 * @throws {Error} If `deno bundle` fails, with its output.
 */
export async function bundle(
  entry: string,
  out: string,
  { platform, external = [] }: {
    platform: "browser" | "node";
    external?: readonly string[];
  },
): Promise<void> {
  const { code, out: text } = await run(Deno.execPath(), [
    "bundle",
    "--quiet",
    "--platform",
    platform,
    ...external.flatMap((name) => ["--external", name]),
    "-o",
    out,
    entry,
  ], { cwd: ROOT });
  if (code !== 0) throw new Error(`deno bundle ${entry} failed:\n${text}`);
}
