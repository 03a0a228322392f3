/**
 * A child process for postgres_migration_cut_test.ts: migrate() of a new
 * schema through a relay that holds the migration's first statement (a
 * simple query, inside its transaction) until the server has ended that
 * session (idle in its transaction: pg_terminate_backend), then
 * migrate() again, then a
 * write and a read on each connection of the pool. Prints how the first
 * migration ended and how many answered, if the process lived through
 * them.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { endSession, goodbye, relayed, useThePool } from "./_cut.ts";

const [url, given, name] = Deno.args as [string, string, string];
// A schema of its own: the test's is migrated already.
const schema = `${given}_m`;
const admin = postgres(url, { max: 1, onnotice: () => {} });

let held = false;
const sql = postgres(
  relayed(url, async (text) => {
    if (!held && text.includes("DO $$")) {
      held = await endSession(admin, name, "idle in transaction");
      await goodbye();
    }
  }),
  { max: 4, onnotice: () => {}, connection: { application_name: name } },
);
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
const first = await store.migrate().then(
  () => "migrated",
  (error) => `failed with ${(error as { code?: unknown })?.code}`,
);
try {
  await store.migrate();
  const answered = await useThePool(store);
  await Deno.stdout.write(
    new TextEncoder().encode(
      held
        ? `alive, first ${first}, ${answered} of 8 written and read\n`
        : "not held\n",
    ),
  );
} finally {
  await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
Deno.exit(0);
