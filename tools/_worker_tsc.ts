/**
 * The package's files compiled by `tsc` as a Worker's own TypeScript
 * project compiles them: under `@cloudflare/workers-types` (its globals,
 * not Deno's: `clearTimeout(number | null)`, a `TextDecoder` whose
 * options are both required) and `lib: ["esnext"]`, with the package's
 * strict options, and `cloudflare:workers` typed by it. `deno check` never
 * sees either: it checks against Deno's globals and takes
 * `cloudflare:workers`, which it cannot resolve, as `any`.
 *
 * TypeScript, `@cloudflare/workers-types` and `@types/node` are pinned
 * npm packages installed into the cache outside the repository
 * (`_npm_cache.ts`); the package's own npm imports come from Deno's npm
 * cache, the versions `deno.json` pins, found with `deno info`. The files
 * are compiled from a scratch folder that links to the repository's, with
 * a `node_modules` of links beside them, so nothing is written in the
 * repository. A lane with `bun` compiles them as a Bun project does
 * instead, under the pinned `@types/bun`, and one with `nodeProject` as a
 * Node project does, under `@types/node` alone.
 *
 * @module
 */

import { CheckError, firstLine, ROOT } from "./_check.ts";
import { denoInfo, npmInstall, requireNode, run } from "./_npm_cache.ts";

/** The pinned TypeScript (the version Deno 2.9's checker is). */
export const TYPESCRIPT_VERSION = "6.0.3";
/** The pinned Cloudflare types, of the workerd that worker-check runs (1.20260730.1). */
export const WORKERS_TYPES_VERSION = "5.20260730.1";
/** The pinned Node types, for a Worker with `nodejs_compat` (Node 20's, the repository's Node). */
export const NODE_TYPES_VERSION = "20.19.43";

/** The pinned Bun types (`@types/bun`, of the Bun bun-check runs), for a Bun project's compile. */
export const BUN_TYPES_VERSION = "1.4.5";

/**
 * The TypeScript a Bun project of `bun init` on Bun 1.4.5 installs (it asks
 * for `^7`), pinned: docs/api.md#from-bun says the package compiles under
 * it too.
 */
export const BUN_INIT_TYPESCRIPT_VERSION = "7.0.2";

/**
 * How much CPU time one `tsc` run may use (about 11 s here): a bound a
 * loaded machine does not stretch. Its wall time it does: a run of 15 s
 * on an idle 2-core machine ran past a minute at load average 8 to 10.
 */
const TSC_CPU_TIMEOUT_MS = 60_000;
/** How long one `tsc` run may take, for one that hangs using no CPU, and where CPU time cannot be read (not Linux). */
const TSC_TIMEOUT_MS = 5 * 60_000;

/** The pinned packages, installed into the cache. */
export interface TscInstall {
  /** TypeScript's `tsc` script, run with `node`. */
  readonly tsc: string;
  /** The folder of `@cloudflare/workers-types`. */
  readonly workersTypes: string;
  /** The folder of `@types/node`. */
  readonly nodeTypes: string;
  /** The folder of `undici-types`, which `@types/node` imports. */
  readonly undiciTypes: string;
  /**
   * The `node_modules` of the pinned `@types/bun` (with the `bun-types`,
   * `@types/node` and `undici-types` it brings), from
   * {@linkcode installBunTsc}; only a lane with `bun` reads it.
   */
  readonly bunModules?: string;
}

/**
 * Installs the pinned TypeScript, `@cloudflare/workers-types` and
 * `@types/node` into the cache (once), and checks Node is on PATH.
 *
 * @returns Where each is.
 * @throws {CheckError} If Node or npm is missing, or an install fails.
 */
export async function installTsc(): Promise<TscInstall> {
  await requireNode();
  const typescript = await npmInstall("typescript", TYPESCRIPT_VERSION);
  const workers = await npmInstall(
    "@cloudflare/workers-types",
    WORKERS_TYPES_VERSION,
  );
  const node = await npmInstall("@types/node", NODE_TYPES_VERSION);
  return {
    tsc: `${typescript}/node_modules/typescript/bin/tsc`,
    workersTypes: `${workers}/node_modules/@cloudflare/workers-types`,
    nodeTypes: `${node}/node_modules/@types/node`,
    undiciTypes: `${node}/node_modules/undici-types`,
  };
}

