/**
 * The move of a relayer's store from Deno KV (`KvStore`) to PostgreSQL
 * (`PostgresStore`), with nothing in flight lost. The intent store is the
 * only truth: an intent mid-settle carries the tx a second send must not
 * repeat, a hold's state decides whether it may still be voided or
 * captured, a count where a job's deliveries stand, a dead letter the
 * record of a payment that needs someone, a replay record the refusal of a
 * signed delivery seen before. Each is copied to the row `PostgresStore`
 * would have written:
 *
 * | Deno KV key (`KvStore`) | PostgreSQL row (`PostgresStore`) |
 * |---|---|
 * | `[…prefix, "intent", id]` | `intents` (version 1) |
 * | `[…prefix, "hold", id]` | `holds` |
 * | `[…prefix, "deliveries", key]`, not lapsed | `counters` (`deliveries`, `expires_at`) |
 * | `[…prefix, "claim", key]`, kept by Deno KV | `claims` (`expires_at`) |
 * | `[…prefix, "dead", jobId]` | `dead_letters` (a new version) |
 * | `[…prefix, "dead_by_time", …]` | none: the index `dead_letters_newest` |
 * | `[…prefix, "redriven", jobId]` | none: Deno KV's own proof that a redrive landed |
 * | `[…prefix, "lease", id]`, lapsed | none: a lapsed lease is free |
 *
 * A lease still held is a delivery at work, and a record written while
 * the move copies the store an instance still running: the move refuses
 * both. The copy is one PostgreSQL transaction, so a move cut short writes
 * nothing and is run again as it was; Deno KV is only read (and committed
 * to once with nothing in it, for a versionstamp that marks the copy's
 * start). Deno KV takes no lock, so a write behind the last look before
 * the commit is found by a look after it: the move then throws
 * {@linkcode WrittenAfterMoveError} (committed, without that write), never
 * its report.
 *
 * @module
 */

import type postgres from "postgres";
import { BusyError } from "./busy_error.ts";
import { ConflictError } from "./conflict_error.ts";
import type { KvKey, KvLike } from "./kv.ts";
import type { PostgresClient } from "./postgres.ts";
import {
  DURABLE_COMMIT,
  emptying,
  migrated,
  preparedEnds,
  preparedLocks,
  readOnlyReason,
  SCHEMA_NAME,
  timeoutAtLeast,
} from "./_postgres_schema.ts";
import {
  deadLetterRow,
  hasNul,
  intentColumns,
  mendedBroadcast,
  ownRows,
} from "./_postgres_rows.ts";
import {
  checkDeadLetter,
  checkRecord,
  CLAIM_GRACE_MS,
  type IntentRecord,
  knownTxHashes,
  newIntentRecord,
} from "./_rules.ts";
import { assertOptionNames, checkedClock, show } from "../policy/_validate.ts";
import { describeError } from "../policy/_walk.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { connectionLost, serializableOnStandby } from "./_postgres_errors.ts";
import type { DeadLetter, HoldState } from "./store.ts";

/**
 * Options for {@linkcode moveKvToPostgres}.
 *
 * @example The prefix and the schema the service uses
 * ```ts
 * import type { KvToPostgresOptions } from "@relayer/poison/kv-to-postgres";
 * import assert from "node:assert/strict";
 *
 * const options: KvToPostgresOptions = { prefix: ["relayer"], schema: "relayer" };
 * assert.equal(options.schema, "relayer");
 * ```
 */
export interface KvToPostgresOptions {
  /**
   * The key prefix of the `KvStore` to move (its `prefix` option).
   *
   * @default {["relayer"]}
   */
  readonly prefix?: KvKey;
  /**
   * The schema of the `PostgresStore` to move into (its `schema` option),
   * migrated and empty.
   *
   * @default {"relayer"}
   */
  readonly schema?: string;
  /**
   * The clock the relayer runs on: a count that lapsed by it is not moved,
   * nor a replay record Deno KV would have deleted by it. Whole
   * milliseconds a `Date` can hold (0 to 8.64e15), as `Date.now()` returns
   * them; another reading is refused with a `TypeError` naming `now`.
   *
   * @default {Date.now}
   */
  readonly now?: () => number;
  /**
   * How far apart the clocks of the instances that wrote the store may be,
   * in milliseconds (the relayer's `clockSkewMs`): a lease is taken as held
   * this much past its expiry.
   *
   * @default {5000}
   */
  readonly clockSkewMs?: number;
}

/** The options `moveKvToPostgres` reads; any other is a typo. */
const MOVE_OPTIONS: readonly string[] = Object.keys(
  { prefix: true, schema: true, now: true, clockSkewMs: true } satisfies Record<
    keyof KvToPostgresOptions,
    true
  >,
);

/**
 * What {@linkcode moveKvToPostgres} moved, and what it left, by kind.
 *
 * @example Read what moved
 * ```ts
 * import type { KvToPostgresReport } from "@relayer/poison/kv-to-postgres";
 * import assert from "node:assert/strict";
 *
 * const report: KvToPostgresReport = {
 *   moved: { intents: 3, holds: 3, counts: 1, claims: 2, deadLetters: 1 },
 *   left: { lapsedCounts: 0, lapsedClaims: 1, lapsedLeases: 1, redriveRecords: 0, timeIndex: 1 },
 * };
 * assert.equal(report.moved.intents, 3);
 * ```
 */
export interface KvToPostgresReport {
  /** The records copied, by kind. */
  readonly moved: {
    /** Intents, each with its state, last broadcast, tx hashes and send in flight. */
    readonly intents: number;
    /** Holds (`pending`, `voided`, `captured`). */
    readonly holds: number;
    /** Delivery counts and a give-up's marks not lapsed. */
    readonly counts: number;
    /** Replay records Deno KV still kept. */
    readonly claims: number;
    /** Dead letters. */
    readonly deadLetters: number;
  };
  /** The records not copied, by kind, and why each is not needed. */
  readonly left: {
    /** Counts that lapsed: a store reads them as 0. */
    readonly lapsedCounts: number;
    /** Replay records past their expiry and its grace: Deno KV deletes them. */
    readonly lapsedClaims: number;
    /** Leases that lapsed: a lapsed lease is free to take. */
    readonly lapsedLeases: number;
    /** Redrive records: Deno KV's proof that a redrive landed, for a day. */
    readonly redriveRecords: number;
    /** The dead letters' index by time: PostgreSQL keeps its own. */
    readonly timeIndex: number;
  };
}

