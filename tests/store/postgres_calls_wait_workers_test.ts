/**
 * A `PostgresStore` read or write that gets no answer or no connection in
 * its `connectionWaitMs`, on Cloudflare Workers with TLS, says workerd may
 * have refused the server's certificate beside the busy pool and the
 * unreachable server, as `migrate()` does: workerd keeps a refused
 * handshake's reason to its own log and tells postgres.js nothing. Not on
 * Workers without TLS, nor with TLS elsewhere. Workers is told as the store
 * tells it: by the `WebSocketPair` global, defined here for the calls.
 *
 * @module
 */

import assert from "node:assert/strict";
import { postgresAvailable, serverUpFirst } from "../_postgres.ts";
import { onHeldStore } from "../_workers_scope.ts";
import { timeout } from "../_timeout.ts";

serverUpFirst();

const WORKERD =
  "the server is unreachable, or workerd refused its TLS certificate (one not naming the host dialled, or chaining to no CA Cloudflare trusts: workerd tells the client nothing)";

/**
 * The messages of a read and a write on a store whose client's one
 * connection the caller's `reserve()` holds (`ssl` as given), with
 * `WebSocketPair` defined as Workers define it where `onWorkers`. A client
 * with `fetch_types: false` (`fetchTypes` false) writes in `sql.begin`.
 */
function heldCalls(
  ssl: false | "prefer",
  onWorkers: boolean,
  fetchTypes = true,
): Promise<{ read: string; write: string }> {
  const failed = (call: Promise<unknown>) =>
    call.then(
      () => assert.fail("answered with its only connection held"),
      (error: Error) => error.message,
    );
  return onHeldStore(
    { ssl, onWorkers, fetchTypes, connectionWaitMs: 200, migrated: true },
    async (store) => ({
      read: await failed(store.getIntent("pi_0001")),
      write: await failed(
        store.createIntent({ id: "pi_0001", state: "authorized" }),
      ),
    }),
  );
}

Deno.test({
  name:
    "PostgresStore's read and write left without an answer or a connection on Workers with TLS say workerd may have refused the certificate; without TLS there, or with TLS off Workers, they do not",
  ignore: !postgresAvailable,
  fn: timeout(20_000, async () => {
    for (const fetchTypes of [true, false]) {
      const onWorkersTls = await heldCalls("prefer", true, fetchTypes);
      for (const [call, message] of Object.entries(onWorkersTls)) {
        assert.ok(
          message.includes(`busy, ${WORKERD}; `),
          `fetch_types ${fetchTypes}, ${call}: ${message}`,
        );
      }
    }
    for (
      const [ssl, onWorkers] of [["prefer", false], [false, true]] as const
    ) {
      const said = await heldCalls(ssl, onWorkers);
      for (const [call, message] of Object.entries(said)) {
        assert.ok(
          message.includes("busy, or the server is unreachable; "),
          `ssl ${ssl}, on Workers ${onWorkers}, ${call}: ${message}`,
        );
        assert.ok(!message.includes("workerd"), message);
      }
    }
  }),
});
