import assert from "node:assert/strict";
import {
  type Broadcast,
  INTENT_STATES,
  planResolution,
  type ResolvableIntent,
} from "../../mod.ts";

type Row = [
  | Partial<ResolvableIntent>
    & Pick<ResolvableIntent, "state" | "lastBroadcast">
  | null,
  string,
  string,
];

Deno.test("planResolution() follows the resolution table of the spec, text for text", () => {
  const sent: Broadcast = { outcome: "sent", txHash: "0xfeed", at: 1 };
  const notSent: Broadcast = { outcome: "not_sent", at: 1 };
  const rows: Row[] = [
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
      { state: "settling", lastBroadcast: notSent },
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
    // Beyond the spec's table: a clean last attempt does not unsend an earlier one.
    [
      { state: "settling", lastBroadcast: notSent, mayHaveSent: true },
      "review",
      "an earlier broadcast may have been sent, needs review",
    ],
    [
      { state: "settling", lastBroadcast: notSent, broadcasting: 2 },
      "review",
      "last broadcast unknown, needs review",
    ],
  ];
  for (const [partial, action, text] of rows) {
    const intent = partial &&
      { broadcasting: null, mayHaveSent: false, ...partial };
    assert.deepEqual(
      planResolution(intent),
      { action, text },
      JSON.stringify(intent),
    );
  }
});

Deno.test("planResolution() fails an intent only from settling, not sent, with nothing ever sent or in flight", () => {
  const outcomes = [null, "sent", "not_sent", "unknown"] as const;
  for (const state of INTENT_STATES) {
    for (const outcome of outcomes) {
      for (const mayHaveSent of [false, true]) {
        // 0 is a time like any other: a clock may start there.
        for (const broadcasting of [null, 0, 5]) {
          const lastBroadcast = outcome === null
            ? null
            : { outcome, txHash: "0x1", at: 0 };
          const plan = planResolution({
            state,
            lastBroadcast,
            mayHaveSent,
            broadcasting,
          });
          assert.equal(
            plan.action === "fail",
            state === "settling" && outcome === "not_sent" && !mayHaveSent &&
              broadcasting === null,
          );
        }
      }
    }
  }
});

Deno.test("planResolution() reads a missing mayHaveSent (a Store of one's own that left it out) as may have sent: review, never fail", () => {
  const intent = {
    state: "settling",
    lastBroadcast: { outcome: "not_sent", at: 0 },
    broadcasting: null,
  } as unknown as ResolvableIntent;
  assert.deepEqual(planResolution(intent), {
    action: "review",
    text: "an earlier broadcast may have been sent, needs review",
  });
  assert.equal(
    planResolution({ ...intent, mayHaveSent: false }).action,
    "fail",
  );
});
