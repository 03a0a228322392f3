/**
 * `deno task node-check` proves Node 20, so it refuses any other Node on
 * PATH before it runs anything: a stand-in `node` that answers v18.0.0
 * (first on PATH) must stop it with one line saying what it found and what
 * to do.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { NODE_MAJOR, wrongNode } from "../../support/node_version.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Runs `tools/node_check.ts` as its task does, with `dir` first on PATH. */
async function nodeCheckWithPathFirst(dir: string) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--config",
      `${ROOT}deno.json`,
      "--allow-run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "tools/node_check.ts",
    ],
    cwd: ROOT,
    env: { PATH: `${dir}:${Deno.env.get("PATH") ?? ""}` },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code, stdout: text.decode(stdout), stderr: text.decode(stderr) };
}

Deno.test({
  name:
    "node-check refuses a Node whose major is not 20, saying what it found and what to do",
  ignore: Deno.build.os === "windows", // the stand-in is a shell script
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_node_shim_" });
    try {
      await Deno.writeTextFile(
        `${dir}/node`,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo v18.0.0 && exit 0\necho 'a stand-in: must not run anything' >&2\nexit 3\n",
      );
      await Deno.chmod(`${dir}/node`, 0o755);
      const { code, stdout, stderr } = await nodeCheckWithPathFirst(dir);
      assert.equal(code, 1);
      assert.equal(stdout, "");
      assert.equal(
        stderr,
        `node-check: found Node v18.0.0 on PATH, but the module promises Node 20 and this proves it only there: install Node.js 20 (nvm install 20, or https://nodejs.org/en/download) and put it first on PATH\n`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("wrongNode() accepts Node 20 only, by its major version", () => {
  assert.equal(NODE_MAJOR, 20);
  for (const ok of ["v20.0.0", "v20.20.2", "v20.99.1-pre"]) {
    assert.equal(wrongNode(ok), null, ok);
  }
  for (
    const other of ["v18.0.0", "v2.0.0", "v200.0.0", "v22.11.0", "v21.7.3"]
  ) {
    assert.match(wrongNode(other)!, new RegExp(`^found Node ${other} on PATH`));
  }
});
