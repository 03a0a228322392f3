/**
 * Every entry point deno.json exports is named where the docs list the
 * package's entry points: README.md's "Entry points:" line, and the
 * `package.json` docs/api.md ("From Node") has a Node project pack the
 * clone into, whose `exports` must be deno.json's, or an import of the
 * missing one fails in that project.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const config = JSON.parse(
  await Deno.readTextFile(new URL("deno.json", ROOT)),
) as { exports: Record<string, string> };

Deno.test("README.md's entry points line names every entry point deno.json exports", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const start = readme.indexOf("Entry points:");
  assert.ok(start >= 0, "README.md has no line beginning 'Entry points:'");
  // The list runs to the end of its sentence.
  const list = readme.slice(start, readme.indexOf(".\n", start));
  const named = new Set(
    [...list.matchAll(/`([^`]+)`/g)].map(([, name]) =>
      name!.replace(/^@relayer\/poison/, "")
    ),
  );
  const missing = Object.keys(config.exports)
    .map((path) => path.replace(/^\./, ""))
    .filter((path) => !named.has(path));
  assert.deepEqual(missing, [], `README.md's entry points line: ${list}`);
});

Deno.test("docs/api.md's package.json for npm exports what deno.json exports", async () => {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const blocks = [...api.matchAll(/```json\n([\s\S]*?)```/g)]
    .map(([, text]) => JSON.parse(text!) as { exports?: unknown })
    .filter((json) => json.exports !== undefined);
  assert.equal(blocks.length, 1, "docs/api.md's package.json blocks");
  assert.deepEqual(blocks[0]!.exports, config.exports);
});

Deno.test("CI lints and renders the docs of every entry point deno.json exports, and deno task check checks each", async () => {
  const entries = Object.values(config.exports).map((file) =>
    file.replace(/^\.\//, "")
  );
  const ci = await Deno.readTextFile(new URL(".ci/run", ROOT));
  const docLines = ci.split("\n").filter((line) =>
    /^\s*(if )?"\$\{DENO\[@\]\}" doc /.test(line)
  );
  assert.equal(docLines.length, 2, `.ci/run's deno doc lines:\n${docLines}`);
  const task = (config as unknown as { tasks: { check: { command: string } } })
    .tasks.check.command;
  const lists: [string, string][] = [
    [".ci/run's deno doc --lint", docLines[0]!],
    [".ci/run's check for a raw {@inheritDoc}", docLines[1]!],
    ["deno task check", task],
  ];
  for (const [what, line] of lists) {
    const files = new Set(line.split(/\s+/));
    const missing = entries.filter((file) => !files.has(file));
    assert.deepEqual(missing, [], `${what} leaves out: ${line}`);
  }
});

Deno.test("README.md's Deno Deploy line says main.ts is deployed from a clone, as deno.json publishes no main.ts", async () => {
  const { publish } = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", ROOT)),
  ) as { publish: { include: string[] } };
  assert.ok(
    !publish.include.includes("main.ts"),
    "deno.json now publishes main.ts: README.md's Deploy line can drop 'From a clone'",
  );
  const readme = (await Deno.readTextFile(new URL("README.md", ROOT)))
    .replace(/\s+/g, " ");
  const deploy = readme.slice(readme.indexOf("**Deno Deploy + QStash.**"));
  assert.match(
    deploy.slice(0, deploy.indexOf("(docs/routes.md")),
    /From a clone \(`main\.ts` is not in the package\)/,
  );
});

Deno.test("docs/api.md has the clone's package.json removed once packed, as Deno then looks for the npm imports in node_modules and the clone's tasks fail", async () => {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const text = [...api.matchAll(/```json\n([\s\S]*?)```/g)]
    .map(([, block]) => block!)
    .find((block) => JSON.parse(block).exports !== undefined);
  assert.ok(text, "docs/api.md gives no package.json for the tarball");
  const dir = await Deno.makeTempDir({ prefix: "relayer_pack_" });
  try {
    for (const file of ["deno.json", "deno.lock"]) {
      await Deno.copyFile(new URL(file, ROOT), `${dir}/${file}`);
    }
    await Deno.writeTextFile(
      `${dir}/x.ts`,
      'import { utf8ToBytes } from "@noble/hashes/utils.js";\nutf8ToBytes("x");\n',
    );
    const run = async () => {
      const { success, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--quiet", "x.ts"],
        cwd: dir,
        env: { NO_COLOR: "1" },
        stdout: "null",
        stderr: "piped",
      }).output();
      return { success, stderr: new TextDecoder().decode(stderr) };
    };
    assert.equal(
      (await run()).success,
      true,
      "x.ts fails without package.json",
    );
    await Deno.writeTextFile(`${dir}/package.json`, text);
    const beside = await run();
    assert.equal(beside.success, false);
    const quoted = 'Could not find "@noble/hashes" in a node_modules folder';
    assert.ok(beside.stderr.includes(quoted), beside.stderr);
    assert.ok(
      api.replace(/\s+/g, " ").includes(
        `Then remove that \`package.json\` from the clone (or pack from a copy of it): while it sits beside \`deno.json\`, Deno looks for the npm imports in a \`node_modules\` folder, and the clone's tasks fail (\`${quoted}\`)`,
      ),
      "docs/api.md does not say to remove the clone's package.json once packed",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
