/**
 * What each worker process of a multi-process test reported: the JSON of
 * the last line it printed, once it exited cleanly.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * The report of each of `results` (the `output()` of a worker process):
 * fails the test, with the worker's stderr, for one that did not succeed.
 */
export function workerReports<T>(
  results: readonly Deno.CommandOutput[],
): T[] {
  const text = new TextDecoder();
  return results.map((result) => {
    assert.ok(
      result.success,
      `a worker failed:\n${text.decode(result.stderr)}`,
    );
    return JSON.parse(text.decode(result.stdout).trim().split("\n").at(-1)!);
  });
}
