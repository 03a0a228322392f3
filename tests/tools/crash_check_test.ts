/**
 * The crash test's overlap check (I5): every pair of sends, so a send in
 * flight at a kill, between two others, does not hide their overlap; and
 * its `--trace` flag.
 *
 * @module
 */

import assert from "node:assert/strict";
import { overlappingSends, parseOptions } from "../../tools/crash.ts";

const send = (arrivedAt: number, answeredAt: number | null) => ({
  arrivedAt,
  answeredAt,
});

Deno.test("overlappingSends() finds two sends that overlap even when a send spanning a kill lies between them", () => {
  const kills = [{ from: 150, to: 160 }];
  // 1 runs 0..100; 2 arrives at 10 and is in flight at the kill; 3 arrives
  // at 50, while 1 is in flight: a neighbours-only check skipped both pairs
  // with 2, and never compared 1 with 3.
  const sends = [send(0, 100), send(10, 200), send(50, 60)];
  assert.deepEqual(overlappingSends(sends, kills), [0, 2]);
});

Deno.test("overlappingSends() passes sends one after another, and pairs where one was in flight at a kill", () => {
  assert.equal(
    overlappingSends([send(0, 10), send(10, 20), send(25, null)], []),
    undefined,
  );
  // 2 arrives while 1 is in flight, but 1 died with the process.
  assert.equal(
    overlappingSends([send(0, null), send(50, 60)], [{ from: 20, to: 30 }]),
    undefined,
  );
});

Deno.test("parseOptions() takes --trace as a flag without a value, off unless given", () => {
  assert.equal(parseOptions(["--seed", "7"]).trace, false);
  const options = parseOptions(["--trace", "--seed", "7", "--intents=60"]);
  assert.equal(options.trace, true);
  assert.equal(options.seed, 7);
  assert.equal(options.intents, 60);
  assert.throws(() => parseOptions(["--trace=yes"]), /Unknown argument/);
});
