/**
 * The service on PostgreSQL that docs/api.md ("From Bun") gives a Bun
 * user, bundled with `deno bundle --platform node` and run by the pinned
 * Bun (`tools/bun_check.ts`'s, installed into the cache outside the
 * repository), stops a start it cannot make with one line that says what
 * was wrong, as `main.ts` and the Node service do: a setting `loadConfig`
 * refuses, a database nothing answers on, and a port another process
 * holds. No stack trace, and the password of `DATABASE_URL` nowhere.
 *
 * Where Bun cannot be installed (no npm, no registry), the suite is
 * skipped with one loud line; under `CI=true` that is an error.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { cacheRoot, npmInstall } from "../tools/_npm_cache.ts";
import { BUN_VERSION } from "../tools/bun_check.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { timeout } from "./_timeout.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The pinned Bun, or `null` (with a line saying so) where it cannot be installed outside CI. */
async function pinnedBun(): Promise<string | null> {
  try {
    const cache = await npmInstall("bun", BUN_VERSION);
    return `${cache}/node_modules/.bin/bun`;
  } catch (error) {
    const why = (error as Error).message;
    if (Deno.env.get("CI") === "true") {
      throw new Error(
        `CI=true and Bun ${BUN_VERSION} cannot be installed (${why}); the Bun service's check must run in CI`,
      );
    }
    // deno-lint-ignore no-console -- the skip must show in the run's output
    console.error(
      `\n!!! SKIPPING docs/api.md's Bun service under Bun ${BUN_VERSION}: ${why} !!!\n`,
    );
    return null;
  }
}

const BUN = await pinnedBun();

/** The one `ts` block of docs/api.md's "From Bun": the service. */
async function bunService(): Promise<string> {
  const text = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const section = text.slice(text.indexOf("\n## From Bun\n"));
  const blocks = [...section.matchAll(/^```ts[^\n]*\n([^]*?)^```/gm)];
  assert.equal(blocks.length, 1, "From Bun has one ts block");
  return blocks[0]![1]!;
}

const PASSWORD = "pw-that-must-not-show-0123";

/** docs/api.md's Bun service, bundled into `dir` (its port `port`). */
async function bundled(dir: string, port = 8000): Promise<string> {
  const service = await bunService();
  assert.match(service, /port: 8000/, "the service's port");
  await Deno.writeTextFile(
    `${dir}/service.ts`,
    service.replace("port: 8000", `port: ${port}`),
  );
  const built = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      "--platform",
      "node",
      "-o",
      `${dir}/service.mjs`,
      `${dir}/service.ts`,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(built.code, 0, new TextDecoder().decode(built.stderr));
  return `${dir}/service.mjs`;
}

/** Runs the bundled service under Bun with only `env` set; its exit code and stderr. */
async function runService(
  dir: string,
  env: Record<string, string>,
): Promise<{ code: number; err: string }> {
  const run = await new Deno.Command(BUN!, {
    args: ["run", "service.mjs"],
    cwd: dir,
    env: {
      ...env,
      PATH: Deno.env.get("PATH") ?? "",
      // Bun's own caches stay out of the repository, as in bun-check.
      BUN_INSTALL_CACHE_DIR: `${cacheRoot()}/bun-install-cache`,
      BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
      NO_COLOR: "1",
    },
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: run.code, err: new TextDecoder().decode(run.stderr) };
}

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9",
  OPS_TOKEN: "local-ops-token-0123456789",
  WEBHOOK_SECRET: "local-secret-0123456789",
};

