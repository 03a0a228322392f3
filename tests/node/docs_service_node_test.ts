/**
 * The service on PostgreSQL that docs/api.md ("From Node") gives a Node
 * user, bundled with `deno bundle --platform node` and run by `node`, stops
 * a start it cannot make with one line that says what was wrong, as
 * `main.ts` does: a setting `loadConfig` refuses, and a database nothing
 * answers on. No stack trace, and the password of `DATABASE_URL` nowhere.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { nodeVersion } from "../../support/node_version.ts";
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

Deno.test({
  name:
    "docs/api.md's Node service says in one line, without a stack, why it cannot start",
  ignore: NODE_VERSION === null,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_docs_node_" });
    try {
      await Deno.writeTextFile(`${dir}/service.ts`, await nodeService());
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
