// Why workerd did not start, for `deno task worker-check`
// (tools/_worker_check.mjs, which runs under Node beside this file): a
// workerd that cannot be run at all is the cache's fault, and deleting the
// cache is the fix; a Worker that throws while workerd loads it (a timer,
// a fetch or a random value in global scope, which Workers forbid) is the
// code's, and workerd's own lines say where.

import { spawnSync } from "node:child_process";

/**
 * Whether the workerd binary at `path` runs: `null` if `workerd --version`
 * exits 0, else why not, in a few words.
 *
 * @param {string} path The binary Miniflare will spawn.
 * @returns {string | null}
 */
export function workerdProblem(path) {
  const result = spawnSync(path, ["--version"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 30_000,
  });
  if (result.error) return result.error.message;
  if (result.status !== 0) {
    const said = `${result.stderr}\n${result.stdout}`.split("\n")
      .map((line) => line.trim()).find(Boolean);
    return `${path} --version exited with ${result.status ?? result.signal}${
      said ? `: ${said}` : ""
    }`;
  }
  return null;
}

/**
 * What to print when workerd ran but the Worker did not start: workerd's
 * own lines (its `Uncaught …` says what the Worker did wrong, and where),
 * then one line saying what failed and what to do. The cache is not
 * blamed: workerd itself ran (`workerdProblem` said so first).
 *
 * @param {string} label Which Worker and compatibility flags.
 * @param {unknown} error What `new Miniflare(…).ready` threw.
 * @param {readonly string[]} lines What workerd printed, line by line.
 * @param {string} compatDate The compatibility date it ran with.
 * @returns {string[]} The lines to print on stderr, last the one that sums up.
 */
export function startFailure(label, error, lines, compatDate) {
  const message = String(error instanceof Error ? error.message : error);
  // Miniflare repeats workerd's stderr in its message: the fallback if the
  // stream handler caught nothing.
  const said = lines.some((line) => line.trim())
    ? lines
    : (message.split("Runtime stderr:")[1] ?? "").split("\n");
  const output = said.map((line) => line.trimEnd()).filter(Boolean);
  const uncaught = output.find((line) => /\bUncaught\b/.test(line));
  const why = uncaught
    // Its first sentence; the whole line is printed above it.
    ? uncaught.slice(uncaught.indexOf("Uncaught")).replace(/\. .*$/, "")
    : output[0] ??
      message.split("\n").map((line) => line.trim()).find(Boolean) ??
      "no message";
  const todo = !uncaught
    ? `read workerd's output above, and check the bundled Worker and the compatibility date ${compatDate}`
    : /global scope/.test(uncaught)
    ? "Workers forbid timers, fetch(), random values and other I/O at module top level: find the call in the Worker's code where workerd's output above points (its line numbers are the bundle's), and make it inside a handler"
    : "fix it in the Worker's code where workerd's output above points (its line numbers are the bundle's)";
  return [
    ...(output.length
      ? [
        `worker-check: workerd's output [${label}]:`,
        ...output.map((line) => `  ${line}`),
      ]
      : []),
    `worker-check: ${
      uncaught ? "the Worker failed to load" : "workerd did not start"
    } [${label}] (${why}): ${todo}`,
  ];
}
