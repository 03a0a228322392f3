/**
 * A MemoryStore whose chosen calls the store answers busy, as PostgreSQL
 * does while another session holds the intent's lock, for as long as a
 * switch says.
 *
 * @module
 */

import { BusyError, type MemoryStore, type Store } from "../../mod.ts";

/** `memory`, its `busy` calls refused as another session's lock while `on.busy`. */
export function busyWhile(
  memory: MemoryStore,
  busy: ReadonlySet<string>,
  on: { busy: boolean },
): Store {
  return new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return on.busy && busy.has(String(key))
        ? () =>
          Promise.reject(
            new BusyError(`intent pi_0001 is locked by another session`),
          )
        : value.bind(target);
    },
  });
}
