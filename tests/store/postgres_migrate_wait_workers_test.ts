/**
 * `PostgresStore.migrate()` that nothing answered within its `waitMs`, on
 * Cloudflare Workers: workerd keeps a refused TLS handshake's reason to its
 * own log and tells postgres.js nothing, so a client with TLS there is told
 * that workerd may have refused the server's certificate. Not a client
 * without TLS there, nor one with TLS elsewhere (its runtime names such a
 * refusal itself). Workers is told as the store tells it: by the
 * `WebSocketPair` global (or `navigator.userAgent`), defined here for the
 * call.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable, serverUpFirst } from "../_postgres.ts";
import { onHeldStore } from "../_workers_scope.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

serverUpFirst();

const WORKERD =
  "workerd may have refused the server's TLS certificate (one that does not name the host or address the client dials, or chains to no CA Cloudflare trusts), which it tells the client nothing of, ";

/**
 * The message of `migrate({ waitMs: 200 })` on a client of one connection
 * (`ssl` as given) that the caller's `reserve()` holds, with
 * `WebSocketPair` defined as Workers define it where `onWorkers`.
 */
function heldMigrate(
  ssl: false | "prefer",
  onWorkers: boolean,
): Promise<string> {
  return onHeldStore(
    { ssl, onWorkers, migrated: false },
    async (store) => {
      const error = await store.migrate({ waitMs: 200 }).then(
        () => assert.fail("migrated with its only connection held"),
        (error: Error) => error,
      );
      return error.message;
    },
  );
}

Deno.test({
  name:
    "PostgresStore.migrate() unanswered in its waitMs on Workers with TLS says workerd may have refused the certificate; without TLS there, or with TLS off Workers, it does not",
  ignore,
  fn: timeout(20_000, async () => {
    const said =
      `nothing answered within 200ms: the client's connections may all be busy (a query or a reserve() of the caller's holds them), the server may not answer (is it a PostgreSQL server this process can reach?), `;
    const onWorkersTls = await heldMigrate("prefer", true);
    assert.ok(onWorkersTls.includes(said + WORKERD), onWorkersTls);
    for (
      const [ssl, onWorkers] of [["prefer", false], [false, true]] as const
    ) {
      const message = await heldMigrate(ssl, onWorkers);
      assert.ok(
        message.includes(`${said}or the migration waits`),
        `ssl ${ssl}, on Workers ${onWorkers}: ${message}`,
      );
    }
  }),
});
