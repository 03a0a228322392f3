/**
 * The PostgreSQL store, over the npm `postgres` client (postgres.js): the
 * intents where payment teams already keep them. It takes a client and
 * never opens one itself; `migrate()` creates the schema and whatever
 * tables are missing.
 *
 * ```ts ignore
 * import postgres from "postgres";
 * import { PostgresStore, reconnectBackoffS } from "@relayer/poison/postgres";
 *
 * const sql = postgres(Deno.env.get("DATABASE_URL")!, { backoff: reconnectBackoffS });
 * const store = new PostgresStore(sql);
 * await store.migrate();
 * ```
 *
 * **Isolation: READ COMMITTED, a compare-and-set in one flight.** Every
 * delivery write reads the one intent row it is about with its hold and
 * lease (one statement, outside any transaction), decides, and sends in
 * one flight `BEGIN`, a check that locks the row `FOR UPDATE` only if it is
 * still at the version read (`refuse_stale`), its lease, replay record,
 * hold, dead letter and the intent itself, and `COMMIT`. Every write of a
 * hold or a lease moves the intent's version, so the check covers all
 * three; two writers on one version queue at it, and the second finds the
 * version moved and writes nothing; `releaseLease` too, in one statement
 * that locks the intent's row first, then deletes its owner's lease row
 * and moves the version (a write decided on what was there before the
 * release, a lease it read or not, is decided again). No transaction spans two round trips
 * (see `#transaction`). Counters and replay records are single
 * `INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING` statements,
 * atomic on their own row. SERIALIZABLE would buy nothing here and cost
 * retries on false conflicts (predicate locks over index pages). Every
 * write runs in a transaction that sets the level, so a database whose
 * default is another one changes nothing; and `synchronous_commit = on`
 * where the role or database turned it off, so a write answered as landed
 * survives a server crash (any other level is kept: `local` waits for no
 * synchronous standby, as the role chose).
 * No advisory locks: a lease is a row with an expiry, which survives a
 * pooled connection (PgBouncer in transaction mode) and a crashed process.
 *
 * Row locks are always taken in one order (intent, lease, replay record,
 * hold, dead letter, counter), so two of the store's writes cannot
 * deadlock; `migrate()` takes no lock once the schema is current.
 *
 * **Two round trips per write:** the read, then the flight. A replayed
 * claim fails its statement, which aborts the transaction, so the
 * pipelined `COMMIT` rolls it back.
 *
 * @module
 */

import type postgres from "postgres";
import { ConflictError } from "./conflict_error.ts";
import { ReplayError } from "./replay_error.ts";
import {
  DURABLE_COMMIT,
  IN_WRITE,
  migrated,
  migration,
  OUTSIDE_WRITE,
  preparedEnds,
  preparedLocks,
  readOnlyReason,
  rowSecured,
  rowSecurity,
  SCHEMA_NAME,
  TABLES,
  timeoutAtLeast,
} from "./_postgres_schema.ts";
import { describeError, oneLine } from "../policy/_walk.ts";
import { assertOptionNames } from "../policy/_validate.ts";
import {
  connectionLost,
  goodbyeBeforeSent,
  serializableOnStandby,
  typeFetchLost,
} from "./_postgres_errors.ts";
import { onPoolClose, poolCloses } from "./_postgres_closes.ts";
import { plainInTurn, reserveInTurn } from "./_reserve_turns.ts";
import { heldBySession } from "./_held_lock.ts";
import { notRead, notWritten } from "./_not_written.ts";
import { readOnly } from "./_read_only.ts";
import { schemaBehind } from "./_schema_behind.ts";
import { checkedAgainstLocalhost, untrustedChain } from "./_postgres_tls.ts";
import { onWorkers } from "./_on_workers.ts";
import {
  marked,
  neverResent,
  prepareAgain,
  refusedAsStale,
  staleOnly,
} from "./_postgres_resend.ts";
import {
  deadLetterRow,
  hasNul,
  intentColumns,
  mendedBroadcast,
  ownRows,
} from "./_postgres_rows.ts";
import {
  broadcastBegun,
  broadcastRecorded,
  checkClaim,
  checkCount,
  checkCountTtl,
  checkDeadLetter,
  checkLease,
  checkMs,
  checkRecord,
  checkRelease,
  checkResetCount,
  CLAIM_GRACE_MS,
  COUNT_TTL_MS,
  countedRefusal,
  cursorAfter,
  frozenBroadcast,
  heldBy,
  type IntentRecord,
  isEarlierCount,
  isRaceLost,
  isRefusal,
  knownTxHashes,
  LATE_ATTEMPTS,
  lateBroadcastRecorded,
  lateOptions,
  leaseAfter,
  type LeaseRecord,
  markKeys,
  newIntentRecord,
  pageLimit,
  readCursor,
  transitioned,
  transitionRefusal,
  uncountedKeys,
  unkeptKey,
} from "./_rules.ts";
import type {
  Admission,
  Broadcast,
  Claim,
  DeadLetter,
  DeadLetterPage,
  HoldState,
  Intent,
  Marks,
  NewIntent,
  Store,
  StoredDeadLetter,
  Transition,
  WriteOptions,
} from "./store.ts";
import type { IntentState } from "./transitions.ts";

export { type AddressCheckedTls, clientTls } from "./_postgres_tls.ts";

/**
 * How long postgres.js waits before it connects again a connection that
 * closed, in seconds, given how many connects failed in a row (across the
 * pool, reset by one that succeeds; postgres.js counts the one that just
 * failed): from 25–50 ms, doubling, at most 0.5–1 s. postgres.js's own
 * grows as 3ⁿ/100 s to 20 s, and each connection keeps the wait it drew
 * when it closed: after a database outage of 10 s or more (a failover,
 * a restart for maintenance) the service answered 503 for up to 20 s
 * more with the database back. A
 * connect to a database that is down fails at once, so a pool of 10 tries
 * at most 20 times a second. `main.ts` gives it to its client; give it to
 * yours as postgres.js's `backoff`.
 *
 * @param retries Connects that failed in a row.
 * @param random Jitter, so instances that lost the database together do not reconnect together.
 * @returns The wait in seconds.
 *
 * @example A client that reconnects within a second of the database's return
 * ```ts ignore
 * import postgres from "postgres";
 * import { PostgresStore, reconnectBackoffS } from "@relayer/poison/postgres";
 *
 * const sql = postgres(Deno.env.get("DATABASE_URL")!, { backoff: reconnectBackoffS });
 * const store = new PostgresStore(sql);
 * ```
 *
 * @example The waits
 * ```ts
 * import { reconnectBackoffS } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * assert.equal(reconnectBackoffS(0, () => 0), 0.025); // 25 ms: the server closed it, no connect failed yet
 * assert.equal(reconnectBackoffS(1, () => 0), 0.05); // 50 ms after the first failed connect
 * assert.equal(reconnectBackoffS(20, () => 0.5), 0.75); // never over 1 s
 * ```
 */
export function reconnectBackoffS(
  retries: number,
  random: () => number = Math.random,
): number {
  return (0.5 + random() / 2) * Math.min(0.05 * 2 ** retries, 1);
}

/**
 * Whether an unhandled rejection is postgres.js's own array-types query on
 * a new connection, failed as the server ended that connection (a
 * failover, a restart, `pg_terminate_backend`), refused by PgBouncer
 * while its logins to the server fail (`08P01`, `server_login_retry`,
 * after which it closes the client), or cancelled (`57014`: a role's or
 * database's `statement_timeout` shorter than it, `pg_cancel_backend`;
 * the connection then goes on without it), or refused by a hot standby
 * whose database or role defaults to SERIALIZABLE (`0A000`: the store's
 * calls on that connection say it is a standby). postgres.js 3.4.9 drops
 * that query's promise (porsager/postgres#1192, #1223), so the failure is
 * no caller's to catch, and a runtime that ends the process on an
 * unhandled rejection (Deno, Node) ends it there. Nothing is lost: the
 * connection opens again for the query that asked for it. `main.ts`
 * prevents exactly that rejection and logs a line; a process of your own
 * with a `PostgresStore` should do the same, and let every other
 * unhandled rejection end it as before.
 *
 * @param reason The rejection's reason (`event.reason`).
 * @returns `true` only for that query's failure with the connection lost, or the query cancelled.
 *
 * @example Keep the process through a failover (Deno; on Node, `process.on("unhandledRejection")`)
 * ```ts
 * import { isTypeFetchLost } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * globalThis.addEventListener("unhandledrejection", (event) => {
 *   if (isTypeFetchLost(event.reason)) event.preventDefault();
 * });
 * // What postgres.js rejects with when the server ends the connection:
 * const lost = Object.assign(new Error("terminating connection due to administrator command"), {
 *   code: "57P01",
 *   severity: "FATAL",
 *   query: "select b.oid, b.typarray from pg_catalog.pg_type a left join pg_catalog.pg_type b on b.oid = a.typelem where a.typcategory = 'A' group by b.oid, b.typarray order by b.oid",
 * });
 * assert.equal(isTypeFetchLost(lost), true);
 * assert.equal(isTypeFetchLost(new Error("anything else")), false);
 * ```
 */
export function isTypeFetchLost(reason: unknown): boolean {
  return typeFetchLost(reason);
}

/**
 * A postgres.js client (`postgres(url)`), whatever custom types it was
 * given: the shape the constructor checks. Declared here rather than
 * imported, so this module's public types do not depend on the client's
 * version.
 *
 * @example Pass the client the service already has
 * ```ts
 * import postgres from "postgres";
 * import { type PostgresClient, PostgresStore } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * // postgres.js connects on the first query: this needs no database.
 * const sql = postgres("postgres://relayer@127.0.0.1:5432/payments", { max: 10 });
 * const client: PostgresClient = sql;
 * assert.ok(new PostgresStore(client) instanceof PostgresStore);
 * await sql.end();
 * ```
 */
export interface PostgresClient {
  /** Runs a query written as a tagged template, or builds an identifier. */
  (...args: never[]): unknown;
  /** Runs a callback in a transaction. */
  readonly begin: (...args: never[]) => Promise<unknown>;
  /** Runs a query given as text. */
  readonly unsafe: (...args: never[]) => unknown;
  /**
   * The client's options, of which the store reads the transforms, the
   * hosts, `target_session_attrs`, and the Unix socket and TLS asked for.
   */
  readonly options: {
    readonly host?: unknown;
    readonly target_session_attrs?: unknown;
    /** The Unix socket's file (`<dir>/.s.PGSQL.<port>`), where the host is a dir. */
    readonly path?: unknown;
    /** The TLS asked for (`ssl`, `?sslmode=`, `PGSSL`). */
    readonly ssl?: unknown;
    /** `direct`: TLS from the first byte, no SSLRequest. */
    readonly sslnegotiation?: unknown;
    readonly transform?: {
      readonly column?: { readonly from?: unknown };
      readonly value?: { readonly from?: unknown };
      readonly row?: { readonly from?: unknown };
    };
  };
}

/**
 * Options for {@linkcode PostgresStore}.
 *
 * @example Two services on one database
 * ```ts
 * import postgres from "postgres";
 * import { PostgresStore, type PostgresStoreOptions } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * const sql = postgres("postgres://relayer@127.0.0.1:5432/payments");
 * const eu: PostgresStoreOptions = { schema: "relayer_eu" };
 * const us: PostgresStoreOptions = { schema: "relayer_us" };
 * const stores = [new PostgresStore(sql, eu), new PostgresStore(sql, us)]; // no I/O yet
 * assert.equal(stores.length, 2);
 * // The schema is spliced into SQL as an identifier, so it must be a plain one.
 * assert.throws(() => new PostgresStore(sql, { schema: "relayer-eu" }), TypeError);
 * await sql.end();
 * ```
 */
export interface PostgresStoreOptions {
  /**
   * The schema every table of this store lives in, so several stores (or
   * test runs) share one database: a lower-case SQL identifier.
   *
   * @default {"relayer"}
   */
  readonly schema?: string;
  /**
   * How long a write waits for its read and for a connection of its own
   * before it fails (the delivery is then retried), in milliseconds; on a
   * client made with `fetch_types: false` (not safe against a failover:
   * see docs/postgres.md), for its `sql.begin()`. postgres.js 3.4.9
   * loses a `reserve()` that is waiting when a connection of the pool
   * closes (a server restart, a failover, `pg_terminate_backend`;
   * [porsager/postgres#1195](https://github.com/porsager/postgres/issues/1195)):
   * the store asks again after each close (it chains postgres.js's
   * `onclose` after the client's own), so that write is not left to
   * this bound.
   * A write's lock waits are bounded at half of it (`lock_timeout`), so a
   * write held up by another session's lock fails with nothing written, a
   * `BusyError` (as is one whose statement `statement_timeout` cancelled):
   * the relayer retries it, and never poisons a payment on it.
   *
   * @default {10000}
   */
  readonly connectionWaitMs?: number;
}

/**
 * Options of {@linkcode PostgresStore.migrate}.
 *
 * @example A start that waits 5 s at most for the migration
 * ```ts
 * import postgres from "postgres";
 * import { PostgresStore } from "@relayer/poison/postgres";
 *
 * const url = Deno.env.get("DATABASE_URL");
 * if (url !== undefined) { // runs where DATABASE_URL names a database to try it on
 *   const sql = postgres(url);
 *   const store = new PostgresStore(sql, { schema: "relayer_example" });
 *   await store.migrate({ waitMs: 5_000 });
 *   await sql.end();
 * }
 * ```
 */
export interface MigrateOptions {
  /**
   * How long `migrate()` waits for its answers before it fails, in
   * milliseconds: a connection of the client, the catalog's, the
   * migration's (its table locks are bounded at 2 s each, three tries).
   *
   * @default {20000}
   */
  readonly waitMs?: number;
}

/** How long `migrate()` waits for its answers by default, in milliseconds (as the service's start). */
const MIGRATE_WAIT_MS = 20_000;

/** The options `migrate()` reads; any other is a typo. */
const MIGRATE_OPTIONS: readonly string[] = Object.keys(
  { waitMs: true } satisfies Record<keyof MigrateOptions, true>,
);

/** The options `PostgresStore` reads; any other is a typo. */
const POSTGRES_STORE_OPTIONS: readonly string[] = Object.keys(
  { schema: true, connectionWaitMs: true } satisfies Record<
    keyof PostgresStoreOptions,
    true
  >,
);

type Sql = postgres.Sql | postgres.TransactionSql;
type Transaction = postgres.ReservedSql | postgres.TransactionSql;
/** A write's body: it builds its statements on `tx` and hands them to `commit`. */
type Work<T> = (
  tx: Transaction,
  commit: (
    writes: readonly postgres.PendingQuery<postgres.Row[]>[],
  ) => Promise<postgres.RowList<postgres.Row[]>[]>,
) => Promise<T>;
type Row = postgres.Row;

// What every transaction begins with (see the module documentation).
const ISOLATION = "isolation level read committed";
// And what it runs first: its COMMIT answers once its WAL is on disk,
// whatever the role's `synchronous_commit` (`off` is raised to `on`; any
// other level kept: see `DURABLE_COMMIT`).
const DURABLE = DURABLE_COMMIT;

// The SQLSTATE of a replayed claim: raised by the schema's `refuse_replay`.
const REPLAYED = "RL001";
// The SQLSTATE of a write whose intent moved on: raised by `refuse_stale`.
const STALE = "RL002";
// Not PostgreSQL's: marks a write whose statement, prepared anew on the
// schema as it is now, was refused (see `#transaction`).
const UNFIT = "unfit";
/** How many rounds of plain queries take postgres.js's kept goodbyes, at most, and the gap between them. */
const ABSORB_ROUNDS = 20;
const ABSORB_GAP_MS = 250;
/**
 * How long the writes after a close of a connection of the pool wait, at
 * most, for the probe of `#reopenClosed` (a connect, after postgres.js's
 * reconnect backoff: `reconnectBackoffS` waits at most 1 s).
 */
const PROBE_MS = 1_000;
/** What to do about a pooler that loses prepared statements (see `#checkPooler`). */
const POOLER_FIX =
  "create the client with prepare: false (?prepare=false in DATABASE_URL), or use the pooler's session mode";
/**
 * The server's sessions, as `pg_stat_activity` reads them, but a function
 * every role may call: hardened databases revoke SELECT on the view from
 * PUBLIC, and the pooler check's questions then failed ("permission denied
 * for view pg_stat_activity"): it sought a second connection a limit
 * refused, and kept, for good, each first connection whose session it
 * could not see.
 */
const ACTIVITY = "pg_catalog.pg_stat_get_activity";
/**
 * Whether the server would refuse this client one more connection for a
 * limit: the role's `CONNECTION LIMIT`, the database's, or
 * `max_connections` less the superusers' reserve. Asked before the pooler
 * check seeks its second connection: once a `reserve()` was refused
 * (53300), postgres.js 3.4.9 did not put the first connection back in
 * service when handed back (a query after its release was refused too,
 * and its session sat idle for good). At a role limit of one, every call
 * after failed with "too many connections for role" (the service never
 * ready, though one connection serves the store).
 *
 * The server-wide count takes a session whose kind this role may not see
 * (another role's, to a role without `pg_read_all_stats`: its
 * `backend_type` reads NULL) as a client's if it is connected to a
 * database: counted by `backend_type` alone, the sessions of other roles
 * were left out, the check sought a second connection the server refused
 * ("remaining connection slots are reserved …"), and the store's first
 * write after it failed so. A background worker connected to a database
 * (autovacuum's) is counted too: the check is then skipped, never in the
 * way.
 */
const NO_ROOM = `SELECT
  (SELECT r.rolconnlimit >= 0 AND r.rolconnlimit <= (
     SELECT count(*) FROM ${ACTIVITY}(NULL) a WHERE a.usesysid = r.oid)
   FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
  OR (SELECT d.datconnlimit >= 0 AND d.datconnlimit <= (
     SELECT count(*) FROM ${ACTIVITY}(NULL) a WHERE a.datid = d.oid)
   FROM pg_catalog.pg_database d WHERE d.datname = current_database())
  OR (SELECT count(*) FROM ${ACTIVITY}(NULL) a
      WHERE a.backend_type = 'client backend'
        OR (a.backend_type IS NULL AND a.datid IS NOT NULL))
     >= current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int
  AS full`;
/**
 * PgBouncer's words when, in statement mode, it ends a client's connection
 * at a transaction's `BEGIN` (see `#checkTransactions`).
 */
const STATEMENT_MODE =
  /transaction blocks not allowed in statement pooling mode/;

/**
 * PgBouncer's words (08P01, `STATEMENT_MODE`) in `error`, one line, or
 * `undefined`. Met after the start (an operator switched the pool to
 * statement mode and reloaded it), they end a write's connection at its
 * `BEGIN`, and the write fails with the close alone ("write
 * CONNECTION_CLOSED"): postgres.js 3.4.9 keeps the pooler's words for the
 * request that opens that connection again, unsent, a read or the store's
 * probe of the pool (see `#absorb`), each a statement alone that the
 * pooler takes.
 */
function statementModeWords(error: unknown): string | undefined {
  const { code, message } = (error ?? {}) as {
    code?: unknown;
    message?: unknown;
  };
  const said = oneLine(String(message));
  return code === "08P01" && STATEMENT_MODE.test(said) ? said : undefined;
}

/** How a pool mode the store cannot write through is mended, as the start's refusal and a lost write say it. */
const STATEMENT_MODE_FIX =
  "Give the store's database or user the pooler's transaction mode (with prepare: false, ?prepare=false in DATABASE_URL) or its session mode";

/**
 * The refusal of a client behind a pooler in statement mode, `why` saying
 * what it met (see `#checkTransactions`).
 */
function statementModeRefusal(why: string, cause: unknown): Error {
  return new Error(
    `Cannot use this PostgreSQL client as ${why}: a pooler in statement mode (PgBouncer's pool_mode = statement) does so, and every write of the store is a transaction, so none would be written. ${STATEMENT_MODE_FIX}`,
    { cause },
  );
}

/**
 * The refusal of a start whose transaction lost its session under a role's
 * or database's `idle_in_transaction_session_timeout` below a second
 * (`shown`, as the server shows it): `what` could not be done (`"Cannot
 * migrate …"`), `error` the loss. Before, postgres.js's words alone
 * ("write CONNECTION_CLOSED 127.0.0.1:5432", "read ECONNRESET").
 */
function idleRefusal(what: string, shown: string, error: unknown): Error {
  return new Error(
    `${what} as the server ended its session while its transaction waited for its next message (${
      oneLine(describeError(error))
    }): the role's or database's idle_in_transaction_session_timeout is ${shown}, shorter than a round trip between a transaction's messages; raise it to 1s or more (SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'), then run migrate() again`,
    { cause: error },
  );
}

/** How long `migrate()`'s check of a pooler waits for a connection, and for each answer (see `#checkPooler`). */
const POOLER_CHECK_MS = 3_000;
/**
 * How long a migration waits for each table lock (`lock_timeout`), and how
 * many times it tries. A schema change waits for every open transaction on
 * its table (a report, a `pg_dump`, an open psql), and every read and write
 * of the table then queues behind it: bounded, a busy table holds the
 * service's live instances up for at most this long per try.
 */
const MIGRATION_LOCK_MS = 2_000;
const MIGRATION_TRIES = 3;
/**
 * What a migration's transaction runs after setting its `lock_timeout`:
 * a role's or database's `statement_timeout` shorter than that wait and a
 * second for the work (`ALTER ROLE … SET statement_timeout = '300ms'`, a
 * common bound for a service's queries) is raised to it, for this
 * transaction only (`SET LOCAL`). Left as it was, it cancelled the wait for
 * a table lock before `lock_timeout` ended it (57014, which no try
 * followed), and the advisory lock's wait of an instance that started
 * beside one migrating: an upgrade behind a report's open transaction
 * failed every start at once, where it would have waited its 2 s. A longer
 * setting, or none (0), is kept. From `current_setting()` (see
 * `timeoutAtLeast`), in milliseconds whatever unit the role gave it.
 */
const MIGRATION_STATEMENT_MS = MIGRATION_LOCK_MS + 1_000;
/**
 * The migration's settings, sent as one message right after its `BEGIN`:
 * its `lock_timeout`, the `statement_timeout` above, and a role's or
 * database's `idle_in_transaction_session_timeout` shorter than that
 * raised to it too. The migration sends its statements one at a time,
 * each after the answer to the one before: the session is idle in its
 * transaction for a round trip between them, and a setting of a few
 * milliseconds ended it there ("write CONNECTION_CLOSED", 8 starts of 8 at
 * 1ms, 2 of 8 at 10ms), where the store's writes, each one flight, run.
 */
const MIGRATION_SETTINGS = `SET LOCAL lock_timeout = ${MIGRATION_LOCK_MS}; ${
  timeoutAtLeast("statement_timeout", MIGRATION_STATEMENT_MS)
}; ${
  timeoutAtLeast("idle_in_transaction_session_timeout", MIGRATION_STATEMENT_MS)
}`;
/**
 * The longest key the store writes into a btree index, in bytes of UTF-8:
 * an index entry holds at most 2,704 bytes on PostgreSQL's default 8 KiB
 * pages (`BTMaxItemSize`), of which a text key's takes 12 (the entry's
 * header and the text's length), and a dead letter's job id in the index
 * by time 8 more (its `poisoned_at`). PostgreSQL compresses a long entry
 * first, so whether a longer one fits depends on its content: the store
 * counts bytes as written, and refuses every value over these, before
 * anything is read or written.
 */
const KEY_BYTES = 2692;
const JOB_ID_BYTES = 2684;

const UTF8 = new TextEncoder();

/** How many times a hold change decides again after losing its compare-and-set. */
const HOLD_ATTEMPTS = 8;

/**
 * How many times a read refused as stale is asked again, each under new
 * names (see `PostgresStore.#forget`): once is enough unless the schema
 * changed again meanwhile.
 */
const STALE_READS = 2;

/**
 * How many times a read PostgreSQL ended with a serialization failure
 * (`40001`) is asked again: on a database or role whose transactions
 * default to SERIALIZABLE, a read runs at that level (only the writes set
 * theirs), and other SERIALIZABLE transactions on the store's tables (a
 * DBA's script, another application's) can end it as the reader of an
 * anomaly. It changed nothing, and asked again it takes a new snapshot.
 * A hot standby ends a read in the way of its replay with the same code
 * ("conflict with recovery"), at any level: asked again the same way, and
 * said as that.
 */
const SERIAL_READS = 3;

/** The store's tables, each as its statements name it. */
type Tables = Record<
  "intents" | "holds" | "leases" | "counters" | "claims" | "dead_letters",
  postgres.Helper<string> | postgres.PendingQuery<postgres.Row[]>
>;

/**
 * The tables of `schema`, named for the store's statements: at `epoch` 0
 * as identifiers (`"relayer"."intents"`); after, with a comment that
 * makes each statement's text new (`"relayer"."intents" /* 1 *\/`), so
 * that postgres.js prepares it anew instead of binding the one it kept.
 * The schema is a checked lower-case identifier (`SCHEMA_NAME`).
 */
function tablesAt(client: postgres.Sql, schema: string, epoch: number): Tables {
  const table = epoch === 0
    ? (name: string) => client(`${schema}.${name}`)
    // A fragment, never executed on its own: its rows' type is moot.
    : (name: string) =>
      client.unsafe(
        `"${schema}"."${name}" /* ${epoch} */`,
      ) as unknown as postgres.PendingQuery<postgres.Row[]>;
  return {
    intents: table("intents"),
    holds: table("holds"),
    leases: table("leases"),
    counters: table("counters"),
    claims: table("claims"),
    dead_letters: table("dead_letters"),
  };
}

