/**
 * The mark of a policy `definePolicy` has checked and frozen, so the hot
 * path (`decide` on every failed delivery) reads its fields without
 * checking them again.
 *
 * A non-enumerable property under a private symbol, holding the policy
 * itself: reading it costs one property load and a comparison (a `WeakSet`
 * lookup hashes the object), it is invisible to
 * `Object.keys`, spreads, JSON and deep equality, and a spread copy (which
 * could then be changed) does not carry it. Another copy of this module
 * does not know the symbol, so a policy from there is simply checked again.
 *
 * @module
 */

const CHECKED: unique symbol = Symbol("@relayer/poison.checked");

/**
 * Marks a checked policy; call it before freezing. The mark's value is the
 * policy itself, so an object that merely inherits from a checked policy
 * (`Object.create(policy, …)`, whose own fields may be anything) does not
 * pass for checked: the mark it reads is its prototype's, not itself.
 */
export function markChecked(policy: object): void {
  Object.defineProperty(policy, CHECKED, { value: policy });
}

/**
 * Whether `definePolicy` checked and froze this very object. Any value may
 * be asked (`null` and `undefined` too: the answer is no), so that a
 * caller's own checks of a policy can come after this one, off the hot
 * path.
 */
export function isChecked(policy: unknown): boolean {
  return policy != null &&
    (policy as { [CHECKED]?: unknown })[CHECKED] === policy;
}