/**
 * {@linkcode installTsc}'s packages and the pinned `@types/bun`, for a lane
 * compiled as a Bun project compiles it.
 *
 * @param typescriptVersion The TypeScript whose `tsc` compiles: a pinned
 * one, {@linkcode TYPESCRIPT_VERSION} or
 * {@linkcode BUN_INIT_TYPESCRIPT_VERSION}.
 * @returns Where each is.
 * @throws {CheckError} If Node or npm is missing, or an install fails.
 */
export async function installBunTsc(
  typescriptVersion: string = TYPESCRIPT_VERSION,
): Promise<TscInstall> {
  const install = await installTsc();
  const bun = await npmInstall("@types/bun", BUN_TYPES_VERSION);
  const tsc = typescriptVersion === TYPESCRIPT_VERSION
    ? install.tsc
    : `${await npmInstall(
      "typescript",
      typescriptVersion,
    )}/node_modules/typescript/bin/tsc`;
  return { ...install, tsc, bunModules: `${bun}/node_modules` };
}

/** One `tsc` run: which files, under which global types. */
export interface TscLane {
  /** The files to compile, from the repository root or written by `extra`. */
  readonly files: readonly string[];
  /**
   * Node's types beside Cloudflare's, as a Worker with `nodejs_compat`
   * that installed `@types/node` has them.
   * @default false
   */
  readonly node?: boolean;
  /**
   * Bun's globals (`@types/bun`) instead of Cloudflare's, under the
   * compiler options `bun init` writes (`lib: ["ESNext"]` and the DOM's,
   * which docs/api.md#from-bun asks for; `types: ["bun"]`,
   * `module: "Preserve"`, `verbatimModuleSyntax`), as a Bun project that
   * installed the package compiles it. `install` must come from
   * {@linkcode installBunTsc}.
   * @default false
   */
  readonly bun?: boolean;
  /**
   * Node's types alone (`@types/node`), under the compiler options
   * docs/api.md#from-node gives `tsc` (`lib: ["ES2022", "DOM",
   * "DOM.Iterable"]`, `moduleResolution: "bundler"`,
   * `allowImportingTsExtensions`), as a Node project that installed the
   * package's tarball compiles it.
   * @default false
   */
  readonly nodeProject?: boolean;
  /**
   * Files of the repository whose npm packages are linked too, though not
   * compiled: the packages an `extra` file imports (`@hono/node-server`).
   * @default []
   */
  readonly npmFrom?: readonly string[];
  /**
   * Whether `.d.ts` files go unchecked. The two type packages declare the
   * same globals (`URL`, `Blob`, `console`…), so a project with both
   * compiles only with it; postgres.js's declarations name Node's
   * `Buffer`, so a project with Cloudflare's alone needs it too.
   * @default false
   */
  readonly skipLibCheck?: boolean;
  /**
   * Files written into the scratch folder first, by plain name (no
   * folder, none of the package's): their text.
   */
  readonly extra?: Readonly<Record<string, string>>;
  /**
   * Compiler options set over the lane's, as a project's own stricter
   * ones (`noUnusedLocals`, `isolatedModules`…).
   * @default {}
   */
  readonly compilerOptions?: Readonly<Record<string, unknown>>;
}

/** The npm packages of `files`' graph and their dependencies, by name. */
async function npmPackages(
  files: readonly string[],
): Promise<Map<string, { id: string; path: string }>> {
  const found = new Map<string, { id: string; path: string }>();
  for (const file of files) {
    const info = await denoInfo(file);
    const todo = info.modules.flatMap((module) =>
      module.kind === "npm" && module.npmPackage ? [module.npmPackage] : []
    );
    for (let id = todo.pop(); id !== undefined; id = todo.pop()) {
      const pkg = info.npmPackages[id];
      if (pkg?.localPath === undefined) {
        throw new CheckError(
          `deno info names ${id} with no folder in Deno's npm cache: run \`deno cache ${file}\` and run again`,
        );
      }
      const seen = found.get(pkg.name);
      if (seen !== undefined) {
        if (seen.id !== id) {
          throw new CheckError(
            `${seen.id} and ${id} are both in the graph, and one node_modules holds one: pin one version in deno.json`,
          );
        }
        continue;
      }
      found.set(pkg.name, { id, path: pkg.localPath });
      todo.push(...pkg.dependencies);
    }
  }
  return found;
}