/** How the stores of one client and schema name their tables now (see `tablesAt`). */
interface Naming {
  /** How many times a statement of theirs was refused as stale (see `PostgresStore.#forget`). */
  epoch: number;
  /** The tables, named for that epoch. */
  tables: Tables;
}

/**
 * The namings of the stores on each client, by schema: shared, as the
 * client's connections keep the statements of every store on it by their
 * text. With an epoch each, a store that read through none of several
 * schema changes named its tables as another had before each of them, and
 * found each such statement stale on the connections that one had used:
 * its reads failed with "cached plan must not change result type" once
 * its asks ran out (`STALE_READS`). A new store starts at the current
 * epoch, so a store made per request prepares no statement again.
 */
const NAMINGS = new WeakMap<object, Map<string, Naming>>();

/** The naming of the stores of `schema` on `client`, made at epoch 0 on first use. */
function namingOf(client: postgres.Sql, schema: string): Naming {
  let bySchema = NAMINGS.get(client);
  if (bySchema === undefined) NAMINGS.set(client, bySchema = new Map());
  const naming = bySchema.get(schema) ??
    { epoch: 0, tables: tablesAt(client, schema, 0) };
  // Last in the map's order: the least recently used is first, and goes
  // past NAMINGS_KEPT schemas (a store per request for ever new schemas
  // would otherwise keep one for each). Its stores keep theirs; a store
  // made for it later starts at 0 again, and moves on at its first stale
  // refusal, as in a new process.
  bySchema.delete(schema);
  bySchema.set(schema, naming);
  if (bySchema.size > NAMINGS_KEPT) {
    bySchema.delete(bySchema.keys().next().value!);
  }
  return naming;
}

/** How many schemas' namings a client keeps (see `namingOf`). */
const NAMINGS_KEPT = 64;

/** Counters and replay records written between two sweeps of expired ones. */
const SWEEP_EVERY = 64;
/** The most expired rows of each table one sweep deletes: more than it follows. */
const SWEEP_LIMIT = 100;

/**
 * How long past its lapse a lease row waits for a sweep: a lapsed lease is
 * already free to take, and the hour keeps a writer whose clock runs
 * behind the sweeper's from losing a live one. A lease a crashed delivery
 * or a give-up left on an intent nobody writes again so goes too (the
 * table holds only leases in flight, so the sweep's scan of it is short).
 */
const LEASE_ROW_GRACE_MS = 60 * 60 * 1000;

/** Counters and replay records written so far, and the count at which the next sweep is due. */
interface SweepSchedule {
  written: number;
  sweepAt: number;
}

/**
 * The sweep schedules of this process (an isolate on Workers), one per
 * database and schema (see {@linkcode sweepKey}), shared by every store on
 * it: a store made per request (a Worker's, over its request's client)
 * sweeps once every {@linkcode SWEEP_EVERY} writes, not on every request.
 * A new process
 * starts at 0: its first write that counts or claims sweeps, so one that
 * restarts before its 64th (a crash loop, a cold isolate) still sweeps.
 */
const SWEEPS = new Map<string, SweepSchedule>();

/**
 * The most sweep schedules {@linkcode SWEEPS} keeps, the least recently
 * used going first: a process that names ever new databases (a client per
 * request whose host is drawn per request, say) would otherwise keep one
 * for each until it ends. A database whose schedule went starts at 0
 * again, as in a new process: its next write that counts or claims sweeps.
 */
const SWEEPS_KEPT = 64;

/**
 * The statement that counts the server sessions of `pid` (1 while it is
 * there, 0 once it ended), as `n`: the pooler check's question whether a
 * connection that sat idle still has its session (of {@linkcode ACTIVITY}).
 */
function sessionsOf(pid: number): string {
  return `SELECT count(*)::int AS n FROM ${ACTIVITY}(${Math.trunc(pid)})`;
}

/**
 * The key of a store's sweep schedule: the servers, port, database and
 * schema its client names, so two databases with one schema name in one
 * process (a tenant each, say) keep a schedule each and neither sweeps on
 * the other's writes.
 */
function sweepKey(client: postgres.Sql, schema: string): string {
  const options = (client as { options?: Partial<postgres.Sql["options"]> })
    .options;
  return JSON.stringify([
    options?.host ?? null,
    options?.port ?? null,
    options?.database ?? null,
    schema,
  ]);
}

/**
 * A {@linkcode Store} on PostgreSQL. Construction does no I/O; call
 * {@linkcode PostgresStore.migrate} once before use.
 *
 * @example Create and read an intent
 * ```ts
 * import postgres from "postgres";
 * import { PostgresStore } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * const url = Deno.env.get("DATABASE_URL");
 * if (url !== undefined) { // runs where DATABASE_URL names a database to try it on
 *   const sql = postgres(url);
 *   const store = new PostgresStore(sql, { schema: "relayer_example" });
 *   await store.migrate();
 *   const id = `pi_${crypto.randomUUID().slice(0, 8)}`;
 *   const created = await store.createIntent({ id, state: "authorized", hold: "pending" });
 *   assert.equal(created.version, "1"); // a bigint, as a string
 *   assert.equal((await store.getIntent(id))?.hold, "pending");
 *   store.close(); // before the client ends
 *   await sql.end();
 * }
 * ```
 */
export class PostgresStore implements Store {
  /** The client, its plain queries in turn with the writes' `reserve()`s (see `plainInTurn`). */
  #sql: postgres.Sql;
  /** The client as given: the writes' `reserve()`s go through it. */
  #client: postgres.Sql;
  #waitMs: number;
  /** The `lock_timeout` of a write's flight: half of `connectionWaitMs`. */
  #lockMs: number;
  #schema: string;
  /** How the statements of the stores of this client and schema name their tables (see `namingOf`). */
  #naming: Naming;
  #versions: string;
  #refuse: postgres.Helper<string>;
  #refuseStale: postgres.Helper<string>;
  /** Whether a round of {@linkcode PostgresStore.#absorb} runs, and whether another should follow. */
  #absorbing = false;
  #absorbAgain = false;
  /** How many connections of the client's pool closed, and how many had when a write last had the closed ones opened (see `#reopenClosed`). */
  #closes: { readonly count: number };
  #reopenedAt: number;
  /** The probe of `#reopenClosed` under way, for every write that waits on it. */
  #probing: Promise<unknown> | undefined;
  /** Counters and replay records written so far, and when to sweep next (see `SWEEPS`). */
  #sweeps: SweepSchedule;
  /** Whether {@linkcode PostgresStore.close} was called: every call fails at once. */
  #closed = false;
  /** What `close()` stops: the waits of the store's own that the client's end does not settle. */
  #onClose = new Set<() => void>();
  /**
   * A pooler's words as, in statement mode, it ended a connection of this
   * client at a transaction's `BEGIN` (see `statementModeWords`), met since
   * the last write that landed: what a write lost so says of the pooler's
   * mode. `undefined`: none met since.
   */
  #statementMode: string | undefined;
  /**
   * The session's `idle_session_timeout` as the server showed it to
   * `migrate()`, where it is on and the client's `idle_timeout` does not
   * close an idle connection before it: what a write lost on a connection
   * names (see `idleSessionWords`). `undefined`: off, or the client's
   * first, or not yet asked.
   */
  #idleSession: string | undefined;

  /**
   * Constructs a new instance. No I/O.
   *
   * @param sql A postgres.js client; the caller opens and ends it.
   * @param options The schema.
   * @throws {TypeError} If `sql` is not a postgres.js client, transforms
   * what it reads (column names, values or rows: the store reads its own
   * rows), chooses among several hosts by
   * `target_session_attrs=read-write` (postgres.js grants it a hot
   * standby: use `primary`), chooses a standby or a read-only session
   * (`target_session_attrs` `read-only`, `standby`, `prefer-standby`:
   * the store writes), asks for TLS over a Unix socket (PostgreSQL does
   * not do TLS there: leave `ssl` out for a socket, or connect over TCP),
   * has `ssl` `"disable"` or `"false"` (the option, or `PGSSL`), which
   * postgres.js reads as TLS (give `ssl: false`),
   * or `schema` is not a lower-case SQL identifier.
   */
  constructor(sql: PostgresClient, options: PostgresStoreOptions = {}) {
    // A misspelt `schema` would put the store's tables in `relayer`.
    assertOptionNames("create PostgresStore", options, POSTGRES_STORE_OPTIONS, {
      example: '{ schema: "relayer" }',
    });
    if (typeof sql !== "function" || typeof sql?.begin !== "function") {
      throw new TypeError(
        "Cannot create PostgresStore as 'sql' is not a postgres.js client: pass the result of postgres(url)",
      );
    }
    const transform = sql.options?.transform;
    const transforms = (["column", "value", "row"] as const).filter((what) =>
      transform?.[what]?.from !== undefined
    );
    if (transforms.length > 0) {
      throw new TypeError(
        `Cannot create PostgresStore as 'sql' transforms ${
          transforms.map((what) =>
            what === "column" ? "column names" : `${what}s`
          ).join(" and ")
        } it reads, and the store reads its own rows: pass a client without ${
          transforms.map((what) => `transform.${what}`).join(" or ")
        }`,
      );
    }
    // postgres.js 3.4.9 takes `read-write` for the server's reported
    // default_transaction_read_only, which a hot standby reports `off`: it
    // keeps the standby, and every write is refused as read-only.
    const host = sql.options?.host;
    const hosts = Array.isArray(host) ? host.length : 1;
    const attrs = sql.options?.target_session_attrs;
    if (hosts > 1 && attrs === "read-write") {
      throw new TypeError(
        `Cannot create PostgresStore as 'sql' chooses among ${hosts} hosts by target_session_attrs=read-write, which postgres.js grants a hot standby (it reports default_transaction_read_only off), so the store's writes would be refused as read-only: use target_session_attrs=primary`,
      );
    }
    // Every call of the store but a read writes (migrate, each delivery):
    // a session these choose refuses them as read-only, or, where no host
    // is of the kind, none is ever opened (postgres.js goes round the
    // list for good; for `prefer-standby` it passes over a primary even
    // where no standby is listed).
    if (
      attrs === "read-only" || attrs === "standby" ||
      attrs === "prefer-standby"
    ) {
      throw new TypeError(
        `Cannot create PostgresStore as 'sql' chooses a session by target_session_attrs=${attrs}, which picks a standby or a read-only session, and the store writes: use target_session_attrs=primary, or leave it out`,
      );
    }
    // postgres.js 3.4.9 reads `disable` and `false` as no TLS only in the
    // URL (`?sslmode=disable`, `?ssl=false`); given as the `ssl` option
    // or PGSSL, either is a string like any other mode, and it starts TLS
    // with the server's certificate checked: a server without TLS failed
    // every connection in TLS's words, and a refusal over a Unix socket
    // (below) named TLS the caller had turned off.
    const ssl = sql.options?.ssl;
    if (ssl === "disable" || ssl === "false") {
      throw new TypeError(
        `Cannot create PostgresStore as 'sql' has ssl "${ssl}" (its ssl option, or PGSSL), which postgres.js 3.4.9 reads as TLS with the server's certificate checked, not as no TLS: give ssl: false, or ?sslmode=disable in the URL, and leave PGSSL unset`,
      );
    }
    // PostgreSQL does not do TLS on a Unix socket: it says no to the
    // SSLRequest there (libpq skips sslmode for a socket). postgres.js
    // 3.4.9 starts TLS anyway for every mode but `prefer` (and for that
    // one too under direct negotiation, which sends no SSLRequest): the
    // server closes the connection, and every query fails as "Client
    // network socket disconnected before secure TLS connection was
    // established", which reads as a network fault.
    const path = sql.options?.path;
    if (
      typeof path === "string" && path !== "" && ssl !== undefined &&
      ssl !== null && ssl !== false &&
      (ssl !== "prefer" || sql.options?.sslnegotiation === "direct")
    ) {
      throw new TypeError(
        `Cannot create PostgresStore as 'sql' asks for TLS (ssl ${
          typeof ssl === "string" ? ssl : "given"
        }${
          sql.options?.sslnegotiation === "direct"
            ? ", sslnegotiation direct"
            : ""
        }) over the Unix socket ${path}, and PostgreSQL does not do TLS on a Unix socket (every connection would fail its TLS handshake): leave ssl out for a socket (and PGSSL unset), as libpq ignores sslmode there, or connect over TCP to keep TLS`,
      );
    }
    const schema = options.schema ?? "relayer";
    if (typeof schema !== "string" || !SCHEMA_NAME.test(schema)) {
      throw new TypeError(
        `Cannot create PostgresStore as 'schema' must be a lower-case SQL identifier not starting with pg_ (${SCHEMA_NAME}): current value is ${
          JSON.stringify(schema)
        }`,
      );
    }
    const waitMs = options.connectionWaitMs ?? 10_000;
    if (!Number.isSafeInteger(waitMs) || waitMs < 1 || waitMs > 2_147_483_647) {
      throw new TypeError(
        `Cannot create PostgresStore as 'connectionWaitMs' must be a whole number of milliseconds from 1 to 2147483647: current value is ${
          String(waitMs)
        }`,
      );
    }
    const client = sql as unknown as postgres.Sql;
    this.#client = client;
    this.#sql = plainInTurn(client);
    this.#closes = poolCloses(client);
    this.#reopenedAt = this.#closes.count;
    this.#schema = schema;
    const key = sweepKey(client, schema);
    const sweeps = SWEEPS.get(key) ?? { written: 0, sweepAt: 0 };
    // Last in the map's order: the least recently used is first.
    SWEEPS.delete(key);
    SWEEPS.set(key, sweeps);
    if (SWEEPS.size > SWEEPS_KEPT) SWEEPS.delete(SWEEPS.keys().next().value!);
    this.#sweeps = sweeps;
    this.#waitMs = waitMs;
    this.#lockMs = Math.max(1, Math.floor(waitMs / 2));
    this.#naming = namingOf(client, schema);
    this.#versions = `${schema}.dead_letter_versions`;
    this.#refuse = client(`${schema}.refuse_replay`);
    this.#refuseStale = client(`${schema}.refuse_stale`);
  }

