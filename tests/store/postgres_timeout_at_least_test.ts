/**
 * `timeoutAtLeast` (store/_postgres_schema.ts), the statement a migration
 * and the move from Deno KV run first: a role's or database's timeout
 * shorter than the bound is raised to it for that transaction alone; none
 * (0) and a longer one are kept, as is the session's setting after it.
 * A 0 raised would bound a migration (its index builds) or a move that
 * the database let run as long as it takes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { timeoutAtLeast } from "../../store/_postgres_schema.ts";
import { connect, postgresAvailable, serverUpFirst } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

serverUpFirst();

for (
  const setting of [
    "statement_timeout",
    "idle_in_transaction_session_timeout",
  ] as const
) {
  Deno.test({
    name:
      `timeoutAtLeast("${setting}", 3000) raises a shorter ${setting} to 3 s for its transaction alone, and keeps none (0), 3 s and a longer one`,
    ignore,
    fn: timeout(10_000, async () => {
      const sql = await connect(1);
      try {
        for (
          const [session, inside] of [
            ["0", "0"],
            ["300ms", "3s"],
            ["2999ms", "3s"],
            ["3s", "3s"],
            ["1min", "1min"],
          ]
        ) {
          await sql.unsafe(`SET ${setting} = '${session}'`);
          const shown = await sql.begin(async (tx) => {
            await tx.unsafe(timeoutAtLeast(setting, 3_000));
            const [row] = await tx.unsafe(`SHOW ${setting}`);
            return row?.[setting];
          });
          assert.equal(shown, inside, `${setting} = '${session}'`);
          // SET LOCAL: the session's own setting after the transaction.
          const [after] = await sql.unsafe(`SHOW ${setting}`);
          assert.equal(
            after?.[setting],
            session === "0" ? "0" : session,
            `${setting} = '${session}' after the transaction`,
          );
        }
      } finally {
        await sql.end();
      }
    }),
  });
}
