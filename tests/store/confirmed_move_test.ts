/**
 * `Transition.confirmed` is read by one move only: `settling` → `settled`
 * with `ledger: "capture"`, on an intent with a send in flight. Every
 * other move writes with it what it writes without it (or refuses as it
 * refuses without it), on each store.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent, Transition } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const SENT = { outcome: "sent", at: 1, txHash: "0x2" } as const;
/** A settling intent whose rescue is in flight, a tx of it on record. */
const IN_FLIGHT = {
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: SENT,
  txHashes: ["0x1", "0x2"],
  broadcasting: 2,
} as const;

/** Moves that name a tx on record as confirmed, but are not the one that reads it. */
const MOVES: readonly {
  readonly why: string;
  readonly intent: Omit<NewIntent, "id">;
  readonly change: Omit<Transition, "version" | "confirmed">;
}[] = [
  {
    why: "to review, capturing the hold",
    intent: IN_FLIGHT,
    change: { from: "settling", to: "needs_review", at: 3, ledger: "capture" },
  },
  {
    why: "out of review to settled",
    intent: { ...IN_FLIGHT, state: "needs_review" },
    change: { from: "needs_review", to: "settled", at: 3, ledger: "capture" },
  },
  {
    why: "to settled on a hold already captured",
    intent: { ...IN_FLIGHT, hold: "captured" },
    change: { from: "settling", to: "settled", at: 3 },
  },
];

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a move other than settling → settled capturing the hold writes with 'confirmed' what it writes without it`, async () => {
    const { store, close } = await backend.open();
    try {
      let n = 0;
      /** The move on a fresh copy of `intent`: the intent after, or the refusal's text. */
      const moved = async (
        intent: Omit<NewIntent, "id">,
        change: Omit<Transition, "version">,
      ) => {
        const id = `pi_${++n}`;
        const { version } = await store.createIntent({ id, ...intent });
        try {
          const { id: _, version: __, ...after } = await store.transition(
            id,
            { ...change, version },
          );
          return after;
        } catch (error) {
          return (error as Error).message.replaceAll(id, "<id>");
        }
      };
      for (const { why, intent, change } of MOVES) {
        assert.deepEqual(
          await moved(intent, { ...change, confirmed: "0x1" }),
          await moved(intent, change),
          why,
        );
      }
    } finally {
      await close();
    }
  });
}
