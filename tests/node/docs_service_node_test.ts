/**
 * The service on PostgreSQL that docs/api.md ("From Node") gives a Node
 * user, bundled with `deno bundle --platform node` and run by `node`, stops
 * a start it cannot make with one line that says what was wrong, as
 * `main.ts` does: a setting `loadConfig` refuses, a database nothing
 * answers on, and a port another process holds. No stack trace, and the
 * password of `DATABASE_URL` nowhere.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { nodeVersion } from "../../support/node_version.ts";
import { freshDatabase, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const NODE_VERSION = await nodeVersion();

/** The `ts` block of docs/api.md's "From Node" that serves on PostgreSQL. */
async function nodeService(): Promise<string> {
  const text = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const start = text.indexOf("\n## From Node\n");
  const end = text.indexOf("\n## From Bun\n");
  assert.ok(start >= 0 && end > start, "no section 'From Node' in docs/api.md");
  const blocks = [
    ...text.slice(start, end).matchAll(/^```ts[^\n]*\n([^]*?)^```/gm),
  ].map((m) => m[1]!).filter((code) => code.includes("PostgresStore"));
  assert.equal(blocks.length, 1, `${blocks.length} PostgreSQL services`);
  return blocks[0]!;
}

const PASSWORD = "pw-that-must-not-show-0123";

/** docs/api.md's Node service, bundled for node into `dir` (its port `port`). */
async function bundled(dir: string, port = 8000): Promise<string> {
  const service = await nodeService();
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

/**
 * The local addresses of the sockets listening on TCP `port`, as Linux
 * lists them in /proc/net/tcp and tcp6 (`0100007F` is 127.0.0.1;
 * `00000000` and the 32 zeros of tcp6 are every interface), read through
 * `cat`, as Deno asks for every permission to read them itself.
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
    "docs/api.md's Node service says in one line, without a stack, why it cannot start",
  ignore: NODE_VERSION === null,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_node_" });
    try {
      await bundled(dir);
      // Nothing listens on port 1 of the loopback.
      const url = `postgres://relayer:${PASSWORD}@127.0.0.1:1/relayer`;
      const base = {
        SENDER_URL: "http://127.0.0.1:9",
        OPS_TOKEN: "local-ops-token-0123456789",
        WEBHOOK_SECRET: "local-secret-0123456789",
        DATABASE_URL: url,
        PATH: Deno.env.get("PATH") ?? "",
      };
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
        const run = await new Deno.Command("node", {
          args: ["service.mjs"],
          cwd: dir,
          env,
          clearEnv: true,
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).output();
        const err = new TextDecoder().decode(run.stderr);
        assert.equal(run.code, 1, `${what}: exit code; stderr:\n${err}`);
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

Deno.test({
  name:
    "docs/api.md's Node service listens on the loopback only, as deno task start does, and drains on SIGTERM",
  ignore: NODE_VERSION === null || !postgresAvailable ||
    Deno.build.os !== "linux",
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_node_" });
    const database = await freshDatabase();
    const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = free.addr.port;
    free.close();
    let child: Deno.ChildProcess | undefined;
    try {
      await bundled(dir, port);
      child = new Deno.Command("node", {
        args: ["service.mjs"],
        cwd: dir,
        env: {
          SENDER_URL: "http://127.0.0.1:9",
          OPS_TOKEN: "local-ops-token-0123456789",
          WEBHOOK_SECRET: "local-secret-0123456789",
          DATABASE_URL: database.url,
          PATH: Deno.env.get("PATH") ?? "",
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
      // Where deno task start listens: 127.0.0.1 only, not every interface.
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
    "docs/api.md's Node service says in one line, without a stack, that its port is in use",
  ignore: NODE_VERSION === null || !postgresAvailable,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_node_" });
    const database = await freshDatabase();
    // Another process (a relayer still running) holds the port.
    const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      await bundled(dir, held.addr.port);
      const run = await new Deno.Command("node", {
        args: ["service.mjs"],
        cwd: dir,
        env: {
          SENDER_URL: "http://127.0.0.1:9",
          OPS_TOKEN: "local-ops-token-0123456789",
          WEBHOOK_SECRET: "local-secret-0123456789",
          DATABASE_URL: database.url,
          PATH: Deno.env.get("PATH") ?? "",
        },
        clearEnv: true,
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(run.stderr);
      assert.equal(run.code, 1, `exit code; stderr:\n${err}`);
      const lines = err.trimEnd().split("\n");
      assert.equal(lines.length, 1, `one line, got:\n${err}`);
      assert.match(lines[0]!, /^relayer: cannot start: .*EADDRINUSE/);
    } finally {
      held.close();
      await database.drop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
