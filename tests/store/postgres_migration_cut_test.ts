/**
 * PostgresStore.migrate() runs its migration in one `sql.begin()`
 * transaction: when the server ends that session between the
 * transaction's statements (a restart, a failover, `pg_terminate_backend`
 * during a deploy's first start), the migration must fail as the
 * connection was lost (`main.ts` tries it again), and not crash the
 * process, as postgres.js 3.4.9 does when it sends its `ROLLBACK` on the
 * closed connection. In a child process, which that crash would end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { runCut } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore.migrate() fails as the connection was lost when the server ends its transaction's session, without crashing the process, and migrates at the next try",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_migration_cut.ts", "relayer_migration_cut"),
      "alive, first failed with CONNECTION_CLOSED, 8 of 8 written and read",
    );
  }),
});
