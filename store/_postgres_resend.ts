/**
 * The statements postgres.js 3.4.9 sends again, kept from it: a write's
 * flight and the reads.
 *
 * When PostgreSQL refuses a statement the client prepared on its
 * connection as stale (the schema changed what it returns: "cached plan
 * must not change result type", `RevalidateCachedQuery`; the session lost
 * it: 26000, `FetchPreparedStatement`; or an assignment the change broke:
 * `transformAssignedExpr`), postgres.js forgets it, prepares it again and
 * sends it anew, behind whatever it had sent on the connection since. In a
 * flight that is the `COMMIT`, which answers `ROLLBACK` as the transaction
 * failed: the statement then runs alone, outside the transaction, and
 * commits by itself, the writes beside it rolled back. If it was the
 * flight's last, every answer came and the write looked landed.
 *
 * So a flight's writes are marked not prepared once postgres.js has sent
 * them ({@linkcode neverResent}): it then fails such a statement with its
 * own error, and nothing of the flight commits. What it would have forgotten, the store prepares
 * again on the connection after the flight ({@linkcode prepareAgain}), and
 * where the flight rolled back whole for that alone
 * ({@linkcode staleOnly}), the write goes again on that connection: one
 * more flight for each of its statements the change made stale, none
 * failed (a write refused so is the store's to try again: nothing of it
 * was written, and its check of what the read saw goes again with it).
 *
 * @module
 */

import type postgres from "postgres";
import { WRITE_MARK } from "./_postgres_schema.ts";

/** The server routines whose errors postgres.js 3.4.9 answers by sending the statement again. */
const RESENT_ON = new Set([
  "FetchPreparedStatement",
  "RevalidateCachedQuery",
  "transformAssignedExpr",
]);

/** What postgres.js keeps on a query it built (its internals, not its types). */
interface Built {
  strings?: TemplateStringsArray;
  args?: unknown[];
}

/**
 * Puts {@linkcode WRITE_MARK} before `query`'s text, before it is executed:
 * each statement of a store's write flight goes so, and the tables' guard
 * refuses such a statement outside the write's transaction (see
 * `IN_WRITE`). postgres.js 3.4.9 builds a query's text from its
 * `strings` (a tagged template's, or an `unsafe` query's one text) when
 * it executes it: the mark leads the text the server prepares, which is
 * what `current_query()` answers in the guard. Marking a query twice
 * marks it once; `prepareAgain` prepares the marked text, as the flight
 * sent it.
 *
 * @example
 * ```ts ignore
 * const q = marked(tx`UPDATE ${intents} SET version = version + 1`);
 * await q.execute();
 * ```
 *
 * @param query A query not yet executed.
 * @returns `query`, marked.
 */
export function marked<Q>(query: Q): Q {
  const built = query as Built;
  const strings = built.strings;
  if (strings === undefined || strings[0] === undefined) return query;
  if (strings[0].startsWith(WRITE_MARK)) return query;
  const raw = Array.isArray(strings.raw)
    ? { raw: [WRITE_MARK + strings.raw[0], ...strings.raw.slice(1)] }
    : {};
  built.strings = Object.assign(
    [WRITE_MARK + strings[0], ...strings.slice(1)],
    raw,
  ) as unknown as TemplateStringsArray;
  return query;
}

/**
 * Keeps postgres.js 3.4.9 from sending `query` again (see the module), set
 * before it is executed. postgres.js marks a query prepared when it builds
 * it, reads the mark as it writes the query out (in the same call: a
 * prepared one is bound, not parsed again), and again only when the query
 * failed, to choose whether to send it again, right after it asked whether
 * the query was sent again already (`query.retried ? … : query.prepared &&
 * …`, in its `ReadyForQuery`). So the mark is taken back as postgres.js
 * asks that, whenever it builds the query (at once, or once a connection
 * is free), and on the microtask after it was set as well.
 *
 * The microtask alone was not enough: on Deno, postgres.js can read the
 * answers to queries it built while it read an answer (the queries that
 * waited for a connection, all handed to it as it answered the one
 * before) on the same task, before that microtask ran: with 150 reads or
 * more waiting on one connection, it did in every run tried. The stale ones were
 * sent again and their descriptions read out of order: rows parsed with
 * another statement's columns (a `RangeError` from postgres.js), reads that
 * never answered, and a read run inside a write's transaction, which then
 * stayed open, holding its locks.
 *
 * A read needs it as a write does: postgres.js sends a stale read again
 * behind the reads already sent on its connection, asking for its
 * statement's description first, and reads those descriptions out of
 * order when more than one was sent so: the reads behind it never
 * answered, and the connection then answered each read with the rows of
 * a read sent after it.
 *
 * @param query A query not yet executed.
 */
