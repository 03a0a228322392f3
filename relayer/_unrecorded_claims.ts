/**
 * The replay claims a relayer answered a delivery without recording: the
 * store busy at the delivery and again at the claim's own record (another
 * session's lock, a statement cancelled). The delivery is a retry, and
 * nothing of it landed, so its signed request is on no record: sent again
 * with a header its signature does not cover raised (QStash's
 * `Upstash-Retried`), it would be taken as a later delivery. The webhook
 * asks, and remembers such a request as used. Kept out of the relayer's
 * public interface: only the caller that passed the claim can ask, by the
 * very object it passed.
 *
 * @module
 */

import type { Claim } from "../store/store.ts";

/** Claims passed to a delivery that answered with them on no record. */
const unrecorded = new WeakSet<Claim>();

/**
 * Marks `claim` as left on no record by the delivery it was passed to.
 *
 * @param claim The claim object passed in `DeliverOptions.claim`.
 *
 * @example A delivery answered busy, its claim unused
 * ```ts
 * import { leaveUnrecorded, leftUnrecorded } from "./_unrecorded_claims.ts";
 * import assert from "node:assert/strict";
 *
 * const claim = { key: "qstash/jwt_1", now: 0, expiresAt: 300_000 };
 * leaveUnrecorded(claim);
 * assert.equal(leftUnrecorded(claim), true);
 * ```
 */
export function leaveUnrecorded(claim: Claim): void {
  unrecorded.add(claim);
}

/**
 * Whether the delivery `claim` was passed to answered with it on no record.
 *
 * @param claim The claim object passed in `DeliverOptions.claim`.
 * @returns `true` if the delivery answered without recording it.
 *
 * @example A claim no delivery left unused
 * ```ts
 * import { leftUnrecorded } from "./_unrecorded_claims.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(leftUnrecorded({ key: "v1=ab12", now: 0, expiresAt: 360_000 }), false);
 * ```
 */
export function leftUnrecorded(claim: Claim): boolean {
  return unrecorded.has(claim);
}
