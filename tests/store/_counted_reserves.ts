/**
 * A postgres.js client whose `reserve()`s are counted while they wait:
 * how the tests of PostgresStore's turn for `reserve()` see that no two
 * waited at once (`store/_reserve_turns.ts`).
 *
 * @module
 */

import type postgres from "postgres";

/** What {@linkcode counting} saw of the `reserve()`s made through it. */
export interface ReservesSeen {
  /** How many are waiting now. */
  waiting: number;
  /** How many waited at once, at most (set it to 0 to count afresh). */
  most: number;
  /** How many were made. */
  made: number;
}

/** `sql`, its `reserve()`s counted in `seen`; otherwise the client itself. */
export function counting(
  sql: postgres.Sql,
): { client: postgres.Sql; seen: ReservesSeen } {
  const seen = { waiting: 0, most: 0, made: 0 };
  const client = new Proxy(sql, {
    get(target, key, receiver) {
      if (key !== "reserve") return Reflect.get(target, key, receiver);
      return () => {
        seen.made++;
        seen.most = Math.max(seen.most, ++seen.waiting);
        return target.reserve().finally(() => seen.waiting--);
      };
    },
  });
  return { client, seen };
}