/** Rows sent per `INSERT`: 1,000 intents are 10,000 parameters, of 65,535. */
const BATCH = 1000;

/**
 * The move's refusals of tables another session held past `LOCK_MS`:
 * where a prepared transaction held them, it is named instead.
 */
const TABLES_HELD = new WeakSet<object>();

/**
 * The prepared transactions that hold a lock on the store's tables in
 * `schema`, as `preparedLocks` answers them; empty where none does, or
 * the question failed.
 */
async function preparedHolders(
  client: postgres.Sql,
  schema: string,
): Promise<string> {
  try {
    const [row] = ownRows(await client.unsafe(preparedLocks(schema), [1]));
    return String(row?.held ?? "");
  } catch {
    return "";
  }
}

/** How long the move waits for the store's tables (`lock_timeout`). */
const LOCK_MS = 10_000;

/**
 * The shortest `statement_timeout` the move's transaction runs under: a
 * role's or database's shorter one (`ALTER ROLE … SET statement_timeout =
 * '300ms'`, a common bound for a service's queries) is raised to it for
 * that transaction only. Left as it was, it cancelled the wait for the
 * tables before `lock_timeout` ended it, with the server's bare
 * "canceling statement due to statement timeout" where the move would have
 * waited its 10 s, or said which session held them; and a statement that
 * copies a thousand rows, or counts a large schema's. Each statement is
 * still bounded, at the wait and a minute for the work.
 */
const MOVE_STATEMENT_MS = LOCK_MS + 60_000;

/**
 * The shortest `idle_in_transaction_session_timeout` the move's
 * transaction runs under, raised so for it alone as `MOVE_STATEMENT_MS`:
 * the transaction sends nothing while the move reads Deno KV between its
 * statements (every hold of the store, in the first pass; pages of a
 * store over KV Connect), and a shorter setting ended its session there,
 * the move then said lost and run again lost the same way. A read of Deno
 * KV that stalls for longer still ends it.
 */
const MOVE_IDLE_MS = 600_000;

type Sql = postgres.TransactionSql;

/** The move's isolation level, as the store's writes' (see below). */
const ISOLATION = "isolation level read committed";

/**
 * Moves everything a `KvStore` holds that carries truth or a guarantee
 * into an empty, migrated `PostgresStore` schema, in one PostgreSQL
 * transaction: intents, holds, delivery counts (and a give-up's marks),
 * replay records with what is left of their lifetime, and dead letters.
 * Stop the service first (pause the queue): a lease still held is a
 * delivery at work, and the move refuses it. Deno KV is only read: cut
 * short, the move wrote nothing, and is run again as it was.
 *
 * The copy streams Deno KV in key order, 1,000 rows per statement (the
 * holds in a second pass, once their intents are in), so it holds at most
 * a statement's rows in memory whatever the store's size. The whole store
 * is one transaction, whose size PostgreSQL does not bound; the store's
 * tables stay locked against writes until it commits.
 *
 * @param kv The Deno KV handle the service used (`Deno.openKv(path)`);
 * the caller opens and closes it.
 * @param sql A postgres.js client on the database to move into; the
 * caller opens and ends it.
 * @param options The `KvStore`'s prefix, the `PostgresStore`'s schema, the
 * clock and the clocks' skew.
 * @returns What moved, and what was left, by kind.
 * @throws {BusyError} If a lease is held: a delivery is at work, or one
 * crashed within its lease; or if another session held the schema's
 * tables past the move's 10 s wait for them (a role's shorter
 * `statement_timeout` does not cut that wait). Nothing was moved.
 * @throws {ConflictError} If Deno KV holds nothing under the prefix (a
 * wrong handle or prefix), the schema already holds rows or is not
 * migrated, the database is read-only or the role lacks a grant the
 * store's calls use, or a record under the prefix was written while the
 * move copied the store (an instance still runs). Nothing was moved.
 * @throws {WrittenAfterMoveError} If the transaction committed, but a look
 * at Deno KV after the commit found a record written after the copy began
 * (behind the last look before the commit): an instance still runs, and
 * the schema lacks what it wrote. Do not switch to it: stop every
 * instance on Deno KV, empty the schema (the `TRUNCATE` its message
 * gives) and run the move again.
 * @throws {TypeError} If an option is invalid, or Deno KV holds a record
 * this store does not write or cannot be kept in PostgreSQL. Nothing was
 * moved.
 * @throws {Error} If PostgreSQL lost the connection during the move: run
 * it again (under a role's or database's
 * `idle_in_transaction_session_timeout` below a second, it says to raise
 * that first). Nothing was moved, unless the connection was lost under the
 * commit (the move run again then refuses the schema: it is done); or,
 * saying the move committed, if Deno KV could not be read after the
 * commit. End
 * the client with a timeout (`sql.end({ timeout: 5 })`): postgres.js
 * 3.4.9's `end()` waits for ever on the connection lost.
 *
 * @example Move an in-memory store
 * ```ts
 * import postgres from "postgres";
 * import { KvStore } from "@relayer/poison/kv";
 * import { PostgresStore } from "@relayer/poison/postgres";
 * import { moveKvToPostgres } from "@relayer/poison/kv-to-postgres";
 * import assert from "node:assert/strict";
 *
 * const url = Deno.env.get("DATABASE_URL");
 * if (url !== undefined) { // runs where DATABASE_URL names a database to try it on
 *   const kv = await Deno.openKv(":memory:");
 *   await new KvStore(kv).createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 *   const sql = postgres(url);
 *   const schema = `relayer_${crypto.randomUUID().slice(0, 8)}`;
 *   const store = new PostgresStore(sql, { schema });
 *   await store.migrate();
 *   const report = await moveKvToPostgres(kv, sql, { schema });
 *   assert.equal(report.moved.intents, 1);
 *   assert.equal((await store.getIntent("pi_0001"))?.hold, "pending");
 *   store.close();
 *   await sql.unsafe(`DROP SCHEMA ${schema} CASCADE`);
 *   await sql.end();
 *   kv.close();
 * }
 * ```
 */
