/**
 * A store behind an outage: every call fails while `down()` says so, as a
 * database that cannot be reached does.
 *
 * @module
 */

import type { Store } from "../mod.ts";

/** `store`, each of whose calls fails with a refused connect while `down()`. */
export function outage<S extends Store>(store: S, down: () => boolean): S {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) =>
        down()
          ? Promise.reject(new Error("connect ECONNREFUSED 10.0.0.5:5432"))
          : value.apply(target, args);
    },
  });
}
