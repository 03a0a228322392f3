/**
 * Runs a service docs/api.md gives (its "From Node" or "From Bun" block)
 * as an adopter does, from the package installed into a project of their
 * own: what wrangler-check (Node, under tsx) and bun-check (Bun) share.
 *
 * @module
 */

import { errorLine } from "./_check.ts";

/**
 * The `ts` block of docs/api.md's section `heading` (to the next `## `
 * heading) that holds `marker`.
 *
 * @param apiDocs docs/api.md's text.
 * @param heading The section's `## ` heading ("From Node").
 * @param marker What the block holds (`"new PostgresStore("`).
 * @returns The block's code, or `undefined` if there is none.
 *
 * @example
 * ```ts
 * import { apiBlock } from "./_docs_service_run.ts";
 * import assert from "node:assert/strict";
 *
 * const fence = "`".repeat(3);
 * const docs = `\n## From Bun\n\n${fence}ts\nBun.serve({});\n${fence}\n\n## Next\n`;
 * assert.equal(apiBlock(docs, "From Bun", "Bun.serve"), "Bun.serve({});\n");
 * assert.equal(apiBlock(docs, "From Node", "serve"), undefined);
 * ```
 */
export function apiBlock(
  apiDocs: string,
  heading: string,
  marker: string,
): string | undefined {
  const start = apiDocs.indexOf(`\n## ${heading}\n`);
  if (start < 0) return undefined;
  const rest = apiDocs.slice(start + heading.length + 5);
  const end = rest.indexOf("\n## ");
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```ts[^\n]*\n([^]*?)^```/gm)]
    .map((m) => m[1]!).find((code) => code.includes(marker));
}

/** How to run a docs service, and with what. */
export interface DocsServiceRun {
  /** The service's code, as docs/api.md gives it (it serves on port 8000). */
  readonly source: string;
  /** The project it runs in: the package installed there. */
  readonly project: string;
  /** The runtime. */
  readonly command: string;
  /** Its arguments, before the service's file (`service.ts`). */
  readonly args: readonly string[];
  /** Variables besides PATH, HOME, TMPDIR and the service's settings. */
  readonly env?: Record<string, string>;
  /** The PostgreSQL server. */
  readonly databaseUrl: string;
  /** The ops token it is given. */
  readonly opsToken: string;
  /** Its webhook secret. */
  readonly webhookSecret: string;
}

// Where the service listens, as docs/api.md writes it (once).
const HOST = 'const hostname = "127.0.0.1";';

/**
 * Runs the service in `run.project` as `service.ts`, on a free port of the
 * loopback (the one change to its code: 8000 is the snippets'): it must
 * say what it serves in two lines, as `deno task start` does, answer
 * `/readyz` 200, create an intent with its ops token, and on SIGTERM say
 * that it drains and that it drained, as `deno task start` does, and exit
 * 0. Before, with `RELAYER_INSECURE_DEV` set, it must refuse to start in
 * one line naming as its local run the command that runs it here
 * (`bun service.ts`, `node --import tsx service.ts`): once set to listen
 * on 0.0.0.0 (`offLoopbackRefusal`), once with a `PUBLIC_URL` others
 * reach (`loadConfig`).
 *
 * @returns What went wrong, in one line; `undefined` if it all held.
 *
 * @example
 * ```ts ignore
 * const wrong = await runDocsService({ source, project, command: "bun", args: [], databaseUrl, opsToken, webhookSecret });
 * ```
 */
