/**
 * The tables of `PostgresStore`, as the statements `migrate()` runs, and
 * the catalog query that tells it there is nothing to run. Every
 * statement is idempotent (`IF NOT EXISTS`), so a migration creates what
 * is missing and leaves the rest alone. `docs/postgres.md` explains each
 * table.
 *
 * @module
 */

/**
 * A schema name the store accepts: a plain lower-case SQL identifier, not
 * starting with `pg_` (PostgreSQL reserves those for its own schemas).
 */
export const SCHEMA_NAME = /^(?!pg_)[a-z_][a-z0-9_]{0,62}$/;

/**
 * What a transaction that writes the store's truth runs first (the
 * store's writes, the move from Deno KV): its `COMMIT` answers once its
 * WAL is on disk, whatever the role's, database's or connection's
 * `synchronous_commit`. At `off` (a common tuning for speed) PostgreSQL
 * answers a `COMMIT` before that, and a server crash in the next moments
 * loses it: a write-ahead answered as landed, lost after the relayer sent,
 * left the intent as it was before the send, and the next delivery sent
 * the payment again on a record that says nothing may have left. So `off`
 * is raised to `on`. Any other level already flushes the WAL at `COMMIT`
 * and is kept as the role chose: `local` does not wait for a synchronous
 * standby (set to `on`, every write waited for one that was gone, and
 * answered "did not answer"), `remote_apply` waits for it to apply, which
 * `on` would not. A `DO` block (plpgsql, as the schema's functions), which
 * answers no rows: run in a simple query behind `BEGIN`, that query's
 * answer stays one result.
 *
 * @example
 * ```ts ignore
 * await sql.begin(async (tx) => {
 *   await tx.unsafe(DURABLE_COMMIT);
 *   // the writes
 * });
 * ```
 */
export const DURABLE_COMMIT =
  "DO $$BEGIN IF current_setting('synchronous_commit') = 'off' THEN SET LOCAL synchronous_commit = on; END IF; END$$";

/**
 * What a transaction that must not be cut by a role's or database's short
 * timeout runs first: a `setting` shorter than `ms` (`ALTER ROLE … SET
 * statement_timeout = '300ms'`, a common bound for a service's queries;
 * an `idle_in_transaction_session_timeout`) is raised to `ms`, for this
 * transaction only (`SET LOCAL`). A longer setting, or none (0), is kept.
 * Read from `current_setting()`, which every role may call (hardened
 * databases revoke SELECT on `pg_settings` from PUBLIC, which failed the
 * migration with "permission denied for view pg_settings"), as an
 * interval: in milliseconds whatever unit it shows (`300ms`, `3s`,
 * `1min`, `0`). Run by a migration (whose table locks it waits for up to
 * its `lock_timeout`) and by the move from Deno KV (its tables' lock,
 * statements that copy a thousand rows each, and its reads of Deno KV
 * between them): cut, either failed with the server's bare "canceling
 * statement due to statement timeout" (57014), or its session ended,
 * where it would have waited and worked its bounded time.
 *
 * @example
 * ```ts ignore
 * await sql.begin(async (tx) => {
 *   await tx.unsafe(timeoutAtLeast("statement_timeout", 3_000));
 *   // the statements
 * });
 * ```
 */
export function timeoutAtLeast(
  setting: "statement_timeout" | "idle_in_transaction_session_timeout",
  ms: number,
): string {
  return `DO $$BEGIN IF extract(epoch FROM pg_catalog.current_setting('${setting}')::interval) * 1000 BETWEEN 1 AND ${
    ms - 1
  } THEN SET LOCAL ${setting} = ${ms}; END IF; END$$`;
}

/**
 * The value {@linkcode IN_WRITE} gives `relayer.in_write`, and the one the
 * tables' guard asks of it: the moment the transaction began, which no
 * transaction of the session begun by a later message shares (PostgreSQL
 * takes it from the start of the message that began it: transactions
 * sent in one simple query share it, so a value set for the session by
 * such a query would pass the next transaction of that same query; the
 * store sets it for its own transaction alone, and its statements each
 * begin a message). A value left for the session (a `SET`,
 * `set_config(…, false)`; behind a pooler in transaction mode, another
 * client's on the server session they share) is an earlier message's
 * moment, or `on`, and lets nothing through. As text of the epoch,
 * whatever the session's `DateStyle` and `TimeZone` (six decimals on
 * PostgreSQL 14 and later; a float's text before, read and compared in
 * the one session).
 */
