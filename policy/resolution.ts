/**
 * What to do with the intent once its job is poisoned. Poison is not
 * failure: the intent store is the only truth, so the plan follows the
 * state the intent is in *now*, not the job's history.
 *
 * @module
 */

import { show } from "./_validate.ts";

/**
 * The plan for a poisoned job's intent. Plain data; the relayer acts on it.
 * - `drop`: touch nothing (the relayer wrote no byte, or the intent is
 *   already past it).
 * - `fail`: void the hold, then move `settling` → `failed`. Only when the
 *   last broadcast was declared `not_sent` and no broadcast of the intent
 *   may ever have left the process: the one case where the chain is clean.
 * - `review`: move `settling` → `needs_review`; the hold stays pending,
 *   because money may have moved.
 *
 * @example Map a plan to the state it leads to
 * ```ts
 * import { planResolution, type Resolution } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const next: Record<Resolution["action"], string | null> = {
 *   drop: null,
 *   fail: "failed",
 *   review: "needs_review",
 * };
 * const sent = { outcome: "sent", txHash: "0xabc", at: 0 } as const;
 * const plan = planResolution({ state: "settling", lastBroadcast: sent, broadcasting: null, mayHaveSent: true });
 * assert.equal(next[plan.action], "needs_review");
 * assert.equal(plan.text, "last broadcast sent as 0xabc, needs review");
 * ```
 */
export type Resolution =
  | { readonly action: "drop"; readonly text: string }
  | { readonly action: "fail"; readonly text: string }
  | { readonly action: "review"; readonly text: string };

/**
 * What {@linkcode planResolution} reads of an intent: a narrow view, so the
 * pure policy names nothing of the store; the store's `Intent` fits it.
 *
 * @example An intent read from the store is resolvable
 * ```ts
 * import { MemoryStore, planResolution, type ResolvableIntent } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent: ResolvableIntent = await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * assert.deepEqual(planResolution(intent), {
 *   action: "drop",
 *   text: "job dropped, intent still authorized",
 * });
 * ```
 */
export interface ResolvableIntent {
  /** Where the payment is: `created`, `authorized`, `settling`, `settled`, `failed` or `needs_review`. */
  readonly state: string;
  /** The last broadcast on record; `null` when none was recorded. */
  readonly lastBroadcast: {
    readonly outcome: "sent" | "not_sent" | "unknown";
    readonly txHash?: string;
    readonly at?: number;
    readonly error?: string;
  } | null;
  /** When a broadcast started whose outcome is not on record; `null` when none. */
  readonly broadcasting: number | null;
  /** Whether any broadcast of this intent may have left the process. */
  readonly mayHaveSent: boolean;
}

/**
 * Plans the resolution of a poisoned job from the intent as it is now.
 *
 * @param intent The intent as just re-read from the store, or `null` if it
 * is missing.
 * @returns What to do, with the text the worker logs.
 * @throws {TypeError} If `intent` is neither an object nor `null`, or its
 * `state` is not an intent state (a record mapped wrongly must not drop
 * the job as if the payment were done).
 *
 * @example Only a clean chain fails the payment
 * ```ts
 * import { planResolution } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const settling = { state: "settling", broadcasting: null, mayHaveSent: false } as const;
 * assert.deepEqual(
 *   planResolution({ ...settling, lastBroadcast: { outcome: "not_sent", at: 0 } }),
 *   { action: "fail", text: "nothing was sent, so the intent failed" },
 * );
 * assert.deepEqual(
 *   planResolution({ ...settling, lastBroadcast: { outcome: "unknown", at: 0 }, mayHaveSent: true }),
 *   { action: "review", text: "last broadcast unknown, needs review" },
 * );
 * assert.deepEqual(planResolution(null), {
 *   action: "drop",
 *   text: "job dropped, intent not found",
 * });
 * ```
 */
export function planResolution(intent: ResolvableIntent | null): Resolution {
  if (intent === null) {
    return { action: "drop", text: "job dropped, intent not found" };
  }
  if (typeof intent !== "object") {
    throw new TypeError(
      `Cannot plan a resolution as 'intent' must be the intent as read from the store, or null when it is missing: current value is ${
        show(intent)
      }`,
    );
  }
  switch (intent.state) {
    case "created":
    case "authorized":
      // The relayer has written no byte; declaring failure is not its power.
      return {
        action: "drop",
        text: `job dropped, intent still ${intent.state}`,
      };
    case "settling": {
      const last = intent.lastBroadcast;
      if (last === null) {
        // A crash between the send and its record may have hidden a send.
        return {
          action: "review",
          text: "no broadcast on record, needs review",
        };
      }
      if (intent.broadcasting !== null) {
        // A broadcast started after the last record and never got its own.
        return {
          action: "review",
          text: "last broadcast unknown, needs review",
        };
      }
      switch (last.outcome) {
        case "not_sent":
          // Only an explicit false is clean: a field a Store of one's own
          // left out must not fail a payment whose money may have moved.
          return intent.mayHaveSent !== false
            // This attempt stayed home, but an earlier one may be on chain.
            ? {
              action: "review",
              text: "an earlier broadcast may have been sent, needs review",
            }
            : {
              action: "fail",
              text: "nothing was sent, so the intent failed",
            };
        case "sent":
          return {
            action: "review",
            text: `last broadcast sent as ${last.txHash}, needs review`,
          };
        default:
          return {
            action: "review",
            text: "last broadcast unknown, needs review",
          };
      }
    }
    case "settled":
    case "failed":
    case "needs_review":
      return {
        action: "drop",
        text: `job dropped, intent already ${intent.state}`,
      };
    default:
      // A state mapped wrongly from one's own records ("SETTLED") would
      // otherwise drop the job as if the payment were done.
      throw new TypeError(
        `Cannot plan a resolution as 'state' must be an intent state (created, authorized, settling, settled, failed, needs_review): current value is ${
          show((intent as { state?: unknown }).state)
        }`,
      );
  }
}
