/**
 * PostgresStore on a real server for the suites: one server per test run
 * (`support/postgres_server.ts`, shared by every file of the run and
 * stopped when the run ends), a schema of its own for every store open at
 * a time (fresh, or from the file's pool and emptied).
 *
 * Without server binaries the Postgres suites are skipped with one loud
 * line, except under `CI=true`, where that is an error (`.ci/run` installs
 * Debian's `postgresql` package first).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { isTypeFetchLost, PostgresStore } from "../store/postgres.ts";
import {
  pgbouncerBin,
  postgresBinDir,
  processPostgres,
} from "../support/postgres_server.ts";
import type { Backend, OpenStore } from "./_stores.ts";
import { skipSaid } from "./_skip_said.ts";
import { timeout } from "./_timeout.ts";

// The suites end sessions under their clients (pg_terminate_backend, a
// server stopped): postgres.js 3.4.9 drops the promise of its type query on
// a new connection, and one ended then is an unhandled rejection no test
// can catch (porsager/postgres#1192), which fails whichever file it lands
// in. Taken here as main.ts takes it; any other still fails the run.
globalThis.addEventListener("unhandledrejection", (event) => {
  if (isTypeFetchLost(event.reason)) return event.preventDefault();
  // The run fails on it: name the query postgres.js tied it to (a property
  // it does not print), so the failure says where it came from.
  const { query, code } = (event.reason ?? {}) as {
    query?: unknown;
    code?: unknown;
  };
  const promise = event.promise as Promise<unknown> & { strings?: unknown };
  const dropped = Array.isArray(promise.strings)
    ? `a query's promise (${JSON.stringify(String(promise.strings[0]).trim())})`
    : `a ${promise.constructor?.name ?? "promise"}`;
  console.error(
    `an unhandled rejection (code ${
      String(code)
    }) of ${dropped}, its error tied to the query ${
      typeof query === "string" ? JSON.stringify(query.trim()) : "(none)"
    }`,
  );
});

const MISSING =
  "no PostgreSQL server binaries (initdb) under `pg_config --bindir` or /usr/lib/postgresql/*/bin";

/**
 * Whether the suites that need `what` run: `true` where it was `found`.
 * Where it is missing they are skipped with one loud line per run, except
 * under `CI=true`, where that is an error: `.ci/run` installs it first.
 *
 * @param found Whether it is here.
 * @param suites Which suites need it (`"the PgBouncer suites"`).
 * @param missing What is missing (`"no pgbouncer on the PATH"`).
 * @param install How to install it (`"apt-get install pgbouncer"`).
 */
export function suitesAvailable(
  found: boolean,
  suites: string,
  missing: string,
  install: string,
): boolean {
  if (found) return true;
  if (Deno.env.get("CI") === "true") {
    throw new Error(
      `CI=true and ${missing}: .ci/run installs it (${install}); ${suites} must run in CI`,
    );
  }
  // One line per run: the env is the process's, shared by the test workers.
  const said = skipSaid(suites);
  if (Deno.env.get(said) !== "1") {
    Deno.env.set(said, "1");
    console.error(
      `\n!!! SKIPPING ${suites}: ${missing}. Install it (${install}) to run them. !!!\n`,
    );
  }
  return false;
}

/** Whether the Postgres suites run: `false` only where the server binaries are missing, outside CI. */
export const postgresAvailable: boolean = suitesAvailable(
  await postgresBinDir() !== null,
  "the PostgresStore suites",
  MISSING,
  "apt-get install postgresql",
);

/**
 * Whether the PgBouncer suites run: `false` only where PostgreSQL or
 * PgBouncer is missing, outside CI (see {@linkcode suitesAvailable}).
 */
export async function pgbouncerAvailable(): Promise<boolean> {
  return postgresAvailable &&
    suitesAvailable(
      await pgbouncerBin() !== null,
      "the PgBouncer suites",
      "no pgbouncer on the PATH or in /usr/sbin (Debian's pgbouncer package)",
      "apt-get install pgbouncer",
    );
}

