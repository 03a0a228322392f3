/**
 * Walks the Cloudflare deployment of docs/queues.md as an adopter does,
 * with the npm package `wrangler` (pinned, installed into the cache outside
 * the repository, run on the pinned Node 22, as Wrangler 4 needs 22 or
 * later): packs this repository into the tarball docs/api.md describes
 * (its `package.json` as the docs give it), installs it and `postgres`
 * (deno.json's pin) into a project of its own, copies
 * `examples/cloudflare/worker.ts`, `postgres_worker.ts` and `wrangler.toml`
 * there, and writes the PostgreSQL Worker's config as step 3 says (`main`,
 * `compatibility_flags = ["nodejs_compat"]` and the docs' `[[hyperdrive]]`
 * table). Then:
 *
 * - each config, as Wrangler reads it, must conform to the
 *   `config-schema.json` the pinned package ships (no key it does not know,
 *   none deprecated);
 * - `wrangler deploy --dry-run --outdir …` must bundle each Worker with no
 *   warning (Wrangler only warns on a key it does not know), the
 *   PostgreSQL one with postgres.js's Workers build (`cloudflare:sockets`);
 * - `wrangler dev --local` runs `worker.ts` on the queues `wrangler.toml`
 *   binds, with the secrets in `.dev.vars` and the signer stub as
 *   `SENDER_URL`: a signed delivery is answered 503, waiting for the
 *   confirmation, then the job put on the queue by `POST /v1/jobs` settles
 *   the intent, and a job the signer declares not sent fails its intent,
 *   with a dead letter;
 * - `wrangler dev` refuses `postgres_worker.ts` with Hyperdrive bound and no
 *   local connection string, and, given one in `.env` as the docs say,
 *   runs the same jobs on a real PostgreSQL server it starts (migrated
 *   first, as step 3 says), or says it skipped that where there are no
 *   server binaries;
 * - from the same tarball, docs/api.md's Node service on PostgreSQL runs
 *   as its "From Node" says, `node --import tsx service.ts` on the Node on
 *   PATH and on the pinned 22, tsx and `@hono/node-server` at the docs'
 *   pins, on that server: its refusals of `RELAYER_INSECURE_DEV` naming
 *   its local run, its two start lines, `/readyz`, an intent created, its
 *   drain said and exit 0 on SIGTERM.
 *
 * No network beyond npm: `WRANGLER_SEND_METRICS=false`,
 * `CLOUDFLARE_CF_FETCH_ENABLED=false`, no Cloudflare credentials passed on.
 * Not part of `deno task test`: `deno task wrangler-check`, about a minute
 * once the cache holds Wrangler and Node; exits non-zero if anything fails.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { pathToFileURL } from "node:url";
import postgres from "postgres";
import { signer } from "../examples/signer_stub.ts";
import { PostgresStore } from "../store/postgres.ts";
import { nodeBinary, PINNED_NODES } from "../support/node_version.ts";
import { CheckError, errorLine, ROOT, runMain } from "./_check.ts";
import { schemaErrors } from "./_json_schema.ts";
import { INSTALL_TIMEOUT_MS, npmInstall, run } from "./_npm_cache.ts";
import { withPostgres } from "./_postgres_check.ts";
import { apiBlock, runDocsService } from "./_docs_service_run.ts";
import { signGeneric } from "./_sign.ts";

/** The pinned Wrangler; its Miniflare is worker-check's 4.20260730.0. */
export const WRANGLER_VERSION = "4.116.0";

/** The Node line Wrangler runs on: the pinned 22 (Wrangler 4 needs 22 or later). */
const NODE_LINE = "22.";

/** How long `wrangler dev` may take to say it is ready. */
const READY_TIMEOUT_MS = 60_000;

/** How long a job on the local queue may take to end its intent. */
const SETTLE_TIMEOUT_MS = 60_000;

// Its own, not the docs' local-run values: wrangler.toml's PUBLIC_URL is off
// this machine, where the Worker refuses those.
const SECRET = "wrangler-check-secret-0123456789";
const OPS_TOKEN = "wrangler-check-ops-0123456789";

/** Environment variables that would let Wrangler reach Cloudflare's API. */
const CREDENTIALS = [
  "CLOUDFLARE_API_TOKEN",
  "CLOUDFLARE_API_KEY",
  "CLOUDFLARE_EMAIL",
  "CLOUDFLARE_ACCOUNT_ID",
  "CF_API_TOKEN",
  "CF_ACCOUNT_ID",
];

/**
 * The `.dev.vars` the walk gives `wrangler dev`: the secrets, and the
 * signer stub as `SENDER_URL`.
 *
 * @param senderUrl The signer stub's URL.
 * @returns The file's text, a setting a line.
 *
 * @example
 * ```ts
 * import { devVars } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(devVars("http://127.0.0.1:9000"), /^SENDER_URL=http:\/\/127\.0\.0\.1:9000$/m);
 * ```
 */
export function devVars(senderUrl: string): string {
  return [
    `WEBHOOK_SECRET=${SECRET}`,
    `OPS_TOKEN=${OPS_TOKEN}`,
    `SENDER_URL=${senderUrl}`,
    "",
  ].join("\n");
}

/**
 * The `package.json` docs/api.md gives the tarball of a clone: its first
 * `json` block naming `@relayer/poison`.
 *
 * @param apiDocs docs/api.md's text.
 * @returns The manifest.
 * @throws {CheckError} If there is no such block.
 *
 * @example
 * ```ts
 * import { docsPackageJson } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const fence = "`".repeat(3);
 * const docs = `${fence}json\n{ "name": "@relayer/poison", "version": "0.1.0" }\n${fence}\n`;
 * assert.equal(docsPackageJson(docs).version, "0.1.0");
 * ```
 */
export function docsPackageJson(apiDocs: string): Record<string, unknown> {
  const block = /```json\n(\{\s*"name": "@relayer\/poison"[\s\S]*?)```/.exec(
    apiDocs,
  );
  if (!block) {
    throw new CheckError(
      'docs/api.md gives no package.json for the tarball (a ```json block naming "@relayer/poison"): restore it',
    );
  }
  return JSON.parse(block[1]!) as Record<string, unknown>;
}

