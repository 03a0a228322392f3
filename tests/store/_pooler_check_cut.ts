/**
 * A child process for postgres_pooler_check_test.ts: migrate() through a
 * relay that, when the pooler check's second connection opens its
 * transaction, holds it until the server has ended the first connection
 * (idle between its queries: pg_terminate_backend), then lets it
 * through; or, with `rollback` as its fourth argument, holds the second
 * connection's `ROLLBACK` until the server has ended that session; or,
 * with `first-at-rollback`, holds that `ROLLBACK` until the server has
 * ended the first connection's session (idle, found there just before by
 * the second); then a
 * write and a read on each connection of the pool. Prints how many
 * answered, if the process lived through them.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { endSession, goodbye, relayed, useThePool } from "./_cut.ts";

const [url, schema, name, cut = "idle"] = Deno.args as [
  string,
  string,
  string,
  string?,
  string?,
];
const admin = postgres(url, { max: 1, onnotice: () => {} });

let held = false;
const sql = postgres(
  relayed(url, async (text) => {
    if (held) return;
    if (cut === "rollback" && text.includes("ROLLBACK\0")) {
      // The second connection of the check, in its transaction.
      held = await endSession(admin, name, "idle in transaction");
      await goodbye();
    } else if (cut === "first-at-rollback" && text.includes("ROLLBACK\0")) {
      // The first connection of the check, idle since the second asked
      // whether its session was still there.
      held = await endSession(admin, name, "idle");
      await goodbye();
    } else if (
      cut === "idle" && /BEGIN isolation level read committed/.test(text)
    ) {
      // The first connection of the check, idle after its statement.
      held = true;
      const [row] = await admin`
        SELECT pid FROM pg_stat_activity
        WHERE application_name = ${name} AND state = 'idle'
          AND query LIKE 'SELECT pg_backend_pid() AS pid, $1::int AS one'`;
      if (row) {
        await admin`SELECT pg_terminate_backend(${row.pid as number})`;
        await goodbye();
      }
    }
  }),
  {
    // "pair": only the check's two, each needed after it.
    max: Deno.args[4] === "pair" ? 2 : 4,
    onnotice: () => {},
    connection: { application_name: name },
  },
);
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
await store.migrate();
let reserved: postgres.ReservedSql | undefined;
if (Deno.args[4] === "pair") {
  // One connection kept by a reservation: the pool's writes take the
  // other, whichever of the two the server ended.
  await goodbye();
  reserved = await sql.reserve();
  await reserved`SELECT 1`;
}
const answered = await useThePool(store);
reserved?.release();
await Deno.stdout.write(
  new TextEncoder().encode(
    held ? `alive, ${answered} of 8 written and read\n` : "not held\n",
  ),
);
Deno.exit(0);
