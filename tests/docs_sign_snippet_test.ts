/**
 * docs/webhook.md's signing in TypeScript ("Signing a generic delivery")
 * runs as the file the page says to save it as, under the Node on PATH
 * (Node 20 on CI, which runs no TypeScript), in a project `npm init`
 * made (CommonJS), and its delivery verifies against `createApp`: it was
 * to be saved as `.mts`, which Node 20 refused
 * (`ERR_UNKNOWN_FILE_EXTENSION`) before running a line. And it prints
 * what the route answered: it sent the delivery and said nothing, so its
 * user could not tell a retry from a 401.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../mod.ts";
import { nodeVersion } from "../support/node_version.ts";
import { createApp } from "../webhook/app.ts";
import { timeout } from "./_timeout.ts";

const NODE_VERSION = await nodeVersion();

/** The section's TypeScript block and the file name its prose gives. */
async function signingSnippet(): Promise<{ code: string; saved: string }> {
  const text = await Deno.readTextFile(
    new URL("../docs/webhook.md", import.meta.url),
  );
  const start = text.indexOf("## Signing a generic delivery");
  assert.ok(start >= 0, "docs/webhook.md lost its signing section");
  const section = text.slice(start).split(/\n#{2,3} /)[0]!;
  const block = /^```ts\b[^\n]*\n([^]*?)^```/m.exec(section);
  assert.ok(block, "no TypeScript block in the signing section");
  const prose = section.slice(0, block.index).replace(/\s+/g, " ");
  const saved = /save it as `(\.\w+)`/.exec(prose)?.[1];
  assert.ok(saved, "the section names no file to save the signing as");
  return { code: block[1]!, saved };
}

Deno.test({
  name:
    "docs/webhook.md's signing in TypeScript runs under Node as the file it says to save it as, in a CommonJS project, and its delivery verifies",
  ignore: NODE_VERSION === null,
  fn: timeout(20_000, async () => {
    const { code, saved } = await signingSnippet();
    const secret = /const secret = "([^"]+)"/.exec(code)?.[1];
    assert.ok(secret, "the snippet names no secret");
    const app = createApp({
      store: new MemoryStore(),
      sender: new ScriptedSender({}),
      webhookSecret: secret,
    });
    const answers: number[] = [];
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (request) => {
        const answer = await app.fetch(request);
        answers.push(answer.status);
        return answer;
      },
    );
    const dir = await Deno.makeTempDir({ prefix: "relayer_sign_" });
    try {
      const origin = `http://127.0.0.1:${server.addr.port}`;
      assert.match(code, /"http:\/\/localhost:8000\//);
      const file = `${dir}/sign${saved}`;
      await Deno.writeTextFile(
        file,
        code.replace("http://localhost:8000/", `${origin}/`),
      );
      // As npm init writes it: a CommonJS project.
      await Deno.writeTextFile(
        `${dir}/package.json`,
        JSON.stringify({ name: "signer", version: "1.0.0", type: "commonjs" }),
      );
      const { code: exit, stdout, stderr } = await new Deno.Command("node", {
        args: [file],
        cwd: dir,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(
        exit,
        0,
        `node ${NODE_VERSION} sign${saved}: ${
          new TextDecoder().decode(stderr)
        }`,
      );
      assert.equal(answers.length, 1);
      assert.notEqual(answers[0], 401, "the signature did not verify");
      // Its user sees what the route answered: the status, and the body.
      const shown = new TextDecoder().decode(stdout);
      assert.match(shown, new RegExp(`^${answers[0]} \\{[^]*outcome`), shown);
    } finally {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
