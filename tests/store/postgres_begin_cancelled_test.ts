/**
 * PostgresStore when a cancel reaches the server as a write's flight
 * begins (`pg_cancel_backend`, a `statement_timeout` shorter than the
 * first query's parse, or the store's own late cancel of a read): on a
 * real server, a cancel that cuts the flight's first query before its
 * `BEGIN` ran leaves the statements pipelined behind it to run outside a
 * transaction, each on its own, and the tables refuse each (the schema's
 * guard refuses a statement marked as the store's, `WRITE_MARK`, outside
 * a transaction that set `IN_WRITE`): nothing of the write lands, and it
 * answers so.
 *
 * @module
 */

import assert from "node:assert/strict";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";

Deno.test({
  name:
    "PostgresStore never answers 'nothing was written' for a write that landed, while pg_cancel_backend hammers its session",
  ignore: !postgresAvailable,
  fn: onFreshSchema(
    { timeoutMs: 60_000 },
    async ({ admin, schema, sql, store }) => {
      const [session] = await sql<
        { pid: number }[]
      >`SELECT pg_backend_pid() AS pid`;
      const pid = session!.pid;
      let stop = false;
      const hammer = (async () => {
        while (!stop) await admin`SELECT pg_cancel_backend(${pid})`;
      })();
      const lies: string[] = [];
      // Writes whose statements ran outside their transaction and were
      // not all refused: the guard let one through.
      const outside: string[] = [];
      let refused = 0;
      try {
        // 300 writes, and on until a cancel has reached one (a loaded
        // machine may take longer to land one), 5,000 at the most.
        for (
          let i = 0;
          (i < 300 || refused === 0) && i < 5_000 && lies.length === 0;
          i++
        ) {
          const id = `pi_${i}`;
          const answer = await store.createIntent({
            id,
            state: "authorized",
            hold: "pending",
          }).then(() => null, (error: Error) => error);
          if (answer === null) continue;
          refused++;
          const rows = await admin.unsafe(
            `SELECT 1 FROM "${schema}".intents WHERE id = $1`,
            [id],
          );
          if (rows.length > 0 && /nothing was written/.test(answer.message)) {
            lies.push(`${id}: ${answer.message}`);
          }
          if (/cut the write's BEGIN/.test(answer.message)) {
            outside.push(
              `${id} (${rows.length > 0 ? "landed" : "not on record"})`,
            );
          }
        }
      } finally {
        stop = true;
        await hammer;
      }
      assert.ok(refused > 0, "no cancel reached a write");
      assert.deepEqual(lies, []);
      assert.deepEqual(outside, []);
    },
  ),
});