export async function moveKvToPostgres(
  kv: KvLike,
  sql: PostgresClient,
  options?: KvToPostgresOptions,
): Promise<KvToPostgresReport> {
  assertOptionNames("move from Deno KV to PostgreSQL", options, MOVE_OPTIONS, {
    optional: true,
    example: '{ prefix: ["relayer"], schema: "relayer" }',
  });
  options ??= {};
  if (typeof kv?.list !== "function") {
    throw new TypeError(
      "Cannot move from Deno KV as 'kv' is not a Deno KV handle: pass the result of Deno.openKv() or openKv() from @deno/kv",
    );
  }
  if (typeof sql !== "function" || typeof sql?.begin !== "function") {
    throw new TypeError(
      "Cannot move to PostgreSQL as 'sql' is not a postgres.js client: pass the result of postgres(url)",
    );
  }
  // Only left out is the default, as in KvStore: a null would move
  // another tenant's intents.
  const prefix = options.prefix === undefined ? ["relayer"] : options.prefix;
  if (!Array.isArray(prefix)) {
    throw new TypeError(
      `Cannot move from Deno KV as 'prefix' must be the KvStore's prefix, an array of key parts such as ["relayer"]: current value is ${
        show(prefix)
      }`,
    );
  }
  const schema = options.schema ?? "relayer";
  if (typeof schema !== "string" || !SCHEMA_NAME.test(schema)) {
    throw new TypeError(
      `Cannot move to PostgreSQL as 'schema' must be a lower-case SQL identifier not starting with pg_ (${SCHEMA_NAME}): current value is ${
        JSON.stringify(schema)
      }`,
    );
  }
  const skewMs = options.clockSkewMs ?? 5_000;
  if (!Number.isSafeInteger(skewMs) || skewMs < 0) {
    throw new TypeError(
      `Cannot move from Deno KV as 'clockSkewMs' must be a whole number of milliseconds >= 0: current value is ${
        show(skewMs)
      }`,
    );
  }
  // Checked as the relayer checks its clock: a reading no Date can hold
  // (below 0, past 8.64e15) would judge every lease free, or every one
  // held, as no delivery's clock reads.
  const now = checkedClock("move from Deno KV", options.now ?? Date.now)();
  const client = sql as unknown as postgres.Sql;

  // Before anything is written: a delivery at work would write on after
  // the copy, into a store no instance reads any more.
  await refuseHeldLeases(kv, prefix, now, skewMs);
  // Nothing under the prefix is a wrong path or prefix far more often
  // than a store worth a move: moved, it would switch the service to an
  // empty database.
  let empty = true;
  for await (const _ of kv.list({ prefix }, { limit: 1 })) empty = false;
  if (empty) {
    throw new ConflictError(
      `Cannot move from Deno KV as it holds nothing under the prefix ${
        JSON.stringify(prefix, keyPart)
      }: check that the handle is the store the service used (its KV_PATH or KV_URL) and the prefix its KvStore's. Nothing was moved.`,
      { refused: true },
    );
  }
  const [check] = ownRows(
    await client.unsafe(migrated(schema)).catch((error: unknown) => {
      // A standby whose database or role defaults to SERIALIZABLE refuses
      // the check itself (0A000): said as a standby, not in the server's
      // words, whose hint is to lower the level.
      if (!serializableOnStandby(error)) throw error;
      throw new ConflictError(
        `Cannot move into schema ${schema} as ${
          readOnlyReason(true, "the move's")
        }, then run the move again. Nothing was moved.`,
        { refused: true, cause: error },
      );
    }),
  );
  // The database's encoding, as the server told the client on connecting:
  // free text is kept as it can hold it (see `mended`).
  const encoding = (client as { parameters?: Record<string, string> })
    .parameters?.server_encoding;
  // As PostgresStore.migrate() refuses them: every insert would fail in
  // PostgreSQL's words, which say neither why nor what to do.
  if (check?.read_only === true) {
    throw new ConflictError(
      `Cannot move into schema ${schema} as ${
        readOnlyReason(check.standby === true, "the move's")
      }, then run the move again. Nothing was moved.`,
      { refused: true },
    );
  }
  const missing = String(check?.missing ?? "");
  if (check?.current === true && missing !== "") {
    throw new ConflictError(
      `Cannot move into schema ${schema} as this role lacks ${missing}: grant them to it (docs/postgres.md lists what a service role needs), or run the move as the schema's owner. Nothing was moved.`,
      { refused: true },
    );
  }
  const hidden = String(check?.hidden ?? "");
  if (check?.current === true && hidden !== "") {
    throw new ConflictError(
      `Cannot move into schema ${schema} as row-level security hides rows of ${hidden} from this role (no policy lets it read them, or its row_security is off): disable row-level security on them, add a policy for this role that lets it see and write every row, or give it BYPASSRLS, then run the move again. Nothing was moved.`,
      { refused: true },
    );
  }
  // A policy that lets the role read but not write (FOR SELECT only):
  // every insert would fail in the server's words alone, "new row
  // violates row-level security policy", as PostgresStore.migrate()
  // refuses such a role at start.
  const unwritable = String(check?.unwritable ?? "");
  if (check?.current === true && unwritable !== "") {
    throw new ConflictError(
      `Cannot move into schema ${schema} as row-level security lets this role read but not write there: no policy allows it ${unwritable}, so the move's inserts fail. Add a policy for this role FOR ALL that lets it see and write every row, give it BYPASSRLS, or disable row-level security there, then run the move again. Nothing was moved.`,
      { refused: true },
    );
  }
  // A column a team added NOT NULL with no default: the move's inserts
  // into its table would fail in the server's words alone, as
  // PostgresStore.migrate() refuses such a schema at start.
  const unfilled = String(check?.unfilled ?? "");
  if (check?.current === true && unfilled !== "") {
    throw new ConflictError(
      `Cannot move into schema ${schema} as ${unfilled} is NOT NULL with no default, a column the store's migration did not make and the move's inserts give no value: give it a DEFAULT (ALTER TABLE … ALTER COLUMN … SET DEFAULT …), or make it nullable, then run the move again. Nothing was moved.`,
      { refused: true },
    );
  }
  if (check?.current !== true) {
    throw new ConflictError(
      `Cannot move into schema ${schema} as it is not migrated: run await new PostgresStore(sql, { schema: "${schema}" }).migrate() first (as the schema's owner), then the move. Nothing was moved.`,
      { refused: true },
    );
  }

  const moved = { intents: 0, holds: 0, counts: 0, claims: 0, deadLetters: 0 };
  const left = {
    lapsedCounts: 0,
    lapsedClaims: 0,
    lapsedLeases: 0,
    redriveRecords: 0,
    timeIndex: 0,
  };
  let start = "";
  // Read committed whatever the role's default_transaction_isolation, as
  // the store's writes run: each statement then sees what committed before
  // it. At repeatable read or serializable the snapshot was taken before
  // the tables' lock, and the look for rows in the schema missed one a
  // session committed while the move waited for that lock (a service
  // started on the schema: its readiness probe writes a count), and moved
  // into a schema that was not empty.
  await client.begin(ISOLATION, async (tx) => {
    const t = (name: string) => tx(`${schema}.${name}`);
    // Durable when it says moved, as the store's writes are: a role or
    // database with `synchronous_commit = off` has a COMMIT answered before
    // it is on disk, and a crash then would leave the schema empty after
    // the move said it was done. Any other level is kept (`local` waits
    // for no synchronous standby: see `DURABLE_COMMIT`). One message, the
    // first after BEGIN: sent one by one, each waited a round trip idle in
    // the transaction, and an idle_in_transaction_session_timeout of a few
    // milliseconds ended it there, before the one that raises it.
    await unlessLost(tx.unsafe(
      `SET LOCAL lock_timeout = ${LOCK_MS}; ${
        timeoutAtLeast("statement_timeout", MOVE_STATEMENT_MS)
      }; ${
        timeoutAtLeast("idle_in_transaction_session_timeout", MOVE_IDLE_MS)
      }; ${DURABLE_COMMIT}`,
    ));
    try {
      // Writes wait until the move commits; reads go on.
      await unlessLost(tx.unsafe(
        `LOCK TABLE ${
          ["intents", "holds", "leases", "counters", "claims", "dead_letters"]
            .map((name) => `"${schema}".${name}`).join(", ")
        } IN EXCLUSIVE MODE`,
      ));
    } catch (error) {
      if ((error as { code?: unknown }).code !== "55P03") throw error;
      const held = new BusyError(
        `Cannot move into schema ${schema} as another session held its tables for over ${LOCK_MS}ms (see pg_stat_activity): stop every instance of the service on it, then run the move again. Nothing was moved.`,
        { cause: error },
      );
      TABLES_HELD.add(held);
      throw held;
    }
    await refuseNonEmpty(tx, schema, kv, prefix, encoding);
    // Deno KV's versionstamps grow with every commit, and a commit of
    // nothing takes one too: a record whose versionstamp is newer than
    // this was written after the copy began.
    const begun = await kv.atomic().commit();
    if (!begun.ok) throw new Error("Deno KV refused a commit of nothing");
    start = begun.versionstamp;

    const batches = new Batches(tx, t);
    // Every kind in key order but the holds, which wait for their intents
    // (a foreign key): they go in a second pass, once every intent is in.
    for await (const entry of kv.list({ prefix })) {
      const key = entry.key.slice(prefix.length);
      const value = entry.value as Record<string, unknown> | null;
      const [kind, id] = key;
      const what = () => JSON.stringify(entry.key, keyPart);
      if (value === null) continue;
      if ((entry.versionstamp ?? "") > start) throw writtenSince(entry.key);
      if (kind === "dead_by_time" && key.length === 3) {
        left.timeIndex++;
        continue;
      }
      if (key.length !== 2 || typeof id !== "string") throw unknown(what());
      if (hasNul(id)) throw unkeepable(what());
      switch (kind) {
        case "intent": {
          const record = intentRecord(id, value, what, encoding);
          await batches.add("intents", {
            id,
            ...keepable(intentColumns(record), what),
          });
          moved.intents++;
          break;
        }
        case "hold":
          holdState(value, what);
          break;
        case "deliveries": {
          if (typeof value === "number") {
            // The first KvStore's count, a number with no expiry: KvStore
            // reads it as lapsed, and the job's next delivery counts from 1.
            left.lapsedCounts++;
            break;
          }
          const { n, expiresAt } = value;
          if (
            !Number.isSafeInteger(n) || (n as number) < 1 ||
            !Number.isSafeInteger(expiresAt)
          ) throw malformed(what(), "a count ({ n, expiresAt })");
          if ((expiresAt as number) <= now) {
            left.lapsedCounts++;
            break;
          }
          await batches.add("counters", {
            job_id: id,
            deliveries: n as number,
            expires_at: expiresAt as number,
          });
          moved.counts++;
          break;
        }
        case "claim": {
          const { expiresAt } = value;
          if (!Number.isSafeInteger(expiresAt)) {
            throw malformed(what(), "a replay record ({ expiresAt })");
          }
          // Kept as Deno KV keeps it, a grace past its expiry: another
          // instance's clock may still be behind it.
          if ((expiresAt as number) <= now - CLAIM_GRACE_MS) {
            left.lapsedClaims++;
            break;
          }
          await batches.add("claims", {
            key: id,
            expires_at: expiresAt as number,
          });
          moved.claims++;
          break;
        }
        case "dead": {
          const { w: _, ...letter } = value;
          // Said as a column PostgreSQL cannot keep, before the rules refuse it.
          const ids = (letter as unknown as DeadLetter).queue;
          keepable({
            queue: ids?.queue,
            queue_message_id: ids?.messageId,
            queue_dlq_id: ids?.dlqId,
          }, what);
          try {
            checkDeadLetter(letter as unknown as DeadLetter);
          } catch (error) {
            throw malformed(what(), "a dead letter", error);
          }
          if ((letter as unknown as DeadLetter).jobId !== id) {
            throw malformed(what(), "the dead letter of its job");
          }
          await batches.add(
            "dead_letters",
            keepable(
              deadLetterRow(letter as unknown as DeadLetter, encoding),
              what,
            ),
          );
          moved.deadLetters++;
          break;
        }
        case "lease": {
          const { expiresAt } = value;
          if (
            !Number.isSafeInteger(expiresAt) ||
            (expiresAt as number) + skewMs > now
          ) {
            // Taken since the check above: the service is still running.
            throw leaseHeld(String(id), value, skewMs);
          }
          left.lapsedLeases++;
          break;
        }
        case "redriven":
          left.redriveRecords++;
          break;
        default:
          throw unknown(what());
      }
    }
    await batches.flush();
    try {
      for await (const entry of kv.list({ prefix: [...prefix, "hold"] })) {
        const id = entry.key.at(-1);
        if (entry.value === null || typeof id !== "string") continue;
        if ((entry.versionstamp ?? "") > start) throw writtenSince(entry.key);
        const what = () => JSON.stringify(entry.key, keyPart);
        await batches.add("holds", {
          intent_id: id,
          state: holdState(entry.value, what),
        });
        moved.holds++;
      }
      await batches.flush();
      // The foreign key refuses such a hold, except where it is not
      // enforced: a role or database with session_replication_role =
      // replica fires no foreign key's trigger.
      await refuseHoldsWithoutIntent(tx, schema);
    } catch (error) {
      // A hold whose intent the copy did not see may be one written since
      // the copy passed the intents: that is the refusal to give.
      if (error instanceof TypeError) {
        await refuseWrittenSince(kv, prefix, start);
      }
      throw error;
    }
    await refuseWrittenSince(kv, prefix, start);
  }).catch(async (error) => {
    if (TABLES_HELD.has(error)) {
      // Asked once the transaction rolled back: a client of one connection
      // has none other. A prepared transaction (two-phase commit) holds
      // its locks with no session, so pg_stat_activity shows none.
      const prepared = await preparedHolders(client, schema);
      if (prepared === "") throw error;
      throw new BusyError(
        `Cannot move into schema ${schema} as a prepared transaction held its tables for over ${LOCK_MS}ms: ${prepared}. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with ${
          preparedEnds(prepared)
        } (see pg_prepared_xacts), then run the move again. Nothing was moved.`,
        { cause: (error as Error).cause },
      );
    }
    if (!connectionLost(error)) throw error;
    const idle = await shortIdle(client);
    throw new Error(
      `Cannot move into schema ${schema} as PostgreSQL lost the connection during the move (${
        describeError(error)
      })${
        idle === undefined
          ? ": run the move again once the database answers"
          : `, and the role's or database's idle_in_transaction_session_timeout is ${idle}, shorter than a round trip between a transaction's messages: raise it to 1s or more (SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'), then run the move again`
      }. Cut before its commit, the transaction rolled back and nothing was moved; cut under its commit, it may have landed, and the move run again then refuses the schema as holding rows: the move is done.`,
      { cause: error },
    );
  });
  // The look above is Deno KV's last before COMMIT, and Deno KV takes no
  // lock: a write that landed behind it (on a key it had passed, or after
  // it) is in no row. A look after COMMIT sees every write that landed
  // before it, so the move never says moved without one.
  const report = { moved, left };
  let since: readonly unknown[] | undefined;
  try {
    since = await writtenAfter(kv, prefix, start);
  } catch (error) {
    throw new Error(
      `The move into schema ${schema} committed, but Deno KV could not be read again after it (${
        describeError(error)
      }), to check that nothing was written there since the copy began: do not switch the service yet. Once every instance on Deno KV is stopped, run the move again: it refuses the schema, and says whether an intent or hold on Deno KV was written after its rows were.`,
      { cause: error },
    );
  }
  if (since !== undefined) {
    throw new WrittenAfterMoveError(
      `The move into schema ${schema} committed, but Deno KV's ${
        JSON.stringify(since, keyPart)
      } was written after the move's last look at it: an instance of the service (or a queue consumer) still writes Deno KV, and the schema does not hold what it wrote (a tx sent, a hold moved). Do not switch the service to PostgreSQL: switched as it is, it could send again or void a hold a tx spends. Stop every instance on Deno KV, empty the schema (${
        emptying(schema)
      }) and run the move again.`,
      report,
    );
  }
  return report;
}

