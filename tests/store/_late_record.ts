/**
 * A send that outlives its settling, on a store: its write-ahead on
 * `pi_1`, then the queue's give-up that puts the payment in review.
 *
 * @module
 */

import type { Intent, Store } from "../../mod.ts";

/** The send's write-ahead, on `store`: the version the send read. */
export async function writtenAhead(store: Store): Promise<Intent> {
  const created = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  return await store.beginBroadcast("pi_1", created.version, 1);
}

/** A queue's give-up, on `store`: the payment goes to review. */
export async function gaveUp(store: Store, version: string): Promise<void> {
  await store.transition("pi_1", {
    from: "settling",
    to: "needs_review",
    version,
    at: 2,
  });
}
