/**
 * A fresh database of the run's server with the store migrated and
 * settings of its own (`ALTER DATABASE … SET`), for the suites of what a
 * database's settings do to the store.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { freshDatabase } from "../_postgres.ts";

/**
 * A fresh database, migrated (schema `relayer`), then given `settings`
 * (`ALTER DATABASE … SET`), with an `admin` client on it opened before
 * them, and `connect()` for clients opened after, which take them.
 */
export async function onDatabase(
  settings: Record<string, string>,
  test: (db: {
    admin: postgres.Sql;
    connect: (max?: number) => postgres.Sql;
    url: string;
  }) => Promise<void>,
): Promise<void> {
  const database = await freshDatabase();
  const admin = postgres(database.url, { max: 3, onnotice: () => {} });
  const clients: postgres.Sql[] = [];
  try {
    await new PostgresStore(admin, { schema: "relayer" }).migrate();
    const name = new URL(database.url).pathname.slice(1);
    for (const [setting, value] of Object.entries(settings)) {
      await admin.unsafe(
        `ALTER DATABASE "${name}" SET ${setting} = '${value}'`,
      );
    }
    await test({
      admin,
      url: database.url,
      connect: (max = 2) => {
        const sql = postgres(database.url, {
          max,
          onnotice: () => {},
          max_lifetime: null,
        });
        clients.push(sql);
        return sql;
      },
    });
  } finally {
    for (const sql of clients) await sql.end({ timeout: 1 });
    await admin.end({ timeout: 1 });
    await database.drop();
  }
}