/**
 * The session's `idle_in_transaction_session_timeout` as the server shows
 * it, where it is below a second, read with a statement alone (asked
 * twice: postgres.js 3.4.9 may reject the first request on a connection
 * opened again with the goodbye of the one the server ended); `undefined`
 * for a longer one, none, or a read that fails.
 */
async function shortIdle(
  client: postgres.Sql,
): Promise<string | undefined> {
  for (let ask = 0; ask < 2; ask++) {
    try {
      const [row] = await client<
        { shown: string; short: boolean }[]
      >`SELECT shown,
        shown::interval > '0' AND shown::interval < '1 second' AS short,
        ${1}::int AS one
        FROM pg_catalog.current_setting('idle_in_transaction_session_timeout') AS shown`;
      return row?.short === true ? row.shown : undefined;
    } catch (error) {
      if (!connectionLost(error)) return undefined;
    }
  }
  return undefined;
}

/**
 * Thrown by {@linkcode moveKvToPostgres} when its transaction committed
 * but a look at Deno KV after the commit found a record written after the
 * copy began, which no look before the commit had seen: an instance of
 * the service still writes Deno KV, and the schema lacks what it wrote.
 * The schema holds the move as `report` says, without that write: do not
 * switch the service to it; stop every instance on Deno KV, empty the
 * schema (the `TRUNCATE` the message gives) and move again.
 *
 * @example Tell a move that committed without a write from one that moved
 * ```ts
 * import { WrittenAfterMoveError } from "@relayer/poison/kv-to-postgres";
 * import assert from "node:assert/strict";
 *
 * const report = {
 *   moved: { intents: 1, holds: 1, counts: 0, claims: 0, deadLetters: 0 },
 *   left: { lapsedCounts: 0, lapsedClaims: 0, lapsedLeases: 0, redriveRecords: 0, timeIndex: 0 },
 * };
 * const error = new WrittenAfterMoveError("The move into schema relayer committed, but …", report);
 * assert.equal(error.committed, true);
 * assert.equal(error.report.moved.intents, 1);
 * ```
 */
