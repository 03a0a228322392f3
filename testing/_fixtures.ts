/**
 * A fixture the store contract and the repository's own tests share.
 *
 * @module
 */

import type { DeadLetter } from "../mod.ts";

/** A dead letter for `jobId`, poisoned at `poisonedAt`: a fixture for store tests. */
export function deadLetter(jobId: string, poisonedAt: number): DeadLetter {
  return {
    jobId,
    intentId: jobId.split("/")[0]!,
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still created",
    lastError: "not authorized yet",
    poisonedAt,
  };
}