export function neverResent(query: unknown): void {
  if (typeof query !== "object" || query === null) return;
  let prepared = false;
  let retried: unknown = undefined;
  Object.defineProperty(query, "prepared", {
    configurable: true,
    enumerable: true,
    get: () => prepared,
    set: (value: unknown) => {
      prepared = value === true;
      if (prepared) {
        queueMicrotask(() => {
          prepared = false;
        });
      }
    },
  });
  // Asked only where postgres.js decides whether to send the query again,
  // just before it reads `prepared`.
  Object.defineProperty(query, "retried", {
    configurable: true,
    enumerable: true,
    get: () => {
      prepared = false;
      return retried;
    },
    set: (value: unknown) => {
      retried = value;
    },
  });
}

/**
 * Whether `error` is PostgreSQL's refusal of a statement prepared on its
 * connection as stale, which postgres.js 3.4.9 would answer by sending the
 * statement again.
 *
 * @param error What a statement failed with.
 */
export function refusedAsStale(error: unknown): boolean {
  const { severity, routine } = (error ?? {}) as {
    severity?: unknown;
    routine?: unknown;
  };
  return severity !== undefined && typeof routine === "string" &&
    RESENT_ON.has(routine);
}

/**
 * Prepares again, on the connection `tx`, each of a failed flight's
 * `writes` that PostgreSQL refused as stale (`settled`, their answers in
 * order), as postgres.js 3.4.9 would have before sending it again: it
 * forgets the statement it had and prepares the current one, without
 * running it. Settles once every one answered (a statement the schema now
 * refuses outright fails here, and its next write fails as it should).
 *
 * Preparing takes the locks the statement's tables need, as the flight
 * does, and another session may hold one by then (the next migration's
 * `ALTER TABLE`, a `LOCK TABLE`): so it runs in a transaction of its own
 * whose lock waits end at `lockMs`, the flight's `lock_timeout`. Outside
 * one, it would wait for as long as the lock lasts, keeping its
 * connection from the pool. A prepared statement outlives the
 * transaction it was prepared in.
 *
 * @param tx The flight's connection, its transaction ended.
 * @param writes The flight's writes.
 * @param settled Their answers.
 * @param lockMs How long a lock is waited for (`lock_timeout`).
 * @returns The answers to `BEGIN`, to preparing each again, and to
 * `COMMIT`, once they all came; none if nothing was refused as stale.
 */
export function prepareAgain(
  tx: postgres.ReservedSql,
  writes: readonly postgres.PendingQuery<postgres.Row[]>[],
  settled: readonly PromiseSettledResult<unknown>[],
  lockMs: number,
): Promise<PromiseSettledResult<unknown>[]> {
  const stale = writes.flatMap((write, i) => {
    const answer = settled[i];
    if (answer?.status !== "rejected" || !refusedAsStale(answer.reason)) {
      return [];
    }
    const { strings, args } = write as unknown as Built;
    return strings === undefined || args === undefined ? [] : [{
      strings,
      args,
    }];
  });
  if (stale.length === 0) return Promise.resolve([]);
  // Sent in this order: each query is sent once executed.
  const asked: Promise<unknown>[] = [
    tx.unsafe(`BEGIN; SET LOCAL lock_timeout = ${lockMs}`).execute(),
    // The same text and arguments: the same statement to postgres.js,
    // which drops the one it kept before preparing it (`describe()`).
    ...stale.map(({ strings, args }) =>
      ((tx as unknown as (
        strings: TemplateStringsArray,
        ...args: unknown[]
      ) => postgres.PendingQuery<postgres.Row[]>)(strings, ...args)
        .describe() as unknown as postgres.PendingQuery<postgres.Row[]>)
        .execute()
    ),
    // Never prepared, as the flight's (see `#transaction`).
    tx.unsafe("COMMIT").execute(),
  ];
  return Promise.allSettled(asked);
}

/**
 * Whether a failed flight can go again as it was: it failed on a statement
 * refused as stale (not one a pooler's other session never knew, 26000),
 * its `COMMIT` answered `ROLLBACK` (nothing of it committed), and each
 * such statement was prepared again ({@linkcode prepareAgain}'s answers,
 * `again`, all fulfilled).
 *
 * @param error What the flight failed with.
 * @param committed The answer to the flight's `COMMIT`.
 * @param again The answers to preparing its stale statements again.
 */
export function staleOnly(
  error: unknown,
  committed: PromiseSettledResult<unknown> | undefined,
  again: readonly PromiseSettledResult<unknown>[],
): boolean {
  if ((error as { code?: unknown })?.code === "26000") return false;
  if (!refusedAsStale(error) || committed?.status !== "fulfilled") {
    return false;
  }
  const { command } = (committed.value ?? {}) as { command?: unknown };
  return command === "ROLLBACK" && again.length > 0 &&
    again.every((answer) => answer.status === "fulfilled");
}