/** This run's server URL (started on first use). */
export async function postgresUrl(): Promise<string> {
  const found = await processPostgres();
  if (found.server === null) throw new Error(found.missing);
  return found.server.url;
}

/**
 * Rolls back every prepared transaction on `admin`'s server (left by a test
 * that prepared one, whether it passed or threw); a failure is ignored, as
 * the server may be going.
 */
export async function rollbackPrepared(admin: postgres.Sql): Promise<void> {
  await admin.unsafe(
    `SELECT gid FROM pg_catalog.pg_prepared_xacts`,
  ).then((rows) =>
    Promise.all(
      rows.map((r) =>
        admin.unsafe(
          `ROLLBACK PREPARED '${String(r.gid).replaceAll("'", "''")}'`,
        )
      ),
    )
  ).catch(() => {});
}

let schemas = 0;

/** A fresh schema name, unique within the run. */
export function freshSchema(): string {
  return `t${Deno.pid}_${crypto.randomUUID().slice(0, 8)}_${++schemas}`;
}

/**
 * A new postgres.js client on this run's server, quiet about notices.
 * `fetchTypes: false` makes PostgresStore take its `sql.begin` path.
 *
 * Its connections have no lifetime timer (postgres.js's `max_lifetime`,
 * 30 to 60 min), which postgres.js 3.4.9 clears when the socket closes:
 * its `sql.end()` waits for that close only on an idle connection. One
 * still opening when the test ends its client (under load, one the pool
 * opened for a `reserve()` that another connection, handed back first,
 * served: the store's writes and its pooler check reserve), or one still
 * answering, closes after `end()` answered; its timer then outlived the
 * test, and the op sanitizer (deno.json) failed it, or the test after it
 * (tests/postgres_test.ts).
 */
export async function connect(
  max = 8,
  options: {
    fetchTypes?: boolean;
    /** Server settings for each connection (its session's defaults). */
    connection?: Record<string, string>;
  } = {},
): Promise<postgres.Sql> {
  return postgres(await postgresUrl(), {
    max,
    onnotice: () => {},
    fetch_types: options.fetchTypes ?? true,
    ...(options.connection ? { connection: options.connection } : {}),
    max_lifetime: null,
  });
}

// One client per test file: a connection costs ~100 ms to open here, and
// postgres.js sockets do not trip the test sanitizers between tests. Its
// connections have no lifetime timer (connect()): one per connection,
// started in the test that opened the client and pending after it, would
// fail that test under the op and resource sanitizers (deno.json), though
// the client is the file's, not the test's.
let client: Promise<postgres.Sql> | undefined;

/**
 * This test file's client (opened on first use, ended with the run), with
 * all its connections open: a delivery that raced another must not lose
 * its turn to a connection's start-up.
 */
export function sharedClient(): Promise<postgres.Sql> {
  return client ??= (async () => {
    const sql = await connect(8);
    await Promise.all(Array.from({ length: 8 }, () => sql`SELECT 1`));
    return sql;
  })();
}

/**
 * Opens a PostgresStore on a fresh schema of this run's server, on this
 * file's client; `close()` drops the schema.
 *
 * @param options `migrated: false` leaves the schema never migrated (a
 * Worker deployed before its `migrate()`): nothing of it is on the server
 * until the test migrates it, and `close()` drops it if it is there.
 */
export async function openPostgresStore(
  options: { migrated?: boolean } = {},
): Promise<
  OpenStore & { store: PostgresStore; sql: postgres.Sql; schema: string }
> {
  const { migrated = true } = options;
  const sql = await sharedClient();
  const schema = freshSchema();
  const store = new PostgresStore(sql, { schema });
  if (migrated) await store.migrate();
  return {
    store,
    sql,
    schema,
    async close() {
      await sql.unsafe(
        `DROP SCHEMA ${migrated ? "" : "IF EXISTS "}"${schema}" CASCADE`,
      );
    },
  };
}