  /**
   * Creates the schema and the tables that are missing, in one
   * transaction; idempotent, and safe when several processes start at once.
   * When nothing is missing (one catalog query says so) it runs no DDL and
   * takes no lock, so it does not wait on live writers at a start, and a
   * role with only `USAGE` on the schema and its sequence, read and write
   * grants on its tables and `EXECUTE` on its functions (PUBLIC's, unless
   * revoked) can run it on a database its owner migrated; one lacking any
   * of these is refused here (see docs/postgres.md).
   *
   * It then looks for a pooler in transaction mode that would lose the
   * client's prepared statements (see docs/postgres.md, "Behind a
   * pooler"): directly on PostgreSQL that costs two connections of the
   * client (opened if they are not) for four round trips. Best effort: a
   * busy pooler is often not seen.
   *
   * Bounded: without an answer within `options.waitMs` (20 s by default,
   * above the 13 s that a migration behind a busy table takes to give up)
   * it fails, saying what to do. Without the bound it would wait as long
   * as the client: for a connection its pool never frees (all held by the
   * caller's own queries or `reserve()`s), or for a server that takes the
   * connection and never answers. The work it started is left to run:
   * each step is bounded or idempotent, and the migration one transaction,
   * so a later `migrate()` finds it done, or does it.
   *
   * @param options `waitMs`: how long it waits for its answers, in
   * milliseconds (a whole number from 1 to 2147483647; 20000 by default).
   * @throws {TypeError} If `waitMs` is not such a number, or `options` is
   * no object or names another option; nothing is sent.
   * @throws {Error} If nothing answered within `waitMs`.
   * @throws {Error} If the role's or database's `statement_timeout`
   * cancelled the check of the schema: raise it.
   * @throws {Error} If the database is read-only (a hot standby, or a
   * session with `default_transaction_read_only = on`, each said apart):
   * every write would fail.
   * @throws {Error} If this role lacks a privilege the store's calls use
   * on a schema that is current (a service role not granted one): those
   * writes would fail. Without `USAGE` on the schema, it names that grant.
   * @throws {Error} If row-level security hides rows of the store's tables
   * from this role (an admin enabled it with no policy for the role, or
   * the role's `row_security` is off): it would read a payment as missing;
   * or lets it read but not write (a policy `FOR SELECT` alone): its
   * writes would change no row.
   * @throws {Error} If a migration the schema needs (a first start, an
   * upgrade) cannot get its locks within 2 s each, three times: another
   * session keeps a transaction open on a table. Live instances wait no
   * longer than that at a time behind it.
   * @throws {Error} If a migration the schema needs is refused to this
   * role (a least-privilege service role after an upgrade): run it once as
   * the schema's owner.
   * @throws {Error} If the client goes through a pooler in transaction mode
   * that does not keep prepared statements: create it with
   * `prepare: false`.
   * @throws {Error} If the server refuses a setting the client sends at
   * connect (a parameter of the URL's query postgres.js does not read,
   * such as libpq's `sslrootcert` or `channel_binding`): it names it.
   * @throws {Error} If the client goes through a pooler in statement mode,
   * which ends the connection at a transaction's `BEGIN`: every write is
   * one.
   * @throws {Error} If the server ended the migration's session between
   * its statements under a role's or database's
   * `idle_in_transaction_session_timeout` below a second: raise it to 1s.
   *
   * @example Migrate at start
   * ```ts
   * import postgres from "postgres";
   * import { PostgresStore } from "@relayer/poison/postgres";
   *
   * const url = Deno.env.get("DATABASE_URL");
   * if (url !== undefined) { // runs where DATABASE_URL names a database to try it on
   *   const sql = postgres(url);
   *   const store = new PostgresStore(sql, { schema: "relayer_example" });
   *   await store.migrate();
   *   await store.migrate(); // nothing left to create
   *   await sql.end();
   * }
   * ```
   */
  async migrate(options: MigrateOptions = {}): Promise<void> {
    this.#open("migrate");
    // A misspelt `waitMs` would wait the default in silence.
    assertOptionNames("migrate", options, MIGRATE_OPTIONS, {
      example: `{ waitMs: ${MIGRATE_WAIT_MS} }`,
    });
    const waitMs = options.waitMs ?? MIGRATE_WAIT_MS;
    if (!Number.isSafeInteger(waitMs) || waitMs < 1 || waitMs > 2_147_483_647) {
      throw new TypeError(
        `Cannot migrate as 'waitMs' must be a whole number of milliseconds from 1 to 2147483647: current value is ${
          String(waitMs)
        }`,
      );
    }
    const migrating = this.#migrate().catch((error) => {
      // The check of the schema runs under the role's own
      // statement_timeout (the migration's transaction raises it): one too
      // short cancelled it with the server's words alone.
      const { code, message } = (error ?? {}) as {
        code?: unknown;
        message?: unknown;
      };
      // A client of one's own at an IP address without clientTls(): the
      // runtime's words ("Host: localhost. is not cert's CN") name neither
      // the cause nor the cure.
      const address = checkedAgainstLocalhost(error, this.#sql.options?.host);
      if (address !== undefined) {
        throw new Error(
          `Cannot migrate the PostgreSQL schema "${this.#schema}" as the server's TLS certificate was checked against localhost, not ${address} (${
            oneLine(String(message))
          }): postgres.js gives TLS no server name for a host given as an IP address. Give the client ssl: clientTls(config.database) from @relayer/poison/postgres (config.database is loadConfig's reading of DATABASE_URL; { url, ssl: "verify-full" } for a URL of your own), which checks the certificate against ${address}, an IP entry of its subject alternative names; or connect by a name the certificate holds`,
          { cause: error },
        );
      }
      if (untrustedChain(error)) {
        throw new Error(
          `Cannot migrate the PostgreSQL schema "${this.#schema}" as the server's TLS certificate does not chain to a CA this process trusts (${
            oneLine(String(message))
          }): give the process the CA that signed it (a managed database's own, such as Amazon RDS's bundle), with DENO_CERT=<file> on Deno, or NODE_EXTRA_CA_CERTS=<file> on Node and Bun`,
          { cause: error },
        );
      }
      // A hot standby whose database or role defaults to SERIALIZABLE
      // refuses the check itself (0A000), before it could say the server
      // is a standby: the server's hint, to lower the level, is not the
      // cure.
      if (serializableOnStandby(error)) {
        throw new Error(
          `Cannot use this PostgreSQL database as ${
            readOnlyReason(true, "the store's")
          }`,
          { cause: error },
        );
      }
      // A parameter of the URL's query postgres.js does not read itself
      // (libpq's sslrootcert, the channel_binding of Neon's URLs) goes to
      // the server as a setting at each connect, which refuses it: the
      // server's words alone read as its own fault. Named, never its value.
      const sent = (this.#sql.options as { connection?: object } | undefined)
        ?.connection;
      const setting = code === "42704"
        ? /^unrecognized configuration parameter "([^"]+)"$/.exec(
          String(message),
        )?.[1] ??
          // In another language (lc_messages: "unbekannter
          // Konfigurationsparameter »sslrootcert«"): the setting sent that
          // the words name.
          (typeof sent === "object" && sent !== null
            ? Object.keys(sent).find((name) =>
              /^[a-z_][a-z0-9_]*$/.test(name) &&
              namesWord(String(message), name)
            )
            : undefined)
        : undefined;
      if (
        setting !== undefined && typeof sent === "object" && sent !== null &&
        Object.hasOwn(sent, setting)
      ) {
        throw new Error(
          `Cannot migrate the PostgreSQL schema "${this.#schema}" as the server refused the setting "${setting}" the client sends at each connect (${
            oneLine(String(message))
          }): postgres.js sends each parameter of the URL's query it does not read itself (libpq's sslrootcert and channel_binding among them) as a server setting; remove it from the URL, or from the client's connection option${
            setting === "sslrootcert"
              ? ", and give the process the CA with DENO_CERT=<file> on Deno, or NODE_EXTRA_CA_CERTS=<file> on Node and Bun"
              : ""
          }`,
          { cause: error },
        );
      }
      // Met by the schema's check on a connection a pooler in statement
      // mode ended under a try before (see `#checkTransactions`), in the
      // pooler's words (08P01, a protocol violation).
      if (code === "08P01" && STATEMENT_MODE.test(String(message))) {
        throw statementModeRefusal(
          `the pooler in front of PostgreSQL ended its connection at a transaction's BEGIN (${
            oneLine(String(message))
          })`,
          error,
        );
      }
      if (
        code === "42501" &&
        (/^permission denied for schema /.test(String(message)) ||
          // In another language (lc_messages: "keine Berechtigung für
          // Schema relayer"): the check's only refusal that names the
          // schema, which a table's ("… for table intents") never does.
          namesWord(String(message), this.#schema))
      ) {
        // The check of the schema names it, so it needs USAGE on it: the
        // server's words alone named no grant and no cure.
        const user = this.#sql.options?.user;
        throw new Error(
          `Cannot use the PostgreSQL schema "${this.#schema}" as this role lacks USAGE on it (${
            oneLine(String(message))
          }): grant it (GRANT USAGE ON SCHEMA "${this.#schema}" TO ${
            typeof user === "string" && user !== ""
              // An identifier as SQL quotes it, so the grant runs as given.
              ? `"${user.replaceAll('"', '""')}"`
              : "the role"
          }) with the grants docs/postgres.md lists for a service role, or run as the schema's owner`,
          { cause: error },
        );
      }
      if (code === "57014" && cancelledBy(String(message)) === undefined) {
        // In another language (lc_messages), a cancel's words do not say
        // whether statement_timeout or pg_cancel_backend cut the check.
        throw new Error(
          `Cannot migrate the PostgreSQL schema "${this.#schema}" as a cancel cut its statement (${
            oneLine(String(message))
          }): ${untoldCancel()}; where the role's or database's statement_timeout is too short for the migration's check of the schema, raise it to 1s or more with ALTER ROLE … SET statement_timeout, then run migrate() again`,
          { cause: error },
        );
      }
      if (code !== "57014" || !/statement timeout/.test(String(message))) {
        throw error;
      }
      throw new Error(
        `Cannot migrate the PostgreSQL schema "${this.#schema}" as statement_timeout cancelled its statement (${
          oneLine(String(message))
        }): the role's or database's statement_timeout is too short for the migration's check of the schema (SHOW statement_timeout; raise it to 1s or more with ALTER ROLE … SET statement_timeout), then run migrate() again`,
        { cause: error },
      );
    });
    // Left to run past the bound: its end, whatever it is, is no one's.
    migrating.catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        migrating,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(
                  `Cannot migrate the PostgreSQL schema "${this.#schema}" as nothing answered within ${waitMs}ms: the client's connections may all be busy (a query or a reserve() of the caller's holds them), the server may not answer (is it a PostgreSQL server this process can reach?), ${
                    // workerd keeps a refused handshake's reason to its
                    // own log and tells postgres.js nothing.
                    this.#sql.options?.ssl && onWorkers()
                      ? "workerd may have refused the server's TLS certificate (one that does not name the host or address the client dials, or chains to no CA Cloudflare trusts), which it tells the client nothing of, "
                      : ""}or the migration waits on another session's lock; call migrate() again once that is over (its waitMs option sets this bound, ${MIGRATE_WAIT_MS} by default)`,
                ),
              ),
            waitMs,
          );
        }),
      ]);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /** {@linkcode PostgresStore.migrate}'s work, unbounded. */
  async #migrate(): Promise<void> {
    // With a parameter, as the store's reads have one: postgres.js sends
    // nothing behind it on its connection (see `#selectOne`), where a read
    // given meanwhile could lose its answer through a pooler in
    // transaction mode. Not prepared (`unsafe`), before the pooler check.
    const [current] = ownRows(
      await this.#sql.unsafe(
        `${migrated(this.#schema)}, ${IDLE_SESSION}, $1::int AS described`,
        [1],
      ),
    );
    this.#idleSession = idleSessionMet(
      current?.idle_session,
      current?.idle_session_ms,
      this.#sql.options?.idle_timeout,
    );
    if (current?.read_only === true) {
      // Every write would fail; better to say so at start than to serve
      // healthy and answer every delivery "retry".
      throw new Error(
        `Cannot use this PostgreSQL database as ${
          readOnlyReason(current.standby === true, "the store's")
        }`,
      );
    }
    const missing = String(current?.missing ?? "");
    if (current?.current === true && missing !== "") {
      // Every write that needs one would fail at run time, some only on
      // a poisoned job (a dead letter's sequence): say so at start.
      throw new Error(
        `Cannot use the PostgreSQL schema "${this.#schema}" as this role lacks ${missing}: grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner`,
      );
    }
    const hidden = String(current?.hidden ?? "");
    if (current?.current === true && hidden !== "") {
      // Every read would miss rows (a live payment read as missing, its
      // job dropped) or fail: say so at start.
      throw new Error(
        `Cannot use the PostgreSQL schema "${this.#schema}" as row-level security hides rows of ${hidden} from this role (no policy lets it read them, or its row_security is off): the store must see every row of its tables, or it reads a payment as missing and drops its job. Disable row-level security on them, add a policy for this role that lets it see and write every row, or give it BYPASSRLS`,
      );
    }
    const unwritable = String(current?.unwritable ?? "");
    if (current?.current === true && unwritable !== "") {
      // A policy that lets the role read but not write: every UPDATE or
      // DELETE would change no row, with no error, and each INSERT fail.
      throw new Error(
        `Cannot use the PostgreSQL schema "${this.#schema}" as row-level security lets this role read but not write there: no policy allows it ${unwritable}, so those writes change no row or fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there`,
      );
    }
    const unfilled = String(current?.unfilled ?? "");
    if (current?.current === true && unfilled !== "") {
      // A column a team added NOT NULL with no default (their schema
      // grows): each INSERT into its table would fail, createIntent's on
      // intents, admit's on counters: say so at start.
      throw new Error(
        `Cannot use the PostgreSQL schema "${this.#schema}" as ${unfilled} is NOT NULL with no default, a column the store's migration did not make and its INSERTs give no value, so each would fail: give it a DEFAULT (ALTER TABLE … ALTER COLUMN … SET DEFAULT …), or make it nullable`,
      );
    }
    await this.#checkTransactions();
    if (current?.current !== true) await this.#migrateBounded();
    await this.#checkPooler();
  }

  /**
   * Refuses, at start, a client behind a pooler in statement mode
   * (PgBouncer's `pool_mode = statement`), which takes statements alone
   * and ends the connection at a transaction's `BEGIN`: the schema's check
   * answered there, and the store served healthy while every write failed
   * "PostgreSQL lost the connection during the write …: it may have landed
   * or not" (on an empty schema, the migration failed "write
   * CONNECTION_CLOSED"). One transaction of one `SELECT`, sent as a
   * write's flight is. A restart or a
   * failover ends a connection once: one lost at it is followed by a
   * statement alone and the transaction again, and lost again, with the
   * statement answered, the client is refused. A statement alone that
   * fails with the pooler's words (postgres.js 3.4.9 keeps them for the
   * request that opens that connection again) is said too; any other
   * failure is thrown as it came.
   */
  async #checkTransactions(): Promise<void> {
    // As the store's writes go (`#transaction`: one flight, never idle
    // in its transaction but for the moments between its messages),
    // writing nothing; the connection's loss, as postgres.js said it.
    const transaction = () =>
      this.#transaction(async (tx, commit) => {
        await commit([tx`SELECT ${1}::int AS one`]);
      }).then(
        () => undefined,
        (error: unknown) =>
          connectionLost((error as Error | null)?.cause)
            ? (error as Error).cause
            : error ?? new Error(String(error)),
      );
    const lost = await transaction();
    if (lost === undefined) return;
    if (!connectionLost(lost)) throw lost;
    // And whether an idle_in_transaction_session_timeout below a second
    // (1ms) may have ended it between its messages: in 17 of 30 starts at
    // 1ms, twice, where no pooler was; lost twice so, the start says that
    // setting, not a pooler's mode.
    const alone = await this.#idleSetting();
    if (alone instanceof Error) {
      const said = oneLine(String(alone.message));
      if (STATEMENT_MODE.test(said)) {
        throw statementModeRefusal(
          `the pooler in front of PostgreSQL ended its connection at a transaction's BEGIN (${said})`,
          alone,
        );
      }
      throw lost;
    }
    const again = await transaction();
    if (again === undefined) return;
    if (!connectionLost(again)) throw again;
    if (alone.short) {
      throw idleRefusal(
        "Cannot use this PostgreSQL client",
        alone.shown,
        again,
      );
    }
    throw statementModeRefusal(
      `its connection was ended at a transaction's BEGIN twice, while a statement alone answered between (${
        oneLine(String((again as Error).message))
      })`,
      again,
    );
  }

  /**
   * The session's `idle_in_transaction_session_timeout` as the server
   * shows it, and whether it is below a second, read with a statement
   * alone; or the error it failed with. Asked once more where the first
   * ask failed as its connection was lost without a pooler's words:
   * postgres.js 3.4.9 rejects the request that opens a connection again
   * with the goodbye of the one the server ended (a client of one
   * connection met "read ECONNRESET" so, in 3 starts of 6 under 5ms).
   */
  async #idleSetting(): Promise<{ shown: string; short: boolean } | Error> {
    const ask = () =>
      this.#sql<{ shown: string; short: boolean }[]>`SELECT shown,
        shown::interval > '0' AND shown::interval < '1 second' AS short,
        ${1}::int AS one
        FROM pg_catalog.current_setting('idle_in_transaction_session_timeout') AS shown`
        .then(
          (rows) => ownRows(rows)[0] ?? { shown: "", short: false },
          (error: unknown) =>
            error instanceof Error ? error : new Error(String(error)),
        );
    const first = await ask();
    if (
      !(first instanceof Error) || !connectionLost(first) ||
      STATEMENT_MODE.test(String(first.message))
    ) {
      return first;
    }
    return await ask();
  }

  /**
   * Closes the store, before its client is ended: every call after this
   * one fails at once ("the store is closed"), sending nothing; a write
   * still waiting for a connection fails now (nothing of it was sent); and
   * the store's probes of the pool after a lost connection stop, with
   * their timer. Queries already sent are left to the client: end it next
   * (`sql.end()`), which settles them. Idempotent; the client stays open
   * until then.
   *
   * Call it first when stopping: a write started after `sql.end()` would
   * otherwise wait for a connection postgres.js 3.4.9 never hands out
   * (its `reserve()` does not check that the client ended), failing only
   * after `connectionWaitMs`, and a probe could outlast the client by
   * 250 ms.
   *
   * @example Close the store, then end its client
   * ```ts
   * import postgres from "postgres";
   * import { PostgresStore } from "@relayer/poison/postgres";
   * import assert from "node:assert/strict";
   *
   * // No I/O until a query: this store never connects.
   * const sql = postgres("postgres://relayer:relayer@127.0.0.1:5432/relayer");
   * const store = new PostgresStore(sql);
   * store.close();
   * await sql.end();
   * await assert.rejects(
   *   store.admit({ count: "pi_1/settle", now: Date.now() }),
   *   /as the store is closed/,
   * );
   * ```
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stop of this.#onClose) stop();
    this.#onClose.clear();
  }

  /**
   * The database's `server_encoding`, as the server told the client when
   * a connection opened (`undefined` before the first): what free text is
   * mended for (see `mended`).
   */
  #encoding(): string | undefined {
    const { parameters } = this.#sql as {
      parameters?: Record<string, string | undefined>;
    };
    return parameters?.server_encoding;
  }

  /**
   * Throws, once {@linkcode PostgresStore.close} was called, that the store
   * is closed; `write`: marked as not written, as nothing was sent.
   */
  #open(what: string, write = false): void {
    if (this.#closed) throw closedError(what, write);
  }

  /**
   * `waiting`, or the store's closed error as soon as
   * {@linkcode PostgresStore.close} is called (`stopped` acts first:
   * release what comes late).
   */
  #untilClosed<T>(
    waiting: Promise<T>,
    what: string,
    stopped: () => void,
  ): Promise<T> {
    // Settled first, `waiting` wins, and `close()` leaves it be (a
    // connection that came is the write's to hand back).
    let settled = false;
    const watched = waiting.then((value) => {
      settled = true;
      return value;
    }, (error) => {
      settled = true;
      throw error;
    });
    let stop = () => {};
    const closed = new Promise<never>((_, reject) => {
      stop = () => {
        if (settled) return;
        stopped();
        // Only a write waits so (for its connection): nothing of it sent.
        reject(closedError(what, true));
      };
    });
    this.#onClose.add(stop);
    return Promise.race([watched, closed]).finally(() =>
      this.#onClose.delete(stop)
    );
  }

  /**
   * Runs the migration in one transaction, each table lock waited for at
   * most `MIGRATION_LOCK_MS`, up to `MIGRATION_TRIES` times. An upgrade's
   * `ALTER TABLE` waits for every open transaction on its table, and every
   * read and write of live instances would queue behind it for as long:
   * bounded, they wait at most that, and a table that stays busy fails the
   * start with what to do.
   */
  async #migrateBounded(): Promise<void> {
    for (let attempt = 1;; attempt++) {
      try {
        await this.#sql.begin(ISOLATION, async (tx) => {
          // Each statement `unlessLost`: one lost with its connection
          // never settles, so that no `ROLLBACK` is sent on it.
          // Every lock wait of this transaction is bounded, the advisory
          // lock's too: instances starting at once wait their turn at most
          // that long each, never in a queue as long as the fleet.
          // And no shorter statement_timeout cuts those waits, nor a short
          // idle_in_transaction_session_timeout the round trips between
          // the statements: one message, the first after BEGIN.
          await unlessLost(tx.unsafe(MIGRATION_SETTINGS));
          // Concurrent `CREATE … IF NOT EXISTS` of one name can still
          // collide in the catalog; this lock, released at commit, lines
          // migrations up. Both cast: pg_catalog's functions are then exact
          // matches, which a same-named function on the role's search_path
          // cannot beat.
          await unlessLost(
            tx`SELECT pg_advisory_xact_lock(hashtext(${`relayer.migrate:${this.#schema}`}::text)::bigint)`,
          );
          // Another instance may have migrated while this one waited.
          const [now] = await unlessLost(tx.unsafe(migrated(this.#schema)));
          if (now?.current === true) return;
          for (const statement of migration(this.#schema)) {
            await unlessLost(tx.unsafe(statement));
          }
        });
        return;
      } catch (error) {
        const code = (error as { code?: unknown })?.code;
        if (code === "42501") {
          // A least-privilege role on a schema an upgrade changes.
          throw new Error(
            `Cannot migrate the PostgreSQL schema "${this.#schema}" as this role may not change it (${
              (error as Error).message
            }): run migrate() once as the schema's owner (at the first start, and before starting a version that changes the schema); docs/postgres.md lists the grants a service role needs after that`,
            { cause: error },
          );
        }
        if (connectionLost(error) || connectionLost((error as Error)?.cause)) {
          throw await this.#idleRefusal(error) ?? error;
        }
        if (code !== "55P03") throw error;
        if (attempt === MIGRATION_TRIES) {
          throw new Error(
            `Cannot migrate the PostgreSQL schema "${this.#schema}" as another session keeps a lock on its tables (${MIGRATION_TRIES} tries, each lock waited for at most ${
              MIGRATION_LOCK_MS / 1000
            }s; live instances waited no longer at a time): end the long transaction (a report, a pg_dump, an open psql session; see pg_stat_activity) or migrate at a quieter moment, then start again`,
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
      }
    }
  }

  /**
   * The refusal of a migration whose session was lost (`error`) under a
   * role's or database's `idle_in_transaction_session_timeout` below a
   * second, read with a statement alone; `undefined` for a longer one,
   * none, or a read that fails too (the loss was something else: a
   * restart, a failover). The migration raises the setting in its first
   * message after `BEGIN` (`MIGRATION_SETTINGS`), so only the moment
   * before that message lands is left to it: a few milliseconds or less
   * ended it there, and the server's words reached the caller as
   * "write CONNECTION_CLOSED" alone.
   */
  async #idleRefusal(error: unknown): Promise<Error | undefined> {
    const setting = await this.#idleSetting();
    if (setting instanceof Error || !setting.short) return undefined;
    return idleRefusal(
      `Cannot migrate the PostgreSQL schema "${this.#schema}"`,
      setting.shown,
      error,
    );
  }

  /**
   * Refuses, at start, a client whose prepared statements a pooler in
   * transaction mode would lose. Such a pooler (PgBouncer before 1.21, or
   * without `max_prepared_statements`; Supavisor's transaction mode) hands
   * each transaction to whichever server session is free, so a write
   * meets a server that never saw its statements: postgres.js then retries
   * inside the write's flight, which fails or never answers, and the
   * store's connections stay stuck.
   *
   * Two connections of the client's: the first runs a statement with a
   * parameter (so postgres.js prepares it), the second opens a
   * transaction. Directly on PostgreSQL (or through a pooler in session
   * mode) they are two server sessions, and nothing more is sent. If the
   * second got the first's server session (the free session PgBouncer
   * hands out is the one used last), a pooler is sharing sessions, and the
   * first runs the statement again inside a transaction of its own, as
   * the store's writes do: on another session, it must still be known.
   *
   * Best effort, and never in the way: a pooler that hands the second
   * connection another session (one busy with other clients) is not seen;
   * a client of one connection (`max: 1`), with `prepare: false` or
   * `fetch_types: false`, or without two free connections within 3 s,
   * is not probed; a connection lost during the probe ends it, and is left
   * to postgres.js.
   */
  async #checkPooler(): Promise<void> {
    const options = this.#sql.options as { prepare?: boolean; max?: number };
    if (
      options.prepare === false || this.#sql.options.fetch_types === false ||
      (Number(options.max) || 1) < 2
    ) return;
    const waitMs = Math.min(this.#waitMs, POOLER_CHECK_MS);
    // Without a connection in time (a busy pool), no check.
    const first = await this.#reserve(waitMs).catch(() => null);
    if (first === null) return;
    /** A connection of the check: its last query, whether it began a transaction, whether postgres.js lost it, its server session's pid once known. */
    type Probe = {
      readonly tx: postgres.ReservedSql;
      last: Promise<void>;
      begun: boolean;
      lost: boolean;
      pid: number | undefined;
    };
    const probe = (tx: postgres.ReservedSql): Probe => ({
      tx,
      last: Promise.resolve(),
      begun: false,
      lost: false,
      pid: undefined,
    });
    const a = probe(first);
    // Each query within `waitMs`; one that has not answered by then (a
    // pooler with no free session for it) is left to run, and the
    // cleanup waits for it.
    const on = <T>(p: Probe, query: Promise<T>, begins = false) => {
      p.last = query.then(() => {
        if (begins) p.begun = true;
      }, (error) => {
        if (connectionLost(error)) p.lost = true;
      });
      return bounded(query, waitMs, () => new Error("no answer in time"));
    };
    const pid = (p: Probe) =>
      on(
        p,
        p.tx<
          { pid: number }[]
        >`SELECT pg_backend_pid() AS pid, ${1}::int AS one`,
      ).then((rows) => p.pid = ownRows(rows)[0]?.pid);
    // The first's session is learnt before it sits idle while the second
    // is sought, so that the cleanup can ask whether it is still there.
    const mine = await pid(a).catch(() => undefined);
    // No second connection sought where the server would refuse it for a
    // connection limit (see `NO_ROOM`): postgres.js 3.4.9 then never put
    // the first back in service once handed back, and every call after
    // sought a connection of its own.
    const full = mine === undefined ? true : await on(
      a,
      a.tx.unsafe<{ full: boolean }[]>(NO_ROOM),
    ).then((rows) => ownRows(rows)[0]?.full === true, () => false);
    const second = mine === undefined || full
      ? null
      : await this.#reserve(waitMs).catch(() => null);
    const b = second === null ? null : probe(second);
    let refusal: Error | undefined;
    // Two server sessions, one idle while the other ran.
    let direct = false;
    try {
      if (b === null) return;
      await on(b, b.tx.unsafe(`BEGIN ${ISOLATION}`), true);
      const theirs = await on(b, b.tx`SELECT pg_backend_pid() AS pid`)
        .then((rows) => b.pid = ownRows(rows)[0]?.pid);
      if (mine !== theirs) {
        direct = true;
        return;
      }
      // The same statement, on whatever session the pooler gives now.
      await on(a, a.tx.unsafe(`BEGIN ${ISOLATION}`), true);
      await pid(a).catch((error) => {
        if ((error as { code?: unknown })?.code !== "26000") throw error;
        refusal = new Error(
          `Cannot use this PostgreSQL client as it goes through a pooler in transaction mode that does not keep prepared statements (PgBouncer before 1.21, or without max_prepared_statements; Supavisor's transaction mode), where the store's writes would fail or hang: ${POOLER_FIX}`,
          { cause: error },
        );
      });
    } catch {
      // Anything else (a connection lost, no answer in time) ends the
      // check, not the start: the store's own calls meet it, if it lasts.
    } finally {
      // The second first: its transaction may hold the session the first's
      // last query waits for. A connection postgres.js lost is its to mend:
      // rolled back or released, it could crash the process
      // (porsager/postgres#1154); one still silent is left to it too.
      // Directly on PostgreSQL (two server sessions), the first sat idle
      // through the second's queries: a connection the server ended then
      // is one postgres.js closed without a word to the check, and handed
      // back or sent a ROLLBACK it crashes the process at its next write
      // (porsager/postgres#1199, #1208). The second answered last, so it
      // is open: it asks whether the first's session is still there. If
      // the server ended the one that ran, the idle one is taken for
      // ended too (a restart or a failover ends them all), and left.
      let firstLeft = b !== null && b.lost;
      let secondLeft = b !== null && a.lost && b.pid === undefined;
      if (full && mine !== undefined && !a.lost) {
        // No second sought: the first answered its last query just now, so
        // it is handed back at once. Asked on the pool (below), the
        // question would need the connection the limit refuses.
        a.tx.release();
        firstLeft = true;
      } else if (b === null && a.pid !== undefined && !a.lost) {
        // No second connection in time: the first sat idle meanwhile, and
        // the server may have ended its session (the second's connect
        // failing is a sign of it). It is handed back only once the pool
        // has seen that session there, without keeping the start waiting
        // (a busy pool answers when it can); otherwise it is left.
        const first = a.tx;
        this.#sql.unsafe<{ n: number }[]>(sessionsOf(a.pid)).then((rows) => {
          if (ownRows(rows)[0]?.n === 1) first.release();
        }, () => {});
        firstLeft = true;
      }
      if (
        b !== null && direct && a.pid !== undefined &&
        await this.#within(b.last, waitMs)
      ) {
        // Handed back on that answer, before the second's ROLLBACK: the
        // server may end the idle session during that round trip too (a
        // restart ends them all), and a release after it would put a
        // connection postgres.js closed meanwhile back in the pool.
        const first = a.tx;
        const asked = b.tx.unsafe<{ n: number }[]>(sessionsOf(a.pid));
        asked.then((rows) => {
          if (ownRows(rows)[0]?.n === 1) first.release();
        }, () => {});
        await on(b, asked).catch(() => {});
        firstLeft = true;
        secondLeft = b.lost;
      }
      for (const p of b === null ? [a] : [b, a]) {
        if (!await this.#within(p.last, waitMs) || p.lost) continue;
        if (p === a ? firstLeft : secondLeft) continue;
        if (p.begun) {
          // Ended under its ROLLBACK, it is left to postgres.js too.
          const rolledBack = p.tx`ROLLBACK`.then(() => {}, (error) => {
            if (connectionLost(error)) p.lost = true;
          });
          if (!await this.#within(rolledBack, waitMs) || p.lost) continue;
        }
        p.tx.release();
      }
      if (a.lost || b?.lost) this.#absorb();
    }
    if (refusal) throw refusal;
  }

  /**
   * Runs `work`, turning the database's race errors into store errors;
   * `read`: `work` only reads (a closed store's error is then not marked
   * as a write not written).
   */
  async #run<T>(
    what: string,
    work: () => Promise<T>,
    read = false,
  ): Promise<T> {
    this.#open(what, !read);
    try {
      return await work();
    } catch (error) {
      const code = (error as { code?: unknown })?.code;
      if (code === REPLAYED) {
        throw new ReplayError(
          "Cannot accept the delivery as its signature was already used",
          { cause: error },
        );
      }
      if (code === STALE) {
        // Row-level security that lets the role read but not update the
        // intent (a policy FOR SELECT alone, added after the start) hides
        // the row from the compare-and-set, which refuses as for a race
        // lost: every delivery, for good. Asked only where a table has it.
        await this.#grantsShown(`Cannot ${what}`, error, read, true);
        throw new ConflictError(
          `Cannot ${what} as its intent changed since it was read; re-read it`,
          { cause: error },
        );
      }
      if (code === "42501") {
        // A privilege revoked, or a row-level security policy that lets
        // the role read but not write, after the start: the server's words
        // alone ("permission denied for table intents", "new row violates
        // row-level security policy") named no grant, no cure, and not that
        // nothing was written.
        await this.#grantsShown(`Cannot ${what}`, error, read, false);
      }
      if (code === "22P05") {
        // A character the database's encoding has no code for (a LATIN1
        // database), in a value free text's mending does not reach (a
        // queue's id, a tx hash), or free text mended before the client
        // had connected (its encoding unknown).
        // Refused as its statement was bound, before anything ran (in a
        // transaction, rolled back): nothing of it was written or read.
        const refused = new TypeError(
          `Cannot ${what} as this database's encoding (${
            this.#encoding() ?? "not UTF8"
          }) cannot hold a character of it (${
            oneLine(String((error as Error).message))
          }): remove it from the id, key, tx hash or queue id, or keep the store in a UTF8 database; nothing was ${
            read ? "read" : "written"
          }`,
          { cause: error },
        );
        throw read ? notRead(refused) : notWritten(refused);
      }
      if (code === "22021") {
        // A string the database cannot hold: U+0000 in text, which only an
        // id, a key or a tx hash can still carry here (free text is mended
        // on the way in).
        throw new TypeError(
          `Cannot ${what} as PostgreSQL text cannot hold the character U+0000 (NUL): remove it from the id, key or tx hash`,
          { cause: error },
        );
      }
      if (code === UNFIT) {
        throw new Error(
          `Cannot ${what} as PostgreSQL refuses its statement on the schema as it is now (${
            oneLine(String(((error as Error).cause as Error)?.message))
          }): the schema was changed into one this version of the store cannot write (a later release's migration?); nothing of it was written, and trying again cannot help until this instance runs the version that made the change, or the change is undone`,
          { cause: (error as Error).cause },
        );
      }
      if (code !== "26000" && refusedAsStale(error)) {
        // A statement prepared on its connection before the schema changed
        // what it returns (a migration of a later release, an operator's
        // ALTER TABLE): refused, the flight committed nothing. A flight
        // goes again once its statement is prepared anew (see staleOnly);
        // this is one whose preparing failed, or `sql.begin`'s path.
        throw new Error(
          `Cannot ${what} as PostgreSQL refused a statement this client had prepared before the schema changed (${
            oneLine(String((error as Error).message))
          }): nothing of it was written; try again`,
          { cause: error },
        );
      }
      if (code === "26000") {
        // A prepared statement the server does not know: a pooler in
        // transaction mode gave this write another server session.
        throw new Error(
          `Cannot ${what} as PostgreSQL does not know a statement this client prepared: a pooler in transaction mode (PgBouncer, Supavisor) sent it to another server session; ${POOLER_FIX}`,
          { cause: error },
        );
      }
      if (code === "25006" || serializableOnStandby(error)) {
        // A read-only transaction: the server is a standby, a primary a
        // failover demoted (or not yet promoted), or one set
        // `default_transaction_read_only`. Or, on a standby whose database
        // defaults to SERIALIZABLE, the write's read (0A000), before any
        // of the write was sent. The statement that wrote failed,
        // so the transaction rolled back: nothing of the write landed. Said
        // so, or an operator's route answered "it may have landed or not".
        throw readOnly(notWritten(
          new Error(
            `Cannot ${what} as PostgreSQL refused it as read-only (a standby, a primary that failed over and is not writable yet, or default_transaction_read_only = on): nothing was written; retry once the database takes writes, and check that the store's URL names the primary`,
            { cause: error },
          ),
        ));
      }
      if (code === "55P03" && LOCKED_READS.has(error as object)) {
        // A read's (the write's own, before its flight), which the store
        // bounds by no lock_timeout: the role's or database's ended it,
        // not the flight's, which the next branch would name.
        throw heldBySession(
          `Cannot ${what} as its read waited for a table lock another session held past the role's or database's lock_timeout (${
            tableLockWait(error)
          }): nothing was written; retry`,
          error,
        );
      }
      if (code === "55P03") {
        // A lock waited for longer than the flight's `lock_timeout`: the
        // transaction aborted, so nothing of the write committed. Another
        // session holds the intent up (a long transaction, an operator's
        // psql), as another delivery's lease would: busy, not the job's
        // failure, so the relayer never poisons a payment on it.
        const prepared = await this.#preparedHolders();
        if (prepared !== "") {
          // A prepared transaction (two-phase commit) holds it: no
          // session does, so pg_stat_activity shows none, and only its
          // COMMIT PREPARED or ROLLBACK PREPARED ends it.
          throw heldBySession(
            preparedHeld(
              what,
              `held a lock it needed for over ${this.#lockMs}ms (lock_timeout)`,
              prepared,
            ),
            error,
          );
        }
        throw heldBySession(
          `Cannot ${what} as another session held a lock it needed for over ${this.#lockMs}ms (lock_timeout; see pg_locks and pg_stat_activity): nothing was written; retry`,
          error,
        );
      }
      if (code === "57014") {
        // A statement cancelled: the role's or database's
        // `statement_timeout` (often below the write's `lock_timeout`, so
        // a lock wait ends here), or `pg_cancel_backend`. The transaction
        // aborted, so nothing committed; busy, as a lock past its bound is
        // (a poison's resolution would write, and be cut, too). Said apart,
        // so that an operator does not look for a session that holds
        // nothing: a wait for another session's row carries the server's
        // context ("while locking tuple (0,1) in relation …").
        const own = this.#ownCancel();
        const { message, where } = error as {
          message?: unknown;
          where?: unknown;
        };
        const wait = rowWait(where);
        const by = cancelledBy(String(message));
        // A row a prepared transaction holds, waited for until the role's
        // statement_timeout (below the flight's lock_timeout) ended it.
        const prepared = wait === undefined || by === "request"
          ? ""
          : await this.#preparedHolders();
        if (prepared !== "") {
          throw heldBySession(
            preparedHeld(
              what,
              by === "timeout"
                ? `held a row it needed until statement_timeout ended its wait (${
                  oneLine(String(message))
                } ${wait})`
                : `held a row it needed until its wait was cancelled (${
                  oneLine(String(message))
                } ${wait}), by ${untoldCancel()}`,
              prepared,
            ),
            error,
          );
        }
        throw heldBySession(
          `Cannot ${what} as ${cancelled(error, own)}`,
          error,
        );
      }
      // A statement the schema refused rolled its transaction back:
      // nothing of the write landed, as for a read-only server.
      const unfit = unmigrated(error, `Cannot ${what}`, this.#schema);
      if (unfit !== null) throw notWritten(unfit);
      const missing = refusedConnection(error, `Cannot ${what}`, "written");
      if (missing !== null) throw missing;
      const aborted = abortedSession(
        what,
        "written",
        error,
        this.#sql.options?.fetch_types === false,
      );
      if (aborted !== null) throw aborted;
      if (code === "40P01") {
        // A deadlock: the store's own writes take their locks in one
        // order, so only another session (a DBA's script, a report) meets
        // them in one, and the server ended this write to break it. That
        // session held a lock this write needed, as past lock_timeout:
        // busy, not a lost race. As a conflict it counted toward the
        // relayer's three tries, after which a failure on an intent
        // nobody wrote was taken for a refusal and sent to review, where a
        // retry would have failed the payment.
        const said = oneLine(
          String((error as { message?: unknown })?.message),
        );
        throw heldBySession(
          `Cannot ${what} as PostgreSQL ended it in a deadlock with another session (${said}): nothing was written; retry (the server's log names the other session)`,
          error,
        );
      }
      const rule = outsideRule(error, this.#schema, read);
      if (rule !== null) {
        // A rule on the store's tables that its migration does not make:
        // an admin's CHECK constraint or NOT NULL column, or a payment
        // team's own trigger that RAISEs (on a read, a row-security
        // policy's function). Its statement failed, so its transaction
        // rolled back. In the server's words alone ("audit: settling needs
        // approval"), it read as the store's own bug, and not as nothing
        // written (or, for a read, nothing read).
        const mark = read ? notRead : notWritten;
        throw mark(
          new Error(
            `Cannot ${what} as PostgreSQL refused it for ${rule.what}, which the store's migration does not make (added to its tables since): nothing of it was ${
              read ? "read; it fails" : "written; deliveries retry"
            } until ${rule.fix}`,
            { cause: error },
          ),
        );
      }
      if (code === "23505" || code === "40001") {
        // A unique violation or serialization failure: another writer
        // won; the caller re-reads.
        throw new ConflictError(
          `Cannot ${what} as another writer changed it at the same time; re-read it`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /**
   * The intent's read; `withLease`, with its lease, and the first of
   * `uncounted` on record, not lapsed at `now` (`counted`): a write's
   * `unlessCounted`, checked in the read the write makes anyway, so a
   * marked copy takes no connection; one written between this read and
   * the flight is refused in the flight (see `#unmarked`).
   */
  #intentQuery(
    sql: Sql,
    id: string,
    withLease: boolean,
    uncounted: readonly string[] = [],
    now = 0,
  ) {
    const { intents, holds, leases, counters } = this.#t;
    return withLease
      ? sql`
        SELECT i.id, i.state, i.settling_since, i.broadcasting, i.may_have_sent,
          i.last_outcome, i.last_tx_hash, i.last_at, i.last_error, i.tx_hashes,
          i.version, h.state AS hold, l.owner AS lease_owner,
          l.expires_at AS lease_expires_at${
        uncounted.length === 0 ? sql`` : sql`,
          (SELECT c.job_id FROM ${counters} c
            WHERE c.job_id IN ${sql(uncounted)} AND c.expires_at > ${now}
            LIMIT 1) AS counted`
      }
        FROM ${intents} i
        LEFT JOIN ${holds} h ON h.intent_id = i.id
        LEFT JOIN ${leases} l ON l.intent_id = i.id
        WHERE i.id = ${id}`
      : sql`
        SELECT i.id, i.state, i.settling_since, i.broadcasting, i.may_have_sent,
          i.last_outcome, i.last_tx_hash, i.last_at, i.last_error, i.tx_hashes,
          i.version, h.state AS hold
        FROM ${intents} i
        LEFT JOIN ${holds} h ON h.intent_id = i.id
        WHERE i.id = ${id}`;
  }

  /**
   * One write on a connection of its own, taken right before its flight:
   * `work` builds the writes and calls `commit` at once (no I/O before
   * it), which sends `BEGIN`, the writes and `COMMIT` in one flight and throws the first statement's
   * error (a statement that fails aborts the transaction, so the `COMMIT`
   * behind it rolls back). The transaction never spans two round trips: a
   * connection postgres.js loses between them is opened again for what
   * comes next, and a second round trip would run outside the transaction,
   * each statement committing alone (porsager/postgres#1155). One flight
   * lands whole or not at all, so the writes begin with a check of what
   * the read saw ({@linkcode PostgresStore.#stillAt}).
   *
   * A connection lost under a flight may leave the statements behind the
   * failed one unanswered, and handing it back to the pool would crash the
   * process at its next query (porsager/postgres#1154): such a write
   * answers at once that it may have landed, and the connection is left
   * to postgres.js.
   *
   * A flight that failed only on a statement a schema change made stale
   * goes again on the same connection once that statement is prepared
   * anew, at most once for each of its statements (see
   * `_postgres_resend.ts`): `work` runs again, its writes built again.
   *
   * A client made with `fetch_types: false` takes `sql.begin` instead
   * (`BEGIN` and `COMMIT` each a round trip of their own): postgres.js
   * 3.4.9's `reserve()` never settles on a connection it opens for it
   * without fetching types (porsager/postgres#751, #1219).
   */
  async #transaction<T>(
    work: Work<T>,
  ): Promise<T> {
    if (this.#sql.options.fetch_types === false) return await this.#begin(work);
    const tx = await this.#reserve().catch((error) => {
      // No connection was handed to the write: nothing of it was sent.
      throw socketLost(error)
        ? lostBeforeWrite(error, undefined, this.#idleSession)
        : error;
    });
    let lost = false;
    // The connection postgres.js runs the flight on, once it sent the
    // flight's first query (see `seenOn`).
    const seen = seenOn();
    // The connection lost, or closed here: never handed back, left to
    // postgres.js to open again, and the pool's goodbyes taken first (see
    // `#absorb`).
    const leaveLost = () => {
      lost = true;
      this.#absorb();
    };
    // Kept from the pool until the flight's answers come, if they do; then
    // handed back, unless the connection was lost meanwhile.
    const handBackLater = (
      answers: Promise<PromiseSettledResult<unknown>[]>,
    ) => {
      lost = true;
      void answers.then((settled) => {
        if (anyLost(settled)) this.#absorb();
        else tx.release();
      });
    };
    // Closes the connection whose statements went unanswered past the
    // bound where their answers may never come (see `closeSession`),
    // left to postgres.js to open again; else kept from the pool until
    // they come.
    const closeOrHandBackLater = (
      answers: Promise<PromiseSettledResult<unknown>[]>,
    ) => {
      if (!closeSession(seen.connection)) return handBackLater(answers);
      leaveLost();
    };
    // Ends the transaction a cancel that cut a COMMIT left open and failed
    // on the connection (see `endTransaction`): false if the ROLLBACK was
    // not answered within the bound, or each try of it failed (the
    // session is left inside the failed transaction, and every call given
    // the connection next would fail, 25P02), and the connection is then
    // closed; or if the connection was lost.
    const rolledBack = async (): Promise<boolean> => {
      const ended = endTransaction(tx);
      if (!await this.#within(ended)) {
        closeOrHandBackLater(ended);
        return false;
      }
      const settled = await ended;
      if (anyLost(settled)) {
        leaveLost();
        return false;
      }
      if (settled.at(-1)?.status === "rejected") {
        if (closeSession(seen.connection)) leaveLost();
        return false;
      }
      return true;
    };
    // A flight refused only as stale, its statement prepared again: the
    // error `work` throws for it is caught below and `work` runs again,
    // while `connectionWaitMs` has not passed since the first such refusal
    // (each flight has its bound, and this one bounds them all).
    let sendAgain: unknown = undefined;
    let flights = 0;
    let againUntil: ReturnType<typeof setTimeout> | undefined;
    let pastAgain = false;
    const commit = async (
      writes: readonly postgres.PendingQuery<postgres.Row[]>[],
    ) => {
      flights++;
      const sent = [
        // One simple query of four statements: the flight's lock waits
        // are bounded below `connectionWaitMs`, so a write held up by
        // another session's lock (an open psql, a schema change) fails with
        // nothing written and hands its connection back, instead of
        // keeping it from the pool for as long as the lock lasts; and its
        // commit is durable once answered (`DURABLE`). And the tables
        // take its marked writes (`IN_WRITE`): a cancel that cuts this
        // query before its BEGIN ran leaves the statements behind it to
        // run outside a transaction, where each is refused, not landed
        // alone.
        tx.unsafe(
          `BEGIN ${ISOLATION}; SET LOCAL lock_timeout = ${this.#lockMs}; ${IN_WRITE}; ${DURABLE}`,
          [],
          seen.options,
        ).execute(),
        // Never sent again behind the COMMIT, outside the transaction: a
        // statement PostgreSQL refuses as stale fails the flight instead.
        // Each marked (`WRITE_MARK`): the tables' guard refuses it outside
        // this transaction.
        ...writes.map((q) => (neverResent(marked(q)), q.execute())),
        // A simple query, never prepared: a prepared COMMIT that a session
        // which lost the client's statements refused (26000) aborted the
        // transaction, and postgres.js sent it again, which answered
        // ROLLBACK: a write whose statements were new there answered that
        // it landed, and nothing of it had.
        tx.unsafe("COMMIT").execute(),
      ];
      let unanswered = false;
      let answers: postgres.RowList<postgres.Row[]>[];
      try {
        // Answers come in order: the first to fail is the first statement
        // that failed (the ones behind it fail as the transaction aborted).
        // Waited for within `connectionWaitMs`, as a read is: a write held
        // up longer (a row lock, a server or client that stopped) answers
        // that it may have landed, and never hangs its delivery.
        answers = await bounded(Promise.all(sent), this.#waitMs, () => {
          unanswered = true;
          return new Error(
            `PostgreSQL did not answer the write within ${this.#waitMs}ms: it may have landed or not; the next read says which`,
          );
        });
      } catch (error) {
        if (unanswered) {
          // One more statement on the connection: a flight whose first
          // answers came back (BEGIN's, then a wait for a row lock or a
          // COMMIT's flush) has the client's last bytes answered, and a
          // socket that watches for a write the server leaves silent
          // (main.ts's, through a partition or a failover) would never
          // close it, keeping the connection from the pool for good. Behind
          // the flight on a live server, it answers once the flight has.
          // A ROLLBACK (a warning only outside a transaction): a cancel
          // that cut the flight's COMMIT before it ended the transaction
          // (as at `endTransaction` below, but past the bound) left the
          // session inside it, failed, and handed back so, the next call
          // given the connection failed (25P02).
          const asked = tx.unsafe("ROLLBACK").execute();
          handBackLater(Promise.allSettled([...sent, asked]));
          throw error;
        }
        if (connectionLost(error)) {
          leaveLost();
          throw lostDuringWrite(error, this.#statementMode, this.#idleSession);
        }
        // The connection was alive: the statements behind fail as the
        // transaction aborted. Waited for within a bound all the same: one
        // never answered means the connection is not alive after all. And
        // the server may end it before they answer (postgres.js sends
        // them one round trip at a time on a connection they are new to):
        // postgres.js then has no socket for it, and handed back, its next
        // query would crash the process (porsager/postgres#1154, #1208).
        // The statement's own error stands: nothing of the flight landed.
        const rest = Promise.allSettled(sent);
        // Unanswered past the bound: a cancel that cut the BEGIN through
        // PgBouncer in transaction mode left the session idle, and the
        // pooler unlinked it while the statements behind were sent to it,
        // dropping their answers ("got packet ... from server when not
        // linked"): they never come, and the connection is closed.
        if (!await this.#within(rest)) closeOrHandBackLater(rest);
        else if (anyLost(await rest)) leaveLost();
        else if (
          (error as { code?: unknown } | null)?.code === "25006" &&
          closeSession(seen.connection)
        ) {
          // Refused as read-only. A session takes the role's and the
          // database's `default_transaction_read_only` as it starts, and
          // keeps it: handed back, a session a DBA's `ALTER ROLE … SET
          // default_transaction_read_only = on` made read-only refused every
          // write after the setting was reset, until the client's
          // max_lifetime (30 to 60 min) ended it. Closed, the connection is
          // opened again with the setting as it is then: one connection
          // more per refused write, while the database refuses writes.
          // And on a client that chooses its sessions by
          // `target_session_attrs`, a session the client should have passed
          // over (a standby, for `primary`). postgres.js 3.4.9 keeps the
          // goodbye of a session ended under a statement (an operator's
          // pg_terminate_backend, a primary's shutdown) for the connection
          // it opens again, which rejects its first request with it and
          // skips the check, serving from whatever host it reached: handed
          // back, every write on it was refused, for good. Closed, the
          // connection is opened again and checked, at the next host.
          lost = true;
        } else {
          const settled = await rest;
          if (settled.at(-1)?.status === "rejected") {
            // The COMMIT itself failed: a cancel (pg_cancel_backend, a
            // statement_timeout) that reached it before it ended the
            // transaction leaves the session inside it, failed, and every
            // call given the connection next would fail (25P02), until a
            // write's COMMIT answered ROLLBACK. Rolled back before it goes
            // back (only a warning outside a transaction), and again if a
            // cancel cut that too: three at the most.
            if (!await rolledBack()) throw error;
          }
          // A statement refused as stale is prepared again before the
          // connection goes back, as postgres.js would have before sending
          // it again (see sendOnce): its next write runs. Its lock waits
          // end at the flight's lock_timeout (see prepareAgain).
          if (
            settled[0]?.status === "rejected" &&
            settled.slice(1, -1).some((answer, i) =>
              answer.status === "fulfilled" && !CHECKS.has(writes[i]!)
            ) &&
            !settled.some((answer) =>
              answer.status === "rejected" &&
              (answer.reason as { code?: unknown })?.code === OUTSIDE_WRITE
            )
          ) {
            // The first query failed before its BEGIN ran (a cancel that
            // reached the server as it began: pg_cancel_backend, a
            // statement_timeout shorter than its parse, this store's own
            // late cancel of a read), and the statements behind it, each
            // its own sync, ran outside a transaction. The tables refuse
            // each of them (`RL003`, see `IN_WRITE`): the first query's
            // error stands, nothing was written. Unless none was refused
            // so and one that writes was answered (the schema's guard
            // dropped, or disabled since the start's check): some of them
            // may have landed, each alone. A check answered (`CHECKS`: a
            // `SELECT … FOR UPDATE` fires no trigger) wrote nothing, and
            // the statements behind it that a cancel cut before their
            // guard ran (57014, as the BEGIN's) wrote nothing either.
            throw beganOutside(error);
          }
          // The write goes again only for `connectionWaitMs` after its
          // first refusal as stale.
          if (refusedAsStale(error)) {
            againUntil ??= setTimeout(() => {
              pastAgain = true;
            }, this.#waitMs);
          }
          const again = prepareAgain(
            tx,
            writes,
            settled.slice(1, -1),
            this.#lockMs,
          );
          if (!await this.#within(again)) handBackLater(again);
          else if (anyLost(await again)) leaveLost();
          else if (
            // Its COMMIT cut by a cancel, as the flight's can be: the
            // session is left inside that transaction, failed.
            (await again).at(-1)?.status === "rejected" && !await rolledBack()
          ) {
            // Not ended: the connection was handed back for later, closed
            // (see `rolledBack`) or lost, and the flight's error stands.
          } else if (
            staleOnly(error, settled.at(-1), await again) &&
            flights < writes.length + 1 && !pastAgain
          ) {
            // The flight rolled back whole (its COMMIT answered ROLLBACK)
            // and what was stale is prepared anew: the write goes again,
            // here, on this connection.
            sendAgain = error;
          } else {
            // Preparing it waited past lock_timeout for another session's
            // lock (the next migration's), or statement_timeout cut it:
            // busy, as a flight so held up is, nothing written.
            const held = (await again).find((answer) =>
              answer.status === "rejected" &&
              ["55P03", "57014"].includes(
                String((answer.reason as { code?: unknown })?.code),
              )
            );
            if (held?.status === "rejected") throw held.reason;
            // Prepared anew on the schema as it is now, and refused there
            // as not fitting it (SQLSTATE class 42: a column made an enum
            // that a statement writes as text, a column or function gone):
            // trying again cannot help, and the error says so. Anything
            // else (a deadlock, a lack of resources) keeps the stale
            // refusal's "try again".
            const refused = (await again).find((answer) =>
              answer.status === "rejected" &&
              String((answer.reason as { code?: unknown })?.code)
                .startsWith("42")
            );
            if (refused?.status === "rejected") {
              throw Object.assign(new Error(UNFIT, { cause: refused.reason }), {
                code: UNFIT,
              });
            }
          }
        }
        throw error;
      }
      if (answers.some(noneCompleted)) {
        // Not the statements' answers: the connection was lost under them,
        // and opened again. Where its session stands is unknown: a
        // `ROLLBACK` goes behind them (a warning only, outside a
        // transaction), and the connection back to the pool once it answers.
        const asked = tx.unsafe("ROLLBACK").execute();
        handBackLater(Promise.allSettled([...sent, asked]));
        throw emptyWrite();
      }
      // Committed: no pooler in statement mode stands in the way now.
      this.#statementMode = undefined;
      return answers.slice(1, -1);
    };
    try {
      for (;;) {
        try {
          return await work(tx, commit);
        } catch (error) {
          if (error === undefined || error !== sendAgain) throw error;
          sendAgain = undefined;
        }
      }
    } finally {
      if (againUntil !== undefined) clearTimeout(againUntil);
      if (!lost) tx.release();
    }
  }

  /**
   * After a connection was lost: postgres.js 3.4.9 keeps the server's
   * goodbye for the next request that opens that connection again, and if
   * that request is a `reserve()`, it keeps the connection from the pool
   * for good. So a plain query per connection of the pool goes first, to
   * take the goodbye (each fails or answers; nothing waits for them).
   */
  #absorb(): void {
    if (this.#closed) return;
    // One round at a time; a loss during a round asks for another after it.
    if (this.#absorbing) {
      this.#absorbAgain = true;
      return;
    }
    this.#absorbing = true;
    void (async () => {
      try {
        for (let round = 1; round <= ABSORB_ROUNDS; round++) {
          this.#absorbAgain = false;
          // Not in the turn of the loss: postgres.js 3.4.9 fails a reset
          // connection's queries at its socket's error and reports the
          // close a turn later, and a query handed to the connection in
          // between is written to nothing, never settles, and keeps the
          // connection from opening again. A probe sent there took a
          // pool of 1 for good on a client without `answeredSocketOption`
          // (every read after it "did not answer within …ms").
          await this.#pause(round === 1 ? 0 : ABSORB_GAP_MS);
          if (this.#closed) return;
          // One probe first: while the server is down, one connect a round,
          // not a pool's worth (each failed connect lengthens postgres.js's
          // backoff for every connection).
          const [probe] = await this.#selectOnes(1);
          if (probe === "ended") return;
          if (probe === "reached") {
            if (this.#closed) return;
            const max = Number(this.#sql.options.max) || 1;
            const answers = await this.#selectOnes(max);
            if (answers.includes("ended")) return;
            if (!answers.includes("unreached") && !this.#absorbAgain) return;
          }
        }
      } finally {
        this.#absorbing = false;
      }
    })();
  }

  /** A wait of `ms` (a timer's turn at 0), cut short by `close()`. */
  #pause(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#onClose.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#onClose.add(done);
    });
  }

  /**
   * The store's probe of the server, `SELECT 1`, with its `1` a parameter,
   * so that no statement is sent behind it on its connection. A plain
   * `SELECT 1` takes statements behind it (postgres.js 3.4.9 pipelines up
   * to `max_pipeline` on a busy connection); through a pooler in
   * transaction mode, one sent behind it while it runs is forwarded to its
   * server session, which PgBouncer (1.18) hands back to its pool at the
   * probe's ReadyForQuery, and the answer that follows is dropped: the
   * connection then waits for it for good. The probes run after a lost
   * connection, as reads pile up, and once every connection of the pool
   * had lost an answer so, no read answered again. With a parameter and
   * `prepare: false` (the client for such a pooler), postgres.js asks the
   * server to describe the statement first and sends nothing behind it
   * until it answered. (With prepared statements, a pooler in transaction
   * mode is refused by `migrate()` unless it keeps them, as PgBouncer 1.21
   * and later can: that pooler is not tested here.)
   */
  #selectOne(): postgres.PendingQuery<postgres.Row[]> {
    // On the client as given, not held back behind a write's reserve()
    // (see `plainInTurn`): the probes are part of that wait, sent after a
    // close to open the pool's closed connections before it asks again.
    // Held back behind the very reserve() they go ahead of, they left
    // postgres.js's queue a request whose reconnect outlived the client
    // (3 of 11 runs of postgres_refused_connection_test.ts; 0 of 8 so).
    const probe = this.#client`SELECT ${1}::int`;
    // Never sent again (see `neverResent`): on a session that lost its
    // statements, several probes on one connection would be.
    neverResent(probe);
    return probe;
  }

  /**
   * Sends `n` probes (`SELECT 1`) at once: for each, whether it reached the
   * server (an answer, or the server's own error such as a kept goodbye),
   * did not (it is down), or met a client that was ended.
   */
  async #selectOnes(n: number): Promise<("reached" | "unreached" | "ended")[]> {
    return (await this.#selectAnswers(n)).map((error) => {
      if (error === undefined) return "reached";
      const { code } = (error ?? {}) as { code?: unknown };
      return code === "CONNECTION_ENDED" ? "ended" : "unreached";
    });
  }

  /** The tables, as the store's statements name them now (see `namingOf`). */
  get #t(): Tables {
    return this.#naming.tables;
  }

  /** How many times a statement of the stores of this client and schema was refused as stale. */
  get #epoch(): number {
    return this.#naming.epoch;
  }

  /**
   * After a statement built at `epoch` was refused as stale: from now on,
   * the statements of the stores on this client and schema name its tables
   * anew (`tablesAt`), so each is a statement no connection has prepared,
   * prepared afresh on first use. postgres.js 3.4.9 keeps a stale
   * statement for its connection, and would bind it again on every later
   * use there. Once per change: a refusal of a statement built before the
   * last one changes nothing more.
   */
  #forget(epoch: number): void {
    const naming = this.#naming;
    if (epoch !== naming.epoch) return;
    naming.epoch++;
    naming.tables = tablesAt(this.#sql, this.#schema, naming.epoch);
  }

  /**
   * The query `ask` makes, within `connectionWaitMs`, and
   * {@linkcode PostgresStore.#absorb} should it find its connection lost.
   * A query rejected with a server's goodbye was never sent (see
   * `goodbyeBeforeSent`): postgres.js 3.4.9 kept it from a connection the
   * server ended under another query, and handed it to this one as it
   * opened that connection again, long after the server was back. It is
   * asked again, once more than the pool has connections (each keeps one
   * goodbye at most, and is open once it handed it on). An answer with no
   * statement completed is not the query's (see `noneCompleted`): the
   * connection was lost under it: asked once more. A query whose
   * connection ended before or while it was sent (see `endedUnder`) is
   * asked again, up to once for each connection of the pool, so that the
   * last goes on a connection opened anew: it writes nothing (none of
   * these runs inside a transaction), and the server's end of an idle
   * connection (`pg_terminate_backend`, `idle_session_timeout`, a
   * restarted pooler, a failover, which ends them all) is met by the next
   * query sent on it, one query each. Lost more often than that, it fails
   * as it did. `ofWrite`: the read of a write, none of
   * whose statements is sent before it answers, so one unanswered in time
   * is marked as nothing written.
   */
  async #watched<T>(
    ask: () => Promise<T>,
    what = "read",
    ofWrite = false,
  ): Promise<T> {
    // Before the query is awaited: postgres.js sends nothing until then.
    this.#open(what);
    let epoch = this.#epoch;
    let query = ask();
    neverResent(query);
    let gaveUp = false;
    let stale = 0;
    let loginRefused = false;
    // Reads asked again as their connection ended under them (see
    // `endedUnder`), and whether one was as its answer came back empty.
    let lost = 0;
    let emptyAsked = false;
    // Reads asked again after a serialization failure (`SERIAL_READS`).
    let serial = 0;
    const asks = (Number(this.#sql.options?.max) || 1) + 1;
    const watched = (async () => {
      for (let asked = 1;; asked++) {
        let answer: T;
        try {
          answer = await query;
        } catch (error) {
          if (connectionLost(error)) {
            this.#absorb();
            // Its close is reported a turn after the error (see #absorb):
            // a read asked again, or the caller's next, waits for it.
            await this.#pause(0);
          }
          if ((error as { code?: unknown })?.code === "55P03") {
            LOCKED_READS.add(error as object);
          }
          // The pooler's words as it ended a connection in statement mode,
          // kept for this read, which opened it again and was not sent.
          const pooled = statementModeWords(error);
          if (pooled !== undefined) this.#statementMode = pooled;
          const lostStatement = (error as { code?: unknown })?.code ===
            "26000";
          if (refusedAsStale(error)) {
            // Its statement is stale on that connection: later statements
            // go under new names, which no connection has prepared.
            this.#forget(epoch);
            if (
              !lostStatement && stale < STALE_READS && !gaveUp && !this.#closed
            ) {
              // A schema change altered what it returns: asked again.
              stale++;
              epoch = this.#epoch;
              query = ask();
              neverResent(query);
              continue;
            }
            if (!lostStatement && !gaveUp && !this.#closed) {
              // The schema changed under each of its asks.
              throw new Error(
                `The store's ${what} failed as PostgreSQL refused its statement as stale ${
                  stale + 1
                } times: the schema changed under it (${
                  oneLine(String((error as Error).message))
                }); try again`,
                { cause: error },
              );
            }
          }
          if (lostStatement) {
            // The session does not know it: a pooler in transaction mode
            // sent the read to another server session (or the session was
            // reset). Said, not hidden behind a read asked again; with its
            // code, so that a write it is the read of says it as its own.
            throw Object.assign(
              new Error(
                `The store's ${what} failed as PostgreSQL does not know a statement this client prepared: a pooler in transaction mode (PgBouncer, Supavisor) sent it to another server session; ${POOLER_FIX}`,
                { cause: error },
              ),
              { code: "26000" },
            );
          }
          if (
            (error as { code?: unknown })?.code === "28P01" &&
            !loginRefused && !gaveUp && !this.#closed
          ) {
            // A login refused (28P01) sent nothing of the read, and a read
            // changes nothing: asked once more, on a connection opened
            // anew. A connect begun before the role's password was renewed
            // answers its refusal after the renewal; the next one logs in.
            // A password still wrong is refused again, and said so.
            loginRefused = true;
            query = ask();
            neverResent(query);
            continue;
          }
          if ((error as { code?: unknown })?.code === "40001") {
            if (serial < SERIAL_READS && !gaveUp && !this.#closed) {
              // Ended for other SERIALIZABLE transactions (see
              // `SERIAL_READS`): nothing read, nothing written.
              serial++;
              query = ask();
              neverResent(query);
              continue;
            }
            // A write's read: nothing of the write was sent.
            const mark = ofWrite ? notWritten : <E extends Error>(e: E) => e;
            const words = oneLine(String((error as Error).message));
            // A hot standby cancels a read in the way of its replay with the
            // same code, at any isolation level: no SERIALIZABLE there. In
            // the routine that takes interrupts, which no lc_messages
            // translates (a German server says "storniere Anfrage wegen
            // Konflikt mit der Wiederherstellung"); SERIALIZABLE's own
            // failures come from the predicate locks' routines.
            const recovery = /conflict with recovery/.test(words) ||
              (error as { routine?: unknown }).routine === "ProcessInterrupts";
            throw mark(
              new Error(
                `The store's ${what} failed as PostgreSQL ended it ${
                  serial + 1
                } times ${
                  recovery
                    ? `for a conflict with recovery (${words}): the server is a hot standby, whose replay of its primary's changes cancels a read in its way (at once where it is behind by more than max_standby_streaming_delay); nothing was read; retry, and check that the store's URL names the primary, which its writes need`
                    : `with a serialization failure (${words}): the database's or role's default_transaction_isolation is serializable (SHOW default_transaction_isolation), so the store's reads run at that level beside other SERIALIZABLE transactions on its tables; nothing was read; retry, or give the store's role READ COMMITTED (ALTER ROLE … SET default_transaction_isolation = 'read committed'), which its writes set for themselves`
                }`,
                { cause: error },
              ),
            );
          }
          if (
            lost < asks - 1 && !gaveUp && !this.#closed && endedUnder(error)
          ) {
            // Its connection ended under it: asked again (see above).
            lost++;
            query = ask();
            neverResent(query);
            continue;
          }
          if (
            // A goodbye's asks are not spent on a lost connection's.
            gaveUp || this.#closed ||
            asked >= asks + lost + serial + (emptyAsked ? 1 : 0) ||
            !(goodbyeBeforeSent(error) || pooled !== undefined)
          ) {
            if (pooled !== undefined) {
              throw new Error(
                `The store's ${what} failed as the pooler in front of PostgreSQL ended its connection (${pooled}): nothing was read; retry. Its pool mode is statement (PgBouncer's pool_mode = statement), which ends a connection at each write's BEGIN: ${STATEMENT_MODE_FIX}`,
                { cause: error },
              );
            }
            throw unmigrated(
              error,
              `The store's ${what} failed`,
              this.#schema,
            ) ??
              refusedConnection(error, `The store's ${what} failed`, "read") ??
              abortedSession(`run the store's ${what}`, "read", error) ??
              (socketLost(error) ? lostDuringRead(what, error) : error);
          }
          query = ask();
          neverResent(query);
          continue;
        }
        if (noneCompleted(answer)) {
          if (emptyAsked || gaveUp || this.#closed) throw emptyRead(what);
          // Its connection was lost under it, and opened anew for the
          // bytes it left (see `noneCompleted`): asked once more.
          emptyAsked = true;
          query = ask();
          neverResent(query);
          continue;
        }
        return ownRows(answer);
      }
    })();
    return await bounded(watched, this.#waitMs, () => {
      gaveUp = true;
      // Not left to run for nobody: the one running on its connection is
      // cancelled (its cancel's failure held, see cancelQuietly). One sent
      // behind another on its connection (pipelined: every connection of
      // the pool busy) is left to run, its answer unread: postgres.js
      // 3.4.9 cancels it by dropping it once it is next, and gives its
      // answer to the query sent after it, another caller's read.
      // One not sent yet leaves the pool's queue (else a long partition
      // queues every read it fails, each then run at the heal), but is not
      // marked cancelled: it may be the first query of a connection being
      // opened, and postgres.js 3.4.9 skips a cancelled one there without
      // handing the connection to the pool, which then never takes a
      // query again (after a restart or a partition whose reconnects
      // outlast the bound: every read failed until the connections'
      // max_lifetime, 30 to 60 min). Such a first query runs, its answer
      // unread.
      const pending = query as {
        state?: unknown;
        active?: unknown;
        cancelled?: unknown;
      };
      const sent = pending.state != null;
      if (!sent || pending.active === true) cancelQuietly(query);
      if (sent && pending.active === true) {
        OWN_CANCELS.set(this.#sql, { at: performance.now(), by: this });
      }
      if (!sent && pending.state == null) pending.cancelled = null;
      const late = new Error(
        `PostgreSQL did not answer the store's ${what} within ${this.#waitMs}ms: the pool is busy, ${this.#unreached()}; retry`,
      );
      return ofWrite ? notWritten(late) : late;
    });
  }

  /**
   * Why the server may not have been reached, for the error of a call that
   * got no answer or no connection in time, said only then: on Cloudflare
   * Workers, where the client asks for TLS, workerd may have refused the
   * server's certificate, which it keeps to its own log and tells
   * postgres.js nothing of (`migrate()` names it too).
   */
  #unreached(): string {
    return this.#sql.options?.ssl && onWorkers()
      ? "the server is unreachable, or workerd refused its TLS certificate (one not naming the host dialled, or chaining to no CA Cloudflare trusts: workerd tells the client nothing)"
      : "or the server is unreachable";
  }

  /** Whether `promise` settled within `ms` (`connectionWaitMs` by default). */
  async #within(
    promise: Promise<unknown>,
    ms: number = this.#waitMs,
  ): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    return await Promise.race([promise.then(() => true), late]).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
    });
  }

  /**
   * The transaction of a client made with `fetch_types: false`: through
   * `sql.begin`, which waits for a connection on its own. If none came
   * within `connectionWaitMs`, the write fails as on the other path, and
   * should the connection come later, the transaction it begins rolls
   * back at once: nothing of it lands after its failure was answered. A
   * `BEGIN` rejected with a server's goodbye was never sent (see
   * `goodbyeBeforeSent`), and is asked again, as a read is. Once it has its
   * connection, its answers are waited for within `connectionWaitMs`, as a
   * flight's are: a server that stops answering (a `COMMIT` waiting for a
   * synchronous standby that is gone, a partition) fails the write with
   * "did not answer … it may have landed or not", where it held the write,
   * and its delivery, for as long as that lasted. The transaction is left
   * to postgres.js, and its connection goes back to the pool once it ends.
   */
  async #begin<T>(
    work: Work<T>,
  ): Promise<T> {
    this.#open("write", true);
    let started = false;
    let abandoned = false;
    const asks = (Number(this.#sql.options?.max) || 1) + 1;
    let epoch = this.#epoch;
    let staleAsked = false;
    // The write's answer once its own COMMIT committed it.
    let landed: { value: T } | undefined;
    // The bound on its answers, from the moment it has its connection.
    let unanswered: ReturnType<typeof setTimeout> | undefined;
    let silent: (error: Error) => void = () => {};
    const silence = new Promise<never>((_, reject) => {
      silent = reject;
    });
    const begun = (async () => {
      for (let asked = 1;; asked++) {
        try {
          return await this.#beginOnce(work, () => abandoned, () => {
            started = true;
            if (unanswered !== undefined) clearTimeout(unanswered);
            unanswered = setTimeout(() => {
              // Nothing of it starts again (a statement refused as stale
              // would), and a late failure is no one's to catch.
              abandoned = true;
              begun.catch((error) => {
                if (connectionLost(error)) this.#absorb();
              });
              // Unless it is between tries (the first refused as stale,
              // rolled back; the second with no connection or BEGIN yet):
              // then nothing of it was written, nor will be.
              silent(
                started
                  ? new Error(
                    `PostgreSQL did not answer the write within ${this.#waitMs}ms: it may have landed or not; the next read says which`,
                  )
                  : noConnection(this.#waitMs, this.#unreached()),
              );
            }, this.#waitMs);
          }, (value) => {
            landed = { value };
            this.#statementMode = undefined;
          });
        } catch (error) {
          // A statement refused as stale (never sent again: see
          // `#beginOnce`): the transaction rolled back, nothing of it
          // written, and the write goes again once, under new names,
          // which no connection has prepared. Refused again so, prepared
          // anew on the schema as it is now: a change this version's
          // statements do not fit, which trying again cannot mend.
          const code = (error as { code?: unknown })?.code;
          if (refusedAsStale(error)) this.#forget(epoch);
          if (refusedAsStale(error) && code !== "26000") {
            if (staleAsked && code !== "0A000") {
              throw Object.assign(new Error(UNFIT, { cause: error }), {
                code: UNFIT,
              });
            }
            if (!staleAsked && !abandoned && !this.#closed) {
              staleAsked = true;
              started = false;
              epoch = this.#epoch;
              continue;
            }
          }
          if (
            started || abandoned || this.#closed || asked >= asks ||
            !goodbyeBeforeSent(error)
          ) throw error;
          this.#absorb();
        }
      }
    })();
    try {
      return await Promise.race([
        bounded(begun, this.#waitMs, () => {
          // It has its connection: its answers are bounded from then on.
          if (started) return undefined;
          abandoned = true;
          return noConnection(this.#waitMs, this.#unreached());
        }),
        silence,
      ]);
    } catch (error) {
      if (landed !== undefined) {
        // Failed after the store's COMMIT AND CHAIN committed it, as
        // postgres.js's own COMMIT of the empty transaction after did (its
        // connection lost): it landed, and says so, not that it may have.
        if (connectionLost(error)) this.#absorb();
        return landed.value;
      }
      // No connection was handed to it yet: nothing of it was sent.
      if (!started && socketLost(error)) {
        throw lostBeforeWrite(error, this.#statementMode, this.#idleSession);
      }
      if (!started || !connectionLost(error)) throw error;
      this.#absorb();
      throw lostDuringWrite(error, this.#statementMode, this.#idleSession);
    } finally {
      if (unanswered !== undefined) clearTimeout(unanswered);
    }
  }

  /**
   * One `sql.begin` of {@linkcode PostgresStore.#begin}: `start` is called
   * once it has its connection, `done` with the write's answer once the
   * store's `COMMIT AND CHAIN` committed it.
   */
  #beginOnce<T>(
    work: Work<T>,
    abandoned: () => boolean,
    start: () => void,
    done: (value: T) => void,
  ): Promise<T> {
    // The transaction's connection, once its first statement was sent: a
    // ROLLBACK or COMMIT of postgres.js's own that failed (a cancel cut
    // it) leaves its session inside the transaction, and postgres.js 3.4.9
    // keeps the connection as that transaction's for good (it hands one
    // back only once the server says the session is outside any): closed,
    // it is opened again for the pool.
    const seen = seenOn();
    return this.#sql.begin(ISOLATION, async (tx) => {
      if (abandoned()) throw new Error("abandoned: no connection in time");
      start();
      // The writes' lock waits are bounded as on the flight's path: else a
      // write held up by another session's lock would keep its connection,
      // and its delivery, for as long as the lock lasts.
      // A statement lost with its connection never settles, so that no
      // `ROLLBACK` is sent on it (`unlessLost`).
      const value = await work(tx, async (writes) => {
        const answers = await unlessLost(Promise.all([
          tx.unsafe(
            `SET LOCAL lock_timeout = ${this.#lockMs}; ${IN_WRITE}; ${DURABLE}`,
            [],
            seen.options,
          ).execute(),
          // Never sent again by postgres.js: one refused as stale would
          // go behind the statements sent since, asking for its
          // description first, and be read out of order.
          // Marked as the flight's are (`WRITE_MARK`).
          ...writes.map((q) => (neverResent(marked(q)), q.execute())),
          // Deferred constraints and constraint triggers (an operator's,
          // on the store's tables) are checked first, inside the
          // transaction: one that failed at COMMIT AND CHAIN itself ended
          // the transaction without chaining one, postgres.js handed the
          // connection back, and the ROLLBACK it then sent for the failed
          // callback was queued on a connection no longer its own, never
          // sent: the write never answered. Failed here, the transaction
          // aborts, and COMMIT AND CHAIN answers ROLLBACK inside a new one.
          tx.unsafe("SET CONSTRAINTS ALL IMMEDIATE").execute(),
          // The store commits, in a simple query, never prepared, and
          // begins an empty transaction for postgres.js's own COMMIT to
          // end. That COMMIT is prepared: on a session that lost the
          // client's statements (DEALLOCATE ALL, a pooler in transaction
          // mode) it was refused (26000), which aborted the transaction,
          // and postgres.js sent it again, which answered ROLLBACK: a
          // write whose statements were new there answered that it
          // landed, and nothing of it had. One statement (PostgreSQL 12
          // and later), so that the connection is never idle out of a
          // transaction before postgres.js's COMMIT: postgres.js 3.4.9
          // hands a connection so idle back to the pool under the
          // `sql.begin()` still using it.
          tx.unsafe("COMMIT AND CHAIN").execute(),
        ]));
        // Not the statements' answers (see `noneCompleted`): the
        // connection was lost under them, and the COMMIT was sent.
        if (answers.some(noneCompleted)) throw emptyWrite();
        const ended = answers.at(-1)?.command;
        if (ended !== "COMMIT") throw notCommitted(ended);
        return answers.slice(1, -2);
      });
      done(value);
      return value;
    }).catch((error) => {
      if (endLeftOpen(error) && closeSession(seen.connection)) this.#absorb();
      throw error;
    }) as Promise<T>;
  }

  /**
   * One statement in a READ COMMITTED transaction of its own (`BEGIN`, the
   * statement and `COMMIT` in one flight): run alone, it would take the
   * database's default level, and under REPEATABLE READ or SERIALIZABLE
   * two deliveries counted at once fail with a serialization error.
   */
  async #one(
    build: (sql: Sql) => postgres.PendingQuery<postgres.Row[]>,
  ): Promise<postgres.RowList<postgres.Row[]>> {
    return await this.#transaction(async (tx, commit) =>
      (await commit([build(tx)]))[0]!
    );
  }

  /**
   * A connection of this write's own, or an error after `ms`
   * (`connectionWaitMs` by default). Connections that come after that, or
   * after another `reserve()` of this wait came first, are released at
   * once.
   *
   * postgres.js 3.4.9 loses a `reserve()` waiting in its queue when a
   * connection of the pool closes (a server restart, a failover,
   * `pg_terminate_backend`, `max_lifetime`): it hands the head of its
   * queue to the closed connection to open it again, and drops a
   * `reserve()` handed so once it is open (porsager/postgres#1195). So
   * after each close while it waits, this asks again: nothing was sent
   * for a connection not yet had, and one `reserve()` queued after the
   * close is not lost to it. A lost one never settles, and holds nothing
   * of ours.
   *
   * After any close, the pool's closed connections are handed to plain
   * queries first ({@linkcode PostgresStore.#reopenClosed}), so that the
   * `reserve()` waits for one of them instead of opening one itself. One
   * rejected with a server's goodbye was never handed a connection (see
   * `goodbyeBeforeSent`), and asks again.
   */
  #reserve(ms: number = this.#waitMs): Promise<postgres.ReservedSql> {
    // postgres.js 3.4.9's `reserve()` on an ended client never settles.
    if (this.#closed) return Promise.reject(closedError("write", true));
    // Whether a connection was handed to the write, or the write gave up:
    // any that comes after is released.
    let done = false;
    let stopWatch = () => {};
    let abandon: (error: unknown) => void = () => {};
    const reserving = new Promise<postgres.ReservedSql>((resolve, reject) => {
      abandon = reject;
      const fail = (error: unknown) => {
        if (done) return;
        done = true;
        stopWatch();
        reject(error);
      };
      // How many goodbyes are asked again, at most: each connection of
      // the pool keeps one, and is open once it handed it on.
      let goodbyes = (Number(this.#sql.options?.max) || 1) + 1;
      const reserve = () => {
        // In turn with the client's other `reserve()`s, or postgres.js may
        // hand two of them one connection (see `_reserve_turns.ts`).
        reserveInTurn(this.#client, () => done).then((connection) => {
          if (connection === null) return;
          if (done) return connection.release();
          done = true;
          stopWatch();
          resolve(connection);
        }, (error) => {
          if (connectionLost(error)) this.#absorb();
          if (done) return;
          if (goodbyeBeforeSent(error) && !this.#closed && --goodbyes > 0) {
            return ask(true);
          }
          fail(error);
        });
      };
      // `failUnreached`: whether the write fails when the plain queries
      // reached no server (not for a close's ask: the write's own is out).
      const ask = (failUnreached: boolean) => {
        if (this.#closes.count === this.#reopenedAt) return reserve();
        void this.#reopenClosed().then((unreached) => {
          if (done || this.#closed) return;
          if (unreached === undefined) reserve();
          else if (failUnreached) fail(unreached);
        });
      };
      ask(true);
      stopWatch = onPoolClose(this.#sql, () => {
        if (!done && !this.#closed) ask(false);
      });
    });
    // Once: a reserve past its bound may still be awaited when `close()`
    // comes.
    let releasing = false;
    const releaseLate = () => {
      if (releasing) return;
      releasing = true;
      done = true;
      stopWatch();
      reserving.then((late) => late.release(), () => {});
      // Settled now if it is not yet: a write that gave up before its turn
      // came (or whose reserve() never settles) otherwise left its wait's
      // watch of close() in the store for good, kilobytes a write. One
      // that comes later is released where it comes (`done`).
      abandon(new Error("The write stopped waiting for a connection."));
    };
    return bounded(
      this.#untilClosed(reserving, "write", releaseLate),
      ms,
      () => {
        releaseLate();
        return noConnection(ms, this.#unreached());
      },
    );
  }

  /**
   * After a connection of the pool closed, before a write's `reserve()`:
   * one `SELECT 1` probe, then, once it reached the server, one per
   * connection of the pool, sent at once, and the `reserve()` only once the
   * pool has handed them out: they take the open connections first, then
   * open the closed ones, each taking the server's goodbye postgres.js
   * 3.4.9 kept for it (see `goodbyeBeforeSent`), and the `reserve()` waits
   * in the pool's queue for the first connection handed back. A
   * `reserve()` that finds no connection open opens a closed one itself,
   * and waits in the pool's queue meanwhile: should the kept goodbye or a
   * failed connect reject it, the connection, once open, is handed from
   * that queue to the rejected `reserve()`, and never to the pool again
   * (until its `max_lifetime`, 30 to 60 min, or the server ends it). After
   * a restart, every connection of the pool was so lost, and every read and
   * write failed until then.
   *
   * The writes waiting meanwhile share the probe, for `PROBE_MS` at most
   * (a query handed to a connection between its socket's error and its
   * close never settles in postgres.js 3.4.9): past it, the `SELECT 1`s go
   * all the same. One round of them goes per close.
   *
   * A pool's worth, not one per close: postgres.js 3.4.9 opens its closed
   * connections again in the order they closed, the ones never opened
   * first, so a `SELECT 1` per close would open those and leave the
   * goodbye to a later request. And not only after a close under one of
   * the store's own queries: `onclose` gives only an id, and a query of
   * the client's that is not the store's keeps one as well (an idle close
   * keeps none, but the store cannot tell one).
   *
   * @returns The probe's error, if it did not reach the server (the write
   * fails with it, no `reserve()` made: while the server is down, one
   * connect a write, not a pool's worth); else `undefined`.
   */
  async #reopenClosed(): Promise<unknown> {
    this.#probing ??= this.#probe().finally(() => {
      this.#probing = undefined;
    });
    const unreached = await this.#probing;
    if (unreached !== undefined) return unreached;
    // Closed meanwhile (which cut the probe short): nothing more is sent.
    if (this.#closed) return undefined;
    if (this.#reopenedAt === this.#closes.count) return undefined;
    this.#reopenedAt = this.#closes.count;
    const max = Number(this.#sql.options?.max) || 1;
    for (let n = 0; n < max; n++) this.#selectOne().execute().catch(() => {});
    // postgres.js hands a query to the pool a microtask after `execute()`:
    // the `reserve()` after these finds no connection open nor closed.
    await Promise.resolve();
    await Promise.resolve();
    return undefined;
  }

  /**
   * One `SELECT 1`: `undefined` if it reached the server (an answer, or the
   * server's own error such as a kept goodbye) or did not settle within
   * `PROBE_MS` (or half of `connectionWaitMs`, if less); else its error.
   */
  async #probe(): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Cut short by `close()` too: a probe never answered (see above)
    // otherwise kept its timer for up to `PROBE_MS` past the client's end.
    let stop = () => {};
    const late = new Promise<undefined>((resolve) => {
      stop = () => resolve(undefined);
      timer = setTimeout(
        stop,
        Math.min(PROBE_MS, Math.ceil(this.#waitMs / 2)),
      );
    });
    this.#onClose.add(stop);
    try {
      const [answer] = await Promise.race([this.#selectAnswers(1), late]) ??
        [];
      return answer;
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      this.#onClose.delete(stop);
    }
  }

  /**
   * A read outside any write, as {@linkcode PostgresStore.#watched} runs
   * it; its statement cancelled (`57014`: `pg_cancel_backend`, the role's
   * or database's `statement_timeout`) fails with the store's own error,
   * which says so, that nothing was read and to retry, as a write's
   * cancel says it (see {@linkcode PostgresStore.#run}), with the server's
   * error as its cause; and so does one the role's or database's
   * `lock_timeout` ended (`55P03`) behind a table lock.
   */
  async #readOnly<T>(what: string, ask: () => Promise<T>): Promise<T> {
    try {
      return await this.#watched(ask);
    } catch (error) {
      // Refused before anything was sent: nothing read or written.
      if (CLOSED_READS.has(error as Error)) throw notRead(error as Error);
      if (serializableOnStandby(error)) {
        throw new Error(
          `The store's ${what} failed as the server is a hot standby whose database or role defaults to SERIALIZABLE, which a standby refuses (${
            oneLine(String((error as Error).message))
          }): nothing was read; connect to the primary`,
          { cause: error },
        );
      }
      if ((error as { code?: unknown })?.code === "55P03") {
        throw new Error(
          `The store's ${what} failed as the role's or database's lock_timeout ended its wait for a table lock another session held (${
            tableLockWait(error)
          }): nothing was read; retry`,
          { cause: error },
        );
      }
      if ((error as { code?: unknown })?.code === "42501") {
        await this.#grantsShown(
          `The store's ${what} failed`,
          error,
          true,
          false,
        );
      }
      if ((error as { code?: unknown })?.code !== "57014") throw error;
      throw new Error(
        `The store's ${what} failed as ${
          cancelled(error, this.#ownCancel(), "read")
        }`,
        { cause: error },
      );
    }
  }

  /**
   * Sends `n` probes (`SELECT 1`) at once: for each, `undefined` if it reached
   * the server (an answer, or the server's own error such as a kept
   * goodbye), else its error (the server is down, or the client was ended).
   */
  async #selectAnswers(n: number): Promise<unknown[]> {
    const answers = await Promise.allSettled(
      Array.from({ length: n }, () => this.#selectOne()),
    );
    return answers.map((answer) => {
      if (answer.status === "fulfilled") return undefined;
      this.#statementMode = statementModeWords(answer.reason) ??
        this.#statementMode;
      const { severity } = (answer.reason ?? {}) as { severity?: unknown };
      return severity === undefined ? answer.reason : undefined;
    });
  }

  /**
   * Reads the intent with its hold and lease, outside any transaction (one
   * round trip, on the pool, within `connectionWaitMs`), to decide a write
   * on; or throws a `ConflictError` if it is missing or not at `version`
   * (`null`: any). The write then takes a connection of its own and sends
   * one flight that begins with {@linkcode PostgresStore.#stillAt}: the
   * decision lands only on what was read (see
   * {@linkcode PostgresStore.#transaction}).
   */
  async #read(
    id: string,
    version: string | null,
    what: string,
    options: WriteOptions = {},
  ) {
    const uncounted = uncountedKeys(options);
    // A write's read: nothing of the write is sent before it answers.
    const [row] = await this.#watched(
      () =>
        this.#intentQuery(
          this.#sql,
          id,
          true,
          uncounted,
          markedAt(options),
        ),
      "read",
      true,
    );
    if (mayBeHidden(row)) {
      // Nothing of the write was sent: a role row-level security hides
      // the intent or its hold from is the store failing, not a refusal.
      await this.#rowsShown(what, notWritten);
    }
    if (row === undefined) {
      throw new ConflictError(`Cannot ${what} as the intent does not exist`, {
        refused: true,
      });
    }
    if (version !== null && String(row.version) !== version) {
      throw new ConflictError(
        `Cannot write intent ${id} as it changed since it was read; re-read it`,
      );
    }
    if (row.counted !== undefined && row.counted !== null) {
      throw countedRefusal(id, String(row.counted));
    }
    return row;
  }

  /**
   * Creates an intent and its hold, in one statement (setup and admin).
   *
   * @param intent The intent's fields.
   * @returns The intent as stored, at version `"1"`.
   * @throws {ConflictError} If an intent with that id exists.
   * @throws {TypeError} If a field is invalid or one a new intent does not
   * take (a misspelling; an intent's `version` is ignored).
   */
  createIntent(intent: NewIntent): Promise<Intent> {
    return this.#run(`create intent ${String(intent?.id)}`, async () => {
      const last = intent?.lastBroadcast;
      const record = newIntentRecord(
        last
          ? {
            ...intent,
            lastBroadcast: mendedBroadcast(last, this.#encoding()),
          }
          : intent,
      );
      checkRecord(record);
      const { intents, holds } = this.#t;
      // One statement: the intent and its hold, or nothing if it exists.
      const [row] = await this.#one((sql) =>
        sql`
        WITH created AS (
          INSERT INTO ${intents} ${
          sql({ id: record.id, ...intentColumns(record) })
        }
          ON CONFLICT (id) DO NOTHING
          RETURNING id, version
        ), held AS (
          INSERT INTO ${holds} (intent_id, state)
          SELECT id, ${record.hold}::text FROM created
          WHERE ${record.hold}::text IS NOT NULL
        )
        SELECT version FROM created`
      );
      if (row === undefined) {
        throw new ConflictError(
          `Cannot create intent ${record.id} as it exists`,
          { refused: true },
        );
      }
      return toIntent(record, row.version);
    });
  }

  /**
   * Reads an intent with its hold and last broadcast, in one statement.
   *
   * @param id The intent id.
   * @returns The intent, or `null` if there is none.
   */
  async getIntent(id: string): Promise<Intent | null> {
    if (unkeptKey(id)) return null; // no such row can exist
    const [row] = await this.#readOnly(
      `read of intent ${id}`,
      () => this.#intentQuery(this.#sql, id, false),
    ).catch(noneUnencodable);
    if (mayBeHidden(row)) {
      await this.#rowsShown(`read intent ${id}`, notRead);
    }
    return row === undefined ? null : toIntent(recordOf(row), row.version);
  }

  /**
   * Throws, marked by `mark`, if row-level security hides rows of the
   * store's tables from this role: asked only when a read found no intent
   * or an intent without its hold, which is what such a role reads (no
   * error, no row) once an admin enables row-level security after the
   * start (`migrate()` refuses it at start). Read as missing, a live
   * payment's job was dropped ("intent … not found" until the last
   * delivery) and one read without its hold was poisoned at once ("the
   * hold … is not recorded"), its hold left pending: stranded. Thrown as
   * the store failing, a delivery answers "retry" (503) until someone
   * lets the role see its rows.
   */
  async #rowsShown(
    what: string,
    mark: <E extends Error>(error: E) => E,
  ): Promise<void> {
    const ask = (query: string) =>
      this.#readOnly(
        "check of row-level security",
        async () =>
          ownRows(
            await this.#sql.unsafe(`${query}, $1::int AS described`, [1]),
          ),
      );
    // A lookup first: none of the tables has it, nothing more to ask.
    const [secured] = await ask(rowSecured(this.#schema));
    if (secured?.secured !== true) return;
    const [answer] = await ask(rowSecurity(this.#schema));
    const hidden = String(answer?.hidden ?? "");
    if (hidden === "") return;
    throw mark(
      new Error(
        `Cannot ${what} as row-level security hides rows of ${hidden} from this role: add a policy for it that lets it see and write every row, give it BYPASSRLS, or disable row-level security there. Nothing was written; deliveries retry until then (a row read as missing dropped a live payment's job)`,
      ),
    );
  }

  /**
   * The last cancel of a read of its own that a store on this client sent
   * (see `OWN_CANCELS`), within `OWN_CANCEL_MS`: how long ago, and whether
   * this store sent it; `null`: none so lately.
   */
  #ownCancel(): OwnCancel | null {
    const last = OWN_CANCELS.get(this.#sql);
    if (last === undefined) return null;
    const ms = performance.now() - last.at;
    return ms < OWN_CANCEL_MS ? { ms, ours: last.by === this } : null;
  }

  /**
   * The prepared transactions (`PREPARE TRANSACTION`, two-phase commit)
   * of this database that hold a lock on one of the store's tables, as
   * `'gid', prepared at … by role`, comma-separated; empty where none
   * does, or the question failed (asked after a write's lock wait ended,
   * on the pool, within `connectionWaitMs`).
   */
  async #preparedHolders(): Promise<string> {
    try {
      const [row] = ownRows(
        await this.#watched(() =>
          this.#sql.unsafe(preparedLocks(this.#schema), [1])
        ),
      );
      return String(row?.held ?? "");
    } catch {
      return "";
    }
  }

  /**
   * Throws, as the store failing, what the start's check of the role
   * (`migrated`) finds missing now: a privilege revoked (`missing`), rows
   * row-level security hides (`hidden`), or writes no policy lets the role
   * make (`unwritable`), after the server refused a statement for a
   * privilege (`42501`) or, where `secured` (only where one of the tables
   * has row-level security), a compare-and-set found its row gone. The
   * statement's transaction rolled back: nothing was written (`read`:
   * nothing was read). `head` begins the error's words (`Cannot …`).
   * Returns where the check finds nothing, or fails
   * itself: the caller throws what it had.
   */
  async #grantsShown(
    head: string,
    cause: unknown,
    read: boolean,
    secured: boolean,
  ): Promise<void> {
    let answer: Row | undefined;
    try {
      const ask = async (query: string) =>
        ownRows(
          await this.#watched(() =>
            this.#sql.unsafe(`${query}, $1::int AS described`, [1])
          ),
        );
      if (secured) {
        const [lookup] = await ask(rowSecured(this.#schema));
        if (lookup?.secured !== true) return;
      }
      [answer] = await ask(migrated(this.#schema));
    } catch {
      return;
    }
    const done = read ? "Nothing was read" : "Nothing was written";
    const mark = read ? notRead : notWritten;
    const missing = String(answer?.missing ?? "");
    const hidden = String(answer?.hidden ?? "");
    const unwritable = String(answer?.unwritable ?? "");
    const why = missing !== ""
      ? `this role lacks ${missing} (${
        oneLine(String((cause as Error)?.message))
      }): grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner`
      : hidden !== ""
      ? `row-level security hides rows of ${hidden} from this role (no policy lets it read them, or its row_security is off: ${
        oneLine(String((cause as Error)?.message))
      }): add a policy for it that lets it see and write every row, give it BYPASSRLS, or disable row-level security there`
      : unwritable !== ""
      ? `row-level security lets this role read but not write there: no policy allows it ${unwritable}, so those writes change no row or fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there`
      : undefined;
    if (why === undefined) return;
    throw mark(
      new Error(
        `${head} as ${why}. ${done}; deliveries retry until then`,
        { cause },
      ),
    );
  }

  /**
   * One delivery write, two round trips: the intent's read; then, once the
   * version, the rule and the lease are checked here, one flight of
   * `BEGIN`, the compare-and-set check, the lease, the replay record, the
   * intent, its hold and the dead letter, and `COMMIT`.
   */
  #writeIntent(
    id: string,
    version: string,
    what: string,
    update: (record: IntentRecord) => IntentRecord,
    options: WriteOptions,
    deadLetter?: DeadLetter,
    late?: (record: IntentRecord) => IntentRecord | null,
  ): Promise<Intent> {
    return this.#run(what, async () => {
      // The arguments first, a malformed one a TypeError naming it, as in
      // the other stores; then the version (one no store made is a race
      // lost).
      if (options.lease) checkLease(options.lease);
      if (options.claim) checkClaim(options.claim);
      if (deadLetter) checkDeadLetter(deadLetter);
      if (deadLetter) checkResetCount(options.resetCount);
      const uncounted = uncountedKeys(options);
      checkVersion(id, version);
      assertIndexable("write an intent", "claim.key", options.claim?.key);
      assertIndexable(
        "write an intent",
        "jobId",
        deadLetter?.jobId,
        JOB_ID_BYTES,
      );
      if (options.claim) await this.#sweep(options.claim.now);
      // A send that outlived its settling: its record, on the version it
      // read, is written on the intent as it is now
      // (lateBroadcastRecorded), checked on that; a race lost to another
      // write is decided again. `error` is the answer where the rule does
      // not apply, and to a version the intent never had (one ahead of
      // it): no send read that one. The give-up marks are checked by the
      // write on the intent as it is now, not by this read: a version
      // the rule does not apply to is a race lost, whatever mark is on
      // record, as in the other stores (the version before the marks).
      const writeLate = async (error: unknown): Promise<Intent> => {
        for (let attempt = 1;; attempt++) {
          const now = await this.#read(id, null, `write intent ${id}`);
          if (!isEarlierCount(version, String(now.version))) throw error;
          const next = late!(recordOf(now));
          if (next === null) throw error;
          const held = now.lease_owner === null ? null : {
            owner: String(now.lease_owner),
            expiresAt: Number(now.lease_expires_at),
          };
          try {
            return await this.#writeIntent(
              id,
              String(now.version),
              what,
              () => next,
              lateOptions(options, held),
            );
          } catch (lost) {
            if (!isRaceLost(lost) || attempt === LATE_ATTEMPTS) throw lost;
          }
        }
      };
      let row;
      try {
        row = await this.#read(id, version, `write intent ${id}`, options);
      } catch (error) {
        // A version no store made, or one this intent moved past.
        const stale = error instanceof ConflictError && !error.refused;
        if (late === undefined || !stale) throw error;
        return await writeLate(error);
      }
      const current = recordOf(row);
      const next = update(current);
      checkRecord(next);
      // Decided before a connection is taken: another's live lease is a
      // BusyError here.
      const held = row.lease_owner === null ? null : {
        owner: String(row.lease_owner),
        expiresAt: Number(row.lease_expires_at),
      };
      const lease = options.lease
        ? leaseAfter(id, held, options.lease)
        : undefined;
      const flight = this.#transaction(async (tx, commit) => {
        // First, the compare-and-set: the intent still at the version read
        // (its hold and lease with it, since each of their writes moves
        // it), locked until the commit.
        const writes = [this.#stillAt(tx, id, version, "UPDATE")];
        if (lease !== undefined) {
          writes.push(...this.#leaseWrites(tx, id, held, lease));
        }
        if (options.claim) writes.push(this.#claim(tx, options.claim));
        // The row is locked by the check at the head of this flight: this
        // update cannot miss it.
        const { intents } = this.#t;
        const updated = writes.push(tx`
          UPDATE ${intents} SET ${
          tx(intentColumns(next))
        }, version = version + 1
          WHERE id = ${id}${this.#unmarked(tx, uncounted, options)}
          RETURNING version`) - 1;
        if (next.hold !== current.hold && next.hold !== null) {
          writes.push(this.#setHold(tx, id, next.hold));
        }
        if (deadLetter) {
          writes.push(
            this.#putDeadLetter(tx, deadLetter, options.resetCount),
          );
        }
        const results = await commit(writes);
        return toIntent(next, results[updated]![0]!.version);
      });
      try {
        return await flight;
      } catch (error) {
        if ((error as { code?: unknown })?.code !== STALE) throw error;
        // A mark committed since the read fails the flight as an intent
        // that moved on does: a read, on this refusal only, says which.
        const refusal = uncounted.length === 0 ? error : await this.#read(
          id,
          version,
          `write intent ${id}`,
          options,
        ).then(
          () => error,
          (read) => read instanceof ConflictError ? read : error,
        );
        // The intent moved on between the read and the flight: a give-up
        // that put it in review meanwhile is met as by a read that found
        // it there.
        if (late === undefined || isRefusal(refusal)) throw refusal;
        return await writeLate(refusal);
      }
    });
  }

  /**
   * A write's `unlessCounted` in its commit: a condition of the intent's
   * `UPDATE` that fails it (`refuse_stale`, which aborts the transaction)
   * while one of `uncounted` is on record, not lapsed at the lease's `now`
   * (any, without a lease), as the read checks. The `UPDATE` runs once
   * the check at the head of the flight holds the intent's lock, on a
   * snapshot of its own: a mark committed after the write's read, or while
   * it waited for the lock, refuses it. Nothing without keys.
   */
  #unmarked(
    sql: Sql,
    uncounted: readonly string[],
    options: WriteOptions,
  ): postgres.PendingQuery<postgres.Row[]> {
    if (uncounted.length === 0) return sql``;
    return sql`
          AND ${this.#refuseStale}((NOT EXISTS (
            SELECT 1 FROM ${this.#t.counters}
            WHERE job_id IN ${sql(uncounted)}
              AND expires_at > ${markedAt(options)}))::int) = 1`;
  }

  /**
   * The statements that leave the intent's lease as `after` says: kept
   * (written), or, when `null`, the one `held` deleted: its own, released,
   * or another's that lapsed (a live one threw in `leaseAfter`), so a
   * crashed delivery's lease does not outlive it on an intent nobody
   * writes again.
   */
  #leaseWrites(
    tx: Sql,
    id: string,
    held: LeaseRecord | null,
    after: LeaseRecord | null,
  ): postgres.PendingQuery<postgres.Row[]>[] {
    if (after !== null) return [this.#keepLease(tx, id, after)];
    return held === null ? [] : [
      tx`DELETE FROM ${this.#t.leases} WHERE intent_id = ${id} AND owner = ${held.owner}`,
    ];
  }

  #keepLease(
    tx: Sql,
    id: string,
    lease: { owner: string; expiresAt: number },
  ): postgres.PendingQuery<postgres.Row[]> {
    return tx`
      INSERT INTO ${this.#t.leases} (intent_id, owner, expires_at)
      VALUES (${id}, ${lease.owner}, ${lease.expiresAt})
      ON CONFLICT (intent_id) DO UPDATE
      SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at`;
  }

  #setHold(
    tx: Sql,
    id: string,
    hold: HoldState,
  ): postgres.PendingQuery<postgres.Row[]> {
    return tx`
      INSERT INTO ${this.#t.holds} (intent_id, state) VALUES (${id}, ${hold})
      ON CONFLICT (intent_id) DO UPDATE SET state = EXCLUDED.state`;
  }

  /**
   * Claims a replay record: inserts it, or replaces an expired one. Fails
   * (SQLSTATE `RL001`, a `ReplayError` once mapped) when a live record holds
   * the key, which aborts the transaction it is in: nothing else commits.
   */
  #claim(sql: Sql, claim: Claim): postgres.PendingQuery<postgres.Row[]> {
    const { claims } = this.#t;
    this.#sweeps.written++;
    return sql`
      WITH claimed AS (
        INSERT INTO ${claims} (key, expires_at)
        VALUES (${claim.key}, ${claim.expiresAt})
        ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at
        WHERE ${claims}.expires_at <= ${claim.now}
        RETURNING key
      )
      SELECT ${this.#refuse}((SELECT count(*) FROM claimed)) AS claimed`;
  }

  /**
   * Fails its transaction unless intent `id` is at `version`, and holds it
   * there until the transaction ends: the writes pipelined behind it land
   * only on the intent the caller read. A share lock where the writes
   * leave the intent as it is (a dead letter on it), an update lock where
   * they change it: two writers on one version then queue at this check,
   * and the second, once the first committed, finds the version moved.
   * At READ COMMITTED a check that waited re-reads the row it waited for
   * (the version, here), not a snapshot from before.
   */
  #stillAt(
    sql: Sql,
    id: string,
    version: string,
    lock: "SHARE" | "UPDATE" = "SHARE",
  ): postgres.PendingQuery<postgres.Row[]> {
    const { intents } = this.#t;
    return checkOnly(sql`
      WITH held AS (
        SELECT 1 FROM ${intents} WHERE id = ${id} AND version = ${version}
        ${lock === "SHARE" ? sql`FOR SHARE` : sql`FOR UPDATE`}
      )
      SELECT ${this.#refuseStale}((SELECT count(*) FROM held)) AS held`);
  }

  #putDeadLetter(
    sql: Sql,
    letter: DeadLetter,
    resetCount?: string,
  ): postgres.PendingQuery<postgres.Row[]> {
    const { dead_letters, counters } = this.#t;
    const row = deadLetterRow(letter, this.#encoding());
    // The poisoned run of deliveries ends here: a job published again for
    // the intent is counted from 1 (one statement, so no round trip more).
    // One shape with or without another count to reset (a key holding
    // U+0000 has no row to reset).
    const other = resetCount === undefined || hasNul(resetCount)
      ? letter.jobId
      : resetCount;
    return sql`
      WITH reset AS (
        DELETE FROM ${counters} WHERE job_id IN (${letter.jobId}, ${other})
      )
      INSERT INTO ${dead_letters} ${sql(row)}
      ON CONFLICT (job_id) DO UPDATE SET
        intent_id = EXCLUDED.intent_id, deliveries = EXCLUDED.deliveries,
        cause = EXCLUDED.cause, reason = EXCLUDED.reason,
        resolution = EXCLUDED.resolution, last_error = EXCLUDED.last_error,
        poisoned_at = EXCLUDED.poisoned_at, queue = EXCLUDED.queue,
        queue_message_id = EXCLUDED.queue_message_id,
        queue_dlq_id = EXCLUDED.queue_dlq_id,
        version = nextval(${this.#versions}::regclass)`;
    // Cast, so that pg_catalog.nextval(regclass) is the only match: for an
    // untyped parameter PostgreSQL prefers a nextval(text) of any schema on
    // the role's search_path (the string category wins), and ran it.
  }

  /**
   * Moves an intent along the transition table, in one transaction with
   * its ledger change, dead letter, lease and claim.
   *
   * @param id The intent id.
   * @param change The move, checked on the version read.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the move.
   * @throws {ConflictError} If the intent changed, or the move breaks a rule.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  transition(
    id: string,
    change: Transition,
    options: WriteOptions = {},
  ): Promise<Intent> {
    const refused = transitionRefusal(id, change);
    if (refused !== undefined) return Promise.reject(refused);
    return this.#writeIntent(
      id,
      change.version,
      `move ${id} from ${change.from} to ${change.to}`,
      (record) => transitioned(record, change),
      options,
      change.deadLetter,
    );
  }

  /**
   * Writes ahead of a broadcast on a `settling` intent.
   *
   * @param id The intent id.
   * @param version The version read.
   * @param at When, in milliseconds of the injected clock.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed or is not `settling`.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  beginBroadcast(
    id: string,
    version: string,
    at: number,
    options: WriteOptions = {},
  ): Promise<Intent> {
    return this.#writeIntent(
      id,
      version,
      `start a broadcast for ${id}`,
      (record) => broadcastBegun(record, at),
      options,
    );
  }

  /**
   * Records the outcome of a broadcast on a `settling` intent, or, on a
   * version older than the intent's, that of a send that outlived its
   * settling on the intent in review (see {@linkcode Store.recordBroadcast}).
   *
   * @param id The intent id.
   * @param version The version read.
   * @param broadcast The outcome.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed or is not `settling`.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
    options: WriteOptions = {},
  ): Promise<Intent> {
    return this.#writeIntent(
      id,
      version,
      `record a broadcast for ${id}`,
      (record) =>
        broadcastRecorded(
          record,
          mendedBroadcast(broadcast, this.#encoding()),
        ),
      options,
      undefined,
      (record) =>
        lateBroadcastRecorded(
          record,
          mendedBroadcast(broadcast, this.#encoding()),
        ),
    );
  }

  #hold(id: string, op: "record" | "void" | "capture"): Promise<HoldState> {
    const what = `${op} the hold of ${id}`;
    return this.#run(what, async () => {
      for (let attempt = 1;; attempt++) {
        try {
          const row = await this.#read(id, null, what);
          const record = recordOf(row);
          const hold = heldBy(record, op);
          if (hold === record.hold) return hold; // idempotent: no write
          return await this.#transaction(async (tx, commit) => {
            await commit([
              this.#stillAt(tx, id, String(row.version), "UPDATE"),
              this.#setHold(tx, id, hold),
              // A hold change is a new version of the intent.
              tx`UPDATE ${this.#t.intents} SET version = version + 1 WHERE id = ${id}`,
            ]);
            return hold;
          });
        } catch (error) {
          // Another write moved the intent since the read: decide again on
          // what it is now (a captured hold is then never voided, nor the
          // hold of a payment a give-up sent to review meanwhile).
          if ((error as { code?: unknown })?.code !== STALE) throw error;
          if (attempt === HOLD_ATTEMPTS) throw error;
        }
      }
    });
  }

  /**
   * Records a `pending` hold before authorization. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  recordHold(id: string): Promise<HoldState> {
    return this.#hold(id, "record");
  }

  /**
   * Voids the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  voidHold(id: string): Promise<HoldState> {
    return this.#hold(id, "void");
  }

  /**
   * Captures the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  captureHold(id: string): Promise<HoldState> {
    return this.#hold(id, "capture");
  }

  #count(sql: Sql, jobId: string, now: number, ttlMs = COUNT_TTL_MS) {
    const { counters } = this.#t;
    this.#sweeps.written++;
    return sql`
      INSERT INTO ${counters} (job_id, deliveries, expires_at)
      VALUES (${jobId}, 1, ${now + ttlMs})
      ON CONFLICT (job_id) DO UPDATE SET
        deliveries = CASE WHEN ${counters}.expires_at > ${now}
          THEN ${counters}.deliveries + 1 ELSE 1 END,
        expires_at = EXCLUDED.expires_at
      RETURNING deliveries`;
  }

  /**
   * On the first write of this process to this database and schema (see
   * `SWEEPS`), and after every {@linkcode SWEEP_EVERY} counters and replay
   * records written since by its stores (by an admission or inside a
   * delivery's write), the next write that counts or claims first deletes
   * up to {@linkcode SWEEP_LIMIT} expired rows of each table (each expired
   * row is already as good as absent), and as many leases that lapsed over
   * an hour ago. Each row written expires at most once, and more are
   * deleted than were written since the last sweep, so the tables do not
   * grow without bound.
   */
  async #sweep(now: number): Promise<void> {
    const sweeps = this.#sweeps;
    if (sweeps.written < sweeps.sweepAt) return;
    sweeps.sweepAt = sweeps.written + SWEEP_EVERY;
    const { counters, claims, leases } = this.#t;
    // Each plan reads only what it deletes, whatever PostgreSQL knows of
    // the tables. Oldest first, by the expiry's index: without the order,
    // the planner takes `LIMIT` for "stop at the 100th expired row" and
    // scans the table for them, reading all of it whenever fewer are
    // expired (the sweep keeps up, so they usually are), on statistics
    // older than the rows swept since. And the limit is written into the
    // text, not sent as a parameter: postgres.js prepares the statement,
    // PostgreSQL may plan it once for any parameters after its 5th run,
    // and such a plan guesses a limit it cannot see at a tenth of the rows
    // and joins the whole table to them. Either way, a million counters
    // read for 64 writes.
    await this.#one((sql) => {
      const limit = sql.unsafe(String(SWEEP_LIMIT));
      return sql`
      WITH c AS (
        DELETE FROM ${counters} WHERE job_id IN (
          SELECT job_id FROM ${counters} WHERE expires_at <= ${now}
          ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      ), l AS (
        DELETE FROM ${leases} WHERE intent_id IN (
          SELECT intent_id FROM ${leases}
          WHERE expires_at <= ${now - LEASE_ROW_GRACE_MS}
          LIMIT ${limit} FOR UPDATE SKIP LOCKED)
      )
      DELETE FROM ${claims} WHERE key IN (
        SELECT key FROM ${claims} WHERE expires_at <= ${now - CLAIM_GRACE_MS}
        ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)`;
    });
  }

  /**
   * Counts a delivery and/or claims a replay record, in one round trip.
   *
   * @param admission What to count and claim, and the time.
   * @returns The delivery number if counted, else `null`.
   * @throws {ReplayError} If the claim was already used.
   */
  admit(admission: Admission): Promise<number | null> {
    return this.#run("admit a delivery", async () => {
      const { count, claim, now, ttlMs = COUNT_TTL_MS } = admission;
      checkMs("now", now);
      checkCountTtl(ttlMs);
      if (claim) checkClaim(claim);
      checkCount(count);
      assertIndexable("admit a delivery", "count", count);
      assertIndexable("admit a delivery", "claim.key", claim?.key);
      await this.#sweep(now);
      if (claim === undefined) {
        if (count === undefined) return null;
        const [row] = await this.#one((sql) =>
          this.#count(sql, count, now, ttlMs)
        );
        return Number(row!.deliveries);
      }
      if (count === undefined) {
        await this.#one((sql) => this.#claim(sql, claim));
        return null;
      }
      // One round trip: BEGIN, the claim, the count and COMMIT in one flight.
      return await this.#transaction(async (tx, commit) => {
        const [, counted] = await commit([
          this.#claim(tx, claim),
          this.#count(tx, count, now, ttlMs),
        ]);
        return Number(counted![0]!.deliveries);
      });
    });
  }

  /**
   * The deliveries counted for a job so far.
   *
   * @param jobId The job id.
   * @param now The time, if known: a count that has lapsed by then reads 0
   * (swept or not).
   * @returns The count; 0 if none.
   * @throws {TypeError} If `now` is not a whole number of milliseconds.
   */
  async deliveries(jobId: string, now?: number): Promise<number> {
    if (now !== undefined) checkMs("now", now);
    if (unkeptKey(jobId)) return 0; // no such row can exist
    const [row] = await this.#readOnly(
      `read of the deliveries counted for ${jobId}`,
      () =>
        this.#sql`
      SELECT deliveries, expires_at FROM ${this.#t.counters}
      WHERE job_id = ${jobId}`,
    ).catch(noneUnencodable);
    if (row === undefined) return 0;
    return now !== undefined && Number(row.expires_at) <= now
      ? 0
      : Number(row.deliveries);
  }

  /**
   * Keeps a dead letter, replacing an older one for the same job (with a
   * new version).
   *
   * @param deadLetter The dead letter.
   * @param options The delivery's replay record and lease, and the
   * intent's version the caller read (the letter is kept only if it still
   * holds).
   * @throws {ReplayError} If the claim was already used.
   * @throws {BusyError} If another owner holds the intent's lease.
   */
  putDeadLetter(
    deadLetter: DeadLetter,
    options:
      & Pick<WriteOptions, "claim" | "resetCount" | "lease">
      & { readonly intentVersion?: string; readonly marks?: Marks } = {},
  ): Promise<void> {
    return this.#run(
      `keep the dead letter of ${String(deadLetter?.jobId)}`,
      async () => {
        checkDeadLetter(deadLetter);
        assertIndexable(
          "keep a dead letter",
          "jobId",
          deadLetter.jobId,
          JOB_ID_BYTES,
        );
        const { claim, resetCount, lease, marks } = options;
        const { intentVersion } = options;
        const id = deadLetter.intentId;
        checkResetCount(resetCount);
        const keys = markKeys(marks, deadLetter, resetCount);
        for (const key of keys) {
          assertIndexable("keep a dead letter", "marks.keys", key);
        }
        // The claim and lease before the version, as in the other stores:
        // a malformed one is a TypeError naming it, on any version.
        if (claim !== undefined) checkClaim(claim);
        assertIndexable("keep a dead letter", "claim.key", claim?.key);
        if (lease !== undefined) {
          if (intentVersion === undefined) {
            throw new TypeError(
              "putDeadLetter: a lease needs options.intentVersion, the version of the intent the caller read",
            );
          }
          checkLease(lease);
        }
        if (intentVersion !== undefined) checkVersion(id, intentVersion);
        if (
          claim === undefined && intentVersion === undefined &&
          lease === undefined && keys.length === 0
        ) {
          await this.#one((sql) =>
            this.#putDeadLetter(sql, deadLetter, resetCount)
          );
          return;
        }
        // With a lease, as a delivery write: the intent's row read with its
        // lease, another's live lease a BusyError here, and the lease's
        // write moves the intent's version, as every lease write does.
        let leaseWrites: (tx: Sql) => postgres.PendingQuery<postgres.Row[]>[] =
          () => [];
        if (lease !== undefined) {
          const row = await this.#read(
            id,
            intentVersion!,
            `keep the dead letter of ${deadLetter.jobId}`,
          );
          const held = row.lease_owner === null ? null : {
            owner: String(row.lease_owner),
            expiresAt: Number(row.lease_expires_at),
          };
          const after = leaseAfter(id, held, lease);
          leaseWrites = (tx) => [
            ...this.#leaseWrites(tx, id, held, after),
            tx`UPDATE ${this.#t.intents} SET version = version + 1 WHERE id = ${id}`,
          ];
        }
        if (claim !== undefined || marks !== undefined) {
          await this.#sweep(claim?.now ?? marks!.now);
        }
        // The check first: if it fails, nothing behind it commits. The
        // marks last, each a count as `admit` writes it.
        await this.#transaction((tx, commit) =>
          commit([
            ...(intentVersion === undefined ? [] : [
              this.#stillAt(
                tx,
                id,
                intentVersion,
                lease === undefined ? "SHARE" : "UPDATE",
              ),
            ]),
            ...leaseWrites(tx),
            ...(claim === undefined ? [] : [this.#claim(tx, claim)]),
            this.#putDeadLetter(tx, deadLetter, resetCount),
            ...keys.map((key) =>
              this.#count(tx, key, marks!.now, marks!.ttlMs)
            ),
          ])
        );
      },
    );
  }

  /**
   * Releases the intent's lease if `owner` holds it (live or lapsed), in
   * one statement: a `DELETE` of the row only while `owner` is its owner,
   * so a lease another owner took since stays, and, if it deleted one, a
   * move of the intent's version, as every lease write makes: a write
   * decided on a read from before the release (a copy of a dropped
   * message that read the intent before the drop's marks landed) is
   * refused as a race lost, and decided again on a fresh read. It locks
   * the intent's row first, as a flight does, so it waits behind a
   * delivery's flight on the intent.
   *
   * @param intentId The intent.
   * @param owner The delivery that took the lease.
   * @throws {TypeError} If either is not a non-empty string.
   */
  releaseLease(intentId: string, owner: string): Promise<void> {
    return this.#run(`release the lease of ${String(intentId)}`, async () => {
      checkRelease(intentId, owner);
      if (unkeptKey(intentId) || unkeptKey(owner)) return; // no such row can exist
      const { intents, leases } = this.#t;
      // The intent's row is locked first, as every flight locks it before
      // its lease's row.
      await this.#one((sql) =>
        sql`
          WITH held AS (
            SELECT id FROM ${intents} WHERE id = ${intentId} FOR UPDATE
          ), released AS (
            DELETE FROM ${leases}
            WHERE intent_id = (SELECT id FROM held) AND owner = ${owner}
            RETURNING intent_id
          )
          UPDATE ${intents} SET version = version + 1
          WHERE id IN (SELECT intent_id FROM released)`
      );
    });
  }

  /**
   * Reads the dead letter of a job.
   *
   * @param jobId The job id.
   * @returns The dead letter with its version, or `null`.
   */
  async getDeadLetter(jobId: string): Promise<StoredDeadLetter | null> {
    if (unkeptKey(jobId)) return null; // no such row can exist
    const [row] = await this.#readOnly(
      `read of the dead letter of ${jobId}`,
      () =>
        this.#sql`
      SELECT job_id, intent_id, deliveries, cause, reason, resolution,
        last_error, poisoned_at, queue, queue_message_id, queue_dlq_id, version
      FROM ${this.#t.dead_letters} WHERE job_id = ${jobId}`,
    ).catch(noneUnencodable);
    return row === undefined ? null : deadLetterOf(row);
  }

  /**
   * Lists dead letters, newest first, by a keyset on `(poisoned_at, job_id)`.
   *
   * @param options The page size (1–1000, default 50) and the cursor of the previous page.
   * @returns One page.
   * @throws {RangeError} If `limit` is out of range.
   * @throws {TypeError} If `cursor` is not one this store returned.
   */
  listDeadLetters(
    options: { limit?: number; cursor?: string | null } = {},
  ): Promise<DeadLetterPage> {
    return this.#run("list dead letters", async () => {
      const limit = pageLimit(options.limit);
      const after = options.cursor ? readCursor(options.cursor) : null;
      // One more row than the page says whether there is a next page.
      const rows = await this.#watched(() =>
        this.#sql`
        SELECT job_id, intent_id, deliveries, cause, reason, resolution,
          last_error, poisoned_at, queue, queue_message_id, queue_dlq_id, version
        FROM ${this.#t.dead_letters}
        ${
          after === null
            ? this.#sql``
            // The same keyset as "older, or as old and after", written so
            // that its first bound is an index condition: a deep page starts
            // at its place in the index instead of filtering every newer row.
            : this.#sql`WHERE poisoned_at <= ${after.poisonedAt}
              AND (poisoned_at < ${after.poisonedAt} OR job_id > ${after.jobId})`
        }
        ORDER BY poisoned_at DESC, job_id
        LIMIT ${limit + 1}`
      );
      const items = rows.slice(0, limit).map(deadLetterOf);
      const last = items.at(-1);
      return {
        items,
        cursor: rows.length > limit && last ? cursorAfter(last) : null,
      };
    }, true).catch((error) => {
      // Refused before anything was sent: nothing read or written.
      throw CLOSED_READS.has(error) ? notRead(error) : error;
    });
  }

  /**
   * Takes out exactly the dead letter read and resets its job's count
   * (left as it is with `keepCount`), in one statement.
   *
   * @param jobId The job id.
   * @param version The version of the dead letter read.
   * @param options Whether to keep the count; nothing to enqueue: this
   * store has no queue.
   * @returns The dead letter removed.
   * @throws {ConflictError} If the dead letter is gone or changed.
   * @throws {TypeError} If asked to enqueue.
   */
  redrive(
    jobId: string,
    version: string,
    options: { readonly enqueue?: unknown; readonly keepCount?: boolean } = {},
  ): Promise<DeadLetter> {
    return this.#run(`redrive ${jobId}`, async () => {
      if (options.enqueue !== undefined) {
        throw new TypeError(
          "Cannot enqueue in a redrive as PostgresStore has no queue: publish the job yourself",
        );
      }
      if (!isVersion(version)) {
        throw new ConflictError(
          `Cannot redrive ${jobId} as its dead letter changed or is gone since it was read; re-read it`,
        );
      }
      const { dead_letters, counters } = this.#t;
      const reset = options.keepCount !== true;
      // One statement: the letter read and its count go together, or nothing does.
      const [row] = await this.#one((sql) =>
        sql`
        WITH gone AS (
          DELETE FROM ${dead_letters}
          WHERE job_id = ${jobId} AND version = ${version}
          RETURNING job_id, intent_id, deliveries, cause, reason, resolution,
            last_error, poisoned_at, queue, queue_message_id, queue_dlq_id, version
        ), reset AS (
          DELETE FROM ${counters}
          WHERE ${reset} AND job_id IN (SELECT job_id FROM gone)
        )
        SELECT job_id, intent_id, deliveries, cause, reason, resolution,
          last_error, poisoned_at, queue, queue_message_id, queue_dlq_id, version
        FROM gone`
      );
      if (row === undefined) {
        throw new ConflictError(
          `Cannot redrive ${jobId} as its dead letter changed or is gone since it was read; re-read it`,
        );
      }
      const { version: _, ...deadLetter } = deadLetterOf(row);
      return deadLetter;
    });
  }
}