export class WrittenAfterMoveError extends Error {
  /** Always `true`: the move's transaction committed; the schema holds rows. */
  readonly committed: true = true;
  /** What the committed transaction moved and left. */
  readonly report: KvToPostgresReport;

  /**
   * Constructs a new instance.
   *
   * @param message What was written on Deno KV, and what to do.
   * @param report What the committed transaction moved and left.
   */
  constructor(message: string, report: KvToPostgresReport) {
    super(message);
    this.name = "WrittenAfterMoveError";
    this.report = report;
  }
}

/**
 * The key of the first record under `prefix` written after the commit
 * `start`, if any (see {@linkcode refuseWrittenSince}).
 */
async function writtenAfter(
  kv: KvLike,
  prefix: KvKey,
  start: string,
): Promise<readonly unknown[] | undefined> {
  for await (const entry of kv.list({ prefix })) {
    if ((entry.versionstamp ?? "") > start) return entry.key;
  }
  return undefined;
}

/**
 * `statement`, except that one lost with its connection never settles.
 * postgres.js 3.4.9's `sql.begin()` rejects at once when its connection
 * closes, but a failed statement would make it send a `ROLLBACK` on that
 * closed connection, which crashes the process from a timer
 * (`Cannot read properties of null (reading 'write')`,
 * porsager/postgres#1154, #1208; see docs/postgres.md). The server rolls
 * back a transaction whose session ended.
 */