/** What {@linkcode onFreshSchema} hands its test. */
export interface FreshSchema {
  /**
   * A client of the test's own beside the store's, for its set-up, its
   * checks and its locks: what it does there takes none of `sql`'s
   * connections.
   */
  readonly admin: postgres.Sql;
  /** A fresh schema of this run's server, migrated. */
  readonly schema: string;
  /** The store's client, of `max` connections. */
  readonly sql: postgres.Sql;
  /** A PostgresStore on `sql` and `schema`. */
  readonly store: PostgresStore;
}

/** How {@linkcode onFreshSchema} sets a test up. */
export interface FreshSchemaOptions {
  /**
   * How many connections `sql` has: one makes each statement of the store
   * follow the ones before it on the same session.
   *
   * @default {1}
   */
  readonly max?: number;
  /**
   * How many connections `admin` has.
   *
   * @default {2}
   */
  readonly adminMax?: number;
  /**
   * `sql`'s `fetch_types`: `false` makes the store take its `sql.begin`
   * path (see {@linkcode connect}).
   *
   * @default {true}
   */
  readonly fetchTypes?: boolean;
  /** Server settings for each of `sql`'s connections (its session's defaults). */
  readonly connection?: Record<string, string>;
  /**
   * The store's `connectionWaitMs`.
   *
   * @default {10000} (PostgresStore's own)
   */
  readonly connectionWaitMs?: number;
  /**
   * Which client migrates the schema: `"sql"`, as `store.migrate()` (its
   * pooler check reserves `sql`'s connections), or `"admin"`, as a store on
   * `admin` does, so that the test starts with `sql` never connected and
   * `store` not migrated through itself (the test may call
   * `store.migrate()`: a read-only `sql` refuses it).
   *
   * @default {"sql"}
   */
  readonly migrateOn?: "sql" | "admin";
  /**
   * The test's time limit, set-up and clean-up included (see
   * {@linkcode timeout}).
   *
   * @default {30000}
   */
  readonly timeoutMs?: number;
}

/**
 * A test body on a fresh schema of this run's server: an `admin` client,
 * the schema, migrated (by `options.migrateOn`), and a store on a client
 * of its own (`sql`, of `options.max` connections). Whether the test
 * passes or throws, `sql` is then ended (1 s for whatever it still runs),
 * the schema dropped through `admin`, and `admin` ended.
 *
 * For the tests that take what each statement of the store meets on its
 * connection: a test that needs another way to the server (a proxy, a
 * relay, TLS, a child process) or several schemas sets itself up.
 *
 * @param options The clients, the store and the time limit.
 * @param test The test, handed what it runs on.
 * @returns A `Deno.test` body.
 *
 * @example A store on one connection, the schema changed under it
 * ```ts ignore
 * Deno.test({
 *   name: "PostgresStore: …",
 *   ignore: !postgresAvailable,
 *   fn: onFreshSchema({ connectionWaitMs: 2_000 }, async (fresh) => {
 *     const { admin, schema, store } = fresh;
 *     await store.createIntent({ id: "pi_1" });
 *     await admin.unsafe(`ALTER TABLE "${schema}".intents …`);
 *     assert.equal((await store.getIntent("pi_1"))?.id, "pi_1");
 *   }),
 * });
 * ```
 */
export function onFreshSchema(
  options: FreshSchemaOptions,
  test: (fresh: FreshSchema) => Promise<void>,
): (t: Deno.TestContext) => Promise<void> {
  const {
    max = 1,
    adminMax = 2,
    fetchTypes = true,
    connection,
    connectionWaitMs,
    migrateOn = "sql",
    timeoutMs = 30_000,
  } = options;
  return timeout(timeoutMs, async () => {
    const admin = await connect(adminMax);
    const schema = freshSchema();
    const sql = await connect(max, {
      fetchTypes,
      ...(connection ? { connection } : {}),
    });
    try {
      const store = new PostgresStore(sql, {
        schema,
        ...(connectionWaitMs === undefined ? {} : { connectionWaitMs }),
      });
      if (migrateOn === "admin") {
        await new PostgresStore(admin, { schema }).migrate();
      } else {
        await store.migrate();
      }
      await test({ admin, schema, sql, store });
    } finally {
      await sql.end({ timeout: 1 });
      try {
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await admin.end();
      }
    }
  });
}

