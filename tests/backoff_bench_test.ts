/**
 * Tests of `bench/backoff_bench.ts`: each row computes what its label
 * says. The group "decide(), flat …" prices the cost of a delay far past
 * the cap, so every delivery it names must take `decide`'s retry branch
 * (a delay), not the exhausted one (a poison whose reason prints the
 * delivery number), which would price something else under the same
 * label.
 *
 * @module
 */

import assert from "node:assert/strict";
import { decide } from "../mod.ts";
import { DECIDE_DELIVERIES, ROOMY } from "../bench/backoff_bench.ts";

Deno.test("backoff_bench: decide retries at every delivery of its flat group, the cap's delay past the cap", () => {
  const error = new Error("rpc timeout");
  assert.equal(DECIDE_DELIVERIES[0], 3);
  for (const n of DECIDE_DELIVERIES) {
    const d = decide(error, n, ROOMY, { random: () => 0.5 });
    assert.equal(d.action, "retry", `decide at delivery ${n}: ${d.reason}`);
  }
  const last = DECIDE_DELIVERIES.at(-1)!;
  assert.ok(
    last > 1e9,
    `the group's last delivery is far past the cap: ${last}`,
  );
  const d = decide(error, last, ROOMY, { random: () => 0.5 });
  assert.equal(d.action === "retry" && d.delayMs, 90_000);
});