const IN_WRITE_VALUE = "extract(epoch FROM transaction_timestamp())::text";

/**
 * What the store's write transactions run first, behind their `BEGIN`:
 * the tables' guard (a trigger of the schema's, see {@linkcode migration})
 * refuses a statement marked {@linkcode WRITE_MARK} (SQLSTATE `RL003`)
 * unless this setting holds the moment its transaction began (a `DO`
 * block that runs `set_config(…, true)`, as `SET LOCAL`: no rows, so the
 * flight's first query answers one result). It holds until the
 * transaction ends, and outside a transaction it ends with its own
 * statement: a
 * write's statements that run outside its transaction (a cancel that cut
 * the query holding its `BEGIN`, its statements pipelined behind) are
 * each refused, and nothing of the write lands without the check it
 * begins with. A statement without the mark (a write by hand, the
 * payments API's, an older relayer's, the move from Deno KV) needs
 * nothing.
 *
 * @example
 * ```ts ignore
 * await sql.begin(async (tx) => {
 *   await tx.unsafe(IN_WRITE);
 *   // the store's marked writes
 * });
 * ```
 */
export const IN_WRITE =
  `DO $$BEGIN PERFORM set_config('relayer.in_write', ${IN_WRITE_VALUE}, true); END$$`;

/**
 * What each statement of a store's write begins with (`marked`, in
 * `_postgres_resend.ts`, puts it there): the tables' guard refuses only a
 * statement whose text (`current_query()`) begins so, outside a
 * transaction that ran {@linkcode IN_WRITE}. It ends with a space:
 * postgres.js finds the keyword of a helper (`UPDATE … SET ${sql(row)}`)
 * only after whitespace, a parenthesis or the text's start.
 *
 * The earlier versions that marked their statements (commits `a04d928`
 * to `1ace61d`) wrote {@linkcode EARLIER_MARK} and set `relayer.in_write`
 * to `on`: this mark differs, so the guard can hold this version's
 * statements to the transaction's own moment and still let those
 * versions write, as they did, during a rollout.
 *
 * @example
 * ```ts ignore
 * const text = `${WRITE_MARK}UPDATE s.intents SET version = version + 1`;
 * ```
 */
export const WRITE_MARK = "/* relayer:write v2 */ ";

/**
 * What each statement of the store's writes began with in the versions
 * before {@linkcode WRITE_MARK} (commits `a04d928` to `1ace61d`), whose
 * transactions set `relayer.in_write` to `on`. The guard still refuses
 * such a statement outside a transaction that set `on`, as those
 * versions' guard did: they keep writing beside this one, and a session
 * left with `on` (a `SET`; behind a pooler, another client's) still lets
 * their statements through as it did then. Not a prefix of
 * {@linkcode WRITE_MARK}, nor it of this.
 *
 * @example
 * ```ts ignore
 * const earlier = `${EARLIER_MARK} UPDATE s.intents SET version = version + 1`;
 * ```
 */
export const EARLIER_MARK = "/* relayer:write */";

/**
 * The SQLSTATE a statement marked {@linkcode WRITE_MARK} meets outside a
 * transaction that ran {@linkcode IN_WRITE}.
 *
 * @example
 * ```ts ignore
 * if (error.code === OUTSIDE_WRITE) console.log("it ran outside its transaction");
 * ```
 */
export const OUTSIDE_WRITE = "RL003";

/**
 * Every relation the migration creates (tables, indexes, the sequence),
 * its function, and the column added to a table made before it: what
 * {@linkcode migrated} looks for.
 */
const RELATIONS = [
  "intents",
  "holds",
  "leases",
  "counters",
  "counters_expires_at",
  "claims",
  "claims_expires_at",
  "dead_letter_versions",
  "dead_letters",
  "dead_letters_newest",
] as const;
const FUNCTIONS = [
  "refuse_replay(bigint)",
  "refuse_stale(bigint)",
  "refuse_outside()",
] as const;
const CALLED = ["refuse_replay(bigint)", "refuse_stale(bigint)"] as const;
const COLUMNS = [["intents", "tx_hashes"]] as const;
/**
 * The columns of the store's tables that are NOT NULL with no default,
 * which its INSERTs give a value: any other such column (one a team added
 * since) fails each INSERT, what {@linkcode migrated} reports as
 * `unfilled`. A NOT NULL column added here without a default goes here.
 */
