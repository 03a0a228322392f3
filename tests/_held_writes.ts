/**
 * A store whose writes another database session's lock holds: each is
 * refused busy (a `BusyError`: nothing was written; retry), as PostgreSQL's
 * `lock_timeout` refuses a statement that waited past it on a row.
 *
 * @module
 */

import type { MemoryStore, Store } from "../mod.ts";
import { heldBySession } from "../store/_held_lock.ts";

/**
 * `memory`, every call but its reads (`get…`, `list…`, `deliveries`) and
 * those named in `landing` refused as another session's lock holds its row.
 */
export function heldWrites(
  memory: MemoryStore,
  landing: readonly string[] = [],
): Store {
  const passes = new RegExp(
    `^(${["get", "list", "deliveries", ...landing].join("|")})`,
  );
  return new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (passes.test(String(key))) return value.bind(target);
      return () =>
        Promise.reject(
          heldBySession(
            `Cannot ${
              String(key)
            } as another session holds its row past lock_timeout (see pg_locks and pg_stat_activity): nothing was written; retry`,
            new Error("canceling statement due to lock timeout"),
          ),
        );
    },
  });
}