function unlessLost<T>(statement: Promise<T>): Promise<T> {
  return statement.catch((error) => {
    if (connectionLost(error)) return new Promise<never>(() => {});
    throw error;
  });
}

/** Rows of each table, sent `BATCH` at a time. */
class Batches {
  #tx: Sql;
  #t: (name: string) => postgres.Helper<string>;
  #rows = new Map<string, Record<string, unknown>[]>();

  constructor(tx: Sql, t: (name: string) => postgres.Helper<string>) {
    this.#tx = tx;
    this.#t = t;
  }

  async add(table: string, row: Record<string, unknown>): Promise<void> {
    let rows = this.#rows.get(table);
    if (rows === undefined) this.#rows.set(table, rows = []);
    rows.push(row);
    if (rows.length >= BATCH) await this.#send(table);
  }

  async flush(): Promise<void> {
    for (const table of this.#rows.keys()) await this.#send(table);
  }

  async #send(table: string): Promise<void> {
    const rows = this.#rows.get(table);
    if (rows === undefined || rows.length === 0) return;
    this.#rows.set(table, []);
    const tx = this.#tx;
    try {
      await unlessLost(
        tx`INSERT INTO ${this.#t(table)} ${
          tx(rows as Record<string, postgres.SerializableParameter>[])
        }`,
      );
    } catch (error) {
      // A hold whose intent is not on record: no read of either store
      // finds it, and PostgreSQL's foreign key refuses it.
      if (table !== "holds" || (error as { code?: unknown }).code !== "23503") {
        throw error;
      }
      const detail = String((error as { detail?: unknown }).detail ?? "");
      throw holdWithoutIntent(detail, error);
    }
  }
}

/**
 * Throws the refusal of a hold whose intent the move did not copy, if the
 * schema holds one: the foreign key from `holds` to `intents` refuses it
 * as it is inserted, but not under `session_replication_role = replica`
 * (set on a role or database for a logical replica, or by a restore),
 * which fires no foreign key's trigger.
 */
async function refuseHoldsWithoutIntent(
  tx: Sql,
  schema: string,
): Promise<void> {
  const [row] = await unlessLost(tx.unsafe(
    `SELECT h.intent_id FROM "${schema}".holds h
      WHERE NOT EXISTS (SELECT 1 FROM "${schema}".intents i WHERE i.id = h.intent_id)
      LIMIT 1`,
  ));
  if (row === undefined) return;
  throw holdWithoutIntent(
    `Key (intent_id)=(${row.intent_id}) is not present in table "intents".`,
  );
}

function holdWithoutIntent(detail: string, cause?: unknown): TypeError {
  return new TypeError(
    `Cannot move from Deno KV as it holds the hold of an intent it does not hold (${detail}): no read of either store finds that hold; delete it, then run the move again. Nothing was moved.`,
    cause === undefined ? undefined : { cause },
  );
}

/** A stored hold's state, or a refusal naming its key. */
function holdState(value: unknown, what: () => string): HoldState {
  if (value !== "pending" && value !== "voided" && value !== "captured") {
    throw malformed(what(), "a hold state");
  }
  return value;
}

/**
 * Throws a {@linkcode ConflictError} if a record under `prefix` was
 * written after the commit `start`: an instance of the service still
 * writes the store, and what it wrote would be lost with the switch.
 * Every write of `KvStore` sets a key (a release of a lease writes the
 * intent again), so one that only deletes (Deno KV's own expiry) is no
 * write here. Deno KV takes no lock: a write that lands behind this last
 * look before the move commits is not seen here; the look after the
 * commit finds it (see {@linkcode WrittenAfterMoveError}).
 */
async function refuseWrittenSince(
  kv: KvLike,
  prefix: KvKey,
  start: string,
): Promise<void> {
  const key = await writtenAfter(kv, prefix, start);
  if (key !== undefined) throw writtenSince(key);
}

function writtenSince(key: readonly unknown[]): ConflictError {
  return new ConflictError(
    `Cannot move from Deno KV as ${
      JSON.stringify(key, keyPart)
    } was written while the move copied the store: an instance of the service (or a queue consumer) still writes it. Stop every one, then run the move again. Nothing was moved.`,
  );
}

/** Throws a {@linkcode BusyError} naming the first lease held, if any. */
async function refuseHeldLeases(
  kv: KvLike,
  prefix: KvKey,
  now: number,
  skewMs: number,
): Promise<void> {
  for await (const entry of kv.list({ prefix: [...prefix, "lease"] })) {
    const lease = entry.value as { expiresAt?: unknown } | null;
    if (lease === null) continue;
    if (
      !Number.isSafeInteger(lease.expiresAt) ||
      (lease.expiresAt as number) + skewMs > now
    ) {
      throw leaseHeld(String(entry.key.at(-1)), lease, skewMs);
    }
  }
}

