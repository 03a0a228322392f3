import assert from "node:assert/strict";
import { type Broadcast, INTENT_STATES, planResolution } from "../../mod.ts";

Deno.test("planResolution() follows the resolution table of the spec, text for text", () => {
  const sent: Broadcast = { outcome: "sent", txHash: "0xfeed", at: 1 };
  const rows: [Parameters<typeof planResolution>[0], string, string][] = [
    [
      { state: "created", lastBroadcast: null },
      "drop",
      "job dropped, intent still created",
    ],
    [
      { state: "authorized", lastBroadcast: null },
      "drop",
      "job dropped, intent still authorized",
    ],
    [
      { state: "settling", lastBroadcast: { outcome: "not_sent", at: 1 } },
      "fail",
      "nothing was sent, so the intent failed",
    ],
    [
      { state: "settling", lastBroadcast: { outcome: "unknown", at: 1 } },
      "review",
      "last broadcast unknown, needs review",
    ],
    [
      { state: "settling", lastBroadcast: sent },
      "review",
      "last broadcast sent as 0xfeed, needs review",
    ],
    [
      { state: "settling", lastBroadcast: null },
      "review",
      "no broadcast on record, needs review",
    ],
    [
      { state: "settled", lastBroadcast: sent },
      "drop",
      "job dropped, intent already settled",
    ],
    [
      { state: "failed", lastBroadcast: null },
      "drop",
      "job dropped, intent already failed",
    ],
    [
      { state: "needs_review", lastBroadcast: sent },
      "drop",
      "job dropped, intent already needs_review",
    ],
    [null, "drop", "job dropped, intent not found"],
  ];
  for (const [intent, action, text] of rows) {
    assert.deepEqual(
      planResolution(intent),
      { action, text },
      JSON.stringify(intent),
    );
  }
});

Deno.test("planResolution() fails an intent only from settling with a declared not-sent", () => {
  const outcomes = [null, "sent", "not_sent", "unknown"] as const;
  for (const state of INTENT_STATES) {
    for (const outcome of outcomes) {
      const lastBroadcast = outcome === null
        ? null
        : { outcome, txHash: "0x1", at: 0 };
      const plan = planResolution({ state, lastBroadcast });
      assert.equal(
        plan.action === "fail",
        state === "settling" && outcome === "not_sent",
      );
    }
  }
});
