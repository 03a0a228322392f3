/**
 * Brands for the stores' error classes, so that `instanceof` knows an
 * error thrown by another copy of this package (a store of one's own built
 * against another version, say) as what it is: a busy intent, a lost race
 * or a replay, never an unexpected failure. They are `Symbol.for(...)`
 * keys, shared by every copy, as the `poison` and `notSent` marks are.
 *
 * @module
 */

/** Marks `error` as carrying `key`, out of sight of JSON and enumeration. */
export function brand(error: Error, key: symbol): void {
  Object.defineProperty(error, key, { value: true });
}

/**
 * `instanceof` for a branded class: on the class itself, whether `value`
 * carries its brand (from any copy of the package); on a subclass, the
 * usual prototype test.
 */
export function isBranded(
  cls: abstract new (...args: never[]) => unknown,
  self: unknown,
  key: symbol,
  value: unknown,
): boolean {
  if (self !== cls) {
    return Function.prototype[Symbol.hasInstance].call(self, value);
  }
  return typeof value === "object" && value !== null &&
    (value as Record<symbol, unknown>)[key] === true;
}
