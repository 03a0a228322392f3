/**
 * Moves the service's store from Deno KV to PostgreSQL, once the service
 * is stopped (see docs/stores.md, "Moving from Deno KV to PostgreSQL"):
 *
 * ```sh
 * KV_PATH=./data/relayer.kv DATABASE_URL=postgres://… deno task kv-to-postgres
 * ```
 *
 * reads the store the service used (`KV_PATH`, default
 * `./data/relayer.kv`, or `KV_URL` over KV Connect with
 * `DENO_KV_ACCESS_TOKEN`; a lease is held the service's `CLOCK_SKEW` past
 * its expiry), migrates the schema `DATABASE_URL` names (as the
 * service does at start), moves every record that carries truth with
 * {@linkcode moveKvToPostgres}, and prints what it moved and left, by
 * kind, then what to do next: while intents are still authorized or
 * settling, that the local queue's messages (`KV_QUEUE=1`) were not moved
 * and how many intents want a job published. It exits 1 when the move is refused (a lease held, a schema that
 * holds rows): nothing was moved, and the line says what to do; 1 too when
 * the move committed but Deno KV was written behind its last look before
 * the commit (an instance still runs): the line
 * `WrittenAfterMoveError: The move into schema relayer committed, but …`
 * names the key and says not to switch, to stop every instance on Deno KV,
 * empty the schema and move again (and 1, the line saying the move
 * committed, when Deno KV cannot be read again after the commit); 2 on an
 * argument (it reads none, and has no dry run), on a missing setting or a store it cannot open or use (the KV file: missing,
 * a link to a missing file, another program's SQLite database, cut short
 * beside its `-wal`, or made by a newer Deno KV, each refused as the
 * service's start refuses it, before anything is opened; or the
 * database `DATABASE_URL` names: unreachable, refusing the role or its
 * password, read-only, or a role without the grants the store's calls
 * use, all found by the migration, its first statement, and said in one
 * line `DATABASE_URL: cannot open …` naming `DATABASE_URL`, with the
 * hints the service's start gives: a `target_session_attrs` the server
 * does not fit, a `DENO_CERT` with no file there).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import {
  clientTls,
  isTypeFetchLost,
  PostgresStore,
} from "../store/postgres.ts";
import type { KvLike } from "../store/kv.ts";
import {
  argumentsNamed,
  missingDenoCert,
  openHint,
  remoteKvRefusal,
  sessionAttrsOf,
  sqlStateOf,
  unfitSessionHint,
  withoutToken,
} from "../main.ts";
import { wordsOf } from "../policy/_walk.ts";
import { tlsRefusalOf } from "../store/_postgres_tls.ts";
import { clockSkew, ConfigError, databaseUrl } from "../webhook/config.ts";
import { refuseNoFile, refuseNotAStore } from "../webhook/_kv_file.ts";
import {
  type KvToPostgresReport,
  moveKvToPostgres,
} from "../store/kv_to_postgres.ts";

/** The report as the tool prints it: what moved, what was left. */
export function describeMove(report: KvToPostgresReport): string[] {
  const n = (count: number, noun: string, plural = `${noun}s`) =>
    `${count} ${count === 1 ? noun : plural}`;
  const { moved, left } = report;
  return [
    `moved  ${n(moved.intents, "intent")}, ${n(moved.holds, "hold")}, ${
      n(moved.counts, "delivery count")
    }, ${n(moved.claims, "replay record")}, ${
      n(moved.deadLetters, "dead letter")
    }`,
    `left   ${n(left.lapsedCounts, "lapsed count")}, ${
      n(left.lapsedClaims, "lapsed replay record")
    }, ${n(left.lapsedLeases, "lapsed lease")}, ${
      n(left.redriveRecords, "redrive record")
    }, ${
      n(left.timeIndex, "entry", "entries")
    } of the dead letters' index by time`,
  ];
}