function leaseHeld(
  intentId: string,
  lease: { expiresAt?: unknown },
  skewMs: number,
): Error {
  const at = lease.expiresAt as number;
  // The move takes a lease as held the clock skew past its expiry, as a
  // delivery does: named by its expiry alone, a run again at that time was
  // refused anew, naming a time already past.
  const wait = !Number.isSafeInteger(at) || skewMs === 0
    ? "wait for the lease to lapse"
    : `wait until ${instant(at + skewMs)}, its expiry and the clock skew of ${
      formatDuration(skewMs)
    } the move allows for another instance's clock`;
  const until = Number.isSafeInteger(at) ? ` until ${instant(at)}` : "";
  return new BusyError(
    `Cannot move from Deno KV as a delivery holds the lease of intent ${intentId}${until}: pause the queue (or stop the service), ${wait}, then run the move again. Nothing was moved.`,
    Number.isSafeInteger(lease.expiresAt)
      ? { leaseExpiresAt: lease.expiresAt as number }
      : {},
  );
}

/** A time in ms since 1970 as ISO 8601, or as a number past what a Date can show. */
function instant(ms: number): string {
  return Math.abs(ms) <= 8_640_000_000_000_000
    ? new Date(ms).toISOString()
    // No Date holds it (a leaseMs that long, a clock beyond it).
    : `${ms} (ms since 1970, past what a Date can show)`;
}

/**
 * Throws a {@linkcode ConflictError} if any table of `schema` holds a row.
 * A move copies every intent, and neither store ever deletes one: a
 * schema with no intent while Deno KV holds one was written by something
 * else (a service started on it: its readiness probe writes a count), and
 * is refused without the word that an earlier move may be done; so is one
 * whose rows Deno KV was written after (see {@linkcode writtenSinceMoved}).
 */
async function refuseNonEmpty(
  tx: Sql,
  schema: string,
  kv: KvLike,
  prefix: KvKey,
  encoding: string | undefined,
): Promise<void> {
  const tables = [
    ["intents", "intent"],
    ["counters", "count"],
    ["dead_letters", "dead letter"],
    ["claims", "replay record"],
    ["leases", "lease"],
  ] as const;
  const [row] = await unlessLost(tx.unsafe(
    `SELECT ${
      tables.map(([table]) =>
        `(SELECT count(*) FROM "${schema}".${table})::bigint AS ${table}`
      ).join(", ")
    }`,
  ));
  const held = tables.filter(([table]) => Number(row?.[table]) > 0)
    .map(([table, noun]) => {
      const n = Number(row![table]);
      return `${n} ${noun}${n === 1 ? "" : "s"}`;
    });
  if (held.length === 0) return;
  let kept: string | undefined;
  if (Number(row?.intents) === 0) {
    for await (
      const entry of kv.list({ prefix: [...prefix, "intent"] }, { limit: 1 })
    ) kept = String(entry.key.at(-1));
  }
  const since = kept === undefined
    ? await writtenSinceMoved(tx, schema, kv, prefix, encoding)
    : undefined;
  throw new ConflictError(
    `Cannot move into schema ${schema} as it already holds ${
      held.join(", ")
    }: a move goes into an empty schema only. ${
      since !== undefined
        ? `But Deno KV was written after these rows were: ${since}. An instance ran on Deno KV after a move (or this schema holds another store): switched to PostgreSQL as it is, the service would lose what was written there (a tx sent, a hold moved), and could send again or void a hold a tx spends. Stop every instance on Deno KV; if none ran on PostgreSQL since, empty this schema (${
          emptying(schema)
        }) and run the move again, else set those intents right on PostgreSQL by hand from Deno KV. Nothing was moved.`
        : `${
          kept === undefined
            ? "If an earlier move committed, it is done: switch the service to PostgreSQL. Otherwise move"
            : `But no move of this store committed here: it holds none of its intents (${kept} among them), so something else wrote those rows (a service started on this schema writes a count at its first readiness probe). Stop it, then move`
        } into a new schema (the schema option, migrated first), or empty this one if nothing in it is needed (${
          emptying(schema)
        }). Nothing was moved.`
    }`,
    { refused: true },
  );
}

/**
 * Why Deno KV was written after the schema's rows were (an intent not
 * there, or one whose row no store write changed since, version `1` as
 * the move leaves it, that differs from Deno KV's with its hold), or
 * `undefined` when every intent of Deno KV is there as it is or changed
 * on PostgreSQL since. Neither store deletes an intent, and every write
 * of an intent or its hold on PostgreSQL moves its version: a record
 * written on Deno KV after a move is found, unless PostgreSQL wrote that
 * intent since too.
 */
async function writtenSinceMoved(
  tx: Sql,
  schema: string,
  kv: KvLike,
  prefix: KvKey,
  encoding: string | undefined,
): Promise<string | undefined> {
  // The holds beside the intents, both in key order (an intent id is
  // ASCII, compared alike by Deno KV and JavaScript): a batch's at a time.
  const holdEntries = kv.list({ prefix: [...prefix, "hold"] })[
    Symbol.asyncIterator
  ]();
  let nextHold = await holdEntries.next();
  const holdOf = async (id: string): Promise<unknown> => {
    while (!nextHold.done && String(nextHold.value.key.at(-1)) < id) {
      nextHold = await holdEntries.next();
    }
    return !nextHold.done && nextHold.value.key.at(-1) === id
      ? nextHold.value.value
      : null;
  };
  const plain = (value: unknown) =>
    value === null || value === undefined ? null : String(value);
  let batch: [string, Record<string, unknown>, unknown][] = [];
  const look = async (): Promise<string | undefined> => {
    const ids = batch.map(([id]) => id);
    const rows = ownRows(
      await unlessLost(tx.unsafe(
        `SELECT i.*, h.state AS hold FROM "${schema}".intents i
          LEFT JOIN "${schema}".holds h ON h.intent_id = i.id
          WHERE i.id = ANY($1::text[])`,
        [ids],
      )),
    );
    const byId = new Map(rows.map((row) => [String(row.id), row]));
    for (const [id, value, hold] of batch) {
      const row = byId.get(id);
      if (row === undefined) return `intent ${id} is not there`;
      if (plain(row.version) !== "1") continue;
      let columns: Record<string, unknown>;
      try {
        columns = intentColumns(intentRecord(id, value, () => id, encoding));
      } catch {
        continue; // not one a move could copy: not this one's to judge
      }
      const differs = Object.entries(columns).some(([column, kept]) =>
        plain(kept) !== plain(row[column])
      ) || plain(hold) !== plain(row.hold);
      if (differs) {
        return `intent ${id} differs from its row, which nothing changed since it was moved`;
      }
    }
    batch = [];
    return undefined;
  };
  try {
    for await (const entry of kv.list({ prefix: [...prefix, "intent"] })) {
      const id = entry.key.at(-1);
      if (typeof id !== "string" || entry.value === null) continue;
      batch.push([
        id,
        entry.value as Record<string, unknown>,
        await holdOf(id),
      ]);
      if (batch.length >= BATCH) {
        const found = await look();
        if (found !== undefined) return found;
      }
    }
    return batch.length === 0 ? undefined : await look();
  } finally {
    await holdEntries.return?.();
  }
}