/**
 * The `[[hyperdrive]]` table docs/queues.md's step 3 gives, unindented.
 *
 * @param queuesDocs docs/queues.md's text.
 * @returns The table's TOML.
 * @throws {CheckError} If there is none.
 *
 * @example
 * ```ts
 * import { docsHyperdriveTable } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const fence = "`".repeat(3);
 * const docs = `   ${fence}toml\n   [[hyperdrive]]\n   binding = "HYPERDRIVE"\n   ${fence}\n`;
 * assert.equal(docsHyperdriveTable(docs), '[[hyperdrive]]\nbinding = "HYPERDRIVE"\n');
 * ```
 */
export function docsHyperdriveTable(queuesDocs: string): string {
  const block = /( *)```toml\n((?:\1.*\n)*?)\1```/.exec(
    queuesDocs.slice(Math.max(0, queuesDocs.indexOf("[[hyperdrive]]") - 200)),
  );
  if (!block || !block[2]!.includes("[[hyperdrive]]")) {
    throw new CheckError(
      "docs/queues.md gives no [[hyperdrive]] table in a ```toml block: restore step 3's",
    );
  }
  const indent = block[1]!.length;
  return block[2]!.split("\n").map((line) => line.slice(indent)).join("\n");
}

/**
 * The PostgreSQL Worker's config as docs/queues.md's step 3 writes it from
 * `wrangler.toml`: `main = "postgres_worker.ts"`,
 * `compatibility_flags = ["nodejs_compat"]`, and the `[[hyperdrive]]` table.
 *
 * @param toml `examples/cloudflare/wrangler.toml`'s text.
 * @param hyperdrive The docs' `[[hyperdrive]]` table.
 * @returns The config's text.
 * @throws {CheckError} If `toml` has no `main = "worker.ts"` line.
 *
 * @example
 * ```ts
 * import { postgresConfig } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const toml = 'name = "relayer"\nmain = "worker.ts"\n';
 * assert.equal(
 *   postgresConfig(toml, '[[hyperdrive]]\nbinding = "HYPERDRIVE"\n'),
 *   'name = "relayer"\nmain = "postgres_worker.ts"\ncompatibility_flags = ["nodejs_compat"]\n\n[[hyperdrive]]\nbinding = "HYPERDRIVE"\n',
 * );
 * ```
 */
export function postgresConfig(toml: string, hyperdrive: string): string {
  const main = /^main = "worker\.ts"$/m;
  if (!main.test(toml)) {
    throw new CheckError(
      'examples/cloudflare/wrangler.toml has no main = "worker.ts" line for step 3 to replace: update tools/wrangler_check.ts with it',
    );
  }
  return `${
    toml.replace(
      main,
      'main = "postgres_worker.ts"\ncompatibility_flags = ["nodejs_compat"]',
    ).trimEnd()
  }\n\n${hyperdrive}`;
}

/**
 * The lines of Wrangler's output that are warnings or errors (`▲ [WARNING]`,
 * `✘ [ERROR]`), each with the lines under it that say what, colors removed.
 *
 * @param out Wrangler's output.
 * @returns The problems, one text each; none when it said none.
 *
 * @example
 * ```ts
 * import { wranglerProblems } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const out = "▲ [WARNING] Processing bad.toml configuration:\n\n" +
 *   '    - Unexpected fields found in queues.consumers[0] field: "retry_delay_secs"\n\n\nTotal Upload: 1 KiB\n';
 * assert.deepEqual(wranglerProblems(out), [
 *   '▲ [WARNING] Processing bad.toml configuration: - Unexpected fields found in queues.consumers[0] field: "retry_delay_secs"',
 * ]);
 * assert.deepEqual(wranglerProblems("Total Upload: 1 KiB\n"), []);
 * ```
 */
export function wranglerProblems(out: string): string[] {
  // deno-lint-ignore no-control-regex
  const lines = out.replace(/\x1b\[[0-9;]*m/g, "").split("\n");
  const problems: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/\[(?:WARNING|ERROR)\]/.test(lines[i]!)) continue;
    const parts = [lines[i]!.trim()];
    // The details: indented lines, up to the first unindented one.
    for (let j = i + 1; j < lines.length; j++) {
      const line = lines[j]!;
      if (line.trim() === "") continue;
      if (!/^\s/.test(line)) break;
      parts.push(line.trim());
      i = j;
    }
    problems.push(parts.join(" "));
  }
  return problems;
}

/** What the check runs Wrangler with. */
interface Tools {
  /** The pinned Node's binary. */
  readonly node: string;
  /** Wrangler's entry point (`wrangler/bin/wrangler.js`). */
  readonly wrangler: string;
  /** Wrangler's `config-schema.json`. */
  readonly schema: string;
  /** The environment every Node and Wrangler run gets, whole. */
  readonly env: Record<string, string>;
}

async function installTools(dir: string): Promise<Tools> {
  const pin = PINNED_NODES.find((pin) => pin.version.startsWith(NODE_LINE));
  if (pin === undefined) {
    throw new CheckError(
      `no Node ${NODE_LINE}x is pinned in support/node_version.ts: pin one, as Wrangler ${WRANGLER_VERSION} needs Node 22 or later`,
    );
  }
  const binary = nodeBinary(pin, Deno.build.os, Deno.build.arch);
  if ("missing" in binary) throw new CheckError(binary.missing);
  const nodeCache = await npmInstall(binary.name, pin.version);
  const node = `${nodeCache}/node_modules/${binary.name}/${binary.bin}`;
  const cache = await npmInstall("wrangler", WRANGLER_VERSION);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(Deno.env.toObject())) {
    if (!CREDENTIALS.includes(name)) env[name] = value;
  }
  const folder = node.slice(0, node.lastIndexOf("/"));
  Object.assign(env, {
    PATH: `${folder}:${env.PATH ?? ""}`,
    WRANGLER_SEND_METRICS: "false",
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    WRANGLER_LOG_PATH: `${dir}/logs`,
  });
  return {
    node,
    wrangler: `${cache}/node_modules/wrangler/bin/wrangler.js`,
    schema: `${cache}/node_modules/wrangler/config-schema.json`,
    env,
  };
}

