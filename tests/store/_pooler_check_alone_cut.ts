/**
 * A child process for postgres_pooler_check_test.ts: migrate() through a
 * relay that ends the pooler check's second connection while postgres.js
 * reads its types (it connects again, for the check's request, and that
 * connection is held), then the first (idle, reserved by the check), so
 * the check gets no second connection in time and nothing is waiting for
 * the first when the server ends it: the check asks again once the
 * second closed, and every connection opened after it is held until
 * migrate() returns. Then a write and a read on each connection of the
 * pool. Prints how many answered, if the process lived
 * through them.
 *
 * @module
 */

import postgres from "postgres";
import { isTypeFetchLost, PostgresStore } from "../../store/postgres.ts";
import { goodbye, relayed, useThePool } from "./_cut.ts";

const [url, schema, name] = Deno.args as [string, string, string];
const admin = postgres(url, { max: 1, onnotice: () => {} });
globalThis.addEventListener("unhandledrejection", (event) => {
  if (isTypeFetchLost(event.reason)) event.preventDefault();
});

/** Ends the newest idle session of this process; whether there was one. */
const endNewest = async (): Promise<boolean> => {
  const [row] = await admin`
    SELECT count(pg_terminate_backend(pid))::int AS n FROM (
      SELECT pid FROM pg_stat_activity
      WHERE application_name = ${name} AND state = 'idle'
      ORDER BY backend_start DESC LIMIT 1) AS newest`;
  await goodbye();
  return row?.n === 1;
};

let ended = 0;
let migrated = () => {};
const untilMigrated = new Promise<void>((resolve) => migrated = resolve);
const sql = postgres(
  relayed(url, async (text, connection) => {
    if (connection === 1 && ended === 0 && text.includes("b.typarray")) {
      // The check's second connection, reading its types; the schema's
      // read opened connection 0, and the check reserved it.
      ended = await endNewest() && await endNewest() ? 2 : -1;
    } else if (connection === 2) {
      await new Promise(() => {}); // it connects again: never through
    } else if (connection > 2) {
      await untilMigrated; // the check's second ask, and any other
    }
  }),
  { max: 4, onnotice: () => {}, connection: { application_name: name } },
);
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
await store.migrate();
migrated();
const answered = await useThePool(store);
await Deno.stdout.write(
  new TextEncoder().encode(
    ended === 2
      ? `alive, ${answered} of 8 written and read\n`
      : `ended ${ended}\n`,
  ),
);
Deno.exit(0);