/**
 * The library's refusal as this task's user can act on it: the move's
 * `schema` option is not the task's, which moves into the schema the
 * service uses (`relayer`), so another schema is another database.
 *
 * @example
 * ```ts
 * import { forTheTask } from "./kv_to_postgres.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   forTheTask("… Otherwise move into a new schema (the schema option, migrated first), or empty this one if nothing in it is needed. …"),
 *   "… Otherwise point DATABASE_URL at another database (the service and this task use its schema relayer), or empty this schema if nothing in it is needed. …",
 * );
 * ```
 */
export function forTheTask(message: string): string {
  // Both refusals of a schema holding rows end so ("Otherwise move …", and
  // "Stop it, then move …" when something else wrote them).
  return message.replace(
    "move into a new schema (the schema option, migrated first), or empty this one if nothing in it is needed",
    "point DATABASE_URL at another database (the service and this task use its schema relayer), or empty this schema if nothing in it is needed",
  );
}

/**
 * The service's start refusal, said for the move: what to run again is the
 * move, with the Deno that made a newer store.
 *
 * @example
 * ```ts
 * import { forTheMove } from "./kv_to_postgres.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   forTheMove("KV_PATH: … Free space on that disk, then start again (keep KV_PATH: the store holds every payment's record)."),
 *   "KV_PATH: … Free space on that disk, then run the move again (keep KV_PATH: the store holds every payment's record).",
 * );
 * ```
 */
export function forTheMove(message: string): string {
  return message
    .replace(
      /, then start again; only on the first start of .*$/,
      ", then run the move again.",
    )
    .replace(
      "and run the service with the Deno that made it, or a newer one, then start again.",
      "and run the move with the Deno that made it, or a newer one.",
    )
    .replace(
      "the service would add its tables to it and start with none of its payments' records",
      "Deno KV would add its tables to it, and the move find none of the service's payments' records",
    )
    .replace("then start again", "then run the move again");
}

/**
 * Why the file at `path` is not a store the move may open, or `undefined`.
 * `Deno.openKv()` opens whatever is there: it makes a new, empty store
 * where there is none (a KV_PATH with a typo, the end of a link to a
 * missing file), adds its tables to another program's SQLite database,
 * reads a file cut to 0 bytes as a new store and drops the `-wal` that
 * holds its records, and reads a store a newer Deno KV laid out as its
 * own: each refused as the service's start refuses it. Deno's refusal to
 * touch the path is left to the open, which says which flag to give.
 */
async function notAStore(path: string): Promise<string | undefined> {
  const dir = path.replace(/[^/]*$/, "");
  try {
    await refuseNoFile(path);
    await refuseNotAStore(path, dir === "" ? "." : dir);
  } catch (error) {
    if (error instanceof ConfigError) return forTheMove(error.message);
    if (
      !(error instanceof Deno.errors.NotCapable ||
        error instanceof Deno.errors.PermissionDenied)
    ) throw error;
  }
  try {
    await Deno.stat(path);
    return undefined;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) return undefined;
    return `KV_PATH: no file at ${path}: point KV_PATH at the store the service used`;
  }
}

/**
 * Why this process may not open the store at `path`, in parentheses, and
 * the flags that let it: Deno KV reads and writes the file and its `-wal` and `-shm`
 * beside it, so the folder's read and write, whichever this process
 * lacks (the task may write ./data only; a hand-narrowed --allow-read
 * may leave the folder out).
 */
function openFlags(path: string): string {
  const folder = path.replace(/[^/]*$/, "") || ".";
  const lacks = (["read", "write"] as const).filter((name) =>
    Deno.permissions.querySync({ name, path: folder }).state !== "granted"
  );
  // Granted both and still refused (a file of its own denied): the write,
  // as Deno KV's open needs it.
  if (lacks.length === 0) lacks.push("write");
  const flags = lacks.map((name) => `--allow-${name}=${folder}`).join(" ");
  const why = lacks.includes("write")
    ? "deno task kv-to-postgres may write ./data only"
    : `it may not read ${folder}`;
  return `(${why}): run the tool with ${flags}`;
}