const FILLED: readonly (readonly [string, readonly string[]])[] = [
  ["intents", ["id", "state"]],
  ["holds", ["intent_id", "state"]],
  ["leases", ["intent_id", "owner", "expires_at"]],
  ["counters", ["job_id", "deliveries", "expires_at"]],
  ["claims", ["key", "expires_at"]],
  ["dead_letters", [
    "job_id",
    "intent_id",
    "deliveries",
    "cause",
    "reason",
    "resolution",
    "last_error",
    "poisoned_at",
  ]],
];
/**
 * The privileges the store's calls use, which a service role that does
 * not own the schema needs granted (see docs/postgres.md): what
 * {@linkcode migrated} reports missing. Intents and holds are never
 * deleted; the sweep and a redrive delete the rest.
 */
const TABLE_PRIVILEGES: readonly (readonly [string, readonly string[]])[] = [
  ["intents", ["SELECT", "INSERT", "UPDATE"]],
  ["holds", ["SELECT", "INSERT", "UPDATE"]],
  ...(["leases", "counters", "claims", "dead_letters"] as const).map((
    table,
  ) => [table, ["SELECT", "INSERT", "UPDATE", "DELETE"]] as const),
];

function checked(schema: string, what: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(
      `Cannot build ${what} as 'schema' must match ${SCHEMA_NAME}: current value is ${
        JSON.stringify(schema)
      }`,
    );
  }
  return `"${schema}"`;
}

/**
 * Why a database whose session is read-only (the {@linkcode migrated}
 * check's `read_only`) takes no writes, and what to do, for `who` (`"the
 * store's"`, `"the move's"`): a hot standby (its `standby`) wants the
 * primary; a primary whose session is read-only by
 * `default_transaction_read_only` wants that setting off, which
 * connecting to the primary, where it already is, does not do.
 *
 * @param standby Whether the server is a hot standby.
 * @param who Whose role the setting is on.
 * @returns The reason and the remedy, after "as ".
 *
 * @example
 * ```ts
 * import { readOnlyReason } from "./_postgres_schema.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(readOnlyReason(true, "the store's"), /connect to the primary$/);
 * assert.match(readOnlyReason(false, "the store's"), /default_transaction_read_only = off/);
 * ```
 */
export function readOnlyReason(standby: boolean, who: string): string {
  return standby
    ? "the server is a hot standby (pg_is_in_recovery()), which takes no writes: connect to the primary"
    : `this session is read-only though the server is a primary (default_transaction_read_only = on, set for the role, the database or the connection): turn it off for ${who} role (ALTER ROLE … SET default_transaction_read_only = off), or connect as a role that may write`;
}

/**
 * One catalog query, answering one row whose `current` says whether
 * everything the migration creates exists in `schema`, `read_only`
 * whether this connection may write at all (a standby, or
 * `default_transaction_read_only`), `standby` whether the server is a hot
 * standby (which of the two to say), and `missing` which privileges the
 * store's calls use this role lacks on what exists (`SELECT on
 * relayer.claims, …`, or empty): granted to a schema's owner, and needed
 * by a service role that is not; and `hidden` which of its tables
 * row-level security hides rows of from this role (`relayer.intents, …`,
 * or empty), where it would read a payment as missing; and `unwritable`
 * which of the writes its calls make no row-level security policy lets
 * it make (`UPDATE on relayer.intents, …`, or empty), where a policy FOR
 * SELECT alone let it start and its writes changed no row; and `unfilled` which columns
 * of its tables are NOT NULL with no default though its INSERTs give them
 * no value (`relayer.intents.team_ref, …`, or empty): a column a team
 * added since, which fails each of those INSERTs. Text, not an array: a client without
 * the server's types (through a pooler in transaction mode) reads an
 * array as its literal `{…}`. `migrate()` asks it
 * first, at every start, and runs no DDL when it is true: even an
 * `IF NOT EXISTS` statement locks (`CREATE INDEX` takes a share lock on
 * its table, waiting for every open write on it and stalling every write
 * behind it) and needs the DDL privileges a service's role may lack.
 *
 * A migration that changes an object that already exists (a column's
 * type, the function's body) must extend this query to tell the old
 * object from the new one, or a migrated database never gets the change.
 *
 * Its calls of pg_catalog's polymorphic functions (`array_to_string`,
 * `unnest`) name the schema: one of the same name on the role's
 * `search_path` that takes the exact array type (`text[]`, `oid[]`) is a
 * better match than `anyarray`, and PostgreSQL picks it even though
 * pg_catalog is searched first (CVE-2018-1058's pattern): it answered no
 * missing grant and no hidden rows, and a role that could not write, or
 * saw no row, started (tests/store/postgres_database_settings_test.ts).
 */
