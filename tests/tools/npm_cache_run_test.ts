/**
 * `run()`, which every runtime check runs its programs with, bounds a
 * program that computes (`tsc`) by the CPU time it uses where the system
 * says (`ps`), not by the wall time a loaded machine stretches; a run
 * that runs out of wall time says the machine's load.
 *
 * @module
 */

import assert from "node:assert/strict";
import { cpuTimeMs, run } from "../../tools/_npm_cache.ts";
import { CheckError } from "../../tools/_check.ts";

const cpuKnown = await cpuTimeMs(Deno.pid) !== null;

Deno.test({
  name:
    "run() stops a program once it used its cpuTimeoutMs of CPU time, and says it was CPU time, not the machine's load",
  ignore: !cpuKnown,
  fn: async () => {
    const error = await run("sh", ["-c", "while :; do :; done"], {
      label: "a loop",
      timeoutMs: 10_000,
      cpuTimeoutMs: 1_000,
    }).then(() => null, (error: unknown) => error);
    assert.ok(error instanceof CheckError, String(error));
    assert.match(
      error.message,
      /^a loop used (\d+ms|\d+(\.\d+)?s) of CPU time, past its 1s, and was stopped \(a bound on CPU time, which a loaded machine does not stretch\): run it again/,
    );
  },
});

Deno.test("run() lets a program that waits, using no CPU, run past its cpuTimeoutMs", async () => {
  const { code } = await run("sleep", ["0.6"], {
    timeoutMs: 10_000,
    cpuTimeoutMs: 100,
  });
  assert.equal(code, 0);
});

Deno.test({
  name: "run() stopped at its wall time says the machine's load average",
  ignore: !cpuKnown,
  fn: async () => {
    const error = await run("sleep", ["5"], {
      label: "a sleep",
      timeoutMs: 200,
    })
      .then(() => null, (error: unknown) => error);
    assert.ok(error instanceof CheckError, String(error));
    assert.match(
      error.message,
      /^a sleep did not finish within 200ms and was stopped \(load average \d+\.\d on \d+ cores(: the machine was busy, which may be why)?\): run it again/,
    );
  },
});

Deno.test("cpuTimeMs() reads the CPU time a process used, and null for a process that is not there", async () => {
  if (!cpuKnown) return;
  const { code, stdout } = await new Deno.Command("sh", {
    args: ["-c", "echo $$"],
    stdout: "piped",
  }).output();
  assert.equal(code, 0);
  assert.equal(await cpuTimeMs(Number(new TextDecoder().decode(stdout))), null);
  const loop = new Deno.Command("sh", {
    args: ["-c", "while :; do :; done"],
    stdin: "null",
  }).spawn();
  try {
    let used: number | null = 0;
    const started = performance.now();
    while (used === 0 && performance.now() - started < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      used = await cpuTimeMs(loop.pid);
    }
    // ps counts whole seconds on Linux: a second of the loop's CPU shows.
    assert.ok(used !== null && used >= 1_000, `${used}`);
  } finally {
    loop.kill("SIGKILL");
    await loop.status;
  }
});