/**
 * The time a write's `unlessCounted` marks are checked at: its lease's
 * `now`, or, without a lease, before every expiry (any mark on record).
 */
function markedAt(options: WriteOptions): number {
  return options.lease?.now ?? Number.MIN_SAFE_INTEGER;
}

/**
 * Whether `version` is spelt as this store spells its versions (a
 * `bigint` column counted from 1, in decimal digits, no sign, no leading
 * zero): anything else was never one. PostgreSQL would take `"03"` for
 * 3, and refuse a number past the column's range with an error of its
 * own; the other stores compare versions as strings.
 */
function isVersion(version: unknown): version is string {
  return typeof version === "string" && /^[1-9][0-9]{0,18}$/.test(version) &&
    // Only 19 digits can pass the column's range: no BigInt on every write.
    (version.length < 19 || BigInt(version) <= 9_223_372_036_854_775_807n);
}

function checkVersion(id: string, version: unknown): void {
  if (!isVersion(version)) {
    throw new ConflictError(
      `Cannot write intent ${id} as it changed since it was read; re-read it`,
    );
  }
}

/**
 * Refuses, before anything is read or written, a caller's `field` longer
 * than `limit` bytes of UTF-8 ({@linkcode KEY_BYTES}): PostgreSQL's own
 * words ("index row size … exceeds btree version 4 maximum 2704 for index
 * …") name neither the field nor the fix. A short value costs a
 * multiplication (at most 3 bytes per UTF-16 unit).
 */
