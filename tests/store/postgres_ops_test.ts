/**
 * How many round trips and statements each delivery path costs on
 * PostgresStore, on a real server, pinned exactly so a change that adds
 * one is seen. A delivery write is 2 round trips (its read; then
 * `BEGIN`, the compare-and-set check, the writes and `COMMIT` in one
 * flight); a look is 1; a write of one statement is 1 (`BEGIN`, it and
 * `COMMIT` in one flight, so that it runs at READ COMMITTED).
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";
import {
  measurePostgresPaths,
  type PostgresCounts,
} from "../../support/counting_postgres.ts";
import type { PathId } from "../../support/store_paths.ts";

// Measured on PostgreSQL 15 with postgres.js 3.4.9, statements prepared
// (each path runs once before it is measured).
const EXPECTED: Readonly<Record<PathId, PostgresCounts>> = {
  a: { roundTrips: 1, statements: 1 }, // one look
  b: { roundTrips: 5, statements: 13 }, // look; settling + write-ahead + lease (2); record + release (2)
  c: { roundTrips: 1, statements: 1 }, // one look (and the receipt)
  d: { roundTrips: 3, statements: 7 }, // look; capture + settled, checked against the lease (2)
  e: { roundTrips: 8, statements: 21 }, // b's; the re-read; void + failed + dead letter (2)
  f: { roundTrips: 3, statements: 6 }, // look; the re-read; the dead letter on the intent read (BEGIN, the check, it, COMMIT: one flight)
  g: { roundTrips: 2, statements: 4 }, // counting the delivery (BEGIN, it, COMMIT: one flight); a
};

Deno.test({
  name:
    "PostgresStore costs each delivery path the round trips and statements pinned here",
  ignore: !postgresAvailable,
  async fn() {
    const measured = await measurePostgresPaths(await postgresUrl());
    assert.deepEqual(Object.fromEntries(measured), EXPECTED);
  },
});