export function migrated(schema: string): string {
  const s = checked(schema, "the migration check");
  return `SELECT ${
    [
      ...RELATIONS.map((name) => `to_regclass('${s}.${name}') IS NOT NULL`),
      ...FUNCTIONS.map((name) => `to_regprocedure('${s}.${name}') IS NOT NULL`),
      ...COLUMNS.map(([table, column]) =>
        `EXISTS (SELECT 1 FROM pg_attribute
          WHERE attrelid = to_regclass('${s}.${table}')
            AND attname = '${column}' AND NOT attisdropped)`
      ),
      // The guard's function as this version has it (it refuses only the
      // store's marked statements, and asks the setting for its
      // transaction's start), and each table's guard, enabled ALWAYS (one
      // an operator disabled, or one that fires in origin mode only, is
      // enabled so by the next migration).
      `EXISTS (SELECT 1 FROM pg_proc
          WHERE oid = to_regprocedure('${s}.refuse_outside()')
            AND prosrc LIKE '%${MARK_TEXT}%'
            AND prosrc LIKE '%transaction_timestamp%')`,
      ...TABLES.map((table) =>
        `EXISTS (SELECT 1 FROM pg_trigger
          WHERE tgrelid = to_regclass('${s}.${table}')
            AND tgname = '${GUARD}' AND tgenabled = 'A')`
      ),
    ].join("\n    AND ")
  } AS current,
  current_setting('transaction_read_only') = 'on' AS read_only,
  pg_catalog.pg_is_in_recovery() AS standby,
  pg_catalog.array_to_string(ARRAY[${
    [
      ...TABLE_PRIVILEGES.flatMap(([table, privileges]) =>
        privileges.map((privilege) =>
          lacks(
            `has_table_privilege(to_regclass('${s}.${table}')::oid, '${privilege}')`,
            `${privilege} on ${schema}.${table}`,
          )
        )
      ),
      // nextval takes USAGE or UPDATE.
      lacks(
        `has_sequence_privilege(to_regclass('${s}.dead_letter_versions')::oid, 'USAGE, UPDATE')`,
        `USAGE on ${schema}.dead_letter_versions`,
      ),
      // The functions the store's statements call (a trigger's function
      // needs EXECUTE only of the role that creates the trigger).
      ...CALLED.map((name) =>
        lacks(
          `has_function_privilege(to_regprocedure('${s}.${name}')::oid, 'EXECUTE')`,
          `EXECUTE on ${schema}.${name}`,
        )
      ),
      // Each write's `DURABLE_COMMIT` is a DO block in plpgsql (granted to
      // PUBLIC unless the database revokes it).
      lacks(
        `has_language_privilege((SELECT oid FROM pg_language WHERE lanname = 'plpgsql'), 'USAGE')`,
        "USAGE on LANGUAGE plpgsql",
      ),
    ].join(",\n    ")
  }]::text[], ', ') AS missing,
  ${hiddenTables(schema, s)} AS hidden,
  pg_catalog.array_to_string(ARRAY[${
    TABLE_PRIVILEGES.flatMap(([table, privileges]) =>
      privileges.filter((privilege) => privilege !== "SELECT").map((
        privilege,
      ) =>
        unpolicied(
          `to_regclass('${s}.${table}')`,
          policyCommand(privilege),
          `${privilege} on ${schema}.${table}`,
        )
      )
    ).join(",\n    ")
  }]::text[], ', ') AS unwritable,
  pg_catalog.array_to_string(ARRAY(
    SELECT pg_catalog.format('%s.%s.%s', '${schema}', c.relname, a.attname)
    FROM pg_catalog.pg_attribute a
    JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    WHERE a.attrelid IN (${
    FILLED.map(([table]) => `to_regclass('${s}.${table}')`).join(", ")
  })
      AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull
      AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
      AND (c.relname::text, a.attname::text) NOT IN (${
    FILLED.flatMap(([table, columns]) =>
      columns.map((column) => `('${table}', '${column}')`)
    ).join(", ")
  })
    ORDER BY 1), ', ') AS unfilled`;
}

/**
 * The `pg_policy.polcmd` of a policy for `privilege`, one the store's
 * writes use (INSERT, UPDATE, DELETE); a policy FOR ALL is `*`.
 */