/** What {@linkcode onReadOnlySchema} hands its test. */
export interface ReadOnlySchema extends FreshSchema {
  /** A PostgresStore on `admin` and the same schema, which takes writes: for the test's set-up. */
  readonly writable: PostgresStore;
}

/**
 * A test body on a fresh schema (see {@linkcode onFreshSchema}) whose
 * store's sessions are read-only (`default_transaction_read_only = on`, as
 * on a standby or a primary that failed over), migrated through `admin`,
 * and a `writable` store on `admin` for the test to set its intents up.
 *
 * @param test The test, handed what it runs on.
 * @returns A `Deno.test` body.
 */
export function onReadOnlySchema(
  test: (fresh: ReadOnlySchema) => Promise<void>,
): (t: Deno.TestContext) => Promise<void> {
  return onFreshSchema({
    migrateOn: "admin",
    connection: { default_transaction_read_only: "on" },
  }, (fresh) =>
    test({
      ...fresh,
      writable: new PostgresStore(fresh.admin, { schema: fresh.schema }),
    }));
}

/**
 * A fresh database on this run's server, for a service that takes a
 * `DATABASE_URL` (and migrates its own schema), made with `options`
 * after its name (`ENCODING …`, `LOCALE_PROVIDER …`); `drop()` removes it.
 */
export async function freshDatabase(options = ""): Promise<
  { url: string; drop(): Promise<void> }
