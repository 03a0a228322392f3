/**
 * PostgresStore when the server ends a write's connection after a
 * statement of the flight failed on its own (its intent moved on, a
 * replayed claim, a lock timeout) and before the statements behind it
 * answered: the failed write must not hand that connection back to the
 * pool, where postgres.js 3.4.9 has no socket for it and crashes the
 * process from a timer at its next query (`Cannot read properties of null
 * (reading 'write')`, porsager/postgres#1154, #1208). In a child process,
 * which that crash would end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  afterFirstRead,
  connect,
  freshSchema,
  postgresAvailable,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { runCut } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore does not hand back a connection the server ended under a flight that had already failed on a statement of its own, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_flight_cut.ts", "relayer_flight_cut"),
      "alive, the write ConflictError, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore with a pool of one connection takes the server's goodbye of a connection it ended under a flight that had already failed on a statement of its own, so that the next write gets a connection",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    assert.equal(
      await runCut("./_flight_cut.ts", "relayer_flight_cut_one", "one"),
      "alive, the write ConflictError, 8 of 8 written and read",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore hands back the connection of a write its flight refused on a statement of its own: with a pool of one, the next write gets it",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const admin = await connect(1);
    const sql = await connect(1);
    const schema = freshSchema();
    try {
      const other = new PostgresStore(admin, { schema });
      await other.migrate();
      await other.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      // Another writer moves the intent between the write's read and its
      // flight: the flight's check of what the read saw fails (RL002).
      const racing = new PostgresStore(
        afterFirstRead(sql, async () => {
          await other.transition("a", {
            from: "authorized",
            to: "settling",
            version: "1",
            at: 500,
          });
        }),
        { schema, connectionWaitMs: 3000 },
      );
      await assert.rejects(
        racing.transition("a", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 600,
        }),
        ConflictError,
      );
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
      await store.createIntent({ id: "b", state: "authorized" });
      assert.equal((await store.getIntent("b"))?.state, "authorized");
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      await sql.end({ timeout: 1 });
    }
  }),
});