function policyCommand(privilege: string): string {
  return privilege === "INSERT" ? "a" : privilege === "UPDATE" ? "w" : "d";
}

/**
 * The text of the store's tables in `schema` (checked, as `s`) that
 * row-level security hides rows of from this role, comma-separated, or
 * empty: {@linkcode migrated}'s `hidden`, and {@linkcode rowSecurity}'s.
 */
function hiddenTables(schema: string, s: string): string {
  return `pg_catalog.array_to_string(ARRAY[${
    TABLES.map((table) =>
      hidden(`to_regclass('${s}.${table}')`, `${schema}.${table}`)
    ).join(",\n    ")
  }]::text[], ', ')`;
}

/**
 * One catalog query, answering one row whose `hidden` names the store's
 * tables in `schema` that row-level security hides rows of from this role
 * (`relayer.intents, …`, or empty), as {@linkcode migrated}'s does: what
 * the store asks when a read finds no intent, or an intent without its
 * hold, as an admin's `ENABLE ROW LEVEL SECURITY` after the start hides
 * every row of a table from a role that does not own it and no policy
 * lets read (no error, no row). Only then, so a read that finds its row
 * costs nothing more.
 *
 * @example The query names each table's check
 * ```ts
 * import { rowSecurity } from "./_postgres_schema.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(rowSecurity("relayer"), /row_security_active\(to_regclass\('"relayer"\.intents'\)\)/);
 * assert.match(rowSecurity("relayer"), / AS hidden$/);
 * ```
 */
export function rowSecurity(schema: string): string {
  const s = checked(schema, "the row-level security check");
  return `SELECT ${hiddenTables(schema, s)} AS hidden`;
}

/**
 * One catalog query, answering one row whose `secured` says whether
 * row-level security is enabled on any of the store's tables in `schema`
 * (`pg_class.relrowsecurity`): asked before {@linkcode rowSecurity},
 * which alone cost a not-found read 2.4 ms more (local server), so that a
 * store with none pays a lookup (0.8–1.3 ms).
 *
 * @example The query names each table
 * ```ts
 * import { rowSecured } from "./_postgres_schema.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(rowSecured("relayer"), /to_regclass\('"relayer"\.dead_letters'\)/);
 * ```
 */
export function rowSecured(schema: string): string {
  const s = checked(schema, "the row-level security check");
  return `SELECT EXISTS (
      SELECT 1 FROM pg_catalog.pg_class WHERE relrowsecurity AND oid IN (${
    TABLES.map((table) => `to_regclass('${s}.${table}')`).join(", ")
  })
    ) AS secured`;
}

/**
 * The trigger on each of the store's tables that refuses a write outside a
 * transaction that ran {@linkcode IN_WRITE}.
 */
const GUARD = "in_write_only";

/** {@linkcode WRITE_MARK} without its space, as the guard compares it. */
const MARK_TEXT = WRITE_MARK.trimEnd();

/** The store's tables, each of which it must see every row of, and each guarded. */
export const TABLES = [
  "intents",
  "holds",
  "leases",
  "counters",
  "claims",
  "dead_letters",
] as const;

/**
 * One query answering `held` (its one parameter, 1, as the store's reads
 * have one: see `#selectOne`): the prepared transactions of this database
 * that hold a lock on one of the store's tables in `schema` (checked, as
 * `SCHEMA_NAME`), each `'gid', prepared at … by role`, comma-separated, or
 * empty. A row lock's holder has the table's lock too; a prepared
 * transaction's locks show in pg_locks with no pid, under the virtual
 * transaction of its transaction id's own lock. PostgresStore asks it
 * where a write's wait for a lock ended, and the move into a schema
 * (`moveKvToPostgres`) where its wait for the tables did.
 *
 * @param schema The store's schema.
 * @returns The query.
 *
 * @example
 * ```ts
 * import { preparedLocks } from "./_postgres_schema.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(preparedLocks("relayer"), /FROM pg_catalog\.pg_prepared_xacts p/);
 * assert.throws(() => preparedLocks("a'b"), TypeError);
 * ```
 */
export function preparedLocks(schema: string): string {
  const s = checked(schema, "the question of prepared transactions");
  return `SELECT coalesce(pg_catalog.string_agg(DISTINCT pg_catalog.format('%L, prepared at %s by %s', p.gid, p.prepared, p.owner), ', '), '') AS held,
      $1::int AS described
    FROM pg_catalog.pg_prepared_xacts p
    JOIN pg_catalog.pg_locks x ON x.locktype = 'transactionid'
      AND x.transactionid = p.transaction AND x.pid IS NULL
    JOIN pg_catalog.pg_locks l ON l.virtualtransaction = x.virtualtransaction
      AND l.pid IS NULL
    WHERE p.database = pg_catalog.current_database()
      AND l.relation IN (${
    TABLES.map((table) => `pg_catalog.to_regclass('${s}.${table}')`)
      .join(", ")
  })`;
}