function assertIndexable(
  op: string,
  field: string,
  value: unknown,
  limit: number = KEY_BYTES,
): void {
  if (typeof value !== "string" || value.length * 3 <= limit) return;
  const n = UTF8.encode(value).length;
  if (n <= limit) return;
  throw new TypeError(
    `Cannot ${op} as '${field}' is ${n} bytes of UTF-8, over PostgresStore's limit of ${limit} (a PostgreSQL index entry holds at most 2,704 bytes on its default 8 KiB pages): shorten '${field}' by at least ${
      n - limit
    } bytes. Nothing was written.`,
  );
}

function numberOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

/**
 * The states whose intent holds funds: read without its hold, row-level
 * security may hide the hold. A created intent has none yet (nor one that
 * failed or went to review before its authorization), so its reads, on a
 * delivery's path, ask nothing more.
 */
const HELD_STATES: ReadonlySet<unknown> = new Set([
  "authorized",
  "settling",
  "settled",
]);

/**
 * Whether a read's row may be what row-level security left of it: no row,
 * or an intent of a state that holds funds read without its hold.
 */
function mayBeHidden(row: Row | undefined): boolean {
  return row === undefined ||
    ((row.hold ?? null) === null && HELD_STATES.has(row.state));
}

function recordOf(row: Row): IntentRecord {
  const lastBroadcast: Broadcast | null = row.last_outcome === null ? null : {
    outcome: row.last_outcome,
    ...(row.last_tx_hash === null ? {} : { txHash: row.last_tx_hash }),
    at: Number(row.last_at),
    ...(row.last_error === null ? {} : { error: row.last_error }),
  };
  return {
    id: String(row.id),
    state: row.state as IntentState,
    hold: (row.hold ?? null) as HoldState | null,
    lastBroadcast,
    broadcasting: numberOrNull(row.broadcasting),
    mayHaveSent: row.may_have_sent === true,
    // A row a process before 0.2 wrote has its last sent hash only there.
    txHashes: knownTxHashes(
      JSON.parse(String(row.tx_hashes)) as string[],
      lastBroadcast,
    ),
    settlingSince: numberOrNull(row.settling_since),
  };
}

