import assert from "node:assert/strict";
import { DEFAULT_POLICY, describePolicy } from "../../mod.ts";

// Pub/Sub's bounds given the wrong way round (a minimum of 10 min, a
// maximum of 10 s) were refused with "'maxBackoffMs' must be an integer
// from 600000 to 600000": a range of one value, which says nothing of the
// rule it breaks (at least minBackoffMs).

Deno.test("describePolicy() says a Pub/Sub maxBackoffMs must be at least its minBackoffMs", () => {
  assert.throws(
    () =>
      describePolicy(DEFAULT_POLICY, {
        kind: "pubsub",
        minBackoffMs: 600_000,
        maxBackoffMs: 10_000,
      }),
    new RangeError(
      "Cannot read queue limits as 'maxBackoffMs' must be an integer from minBackoffMs (600000) to 600000: current value is 10000",
    ),
  );
});