/**
 * The statements that end the prepared transactions `held` names (see
 * `preparedLocks`): `COMMIT PREPARED 'gid' or ROLLBACK PREPARED 'gid'`,
 * for each.
 *
 * @param held The prepared transactions, as `preparedLocks` answers them.
 * @returns The statements, `; `-separated.
 *
 * @example
 * ```ts
 * import { preparedEnds } from "./_postgres_schema.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   preparedEnds("'tm-4711', prepared at 2026-12-07 by app"),
 *   "COMMIT PREPARED 'tm-4711' or ROLLBACK PREPARED 'tm-4711'",
 * );
 * assert.equal(
 *   preparedEnds("E'tm\\\\4711', prepared at 2026-12-07 by app"),
 *   "COMMIT PREPARED E'tm\\\\4711' or ROLLBACK PREPARED E'tm\\\\4711'",
 * );
 * ```
 */
export function preparedEnds(held: string): string {
  // A gid with a backslash is quoted E'…' (its backslash doubled): the
  // literal with its E, or the statement names another gid.
  return [...held.matchAll(/(E?'(?:[^']|'')*'), prepared at /g)]
    .map(([, gid]) => `COMMIT PREPARED ${gid} or ROLLBACK PREPARED ${gid}`)
    .join("; ");
}

/**
 * The statement that empties the store's tables in `schema` (a checked
 * identifier), and leaves them migrated: what a refused move says to run
 * where nothing in the schema is needed. `TRUNCATE` refuses a table
 * another table's foreign key names, where `DROP SCHEMA … CASCADE` would
 * drop that key, or a view of one's own, with it. The schema is quoted, as
 * the store quotes it: a name it takes may be a keyword of SQL (`user`).
 */
export function emptying(schema: string): string {
  return `TRUNCATE ${TABLES.map((table) => `"${schema}".${table}`).join(", ")}`;
}

/**
 * `what` when row-level security applies to this role on `table` (an
 * admin's `ENABLE ROW LEVEL SECURITY` on a table the role does not own,
 * nor bypasses) and either its `row_security` is off (every query on the
 * table fails) or no permissive policy lets it, or PUBLIC, read rows (it
 * sees none: a delivery reads a live payment as missing). A policy that
 * names the role is trusted to let it see what it needs.
 */
function hidden(table: string, what: string): string {
  return `CASE WHEN row_security_active(${table}) AND (
      current_setting('row_security') = 'off' OR ${policyFor(table, "r")}
    ) THEN '${what}' END`;
}

/**
 * `what` when row-level security applies to this role on `table` and no
 * permissive policy for `command` (`pg_policy.polcmd`: `a` INSERT, `w`
 * UPDATE, `d` DELETE) lets it, or PUBLIC, write: an UPDATE or a DELETE
 * then changes no row, with no error (a lease never released, an intent's
 * compare-and-set read as a race lost for good), and an INSERT fails.
 * A policy FOR SELECT alone let such a role start, as {@linkcode hidden}
 * asks only for reads.
 */
function unpolicied(table: string, command: string, what: string): string {
  return `CASE WHEN row_security_active(${table}) AND ${
    policyFor(table, command)
  } THEN '${what}' END`;
}

/**
 * True when no permissive policy on `table` for `command` (or FOR ALL)
 * names this role, a role it is a member of, or PUBLIC.
 */
function policyFor(table: string, command: string): string {
  return `NOT EXISTS (
        SELECT 1 FROM pg_policy p
        WHERE p.polrelid = ${table} AND p.polpermissive
          AND p.polcmd IN ('*', '${command}')
          AND (0::oid = ANY (p.polroles) OR EXISTS (
            SELECT 1 FROM pg_catalog.unnest(p.polroles) AS r (oid)
            WHERE r.oid <> 0::oid AND pg_has_role(r.oid, 'MEMBER')
          ))
      )`;
}

/** `what` when `held` is false; NULL when it is true, or NULL (the object is missing). */
function lacks(held: string, what: string): string {
  return `CASE WHEN NOT ${held} THEN '${what}' END`;
}

/**
 * The migration, one statement per entry, for `schema` (already checked
 * against {@linkcode SCHEMA_NAME}: it is the only text spliced into SQL).
 * Whatever it creates is listed for {@linkcode migrated}'s check: an
 * object added here goes into those lists too, and a change to one that
 * exists extends the check (see there).
 *
 * It runs in one transaction: an index added here to a table that exists
 * would be built under a lock that stops every write to that table for
 * the build (1M counters: 0.3 s; docs/postgres.md, "At production
 * size"). Every index so far came with its table; a new one on an
 * existing table must be built `CONCURRENTLY`, outside that transaction.
 */
export function migration(schema: string): readonly string[] {
  const s = checked(schema, "the migration");
  return [
    // A schema is created only if it is missing: `CREATE SCHEMA IF NOT
    // EXISTS` needs CREATE on the database even when the schema exists,
    // which a role that owns a schema its DBA made need not have.
    `DO $$
      BEGIN
        IF NOT EXISTS (
          SELECT 1 FROM pg_namespace WHERE nspname = '${schema}'
        ) THEN
          CREATE SCHEMA ${s};
        END IF;
      END
      $$`,
    // The intent and its last broadcast. `version` moves on every write of
    // the intent or of its hold: it is what a compare-and-set checks.
    `CREATE TABLE IF NOT EXISTS ${s}.intents (
      id text COLLATE "C" PRIMARY KEY,
      state text NOT NULL CHECK (state IN ('created', 'authorized', 'settling', 'settled', 'failed', 'needs_review')),
      settling_since bigint,
      broadcasting bigint,
      may_have_sent boolean NOT NULL DEFAULT false,
      last_outcome text CHECK (last_outcome IN ('sent', 'not_sent', 'unknown')),
      last_tx_hash text,
      last_at bigint,
      last_error text,
      tx_hashes text NOT NULL DEFAULT '[]',
      version bigint NOT NULL DEFAULT 1,
      CHECK ((last_outcome IS NULL) = (last_at IS NULL))
    )`,
    // Every tx hash a send returned (a JSON array), kept since 0.2. On a
    // table made before, the column is added once, with a constant default
    // (no rewrite), and a row's last sent hash is read as on record. The
    // check comes first: ALTER TABLE locks the table before it looks, and
    // migrate() runs at every start.
    `DO $$
      BEGIN
        IF NOT EXISTS (
          SELECT 1 FROM information_schema.columns
          WHERE table_schema = '${schema}' AND table_name = 'intents'
            AND column_name = 'tx_hashes'
        ) THEN
          ALTER TABLE ${s}.intents
            ADD COLUMN IF NOT EXISTS tx_hashes text NOT NULL DEFAULT '[]';
        END IF;
      END
      $$`,
    // The ledger: one row once a hold is recorded.
    `CREATE TABLE IF NOT EXISTS ${s}.holds (
      intent_id text COLLATE "C" PRIMARY KEY REFERENCES ${s}.intents (id),
      state text NOT NULL CHECK (state IN ('pending', 'voided', 'captured'))
    )`,
    // One row per intent a delivery holds (or held: an expired row is free).
    `CREATE TABLE IF NOT EXISTS ${s}.leases (
      intent_id text COLLATE "C" PRIMARY KEY,
      owner text NOT NULL,
      expires_at bigint NOT NULL
    )`,
    // Delivery counts for queues that report none; a count expires its ttlMs (8 days unless given) after its last write.
    `CREATE TABLE IF NOT EXISTS ${s}.counters (
      job_id text COLLATE "C" PRIMARY KEY,
      deliveries bigint NOT NULL CHECK (deliveries >= 1),
      expires_at bigint NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS counters_expires_at ON ${s}.counters (expires_at)`,
    // Replay records: a signed delivery's token id or signature, until it expires.
    `CREATE TABLE IF NOT EXISTS ${s}.claims (
      key text COLLATE "C" PRIMARY KEY,
      expires_at bigint NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS claims_expires_at ON ${s}.claims (expires_at)`,
    // A claim that found a live record calls this to fail its statement,
    // which aborts the transaction it rides in: nothing of it commits.
    `CREATE OR REPLACE FUNCTION ${s}.refuse_replay(claimed bigint) RETURNS bigint
      LANGUAGE plpgsql AS $$
      BEGIN
        IF claimed = 0 THEN
          RAISE EXCEPTION 'replay record already claimed' USING ERRCODE = 'RL001';
        END IF;
        RETURN claimed;
      END
      $$`,
    // A write that found its intent moved on calls this to fail its
    // statement, aborting the transaction it rides in, as refuse_replay.
    `CREATE OR REPLACE FUNCTION ${s}.refuse_stale(held bigint) RETURNS bigint
      LANGUAGE plpgsql AS $$
      BEGIN
        IF held = 0 THEN
          RAISE EXCEPTION 'intent changed since it was read' USING ERRCODE = 'RL002';
        END IF;
        RETURN held;
      END
      $$`,
    // A dead letter's version comes from a sequence, so a letter removed
    // and kept again never repeats a version a redrive may still hold.
    `CREATE SEQUENCE IF NOT EXISTS ${s}.dead_letter_versions`,
    `CREATE TABLE IF NOT EXISTS ${s}.dead_letters (
      job_id text COLLATE "C" PRIMARY KEY,
      intent_id text NOT NULL,
      deliveries bigint NOT NULL,
      cause text NOT NULL CHECK (cause IN ('declared', 'exhausted')),
      reason text NOT NULL,
      resolution text NOT NULL,
      last_error text NOT NULL,
      poisoned_at bigint NOT NULL,
      queue text,
      queue_message_id text,
      queue_dlq_id text,
      version bigint NOT NULL DEFAULT nextval('${s}.dead_letter_versions')
    )`,
    // Newest first, then by job id: the keyset of listDeadLetters.
    `CREATE INDEX IF NOT EXISTS dead_letters_newest ON ${s}.dead_letters (poisoned_at DESC, job_id)`,
    // Every statement of the store's writes (marked WRITE_MARK) runs
    // inside a transaction that ran IN_WRITE: one that runs outside it (in
    // autocommit, after a cancel cut the query holding its BEGIN) is
    // refused, so no write of the store lands without its checks. Any
    // other statement (a write by hand, the payments API's, a relayer
    // older than the marks) is not the guard's business; one marked
    // EARLIER_MARK (the versions a04d928 to 1ace61d) is held to what their
    // guard asked, relayer.in_write on.
    `CREATE OR REPLACE FUNCTION ${s}.refuse_outside() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        IF (starts_with(current_query(), '${MARK_TEXT}')
            AND coalesce(current_setting('relayer.in_write', true), '')
              <> ${IN_WRITE_VALUE})
          OR (starts_with(current_query(), '${EARLIER_MARK}')
            AND coalesce(current_setting('relayer.in_write', true), '')
              <> 'on') THEN
          RAISE EXCEPTION 'a write of the relayer''s to %.% ran outside its transaction (a cancel cut its BEGIN): refused', TG_TABLE_SCHEMA, TG_TABLE_NAME
            USING ERRCODE = '${OUTSIDE_WRITE}',
              HINT = 'Only statements that begin with ${MARK_TEXT} (or ${EARLIER_MARK}, an earlier version''s) are refused so; a write by hand needs nothing (docs/postgres.md, "Writing by hand")';
        END IF;
        RETURN NULL;
      END
      $$`,
    // CREATE TRIGGER locks its table: run only where the guard is missing
    // (or not enabled ALWAYS: enabled so). ALWAYS: a trigger enabled
    // plainly does not fire where session_replication_role is replica (a
    // restore's or a replication tool's setting, for a session, a role or
    // the database; behind a pooler in transaction mode, another client's
    // left on a shared server session), and the store's statements would
    // pass outside their transaction. A logical replica's apply should
    // pass: its current_query() is null (not tested here).
    ...TABLES.map((table) =>
      `DO $$
      BEGIN
        IF NOT EXISTS (
          SELECT 1 FROM pg_trigger
          WHERE tgrelid = '${s}.${table}'::regclass AND tgname = '${GUARD}'
        ) THEN
          CREATE TRIGGER ${GUARD}
            BEFORE INSERT OR UPDATE OR DELETE ON ${s}.${table}
            FOR EACH STATEMENT EXECUTE FUNCTION ${s}.refuse_outside();
          ALTER TABLE ${s}.${table} ENABLE ALWAYS TRIGGER ${GUARD};
        ELSIF EXISTS (
          SELECT 1 FROM pg_trigger
          WHERE tgrelid = '${s}.${table}'::regclass AND tgname = '${GUARD}'
            AND tgenabled <> 'A'
        ) THEN
          ALTER TABLE ${s}.${table} ENABLE ALWAYS TRIGGER ${GUARD};
        END IF;
      END
      $$`
    ),
  ];
}