> {
  const sql = await sharedClient();
  const name = freshSchema();
  await sql.unsafe(`CREATE DATABASE "${name}" ${options}`);
  const url = new URL(await postgresUrl());
  url.pathname = `/${name}`;
  return {
    url: url.href,
    async drop() {
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

/**
 * A fresh database whose sessions are read-only: a server that does not
 * fit `target_session_attrs=read-write`.
 */
export async function readOnlyDatabase(): ReturnType<typeof freshDatabase> {
  const database = await freshDatabase();
  const name = new URL(database.url).pathname.slice(1);
  await (await sharedClient()).unsafe(
    `ALTER DATABASE "${name}" SET default_transaction_read_only = on`,
  );
  return database;
}

/** The store's tables, which a pooled schema is emptied of. */
export const TABLES: readonly string[] = [
  "holds",
  "intents",
  "leases",
  "counters",
  "claims",
  "dead_letters",
];

// Migrated schemas of this file not in use, emptied on the way out.
const idle: string[] = [];

/**
 * PostgresStore on this run's server. Each open store gets a schema of its
 * own, taken from this file's pool of migrated schemas and emptied (a
 * property's hundreds of runs cost a millisecond each, not a migration
 * each); stores open at the same time never share one.
 */
export const postgresBackend: Backend = pooledBackend(
  "PostgresStore",
  (sql) => sql,
);

/**
 * {@linkcode postgresBackend}, each write's read held at `pause()` between
 * its rows' arrival and its flight (see {@linkcode betweenReadAndFlight}):
 * a scheduler's way to run whole writes of others in that gap.
 */
export function gappedPostgresBackend(pause: () => Promise<void>): Backend {
  return pooledBackend(
    "PostgresStore, every write held between its read and its flight",
    (sql) => betweenReadAndFlight(sql, pause),
  );
}

/**
 * PostgresStore on this run's server for a property whose runs must not
 * depend on one another: as {@linkcode postgresBackend}, but each open
 * store's schema, taken from the pool and emptied, is renamed to a name
 * new to the process. PostgresStore keeps its sweep schedule per database
 * and schema name for the whole process (`SWEEPS` in store/postgres.ts),
 * so on a pooled schema under its old name a run's first write that
 * counts sweeps, or not, as the writes of the runs before left that
 * schedule; after a sweep, a lease lapsed over an hour is gone, and
 * `releaseLease` moves no version where MemoryStore's does (the
 * differential test's seed 31, run 251, which passed replayed alone).
 * Under a new name it sweeps as on a fresh schema: at its first write
 * that counts or claims.
 *
 * On a client of one connection of its own: each run's statements are new
 * texts, prepared on every connection that runs them, once a run on one
 * (the pool's eight made the differential run a quarter slower); its
 * calls run one at a time, which one connection serves as eight do.
 */
export const independentPostgresBackend: Backend = pooledBackend(
  "PostgresStore",
  (sql) => sql,
  { client: oneConnection, rename: true },
);

/**
 * How many stores {@linkcode oneConnection} serves on one connection: it
 * keeps every statement it prepared, ~16 a run of the differential test at
 * ~18 kB each on the server (90 MB in 300 runs, 290 MB in 1,000), so a
 * new connection replaces it now and then (~100 ms), and `FC_RUNS` may
 * widen a run without the server's memory growing with it.
 */
const STORES_PER_CONNECTION = 50;

let single: { sql: Promise<postgres.Sql>; stores: number } | undefined;

/**
 * This file's client of one connection (opened on first use, ended with
 * the run), a new one every {@linkcode STORES_PER_CONNECTION} stores: the
 * stores before are closed by then (a property's runs open theirs one at
 * a time).
 */
async function oneConnection(): Promise<postgres.Sql> {
  if (single !== undefined && single.stores >= STORES_PER_CONNECTION) {
    const old = single.sql;
    single = undefined;
    await (await old).end();
  }
  single ??= {
    sql: (async () => {
      const sql = await connect(1);
      await sql`SELECT 1`;
      return sql;
    })(),
    stores: 0,
  };
  single.stores++;
  return await single.sql;
}

function pooledBackend(
  name: string,
  wrap: (sql: postgres.Sql) => postgres.Sql,
  { client = sharedClient, rename = false }: {
    client?: () => Promise<postgres.Sql>;
    rename?: boolean;
  } = {},
): Backend {
  return {
    name,
    async open() {
      const sql = await client();
      const schema = await takeSchema(sql, rename);
      return {
        store: new PostgresStore(wrap(sql), { schema }),
        close: () => {
          idle.push(schema);
        },
      };
    },
  };
}

/**
 * A migrated schema of this file's pool, emptied (and, with `rename`,
 * under a name new to the process), or a fresh one.
 */
async function takeSchema(
  sql: postgres.Sql,
  rename: boolean,
): Promise<string> {
  const used = idle.pop();
  if (used === undefined) {
    const schema = freshSchema();
    await new PostgresStore(sql, { schema }).migrate();
    return schema;
  }
  const schema = rename ? freshSchema() : used;
  await sql.unsafe(
    [
      ...(rename ? [`ALTER SCHEMA "${used}" RENAME TO "${schema}";`] : []),
      ...TABLES.map((table) => `DELETE FROM "${schema}".${table};`),
    ].join(" "),
  );
  return schema;
}

/**
 * `sql`, but the first query that reads a lease (a store write's read of
 * its intent), on the pool or on a connection it reserves, runs `then`
 * once its rows have arrived and before they are handed over: a test's
 * way to act between a write's read and its flight.
 */
export function afterFirstRead(
  sql: postgres.Sql,
  then: () => Promise<void>,
): postgres.Sql {
  return afterReads(sql, then, true);
}

/**
 * `sql`, but every query that reads a lease (a store write's read of its
 * intent) waits for `pause()` once its rows have arrived and before they
 * are handed over: the write's flight starts only then, and whatever runs
 * meanwhile lands in the gap its commit must check.
 */
export function betweenReadAndFlight(
  sql: postgres.Sql,
  pause: () => Promise<void>,
): postgres.Sql {
  return afterReads(sql, pause, false);
}

function afterReads(
  sql: postgres.Sql,
  then: () => Promise<void>,
  once: boolean,
): postgres.Sql {
  let armed = true;
  return answeredAs(sql, (text) => {
    if (!armed || !text.includes("lease_owner")) return undefined;
    if (once) armed = false;
    return async (rows) => {
      await then();
      return rows;
    };
  });
}

/**
 * `sql`, passing everything through, on the pool and on a connection it
 * reserves (and inside `sql.begin` with `inBegin`), except that a query
 * for whose text `pick` gives an answer is sent as ever and resolves to
 * what that answer makes of its rows.
 *
 * @param pick Called with each query's text, joined at its parameters.
 */
export function answeredAs(
  sql: postgres.Sql,
  pick: (text: string) => ((rows: unknown) => unknown) | undefined,
  { inBegin = false }: { inBegin?: boolean } = {},
): postgres.Sql {
  const hook = <T extends object>(target: T): T =>
    new Proxy(target, {
      apply(fn, self, args) {
        const query = Reflect.apply(
          fn as (...args: unknown[]) => unknown,
          self,
          args,
        ) as PromiseLike<unknown>;
        const text = Array.isArray(args[0]) ? args[0].join("?") : "";
        const answered = pick(text);
        if (answered === undefined) return query;
        const answer = query.then.bind(query);
        (query as { then: unknown }).then = (
          resolve: (value: unknown) => unknown,
          reject: (reason: unknown) => unknown,
        ) => answer(answered).then(resolve, reject);
        return query;
      },
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== "function") return value;
        // A connection the store reserves is hooked too.
        if (key === "reserve") {
          return async () => hook(await value.call(target));
        }
        if (key === "begin" && inBegin) {
          return (...args: unknown[]) => {
            const fn = args.at(-1) as (tx: postgres.Sql) => unknown;
            return value.call(
              target,
              ...args.slice(0, -1),
              (tx: postgres.Sql) => fn(hook(tx)),
            );
          };
        }
        return value;
      },
    });
  return hook(sql);
}

/**
 * Registers a test that starts the run's server (on first use) with no time
 * limit: a file whose first test has a tight limit calls it first, as under
 * load a start took up to 24 s of that test's limit.
 */
export function serverUpFirst(): void {
  Deno.test({
    name: "the run's PostgreSQL server is up",
    ignore: !postgresAvailable,
    fn: async () => void await postgresUrl(),
  });
}

/**
 * `sql`, but each `sql.begin()` (a migration's, a move's; the store's
 * writes use none) waits `ms` after its `BEGIN` before its work sends
 * anything: the session sits idle in its transaction that long, which a
 * shorter `idle_in_transaction_session_timeout` ends every time. A
 * transaction ended before then sends nothing more (postgres.js 3.4.9
 * throws uncaught for a query on a socket it let go, its ROLLBACK's too).
 * `held()` resolves once every wait is over.
 */
export function heldAfterBegin(
  sql: postgres.Sql,
  ms: number,
): { sql: postgres.Sql; held: () => Promise<void> } {
  const holds: Promise<unknown>[] = [];
  const wrapped = new Proxy(sql, {
    get(target, name, receiver) {
      if (name !== "begin") return Reflect.get(target, name, receiver);
      return (...args: unknown[]) => {
        const work = args.pop() as (tx: unknown) => Promise<unknown>;
        let ended = false;
        const run = target.begin(...(args as [string]), async (tx) => {
          const hold = new Promise((resolve) => setTimeout(resolve, ms));
          holds.push(hold);
          await hold;
          // Ended (its session lost), it never settles, as the store's
          // statements lost with their connection do: settled, postgres.js
          // would send a ROLLBACK on the socket it let go.
          if (ended) return await new Promise(() => {});
          return await work(tx);
        });
        run.then(() => ended = true, () => ended = true);
        return run;
      };
    },
  });
  return { sql: wrapped, held: async () => void await Promise.all(holds) };
}