function toIntent(record: IntentRecord, version: unknown): Intent {
  return Object.freeze({
    ...record,
    lastBroadcast: frozenBroadcast(record.lastBroadcast),
    version: String(version),
  });
}

function deadLetterOf(row: Row): StoredDeadLetter {
  return {
    jobId: row.job_id,
    intentId: row.intent_id,
    deliveries: Number(row.deliveries),
    cause: row.cause,
    reason: row.reason,
    resolution: row.resolution,
    lastError: row.last_error,
    poisonedAt: Number(row.poisoned_at),
    ...(row.queue === null ? {} : {
      queue: {
        queue: row.queue,
        ...(row.queue_message_id === null
          ? {}
          : { messageId: row.queue_message_id }),
        ...(row.queue_dlq_id === null ? {} : { dlqId: row.queue_dlq_id }),
      },
    }),
    version: String(row.version),
  };
}

/**
 * `promise`, or, if it has not settled within `ms`, the error `late`
 * returns (`late` may act first: cancel, release). Should `late` return
 * nothing, `promise` is waited for after all. A rejection of `promise`
 * after the error is swallowed.
 */
function bounded<T>(
  promise: Promise<T>,
  ms: number,
  late: () => Error | undefined,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = late();
      if (error === undefined) return;
      promise.catch(() => {});
      reject(error);
    }, ms);
  });
  return Promise.race([promise, waited]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}

