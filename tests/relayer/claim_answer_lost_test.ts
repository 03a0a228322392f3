/**
 * A look-only delivery (its intent already settled) on PostgresStore
 * whose replay record commits while the connection ends before its answer
 * comes back: the delivery fails as the store failed (the queue
 * redelivers, signed afresh), never as a replay of itself. In a child
 * process, beside the relay that cuts the connection.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { runCut } from "../store/_cut.ts";

Deno.test({
  name:
    "createRelayer() on PostgresStore fails a delivery whose replay record landed and whose answer was lost as the store failing, not as a replay, and refuses the same request again",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("../relayer/_claim_cut.ts", "relayer_claim_cut"),
      "first Error (it may have landed), again ReplayError",
    );
  }),
});
