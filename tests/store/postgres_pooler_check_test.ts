/**
 * PostgresStore's start-up check for a pooler in transaction mode holds
 * two connections of the client's, one idle while the other runs: when
 * the server ends the idle one then (a restart, a failover,
 * `pg_terminate_backend` at the service's start), the check must not hand
 * it back to the pool, where postgres.js 3.4.9 crashes the process at its
 * next write; nor one the server ended under the ROLLBACK of its
 * transaction. In a child process, which that crash would end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { runCut } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back a connection of its pooler check that the server ended while it sat idle, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_pooler_check_cut.ts", "relayer_pooler_cut"),
      "alive, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back a connection of its pooler check that the server ended under its ROLLBACK, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut(
        "./_pooler_check_cut.ts",
        "relayer_pooler_rollback",
        "rollback",
      ),
      "alive, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back the first connection of its pooler check that the server ended under the second's ROLLBACK, after the second found its session there, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut(
        "./_pooler_check_cut.ts",
        "relayer_pooler_first_rollback",
        "first-at-rollback",
      ),
      "alive, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() takes the server's goodbye of a connection of its pooler check ended under its ROLLBACK, so that each of a pool of two serves a write after",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut(
        "./_pooler_check_cut.ts",
        "relayer_pooler_rollback_pair",
        "rollback",
        "pair",
      ),
      "alive, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back the connection of its pooler check that the server ended while it waited in vain for a second one, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_pooler_check_alone_cut.ts", "relayer_pooler_alone"),
      "alive, 8 of 8 written and read",
    );
  }),
});
