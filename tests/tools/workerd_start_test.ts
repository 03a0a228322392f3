/**
 * worker-check tells a workerd that cannot run (the cache's fault: delete
 * it) from a Worker that throws while workerd loads it (the code's fault:
 * workerd's own `Uncaught …` line says what and where), and prints
 * workerd's output rather than dropping it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startFailure, workerdProblem } from "../../tools/_workerd_start.mjs";

// What workerd 1.20260730.1 printed for a `setTimeout` at module top level
// of policy/decide.ts, bundled into the example Worker.
const UNCAUGHT =
  "service core:user:: Uncaught Error: Disallowed operation called within global scope. Asynchronous I/O (ex: fetch() or connect()), setting a timeout, and generating random values are not allowed within global scope. To fix this error, perform this operation within a handler. https://developers.cloudflare.com/workers/runtime-apis/handlers/";
const MINIFLARE_ERROR = new Error(
  `The Workers runtime failed to start. There was likely a problem with the workerd binary or your configuration.\nRuntime stderr:\n${UNCAUGHT}\n  at worker.js:377:1`,
);
const LABEL = "examples/cloudflare/worker.ts, no compatibility flags";

Deno.test("startFailure() prints workerd's Uncaught line and blames the Worker's global scope, not the cache", () => {
  const printed = startFailure(
    LABEL,
    MINIFLARE_ERROR,
    [UNCAUGHT, "  at worker.js:377:1", ""],
    "2026-07-30",
  );
  assert.deepEqual(printed, [
    `worker-check: workerd's output [${LABEL}]:`,
    `  ${UNCAUGHT}`,
    "    at worker.js:377:1",
    `worker-check: the Worker failed to load [${LABEL}] (Uncaught Error: Disallowed operation called within global scope): Workers forbid timers, fetch(), random values and other I/O at module top level: find the call in the Worker's code where workerd's output above points (its line numbers are the bundle's), and make it inside a handler`,
  ]);
  assert.ok(!printed.join("\n").includes("delete"));
});

Deno.test("startFailure() reads workerd's stderr from Miniflare's error when the stream handler caught nothing", () => {
  const printed = startFailure(LABEL, MINIFLARE_ERROR, [], "2026-07-30");
  assert.equal(printed[1], `  ${UNCAUGHT}`);
  assert.match(printed.at(-1)!, /\(Uncaught Error: Disallowed operation/);
});

Deno.test("startFailure() names any other Uncaught error, and without one says to read workerd's output", () => {
  const thrown = startFailure(
    LABEL,
    new Error("The Workers runtime failed to start."),
    [
      "service core:user:: Uncaught Error: RELAYER_INSECURE_DEV is for local runs: unset it",
    ],
    "2026-07-30",
  );
  assert.equal(
    thrown.at(-1),
    `worker-check: the Worker failed to load [${LABEL}] (Uncaught Error: RELAYER_INSECURE_DEV is for local runs: unset it): fix it in the Worker's code where workerd's output above points (its line numbers are the bundle's)`,
  );
  const other = startFailure(
    LABEL,
    new Error("The Workers runtime failed to start."),
    ["workerd/server/server.c++:4123: error: unknown compatibility flag"],
    "2026-07-30",
  );
  assert.equal(
    other.at(-1),
    `worker-check: workerd did not start [${LABEL}] (workerd/server/server.c++:4123: error: unknown compatibility flag): read workerd's output above, and check the bundled Worker and the compatibility date 2026-07-30`,
  );
  assert.deepEqual(
    startFailure(LABEL, new Error("write EPIPE"), [], "2026-07-30"),
    [
      `worker-check: workerd did not start [${LABEL}] (write EPIPE): read workerd's output above, and check the bundled Worker and the compatibility date 2026-07-30`,
    ],
  );
});

Deno.test({
  name:
    "workerdProblem() says why a workerd cannot run (missing, or failing), and nothing for one that runs",
  ignore: Deno.build.os === "windows", // the stand-ins are shell scripts
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_workerd_" });
    try {
      assert.match(
        workerdProblem(`${dir}/missing`)!,
        /^spawnSync .*\/missing ENOENT$/,
      );
      const stub = async (name: string, script: string) => {
        await Deno.writeTextFile(`${dir}/${name}`, `#!/bin/sh\n${script}\n`);
        await Deno.chmod(`${dir}/${name}`, 0o755);
        return `${dir}/${name}`;
      };
      const broken = await stub(
        "broken",
        "echo 'workerd: error while loading shared libraries: libc++.so.1' >&2; exit 127",
      );
      assert.equal(
        workerdProblem(broken),
        `${broken} --version exited with 127: workerd: error while loading shared libraries: libc++.so.1`,
      );
      const runs = await stub("runs", "echo 'workerd 2026-07-30'");
      assert.equal(workerdProblem(runs), null);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
