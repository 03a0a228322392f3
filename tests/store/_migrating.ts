/**
 * A child process for postgres_migration_kill_test.ts: migrate() of a
 * schema, saying `start` before it and `migrated` after it, for the test
 * to SIGKILL it in between.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";

const [url, schema] = Deno.args as [string, string];
const sql = postgres(url, { max: 4, onnotice: () => {} });
const store = new PostgresStore(sql, { schema });
console.log("start");
await store.migrate();
console.log("migrated");
await sql.end();