/** Copies `from` (a file or a folder) to `to`. */
async function copy(from: string, to: string): Promise<void> {
  if ((await Deno.stat(from)).isFile) {
    await Deno.copyFile(from, to);
    return;
  }
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    await copy(`${from}/${entry.name}`, `${to}/${entry.name}`);
  }
}

/**
 * The tarball docs/api.md describes: this clone's package files with the
 * docs' `package.json`, its version marked with the commit, `npm pack`ed.
 *
 * @param dir Where it packs (`dir/package`) and leaves the tarball.
 * @returns The tarball's path.
 * @throws {CheckError} If `npm pack` fails.
 *
 * @example
 * ```ts ignore
 * const tarball = await packTarball(await Deno.makeTempDir());
 * ```
 */
export async function packTarball(dir: string): Promise<string> {
  const manifest = docsPackageJson(
    await Deno.readTextFile(`${ROOT}docs/api.md`),
  );
  const git = await run("git", ["rev-parse", "--short", "HEAD"], {
    cwd: ROOT,
  }).catch(() => ({ code: 1, out: "" }));
  if (git.code === 0) {
    manifest.version = `${manifest.version}-git.${git.out.trim()}`;
  }
  const pkg = `${dir}/package`;
  await Deno.mkdir(pkg);
  for (const file of manifest.files as string[]) {
    const name = file.replace(/\/$/, "");
    await copy(`${ROOT}${name}`, `${pkg}/${name}`);
  }
  await Deno.writeTextFile(
    `${pkg}/package.json`,
    JSON.stringify(manifest, null, 2),
  );
  const { code, out } = await run(
    "npm",
    ["pack", "--pack-destination", dir],
    { cwd: pkg, label: "npm pack" },
  );
  let tarball: string | undefined;
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name.endsWith(".tgz")) tarball = entry.name;
  }
  if (code !== 0 || tarball === undefined) {
    throw new CheckError(
      `npm pack of the package failed (${
        errorLine(out)
      }): run it in a copy of the clone with docs/api.md's package.json`,
    );
  }
  return `${dir}/${tarball}`;
}

/** The version of `postgres` deno.json pins. */
async function postgresPin(): Promise<string> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    imports: Record<string, string>;
  };
  const pin = /^npm:postgres@(.+)$/.exec(config.imports.postgres ?? "")?.[1];
  if (pin === undefined) {
    throw new CheckError(
      "deno.json does not pin npm:postgres@<version>: pin it",
    );
  }
  return pin;
}

