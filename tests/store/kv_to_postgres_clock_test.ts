/**
 * `moveKvToPostgres()`'s `now` option, checked before anything is read or
 * written: a reading no `Date` can hold (below 0, or past 8.64e15) is
 * refused as the relayer refuses it, not taken to judge the leases by.
 *
 * @module
 */

import assert from "node:assert/strict";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import type { PostgresClient } from "../../store/postgres.ts";

/** A client the move must never reach: the clock is refused first. */
const unreachable = Object.assign(
  () => {
    throw new Error("the move reached PostgreSQL");
  },
  {
    begin() {
      throw new Error("the move reached PostgreSQL");
    },
  },
) as unknown as PostgresClient;

Deno.test("moveKvToPostgres() refuses a clock reading no Date can hold (below 0, past 8.64e15) or not whole milliseconds, with a TypeError naming 'now', before it reads or writes", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    for (
      const at of [
        -1,
        -8_640_000_000_000_000,
        8_640_000_000_000_001,
        2 ** 53 - 1,
      ]
    ) {
      await assert.rejects(
        moveKvToPostgres(kv, unreachable, { now: () => at }),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          assert.equal(
            error.message,
            `Cannot move from Deno KV as 'now' must return a time a Date can hold, in whole milliseconds from 0 (1970) to 8640000000000000, as Date.now() does: it returned ${at}`,
          );
          return true;
        },
        String(at),
      );
    }
    for (const at of [1.5, Number.NaN, 2 ** 53]) {
      await assert.rejects(
        moveKvToPostgres(kv, unreachable, { now: () => at }),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          assert.match(
            error.message,
            /^Cannot move from Deno KV as 'now' must return a whole number of milliseconds/,
          );
          return true;
        },
        String(at),
      );
    }
  } finally {
    kv.close();
  }
});
