/**
 * A store of one's own that does not mark its refusals, as the relayer's
 * tests of such a store make it.
 *
 * @module
 */

import { ConflictError, type Store } from "../../mod.ts";

/** `store`, but every ConflictError it throws comes back as a plain one (`refused` unset); `onCall` sees each call of a method first. */
export function unmarkingRefusals(
  store: Store,
  onCall?: (key: string | symbol, args: unknown[]) => void,
): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        onCall?.(key, args);
        try {
          return await value.apply(target, args);
        } catch (error) {
          if (error instanceof ConflictError) {
            throw new ConflictError(error.message);
          }
          throw error;
        }
      };
    },
  });
}
