/**
 * The service on PostgreSQL that docs/api.md ("From Node") gives a Node
 * user, bundled with `deno bundle --platform node` and run by `node`, stops
 * a start it cannot make with one line that says what was wrong, as
 * `main.ts` does: a setting `loadConfig` refuses, a database nothing
 * answers on, and a port another process holds. No stack trace, and the
 * password of `DATABASE_URL` nowhere. It says what it serves in two lines,
 * listens on 127.0.0.1 only and exits 0 on SIGTERM. The checks are `../_docs_service.ts`'s, shared with
 * the Bun service.
 *
 * @module
 */

import assert from "node:assert/strict";
import { nodeVersion } from "../../support/node_version.ts";
import { apiBlocks, docsServiceTests } from "../_docs_service.ts";

const NODE_VERSION = await nodeVersion();

docsServiceTests({
  runtime: "Node",
  ignore: NODE_VERSION === null,
  /** The `ts` block of docs/api.md's "From Node" that serves on PostgreSQL. */
  service: async () => {
    const blocks = (await apiBlocks("From Node", "From Bun"))
      .filter((code) => code.includes("PostgresStore"));
    assert.equal(blocks.length, 1, `${blocks.length} PostgreSQL services`);
    return blocks[0]!;
  },
  command: (dir, env) =>
    new Deno.Command("node", {
      args: ["service.mjs"],
      cwd: dir,
      env: { ...env, PATH: Deno.env.get("PATH") ?? "" },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }),
  inUse:
    /EADDRINUSE.*: another process holds the port \(a relayer still running\?\): stop it, or serve on another port$/,
  localRun: "node --import tsx service.ts",
});
