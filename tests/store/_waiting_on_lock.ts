/**
 * What the tests of a statement held behind another session's lock share
 * (postgres_faults_test.ts, postgres_look_test.ts,
 * postgres_read_cancelled_test.ts, postgres_own_cancel_test.ts): the wait
 * until the store's session waits on that lock, named by its client's
 * `application_name`; and the deadlock tests' sessions
 * ({@linkcode deadlockSessions}).
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { freshDatabase, sharedClient } from "../_postgres.ts";

/**
 * The backend of the session named `applicationName` once it waits on a
 * lock (other than `except`'s: a backend ended before, on its way out),
 * read through `admin`; after 15 s (a loaded machine may take a
 * few to start the statement), an error that says `what` (`"the write"`,
 * `"the look"`) never waited.
 *
 * @example Cancel the store's write once it waits on the lock
 * ```ts ignore
 * const pid = await waitingOnLock(admin, "relayer_faults", "the write");
 * await admin`SELECT pg_cancel_backend(${pid})`;
 * ```
 */
export async function waitingOnLock(
  admin: postgres.Sql,
  applicationName: string,
  what: string,
  except?: number,
): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < 15_000) {
    const [row] = await admin`
      SELECT pid FROM pg_stat_activity
      WHERE application_name = ${applicationName}
        AND wait_event_type = 'Lock'
        AND pid IS DISTINCT FROM ${except ?? null}::int`;
    if (row) return row.pid as number;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${what} never waited on the lock`);
}

/** A store on a database of its own, beside another session, for a deadlock. */
export interface DeadlockSessions {
  /** The run's client, on another database: it watches the store's waits. */
  readonly watch: postgres.Sql;
  /** The other session: one connection, on the store's database. */
  readonly admin: postgres.Sql;
  /** The store, migrated, its sessions named `applicationName`. */
  readonly store: PostgresStore;
  /** Closes the store and both clients, and drops the database. */
  close(): Promise<void>;
}

/**
 * A migrated store on a fresh database whose sessions keep the server's
 * 1 s `deadlock_timeout` (a real wait: a shorter one may look before the
 * cycle closes on a loaded machine), and another session of one
 * connection beside it (postgres_deadlock_test.ts,
 * postgres_deadlock_resolve_test.ts).
 *
 * @example A deadlock's sessions
 * ```ts ignore
 * const { admin, store, close } = await deadlockSessions("relayer_deadlock");
 * ```
 */
export async function deadlockSessions(
  applicationName: string,
): Promise<DeadlockSessions> {
  const database = await freshDatabase();
  const watch = await sharedClient();
  const sql = postgres(database.url, {
    onnotice: () => {},
    connection: { application_name: applicationName, deadlock_timeout: "1s" },
  });
  const admin = postgres(database.url, { max: 1, onnotice: () => {} });
  const store = new PostgresStore(sql);
  const close = async () => {
    store.close();
    await sql.end();
    await admin.end();
    await database.drop();
  };
  try {
    await store.migrate();
  } catch (error) {
    await close();
    throw error;
  }
  return { watch, admin, store, close };
}