/** The intent record a stored `KvStore` intent holds, checked as `PostgresStore` checks one. */
function intentRecord(
  id: string,
  value: Record<string, unknown>,
  what: () => string,
  encoding: string | undefined,
): IntentRecord {
  const stored = value as Partial<Omit<IntentRecord, "id">> & {
    readonly id?: unknown;
  };
  if (stored.id !== id) throw malformed(what(), "the intent of its key");
  const last = stored.lastBroadcast ?? null;
  // Said as a column PostgreSQL cannot keep, before the rules refuse it.
  keepable({ last_tx_hash: last?.txHash }, what);
  const record = (mayHaveSent: boolean) =>
    checkRecord(newIntentRecord({
      id,
      ...(stored.state === undefined ? {} : { state: stored.state }),
      hold: null,
      lastBroadcast: last === null ? null : mendedBroadcast(last, encoding),
      broadcasting: stored.broadcasting ?? null,
      mayHaveSent,
      // Kept since 0.2; an intent stored before has its last sent hash.
      txHashes: knownTxHashes(stored.txHashes ?? [], last),
      settlingSince: stored.settlingSince ?? null,
    }));
  try {
    // Only an explicit false is clean, as the rules read an intent on
    // Deno KV (planResolution): a record without the field may have
    // sent, and false would let a give-up void its hold and fail it. A
    // created intent has sent nothing.
    return record(
      stored.mayHaveSent === false
        ? false
        : stored.mayHaveSent === true || stored.state !== "created",
    );
  } catch (error) {
    if (stored.mayHaveSent === false && stored.state !== "created") {
      // Kept by an earlier version's createIntent, which took false beside
      // a send on record (docs/upgrading.md), where the rules now refuse
      // it: what to mend is that field of the record on Deno KV.
      let mended = false;
      try {
        record(true);
        mended = true;
      } catch {
        // Something else is wrong with it too: said as any other.
      }
      if (mended) throw takenSend(what(), stored);
    }
    throw malformed(what(), "an intent", error);
  }
}

/**
 * The refusal of an intent kept with `mayHaveSent: false` beside a send on
 * record, which an earlier version's `createIntent` took, and which no
 * store writes now: saying what to mend on Deno KV.
 */
function takenSend(
  key: string,
  stored: Partial<Omit<IntentRecord, "id">>,
): TypeError {
  const outcome = stored.lastBroadcast?.outcome;
  const onRecord = outcome === "sent" || outcome === "unknown"
    ? `its last broadcast is ${outcome}`
    : (stored.txHashes?.length ?? 0) > 0
    ? `it has a tx hash on record (${JSON.stringify(stored.txHashes![0])})`
    : "a broadcast in flight ('broadcasting')";
  return new TypeError(
    `Cannot move from Deno KV as ${key} holds an intent with mayHaveSent false beside a send on record (${onRecord}), which an earlier version took and no store writes now (docs/upgrading.md): on a record that says nothing left, a send may follow on a fresh nonce and land beside that one, paying twice, or its hold be voided while that one may still land. With the service stopped, set mayHaveSent to true in that record on Deno KV (the send may have left; its job then sends on that send's nonce), then run the move again. Nothing was moved.`,
  );
}

function unknown(key: string): TypeError {
  return new TypeError(
    `Cannot move from Deno KV as ${key} is not a key KvStore writes under this prefix: move it aside (or give the move the KvStore's own prefix), then run the move again. Nothing was moved.`,
  );
}

function unkeepable(key: string): TypeError {
  return new TypeError(
    `Cannot move from Deno KV as ${key} holds U+0000, which PostgreSQL text cannot keep: no delivery reaches it under PostgresStore; delete it, then run the move again. Nothing was moved.`,
  );
}

/**
 * `row`, refused when one of its columns holds U+0000, which PostgreSQL
 * text cannot keep and `PostgresStore` refuses to write (a tx hash or a
 * queue's id from a broken Sender or bridge; free text is mended before).
 */
function keepable<T extends Record<string, unknown>>(
  row: T,
  what: () => string,
): T {
  for (const [column, value] of Object.entries(row)) {
    if (!hasNul(value)) continue;
    throw new TypeError(
      `Cannot move from Deno KV as ${what()} holds U+0000 in its ${
        column.replaceAll("_", " ")
      }, which PostgreSQL text cannot keep: PostgresStore would refuse to write it too. Mend that value on Deno KV (a tx hash as the chain knows it, a queue's id as the queue does), then run the move again. Nothing was moved.`,
    );
  }
  return row;
}

function malformed(key: string, expected: string, cause?: unknown): TypeError {
  return new TypeError(
    `Cannot move from Deno KV as ${key} does not hold ${expected}${
      cause instanceof Error ? ` (${cause.message})` : ""
    }: nothing was moved. Look at the record, then run the move again.`,
    cause === undefined ? undefined : { cause },
  );
}

/** A key part as JSON can print it (bigints and bytes included). */
function keyPart(_: string, value: unknown): unknown {
  if (typeof value === "bigint") return `${value}n`;
  if (value instanceof Uint8Array) return `bytes(${value.length})`;
  return value;
}
