/**
 * PostgresStore on a client made with `fetch_types: false` writes through
 * `sql.begin()`: when the server ends that session between the
 * transaction's `BEGIN` and its statements (a restart, a failover,
 * `pg_terminate_backend`), the write must fail as the connection was lost
 * (it may have landed or not), within `connectionWaitMs`, and not crash
 * the process, as postgres.js 3.4.9 does when it sends its `ROLLBACK` on
 * the closed connection (porsager/postgres#1154). In a child process,
 * which that crash would end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { runCut } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false fails a write as the connection was lost when the server ends its transaction's session, without crashing the process, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_begin_cut.ts", "relayer_begin_cut"),
      "alive, the write lost the connection within connectionWaitMs (not on record), 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false answers a write as landed when the server ends its session after the store's COMMIT AND CHAIN, under postgres.js's own COMMIT",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    // Before: "it may have landed or not", though it had.
    assert.equal(
      await runCut("./_begin_cut.ts", "relayer_begin_cut", "commit"),
      "alive, the write landed within connectionWaitMs (on record), 8 of 8 written and read",
    );
  }),
});
