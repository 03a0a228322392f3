/**
 * PostgresStore's writes on a real server, through a relay that repeats
 * the ReadyForQuery which hands a connection to the first waiting write:
 * the ordering under which postgres.js 3.4.9 handed one connection to two
 * `reserve()`s waiting at once (the answer of a query sent ahead on it
 * read before the first `reserve()` resumed and marked it reserved).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { readyAgainRelay } from "./_ready_again_relay.ts";

Deno.test({
  name:
    "PostgresStore: two writes waiting for the pool's one connection, handed on as a pipelined answer is read before the first resumed, each get a session of their own and land",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const direct = await connect(1);
    const schema = freshSchema();
    const relay = await readyAgainRelay(await postgresUrl());
    const sql = postgres(relay.url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
    });
    try {
      await new PostgresStore(direct, { schema }).migrate();
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 2_000 });
      await sql`SELECT 1`;
      // The pool's one connection busy: both writes wait in its queue.
      const busy = sql`SELECT pg_sleep(0.3)`.execute();
      await new Promise((resolve) => setTimeout(resolve, 50));
      relay.arm();
      const writes = ["pi_a", "pi_b"].map((id) =>
        store.createIntent({ id }).then(
          (intent) => intent.state,
          (e: Error) => e.message,
        )
      );
      await busy;
      assert.deepEqual(await Promise.all(writes), ["created", "created"]);
      assert.equal(relay.repeated, 1);
      for (const id of ["pi_a", "pi_b"]) {
        const [row] = await direct.unsafe(
          `SELECT state FROM "${schema}".intents WHERE id = $1`,
          [id],
        );
        assert.equal(row?.state, "created", id);
      }
    } finally {
      await sql.end({ timeout: 1 });
      relay.close();
      await direct.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await direct.end();
    }
  }),
});
