/**
 * A `PostgresStore` whose client's one connection is held, in a run marked
 * as Cloudflare Workers or not, for the tests of what a store says when
 * nothing answers it there (`postgres_calls_wait_workers_test.ts`,
 * `postgres_migrate_wait_workers_test.ts`).
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { freshSchema, postgresUrl } from "./_postgres.ts";

/** How {@link onHeldStore} makes its client and store. */
export interface HeldStoreOptions {
  /** The client's `ssl`. */
  readonly ssl: false | "prefer";
  /**
   * Whether the run is marked as Workers, as the store tells it: by a
   * `WebSocketPair` global, defined while `body` runs.
   */
  readonly onWorkers: boolean;
  /** The client's `fetch_types`; true unless given. */
  readonly fetchTypes?: boolean;
  /** The store's `connectionWaitMs`; the store's default unless given. */
  readonly connectionWaitMs?: number;
  /** Whether the store is migrated before its connection is held. */
  readonly migrated: boolean;
}

/**
 * Runs `body` on a `PostgresStore` on a fresh schema over a client of one
 * connection that a `reserve()` holds, in a run marked as Workers where
 * `options.onWorkers`; then unmarks the run, releases the connection and
 * drops the schema, whatever `body` did.
 *
 * @returns What `body` returned.
 *
 * @example The message of a read on Workers
 * ```ts ignore
 * const message = await onHeldStore(
 *   { ssl: "prefer", onWorkers: true, migrated: true, connectionWaitMs: 200 },
 *   (store) => store.getIntent("pi_0001").catch((e: Error) => e.message),
 * );
 * ```
 */
export async function onHeldStore<T>(
  options: HeldStoreOptions,
  body: (store: PostgresStore) => Promise<T>,
): Promise<T> {
  const sql = postgres(await postgresUrl(), {
    max: 1,
    ssl: options.ssl,
    fetch_types: options.fetchTypes ?? true,
    onnotice: () => {},
    max_lifetime: null,
  });
  const schema = freshSchema();
  const store = new PostgresStore(sql, {
    schema,
    ...(options.connectionWaitMs === undefined
      ? {}
      : { connectionWaitMs: options.connectionWaitMs }),
  });
  if (options.migrated) await store.migrate();
  const held = await sql.reserve();
  const scope = globalThis as { WebSocketPair?: unknown };
  if (options.onWorkers) scope.WebSocketPair = function WebSocketPair() {};
  try {
    return await body(store);
  } finally {
    delete scope.WebSocketPair;
    held.release();
    store.close();
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
}