export async function runDocsService(
  run: DocsServiceRun,
): Promise<string | undefined> {
  if (!run.source.includes("port: 8000,")) {
    return "it no longer serves on port 8000";
  }
  if (run.source.split(HOST).length !== 2) {
    return `it no longer says where it listens once, as ${HOST}`;
  }
  const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = free.addr.port;
  free.close();
  const source = run.source.replace("port: 8000,", `port: ${port},`);
  // A runtime's caches (tsx's) go with the project.
  await Deno.mkdir(`${run.project}/tmp`, { recursive: true });
  const command = (settings: Record<string, string>) =>
    new Deno.Command(run.command, {
      args: [...run.args, "service.ts"],
      cwd: run.project,
      env: {
        ...run.env,
        PATH: Deno.env.get("PATH") ?? "",
        HOME: Deno.env.get("HOME") ?? run.project,
        TMPDIR: `${run.project}/tmp`,
        DATABASE_URL: run.databaseUrl,
        SENDER_URL: "http://127.0.0.1:9",
        WEBHOOK_SECRET: run.webhookSecret,
        OPS_TOKEN: run.opsToken,
        ...settings,
      },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    });
  // RELAYER_INSECURE_DEV where others reach it: refused, naming this run.
  const localRun = [run.command.split("/").pop(), ...run.args, "service.ts"]
    .join(" ");
  for (
    const [where, code, settings] of [
      [
        "listening on 0.0.0.0",
        source.replace(HOST, 'const hostname = "0.0.0.0";'),
        { RELAYER_INSECURE_DEV: "1" },
      ],
      [
        "with PUBLIC_URL https://relayer.example.com",
        source,
        {
          RELAYER_INSECURE_DEV: "1",
          PUBLIC_URL: "https://relayer.example.com",
        },
      ],
    ] as const
  ) {
    await Deno.writeTextFile(`${run.project}/service.ts`, code);
    const refused = await command(settings).output();
    const err = new TextDecoder().decode(refused.stderr);
    if (
      refused.code !== 1 ||
      !/^relayer: cannot start: RELAYER_INSECURE_DEV is for local runs, and [^\n]*\n$/
        .test(err) ||
      !err.endsWith(`served on loopback (${localRun})\n`)
    ) {
      return `with RELAYER_INSECURE_DEV ${where}, it exited ${refused.code}, and its refusal did not end naming its local run (${localRun}) in one line: ${
        JSON.stringify(err.slice(-300))
      }`;
    }
  }
  await Deno.writeTextFile(`${run.project}/service.ts`, source);
  const child = command({}).spawn();
  const stdout = new Response(child.stdout).text();
  const stderr = new Response(child.stderr).text();
  const base = `http://127.0.0.1:${port}`;
  let ended = false;
  void child.status.then(() => ended = true);
  try {
    let ready = false;
    for (let i = 0; i < 150 && !ready && !ended; i++) {
      ready = await fetch(`${base}/readyz`).then(
        async (r) => (await r.body?.cancel(), r.ok),
        () => false,
      );
      if (!ready) await new Promise((r) => setTimeout(r, 200));
    }
    if (!ready) {
      if (!ended) child.kill("SIGKILL");
      await child.status;
      return `no 200 on /readyz within 30 s: ${errorLine(await stderr)}`;
    }
    const created = await fetch(`${base}/v1/intents`, {
      method: "POST",
      headers: { authorization: `Bearer ${run.opsToken}` },
      body: JSON.stringify({ id: `docs_${port}`, state: "created" }),
    });
    const answer = await created.text();
    child.kill("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const status = await Promise.race([
      child.status,
      new Promise<undefined>((r) => {
        timer = setTimeout(() => r(undefined), 15_000);
      }),
    ]);
    clearTimeout(timer);
    if (status === undefined) return "still running 15 s after SIGTERM";
    if (created.status !== 201) {
      return `POST /v1/intents answered ${created.status}: ${answer}`;
    }
    if (status.code !== 0) {
      return `exit ${status.code} on SIGTERM: ${errorLine(await stderr)}`;
    }
    const lines = (await stdout).split("\n");
    if (
      !/^relayer: .*; store PostgreSQL 127\.0\.0\.1:\d+\/\S+, no TLS$/.test(
        lines[0] ?? "",
      ) ||
      lines[1] !== `relayer: listening on ${base}/`
    ) {
      return `its start lines: ${JSON.stringify(lines.slice(0, 2))}`;
    }
    // Its drain said as deno task start says it, last (the app's own log
    // lines, "relayer intent … created", have no colon after "relayer").
    const drain = [
      "relayer: SIGTERM: draining (at most 8s)",
      "relayer: drained; PostgreSQL connections closed",
      "",
    ];
    const said = lines.slice(2).filter((line) =>
      line === "" || line.startsWith("relayer: ")
    );
    if (JSON.stringify(said) !== JSON.stringify(drain)) {
      return `its lines on SIGTERM: ${JSON.stringify(said)}, not ${
        JSON.stringify(drain)
      }`;
    }
    return undefined;
  } finally {
    if (!ended) {
      try {
        child.kill("SIGKILL");
      } catch {
        // It ended meanwhile.
      }
    }
    await child.status;
    await stdout.catch(() => {});
    await stderr.catch(() => {});
  }
}
