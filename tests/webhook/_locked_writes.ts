/**
 * Another database session's lock on every table of a PostgresStore's
 * schema, against writes: reads pass, and each write waits out the
 * store's `lock_timeout` and is refused busy (a `BusyError`: nothing was
 * written; retry), as a schema change or an operator's `LOCK TABLE` does.
 *
 * @module
 */

import type postgres from "postgres";

/**
 * Every table of `schema` locked against writes (reads pass) by another
 * session on `admin`, until the returned function is called.
 */
export async function lockWrites(
  admin: postgres.Sql,
  schema: string,
): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  let locked!: () => void;
  const held = new Promise<void>((resolve) => locked = resolve);
  const lock = admin.begin(async (tx) => {
    await tx.unsafe(
      `LOCK TABLE "${schema}".intents, "${schema}".holds, "${schema}".leases, "${schema}".counters, "${schema}".claims, "${schema}".dead_letters IN EXCLUSIVE MODE`,
    );
    locked();
    await released;
  });
  await held;
  return async () => {
    release();
    await lock;
  };
}