/**
 * The refusal of arguments, which the tool never reads, or `undefined` for
 * none: `--dry-run` moved at once, and `--kv-path …` moved the store
 * `KV_PATH` names, or `./data/relayer.kv`. A flag is named up to its `=`;
 * any other argument (a URL with its password, a `-p<password>`) only
 * counted, as `main.ts` names its own ({@linkcode argumentsNamed}).
 */
function argumentsRefusal(args: readonly string[]): string | undefined {
  if (args.length === 0) return undefined;
  const list = argumentsNamed(args);
  return `kv-to-postgres reads no arguments, so it refuses ${list}: it has no dry run, and its settings are environment variables (KV_PATH, or KV_URL and DENO_KV_ACCESS_TOKEN; DATABASE_URL; CLOCK_SKEW), as docs/stores.md#moving-from-deno-kv-to-postgresql shows. Nothing was moved.`;
}

/**
 * Runs the move with the settings in `env`; returns the exit code.
 *
 * @param env The service's settings (`KV_PATH` or `KV_URL`, `DATABASE_URL`).
 * @param args The command line's arguments: any is refused (exit 2).
 */
export async function main(
  env: Readonly<Record<string, string | undefined>>,
  args: readonly string[] = [],
): Promise<number> {
  const argued = argumentsRefusal(args);
  if (argued !== undefined) {
    console.error(argued);
    return 2;
  }
  let database: ReturnType<typeof databaseUrl>;
  let clockSkewMs: number;
  try {
    database = databaseUrl(env);
    // A lease is held this long past its expiry, as the service reads it.
    clockSkewMs = clockSkew(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(error.message);
    return 2;
  }
  if (database === undefined) {
    console.error(
      "DATABASE_URL is not set: set it to the database to move into (the one the service will use)",
    );
    return 2;
  }
  const { url } = database;
  if (env.KV_URL && env.KV_PATH) {
    console.error("Set KV_URL or KV_PATH, not both");
    return 2;
  }
  const from = env.KV_URL || env.KV_PATH || "./data/relayer.kv";
  if (!env.KV_URL) {
    const refusal = await notAStore(from);
    if (refusal !== undefined) {
      console.error(refusal);
      return 2;
    }
  }
  let kv: Deno.Kv;
  try {
    kv = await Deno.openKv(from);
  } catch (error) {
    const denied = error instanceof Deno.errors.NotCapable ||
      error instanceof Deno.errors.PermissionDenied;
    console.error(
      denied
        ? `${
          env.KV_URL ? "KV_URL" : "KV_PATH"
        }: this process may not open ${from} ${openFlags(from)}`
        : env.KV_URL
        // Deno's error quotes the metadata endpoint's answer, which may
        // echo the access token: kept out, as the service keeps it out.
        ? `KV_URL: cannot open the KV Connect database (${
          remoteKvRefusal(error, env.DENO_KV_ACCESS_TOKEN)
        }): check KV_URL and DENO_KV_ACCESS_TOKEN.`
        : `KV_PATH: cannot open ${from} (${
          error instanceof Error ? error.message : String(error)
        })`,
    );
    return 2;
  }
  // A read of the move may fetch the metadata again, and quote it too.
  const token = env.KV_URL ? env.DENO_KV_ACCESS_TOKEN : undefined;
  const source: KvLike = token ? withoutToken(kv, token) : kv;
  // TLS as the URL says, as the service connects (main.ts), whatever
  // PGSSL or PGSSLNEGOTIATION say.
  let sql: postgres.Sql<Record<string, unknown>>;
  try {
    sql = postgres(url, {
      // The name decoded, as the service connects (main.ts).
      ...(database.name ? { database: database.name } : {}),
      // An IPv6 address, which postgres.js cannot read in the URL, as
      // lists (its types name a string, which it would dial as localhost).
      ...(database.hosts as object | undefined),
      onnotice: () => {},
      ssl: clientTls(database),
      sslnegotiation: database.sslnegotiation,
    } as postgres.Options<Record<string, never>>);
  } catch (error) {
    // postgres.js refuses some settings as the client is made, before it
    // connects (a target_session_attrs it does not take, in DATABASE_URL
    // or PGTARGETSESSIONATTRS): one line, as the service's start says it.
    kv.close();
    const message = error instanceof Error ? error.message : String(error);
    console.error(
      `DATABASE_URL: cannot open ${database.description}: ${message}${
        openHint(message, database.sslnegotiation === "direct")
      }`.replaceAll(url, "DATABASE_URL"),
    );
    return 2;
  }
  const store = new PostgresStore(sql);
  try {
    try {
      await store.migrate();
    } catch (error) {
      // The first statement: a database that cannot be reached, refuses
      // the role or its password, is read-only, or lacks a grant the
      // store's calls use, said as the service says it at start (one line
      // naming DATABASE_URL, what to do where the error says, without the
      // URL: it holds the password).
      const refusal = tlsRefusalOf(error); // the runtime's, which openHint reads
      const message = refusal instanceof Error
        ? wordsOf(refusal)
        : String(refusal);
      console.error(
        `DATABASE_URL: cannot open ${database.description}: ${message}${
          unfitSessionHint(error, sessionAttrsOf(url, sql)) ||
          openHint(
            message,
            database.sslnegotiation === "direct",
            missingDenoCert(),
            sqlStateOf(error),
          )
        }`.replaceAll(url, "DATABASE_URL"),
      );
      return 2;
    }
    const report = await moveKvToPostgres(source, sql, { clockSkewMs });
    for (const line of describeMove(report)) console.log(line);
    // Deno KV's queue cannot be listed, so its messages are not moved: the
    // intents they were for are named by their state (docs/stores.md).
    const [{ inFlight }] = await sql<[{ inFlight: number }]>`
      SELECT count(*)::int AS "inFlight" FROM relayer.intents
      WHERE state IN ('authorized', 'settling')`;
    console.log(
      "next   start the service with DATABASE_URL (KV_PATH, KV_URL and KV_QUEUE unset), then resume the queue",
    );
    if (inFlight > 0) {
      console.log(
        `       if it ran KV_QUEUE=1, its local queue's messages were not moved, and no local queue runs on PostgreSQL: give the service QStash (QSTASH_TOKEN) and publish a job (POST /v1/jobs), or deliver one signed on POST /v1/deliveries, for each intent still authorized or settling (${
          inFlight === 1 ? "there is 1" : `there are ${inFlight}`
        }; docs/stores.md's query lists them)`,
      );
    }
    return 0;
  } catch (error) {
    const name = error instanceof Error ? error.name : "Error";
    const message = error instanceof Error ? error.message : String(error);
    console.error(
      `${name}: ${forTheTask(message).replaceAll(url, "DATABASE_URL")}`,
    );
    return 1;
  } finally {
    store.close();
    // Bounded: postgres.js 3.4.9's end() waits for ever on a connection
    // lost inside the move's transaction; the server ended that session.
    await sql.end({ timeout: 5 });
    kv.close();
  }
}

if (import.meta.main) {
  // postgres.js's type query on a new connection, failed with no caller to
  // catch it (see isTypeFetchLost: a connection ended as it opened, a
  // statement_timeout shorter than the query, a hot standby that refuses
  // SERIALIZABLE): the move's own call on that connection says what
  // happened, in one line. Untaken, the process ended there with a stack
  // trace, after or instead of that line.
  globalThis.addEventListener("unhandledrejection", (event) => {
    if (isTypeFetchLost(event.reason)) event.preventDefault();
  });
  Deno.exit(await main(Deno.env.toObject(), Deno.args));
}