/** The Worker's project: the tarball and postgres installed, the examples copied. */
async function project(dir: string, tarball: string): Promise<string> {
  const project = `${dir}/worker`;
  await Deno.mkdir(project);
  await Deno.writeTextFile(
    `${project}/package.json`,
    JSON.stringify({ name: "relayer-worker", private: true, type: "module" }),
  );
  const { code, out } = await run("npm", [
    "install",
    "--no-audit",
    "--no-fund",
    "--save-exact",
    tarball,
    `postgres@${await postgresPin()}`,
  ], {
    cwd: project,
    label: "npm install of the tarball",
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
  if (code !== 0) {
    throw new CheckError(
      `npm install of the tarball failed (${
        errorLine(out)
      }): check that the npm registry answers (npm ping), then run again`,
    );
  }
  for (const file of ["worker.ts", "postgres_worker.ts", "wrangler.toml"]) {
    await Deno.copyFile(
      `${ROOT}examples/cloudflare/${file}`,
      `${project}/${file}`,
    );
  }
  await Deno.writeTextFile(
    `${project}/wrangler.postgres.toml`,
    postgresConfig(
      await Deno.readTextFile(`${project}/wrangler.toml`),
      docsHyperdriveTable(await Deno.readTextFile(`${ROOT}docs/queues.md`)),
    ),
  );
  return project;
}

/** Runs Wrangler to its end in `cwd`. */
async function wrangler(
  tools: Tools,
  cwd: string,
  args: string[],
): Promise<{ code: number; out: string }> {
  const output = await new Deno.Command(tools.node, {
    args: [tools.wrangler, ...args],
    cwd,
    env: tools.env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(READY_TIMEOUT_MS),
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    out: decoder.decode(output.stdout) + decoder.decode(output.stderr),
  };
}

/** Each config as Wrangler reads it, against Wrangler's own schema. */
async function checkSchema(
  tools: Tools,
  project: string,
  configs: string[],
): Promise<boolean> {
  const script = `${project}/read_config.mjs`;
  await Deno.writeTextFile(
    script,
    `const { experimental_readRawConfig: read } = await import(process.argv[2]);
const configs = {};
for (const config of process.argv.slice(3)) configs[config] = read({ config }).rawConfig;
console.log("CONFIGS " + JSON.stringify(configs));
`,
  );
  const { code, out } = await run(tools.node, [
    script,
    pathToFileURL(tools.wrangler.replace(/bin\/wrangler\.js$/, "")).href +
    "wrangler-dist/cli.js",
    ...configs,
  ], { cwd: project, env: tools.env, label: "Wrangler's config reader" });
  const line = out.split("\n").find((line) => line.startsWith("CONFIGS "));
  if (code !== 0 || line === undefined) {
    throw new CheckError(
      `Wrangler could not read the configs (${
        errorLine(out)
      }): run wrangler deploy --dry-run in the project to see why`,
    );
  }
  const read = JSON.parse(line.slice("CONFIGS ".length)) as Record<
    string,
    unknown
  >;
  const schema = JSON.parse(await Deno.readTextFile(tools.schema));
  let ok = true;
  for (const config of configs) {
    const errors = schemaErrors(schema, read[config]);
    for (const error of errors) {
      console.log(
        `wrangler-check: FAIL ${config} departs from Wrangler ${WRANGLER_VERSION}'s config-schema.json: ${error}`,
      );
    }
    if (errors.length === 0) {
      console.log(
        `  [schema] ${config} conforms to Wrangler ${WRANGLER_VERSION}'s config-schema.json`,
      );
    }
    ok &&= errors.length === 0;
  }
  return ok;
}

/** `wrangler deploy --dry-run` of each config: no warning, a bundle. */
async function checkDryRuns(
  tools: Tools,
  project: string,
  configs: string[],
): Promise<boolean> {
  let ok = true;
  for (const config of configs) {
    const outdir = `${project}/dist/${config}`;
    const { code, out } = await wrangler(tools, project, [
      "deploy",
      "--dry-run",
      "--outdir",
      outdir,
      "-c",
      config,
    ]);
    const problems = wranglerProblems(out);
    for (const problem of problems) {
      console.log(
        `wrangler-check: FAIL wrangler deploy -c ${config}: ${problem}`,
      );
    }
    if (code !== 0 || problems.length > 0) {
      if (problems.length === 0) console.log(out);
      ok = false;
      continue;
    }
    const main = (await Deno.readTextFile(`${project}/${config}`)).match(
      /^main = "(\w+)\.ts"$/m,
    )?.[1];
    const bundle = await Deno.readTextFile(`${outdir}/${main}.js`);
    if (
      config.includes("postgres") &&
      !/(?:from |import\()\s*["']cloudflare:sockets["']/.test(bundle)
    ) {
      console.log(
        `wrangler-check: FAIL ${config}'s bundle is not postgres.js's Workers build (no cloudflare:sockets import)`,
      );
      ok = false;
      continue;
    }
    const upload = /Total Upload: [^\n]*/.exec(out)?.[0];
    console.log(
      `  [deploy --dry-run] ${config}: bundled, no warning (${upload})`,
    );
  }
  return ok;
}

/**
 * Where `wrangler dev` says it serves: the URL of its first "Ready on"
 * line (colors removed), or none before it says so. Read, not asked for:
 * the check starts it on port 0.
 *
 * @param out What Wrangler printed so far.
 * @returns The URL it is ready on, or `undefined`.
 *
 * @example
 * ```ts
 * import { readyUrl } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(readyUrl("[wrangler:info] Ready on http://127.0.0.1:41307\n"), "http://127.0.0.1:41307");
 * assert.equal(readyUrl("⎔ Starting local server...\n"), undefined);
 * ```
 */
export function readyUrl(out: string): string | undefined {
  // deno-lint-ignore no-control-regex
  const plain = out.replace(/\x1b\[[0-9;]*m/g, "");
  return /\bReady on (https?:\/\/[^\s/]+)/.exec(plain)?.[1];
}

/** A running `wrangler dev`, its output so far, and how to stop it. */
interface Dev {
  readonly url: string;
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts `wrangler dev --local` with `config`, and waits for it to say it
 * is ready, or to end.
 *
 * @returns The running server, or Wrangler's output where it ended first.
 */
async function startDev(
  tools: Tools,
  project: string,
  config: string,
): Promise<Dev | { ended: string }> {
  // Port 0, and read where it listens: a port probed free on port 0 and
  // closed is one the system may hand out to the next listen on port 0
  // (on a shared machine, another's) before Wrangler binds it.
  const child = new Deno.Command(tools.node, {
    args: [
      tools.wrangler,
      "dev",
      "--local",
      "-c",
      config,
      "--ip",
      "127.0.0.1",
      "--port",
      "0",
      "--inspector-port",
      "0",
    ],
    cwd: project,
    env: tools.env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let text = "";
  const decoder = new TextDecoder();
  const drain = (stream: ReadableStream<Uint8Array>) =>
    stream.pipeTo(
      new WritableStream({
        write: (chunk) => {
          text += decoder.decode(chunk, { stream: true });
        },
      }),
    );
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  let ended = false;
  const status = child.status.then((status) => {
    ended = true;
    return status;
  });
  const stop = async () => {
    if (!ended) child.kill("SIGTERM");
    const timer = setTimeout(() => {
      if (!ended) child.kill("SIGKILL");
    }, 10_000);
    await status;
    clearTimeout(timer);
    await drained;
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!ended && readyUrl(text) === undefined && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const url = readyUrl(text);
  if (url === undefined) {
    await stop();
    return { ended: text };
  }
  return { url, output: () => text, stop };
}

/** A request to the Worker: its status and its JSON answer. */
async function call(
  url: string,
  method: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${OPS_TOKEN}`, ...headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    json = { text };
  }
  return { status: response.status, json };
}

/** Polls an intent until its state is `state`, or the deadline passes. */
async function waitForState(
  base: string,
  id: string,
  state: string,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let intent: Record<string, unknown> = {};
  while (Date.now() < deadline) {
    const { json } = await call(`${base}/v1/intents/${id}`, "GET");
    intent = (json.intent ?? {}) as Record<string, unknown>;
    if (intent.state === state) return intent;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return intent;
}

/**
 * docs/routes.md's walk through the running Worker: a signed delivery
 * waits for the confirmation, the queued job settles the intent, and a job
 * the signer declares not sent fails it with a dead letter. Run on
 * `wrangler dev` here, and by bun-check on docs/queues.md's `bun build`
 * bundle under Miniflare.
 *
 * @param base The Worker's URL, bound with `devVars`' secrets.
 * @param prefix Its intents' ids begin so.
 * @returns What went wrong, one line each; none when it all held.
 *
 * @example
 * ```ts
 * import { walk } from "./wrangler_check.ts";
 *
 * // Against a running Worker whose bindings are devVars(signerUrl)'s:
 * async function held(base: string): Promise<boolean> {
 *   return (await walk(base, "pi")).length === 0;
 * }
 * console.assert(typeof held === "function");
 * ```
 */
export async function walk(
  base: string,
  prefix: string,
): Promise<string[]> {
  const wrong: string[] = [];
  const settle = `${prefix}_0001`;
  const notSent = `${prefix}_0003_notsent`;
  const created = await call(
    `${base}/v1/intents`,
    "POST",
    JSON.stringify({ id: settle, state: "authorized" }),
  );
  if (created.status !== 201) {
    return [
      `POST /v1/intents answered ${created.status}: ${
        JSON.stringify(created.json)
      }`,
    ];
  }
  const body = JSON.stringify({ job: { intentId: settle, kind: "settle" } });
  const delivery = await call(`${base}/v1/deliveries`, "POST", body, {
    "content-type": "application/json",
    "x-signature": await signGeneric(body, SECRET),
  });
  if (delivery.status !== 503 || delivery.json.outcome !== "retry") {
    wrong.push(
      `a signed delivery of ${settle} answered ${delivery.status} ${
        JSON.stringify(delivery.json)
      }, not 503 retry (waiting for confirmation)`,
    );
  }
  const job = await call(
    `${base}/v1/jobs`,
    "POST",
    JSON.stringify({ intentId: settle, kind: "settle" }),
  );
  if (job.status !== 202) {
    wrong.push(
      `POST /v1/jobs answered ${job.status} ${JSON.stringify(job.json)}`,
    );
  }
  await call(
    `${base}/v1/intents`,
    "POST",
    JSON.stringify({ id: notSent, state: "authorized" }),
  );
  await call(
    `${base}/v1/jobs`,
    "POST",
    JSON.stringify({ intentId: notSent, kind: "settle" }),
  );
  const failed = await waitForState(base, notSent, "failed");
  if (failed.state !== "failed" || failed.hold !== "voided") {
    wrong.push(
      `${notSent} ended ${
        JSON.stringify(failed)
      }, not failed with its hold voided`,
    );
  }
  const settled = await waitForState(base, settle, "settled");
  if (settled.state !== "settled" || settled.hold !== "captured") {
    wrong.push(
      `${settle} ended ${
        JSON.stringify(settled)
      }, not settled with its hold captured`,
    );
  }
  const letters = await call(`${base}/v1/dead-letters`, "GET");
  const items = (letters.json.items ?? []) as { intentId?: string }[];
  if (!items.some((item) => item.intentId === notSent)) {
    wrong.push(`no dead letter of ${notSent}: ${JSON.stringify(letters.json)}`);
  }
  return wrong;
}

/** Runs `walk` on a `wrangler dev` of `config`, and reports it. */
async function devWalk(
  tools: Tools,
  project: string,
  config: string,
  prefix: string,
): Promise<boolean> {
  const dev = await startDev(tools, project, config);
  if ("ended" in dev) {
    console.log(
      `wrangler-check: FAIL wrangler dev -c ${config} did not start: ${
        wranglerProblems(dev.ended)[0] ?? errorLine(dev.ended)
      }`,
    );
    return false;
  }
  let wrong: string[];
  try {
    wrong = await walk(dev.url, prefix);
    if (!/QUEUE relayer-jobs \d+\/\d+/.test(dev.output())) {
      wrong.push("wrangler dev logged no batch of the relayer-jobs queue");
    }
  } finally {
    await dev.stop();
  }
  for (const line of wrong) {
    console.log(`wrangler-check: FAIL wrangler dev -c ${config}: ${line}`);
  }
  if (wrong.length === 0) {
    console.log(
      `  [wrangler dev] ${config}: a signed delivery waited for its confirmation, its queued job settled the intent, a job not sent failed its intent with a dead letter`,
    );
  }
  return wrong.length === 0;
}

/**
 * The PostgreSQL Worker under `wrangler dev`: refused without a local
 * connection string for its Hyperdrive binding, and, given one in `.env`
 * as docs/queues.md says, the walk on the server at `url`, migrated first.
 */
async function postgresDev(
  tools: Tools,
  project: string,
  url: string,
): Promise<boolean> {
  const config = "wrangler.postgres.toml";
  const refused = await startDev(tools, project, config);
  if (!("ended" in refused)) {
    await refused.stop();
    console.log(
      `wrangler-check: FAIL wrangler dev -c ${config} started with Hyperdrive bound and no local connection string: docs/queues.md says it refuses to`,
    );
    return false;
  }
  if (
    !refused.ended.includes(
      "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE",
    )
  ) {
    console.log(
      `wrangler-check: FAIL wrangler dev -c ${config} failed, but not on the local connection string docs/queues.md names: ${
        errorLine(refused.ended)
      }`,
    );
    return false;
  }
  console.log(
    `  [wrangler dev] ${config} without a local connection string: refused, naming CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE`,
  );
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await new PostgresStore(sql).migrate();
  } finally {
    await sql.end();
  }
  await Deno.writeTextFile(
    `${project}/.env`,
    `CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE=${url}\n`,
  );
  try {
    return await devWalk(tools, project, config, "pg");
  } finally {
    await Deno.remove(`${project}/.env`);
  }
}

/** A quote of the docs, and the run it says gives it. */
export interface Refusal {
  /** The doc that quotes it, as a message names it. */
  readonly doc: string;
  /** The doc's text. */
  readonly text: string;
  /** The words the doc quotes of the refusal. */
  readonly quote: string;
}

/**
 * What is wrong with a refusal a doc quotes, as a run gave it: `undefined`
 * where the doc still quotes it (its lines joined), the run failed and its
 * output holds the quote.
 *
 * @param refusal The doc and its quote.
 * @param ran The run's exit code and output.
 * @returns What is wrong, or `undefined`.
 *
 * @example
 * ```ts
 * import { refusalUnseen } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const refusal = { doc: "docs/api.md", text: "refused (`ERR_X`)", quote: "ERR_X" };
 * assert.equal(refusalUnseen(refusal, { code: 1, out: "Error [ERR_X]: no" }), undefined);
 * assert.match(refusalUnseen(refusal, { code: 0, out: "" })!, /ran \(exit 0\)/);
 * ```
 */
export function refusalUnseen(
  refusal: Refusal,
  ran: { code: number; out: string },
): string | undefined {
  const { doc, text, quote } = refusal;
  if (!text.replace(/\s+/g, " ").includes(quote)) {
    return `${doc} no longer quotes \`${quote}\`: quote what the run says, and this check with it`;
  }
  if (ran.code === 0) {
    return `it ran (exit 0), where ${doc} says it is refused with \`${quote}\`: say what it does`;
  }
  if (!ran.out.includes(quote)) {
    return `it was refused in other words (${
      errorLine(ran.out)
    }), where ${doc} quotes \`${quote}\`: quote what it says`;
  }
  return undefined;
}

/**
 * docs/api.md's word on npm and esbuild's `postinstall` ("with npm 11.19,
 * which warns that esbuild's `postinstall`, under tsx, is not allowed to
 * run"), against the npm that installed tsx: held where that npm's
 * install printed the warning for esbuild, skipped where it is another
 * npm than the docs name.
 *
 * @param apiDocs docs/api.md's text.
 * @param npmVersion `npm --version`'s answer.
 * @param installOut What `npm install` of tsx printed.
 * @returns Whether it held, was skipped (why), or what is wrong.
 *
 * @example
 * ```ts
 * import { npmWarningVerdict } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const docs = "and with npm 11.19, which warns that esbuild's `postinstall`, under tsx, is not allowed to run";
 * const warned = "npm warn install-scripts   esbuild@0.28.2 (postinstall: node install.js)";
 * assert.deepEqual(npmWarningVerdict(docs, "11.19.1", warned), { held: true });
 * assert.ok("wrong" in npmWarningVerdict(docs, "11.19.1", "added 5 packages"));
 * assert.ok("skipped" in npmWarningVerdict(docs, "11.20.0", "added 5 packages"));
 * ```
 */
export function npmWarningVerdict(
  apiDocs: string,
  npmVersion: string,
  installOut: string,
): { held: true } | { skipped: string } | { wrong: string } {
  const line = /with npm (\d+\.\d+), which warns that esbuild's `postinstall`/
    .exec(apiDocs.replace(/\s+/g, " "))?.[1];
  if (line === undefined) {
    return {
      wrong:
        "docs/api.md no longer says which npm warns of esbuild's postinstall: say it, and this check with it",
    };
  }
  const version = npmVersion.trim();
  if (!version.startsWith(`${line}.`)) {
    return {
      skipped: `npm ${version} is not the ${line} docs/api.md names`,
    };
  }
  if (!/install-scripts.*\besbuild@[\d.]+ \(postinstall/.test(installOut)) {
    return {
      wrong:
        `npm ${version} installed tsx without the warning docs/api.md says npm ${line} gives of esbuild's postinstall (${
          errorLine(installOut)
        }): say what it does`,
    };
  }
  return { held: true };
}

/**
 * The pin docs/api.md gives `name` (`npm install --save-exact … name@x.y.z`).
 *
 * @param apiDocs docs/api.md's text.
 * @param name The npm package.
 * @returns Its version.
 * @throws {CheckError} If the docs pin none.
 *
 * @example
 * ```ts
 * import { docsPin } from "./wrangler_check.ts";
 * import assert from "node:assert/strict";
 *
 * const docs = "(`npm install --save-exact tsx@4.23.15` ran it)";
 * assert.equal(docsPin(docs, "tsx"), "4.23.15");
 * ```
 */
export function docsPin(apiDocs: string, name: string): string {
  const escaped = name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const pin = new RegExp(
    `npm install --save-exact [^\`]*?(?<![\\w@/-])${escaped}@(\\d+\\.\\d+\\.\\d+)`,
  ).exec(apiDocs)?.[1];
  if (pin === undefined) {
    throw new CheckError(
      `docs/api.md pins no ${name} (npm install --save-exact ${name}@<version>): restore it`,
    );
  }
  return pin;
}

/**
 * docs/api.md's Node service on PostgreSQL (its "From Node" block that
 * builds a `PostgresStore`), run as that section says: from the tarball,
 * `node --import tsx service.ts` on each of `nodes` (the Node on PATH, 20
 * in CI, and the pinned 22, as the docs say it ran on both), with tsx
 * and `@hono/node-server` at the docs' pins, on the server at `url`. It
 * must refuse `RELAYER_INSECURE_DEV` where others reach it naming its
 * local run, say what it serves in two lines, answer `/readyz` 200 and
 * create an intent with `OPS_TOKEN`, and on SIGTERM say it drains and
 * exit 0 (`runDocsService`). Its port is the one change (8000 is the
 * snippets').
 */
async function nodeService(
  project: string,
  url: string,
  nodes: readonly string[],
): Promise<boolean> {
  const label = "[node --import tsx]";
  const docs = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const source = apiBlock(docs, "From Node", "new PostgresStore(");
  if (source === undefined) {
    console.log(
      `wrangler-check: FAIL ${label} docs/api.md has no From Node block serving PostgresStore`,
    );
    return false;
  }
  const install = await run("npm", [
    "install",
    "--no-audit",
    "--no-fund",
    "--save-exact",
    `tsx@${docsPin(docs, "tsx")}`,
    `@hono/node-server@${docsPin(docs, "@hono/node-server")}`,
  ], {
    cwd: project,
    label: "npm install of tsx",
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
  if (install.code !== 0) {
    throw new CheckError(
      `npm install of tsx and @hono/node-server failed (${
        errorLine(install.out)
      }): check that the npm registry answers (npm ping), then run again`,
    );
  }
  let ok = true;
  const npmVersion = (await run("npm", ["--version"])).out;
  const warning = npmWarningVerdict(docs, npmVersion, install.out);
  if ("wrong" in warning) {
    ok = false;
    console.log(`wrangler-check: FAIL [npm install tsx] ${warning.wrong}`);
  } else {
    console.log(
      "held" in warning
        ? `  [npm install tsx] npm ${npmVersion.trim()} warns that esbuild's postinstall is not allowed to run, as docs/api.md says`
        : `  [npm install tsx] esbuild's postinstall warning SKIPPED: ${warning.skipped}`,
    );
  }
  ok = await storeContractUnderTsx(project, nodes) && ok;
  // docs/queues.md's migration script, run as step 3 says: by tsx, and
  // refused by Deno from the tarball.
  for (
    const [runner, refusal] of [
      [["npx", "--no-install", "tsx"], undefined],
      [
        [Deno.execPath(), "run", "--allow-net", "--allow-env"],
        "ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING",
      ],
    ] as const
  ) {
    const what = `${
      runner[0].endsWith("npx") ? "npx tsx" : "deno run"
    } migrate.mts`;
    const wrong = await migrateScriptRun(project, url, runner, refusal);
    if (wrong === undefined) {
      console.log(
        `  [${what}] docs/queues.md's migration script from the tarball: ${
          refusal
            ? `refused (${refusal}), as docs/queues.md says`
            : "exit 0, the store's schema made on a new database"
        }`,
      );
    } else {
      ok = false;
      console.log(`wrangler-check: FAIL [${what}] ${wrong}`);
    }
  }
  // As CommonJS (a package.json without "type"), tsx refuses the service.
  await Deno.mkdir(`${project}/cjs`);
  await Deno.writeTextFile(`${project}/cjs/package.json`, "{}\n");
  await Deno.writeTextFile(`${project}/cjs/service.ts`, source);
  for (const node of nodes) {
    const on = `on Node ${(await run(node, ["--version"])).out.trim()}`;
    const wrongCjs = refusalUnseen(
      {
        doc: "docs/api.md",
        text: docs,
        quote:
          'Top-level await is currently not supported with the "cjs" output format',
      },
      await run(node, ["--import", "tsx", "cjs/service.ts"], { cwd: project }),
    );
    if (wrongCjs === undefined) {
      console.log(
        `  ${label} docs/api.md's Node service as CommonJS ${on}: refused by tsx (top-level await), as docs/api.md quotes`,
      );
    } else {
      ok = false;
      console.log(
        `wrangler-check: FAIL ${label} docs/api.md's Node service as CommonJS ${on}: ${wrongCjs}`,
      );
    }
  }
  for (const node of nodes) {
    const on = `on Node ${(await run(node, ["--version"])).out.trim()}`;
    const wrong = await runDocsService({
      source,
      project,
      command: node,
      args: ["--import", "tsx"],
      databaseUrl: url,
      opsToken: OPS_TOKEN,
      webhookSecret: SECRET,
    });
    if (wrong === undefined) {
      console.log(
        `  ${label} docs/api.md's Node service from the tarball ${on}: RELAYER_INSECURE_DEV refused off loopback and with a public PUBLIC_URL, naming node --import tsx service.ts; its two start lines, /readyz 200, an intent created (201), its drain said and exit 0 on SIGTERM`,
      );
    } else {
      ok = false;
      console.log(
        `wrangler-check: FAIL ${label} docs/api.md's Node service ${on}: ${wrong}`,
      );
    }
  }
  return ok;
}

/**
 * docs/queues.md's migration script of a Worker's project (step 3), saved
 * as the file it names in `project` (the tarball and `postgres` installed)
 * and run by `runner` (`["npx", "tsx"]`, `[bun]`) on a new database of the
 * server at `url`: it must exit 0 with the store's schema made. Or, with
 * `refusal`, the run must be refused with that quote of docs/queues.md.
 *
 * @param project The Worker's project.
 * @param url The PostgreSQL server.
 * @param runner The command and its arguments before the file.
 * @param refusal A quote of docs/queues.md the run must fail with, or none.
 * @returns What went wrong, or `undefined` where it held.
 *
 * @example
 * ```ts
 * import { migrateScriptRun } from "./wrangler_check.ts";
 *
 * // With the tarball and postgres installed in the project, a server's URL:
 * async function held(project: string, url: string): Promise<boolean> {
 *   return await migrateScriptRun(project, url, ["npx", "tsx"]) === undefined;
 * }
 * console.assert(typeof held === "function");
 * ```
 */
export async function migrateScriptRun(
  project: string,
  url: string,
  runner: readonly string[],
  refusal?: string,
): Promise<string | undefined> {
  const docs = await Deno.readTextFile(`${ROOT}docs/queues.md`);
  const saved = /save\s+the\s+script\s+below\s+as\s+`([^`]+)`/.exec(docs);
  const file = saved?.[1];
  const block = saved === null
    ? undefined
    : /```ts[^\n]*\n([^]*?)^ *```/m.exec(docs.slice(saved.index))?.[1];
  if (file === undefined || block === undefined) {
    return "docs/queues.md has no migration script to save (step 3)";
  }
  await Deno.writeTextFile(
    `${project}/${file}`,
    block.replace(/^ {3}/gm, ""),
  );
  const name = `migrate_${runner.join("_").replace(/\W+/g, "_")}`.slice(0, 60);
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name}`);
    await admin.unsafe(`CREATE DATABASE ${name}`);
    const target = new URL(url);
    target.pathname = `/${name}`;
    const ran = await run(runner[0]!, [...runner.slice(1), file], {
      cwd: project,
      env: { DATABASE_URL: target.href },
      label: `${runner.join(" ")} ${file}`,
    });
    if (refusal !== undefined) {
      return refusalUnseen(
        { doc: "docs/queues.md", text: docs, quote: refusal },
        ran,
      );
    }
    if (ran.code !== 0) {
      return `it exited ${ran.code}: ${errorLine(ran.out)}`;
    }
    const db = postgres(target.href, { max: 1, onnotice: () => {} });
    try {
      const [row] = await db<{ made: string | null }[]>`
        SELECT to_regclass('relayer.intents')::text AS made`;
      return row?.made
        ? undefined
        : "it exited 0, but made no relayer.intents table";
    } finally {
      await db.end();
    }
  } finally {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

/**
 * docs/stores.md's store contract on Node: its `node:test` adapter saved as
 * `my_store_test.ts` in `project` (the tarball and tsx installed) and run
 * as it says, `node --import tsx --test my_store_test.ts`, on each of
 * `nodes`: exit 0, tests passed, none failed, and at most the one skip
 * (the commit-gap test, a `KvStore` hook). About 1.2 s a Node.
 *
 * @returns Whether it held.
 */
async function storeContractUnderTsx(
  project: string,
  nodes: readonly string[],
): Promise<boolean> {
  const label = "[node --import tsx --test] docs/stores.md's store contract";
  const docs = await Deno.readTextFile(`${ROOT}docs/stores.md`);
  const at = docs.indexOf("On Node, hand it `node:test`");
  const block = at < 0
    ? undefined
    : /```ts[^\n]*\n([^]*?)```/.exec(docs.slice(at))?.[1];
  const command = /`(node --import tsx --test my_store_test\.ts)`/.exec(
    docs.slice(at),
  )?.[1];
  if (block === undefined || command === undefined) {
    console.log(
      `wrangler-check: FAIL ${label}: docs/stores.md has no node:test adapter, or no \`node --import tsx --test my_store_test.ts\` before it`,
    );
    return false;
  }
  await Deno.writeTextFile(`${project}/my_store_test.ts`, block);
  let ok = true;
  for (const node of nodes) {
    const on = `on Node ${(await run(node, ["--version"])).out.trim()}`;
    const ran = await run(node, command.split(" ").slice(1), {
      cwd: project,
      label: `${command} ${on}`,
    });
    const count = (what: string) =>
      Number(new RegExp(`^# ${what} (\\d+)$`, "m").exec(ran.out)?.[1] ?? 0);
    const [pass, fail, skipped] = [
      count("pass"),
      count("fail"),
      count("skipped"),
    ];
    if (ran.code === 0 && pass > 0 && fail === 0 && skipped <= 1) {
      console.log(
        `  ${label} ${on}: ${pass} pass, ${skipped} skip, 0 fail, as docs/stores.md says`,
      );
    } else {
      ok = false;
      console.log(
        `wrangler-check: FAIL ${label} ${on}: exit ${ran.code}, ${pass} pass, ${fail} fail, ${skipped} skip${
          ran.code === 0 ? "" : `: ${errorLine(ran.out)}`
        }`,
      );
    }
  }
  return ok;
}

/**
 * The refusals docs/api.md and docs/queues.md quote of a Node, from the
 * Worker's project (the tarball installed): each pinned Node (22, 24 and
 * 26) refuses to strip the package's types under `node_modules`, and Node 20 (on PATH, as in
 * CI) runs no `.ts` at all and refuses Wrangler. Said skipped where the
 * Node on PATH is not 20.
 */
async function nodeRefusals(tools: Tools, project: string): Promise<boolean> {
  const api = {
    doc: "docs/api.md",
    text: await Deno.readTextFile(`${ROOT}docs/api.md`),
  };
  const queues = {
    doc: "docs/queues.md",
    text: await Deno.readTextFile(`${ROOT}docs/queues.md`),
  };
  await Deno.writeTextFile(
    `${project}/import_package.mjs`,
    'import "@relayer/poison";\n',
  );
  const pathNode = (await run("node", ["--version"])).out.trim();
  const steps: [
    string,
    Refusal,
    () => Promise<{ code: number; out: string }>,
  ][] = [];
  // Every pinned Node (22, 24, 26: node-check's, cached in this lane)
  // strips types, and every one refuses to under node_modules.
  for (const pin of PINNED_NODES) {
    const binary = nodeBinary(pin, Deno.build.os, Deno.build.arch);
    if ("missing" in binary) {
      console.log(`  [node] Node ${pin.version} SKIPPED: ${binary.missing}`);
      continue;
    }
    const node = `${await npmInstall(
      binary.name,
      pin.version,
    )}/node_modules/${binary.name}/${binary.bin}`;
    steps.push([
      `the package imported from node_modules on Node ${
        (await run(node, ["--version"])).out.trim()
      }`,
      { ...api, quote: "ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING" },
      () => run(node, ["import_package.mjs"], { cwd: project }),
    ]);
  }
  if (pathNode.startsWith("v20.")) {
    steps.push([
      `the package imported from node_modules on Node ${pathNode}`,
      { ...api, quote: "ERR_UNKNOWN_FILE_EXTENSION" },
      () => run("node", ["import_package.mjs"], { cwd: project }),
    ], [
      `wrangler ${WRANGLER_VERSION} on Node ${pathNode}`,
      { ...queues, quote: "Wrangler requires at least Node.js v22.0.0" },
      () => run("node", [tools.wrangler, "--version"], { cwd: project }),
    ]);
  } else {
    console.log(
      `  [node] Node 20's refusals SKIPPED: the Node on PATH is ${pathNode}, not 20`,
    );
  }
  let ok = true;
  for (const [what, refusal, ran] of steps) {
    const wrong = refusalUnseen(refusal, await ran());
    if (wrong === undefined) {
      console.log(
        `  [node] ${what}: refused (${refusal.quote}), as ${refusal.doc} says`,
      );
    } else {
      ok = false;
      console.log(`wrangler-check: FAIL [node] ${what}: ${wrong}`);
    }
  }
  return ok;
}

async function wranglerCheck(): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_wrangler_check_" });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    signer,
  );
  let ok = true;
  let postgresRan = false;
  try {
    const found = await installTools(dir);
    console.log(
      `wrangler-check: wrangler ${WRANGLER_VERSION} on ${
        found.node.split("/node_modules/")[1]?.split("/")[0]
      }`,
    );
    const tarball = await packTarball(dir);
    console.log(
      `wrangler-check: packed ${
        tarball.slice(tarball.lastIndexOf("/") + 1)
      } as docs/api.md says`,
    );
    const worker = await project(dir, tarball);
    await Deno.writeTextFile(
      `${worker}/.dev.vars`,
      devVars(`http://127.0.0.1:${server.addr.port}`),
    );
    const configs = ["wrangler.toml", "wrangler.postgres.toml"];
    ok = await nodeRefusals(found, worker) && ok;
    ok = await checkSchema(found, worker, configs) && ok;
    ok = await checkDryRuns(found, worker, configs) && ok;
    ok = await devWalk(found, worker, "wrangler.toml", "pi") && ok;
    ok = await withPostgres(
      "wrangler-check: postgres_worker.ts under wrangler dev",
      async (url) => {
        postgresRan = true;
        const dev = await postgresDev(found, worker, url);
        return await nodeService(worker, url, ["node", found.node]) && dev;
      },
    ) && ok;
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
  console.log(
    `wrangler-check: ${
      !ok ? "FAILED" : postgresRan ? "ok" : "ok, PostgreSQL part SKIPPED"
    }`,
  );
  return ok ? 0 : 1;
}

if (import.meta.main) {
  await runMain("wrangler-check", wranglerCheck, { args: Deno.args });
}