/**
 * Compiles `lane.files` with the pinned `tsc` under Cloudflare's types
 * (and Node's, with `lane.node`), `noEmit`.
 *
 * @param install The pinned packages, from {@linkcode installTsc}.
 * @param lane The files, the global types, `skipLibCheck`, extra files.
 * @returns Each error `tsc` reports, one string per error (its first line
 * and the lines that explain it), paths from the repository root; `[]`
 * when it compiles.
 * @throws {CheckError} If `deno info` or `tsc` cannot run, or `tsc` fails
 * with no error it reports.
 */
export async function workerTsc(
  install: TscInstall,
  lane: TscLane,
): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    name: string;
    exports: Record<string, string>;
    compilerOptions: Record<string, unknown>;
    publish: { include: string[] };
  };
  const dir = await Deno.makeTempDir({ prefix: "relayer_worker_tsc_" });
  try {
    // The published files, linked at their own paths: tsc resolves the
    // npm imports from the scratch folder's node_modules (preserveSymlinks).
    for (const entry of config.publish.include) {
      const name = entry.replace(/\/$/, "");
      await Deno.symlink(`${ROOT}${name}`, `${dir}/${name}`);
    }
    const repoFiles = lane.files.filter((file) =>
      !(file in (lane.extra ?? {}))
    );
    // node_modules: the package's npm imports from Deno's cache, and the
    // pinned type packages.
    const links = new Map<string, string>();
    for (
      const [name, { path }] of await npmPackages([
        ...repoFiles,
        ...(lane.npmFrom ?? []),
      ])
    ) {
      links.set(name, path);
    }
    if (lane.bun) {
      if (install.bunModules === undefined) {
        throw new CheckError(
          "a Bun lane needs @types/bun: install with installBunTsc(), not installTsc()",
        );
      }
      for (const name of ["@types/bun", "bun-types", "@types/node"]) {
        links.set(name, `${install.bunModules}/${name}`);
      }
      links.set("undici-types", `${install.bunModules}/undici-types`);
    } else if (!lane.nodeProject) {
      links.set("@cloudflare/workers-types", install.workersTypes);
    }
    if ((lane.node || lane.nodeProject) && !lane.bun) {
      links.set("@types/node", install.nodeTypes);
      links.set("undici-types", install.undiciTypes);
    }
    for (const [name, path] of links) {
      const link = `${dir}/node_modules/${name}`;
      await Deno.mkdir(link.slice(0, link.lastIndexOf("/")), {
        recursive: true,
      });
      await Deno.symlink(path, link);
    }
    for (const [name, text] of Object.entries(lane.extra ?? {})) {
      // The folder's other entries link into the repository: an extra
      // file is written beside them, never through them.
      if (name.includes("/") || name === "tsconfig.json") {
        throw new CheckError(
          `extra file ${
            JSON.stringify(name)
          } is not a plain name of the scratch folder: name it without a folder`,
        );
      }
      await Deno.writeTextFile(`${dir}/${name}`, text, { createNew: true });
    }
    // The package's own names, as an adopter's install resolves them.
    const paths: Record<string, string[]> = {};
    for (const [path, file] of Object.entries(config.exports)) {
      paths[`${config.name}${path.slice(1)}`] = [file];
    }
    await Deno.writeTextFile(
      `${dir}/tsconfig.json`,
      JSON.stringify({
        compilerOptions: {
          ...config.compilerOptions,
          target: "esnext",
          module: "esnext",
          moduleResolution: "bundler",
          ...(lane.bun
            ? {
              module: "preserve",
              moduleDetection: "force",
              verbatimModuleSyntax: true,
              lib: ["esnext", "dom", "dom.iterable"],
              types: ["bun"],
            }
            : lane.nodeProject
            ? { lib: ["es2022", "dom", "dom.iterable"], types: ["node"] }
            : {
              lib: ["esnext"],
              types: [
                "@cloudflare/workers-types",
                ...(lane.node ? ["node"] : []),
              ],
            }),
          ...lane.compilerOptions,
          skipLibCheck: lane.skipLibCheck ?? false,
          noEmit: true,
          allowImportingTsExtensions: true,
          preserveSymlinks: true,
          paths,
        },
        files: lane.files,
      }),
    );
    const { code, out } = await run("node", [
      install.tsc,
      "-p",
      "tsconfig.json",
      "--pretty",
      "false",
    ], {
      cwd: dir,
      label: `tsc ${lane.files.join(" ")}`,
      timeoutMs: TSC_TIMEOUT_MS,
      cpuTimeoutMs: TSC_CPU_TIMEOUT_MS,
    });
    const errors: string[] = [];
    for (const line of out.split("\n")) {
      if (/^\S.*\(\d+,\d+\): error TS\d+|^error TS\d+/.test(line)) {
        errors.push(line);
      } else if (/^\s+\S/.test(line) && errors.length > 0) {
        errors[errors.length - 1] += `\n${line}`;
      }
    }
    if (code !== 0 && errors.length === 0) {
      throw new CheckError(
        `tsc exited ${code} with no error it names (${
          firstLine(out)
        }): run it by hand in a copy of the scratch folder`,
      );
    }
    return errors;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A Node project's compile of the package, as docs/api.md#from-node gives it. */
export interface NodeProject {
  /**
   * The package's entry points a Node project imports and the section's
   * two services, under the options the section says they compile under
   * (`compilerOptions`, each set, beside the package's strict ones).
   */
  readonly lane: TscLane;
  /** The options the section says they do not compile under, in its order. */
  readonly notUnder: readonly string[];
}

/**
 * docs/api.md#from-node read as a `tsc` run: its two `ts` blocks (the
 * services) and the options of its sentence "they compile under `strict`
 * with `…`, … but not under `…`, … (": those they compile under, set, and
 * those they do not.
 *
 * @returns The lane to give {@linkcode workerTsc}, and the options left off.
 * @throws {CheckError} If the section has not two `ts` blocks, or not that
 * sentence, or the sentence names fewer than 8 options they compile under
 * or none they do not.
 */
export async function nodeProject(): Promise<NodeProject> {
  const api = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const start = api.indexOf("\n## From Node\n");
  const section = api.slice(start, api.indexOf("\n## ", start + 1));
  const blocks = [...section.matchAll(/```ts[^\n]*\n([\s\S]*?)```/g)];
  if (start === -1 || blocks.length !== 2) {
    throw new CheckError(
      `docs/api.md's "## From Node" has ${
        start === -1 ? "no section" : `${blocks.length} ts blocks`
      }, not the two services the Node type check compiles: mend the section or the check`,
    );
  }
  const claim = /they compile under ([\s\S]*?), but not under ([\s\S]*?)[(:]/
    .exec(section);
  const options = (text: string) =>
    [...text.matchAll(/`(\w+)`/g)].map((m) => m[1]!);
  const under = claim ? options(claim[1]!) : [];
  const notUnder = claim ? options(claim[2]!) : [];
  if (under.length < 8 || notUnder.length === 0) {
    throw new CheckError(
      `docs/api.md's "## From Node" does not say which options the sources compile under and which not ("they compile under \`strict\` with \`…\`, … but not under \`…\` ("): say it there, as the Node type check reads it`,
    );
  }
  return {
    lane: {
      nodeProject: true,
      // @types/node 20's declarations and the DOM's lib declare some
      // globals twice; Node projects skip them, as the section's do.
      skipLibCheck: true,
      files: [
        "mod.ts",
        "webhook/app.ts",
        "store/kv.ts",
        "store/postgres.ts",
        "store/postgres_socket.ts",
        "testing/store_contract.ts",
        "kv_app.ts",
        "postgres_service.ts",
      ],
      extra: {
        "kv_app.ts": blocks[0]![1]!,
        "postgres_service.ts": blocks[1]![1]!,
      },
      // Those the section says they compile under, beside the package's
      // own (deno.json's strict ones).
      compilerOptions: Object.fromEntries(under.map((name) => [name, true])),
      // @hono/node-server and @deno/kv, which the services import.
      npmFrom: [
        "tests/node/webhook_node_entry.ts",
        "tests/node/kv_contract_node.ts",
      ],
    },
    notUnder,
  };
}