/** The one method of a postgres.js 3.4.9 connection the store calls. */
interface PoolConnection {
  terminate(): void;
}

/**
 * The options of a query that keep the connection postgres.js 3.4.9 sends
 * it on, as its `onexecute` option (one its types leave out; its own
 * `sql.begin()` takes its connection so) hands it over, in `connection`.
 * `onexecute` answering `true` changes nothing of how the connection goes
 * on. Called only where the query is sent at once (postgres.js skips it
 * when the socket pushes back): `connection` stays `undefined` then.
 */
function seenOn(): {
  options: Record<string, unknown>;
  connection: PoolConnection | undefined;
} {
  const seen = {
    options: {
      onexecute: (connection: unknown) => {
        const terminate = (connection as { terminate?: unknown })?.terminate;
        if (typeof terminate === "function") {
          seen.connection = connection as PoolConnection;
        }
        return true;
      },
    } as Record<string, unknown>,
    connection: undefined as PoolConnection | undefined,
  };
  return seen;
}

/**
 * Closes `connection`, whose statements are unanswered past the bound
 * (its session's state unknown), or whose session stays inside a failed
 * transaction no `ROLLBACK` ended, so that postgres.js opens it again for
 * the pool: its `terminate()` fails the statements still waiting
 * (CONNECTION_DESTROYED), says goodbye to the server (or pooler) and ends
 * the socket, and postgres.js moves it to its closed connections, a
 * `reserve()` on it ending with it. Nothing is rolled back by hand: the
 * server ends the session's transaction, if any, as the socket closes.
 *
 * @returns Whether there was a connection to close.
 */
function closeSession(connection: PoolConnection | undefined): boolean {
  if (connection === undefined) return false;
  connection.terminate();
  return true;
}

/**
 * Whether `error`, from `sql.begin`, is its own `ROLLBACK` or `COMMIT`
 * failing on a live connection (a cancel that cut it before it ran), which
 * leaves the session inside the transaction: a failed `ROLLBACK` always
 * does; a `COMMIT` cancelled (57014) does, where one failing otherwise (a
 * deferred check) ended the transaction, and postgres.js 3.4.9 handed the
 * connection back.
 */
function endLeftOpen(error: unknown): boolean {
  const { query, severity, code } = (error ?? {}) as {
    query?: unknown;
    severity?: unknown;
    code?: unknown;
  };
  if (severity !== "ERROR") return false;
  return query === "rollback" || (query === "commit" && code === "57014");
}

/**
 * Ends whatever transaction the session of `tx` is in (`ROLLBACK`, a
 * warning only outside one), sent again while a cancel cuts it, three
 * times at the most.
 *
 * @returns Each `ROLLBACK`'s answer, once the last came.
 */
async function endTransaction(
  tx: postgres.ReservedSql,
): Promise<PromiseSettledResult<unknown>[]> {
  const answers: PromiseSettledResult<unknown>[] = [];
  for (let tries = 0; tries < 3; tries++) {
    const answer = await tx.unsafe("ROLLBACK").execute().then(
      (value): PromiseSettledResult<unknown> => ({
        status: "fulfilled",
        value,
      }),
      (reason): PromiseSettledResult<unknown> => ({
        status: "rejected",
        reason,
      }),
    );
    answers.push(answer);
    if (answer.status === "fulfilled" || anyLost([answer])) break;
  }
  return answers;
}

/**
 * The error for a statement PostgreSQL refused as its session was inside a
 * transaction that had already failed (25P02), or `null`. The store's own
 * statements never leave one so: it is a transaction another user of the
 * same client left open on the connection (a `sql.begin()` of postgres.js
 * 3.4.9 that handed its connection back mid-transaction,
 * porsager/postgres#1189), and nothing of this call ran.
 *
 * `kept`: the call was a write through `sql.begin()` (a client made with
 * `fetch_types: false`), whose `BEGIN` so refused leaves postgres.js 3.4.9
 * holding the connection as its transaction's, never sent anything again
 * nor handed back: trying again waits for another connection, and the
 * failed transaction stays open until the server ends that session.
 */
function abortedSession(
  what: string,
  done: "read" | "written",
  error: unknown,
  kept = false,
): Error | null {
  if ((error as { code?: unknown })?.code !== "25P02") return null;
  const then = kept
    ? ", and postgres.js 3.4.9 now keeps that connection from the pool (a client made with fetch_types: false writes through sql.begin(), whose BEGIN failed) until the server ends that session: end it (pg_terminate_backend on the session 'idle in transaction (aborted)', or set idle_in_transaction_session_timeout)"
    : ", so try again";
  return new Error(
    `Cannot ${what} as PostgreSQL ran it inside a transaction that had already failed on its connection (25P02: current transaction is aborted), which something else using this client left open: nothing was ${done}${then}, and look for a transaction of your own on this client that is never committed or rolled back`,
    { cause: error },
  );
}

/** Whether any of a flight's answers failed as its connection was lost. */
function anyLost(settled: readonly PromiseSettledResult<unknown>[]): boolean {
  return settled.some((answer) =>
    answer.status === "rejected" && connectionLost(answer.reason)
  );
}

/**
 * `statement` inside `sql.begin`, except that it never settles when it
 * fails as its connection was lost. postgres.js 3.4.9 answers a callback
 * that fails with a `ROLLBACK` on the transaction's connection, and one
 * the server ended is closed: written from a timer, that crashes the
 * process (porsager/postgres#1154). Unsettled, the callback does not fail:
 * `sql.begin` fails on its own as the connection closes. A statement's
 * own error rejects, and rolls back, as ever.
 */
function unlessLost<T>(statement: Promise<T>): Promise<T> {
  return statement.catch((error) => {
    if (connectionLost(error)) return new Promise<never>(() => {});
    throw error;
  });
}

/**
 * The error of a write whose connection was lost under it (`error`,
 * postgres.js's or the server's); `pooled`, a pooler's words as it ended a
 * connection of the client in statement mode since the last write that
 * landed (see `statementModeWords`), names that mode and its mending.
 */
function lostDuringWrite(
  error: unknown,
  pooled?: string,
  idle?: string,
): Error {
  return new Error(
    `PostgreSQL lost the connection during the write (${
      describeError(error)
    }): it may have landed or not; the next read says which${
      pooled === undefined
        ? ""
        : `. The pooler in front of PostgreSQL ended a connection of this client at a transaction's BEGIN since the last write that landed (${pooled}): its pool mode is statement (PgBouncer's pool_mode = statement), and every write of the store is a transaction, so none will land. ${STATEMENT_MODE_FIX}`
    }${idleSessionWords(idle)}`,
    { cause: error },
  );
}

/**
 * No rows, where a read under a key failed as the database's encoding
 * cannot hold a character of the key (22P05: a LATIN1 database asked for
 * `pi_☃`): no row of it can hold that key, so the read finds none, as on
 * a UTF8 database. It failed in the server's words alone, "character with
 * byte sequence … has no equivalent in encoding \"LATIN1\"".
 */
function noneUnencodable(error: unknown): never[] {
  if ((error as { code?: unknown })?.code === "22P05") return [];
  throw error;
}

/**
 * The constraints the store's migration makes, as PostgreSQL names them:
 * each table's primary key and CHECKs, and the holds' foreign key.
 */
const OWN_CONSTRAINTS: ReadonlySet<string> = new Set([
  ...TABLES.map((table) => `${table}_pkey`),
  "intents_check",
  "intents_state_check",
  "intents_last_outcome_check",
  "holds_state_check",
  "holds_intent_id_fkey",
  "counters_deliveries_check",
  "dead_letters_cause_check",
]);

/**
 * What refused a statement, where a rule the store's migration does not
 * make did (see `#run`): a CHECK, NOT NULL, unique (but a primary key),
 * foreign key or exclusion constraint added to one of its tables, or a
 * trigger's function that raised (on a `read`, a row-security policy's:
 * the server's `where` names a PL/pgSQL function other than the store's
 * own, whose errors carry their own codes, RL…, and the inline block of
 * its commit); else `null`.
 */