Deno.test({
  name:
    "docs/api.md's Bun service says in one line, without a stack, why it cannot start",
  ignore: BUN === null,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_bun_" });
    try {
      await bundled(dir);
      // Nothing listens on port 1 of the loopback.
      const url = `postgres://relayer:${PASSWORD}@127.0.0.1:1/relayer`;
      const base = { ...SETTINGS, DATABASE_URL: url };
      for (
        const [what, env, said] of [
          [
            "a setting refused",
            { ...base, WEBHOOK_SECRET: "short" },
            /WEBHOOK_SECRET/,
          ],
          ["no database", base, /ECONNREFUSED|refused/],
        ] as const
      ) {
        const { code, err } = await runService(dir, env);
        assert.equal(code, 1, `${what}: exit code; stderr:\n${err}`);
        const lines = err.trimEnd().split("\n");
        assert.equal(lines.length, 1, `${what}: one line, got:\n${err}`);
        assert.match(lines[0]!, /^relayer: cannot start: /, what);
        assert.match(lines[0]!, said, what);
        assert.ok(!err.includes(PASSWORD), `${what}: the password shows`);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
});

/**
 * The local addresses of the sockets listening on TCP `port`, as Linux
 * lists them in /proc/net/tcp and tcp6 (`0100007F` is 127.0.0.1), read
 * through `cat`, as Deno asks for every permission to read them itself.
 */
async function listeningOn(port: number): Promise<string[]> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const { stdout } = await new Deno.Command("cat", {
    args: ["/proc/net/tcp", "/proc/net/tcp6"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const found: string[] = [];
  for (const row of new TextDecoder().decode(stdout).split("\n")) {
    const [, local, , state] = row.trim().split(/\s+/);
    if (state === "0A" && local?.endsWith(`:${hexPort}`)) {
      found.push(local.slice(0, local.indexOf(":")));
    }
  }
  return found;
}

Deno.test({
  name:
    "docs/api.md's Bun service listens on the loopback only, as deno task start does, and drains on SIGTERM",
  ignore: BUN === null || !postgresAvailable || Deno.build.os !== "linux",
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_bun_" });
    const database = await freshDatabase();
    const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = free.addr.port;
    free.close();
    let child: Deno.ChildProcess | undefined;
    try {
      await bundled(dir, port);
      child = new Deno.Command(BUN!, {
        args: ["run", "service.mjs"],
        cwd: dir,
        env: {
          ...SETTINGS,
          DATABASE_URL: database.url,
          PATH: Deno.env.get("PATH") ?? "",
          BUN_INSTALL_CACHE_DIR: `${cacheRoot()}/bun-install-cache`,
          BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0",
          NO_COLOR: "1",
        },
        clearEnv: true,
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      let ready = false;
      for (let i = 0; i < 200 && !ready; i++) {
        ready = await fetch(`http://127.0.0.1:${port}/readyz`)
          .then(async (r) => (await r.body?.cancel(), r.ok), () => false);
        if (!ready) await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(ready, "the service never answered /readyz on 127.0.0.1");
      assert.deepEqual(
        await listeningOn(port),
        ["0100007F"],
        "the service's listening sockets (0100007F is 127.0.0.1)",
      );
      child.kill("SIGTERM");
      const { code } = await child.status;
      child = undefined;
      assert.equal(code, 0, await stderr);
    } finally {
      if (child) {
        child.kill("SIGKILL");
        await child.status;
        await child.stderr.cancel().catch(() => {});
      }
      await database.drop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});

Deno.test({
  name:
    "docs/api.md's Bun service says in one line, without a stack, that its port is in use",
  ignore: BUN === null || !postgresAvailable,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_bun_" });
    const database = await freshDatabase();
    // Another process (a relayer still running) holds the port.
    const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      await bundled(dir, held.addr.port);
      const { code, err } = await runService(dir, {
        ...SETTINGS,
        DATABASE_URL: database.url,
      });
      assert.equal(code, 1, `exit code; stderr:\n${err}`);
      const lines = err.trimEnd().split("\n");
      assert.equal(lines.length, 1, `one line, got:\n${err}`);
      assert.match(lines[0]!, /^relayer: cannot start: .*(EADDRINUSE|in use)/);
    } finally {
      held.close();
      await database.drop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