function outsideRule(
  error: unknown,
  schema: string,
  read = false,
): { what: string; fix: string } | null {
  const {
    code,
    message,
    where,
    constraint_name,
    schema_name,
    table_name,
    column_name,
    detail,
    hint,
    routine,
  } = (error ?? {}) as Record<string, unknown>;
  if (typeof code !== "string" || code.startsWith("RL")) return null;
  // The store's own constraints are its migration's: a primary key's
  // violation is a race (see `#run`); an index a team added (one tx hash
  // per intent) no re-read mends. Own only on the store's own tables in
  // its schema: a team's table that its trigger writes, named as one of
  // the store's (intents in their schema), has a key of the same name.
  const elsewhere = typeof schema_name === "string" && schema_name !== schema;
  if (
    !elsewhere && typeof constraint_name === "string" &&
    OWN_CONSTRAINTS.has(constraint_name) &&
    (TABLES as readonly unknown[]).includes(table_name) &&
    constraint_name.startsWith(`${String(table_name)}_`)
  ) return null;
  const table = typeof table_name === "string"
    ? ` on ${elsewhere ? `${schema_name}.` : ""}${table_name}`
    : "";
  const said = oneLine(String(message));
  const fix = `that rule lets the store's ${
    read ? "reads" : "writes"
  } through, or is removed`;
  if (routine === "CheckCmdReplicaIdentity") {
    // A publication (logical replication: a CDC feed to a warehouse, an
    // upgrade by replication) of one of its tables whose row filter or
    // column list reaches past the table's replica identity (42P10), or
    // that publishes a table with none (55000): every UPDATE and DELETE of
    // it is refused, the why in the error's detail alone ("cannot update
    // table "intents"" said nothing of a publication).
    return {
      what: `a publication of one of its tables (logical replication) (${
        [said, detail, hint].filter((part) =>
          typeof part === "string" && part !== ""
        ).map((part) => oneLine(String(part))).join(": ")
      })`,
      fix:
        "the publication's row filter and column list name only columns of the table's replica identity, its primary key (ALTER PUBLICATION … SET TABLE …; see pg_publication_tables), or, for a row filter, the table's replica identity covers them (ALTER TABLE … REPLICA IDENTITY FULL)",
    };
  }
  switch (code) {
    case "23502":
      return {
        what: `a NOT NULL column${table} its INSERT gives no value (${said})`,
        fix: `the column has a DEFAULT (ALTER TABLE … ALTER COLUMN ${
          typeof column_name === "string" ? column_name : "…"
        } SET DEFAULT …), or is nullable`,
      };
    case "23505":
    case "23514":
    case "23503":
    case "23P01":
      return {
        what: `the constraint ${
          typeof constraint_name === "string" ? `"${constraint_name}"` : ""
        }${table} (${said})`,
        fix,
      };
  }
  const fn = typeof where === "string"
    ? /PL\/pgSQL function ([^\s(]+\([^)]*\))/.exec(where)?.[1]
    : undefined;
  if (fn === undefined || fn.startsWith("inline_code_block")) return null;
  return {
    what: `the function ${fn}, ${
      read ? "a policy's" : "a trigger's"
    } (${said})`,
    fix,
  };
}

/**
 * The words of a write that the prepared transactions `prepared` (see
 * `preparedLocks`) held up, as `how` says.
 */
function preparedHeld(what: string, how: string, prepared: string): string {
  return `Cannot ${what} as a prepared transaction ${how}: ${prepared}. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with ${
    preparedEnds(prepared)
  } (see pg_prepared_xacts). Nothing was written; retry`;
}

/**
 * The columns `migrate()` asks beside its check: the session's
 * `idle_session_timeout` as shown (`NULL` before PostgreSQL 14, which has
 * none), and in milliseconds.
 */
const IDLE_SESSION =
  `pg_catalog.current_setting('idle_session_timeout', true) AS idle_session,
  (EXTRACT(EPOCH FROM pg_catalog.current_setting('idle_session_timeout', true)::interval) * 1000)::float8 AS idle_session_ms`;

/**
 * The server's `idle_session_timeout` as `shown`, where it is on (`ms` >
 * 0) and the client's `idle_timeout` (seconds; 0 or none: never) does not
 * close an idle connection before it; else `undefined`.
 *
 * @example
 * ```ts ignore
 * idleSessionMet("40ms", 40, undefined); // "40ms"
 * idleSessionMet("40ms", 40, 0.02); // undefined: the client's is first
 * idleSessionMet("0", 0, undefined); // undefined: off
 * ```
 */
function idleSessionMet(
  shown: unknown,
  ms: unknown,
  clientS: unknown,
): string | undefined {
  // A number, or its text where the client reads no types.
  const n = typeof ms === "string" ? Number(ms) : ms;
  if (typeof n !== "number" || !(n > 0)) return undefined;
  if (typeof clientS === "number" && clientS > 0 && clientS * 1_000 < n) {
    return undefined;
  }
  return String(shown);
}

/**
 * What a write lost on its connection says of the server's
 * `idle_session_timeout` (see `#idleSession`): it ends a pooled connection
 * left idle that long, and a write sent on one as it ends meets the end
 * (a reset, a close). Measured: under 40ms, with writes 36–44 ms apart on
 * one connection, 74 of 200 failed so; with the client's `idle_timeout`
 * below it, none.
 */
function idleSessionWords(idle: string | undefined): string {
  return idle === undefined
    ? ""
    : `. The role's or database's idle_session_timeout (${idle}) ends idle pooled connections, a write sent on one as it ends lost with it: turn it off for the store's role, or give the client an idle_timeout below it (postgres(url, { idle_timeout: … }), in seconds)`;
}

/**
 * The error of a write whose connection was lost (see
 * {@linkcode socketLost}) before the pool handed it over: a connection
 * being opened for it, reset before its login ended (a server that
 * refuses the login, an expired password, may reset some so instead of
 * saying why), or closed. Nothing of the write was sent; marked so.
 * `pooled`, a pooler's words as it ended a connection of the client in
 * statement mode since the last write that landed (see
 * `statementModeWords`), names that mode and its mending: a write
 * through `sql.begin` (`fetch_types: false`, as a client for PgBouncer is
 * made) loses its connection at its `BEGIN`, before any of it was sent.
 */
function lostBeforeWrite(
  error: unknown,
  pooled?: string,
  idle?: string,
): Error {
  return notWritten(
    Object.assign(
      new Error(
        `PostgreSQL lost the connection the write was to go on before any of it was sent (${
          describeError(error)
        }): nothing was written, so try again; ${
          pooled === undefined
            ? "if it goes on, the server's log says why it ends new connections (an expired password, a connection limit, a restart)"
            : `the pooler in front of PostgreSQL ended a connection of this client at a transaction's BEGIN since the last write that landed (${pooled}): its pool mode is statement (PgBouncer's pool_mode = statement), and every write of the store is a transaction, so none will land. ${STATEMENT_MODE_FIX}`
        }${idleSessionWords(idle)}`,
        { cause: error },
      ),
      { code: (error as { code?: unknown }).code },
    ),
  );
}

/**
 * The statements of a write's flight that write nothing (the check at its
 * head, a `SELECT … FOR UPDATE`, which fires no trigger): one of them
 * answered outside the flight's transaction says nothing of the tables'
 * guard (see `beganOutside`).
 */
const CHECKS = new WeakSet<object>();

/** `query`, marked as one of {@linkcode CHECKS}. */
function checkOnly<T extends object>(query: T): T {
  CHECKS.add(query);
  return query;
}

/**
 * The error of a write whose flight's first query (its `BEGIN`) failed
 * while statements behind it that write answered, none refused by the
 * tables' guard (dropped or disabled): they ran outside a transaction.
 */
function beganOutside(error: unknown): Error {
  return new Error(
    `PostgreSQL cut the write's BEGIN (${
      describeError(error)
    }) after its statements were sent: they ran outside a transaction, each on its own, so it may have landed, in whole or in part; the next read says which`,
    { cause: error },
  );
}

/**
 * Whether `answer` is one no statement completed: postgres.js 3.4.9 sets a
 * result's `command` from the statement's `CommandComplete`, and resolves
 * a query whose bytes outlived the socket they were written to (an error
 * on it with no close that fails the query) with the fresh, empty result
 * of its connection's next startup, once that startup sent them. Its rows
 * are none of the query's: an intent that exists would read as none.
 */
function noneCompleted(answer: unknown): boolean {
  const command = (answer as { command?: unknown } | null)?.command;
  return typeof command !== "string" || command === "";
}

/**
 * Whether `error` is an open connection's end as the client saw it, with
 * nothing from the server: the socket reset or broken (`ECONNRESET`,
 * `EPIPE`, `ETIMEDOUT`), or closed under a query (postgres.js's
 * `CONNECTION_CLOSED`, `CONNECTION_DESTROYED`; a server's goodbye on
 * Deno comes so). Not one the server said (its `FATAL` carries its own
 * words), one met opening a connection (`ECONNREFUSED`,
 * `CONNECT_TIMEOUT`), nor the caller's `sql.end()` (`CONNECTION_ENDED`).
 */
function socketLost(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as {
    code?: unknown;
    severity?: unknown;
  };
  return severity === undefined && typeof code === "string" &&
    /^(?:ECONNRESET|EPIPE|ETIMEDOUT|CONNECTION_(?:CLOSED|DESTROYED))$/.test(
      code,
    );
}

/**
 * Whether `error` is a read's connection ended before or while the read
 * was sent, or while it ran: the server's end of the session
 * (`pg_terminate_backend`, `idle_session_timeout`, a restart, a pooler's),
 * met as a reset (`ECONNRESET`, `EPIPE`) or a close (`CONNECTION_CLOSED`;
 * a server's goodbye on Deno comes so). Asking the read again answers
 * it, once it reaches a connection opened anew: each ended connection
 * of the pool fails one read at most, then opens anew. Not a socket that timed out
 * (`ETIMEDOUT`: a partition, which a connection opened anew would meet as
 * well), nor the client's own end of a connection (`CONNECTION_DESTROYED`:
 * the store's, past its bound or closing a session, or `sql.end()`'s
 * timeout) or of the client (`CONNECTION_ENDED`).
 */
function endedUnder(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as {
    code?: unknown;
    severity?: unknown;
  };
  return severity === undefined &&
    (code === "ECONNRESET" || code === "EPIPE" || code === "CONNECTION_CLOSED");
}

/**
 * The error of a read whose connection was lost under it (see
 * {@linkcode socketLost}): postgres.js's own, `read ECONNRESET`, or
 * `write CONNECTION_CLOSED` for a read, says neither what was lost nor
 * what to do. It keeps `error` as its `cause`, and its `code` for a
 * caller that tells errors apart by it.
 */
function lostDuringRead(what: string, error: unknown): Error {
  return Object.assign(
    new Error(
      `PostgreSQL lost the connection during the store's ${what} (${
        describeError(error)
      }): nothing was read, so try again`,
      { cause: error },
    ),
    { code: (error as { code?: unknown }).code },
  );
}

/** The error of a read whose answer is not its own (see `noneCompleted`). */
function emptyRead(what: string): Error {
  return new Error(
    `PostgreSQL lost the connection during the store's ${what}: its answer came back empty, with no statement completed (the client answered it from the connection opened again); nothing was read, so try again`,
  );
}

/**
 * The error of a write whose statements all answered and whose `COMMIT`
 * did not commit (it answered `command`, `ROLLBACK` on a transaction that
 * had failed): nothing of it was written.
 */
function notCommitted(command: unknown): Error {
  return new Error(
    `PostgreSQL did not commit the write (its COMMIT answered ${
      String(command)
    }), though each of its statements answered: nothing of it was written; try again`,
  );
}

/** The error of a write whose answers are not its own (see `noneCompleted`). */
function emptyWrite(): Error {
  return lostDuringWrite(
    new Error(
      "an answer came back empty, with no statement completed: the client answered it from the connection opened again",
    ),
  );
}

/**
 * The error of a call that met no table of the store where it looked
 * (`42P01`, an undefined table; `3F000`, an undefined schema), or a table
 * or function without what this version reads (`42703`, an undefined
 * column; `42883`, an undefined function): a database never migrated, one
 * migrated by an older version that lacks a table, column or function a
 * newer one added (the first revisions had no `intents.tx_hashes` and no
 * `refuse_stale`), or another one than the service's. No retry mends it,
 * so it says to run `migrate()`, which `main.ts` runs at start and a
 * Worker or a process of one's own must run itself; the action comes
 * early, as the app's log line keeps 300 characters of an error. `head` says what
 * failed ("Cannot create intent pi_0001"). `null` for any other error, and
 * for any of these raised inside a function or trigger the statement ran
 * (an operator's on the store's tables), which `migrate()` would not mend.
 */
function unmigrated(
  error: unknown,
  head: string,
  schema: string,
): Error | null {
  const code = (error as { code?: unknown } | null)?.code;
  const where = (error as { where?: unknown } | null)?.where;
  // Raised inside a function or trigger the statement ran (the error's
  // context, `where`, names it): an operator's trigger on the store's
  // tables that names what the database lacks is no older schema, and
  // migrate(), finding the schema current, mends nothing. The store's own
  // functions only raise their own codes.
  if (typeof where === "string" && where !== "") return null;
  if (code === "42703" || code === "42883") {
    return schemaBehind(
      new Error(
        `${head} as the store's schema "${schema}" lacks a column or function this version reads (migrated by an older version): run store.migrate() on it once, as the schema's owner, before serving (a Worker never does) (${
          describeError(error)
        })`,
        { cause: error },
      ),
    );
  }
  if (code !== "42P01" && code !== "3F000") return null;
  return schemaBehind(
    new Error(
      `${head} as this database lacks the store's schema "${schema}" or a table of it: run store.migrate() on it once before serving (a Worker never does), or check that the URL names the service's database (${
        describeError(error)
      })`,
      { cause: error },
    ),
  );
}

/**
 * The errors {@linkcode closedError} made for reads: a store's own read
 * (not a write's) marks one as nothing read or written.
 */
const CLOSED_READS = new WeakSet<Error>();

/**
 * The error of a call made once the store was closed (`what`: "read",
 * "admit a delivery"); a `write`'s marked as not written. Made afresh for
 * each call.
 */
function closedError(what: string, write = false): Error {
  const closed = new Error(
    `Cannot ${what} as the store is closed (its close() was called, as the process stops): nothing was sent to PostgreSQL; retry on a running instance (a queue redelivers)`,
  );
  if (write) return notWritten(closed);
  CLOSED_READS.add(closed);
  return closed;
}

/**
 * The store's error for a new connection refused, its cause arisen under
 * a live pool: by the server (`28P01`: a password wrong, or past the
 * role's `VALID UNTIL`, which the server does not tell apart; `3D000`: the
 * database renamed or dropped; `53300`: no connection slot left, by the
 * role's `CONNECTION LIMIT`, the database's or the server's
 * `max_connections`, as the server's words say), or by the host
 * (`ECONNREFUSED`, in the connect's bare words: nothing listens at the
 * port, a server down or restarting): said with what to do, where the error's words alone said
 * only what. Refused at the connection's start, the call sent nothing on
 * it: nothing of it was `done`. It keeps `error` as its `cause`, and its
 * `code` for a caller that tells errors apart by it. `null` for any other
 * error.
 */
function refusedConnection(
  error: unknown,
  head: string,
  done: "read" | "written",
): Error | null {
  const code = (error as { code?: unknown } | null)?.code;
  const said = describeError(error);
  // Each short enough that a log line's cut (300 characters,
  // describeError) keeps what to do: they are met in a service's log.
  const text = code === "28P01"
    ? `as PostgreSQL refused a connection (${said}): check the client's user and password, and pg_roles.rolvaliduntil (an expired password: ALTER ROLE … VALID UNTIL); nothing was ${done}, so try again then`
    : code === "3D000"
    ? `as PostgreSQL refused a connection (${said}): its database was renamed or dropped; restore it, or point the client at the service's database; nothing was ${done}, so try again then`
    : code === "53300"
    ? `as PostgreSQL has no connection slot left for it (${said}): end idle sessions (see pg_stat_activity), raise that limit, or lower the pool's max; nothing was ${done}, so try again`
    : code === "ECONNREFUSED" && bareRefusal(error)
    ? `as nothing listens at PostgreSQL's host and port (${said}): start the server, or correct the host and port the client connects to; nothing was ${done}, so try again`
    : failedConnects(error)
    ? `as no address of PostgreSQL's host took the connection (${said}): start the server, or correct the host and port, or this machine's route to each address; nothing was ${done}, so try again`
    : null;
  if (text === null) return null;
  const refused = Object.assign(
    new Error(`${head} ${text}`, { cause: error }),
    { code },
  );
  return done === "written" ? notWritten(refused) : refused;
}

/**
 * Whether `error` is a TCP connect's refusal in its bare words, `connect
 * ECONNREFUSED <address>`, or an `AggregateError` of such refusals alone
 * (`node:net`'s, with no message of its own, once every address of a host
 * name refused: `localhost` as `::1` and `127.0.0.1`). A Unix socket's
 * refusal already says what to check (store/_postgres_socket.ts).
 */
function bareRefusal(error: unknown): boolean {
  const bare = (one: unknown) =>
    /^connect ECONNREFUSED \S+$/.test(
      String((one as { message?: unknown } | null)?.message),
    );
  const errors = (error as { errors?: unknown }).errors;
  return Array.isArray(errors)
    ? errors.length > 0 && errors.every(bare)
    : bare(error);
}

/**
 * Whether `error` is `node:net`'s `AggregateError` of a host name's
 * connects, each failed (`connect <CODE> <address>`) and not all refused:
 * one address refused, another unreachable, say. Its own message is
 * empty, so it went out with no words at all; no connection was made, so
 * nothing was sent.
 */
function failedConnects(error: unknown): boolean {
  const errors = (error as { errors?: unknown }).errors;
  return Array.isArray(errors) && errors.length > 0 &&
    errors.every((one: unknown) =>
      /^connect [A-Z][A-Z0-9_]* \S+$/.test(
        String((one as { message?: unknown } | null)?.message),
      )
    );
}

/**
 * The error of a write that got no connection within `waitMs`: it gave up
 * waiting before any of it was sent, and a connection that comes later
 * sends nothing of it (handed back, or its transaction rolled back at
 * once). Marked as not written, so an ops route says that nothing changed.
 * `unreached` names why the server may not have been reached
 * (`#unreached()`).
 */
function noConnection(waitMs: number, unreached: string): Error {
  return notWritten(
    new Error(
      `PostgreSQL gave the store no connection within ${waitMs}ms: the pool is busy, ${unreached}; nothing was written, so try again`,
    ),
  );
}

/** A row-lock wait's context, as the server names it ("while locking tuple (0,1) in relation \"leases\""). */
const ROW_WAIT = /^while [^\n]*tuple[^\n]* in relation "[^\n]*"/;

/**
 * The row-lock wait an error's context (`where`) names first, on one line;
 * `undefined` where it names none. A server whose `lc_messages` is another
 * language words it so ("beim Sperren von Tupel (0,1) in Relation
 * »leases«"; Korean drops the brackets, Chinese adds a space): read there
 * by the tuple's id, two numbers, outside the line's quoted names (a
 * trigger's `SQL statement "…"` line quotes its numbers).
 */
function rowWait(where: unknown): string | undefined {
  if (typeof where !== "string") return undefined;
  const english = ROW_WAIT.exec(where)?.[0];
  if (english !== undefined) return oneLine(english);
  const line = where.split("\n", 1)[0]!;
  const bare = line.replace(
    /"[^"]*"|»[^«]*«|«[^»]*»|„[^“”]*[“”]|“[^”]*”|「[^」]*」/g,
    "",
  );
  return /\d+, ?\d+/.test(bare) ? oneLine(line) : undefined;
}

/**
 * Whether `text` holds `word` (a lower-case SQL identifier) whole: bare, or
 * in any language's quotes.
 */
function namesWord(text: string, word: string): boolean {
  return new RegExp(`(?:^|[^a-z0-9_$])${word}(?:$|[^a-z0-9_$])`).test(text);
}

/**
 * What cancelled a statement (`57014`), read from the server's words:
 * `"request"` (`pg_cancel_backend`, or a client's cancel), `"timeout"`
 * (`statement_timeout`), or `undefined` where they are in another language
 * than English (`lc_messages`: a server made on a German system says
 * "storniere Anfrage wegen Benutzeraufforderung"), which nothing else in
 * the error tells apart (its code and fields are the same).
 */
function cancelledBy(said: string): "request" | "timeout" | undefined {
  if (/user request/.test(said)) return "request";
  if (/statement timeout/.test(said)) return "timeout";
  return undefined;
}

/**
 * What a cancel in the server's words read by {@linkcode cancelledBy} as
 * `undefined` may have been (`own`: this store's own cancel, where it sent
 * one lately), and how to tell, and to have English words.
 */
function untoldCancel(own = ""): string {
  return `the role's statement_timeout or a cancel (another session's pg_cancel_backend${own}), which the server's words in another language than English (lc_messages) do not tell apart (SHOW statement_timeout: 0 is off, so a cancel; a superuser's ALTER ROLE … SET lc_messages = 'C' gives the store's role English words)`;
}

/**
 * What a read that the role's or database's `lock_timeout` ended (`55P03`:
 * the store sets none for its reads) waited for, and where to look: a plain
 * read waits only for a table lock (a schema change's, `VACUUM FULL`'s, a
 * `LOCK TABLE`).
 */
function tableLockWait(error: unknown): string {
  return `${
    oneLine(String((error as { message?: unknown })?.message))
  }; SHOW lock_timeout; a schema change, VACUUM FULL or LOCK TABLE holds one: see pg_locks and pg_stat_activity`;
}

/**
 * The errors of reads (`PostgresStore.#watched`) that a `lock_timeout`
 * ended (`55P03`): the role's or database's, as the store sets none for a
 * read; told apart from a flight's, which ends at the store's own bound.
 */
const LOCKED_READS = new WeakSet<object>();

/**
 * How long after a store on the client cancelled a read of its own a
 * statement cancelled "due to user request" names that cancel first: the
 * cancel travels on a connection of its own (postgres.js opens it, within
 * its `connect_timeout`, 30 s by default), and the server cancels what the
 * read's connection runs when it arrives.
 */
const OWN_CANCEL_MS = 60_000;

/**
 * Per client: when (`performance.now()`) a store on it last cancelled a
 * read of its own past `connectionWaitMs`, and which store. The cancel
 * cuts whatever the read's connection runs when it arrives, and that
 * connection is the client's: the next statement may be another store's
 * on it (a store per tenant's schema, or per request, over one client).
 */
const OWN_CANCELS = new WeakMap<object, { at: number; by: object }>();

/** A cancel of a read of its own a store on the client sent lately: how long ago, and whether by the store that met it. */
interface OwnCancel {
  ms: number;
  ours: boolean;
}

/**
 * Why PostgreSQL cancelled a write's statement (`57014`), for its
 * `BusyError`, or a read's (`done`: `"read"`), for its error: a cancel by request (another session's `pg_cancel_backend`,
 * or, `own.ms` after a store on the client (this one, or another: `own`)
 * cancelled a read of its own past `connectionWaitMs`, that cancel:
 * postgres.js sends it on a connection
 * of its own, and the server cancels whatever the read's connection runs
 * when it arrives, the next statement once the read has ended),
 * `statement_timeout` ending a wait for a row another session held, or
 * `statement_timeout` with no such wait (too short for the write, or a
 * table lock).
 */
function cancelled(
  error: unknown,
  own: OwnCancel | null,
  done: "written" | "read" = "written",
): string {
  const { message, where } = error as { message?: unknown; where?: unknown };
  const said = oneLine(String(message));
  const end = `nothing was ${done}; retry`;
  const by = cancelledBy(said);
  if (by === "request" && own !== null) {
    return `a cancel cut its statement (${said}): ${
      ownCancelWords(own)
    }, and that cancel, reaching the server after the read ended, cuts the statement the read's connection runs next; else another session's pg_cancel_backend did (see pg_stat_activity): ${end}`;
  }
  if (by === "request") {
    return `another session cancelled its statement (${said}: pg_cancel_backend; see pg_stat_activity): ${end}`;
  }
  const wait = rowWait(where);
  if (by === undefined) {
    // Words in another language: which cancel it was is not known.
    const cause = untoldCancel(
      own === null
        ? ""
        : `, or the cancel of a read that ran past connectionWaitMs, which ${
          own.ours
            ? "this store"
            : "another store on the same postgres.js client"
        } sent ${Math.round(own.ms)}ms before`,
    );
    return wait !== undefined
      ? `a cancel ended its wait for a row another session held (${said} ${wait}; see pg_locks and pg_stat_activity): ${cause}: ${end}`
      : `a cancel cut its statement, which waited for no row another session held (${said}): ${cause}; a statement_timeout too short for the store's ${
        done === "read" ? "reads" : "writes"
      }, or a table lock holding it up (a schema change; see pg_stat_activity), ends it so: ${end}`;
  }
  if (wait !== undefined) {
    return `statement_timeout ended its wait for a row another session held (${said} ${wait}; see pg_locks and pg_stat_activity): ${end}`;
  }
  return `statement_timeout cancelled its statement, which waited for no row another session held (${said}): the role's statement_timeout is too short for the store's ${
    done === "read" ? "reads" : "writes"
  } (SHOW statement_timeout; raise it with ALTER ROLE … SET statement_timeout), or a table lock held it up (a schema change; see pg_stat_activity): ${end}`;
}

/** Who cancelled a read of its own lately, and when (see `cancelled`). */
function ownCancelWords(own: OwnCancel): string {
  return `${
    own.ours ? "this store" : "another store on the same postgres.js client"
  } cancelled a read of its own that ran past connectionWaitMs ${
    Math.round(own.ms)
  }ms before`;
}

/**
 * Cancels a postgres.js query, its cancel's failure held. postgres.js
 * 3.4.9's `cancel()` calls the query's `canceller` and drops the promise
 * it returns (it returns `null`), so a cancel whose own connection fails
 * (the server's address refusing connections, in a failover or a restart,
 * while the query's connection stands) was an unhandled rejection, which
 * ends a Deno or Node process. That call is made here, as `cancel()`
 * would, with its promise kept; a client without a `canceller` is
 * cancelled by its `cancel()`, any promise it returns held too.
 */
function cancelQuietly(query: Promise<unknown>): void {
  const cancellable = query as {
    canceller?: ((query: unknown) => unknown) | null;
    cancel?: () => unknown;
  };
  const canceller = cancellable.canceller;
  let pending: unknown;
  if (typeof canceller === "function") {
    cancellable.canceller = null;
    pending = canceller(query);
  } else {
    pending = cancellable.cancel?.();
  }
  if (pending instanceof Promise) pending.catch(() => {});
}
