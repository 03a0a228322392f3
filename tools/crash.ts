/**
 * The crash test: the real service as a child process (`deno serve
 * main.ts`, KvStore on a SQLite file, or with `--store postgres`
 * PostgresStore on a throwaway PostgreSQL server, or with `--store
 * pgbouncer` the same through PgBouncer in transaction mode with
 * `?prepare=false`; HttpSender), killed with
 * SIGKILL at seeded moments and restarted on the same store, while an at-least-once
 * queue drives every job to its end; then the invariants of DESIGN §5 are
 * checked over the ops API and the signer's own records.
 *
 * ```sh
 * deno task crash-test [--intents 300] [--kills 5] [--seed N] [--concurrency 16] [--deadline 180] [--store kv|postgres|pgbouncer] [--db-faults fast,immediate,down,terminate,retype,cancel|disk] [--db-down 10] [--instances 1] [--alternate] [--trace]
 * ```
 *
 * With `--instances N` (1 by default), N service processes run at once on
 * the one store (the same KV file, PostgreSQL database or PgBouncer), each
 * on its own port, as Deno Deploy's isolates on one KV or several pods on
 * one database do: they start at once (their migrations race), the queue
 * sends each request to a live one the seed draws (two copies sent at once
 * go to two instances, and a give-up and the delivery it races go to
 * different ones, where there are enough), and each kill hits one instance
 * the seed draws while the others keep serving; a delivery it cut is
 * redelivered to any live one. With `--alternate`, the kills take turns
 * among the instances, and the next kill does not wait for the last
 * victim's restart: it may land while that one is still starting (its
 * migration running), with no instance live for a moment (the summary
 * counts those). Each instance reaches the signer under a
 * path of its own (`/i2/send`), so that a kill excuses only its own sends
 * (an overlap, a send that may have left), and a send under no
 * instance's path is flagged; the checks are otherwise the same. The
 * summary says how the requests, the copies, the races and the kills were
 * spread.
 *
 * With `--trace`, each intent a check flags (or reports as an orphan) is
 * followed by its trail: every request the queue, the redriving operator
 * and the QStash stand-in made or took for it, each answer, the kills, and
 * the service's log lines that name it, with their times into the run.
 *
 * - **The signer** is a stub on loopback inside this process. Each intent
 *   gets a behaviour from the seeded PRNG (accept and confirm from the intent's
 *   second receipt read; accept slowly, sometimes past the Sender's timeout;
 *   declare not-sent + poison; 502 "connection refused"; accept but never
 *   confirm; 502 once then not-sent + poison; not-sent once then accept).
 *   It records every `/send`: when it came, what it answered and when, so
 *   the checker knows whether anything may have left for an intent (a 2xx,
 *   an answer without `notSent`, or a send still in flight at a kill).
 * - **The queue** delivers `POST /v1/deliveries` signed with the HMAC
 *   secret, numbering deliveries itself: a 200 ends the job; a 503 is
 *   redelivered after the `delayMs` of its JSON body (not `Retry-After`,
 *   which is whole seconds rounded up and would stretch a 20 ms policy into
 *   seconds; a 503 without `delayMs` waits its `Retry-After` divided by 50);
 *   a delivery that got no answer (the server died under it) counts as
 *   used, and the job comes back with the next number once the server is
 *   up. At most `--concurrency` deliveries are in flight; about one in
 *   twelve is sent twice at once (same job, same number).
 * - **The queue gives up** on about 45% of the jobs at a drawn count (1 to
 *   `maxDeliveries + 1`): `POST /v1/deliveries` with `gaveUp` (a bridge's
 *   give-up), sometimes two copies at once, repeated until acked and
 *   sometimes once more later (which must change nothing). Mostly it gives
 *   up while its last delivery is still in flight, and half of those
 *   deliveries are held up until after the give-up was acked (a delivery
 *   queued before its first store call): the give-up's lease must keep
 *   them from sending, and past it the message's marks, except on the
 *   generic route for a bridge whose deliveries name no message (a send
 *   there once the lease is over is the documented gap, not flagged). A job that ended with a dead letter on an intent
 *   still created or authorized is sometimes published again (what the
 *   redrive route advises for a queue of one's own), with a new message id
 *   and a fresh count; the old letter stays until a new poisoning
 *   replaces it.
 * - **The database faults** (`--db-faults`, PostgreSQL only, on a server
 *   with synchronous commits) come in the order given, each a seeded 0.3 to
 *   1.5 s after the last one's recovery: `fast` and `immediate` stop the
 *   server in that `pg_ctl` mode and start it again (`immediate` leaves crash
 *   recovery to the start), `down` keeps it stopped `--db-down` seconds,
 *   `terminate` ends every client session five times 200 ms apart,
 *   `cancel` cancels every client session's statement
 *   (`pg_cancel_backend`) every millisecond or so for 3 s, a cancel that
 *   reaches a write's flight as it begins among them (its statements then
 *   run outside its transaction, where the schema's guard refuses each),
 *   and `retype` changes the type of three columns the store's statements
 *   return (bigint to numeric, and back at the next), as a later release's
 *   migration would under the live instances: no delivery may then be
 *   answered that a statement was stale, and with `retype` alone no store
 *   failure is allowed for. On KvStore, `disk` (as root: the run's folder
 *   is then a tmpfs it mounts) fills the disk of the SQLite file for
 *   `--db-down` seconds with a ballast file, then removes it. The jobs
 *   are published over the faults' span. After each, `/readyz` must answer
 *   200 and a delivery sent after the database came back must be answered 200
 *   within 5 s, with the same relayer process (one that exits fails the
 *   run); the summary says how long each took, and what the service answered
 *   meanwhile. Every delivery must be answered within 30 s, and anything but
 *   a 200 or a 503 (a 204 or a 503 on Pub/Sub's routes) is a violation.
 *   With kills too, a restart whose migration a fault cuts at each of its
 *   tries refuses to start (one line naming `DATABASE_URL`, as
 *   docs/postgres.md says): it is started again after a short backoff, as a
 *   platform would, at most 5 tries in a row besides those a fault still
 *   under way refused (the summary counts them); any other exit at start
 *   fails the run. An instance a kill is starting again is not asked for
 *   `/readyz`, and one started after the database came back has the 5 s
 *   from its start.
 * - **Three queues**: 40% of the publications go through QStash's routes
 *   (`/v1/qstash` with `Upstash-Message-Id` and `Upstash-Retried`, the
 *   give-up as its failure callback on `/v1/qstash/failed`, each signed as
 *   QStash signs), 40% through Pub/Sub's, the rest through the generic
 *   route. After an acked QStash give-up (always one that dropped the job
 *   of an authorized intent) a late copy of its message comes, mostly past
 *   the give-up's lease: only the message's marks keep it from sending.
 * - **Pub/Sub**: pushes in Google's envelope (message id, publish time,
 *   `deliveryAttempt`, the subscription having a dead-letter policy) with
 *   Google's OIDC token, redelivered on Pub/Sub's own backoff (not the
 *   policy's `delayMs`); a 204 acks, and says nothing of done or poison.
 *   The give-up is the dead-letter topic's push to `/v1/pubsub/dead-letter`
 *   (a new message naming the source subscription, delivery count and
 *   publish time, in Google's `+00:00` form), sometimes repeated as the
 *   same copy or as a new one; every acked one is followed by a late push
 *   of its source message. About one push in 25 also comes with a token
 *   for the dead-letter route's audience, and must be answered 401. The
 *   service fetches Google's keys as in production: `HTTPS_PROXY` and
 *   `DENO_CERT` (Deno's settings) route that one request to a stand-in of
 *   this run (`tools/_google_stand_in.ts`), which refuses any other host.
 *   About a third of the publications go through a subscription without a
 *   dead-letter policy: no `deliveryAttempt` (the service counts the
 *   pushes by subscription and message id and must poison on its own count)
 *   and no give-up.
 * - **Google rotates its keys**: mid-run the stand-in lists a second key
 *   and new tokens are signed by it (some pushes still carry the first
 *   key's, reused); later the first key's tokens expire and the key is
 *   withdrawn. Then some pushes come first with an expired token of it
 *   (401, and Pub/Sub pushes again, the refusal counted as an attempt),
 *   and some also with a token of a key never listed (401).
 * - **Replays**: about one answered request in 25 (not Pub/Sub's, which
 *   cannot refuse one) is sent again byte for byte, and must be answered
 *   401.
 * - **An operator** resolves payments in review through
 *   `POST /v1/intents/:id/resolve`: settled once the signer confirmed one
 *   of its txs, failed when the signer (the run's chain) holds no tx of it
 *   (with `nonceChecked`: the payments whose every send it refused, about
 *   a quarter of them, which the relayer must send to review as may have
 *   sent, so that most runs void tens of holds in the route's move) or a
 *   tx is on record (then the route must refuse a pending one with 409).
 *   Once every job has ended, it goes on (a few leases at most) until
 *   those with nothing on the chain are resolved. A 409 `refused` (the
 *   store refusing the write the route made, the payment still in review
 *   at the version sent) is a violation: a fail without its void, say. A 503 saying a
 *   receipt could not be read (the signer's answer past `SENDER_TIMEOUT`)
 *   must leave the payment in review as it was; it is resolved again later.
 *   So must a 409 `send-in-flight` (the first fail of a payment that may
 *   have sent, in each server): it is tried again a lease later, on a fresh
 *   read and a fresh look at the signer's receipts; a 409 `send-ended` (a
 *   send of that server ended since, its record failed) is tried again at
 *   once, on a fresh look. A 503 of the store's
 *   (an outage, a statement a `cancel` fault cut) must leave it in review
 *   with its hold pending, or resolved whole (the answer lost): it is
 *   read again at once (until a read is answered), and one still in review
 *   is resolved again; one whose last resolution was such a 503 and that
 *   is still in review at the end is a resolution stuck, a violation. With a `cancel` fault to come, the operator holds
 *   the payments in review until it begins (the fault waits for 4 of them,
 *   at most 5 s), so that resolutions meet it; a run where none was sent
 *   while one was under way fails.
 * - **An operator redrives** through the route
 *   (`POST /v1/dead-letters/:intentId/:kind/redrive`): every 60 ms it lists
 *   the dead letters and redrives about a third of those whose job is idle
 *   (at most twice a job), whatever the intent's state, a third of them
 *   two at once, and after a 503 or an answer lost to a kill mostly once
 *   more. The service publishes through QStash's API as in production
 *   (`QSTASH_TOKEN`, `QSTASH_URL` at a loopback stand-in,
 *   `tools/_qstash_stand_in.ts`), which drops a repeated
 *   `Upstash-Deduplication-Id` (202, the first message's id), is down for
 *   one publish in ten (503) and loses the answer to one in ten after
 *   taking the message. Each message taken becomes a QStash publication
 *   of the job (its own message id, a fresh count, a give-up drawn as for
 *   the others) once the round is over.
 * - **The kills** come after a seeded number of answers since the last
 *   start, plus a seeded few milliseconds so they land mid-request (every
 *   other one waits up to 300 ms for a give-up, a late copy or a redrive
 *   in flight); with several instances, since the last kill, and a
 *   smaller number (the others answer on while one restarts), the victim
 *   drawn by the seed; after the last one the run goes on, without kills,
 *   until every job has ended.
 *
 * The checks, with what is actually guaranteed:
 * - I1: no intent is `failed` unless its last broadcast is `not_sent` and
 *   the signer says nothing may ever have left for it, or an operator
 *   failed it and the signer holds no tx of it.
 * - I2: no `failed` intent has a `pending` hold; at every read, during the
 *   run and at the end, a hold agrees with its state (voided or none when
 *   `failed`, captured when `settled`, pending or none otherwise): KvStore
 *   and PostgresStore void or capture in the commit of the move, so half a
 *   resolution (the give-up's void then fail, the resolve route's) shows.
 *   Each delivery or give-up answered 5xx is followed by a read of its
 *   intent, before a later delivery can finish a resolution cut there.
 * - I3: the states seen for an intent (at creation, sampled during the run,
 *   at the end) only move forward along the relayer's edges, between reads
 *   one of which was answered before the other was sent (two reads that
 *   overlap may be served in either order); a `created` intent never moves
 *   and never reaches the signer.
 * - One nonce: once a `/send` for an intent may have left, every later
 *   one is a rescue (`replace: true`); a fresh one could pay twice. No two
 *   `/send` for one intent overlap at the signer (I5), unless one was in
 *   flight at a kill.
 * - I6: every `/send` carried a `settling` intent with a `pending` hold;
 *   no intent is `settled` without a `captured` hold and a receipt the
 *   signer confirmed for one of its tx hashes (the last, or one a rescue
 *   replaced on record).
 * - Dead letters: each belongs to a job that answered poison at that
 *   delivery (or, on Pub/Sub, was acked with its bodiless 204), or whose
 *   delivery of that number died with the server; its
 *   intent exists; its resolution is one of the specification's texts and
 *   agrees with the intent's final state; `declared` only where the signer
 *   declared poison. Every job that answered poison has one (not known of
 *   Pub/Sub's 204s). Every item of a page of `GET /v1/dead-letters`, the
 *   redriving operator's or the read-back's, is a dead letter (a `null`
 *   is reported and left out, not read).
 * - Quiet after a give-up: no `/send` arrives once the queue's give-up was
 *   acked until the job is published again (by the tool or by a redrive),
 *   and no late copy answers that it sent.
 * - Redrives: QStash takes at most one message per dead letter, whatever
 *   the concurrent redrives and retries (no job published twice); at most
 *   one redrive of a letter answers 202, the other 409 (or 404 once the
 *   winner removed it); a 202 only once QStash has the job; a letter gone
 *   only once QStash has its job (nothing stranded; the job published then
 *   runs to its end like any other); a round whose every answer was an
 *   error (a refusal, a 503) leaves the letter in place. Only the service's
 *   redrives publish to QStash: any other publish is a violation.
 * - Pub/Sub without `deliveryAttempt`: a message is acked within
 *   4 × `MAX_DELIVERIES` pushes (the service's own count poisons it), and
 *   a dead letter's number is at most the pushes of one message sent.
 * - Google's keys: every push with a valid token of either key is
 *   accepted (the service refetches for the new `kid`); an expired token
 *   of the withdrawn key, or a made-up `kid`, is refused; each process
 *   fetches the keys once, then at most once per verifier a minute
 *   (with several instances, whose fetches look alike, every process
 *   together).
 * - Nothing stuck: every job ends. Once it has, its intent is not
 *   `settling` (an ack means done, seen settled, failed or in review, or a
 *   poison whose resolution left `settling` in the same commit as its dead
 *   letter), and it is `authorized` only if its dead letter says "job
 *   dropped, intent still authorized" (the relayer leaves it to a later
 *   job); `created` only with a dead letter. The one exception the at-least-once contract allows: a duplicate
 *   copy that died with the server after the other copy was acked; such an
 *   intent is reported, not counted as a violation.
 *
 * Its summary counts, on the signer's line, the intents a delivery (not a
 * give-up) settled on a confirmed tx while their last `/send` had been cut
 * by a kill with nothing sent since: the settle behind a lapsed
 * write-ahead (a lower bound: a write-ahead whose send never left is not
 * seen).
 *
 * It prints a summary and exits 1 on any violation, or when fewer kills
 * happened than `--kills` asked (every job ended first: too few intents per
 * kill), 2 on a bad flag. Every child process, the temp dir and the
 * PostgreSQL server are removed, whatever happens; a failure to set the run
 * up (the temp dir, PostgreSQL) is one line, `crash: <what failed>: <what
 * to do>`, and exit 1.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { definePolicy } from "../policy/policy.ts";
import { mulberry32 } from "../support/prng.ts";
import { startArgs } from "../support/start_args.ts";
import { INTENT_STATES, type IntentState, TRANSITIONS } from "../mod.ts";
import { describePolicy } from "../policy/describe_policy.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { rescueWindow } from "../policy/rescue_window.ts";
import { hmacSigner, JWKS_REFETCH_INTERVAL_MS } from "../webhook/_auth.ts";
import { SETTINGS } from "../webhook/_settings.ts";
import {
  type OwnedPgBouncer,
  type OwnedPostgresServer,
  startPgBouncer,
  startPostgres,
} from "../support/postgres_server.ts";
import { CheckError, errorLine, ROOT, runMain } from "./_check.ts";
import { type GoogleIssuer, googleIssuer, signQStash } from "./_sign.ts";
import {
  type GoogleStandIn,
  PROXY_SETTINGS,
  startGoogleStandIn,
} from "./_google_stand_in.ts";
import {
  type Publication,
  type QStashStandIn,
  startQStashStandIn,
} from "./_qstash_stand_in.ts";

// ---------------------------------------------------------------- options

/** The command line of the crash test. */
export interface CrashTestOptions {
  /** How many intents (and jobs). */
  readonly intents: number;
  /** How many times the server is killed. */
  readonly kills: number;
  /** The PRNG seed: behaviours, duplicates, kill moments. */
  readonly seed: number;
  /** How many deliveries may be in flight at once. */
  readonly concurrency: number;
  /** The hard deadline of the whole run, in seconds. */
  readonly deadlineS: number;
  /**
   * The service's store: KvStore on a SQLite file, or PostgresStore on a
   * server this run starts, directly or through a PgBouncer it starts in
   * front (transaction mode, `?prepare=false`).
   */
  readonly store: "kv" | "postgres" | "pgbouncer";
  /**
   * What happens to the database during the run, in this order, at seeded
   * moments (PostgreSQL only): `fast` and `immediate` restart it (`pg_ctl`
   * stop mode; `immediate` leaves crash recovery to the start), `down`
   * stops it for `dbDownS`, `terminate` ends every client session
   * (`pg_terminate_backend`) five times 200 ms apart, `cancel` cancels
   * every client session's statement (`pg_cancel_backend`) every
   * millisecond or so for 3 s. On KvStore, `disk` alone: the SQLite
   * file's disk (a tmpfs this run mounts) full for `dbDownS`.
   */
  readonly dbFaults: readonly DbFault[];
  /** How long a `down` fault keeps the database stopped, in seconds. */
  readonly dbDownS: number;
  /**
   * How many service processes run at once on the one store, each on its
   * own port; the queue spreads deliveries over the live ones, and each
   * kill hits one of them.
   */
  readonly instances: number;
  /**
   * With several instances, whether the kills take turns among them (the
   * first, then the second, …) and the next kill may land before the last
   * victim has restarted (while its migration runs), rather than hitting an
   * instance drawn by the seed once the last victim is back.
   */
  readonly alternate: boolean;
  /** Whether to print the trail of each flagged intent (`--trace`). */
  readonly trace: boolean;
}

/** One thing done to the database during the run. */
export type DbFault =
  | "fast"
  | "immediate"
  | "down"
  | "terminate"
  | "retype"
  | "cancel"
  | "disk";
const DB_FAULTS: readonly DbFault[] = [
  "fast",
  "immediate",
  "down",
  "terminate",
  "retype",
  "cancel",
  "disk",
];

/** How large the tmpfs is that `--db-faults disk` mounts on the run's folder. */
const DISK_FAULT_SIZE = "512m";

/** How long a `cancel` fault cancels the client sessions' statements. */
const CANCEL_S = 3;

/**
 * How many payments in review a `cancel` fault waits for, at most
 * {@linkcode CANCEL_WAIT_MS}: the operator resolves them under it.
 */
const CANCEL_REVIEWS = 4;
const CANCEL_WAIT_MS = 5_000;

/**
 * Whether `faults` take the database away (all but `retype`, which only
 * changes it; `cancel` fails the statements it cuts, as an outage fails
 * them): under them a write may fail or land unseen, and the checks allow
 * for it.
 */
export function outagesIn(faults: readonly DbFault[]): boolean {
  return faults.some((kind) => kind !== "retype");
}

/**
 * What the store says when PostgreSQL refused a statement a schema change
 * made stale: after a `retype`, no delivery may be answered with it.
 */
const STALE_REFUSAL = "prepared before the schema changed";

/**
 * What the service logs only for a fault of the store's own, whatever the
 * database did: its client is the store's alone, so a transaction that
 * failed on a connection and was left open there (25P02) is one the store
 * left, and a write whose `BEGIN` a cancel cut with a statement landed
 * outside it is one the schema's guard let through.
 */
const STORE_OWN_FAULT =
  /which something else using this client left open|PostgreSQL cut the write's BEGIN/;

const USAGE =
  "usage: deno task crash-test [--intents 300] [--kills 5] [--seed N] [--concurrency 16] [--deadline 180] [--store kv|postgres|pgbouncer] [--db-faults fast,immediate,down,terminate,retype,cancel|disk] [--db-down 10] [--instances 1] [--alternate] [--trace]";

/** Thrown by {@linkcode parseOptions} for `--help`. */
export class HelpRequested extends Error {}

/** Reads the flags; throws a `RangeError` naming the bad one. */
export function parseOptions(args: readonly string[]): CrashTestOptions {
  const values: Record<string, number> = {
    intents: 300,
    kills: 5,
    seed: Math.floor(Math.random() * 2 ** 31),
    concurrency: 16,
    deadline: 180,
    "db-down": 10,
    instances: 1,
  };
  let store: CrashTestOptions["store"] = "kv";
  let dbFaults: DbFault[] = [];
  let trace = false;
  let alternate = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--help" || arg === "-h") throw new HelpRequested(USAGE);
    if (arg === "--trace") {
      trace = true;
      continue;
    }
    if (arg === "--alternate") {
      alternate = true;
      continue;
    }
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (match?.[1] === "db-faults") {
      const text = match[2] ?? args[++i] ?? "";
      dbFaults = text.split(",").filter((kind) => kind !== "") as DbFault[];
      const bad = dbFaults.find((kind) => !DB_FAULTS.includes(kind));
      if (bad !== undefined || dbFaults.length === 0) {
        throw new RangeError(
          `--db-faults must list ${DB_FAULTS.join(", ")}: current value is ${
            JSON.stringify(text)
          }`,
        );
      }
      continue;
    }
    if (match?.[1] === "store") {
      const text = match[2] ?? args[++i];
      if (text !== "kv" && text !== "postgres" && text !== "pgbouncer") {
        throw new RangeError(
          `--store must be kv, postgres or pgbouncer: current value is ${
            JSON.stringify(text) ?? "missing"
          }`,
        );
      }
      store = text;
      continue;
    }
    if (!match || !(match[1]! in values)) {
      throw new RangeError(`Unknown argument ${JSON.stringify(arg)}`);
    }
    const name = match[1]!;
    const text = match[2] ?? args[++i];
    const value = Number(text);
    const min = name === "kills" || name === "seed" ? 0 : 1;
    if (
      text === undefined || text.trim() === "" ||
      !Number.isSafeInteger(value) ||
      value < min
    ) {
      throw new RangeError(
        `--${name} must be an integer >= ${min}: current value is ${
          JSON.stringify(text) ?? "missing"
        }`,
      );
    }
    values[name] = value;
  }
  if (dbFaults.some((kind) => kind !== "disk") && store === "kv") {
    throw new RangeError(
      "--db-faults needs --store postgres or pgbouncer: current value is kv",
    );
  }
  if (dbFaults.includes("disk") && store !== "kv") {
    throw new RangeError(
      `--db-faults disk needs --store kv (it fills the SQLite file's disk): current value is ${store}`,
    );
  }
  if (alternate && values.instances! < 2) {
    throw new RangeError(
      `--alternate needs --instances 2 or more: current value is ${values.instances}`,
    );
  }
  return {
    intents: values.intents!,
    kills: values.kills!,
    seed: values.seed!,
    concurrency: values.concurrency!,
    deadlineS: values.deadline!,
    store,
    dbFaults,
    dbDownS: values["db-down"]!,
    instances: values.instances!,
    alternate,
    trace,
  };
}

// ---------------------------------------------------------------- helpers

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Grows the file `path` until its disk answers ENOSPC: the disk is full. */
async function fillDisk(path: string): Promise<void> {
  const file = await Deno.open(path, { write: true, create: true });
  const chunk = new Uint8Array(1024 * 1024);
  try {
    // Smaller and smaller writes, down to the last few hundred bytes.
    for (let size = chunk.length; size >= 512; size >>= 1) {
      try {
        for (;;) await file.write(chunk.subarray(0, size));
      } catch (error) {
        if (
          !(error instanceof Error) || !/\(os error 28\)/.test(error.message)
        ) throw error;
      }
    }
  } finally {
    file.close();
  }
}

/** A promise with its `resolve`, to open a gate from outside. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A counting semaphore. */
class Limiter {
  #free: number;
  #waiting: (() => void)[] = [];
  /** @param size How many tasks may run at once. */
  constructor(size: number) {
    this.#free = size;
  }
  /** Runs `task` once a slot is free; returns what it returns. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}

/** Thrown when the hard deadline passes. */
class DeadlineExceeded extends Error {}

const now = () => performance.now();

/** A stretch in which the tool's own event loop ran nothing, by its clock. */
export interface Stall {
  readonly from: number;
  readonly to: number;
}

/**
 * The tool's own event loop, watched: a tick every `tickMs`, and a gap
 * between two ticks longer than `minMs` kept as a {@linkcode Stall}. The
 * signer stub answers on this loop, so a `/send` that reached it during a
 * stall (a machine short of CPU, a long pause of the runtime) is stamped
 * when the loop came back, not when it arrived.
 */
export class LoopWatch {
  /** Every stall seen, in order. */
  readonly stalls: Stall[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;
  #last = 0;

  constructor(readonly tickMs = 10, readonly minMs = 100) {}

  /** Starts ticking; {@linkcode LoopWatch.stop} ends it. */
  start(): void {
    this.#last = now();
    this.#timer = setInterval(() => {
      const at = now();
      if (at - this.#last > this.minMs) {
        this.stalls.push({ from: this.#last, to: at });
      }
      this.#last = at;
    }, this.tickMs);
  }

  /** Stops ticking. */
  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * What happened to each intent, in order, for `--trace`: kept for every
 * intent (a few dozen short lines each), printed for the flagged ones. A
 * failure that a rerun of its seed may not repeat (the kills' timing is
 * not seeded) is explained by the run that had it.
 */
class Trails {
  readonly #started: number;
  readonly #byIntent = new Map<string, { at: number; text: string }[]>();
  readonly #everyone: { at: number; text: string }[] = [];

  /** @param started The run's start (`performance.now()`). */
  constructor(started: number) {
    this.#started = started;
  }

  /** Adds an event to an intent's trail (an unknown id starts one). */
  add(id: string, text: string): void {
    let trail = this.#byIntent.get(id);
    if (trail === undefined) this.#byIntent.set(id, trail = []);
    trail.push({ at: now(), text });
  }

  /** Adds an event every trail shows (a kill, a restart). */
  everyone(text: string): void {
    this.#everyone.push({ at: now(), text });
  }

  /** The intent's trail, one indented line an event, the run's own events merged in. */
  show(id: string): string {
    const events = [...(this.#byIntent.get(id) ?? []), ...this.#everyone]
      .sort((a, b) => a.at - b.at);
    return events.map(({ at, text }) =>
      `    ${((at - this.#started) / 1000).toFixed(3).padStart(7)}s ${text}`
    ).join("\n");
  }
}

/** A plan as a trail's heading shows it: created, or the signer's behaviour. */
function describePlan(
  plan: { initial: State; behaviour: Behaviour } | undefined,
): string {
  if (plan === undefined) return "not planned";
  return plan.initial === "created"
    ? "created, never authorized"
    : `authorized, signer ${plan.behaviour}`;
}

/** An answer body, shortened for a trail line. */
function brief(body: AnswerBody): string {
  const parts = [
    body.outcome,
    body.delivery === undefined ? undefined : `#${body.delivery}`,
    body.resolution === undefined ? undefined : `→ ${body.resolution}`,
    body.reason === undefined ? undefined : `(${body.reason.slice(0, 100)})`,
    body.title,
  ].filter((part) => part !== undefined && part !== "");
  return parts.join(" ");
}

// ---------------------------------------------------------------- the signer stub

/** How the signer treats an intent's sends. */
type Behaviour =
  | "confirm"
  | "slow"
  | "poison"
  | "refused"
  | "pending"
  | "refused_then_poison"
  | "notsent_then_confirm"
  | "refused_notsent_confirm";

/**
 * The behaviours' shares. `refused` and `refused_then_poison` (together
 * 30%) make no tx, yet the relayer cannot tell (a refused connection may
 * have sent): their payments go to review, and the operator, finding
 * nothing on the chain, fails them, voiding their holds in the move.
 */
const BEHAVIOURS: readonly [Behaviour, number][] = [
  ["confirm", 0.22],
  ["refused_notsent_confirm", 0.06],
  ["slow", 0.1],
  ["poison", 0.14],
  ["refused", 0.18],
  ["pending", 0.08],
  ["refused_then_poison", 0.12],
  ["notsent_then_confirm", 0.1],
];

/** A behaviour drawn by the weights of `BEHAVIOURS`. */
function pickBehaviour(random: () => number): Behaviour {
  let x = random();
  for (const [behaviour, weight] of BEHAVIOURS) {
    if ((x -= weight) < 0) return behaviour;
  }
  return "confirm";
}

/**
 * When a kill happened: from the SIGKILL to the process being gone; with
 * `--instances` above 1, which instance (from 0) and which of its
 * processes (its generation, from 1) it killed.
 */
interface KillWindow {
  readonly from: number;
  readonly to: number;
  readonly instance?: number;
  readonly generation?: number;
}

/**
 * Whether a kill may have cut a request of instance `instance`: any kill
 * when the run has one instance (neither names one), else only a kill of
 * that instance; the others kept serving.
 */
function sameInstance(
  kill: { readonly instance?: number },
  instance: number | undefined,
): boolean {
  return kill.instance === undefined || instance === undefined ||
    kill.instance === instance;
}

/**
 * Where instance `index` (from 0) of several reaches the signer: under a
 * path of its own, which {@linkcode signerPath} reads back, so that a kill
 * excuses only that instance's sends.
 *
 * @example
 * ```ts
 * instanceSenderUrl("http://127.0.0.1:9000", 1); // "http://127.0.0.1:9000/i2"
 * ```
 */
export function instanceSenderUrl(signerBase: string, index: number): string {
  return `${signerBase}/i${index + 1}`;
}

/**
 * The instance (from 0) a request to the signer came from, by the prefix
 * {@linkcode instanceSenderUrl} gave it, and its path without the prefix;
 * a path without one (a run of one instance) names no instance.
 *
 * @example
 * ```ts
 * signerPath("/i2/send"); // { instance: 1, pathname: "/send" }
 * signerPath("/send"); // { instance: undefined, pathname: "/send" }
 * ```
 */
export function signerPath(
  pathname: string,
): { instance: number | undefined; pathname: string } {
  const prefix = /^\/i(\d+)(\/.*)$/.exec(pathname);
  return prefix === null
    ? { instance: undefined, pathname }
    : { instance: Number(prefix[1]) - 1, pathname: prefix[2]! };
}

/**
 * Which of `instances` the `k`th kill (from 0) hits: the next in turn with
 * `alternate`, else one `random` draws (the one instance, with one).
 *
 * @example
 * ```ts
 * killVictim(3, 2, true, Math.random); // 1
 * ```
 *
 * @param k The kill's number, from 0.
 * @param instances How many instances run.
 * @param alternate Whether the kills take turns.
 * @param random The seed's draws.
 * @returns The victim's index.
 */
export function killVictim(
  k: number,
  instances: number,
  alternate: boolean,
  random: () => number,
): number {
  if (instances <= 1) return 0;
  return alternate ? k % instances : Math.floor(random() * instances);
}

/**
 * Where the queue sends a request with several instances: a live one drawn
 * by `random`, one not in `avoid` where there is one (the other copy sent
 * at once, the delivery a give-up races); any live one if all are avoided,
 * and any at all if none is live (the request then waits for it).
 *
 * @example
 * ```ts
 * const servers = [{ live: true }, { live: false }, { live: true }];
 * pickInstance(servers, () => 0, new Set([servers[0]!])); // servers[2]
 * ```
 */
export function pickInstance<T extends { readonly live: boolean }>(
  servers: readonly T[],
  random: () => number,
  avoid?: ReadonlySet<T>,
): T {
  const live = servers.filter((server) => server.live);
  const free = live.filter((server) => !avoid?.has(server));
  const from = free.length > 0 ? free : live.length > 0 ? live : servers;
  return from[Math.floor(random() * from.length)]!;
}

/**
 * How long an operator's call (`/v1/intents`, `/v1/dead-letters`) may take:
 * as long as a delivery, since a machine short of CPU slows both alike.
 */
export const OPERATOR_BOUND_MS = 30_000;

/**
 * An operator's call to the service at `url` with `token`: its status and
 * JSON body. A call unanswered within `boundMs` rejects with an error that
 * names it, not a bare timeout.
 */
export async function operatorCall(
  url: string,
  token: string,
  init: RequestInit = {},
  boundMs: number = OPERATOR_BOUND_MS,
): Promise<{ status: number; body: unknown }> {
  const signal = AbortSignal.timeout(boundMs);
  try {
    const res = await fetch(url, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...init.headers },
      signal,
    });
    return { status: res.status, body: await res.json() };
  } catch (error) {
    if (!signal.aborted) throw error;
    throw new Error(
      `the operator's ${init.method ?? "GET"} ${
        new URL(url).pathname
      } had no answer within ${formatDuration(boundMs)}`,
      { cause: error },
    );
  }
}

/** One `/send` the stub received. */
interface SendRecord {
  readonly arrivedAt: number;
  /** When its body was read: later than its arrival if its sender paused mid-request. */
  readonly bodyAt: number;
  answeredAt: number | null;
  status: number | null;
  notSent: boolean;
  poison: boolean;
  readonly replace: boolean;
  /** The instance that sent it (from 0), with `--instances` above 1. */
  readonly instance?: number;
  /** The intent's state and hold as the relayer sent them. */
  readonly state: unknown;
  readonly hold: unknown;
  txHash?: string;
}

/**
 * The signer: answers `/send` and `/receipt`, and remembers everything.
 * A `/send` whose body never arrived whole (its sender killed mid-request)
 * is answered 400 and not recorded: a signer cannot act on it.
 */
export class SignerStub {
  readonly behaviours = new Map<string, Behaviour>();
  readonly sends = new Map<string, SendRecord[]>();
  /** Tx hash → its intent and how many receipt reads it had. */
  readonly hashes = new Map<string, { intentId: string; reads: number }>();
  /** Tx hashes the stub answered `confirmed` for. */
  readonly confirmed = new Set<string>();
  /** Sends for intents the stub was never told about. */
  readonly strangers: string[] = [];
  #hashes = 0;
  #receiptReads = new Map<string, number>();
  #random: () => number;

  /** @param random The seeded PRNG of the slow sends' delays. */
  constructor(random: () => number) {
    this.#random = random;
  }

  /** The stub's HTTP handler: `/send` and `/receipt/:txHash`. */
  handler = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    // With several instances, each sends under its own prefix (`/i2/send`):
    // a kill of one cuts only its own sends.
    const { instance, pathname } = signerPath(url.pathname);
    if (request.method === "POST" && pathname === "/send") {
      return await this.#send(request, instance);
    }
    const receipt = /^\/receipt\/(.+)$/.exec(pathname);
    if (request.method === "GET" && receipt) {
      const txHash = decodeURIComponent(receipt[1]!);
      const entry = this.hashes.get(txHash);
      if (!entry) {
        return Response.json({ error: "no such tx" }, { status: 404 });
      }
      entry.reads++;
      // The chain confirms the intent's nonce, whichever of its
      // transactions (a rescue replaces one) is asked about: from the
      // intent's second receipt read on. Counting per hash would never
      // confirm a job whose turns come later than STUCK_AFTER under load:
      // each turn would rescue and start a fresh hash.
      const reads = (this.#receiptReads.get(entry.intentId) ?? 0) + 1;
      this.#receiptReads.set(entry.intentId, reads);
      const behaviour = this.behaviours.get(entry.intentId);
      const confirmed = behaviour !== "pending" && reads >= 2;
      if (confirmed) this.confirmed.add(txHash);
      return Response.json({ status: confirmed ? "confirmed" : "pending" });
    }
    return Response.json({ error: "not found" }, { status: 404 });
  };

  /** Answers a `/send` by the intent's behaviour, and records it. */
  async #send(
    request: Request,
    instance: number | undefined,
  ): Promise<Response> {
    const arrivedAt = now();
    let text: string;
    try {
      text = await request.text();
    } catch {
      // Its sender died mid-request (a kill): nothing can have left, and
      // throwing here would print the server's stack into the run.
      return new Response(null, { status: 400 });
    }
    // A whole body that is not JSON is the relayer's fault: it throws.
    const body = JSON.parse(text) as {
      intentId: string;
      replace: boolean;
      intent?: { state?: unknown; hold?: unknown };
    };
    const { intentId } = body;
    const behaviour = this.behaviours.get(intentId);
    if (behaviour === undefined) this.strangers.push(String(intentId));
    const records = this.sends.get(intentId) ?? [];
    this.sends.set(intentId, records);
    const record: SendRecord = {
      arrivedAt,
      bodyAt: now(),
      answeredAt: null,
      status: null,
      notSent: false,
      poison: false,
      replace: body.replace === true,
      ...(instance === undefined ? {} : { instance }),
      state: body.intent?.state,
      hold: body.intent?.hold,
    };
    records.push(record);
    const nth = records.length;

    const answer = (
      status: number,
      json: Record<string, unknown>,
    ): Response => {
      record.answeredAt = now();
      record.status = status;
      record.notSent = json.notSent === true;
      record.poison = json.poison === true;
      return Response.json(json, { status });
    };
    const accept = (): Response => {
      const txHash = `0x${(++this.#hashes).toString(16).padStart(16, "0")}`;
      this.hashes.set(txHash, { intentId, reads: 0 });
      record.txHash = txHash;
      return answer(200, { txHash });
    };
    const declaredPoison = () =>
      answer(400, { error: "chain id mismatch", notSent: true, poison: true });
    const refused = () => answer(502, { error: "rpc: connection refused" });

    switch (behaviour) {
      case "slow":
        // Sometimes past the Sender's timeout: the relayer records unknown
        // although the stub accepted.
        await sleep(50 + Math.floor(this.#random() * 300));
        return accept();
      case "poison":
        return declaredPoison();
      case "refused":
        return refused();
      case "refused_then_poison":
        return nth === 1 ? refused() : declaredPoison();
      case "refused_notsent_confirm":
        // Maybe sent, then a rescue that stayed home: the next send must
        // still be a rescue (same nonce), or it could pay twice.
        return nth === 1
          ? refused()
          : nth === 2
          ? answer(503, { error: "replacement underpriced", notSent: true })
          : accept();
      case "notsent_then_confirm":
        return nth === 1
          ? answer(503, { error: "nonce too low", notSent: true })
          : accept();
      default:
        return accept();
    }
  }

  /**
   * Whether anything may have left for `intentId`: a send answered without
   * `notSent` (a 2xx among them) or never answered, or one still in flight
   * while its server was being killed (from the signal to the process gone).
   */
  mayHaveLeft(intentId: string, kills: readonly KillWindow[]): boolean {
    return (this.sends.get(intentId) ?? []).some((send) =>
      send.status === null || !send.notSent || spansKill(send, kills)
    );
  }

  /**
   * Whether the chain may hold a tx of `intentId`: this stub, the chain of
   * the run, accepted a send of it (it made a tx), or is still answering
   * one (a slow send may yet accept). A send it refused (`connection
   * refused`, a declared not-sent) made nothing, whatever its answer told
   * the relayer, and whether or not a kill cut that answer: the operator
   * who looks the nonce up on this chain finds it unused, and fails the
   * payment with `nonceChecked`.
   */
  onChain(intentId: string): boolean {
    return (this.sends.get(intentId) ?? []).some((send) =>
      send.status === null || send.txHash !== undefined
    );
  }
}

// ---------------------------------------------------------------- the server

/**
 * The address a server says it listens on: the service's own line on
 * stdout (`relayer: listening on …`), or `deno serve`'s on stderr where a
 * module says nothing itself. The server is started on port 0, so the
 * system picks a free port as it binds: a port probed free and handed to
 * the child could be taken by another process before the child bound it.
 *
 * @example
 * ```ts
 * import { listeningBase } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   listeningBase("relayer: listening on http://127.0.0.1:36479/"),
 *   "http://127.0.0.1:36479",
 * );
 * ```
 *
 * @param line A line the server wrote.
 * @returns Its base URL, without the trailing slash, or `null` for any
 *   other line.
 */
export function listeningBase(line: string): string | null {
  // deno-lint-ignore no-control-regex
  const plain = line.replace(/\x1b\[[0-9;]*m/g, "").trim();
  const match =
    /^(?:relayer: listening on|deno serve: Listening on) (http:\/\/127\.0\.0\.1:\d+)\/?$/
      .exec(plain);
  return match?.[1] ?? null;
}

/** A server's base before it said where it listens: requests there fail. */
const NOWHERE = "http://127.0.0.1:0";

/**
 * How many times in a row a server is started, at most, when it refuses to
 * start as the run's database faults cut its connection: a platform (Deno
 * Deploy, systemd, Kubernetes) starts again a process that exits at start.
 */
export const START_TRIES = 5;

/** How long to wait before starting a refused server again, times the tries so far. */
const START_BACKOFF_MS = 250;

/**
 * The service's documented refusal (docs/postgres.md) when its migration at
 * start lost the connection, or found the database down or starting up
 * (through PgBouncer: its logins to the server failing), or had a statement
 * cancelled (the `cancel` fault's `pg_cancel_backend`), or, on KvStore,
 * its refusal of a full disk (the `disk` fault): what a database fault of
 * the run can cause.
 */
const FAULTED_START =
  /^relayer: cannot start: (?:KV_PATH: the disk that holds \S+ is full \(No space left on device \(os error 28\)\): |DATABASE_URL: cannot open PostgreSQL \S+, [^:]+: (?:(?:(?:read|write|connect) )?(?:ECONNRESET|EPIPE|ECONNREFUSED|CONNECTION_CLOSED|CONNECTION_ENDED|CONNECTION_DESTROYED|terminating connection due to administrator command|the database system is (?:starting up|shutting down|in recovery mode)|canceling statement due to user request)\b|server login has been failing, try again later \(server_login_retry\)))/;

/**
 * Whether a start begun at `startedAt` may have met a database fault: one
 * still under way (the database not back), or one the database came back
 * from after the start began. Such a refusal is the fault's, not the
 * service's: it does not count against {@linkcode START_TRIES}, so that a
 * restart killed into a `--db-down` outage longer than the tries' backoffs
 * is started again until the database is back.
 */
export function startMetFault(
  faults: readonly { readonly up: number | null }[],
  startedAt: number,
): boolean {
  return faults.some((fault) => fault.up === null || fault.up >= startedAt);
}

/**
 * Whether the instances' recovery after a database fault is late at `at`:
 * the database came back at `databaseUpAt`, and each live instance has
 * {@linkcode RECOVERY_BOUND_MS} from then, or from its own start if it
 * started after (a kill's restart, whose start is not the recovery of a
 * process that lived through the fault). An instance being started again
 * is not asked; with none live, nothing is late yet. Time the tool's own
 * loop stood still since then (`stalls`, its {@linkcode LoopWatch}'s) is
 * not counted: the tool asked nothing and answered no send then.
 */
export function recoveryLate(
  databaseUpAt: number,
  instances: readonly { readonly live: boolean; readonly upAt: number }[],
  at: number,
  stalls: readonly Stall[] = [],
): boolean {
  const live = instances.filter((instance) => instance.live);
  if (live.length === 0) return false;
  const since = Math.max(databaseUpAt, ...live.map((i) => i.upAt));
  return at - since - stoodStill(stalls, since, at) > RECOVERY_BOUND_MS;
}

/** How long, of the time from `from` to `to`, the tool's loop stood still. */
export function stoodStill(
  stalls: readonly Stall[],
  from: number,
  to: number,
): number {
  let ms = 0;
  for (const stall of stalls) {
    ms += Math.max(0, Math.min(stall.to, to) - Math.max(stall.from, from));
  }
  return ms;
}

/** How a server that was never healthy ended: its exit, and what it wrote to stderr. */
export interface StartExit {
  readonly code: number;
  readonly signal: string | null;
  /** Its stderr, line by line. */
  readonly stderr: readonly string[];
}

/**
 * Whether to start a server again after `exit`, before it was healthy, on
 * its `tries`th start in a row: only under database faults (`faults`),
 * fewer than {@linkcode START_TRIES} times, and only when it exited 1
 * having written nothing to stderr but the service's one-line refusal of a
 * database a fault cut ({@linkcode FAULTED_START}). Any other exit at start
 * (a crash, a stack, a signal, another refusal) fails the run.
 */
export function startAgain(
  exit: StartExit,
  faults: boolean,
  tries: number,
): boolean {
  const lines = exit.stderr.filter((line) => line.trim() !== "");
  return faults && tries < START_TRIES && exit.code === 1 &&
    exit.signal === null && lines.length === 1 &&
    FAULTED_START.test(lines[0]!);
}

/**
 * The real service as a child process, restarted on the same KV file.
 *
 * @example
 * ```ts ignore
 * const server = new ServerProcess(ROOT, dir, env, (error) => console.error(error));
 * await server.start(performance.now() + 30_000);
 * await fetch(`${server.base}/healthz`);
 * await server.stop();
 * ```
 */
export class ServerProcess {
  #child: Deno.ChildProcess | null = null;
  #killing = false;
  #up = deferred();
  #fatal: (error: Error) => void;
  #output: string[] = [];
  #readers: Promise<void>[] = [];
  base = NOWHERE;
  /** The server's number: a start tried again after a refusal keeps it (it never served). */
  generation = 0;
  /** The refusals after which a server was started again (see {@linkcode startAgain}). */
  readonly refusals: string[] = [];
  /** When the current generation became healthy. */
  upAt = 0;
  /**
   * Whether a start begun at a time may have met a database fault
   * ({@linkcode startMetFault}): its refusal is not counted as a try.
   */
  metFault: (startedAt: number) => boolean = () => false;
  /** Answers received from the current generation. */
  answered = 0;
  /** Called with each line a server prints, as it comes (a trail's). */
  onLine: ((line: string, generation: number) => void) | null = null;
  /** Whether a server is up and not being killed: the queue may send to it. */
  live = false;
  /**
   * What names its servers before their generation: nothing with one
   * instance (`server 3`), its number and a dot with several (`server 2.3`).
   */
  tag = "";

  /**
   * @param root Where `main.ts` is (the repository root).
   * @param dir The run's temp dir, the only place the service may write.
   * @param env The service's whole environment.
   * @param fatal Called when a server exits by itself once healthy.
   * @param again Whether to start again a server that exited before it was
   *   healthy, on its `tries`th start in a row ({@linkcode startAgain}).
   */
  constructor(
    readonly root: string,
    readonly dir: string,
    readonly env: Record<string, string>,
    fatal: (error: Error) => void,
    readonly again: (exit: StartExit, tries: number) => boolean = () => false,
  ) {
    this.#fatal = fatal;
  }

  /** Resolves once a server is up (immediately if one is). */
  waitUp(): Promise<void> {
    return this.#up.promise;
  }

  /** The last lines the servers printed. */
  output(): string {
    return this.#output.slice(-40).join("\n");
  }

  /** Keeps the last lines of a server's output, tagged with its generation. */
  #collect(
    stream: ReadableStream<Uint8Array>,
    generation: number,
    sink?: { push(line: string): unknown },
  ) {
    this.#readers.push(
      (async () => {
        let rest = "";
        for await (
          const chunk of stream.pipeThrough(new TextDecoderStream())
        ) {
          const lines = (rest + chunk).split("\n");
          rest = lines.pop() ?? "";
          for (const line of lines) {
            sink?.push(line);
            this.#output.push(`[server ${this.tag}${generation}] ${line}`);
            this.onLine?.(line, generation);
          }
          if (this.#output.length > 400) this.#output.splice(0, 200);
        }
        if (rest) {
          sink?.push(rest);
          this.#output.push(`[server ${this.tag}${generation}] ${rest}`);
          this.onLine?.(rest, generation);
        }
      })().catch(() => {}),
    );
  }

  /**
   * Starts the next server and waits until `/healthz` answers, or
   * `deadline`; one that exits before, as {@linkcode again} allows, is
   * started again after a short backoff.
   */
  async start(deadline: number): Promise<void> {
    const generation = ++this.generation;
    // The tries in a row that met no database fault.
    let tries = 0;
    for (let all = 1;; all++) {
      const startedAt = now();
      const exit = await this.#try(generation, deadline);
      if (exit === null) break;
      const reason =
        `server ${this.tag}${generation} exited before it was healthy (code ${exit.code}, signal ${exit.signal})`;
      if (!this.metFault(startedAt)) tries++;
      if (!this.again(exit, Math.max(tries, 1))) {
        throw new Error(`${reason}:\n${this.output()}`);
      }
      this.refusals.push(exit.stderr.join(" ").trim());
      await sleep(START_BACKOFF_MS * Math.min(all, START_TRIES - 1));
    }
    this.upAt = now();
    this.answered = 0;
    this.live = true;
    this.#up.resolve();
  }

  /** One start of server `generation`: `null` once healthy, or how it exited before. */
  async #try(generation: number, deadline: number): Promise<StartExit | null> {
    this.#killing = false;
    // Port 0: the child binds a port the system picks, and says which.
    const child = new Deno.Command(Deno.execPath(), {
      args: startArgs({ port: 0, writeDir: this.dir }),
      cwd: this.root,
      clearEnv: true,
      env: this.env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    const stderr: string[] = [];
    // Where the child says it listens (main.ts says it on stdout).
    let listening: string | null = null;
    this.#collect(child.stdout, generation, {
      push: (line: string) => listening ??= listeningBase(line),
    });
    const reading = this.#readers.length;
    this.#collect(child.stderr, generation, stderr);
    let healthy = false;
    let exited: Deno.CommandStatus | null = null;
    child.status.then((status) => {
      exited = status;
      // Before it was healthy, the start says why.
      if (this.#child === child && !this.#killing && healthy) {
        this.#fatal(
          new Error(
            `server ${this.tag}${generation} exited by itself (code ${status.code}, signal ${status.signal})`,
          ),
        );
      }
    });
    // Until the child says where it listens, nowhere: a request sent
    // meanwhile fails as one to a server not up yet does.
    this.base = NOWHERE;
    for (;;) {
      if (now() > deadline) {
        throw new DeadlineExceeded(
          `server ${this.tag}${generation} never became healthy`,
        );
      }
      if (this.base === NOWHERE) {
        // Not listening until it says where.
        for (const line of stderr) listening ??= listeningBase(line);
        this.base = listening ?? NOWHERE;
      }
      if (this.base !== NOWHERE) {
        try {
          const res = await fetch(`${this.base}/healthz`, {
            signal: AbortSignal.timeout(1000),
          });
          await res.body?.cancel();
          if (res.ok) break;
        } catch {
          // not answering yet
        }
      }
      if (exited !== null || this.#child !== child) {
        const status: Deno.CommandStatus = await child.status;
        // Its whole stderr, to tell a refusal from a crash.
        await this.#readers[reading];
        this.#child = null;
        return { code: status.code, signal: status.signal, stderr };
      }
      await sleep(25);
    }
    healthy = true;
    // Exited between the answer and now.
    if (exited !== null && !this.#killing) {
      const status: Deno.CommandStatus = exited;
      this.#fatal(
        new Error(
          `server ${this.tag}${generation} exited by itself (code ${status.code}, signal ${status.signal})`,
        ),
      );
    }
    return null;
  }

  /** SIGKILL, and wait for the process to be gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === null) return;
    this.#up = deferred();
    this.live = false;
    this.#killing = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.status;
    this.#child = null;
  }

  /** Kills whatever runs and waits for its output to drain. */
  async stop(): Promise<void> {
    await this.kill();
    await Promise.all(this.#readers);
  }
}

/**
 * The first line of a failed run: the seed and what failed. A fault of the
 * tool itself (a `TypeError`, `ReferenceError` or `RangeError` thrown by
 * its own code, not a refusal, the deadline or a violation) is followed by
 * the frames of its stack, so that a run that cannot be repeated at will
 * still names the line.
 *
 * @example
 * ```ts
 * failedHeadline(7, new Error("interrupted"));
 * // "crash test FAILED (seed 7): interrupted"
 * ```
 *
 * @param seed The run's seed.
 * @param reason What failed the run.
 * @returns The line, and the stack's frames below it for a fault of the tool.
 */
export function failedHeadline(seed: number, reason: Error): string {
  const head = `crash test FAILED (seed ${seed}): ${reason.message}`;
  const fault = reason instanceof TypeError ||
    reason instanceof ReferenceError || reason instanceof RangeError;
  const frames = fault
    ? (reason.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line))
    : [];
  return frames.length === 0 ? head : `${head}\n${frames.join("\n")}`;
}

// ---------------------------------------------------------------- the queue

/** A delivery answer body, as the webhook sends it. */
export interface AnswerBody {
  outcome?: string;
  job?: string;
  delivery?: number;
  reason?: string;
  delayMs?: number;
  resolution?: string;
  title?: string;
}

/**
 * A delivery's answer body as the queue books it: the JSON object the
 * service answered, or, for anything else (no JSON, Pub/Sub's empty
 * 204, a JSON `null`, a number, an array), its text as the title, so that
 * what reads its fields never meets a `null`.
 *
 * @example
 * ```ts
 * answerBody('{"outcome":"done"}'); // { outcome: "done" }
 * answerBody("null"); // { title: "null" }
 * ```
 *
 * @param text The answer's body.
 * @returns The body to book.
 */
export function answerBody(text: string): AnswerBody {
  try {
    const json: unknown = JSON.parse(text);
    if (typeof json === "object" && json !== null && !Array.isArray(json)) {
      return json as AnswerBody;
    }
  } catch {
    // not JSON: kept as it came
  }
  return { title: text.slice(0, 200) };
}

/** What one request of the queue got: an answer, or none (the server died under it). */
export type Attempt =
  | {
    readonly kind: "answer";
    /** The route it went to. */
    readonly path: string;
    readonly status: number;
    readonly body: AnswerBody;
    readonly retryAfter: string | null;
    /** A Pub/Sub push without `deliveryAttempt` (the service counts it). */
    readonly counted?: boolean;
    /**
     * A Pub/Sub push whose token expired and was signed by a key Google
     * has withdrawn: it must be refused (401), and Pub/Sub pushes again.
     */
    readonly stale?: boolean;
    /**
     * Under database faults, what the same signed request sent again
     * answered when this copy's 5xx wrote nothing, its replay record with
     * it: that copy was a first delivery, and may have poisoned the job.
     */
    readonly unrecordedCopy?: AnswerBody;
  }
  | { readonly kind: "lost"; readonly path: string; readonly error: string };

/** One job as the queue tracks it. */
export interface JobRecord {
  readonly intentId: string;
  readonly jobId: string;
  /** The last delivery number used. */
  delivery: number;
  ended: boolean;
  /** The answer that ended it. */
  final?: AnswerBody;
  /**
   * Delivery numbers that got a poison answer, with the resolution and the
   * publication (`generation`) they came in.
   */
  readonly poisoned: {
    delivery: number;
    resolution: string;
    generation: number;
  }[];
  /**
   * Delivery numbers of which no copy got an answer, or one copy did not,
   * or one answered that the store failed (a write whose answer was lost
   * may have landed: a letter among them).
   */
  readonly lost: Set<number>;
  /**
   * Delivery numbers acked by Pub/Sub's 204, which has no body: done and
   * poison look alike there, so a dead letter at one of them is allowed.
   */
  readonly unread: Set<number>;
  /** A copy died with the server after another copy of the same delivery was acked. */
  lostCopyAfterAck: boolean;
  /** Which publication of the job this is: 1, then 2 after a re-publish. */
  generation: number;
  /** The queue's own limit: it gives up after this delivery (`null`: never). */
  queueLimit: number | null;
  /**
   * Whether this publication's Pub/Sub subscription has no dead-letter
   * policy: its pushes carry no `deliveryAttempt` (the service counts them
   * by subscription and message id), and Pub/Sub never gives up on it (it
   * pushes until the message's retention runs out).
   */
  counted: boolean;
  /**
   * The pushes sent of each message without `deliveryAttempt`, copies
   * included: the service's count of that message, so the delivery number
   * of a dead letter it writes, is at most that.
   */
  readonly countedPushes: Map<string, number>;
  /** Whether the give-up comes while the limit's delivery is still in flight. */
  giveUpInFlight: boolean;
  /** The queue's id of the message of this generation (for its give-up). */
  messageId: string;
  /**
   * The message's publish time, as a Pub/Sub push names it
   * (`…T11:00:00.123Z`); its dead-letter copy names it `…+00:00`.
   */
  publishTime: string;
  /**
   * The queue this publication goes through: the generic route (a bridge,
   * whose deliveries name the message for some intents, as
   * {@linkcode namesMessage} says, and no message for the others), QStash (each delivery carries its
   * `Upstash-Message-Id`, and the give-up is QStash's failure callback) or
   * Pub/Sub push (each push carries its message id, publish time and
   * `deliveryAttempt`, its own backoff applies, and the give-up is the
   * dead-letter topic's push).
   */
  lane: Lane;
  /**
   * From each acked give-up to the next publication (or the end): no
   * `/send` may arrive for the intent then, whatever copies come late; on
   * the generic route, after a drop, only while its lease lasts (see
   * {@linkcode quietAfterGiveUp}).
   */
  readonly quiet: { from: number; to: number }[];
  /**
   * Whether no publication of the job is being delivered and none is being
   * made: only then may the operator redrive its dead letter.
   */
  idle: boolean;
  /** How many redrive rounds its dead letters had. */
  redrives: number;
  /**
   * The last publication a redrive made (0: none): a redrive removes the
   * dead letter, so a poison answer before it need not have one at the end.
   */
  redrivenGeneration: number;
}

/** The queues a publication may go through. */
type Lane = "generic" | "qstash" | "pubsub";

/** What the run counted. */
interface Stats {
  deliveries: number;
  requests: number;
  duplicates: number;
  lostRequests: number;
  statuses: Map<number, number>;
  restarts: number;
  kills: KillWindow[];
  samples: number;
  giveUps: number;
  giveUpsInFlight: number;
  giveUpRepeats: number;
  republished: number;
  heldUp: number;
  /** QStash publications. */
  qstashJobs: number;
  /** Pub/Sub publications. */
  pubsubJobs: number;
  /** Late copies of a message after its give-up was acked, by lane. */
  lateCopies: number;
  pubsubLateCopies: number;
  /** Dead-letter pushes (Pub/Sub's give-ups, repeats included). */
  deadLetterPushes: number;
  /** Pushes sent with a token for another audience (each must be 401). */
  misdirected: number;
  /** Pub/Sub publications through the subscription without a dead-letter policy (no `deliveryAttempt`). */
  pubsubCounted: number;
  /** The most pushes one such publication had before the service acked it. */
  countedMostPushes: number;
  /** Pushes with the old key's token after the new key was listed (each must be accepted). */
  oldKeyPushes: number;
  /** Pushes with the new key's token (each must be accepted). */
  newKeyPushes: number;
  /** Pushes with an expired token of the withdrawn key (each must be 401, then pushed again). */
  stalePushes: number;
  /** Pushes also sent with a token of a key Google never listed (each must be 401). */
  forgedPushes: number;
  /** Signed requests sent again, byte for byte, after their answer. */
  replays: number;
  /** Operator resolutions of needs_review intents, by target. */
  resolved: Map<string, number>;
  /** Those of them sent while a `cancel` fault was under way. */
  resolvedInCancel: Map<string, number>;
  /** Kills that landed while a give-up or a late copy was in flight. */
  killsInGiveUp: number;
  /** Intents a delivery settled behind a write-ahead whose send a kill cut ({@linkcode settledBehindCutSend}). */
  settledBehindCut: Set<string>;
  /** The operator's redrive rounds (one letter each), pairs among them, retries after an error. */
  redriveRounds: number;
  redrivePairs: number;
  redriveRetries: number;
  /** Redrive answers, by status (`lost`: the server died under it). */
  redriveStatuses: Map<string, number>;
  /** Jobs the redrives published (messages QStash took), and how many were delivered. */
  redrivePublished: number;
  /** Kills that landed while a redrive was in flight. */
  killsInRedrive: number;
  /** Kills that landed while another instance was down (being started again). */
  killsWhileOtherDown: number;
  /** The database faults, as they happened. */
  dbFaults: DbFaultRecord[];
  /** Delivery answers received, across every server. */
  answeredTotal: number;
  /** The longest a delivery request took to be answered, in ms. */
  slowestMs: number;
}

/** One database fault: when, and how the service came back. */
interface DbFaultRecord {
  readonly kind: DbFault;
  readonly from: number;
  /** When the database accepted connections again (`null`: not yet). */
  up: number | null;
  /** When `/readyz` first answered 200 after `up`. */
  ready: number | null;
  /** When a delivery was first answered 200 after `up`. */
  firstOk: number | null;
  /** Answers from `from` until `ready`, by status. */
  readonly statuses: Map<number, number>;
  /** The non-200 answers' titles and reasons from `from` until `ready`, with counts. */
  readonly texts: Map<string, number>;
}

/**
 * Answers kept in the order their requests were sent, not answered: two
 * reads of one intent at once (the sampler's and the operator's) may
 * answer out of order, as an intent's view is three store reads (the
 * intent, its count, its letter) and the later two can wait on a
 * connection under database faults. Ordered by answer, a read of the
 * intent before a commit, answered after a read behind it, looks like a
 * move backwards.
 */
export class SentOrder<T> {
  readonly #slots = new Map<string, ({ value: T } | null)[]>();

  /**
   * A place for the answer of a request about `key` sent now.
   *
   * @param key What the request is about.
   * @returns A function that records its answer.
   */
  send(key: string): (value: T) => void {
    const slots = this.#slots.get(key) ?? [];
    this.#slots.set(key, slots);
    const at = slots.push(null) - 1;
    return (value) => {
      slots[at] = { value };
    };
  }

  /**
   * The answers about `key`, in the order their requests were sent.
   *
   * @param key What the requests were about.
   * @returns Each answer given so far.
   */
  get(key: string): T[] {
    return (this.#slots.get(key) ?? []).flatMap((slot) =>
      slot === null ? [] : [slot.value]
    );
  }
}

/**
 * Whether an answer is the service telling that its store failed (503, the
 * delivery's "store failed unexpectedly", the store-failed problem of an
 * operator's route, or a retry naming PostgreSQL): under database faults,
 * such an answer did nothing, and the caller asks again.
 *
 * @param status The answer's status.
 * @param text The answer's body.
 * @returns Whether the store's failure is the whole answer.
 */
export function storeFailed(status: number, text: string): boolean {
  return status === 503 &&
    /urn:relayer:problem:(delivery-failed|store-failed)|PostgreSQL/.test(text);
}

/**
 * What the answer `again` to a signed request sent again (a replay) is,
 * its first copy having been answered `first`: `"refused"` (401, as it
 * must be); under database faults (`outages`), `"first"` when the first
 * copy was answered 5xx (it may have written nothing, its replay record
 * with it: the copy sent again is then a first delivery, not a replay, and
 * the money checks judge what it did), or `"unread"` when the store failed
 * under the replay, or a `cancel` fault cut its first write (it did
 * nothing; the queue's next copy meets its record); else `"unexpected"`.
 *
 * @param first The first copy's status.
 * @param again The status of the copy sent again.
 * @param detail The body of the copy sent again.
 * @param outages Whether the run's database faults take the database away.
 * @returns What the replay's answer is.
 */
export function replayAnswer(
  first: number,
  again: number,
  detail: string,
  outages: boolean,
): "refused" | "first" | "unread" | "unexpected" {
  if (again === 401) return "refused";
  if (!outages) return "unexpected";
  if (first >= 500) return "first";
  return storeFailed(again, detail) ||
      (again === 503 && CANCELLED_STATEMENT.test(detail))
    ? "unread"
    : "unexpected";
}

/**
 * PostgreSQL's words (57014) for a statement `pg_cancel_backend` cut, which
 * the store answers as busy with nothing written (the `cancel` fault's):
 * a replay whose first write, where its replay record is read, was cut so
 * could not be told from a first delivery.
 */
const CANCELLED_STATEMENT = /canceling statement due to user request/;

/**
 * What the operator makes of the answer to its
 * `POST /v1/intents/:id/resolve`: `"answered"` (a 200, or a 409: the
 * route's refusal, or another move first), `"again"` (a 503 that changed
 * nothing: a receipt on record the Sender could not read now, which the
 * route must not fail a payment behind, as the signer's answer may come
 * past `SENDER_TIMEOUT` under load; or under database faults the store's
 * failure) or `"unexpected"`.
 *
 * @param status The answer's status.
 * @param text The answer's body.
 * @param dbFaults Whether the run has database faults.
 * @returns What the answer is.
 */
export function resolveAnswer(
  status: number,
  text: string,
  dbFaults: boolean,
): "answered" | "again" | "unexpected" {
  if (status === 200 || status === 409) return "answered";
  if (status === 503 && text.includes("urn:relayer:problem:receipts-unread")) {
    return "again";
  }
  return dbFaults && storeFailed(status, text) ? "again" : "unexpected";
}

/**
 * Whether the operator may stop at the end of a run: no resolution to be
 * made again, and no payment still in review with nothing on the chain
 * (or whose last resolution the store failed under) that it has not
 * resolved.
 *
 * @example
 * ```ts
 * import { operatorMayStop } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * const done = { resolved: true, resolving: false, onChain: false, storeFailed: false, lastSeen: "needs_review" } as const;
 * assert.equal(operatorMayStop([done], 0), true);
 * assert.equal(operatorMayStop([{ ...done, resolved: false }], 0), false);
 * ```
 *
 * @param payments What the operator knows of each: whether it resolved
 *   it, whether a resolution of it is under way, whether the chain holds
 *   a tx of it, whether the store failed under its last resolution, and
 *   the state its last read saw.
 * @param again How many resolutions are to be made again.
 * @returns Whether it may stop.
 */
export function operatorMayStop(
  payments: readonly {
    readonly resolved: boolean;
    readonly resolving: boolean;
    readonly onChain: boolean;
    readonly storeFailed: boolean;
    readonly lastSeen: State | undefined;
  }[],
  again: number,
): boolean {
  // A resolution under way counts as its payment's: it is marked
  // resolved as it is sent, and unmarked when the answer says to make it
  // again (a 409 send-ended, at once).
  return again === 0 &&
    !payments.some((p) =>
      p.resolving ||
      (!p.resolved && (!p.onChain || p.storeFailed) &&
        p.lastSeen === "needs_review")
    );
}

/**
 * Whether the operator has a payment to look at: not resolved yet (or its
 * resolution to be made again), not waiting out a 409 `send-in-flight`,
 * and last read in review, or its job ended with no later read that left
 * review for good. A payment last read settled, failed or created (which
 * never moves) is not looked at again: with a few hundred jobs ended, the
 * operator's few looks a round went to those, and the payments in review
 * waited past the run's end.
 *
 * @example
 * ```ts
 * import { awaitsOperator } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * const base = { resolved: false, again: false, retryAt: undefined, jobEnded: true };
 * assert.equal(awaitsOperator({ ...base, lastSeen: "needs_review" }, 0), true);
 * assert.equal(awaitsOperator({ ...base, lastSeen: "settled" }, 0), false);
 * ```
 *
 * @param payment What the operator knows of it: whether it resolved it,
 *   whether that resolution is to be made again, when it may try again
 *   after a `send-in-flight`, the state its last read saw, and whether
 *   its job ended.
 * @param at The operator's clock now.
 * @returns Whether to look at it.
 */
export function awaitsOperator(
  payment: {
    readonly resolved: boolean;
    readonly again: boolean;
    readonly retryAt: number | undefined;
    readonly lastSeen: State | undefined;
    readonly jobEnded: boolean;
  },
  at: number,
): boolean {
  if (payment.resolved && !payment.again) return false;
  if ((payment.retryAt ?? -Infinity) > at) return false;
  if (payment.lastSeen === "needs_review") return true;
  return payment.jobEnded && payment.lastSeen !== "settled" &&
    payment.lastSeen !== "failed" && payment.lastSeen !== "created";
}

/**
 * The operator's resolution of a payment in review, from what the chain
 * (the signer stub) holds of it: settled once one of its txs on record
 * confirmed; failed when the chain holds no tx of it, with
 * `nonceChecked` (its nonce looked up and found unused: nothing of it
 * can land); failed without `nonceChecked` when a tx of it is on record
 * and none confirmed (the route reads its receipt, and must refuse a
 * pending one with 409, or money could land behind a void); `null`,
 * left in review, when the chain holds a tx of it that is on no record
 * (a send whose answer was lost: its nonce is not free, and a fail would
 * void the hold of a payment that may be made).
 *
 * @example
 * ```ts
 * import { operatorResolution } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * const none = () => false;
 * assert.deepEqual(operatorResolution([], none, false), { to: "failed", nonceChecked: true });
 * assert.equal(operatorResolution([], none, true), null);
 * ```
 *
 * @param txHashes The txs on the payment's record.
 * @param confirmed Whether the chain confirmed a tx.
 * @param onChain Whether the chain holds any tx of the payment.
 * @returns The resolution to post, or `null` to leave it in review.
 */
export function operatorResolution(
  txHashes: readonly string[],
  confirmed: (hash: string) => boolean,
  onChain: boolean,
):
  | { readonly to: "settled"; readonly nonceChecked: false }
  | { readonly to: "failed"; readonly nonceChecked: boolean }
  | null {
  if (txHashes.some(confirmed)) return { to: "settled", nonceChecked: false };
  if (onChain && txHashes.length === 0) return null;
  return { to: "failed", nonceChecked: !onChain };
}

/**
 * A resolution the store failed under (a 503: an outage, a statement a
 * `cancel` fault cut) that never completed. KvStore and PostgresStore
 * write the move and its void or capture in one commit, so such a 503
 * left the payment in review with its hold pending (nothing written; the
 * operator resolves it again) or resolved whole (the answer lost): either
 * way, by the run's end it is resolved, or a later resolution of it was
 * answered otherwise (a 409 of the route's, say). One still in review
 * whose last resolution was that 503 is a resolution stuck: a write that
 * left the payment unresolvable, or an operator that never came back.
 *
 * @example
 * ```ts
 * import { resolutionStuck } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * const failure = { to: "failed", at: 3_200 } as const;
 * assert.equal(resolutionStuck("pi_0001", failure, "failed", "voided"), null);
 * assert.match(
 *   resolutionStuck("pi_0001", failure, "needs_review", "pending") ?? "",
 *   /still needs_review at the end/,
 * );
 * ```
 *
 * @param id The intent.
 * @param failure The operator's last resolution of it, where the store
 *   failed under it (503) and no later one was answered otherwise, with
 *   when it was sent (ms into the run); `undefined` if none.
 * @param state The intent's state at the end.
 * @param hold Its hold at the end.
 * @returns The violation, or `null`.
 */
export function resolutionStuck(
  id: string,
  failure:
    | { readonly to: "settled" | "failed"; readonly at: number }
    | undefined,
  state: State,
  hold: string | null,
): string | null {
  if (failure === undefined || state !== "needs_review") return null;
  return `${id}: resolving it ${failure.to} at ${
    (failure.at / 1000).toFixed(2)
  }s was answered 503 (the store failed under it), and it is still needs_review at the end with hold ${hold}: the resolution never completed`;
}

/**
 * Whether the store refused a resolution the resolve route let through:
 * its `409 refused`, the payment read after it still in review at the
 * version the operator sent. The route checks what the store checks
 * before it writes (the state, the version, the chain), and writes the
 * move with its hold change in one commit, so only a route whose write
 * the store's rules forbid is refused so (a fail without its void, a
 * settle without its capture): the payment would stay in review for
 * ever. A race lost (a send's late record moved the version between the
 * route's read and its write) is not one.
 *
 * @example
 * ```ts
 * import { resolutionRefused } from "./crash.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = JSON.stringify({ type: "urn:relayer:problem:refused" });
 * assert.equal(resolutionRefused(409, refused, "v1", { state: "needs_review", version: "v1" }), true);
 * assert.equal(resolutionRefused(409, refused, "v1", { state: "needs_review", version: "v2" }), false);
 * ```
 *
 * @param status The resolve route's status.
 * @param text Its body, as text.
 * @param version The intent's version the operator sent.
 * @param after The intent read after the answer, or `null` if unread.
 * @returns Whether the route let through a write the store refused.
 */
export function resolutionRefused(
  status: number,
  text: string,
  version: string,
  after: { readonly state: State; readonly version: string } | null,
): boolean {
  return status === 409 && text.includes("urn:relayer:problem:refused") &&
    after !== null && after.state === "needs_review" &&
    after.version === version;
}

/**
 * What an intent's hold says against its state, or `null` when they agree.
 * KvStore and PostgresStore void or capture a hold in the commit of the
 * move it rides in (the give-up's settling → failed, the resolve route's
 * needs_review → failed or settled), and nothing in the run voids a hold
 * on its own: so at any moment a `failed` intent's hold is voided (or
 * absent), a `settled` one's captured, and any other's pending (or
 * absent). Half a resolution (a void without its move, a move without its
 * void) shows here, at whatever read meets it.
 *
 * @example
 * ```ts
 * holdAgainstState("failed", "pending"); // "failed with a pending hold"
 * holdAgainstState("needs_review", "pending"); // null
 * ```
 *
 * @param state The intent's state, as read.
 * @param hold Its hold, as read in the same answer.
 * @returns The contradiction, in words, or `null`.
 */
export function holdAgainstState(
  state: State,
  hold: string | null,
): string | null {
  const agrees = state === "failed"
    ? hold === "voided" || hold === null
    : state === "settled"
    ? hold === "captured"
    : hold === "pending" || hold === null;
  return agrees ? null : `${state} with a ${hold ?? "missing"} hold`;
}

/**
 * Whether a request sent at `at` was sent while a `cancel` fault was under
 * way (from its start to the database's return, both included).
 *
 * @example
 * ```ts
 * duringCancel([{ kind: "cancel", from: 10, up: 20 }], 15); // true
 * ```
 *
 * @param faults The run's database faults so far.
 * @param at When the request was sent.
 * @returns Whether a `cancel` fault was under way then.
 */
export function duringCancel(
  faults: readonly {
    readonly kind: string;
    readonly from: number;
    readonly up: number | null;
  }[],
  at: number,
): boolean {
  return faults.some((fault) =>
    fault.kind === "cancel" && fault.from <= at &&
    (fault.up === null || at <= fault.up)
  );
}

/**
 * Books the answers to one delivery (or give-up) numbered `n` into its job:
 * `live` when they decide the job's end (not a copy the queue no longer
 * waits for), `generation` the publication they belong to (a give-up
 * repeated, a late copy or a delivery left in flight belongs to an earlier
 * one than a redrive may since have published). Pub/Sub's refusals wait
 * `pubsubBackoff`; answers no queue should get go to `unexpected`.
 */
export function bookAnswers(
  job: JobRecord,
  n: number,
  attempts: readonly Attempt[],
  options: {
    live: boolean;
    generation: number;
    pubsubBackoff: (n: number) => number;
    unexpected: string[];
  },
): { delayMs: number; acked: boolean; lostCopy: boolean } {
  const { live, generation, pubsubBackoff, unexpected } = options;
  let delayMs = 0;
  let acked = false;
  let lostCopy = false;
  for (const attempt of attempts) {
    if (attempt.kind === "lost") {
      lostCopy = true;
      job.lost.add(n);
      delayMs = Math.max(delayMs, 50);
      continue;
    }
    const { status, body: answer } = attempt;
    // The store failed under it: its write (the letter of a poison,
    // say) may have landed, its answer lost; the next delivery reads it.
    if (storeFailed(status, JSON.stringify(answer))) job.lost.add(n);
    if (attempt.path.startsWith("/v1/pubsub")) {
      // Pub/Sub's answers: 204 acks (done or poison, no body), 503 asks
      // again after the subscription's own backoff, not delayMs, and so
      // does a refused push (an expired token, which it was meant to be).
      if (status === 204) {
        acked = true;
        // Without deliveryAttempt the count is the service's, not n.
        if (!attempt.counted) job.unread.add(n);
        if (live) job.final = {};
      } else if (status === 503 || (status === 401 && attempt.stale)) {
        delayMs = Math.max(delayMs, pubsubBackoff(n));
      } else {
        unexpected.push(
          `${job.intentId}: Pub/Sub push ${n} to ${attempt.path} answered ${status} ${
            JSON.stringify(answer)
          }`,
        );
        delayMs = Math.max(delayMs, 100);
      }
      continue;
    }
    for (const said of [answer, attempt.unrecordedCopy]) {
      if (said?.outcome === "poison") {
        job.poisoned.push({
          delivery: said.delivery ?? n,
          resolution: said.resolution ?? "",
          generation,
        });
      }
    }
    if (status === 200) {
      acked = true;
      if (live) job.final = answer;
    } else if (status === 503) {
      // delayMs is the policy's own delay; Retry-After is whole seconds
      // rounded up, which would stretch a 20 ms policy into seconds.
      const wait = typeof answer.delayMs === "number"
        ? answer.delayMs
        : Number(attempt.retryAfter ?? "1") * 1000 / 50;
      delayMs = Math.max(delayMs, wait);
    } else {
      unexpected.push(
        `${job.intentId}: delivery ${n} answered ${status} ${
          JSON.stringify(answer)
        }`,
      );
      delayMs = Math.max(delayMs, 100);
    }
  }
  return { delayMs, acked, lostCopy };
}

// ---------------------------------------------------------------- the checks

type State = IntentState;

/**
 * What the relayer may move a state to (itself included), in any number of
 * steps: the transition table without the moves only the payments API
 * (out of created) or an operator (out of needs_review) makes.
 */
const REACHABLE = {} as Record<State, readonly State[]>;
{
  const relayerMoves = (from: State): readonly State[] =>
    from === "created" || from === "needs_review" ? [] : TRANSITIONS[from];
  const closure = (
    from: State,
  ): State[] => [from, ...relayerMoves(from).flatMap(closure)];
  for (const from of INTENT_STATES) {
    REACHABLE[from] = [...new Set(closure(from))];
  }
}

/** The intent as `GET /v1/intents/:id` shows it. */
interface IntentView {
  intent: {
    id: string;
    state: State;
    hold: string | null;
    lastBroadcast:
      | { outcome: string; txHash?: string; at: number; error?: string }
      | null;
    broadcasting: number | null;
    mayHaveSent: boolean;
    /** Every tx hash a send of this intent returned. */
    txHashes: string[];
  };
  deliveries: number;
  deadLetter: DeadLetterView | null;
}

/**
 * Whether an answer of `GET /v1/intents/:id` is an intent's view, as the
 * checks read it: an object whose `intent` is an object with a `state`,
 * and whose `deadLetter` is `null` or an object. Anything else (a JSON
 * `null`) is the service's violation, reported, not read.
 *
 * @example
 * ```ts
 * isIntentView(null); // false
 * ```
 *
 * @param body The answer's JSON body.
 * @returns Whether the checks may read it.
 */
export function isIntentView(body: unknown): body is IntentView {
  const view = (body ?? {}) as { intent?: unknown; deadLetter?: unknown };
  const intent = (view.intent ?? {}) as { state?: unknown };
  return typeof body === "object" && body !== null &&
    typeof view.intent === "object" && view.intent !== null &&
    typeof intent.state === "string" &&
    (view.deadLetter === null ||
      (typeof view.deadLetter === "object" && view.deadLetter !== undefined));
}

interface DeadLetterView {
  jobId: string;
  intentId: string;
  deliveries: number;
  cause: string;
  reason: string;
  resolution: string;
  lastError: string;
}

/**
 * A page of `GET /v1/dead-letters` as the checks read it: its letters,
 * its cursor, and what in it is no dead letter (the page not an object
 * with `items`, an item `null` or without the fields the checks read,
 * a cursor neither a string nor `null`), which is the service's
 * violation to report. Such an item is left out rather than read: the
 * run goes on to its checks instead of failing on a fault of its own.
 *
 * @example
 * ```ts
 * readLetterPage({ items: [null], cursor: null }).wrong;
 * // "1 of its 1 items no dead letter: null"
 * ```
 *
 * @param body The answer's JSON body.
 * @returns The letters, the next page's cursor (`null`: the last page),
 *   and what was wrong with the page, if anything.
 */
export function readLetterPage(body: unknown): {
  letters: (DeadLetterView & { version: string })[];
  cursor: string | null;
  wrong: string | null;
} {
  const page = (typeof body === "object" && body !== null ? body : {}) as {
    items?: unknown;
    cursor?: unknown;
  };
  if (!Array.isArray(page.items)) {
    return {
      letters: [],
      cursor: null,
      wrong: `a page without items: ${JSON.stringify(body)?.slice(0, 200)}`,
    };
  }
  const isLetter = (
    item: unknown,
  ): item is DeadLetterView & { version: string } => {
    const letter = (item ?? {}) as Record<string, unknown>;
    return typeof item === "object" && item !== null &&
      [
        "jobId",
        "intentId",
        "cause",
        "reason",
        "resolution",
        "lastError",
        "version",
      ].every((field) => typeof letter[field] === "string") &&
      typeof letter.deliveries === "number";
  };
  const letters = page.items.filter(isLetter);
  const others = page.items.filter((item) => !isLetter(item));
  const cursor = typeof page.cursor === "string" ? page.cursor : null;
  const wrong = [
    ...(others.length === 0 ? [] : [
      `${others.length} of its ${page.items.length} items no dead letter: ${
        others.slice(0, 3).map((item) => JSON.stringify(item)?.slice(0, 120))
          .join(", ")
      }`,
    ]),
    ...(page.cursor === null || typeof page.cursor === "string"
      ? []
      : [`a cursor ${JSON.stringify(page.cursor)?.slice(0, 60)}`]),
  ];
  return {
    letters,
    cursor,
    wrong: wrong.length === 0 ? null : wrong.join("; "),
  };
}

/** The state a resolution text leaves the intent in, or `null` if the text is not the specification's. */
function stateAfter(resolution: string): State | null {
  if (resolution === "nothing was sent, so the intent failed") return "failed";
  if (
    /^(last broadcast unknown|no broadcast on record|an earlier broadcast may have been sent|last broadcast sent as \S+|the store refused the failure \(.+\)), needs review$/
      .test(resolution)
  ) return "needs_review";
  const still = /^job dropped, intent still (created|authorized)$/.exec(
    resolution,
  );
  if (still) return still[1] as State;
  const already = /^job dropped, intent already (settled|failed|needs_review)$/
    .exec(resolution);
  if (already) return already[1] as State;
  return null;
}

interface CheckInput {
  readonly plans: readonly {
    id: string;
    initial: State;
    behaviour: Behaviour;
  }[];
  readonly finals: ReadonlyMap<string, IntentView>;
  readonly deadLetters: readonly DeadLetterView[];
  readonly jobs: ReadonlyMap<string, JobRecord>;
  readonly observed: { get(id: string): Observation[] | undefined };
  readonly stub: SignerStub;
  readonly kills: readonly KillWindow[];
  /** The stalls of the tool's own event loop, which the stub answers on. */
  readonly stalls: readonly Stall[];
  /** When the run started, by the tool's clock. */
  readonly started: number;
  /** The intents an operator resolved (or tried to), and to what. */
  readonly resolvedBy: ReadonlyMap<string, State>;
}

interface CheckResult {
  readonly violations: string[];
  /** Intents left where no job will touch them, allowed by at-least-once. */
  readonly orphans: string[];
  /** Overlaps at the signer its clock cannot show ({@linkcode unclearOverlap}). */
  readonly unclear: string[];
}

/** A state an intent's read saw, and when the read was sent and answered. */
export interface Observation {
  readonly state: State;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/**
 * The first move backwards among `seen` (in the order the reads were
 * sent), as `[from, to]`: a read answered before another was sent saw a
 * state the later one's cannot be reached from. Two reads that overlap
 * are not ordered: an intent's view is three store reads, and under
 * database faults any of them can wait on a connection, so a read sent
 * first can see a commit that a read sent after it, and answered before
 * it, did not (or the other way round).
 */
export function backwardMove(
  seen: readonly Observation[],
  reaches: (from: State, to: State) => boolean,
): [State, State] | undefined {
  for (let j = 1; j < seen.length; j++) {
    const to = seen[j]!;
    for (let i = 0; i < j; i++) {
      const from = seen[i]!;
      if (from.answeredAt < to.sentAt && !reaches(from.state, to.state)) {
        return [from.state, to.state];
      }
    }
  }
  return undefined;
}

/** Every check of the run; pure over what was collected. */
/** Whether `send` was in flight while its server was being killed. */
function spansKill(
  send: {
    readonly arrivedAt: number;
    readonly answeredAt: number | null;
    readonly instance?: number;
  },
  kills: readonly KillWindow[],
): boolean {
  return kills.some((kill) =>
    sameInstance(kill, send.instance) &&
    send.arrivedAt <= kill.to && (send.answeredAt ?? Infinity) >= kill.from
  );
}

/** What the signer stub's clock can tell of two sends that overlap there. */
export interface StubClock {
  /** The stalls of the tool's own event loop, which the stub answers on. */
  readonly stalls: readonly Stall[];
  /** The service's Sender timeout: it gives up on a send after it. */
  readonly senderTimeoutMs: number;
  /** The service's lease: another delivery may act once it lapsed. */
  readonly leaseMs: number;
}

/**
 * How long after a stall of the tool's loop a send it stamps may still
 * have arrived during the stall: the loop serves its backlog first.
 */
export const STALL_CATCH_UP_MS = 50;

/**
 * Why two sends that overlap at the signer stub, `b` arriving there while
 * `a` was unanswered, are no evidence that two deliveries sent at once, or
 * `undefined` when they are:
 * - `a` was held at the stub past the lease (answered that long after it
 *   arrived): its sender, or the stub, stood still that long. A paused
 *   process lets its lease lapse as a killed one does, and a lease with a
 *   TTL covers no longer pause; the one nonce keeps it one payment, which
 *   the double-spend check holds.
 * - `b` arrived in a stall of the tool's loop longer than the Sender's
 *   timeout, or within {@linkcode STALL_CATCH_UP_MS} after it, and `a` was
 *   unanswered when the stall began: both were stamped when the loop came
 *   back, and the service may have given up on `a` and rescued it while
 *   the loop stood still.
 */
export function unclearOverlap(
  a: { readonly arrivedAt: number; readonly answeredAt: number | null },
  b: { readonly arrivedAt: number },
  clock: StubClock,
): string | undefined {
  if (a.answeredAt !== null && a.answeredAt - a.arrivedAt > clock.leaseMs) {
    return `the first was held at the signer stub for ${
      formatDuration(Math.round(a.answeredAt - a.arrivedAt))
    }, past the ${formatDuration(clock.leaseMs)} lease`;
  }
  const stall = clock.stalls.find((w) =>
    w.to - w.from > clock.senderTimeoutMs &&
    (a.answeredAt ?? Infinity) >= w.from &&
    b.arrivedAt >= w.from && b.arrivedAt <= w.to + STALL_CATCH_UP_MS
  );
  if (stall !== undefined) {
    return `both reached the signer stub across a ${
      formatDuration(Math.round(stall.to - stall.from))
    } stall of the tool's own event loop, longer than the ${
      formatDuration(clock.senderTimeoutMs)
    } Sender timeout`;
  }
  return undefined;
}

/**
 * The first two of `sends` (ordered by arrival) that overlap at the signer
 * (I5), as their indexes, neither in flight at a kill (its lease died with
 * the process); every pair, not only neighbours, so a send that spans a
 * kill between two others does not hide their overlap. With `clock`, a
 * pair whose overlap the stub's clock cannot show ({@linkcode
 * unclearOverlap}) is passed, and said in `clock.unclear`.
 */
export function overlappingSends(
  sends: readonly {
    readonly arrivedAt: number;
    readonly answeredAt: number | null;
    readonly instance?: number;
  }[],
  kills: readonly KillWindow[],
  clock?: StubClock & { readonly unclear?: string[] },
): [number, number] | undefined {
  for (let j = 1; j < sends.length; j++) {
    const b = sends[j]!;
    if (spansKill(b, kills)) continue;
    for (let i = 0; i < j; i++) {
      const a = sends[i]!;
      if (b.arrivedAt < (a.answeredAt ?? Infinity) && !spansKill(a, kills)) {
        const why = clock === undefined
          ? undefined
          : unclearOverlap(a, b, clock);
        if (why === undefined) return [i, j];
        clock?.unclear?.push(
          `/send ${j + 1} arrived while /send ${
            i + 1
          } was in flight, but ${why}`,
        );
      }
    }
  }
  return undefined;
}

/** A worker line of a delivery (not a give-up) that settled on a confirmed tx. */
const SETTLED_LINE =
  /^worker\s+(pi_\w+)\/settle\s+#\d+\s+done\s+\(0x[0-9a-f]+ confirmed, intent settled\)(?: message \S+)?$/;

/**
 * The intent a service log `line` of server `generation` names as settled
 * by a delivery behind a lapsed write-ahead, or `undefined`: a delivery
 * (the queue's give-up says so first) that settled on a confirmed tx while
 * the intent's last `/send` before `at` was cut by a kill (unanswered when
 * the kill began, before the Sender's timeout could end it) and the line
 * is of a server started after that kill. That send was written ahead, and
 * nothing recorded its end nor sent since, so the write-ahead was still on
 * record: only the settle behind a lapsed write-ahead settles there. A
 * lower bound: a write-ahead whose send never left, or whose answer came
 * before the kill but was not recorded, is not counted.
 *
 * @param line A line of the service's log.
 * @param generation The server that wrote it: 1 before the first kill.
 * @param at When the line was read, by the tool's clock.
 * @param sendsOf The signer's record of an intent's `/send`s, in order.
 * @param kills Each kill's start and the next server's start.
 * @param senderTimeoutMs The service's `SENDER_TIMEOUT`.
 * @param instance With several instances, the one that wrote the line:
 *   then `generation` is that instance's, a kill counts only where it
 *   names the send's instance, and the line only if another instance wrote
 *   it or that one's next process.
 * @returns The intent's id, or `undefined`.
 *
 * @example A send the first kill cut, then a settle by the next server
 * ```ts
 * import assert from "node:assert/strict";
 * import { settledBehindCutSend } from "./crash.ts";
 *
 * const line =
 *   "worker  pi_0007/settle   #4  done         (0x1f confirmed, intent settled)";
 * // pi_0007's last /send arrived at 1000 and was never answered; the kill
 * // began at 1500 and the next server started at 2500.
 * const sends = () => [{ arrivedAt: 1000, answeredAt: null }];
 * const kills = [{ from: 1500, to: 2500 }];
 * assert.equal(
 *   settledBehindCutSend(line, 2, 3000, sends, kills, 10_000),
 *   "pi_0007",
 * );
 * // The server the kill ended did not log it.
 * assert.equal(
 *   settledBehindCutSend(line, 1, 1400, sends, kills, 10_000),
 *   undefined,
 * );
 * ```
 */
export function settledBehindCutSend(
  line: string,
  generation: number,
  at: number,
  sendsOf: (intentId: string) => readonly {
    readonly arrivedAt: number;
    readonly answeredAt: number | null;
    readonly instance?: number;
  }[],
  kills: readonly KillWindow[],
  senderTimeoutMs: number,
  instance?: number,
): string | undefined {
  const id = SETTLED_LINE.exec(line.trim())?.[1];
  if (id === undefined) return undefined;
  const last = sendsOf(id).filter((send) => send.arrivedAt <= at).at(-1);
  if (last === undefined) return undefined;
  // Kill k ends server k + 1 and starts server k + 2.
  const k = kills.findIndex((kill) =>
    sameInstance(kill, last.instance) &&
    last.arrivedAt <= kill.to && kill.from < last.arrivedAt + senderTimeoutMs &&
    (last.answeredAt === null || last.answeredAt >= kill.from)
  );
  if (k === -1) return undefined;
  const kill = kills[k]!;
  if (instance === undefined || kill.instance === undefined) {
    return generation >= k + 2 ? id : undefined;
  }
  return at > kill.from &&
      (instance !== kill.instance || generation > kill.generation!)
    ? id
    : undefined;
}

/**
 * Whether a generic job's deliveries name their message (`messageId`, as
 * docs/queues.md asks of a bridge): those of an intent with an even
 * number do, the others do not, so both kinds of bridge are run.
 */
export function namesMessage(intentId: string): boolean {
  return Number(/\d+$/.exec(intentId)?.[0] ?? 1) % 2 === 0;
}

/**
 * When nothing may be sent for an intent after the queue's give-up of a
 * message was acked at `ackedAt`: until the job is published again (the
 * caller ends it then), unless the give-up dropped the job of an
 * authorized intent on the generic route with deliveries that name no
 * message (`namedMessage` false; docs/queues.md: not covered by the
 * give-up's marks, which a delivery's `messageId` carries), so only
 * the drop's lease holds a delivery of it off, for `LEASE` from the drop's
 * write; that write came after the give-up's first copy was sent
 * (`firstSentAt`, the first try of this give-up, whose drop may have
 * landed with its answer lost), so the quiet ends by `firstSentAt` +
 * `LEASE` at the earliest (`CLOCK_SKEW` is 0 here). A give-up held up past
 * its lease leaves a delivery of the message free to send, as designed.
 */
export function quietAfterGiveUp(
  lane: JobRecord["lane"],
  attempts: readonly Attempt[],
  firstSentAt: number,
  ackedAt: number,
  namedMessage = false,
): { from: number; to: number } {
  const dropped = attempts.some((a) =>
    a.kind === "answer" &&
    a.body.resolution === "job dropped, intent still authorized"
  );
  return {
    from: ackedAt,
    to: lane === "generic" && !namedMessage && dropped
      ? firstSentAt + LEASE_MS
      : Infinity,
  };
}

/**
 * How many times each server process fetched Google's keys, and how long
 * it lived: process g runs from the end of kill g - 1 (or `started`) to the
 * end of kill g (or `ended`), and the next starts only after; a fetch at
 * that kill's end or before it is the dying process's.
 */
export function fetchesByGeneration(
  fetchedAt: readonly number[],
  kills: readonly { readonly from: number; readonly to: number }[],
  started: number,
  ended: number,
): { generation: number; fetches: number; lifeMs: number }[] {
  const ends = [...kills.map((kill) => kill.to), ended];
  return ends.map((to, i) => {
    const from = i === 0 ? started : ends[i - 1]!;
    return {
      generation: i + 1,
      fetches: fetchedAt.filter((at) =>
        (i === 0 ? at >= from : at > from) &&
        (at <= to || i === ends.length - 1)
      ).length,
      lifeMs: to - from,
    };
  });
}

/**
 * How many answers, at most, the killer waits for before each kill (a
 * seeded share of it, and at least 4): the answers a run expects (three an
 * intent) spread over the kills and the stretch after the last. With
 * several instances the jobs do not wait for a restart, so each kill's
 * share is split among them, or the last kills would come after every job
 * has ended.
 *
 * @example
 * ```ts
 * killSegment({ intents: 60, kills: 3, instances: 1 }); // 45
 * killSegment({ intents: 60, kills: 3, instances: 2 }); // 22
 * ```
 */
export function killSegment(
  options: Pick<CrashTestOptions, "intents" | "kills" | "instances">,
): number {
  const expected = options.intents * 3;
  return Math.max(
    8,
    Math.floor(expected / (options.kills + 1) / options.instances),
  );
}

/**
 * How many times one server process that lived `lifeMs` may fetch Google's
 * keys: once at its first push, then each of its two verifiers at most once
 * a refetch interval, for a kid it does not know.
 *
 * @example
 * ```ts
 * keyFetchesAllowed(0); // 3
 * ```
 */
export function keyFetchesAllowed(lifeMs: number): number {
  return 1 + 2 * (1 + Math.floor(lifeMs / JWKS_REFETCH_INTERVAL_MS));
}

/**
 * With several instances at once, whose fetches of Google's keys the
 * stand-in cannot tell apart: how many server processes ran, and how many
 * fetches they may make together, each instance's processes dated by its
 * own kills (a kill of another ended none of its).
 *
 * @example Two instances, instance 0 killed once
 * ```ts
 * fleetKeyFetchesAllowed(
 *   [{ from: 100, to: 120, instance: 0, generation: 1 }],
 *   2,
 *   0,
 *   1000,
 * ); // { processes: 3, allowed: 9 }
 * ```
 */
export function fleetKeyFetchesAllowed(
  kills: readonly KillWindow[],
  instances: number,
  started: number,
  ended: number,
): { processes: number; allowed: number } {
  const lives = Array.from(
    { length: instances },
    (_, index) =>
      fetchesByGeneration(
        [],
        kills.filter((kill) => kill.instance === index),
        started,
        ended,
      ),
  ).flat();
  return {
    processes: lives.length,
    allowed: lives.reduce((n, life) => n + keyFetchesAllowed(life.lifeMs), 0),
  };
}

function check(input: CheckInput): CheckResult {
  const violations: string[] = [];
  const orphans: string[] = [];
  const unclear: string[] = [];
  const flag = (id: string, text: string) => violations.push(`${id}: ${text}`);

  for (const id of input.stub.strangers) {
    flag(id, "the signer got a /send for an intent it was never told about");
  }

  for (const plan of input.plans) {
    const { id } = plan;
    // The operator's move out of review, where it made one.
    const operatorTo = input.resolvedBy.get(id);
    const reaches = (from: State, to: State) =>
      REACHABLE[from].includes(to) ||
      (operatorTo !== undefined && REACHABLE[from].includes("needs_review") &&
        REACHABLE[operatorTo].includes(to));
    const view = input.finals.get(id);
    const job = input.jobs.get(id)!;
    const sends = input.stub.sends.get(id) ?? [];
    if (!view) {
      flag(id, "GET /v1/intents/:id found no intent");
      continue;
    }
    const { intent } = view;
    if (!job.ended) flag(id, `its job never ended (delivery ${job.delivery})`);

    // I3: forward only; created never moves.
    const samples = input.observed.get(id) ?? [];
    const moved = backwardMove([
      { state: plan.initial, sentAt: -Infinity, answeredAt: -Infinity },
      ...samples,
      { state: intent.state, sentAt: Infinity, answeredAt: Infinity },
    ], reaches);
    if (moved !== undefined) {
      const seen = [plan.initial, ...samples.map((o) => o.state), intent.state];
      flag(
        id,
        `I3: moved ${moved[0]} → ${moved[1]} (seen ${seen.join(" → ")})`,
      );
    }
    if (plan.initial === "created" && sends.length > 0) {
      flag(id, `I3: created, yet the signer got ${sends.length} /send`);
    }

    // I1 and I2.
    if (intent.state === "failed") {
      // An operator fails a payment in review on the chain's word (here:
      // the signer's, that nothing may have left), whatever the record says.
      if (
        operatorTo !== "failed" && intent.lastBroadcast?.outcome !== "not_sent"
      ) {
        flag(
          id,
          `I1: failed with last broadcast ${
            intent.lastBroadcast?.outcome ?? "none"
          }`,
        );
      }
      // The relayer fails a payment on its own record only when no send
      // may have left (a refusal without "not sent" counts as one); an
      // operator, on the chain's word (the stub's: no tx of it there).
      if (
        operatorTo === "failed"
          ? input.stub.onChain(id)
          : input.stub.mayHaveLeft(id, input.kills)
      ) {
        flag(
          id,
          `I1: failed, but the signer says a send may have left (${
            sends.map((s) =>
              `${s.status ?? "no answer"}${s.notSent ? " notSent" : ""}`
            ).join(", ")
          })`,
        );
      }
    }
    // I2, and the other half of a resolution: a hold its state contradicts.
    const wrongHold = holdAgainstState(intent.state, intent.hold);
    if (wrongHold !== null) flag(id, `I2: ${wrongHold}`);

    // I6: nothing sent behind a voided hold; settled only when captured and confirmed.
    for (const send of sends) {
      if (send.state !== "settling" || send.hold !== "pending") {
        flag(
          id,
          `I6: a /send carried state ${String(send.state)} and hold ${
            String(send.hold)
          }`,
        );
      }
    }
    // One payment, one nonce: once a send may have left, every later send
    // for the intent is a rescue (replace: same nonce); a fresh one could
    // pay twice. And no two sends overlap at the signer (I5), unless one
    // was in flight at a kill (its lease died with the process).
    const ordered = [...sends].sort((a, b) => a.arrivedAt - b.arrivedAt);
    let mayHaveLeft = false;
    for (const [i, send] of ordered.entries()) {
      if (mayHaveLeft && !send.replace) {
        flag(
          id,
          `double spend: /send ${
            i + 1
          } of ${ordered.length} is fresh (replace false) after one that may have left`,
        );
        break;
      }
      if (
        send.status === null || !send.notSent || spansKill(send, input.kills)
      ) {
        mayHaveLeft = true;
      }
    }
    const passed: string[] = [];
    const overlap = overlappingSends(ordered, input.kills, {
      stalls: input.stalls,
      senderTimeoutMs: SENDER_TIMEOUT_MS,
      leaseMs: LEASE_MS,
      unclear: passed,
    });
    unclear.push(...passed.map((text) => `${id}: ${text}`));
    if (overlap !== undefined) {
      const [i, j] = overlap;
      const at = (t: number | null) =>
        t === null ? "never" : `${((t - input.started) / 1000).toFixed(3)}s`;
      const of = (n: number) => {
        const send = ordered[n]!;
        return `/send ${n + 1} (${
          send.instance === undefined ? "" : `instance ${send.instance + 1}, `
        }arrived ${at(send.arrivedAt)}, its body ${at(send.bodyAt)}, answered ${
          at(send.answeredAt)
        })`;
      };
      flag(id, `I5: ${of(j)} arrived while ${of(i)} was in flight`);
    }
    if (intent.state === "settled") {
      if (intent.hold !== "captured") {
        flag(id, `I6: settled with hold ${intent.hold ?? "none"}`);
      }
      // Settled on a tx the signer confirmed: the last one, or an earlier
      // one that mined after a rescue replaced it on record.
      const hashes = intent.txHashes ?? [];
      if (!hashes.some((hash) => input.stub.confirmed.has(hash))) {
        flag(
          id,
          `settled, but the signer confirmed none of its txs (${
            hashes.join(", ") || "none on record"
          })`,
        );
      }
    }

    // Nothing stuck where no job will touch it.
    if (job.ended) {
      if (intent.state === "settling") {
        if (job.lostCopyAfterAck) orphans.push(`${id} (settling)`);
        else flag(id, "left settling after its job ended");
      }
      if (intent.state === "authorized") {
        const dropped = view.deadLetter?.resolution ===
          "job dropped, intent still authorized";
        if (!dropped) {
          if (job.lostCopyAfterAck) orphans.push(`${id} (authorized)`);
          else {
            flag(
              id,
              "left authorized after its job ended, without a dead letter saying so",
            );
          }
        }
      }
      if (intent.state === "created" && view.deadLetter === null) {
        if (job.lostCopyAfterAck) orphans.push(`${id} (created)`);
        else flag(id, "left created after its job ended, with no dead letter");
      }
      const final = job.final;
      if (
        final?.outcome === "done" &&
        final.reason !==
          "the queue repeated its give-up for a message already resolved: nothing changed"
      ) {
        // A give-up that found the payment paid says so after its own words.
        const reason = (final.reason ?? "").replace(
          /^the queue gave up after \d+ deliver(y|ies): /,
          "",
        );
        const settledBy = /^\S+ confirmed, intent settled$/.test(reason);
        const already = /^intent already (settled|failed|needs_review)$/.exec(
          reason,
        );
        if (!settledBy && !already) {
          flag(id, `its job ended done with reason ${JSON.stringify(reason)}`);
        } else if (
          !reaches(settledBy ? "settled" : already![1] as State, intent.state)
        ) {
          flag(
            id,
            `its job ended with ${
              JSON.stringify(reason)
            } but it is ${intent.state}`,
          );
        }
      }
    }

    // Nothing sent once the queue's give-up was acked, until the job is
    // published again: not by a delivery it left in flight, a late copy of
    // its message, nor a repeat of the give-up.
    for (const { from, to } of job.quiet) {
      const late = sends.find((send) =>
        send.arrivedAt > from && send.arrivedAt < to
      );
      if (late !== undefined) {
        flag(
          id,
          `a /send arrived ${
            Math.round(late.arrivedAt - from)
          }ms after the queue's give-up was acked, with no job published since`,
        );
        break;
      }
    }

    // Every poison answer left a dead letter (one before the last
    // redrive's publication was removed by that redrive).
    if (
      job.poisoned.some((p) => p.generation >= job.redrivenGeneration) &&
      view.deadLetter === null
    ) {
      flag(id, "its job answered poison, but it has no dead letter");
    }
  }

  // Dead letters.
  const seenJobs = new Set<string>();
  const byIntent = new Map(input.plans.map((p) => [p.id, p]));
  for (const letter of input.deadLetters) {
    const id = letter.intentId;
    if (seenJobs.has(letter.jobId)) {
      flag(id, `dead letter ${letter.jobId} listed twice`);
    }
    seenJobs.add(letter.jobId);
    const plan = byIntent.get(id);
    const view = input.finals.get(id);
    if (!plan || !view) {
      flag(id, `dead letter ${letter.jobId} for an unknown intent`);
      continue;
    }
    if (letter.jobId !== `${id}/settle`) {
      flag(id, `dead letter job id ${letter.jobId} is not ${id}/settle`);
    }
    const job = input.jobs.get(id)!;
    const poisonedThere = job.poisoned.some((p) =>
      p.delivery === letter.deliveries
    );
    // Pushes without deliveryAttempt are numbered by the service's count of
    // their message: at most the pushes of it that were sent.
    const counted = Math.max(0, ...job.countedPushes.values());
    if (
      !poisonedThere && !job.lost.has(letter.deliveries) &&
      !job.unread.has(letter.deliveries) && letter.deliveries > counted
    ) {
      flag(
        id,
        `dead letter at delivery ${letter.deliveries}, which neither answered poison, nor was acked by Pub/Sub's bodiless 204, nor died with the server or under a store failure${
          counted === 0
            ? ""
            : `, nor is within the ${counted} pushes of a message sent without deliveryAttempt (the service's own count)`
        }`,
      );
    }
    const after = stateAfter(letter.resolution);
    if (after === null) {
      flag(
        id,
        `dead letter resolution ${
          JSON.stringify(letter.resolution)
        } is not the specification's`,
      );
    } else if (
      !REACHABLE[after].includes(view.intent.state) &&
      !(input.resolvedBy.get(id) !== undefined &&
        REACHABLE[after].includes("needs_review") &&
        input.resolvedBy.get(id) === view.intent.state)
    ) {
      flag(
        id,
        `dead letter says ${
          JSON.stringify(letter.resolution)
        } but the intent is ${view.intent.state}`,
      );
    }
    if (letter.cause !== "declared" && letter.cause !== "exhausted") {
      flag(id, `dead letter cause ${JSON.stringify(letter.cause)}`);
    }
    if (
      letter.cause === "declared" &&
      !(input.stub.sends.get(id) ?? []).some((s) => s.poison) &&
      !/hold is voided/.test(letter.lastError)
    ) {
      flag(
        id,
        "dead letter says declared, but the signer never declared poison",
      );
    }
    if (view.deadLetter?.jobId !== letter.jobId) {
      flag(id, "the intent's view does not show the listed dead letter");
    }
  }
  for (const plan of input.plans) {
    if (
      input.finals.get(plan.id)?.deadLetter &&
      !seenJobs.has(`${plan.id}/settle`)
    ) {
      flag(plan.id, "has a dead letter the list does not show");
    }
  }
  return { violations, orphans, unclear };
}

// ---------------------------------------------------------------- the run

/** The policy of the run: fast, with the rescue window computed, not guessed. */
function fastPolicy() {
  const policy = definePolicy({
    maxDeliveries: 6,
    baseMs: 20,
    capMs: 200,
    jitter: "equal",
  });
  // The service refuses a STUCK_AFTER longer than the guaranteed window.
  const stuckAfterMs = rescueWindow(policy);
  return definePolicy({ ...policy, stuckAfterMs });
}

const SENDER_TIMEOUT_MS = 200;
/** A dead letter's last error that is the store's, not the signer's. */
const STORE_ERROR =
  /PostgreSQL|ECONNRESET|ECONNREFUSED|EPIPE|CONNECTION_|terminating connection|the database system/;
/**
 * How long a delivery may take before the queue calls it hung: a store
 * call waits at most `connectionWaitMs` (10 s) and a delivery makes a few.
 */
const DELIVERY_BOUND_MS = 30_000;
/** How long the service has to be ready again, and deliver, after the database is back. */
const RECOVERY_BOUND_MS = 5_000;
const LEASE_MS = 500;

/**
 * How long the operator goes on, once every job has ended, with the
 * payments in review that have nothing on the chain (a 409
 * `send-in-flight` waits a lease).
 */
const OPERATOR_FINISH_MS = 6 * LEASE_MS;
/**
 * How long the operator reads a payment again after the store failed under
 * its resolution, until a read is answered (a `cancel` fault lasts 3 s).
 */
const REREAD_MS = 4_000;
const DUPLICATE_RATE = 1 / 12;
const MAX_DELIVERIES_PER_JOB = 500;
/** How many publications of a job have a queue that gives up (at a drawn count). */
const GIVE_UP_RATE = 0.45;
/** How many publications go through QStash's routes. */
const QSTASH_RATE = 0.4;
/** How many go through Pub/Sub's push routes (the rest: the generic route). */
const PUBSUB_RATE = 0.4;

/** The lane drawn by `x` in [0, 1): QStash, Pub/Sub, or the generic route. */
function laneOf(x: number): Lane {
  return x < QSTASH_RATE
    ? "qstash"
    : x < QSTASH_RATE + PUBSUB_RATE
    ? "pubsub"
    : "generic";
}
/**
 * How many acked QStash give-ups are followed by a late copy of their
 * message (all that dropped the job of an authorized intent).
 */
const LATE_COPY_RATE = 0.5;
/**
 * How many QStash and Pub/Sub publications their queue gives up on with
 * their first delivery in flight (QStash timed it out; Pub/Sub counted
 * pushes the service never answered, while it was down).
 */
const EARLY_GIVE_UP = 0.25;
/** How many answered requests are sent again byte for byte (a replay). */
const REPLAY_RATE = 1 / 25;
/** The base URL QStash signs (its `sub`); the service is reached on loopback. */
const PUBLIC_URL = "https://relayer.crash.test";
/** The account Pub/Sub pushes as, in Google's token's `email`. */
const PUBSUB_ACCOUNT = "crash-pusher@crash-test.iam.gserviceaccount.com";
/** The jobs' push subscription, as a push names it. */
const PUBSUB_PROJECT = "crash-test";
const PUBSUB_SUBSCRIPTION = "relayer-jobs";
/**
 * Pub/Sub's dead-letter policy: at least `MAX_DELIVERIES` (the service
 * refuses fewer). Pub/Sub counts pushes the service never answered (it
 * was down, a push timed out), so its give-up comes at any count the
 * service sees, drawn as for the other queues.
 */
const PUBSUB_MAX_DELIVERY_ATTEMPTS = 7;
/**
 * How many Pub/Sub publications go through a second push subscription of
 * the topic, one without a dead-letter policy: Google sends no
 * `deliveryAttempt` then, so the service counts the pushes itself, by
 * subscription and message id, and poisons at `MAX_DELIVERIES` on its own
 * count; Pub/Sub never gives up (it pushes until the message's retention
 * runs out).
 */
const PUBSUB_COUNTED_RATE = 0.35;
/** That subscription, as its pushes name it. */
const PUBSUB_COUNTED_SUBSCRIPTION = "relayer-jobs-counted";
/**
 * How many pushes of one message without `deliveryAttempt` may go unacked,
 * in `MAX_DELIVERIES`: the service's own count poisons the job at
 * `MAX_DELIVERIES`, and only busy answers (a lease a killed process left,
 * copies racing the count) and refused pushes (an expired token) come on
 * past it.
 */
const COUNTED_PUSH_BOUND = 4;
/**
 * When Google lists its next key beside the first (and its new tokens are
 * signed by it), and when it withdraws the first (its tokens expired), as
 * shares of the answers the run expects (three a job).
 */
const ROTATE_AT = 0.15;
const WITHDRAW_AT = 0.35;
/**
 * Between the two, how many pushes still carry a token of the first key
 * (Google reuses a token for up to an hour): each must be accepted.
 */
const OLD_TOKEN_RATE = 0.3;
/**
 * Once the first key is withdrawn, how many pushes come first with an
 * expired token of it: each must be 401, and Pub/Sub pushes again (the
 * refused push counts as an attempt).
 */
const STALE_TOKEN_RATE = 0.08;
/**
 * Once the next key is listed, how many pushes also come with a token of a
 * key Google never listed (a made-up `kid`): each must be 401, and costs
 * at most the verifier's rate-limited refetch.
 */
const FORGED_KID_RATE = 1 / 25;
/** How often the operator lists the dead letters to redrive some. */
const REDRIVE_EVERY_MS = 60;
/** How many of the listed letters whose job is idle a pass redrives. */
const REDRIVE_RATE = 0.35;
/** How many redrive rounds send two redrives of the letter at once. */
const REDRIVE_PAIR_RATE = 0.35;
/** Redrive rounds per job, at most (each may publish it again). */
const MAX_REDRIVES = 2;
/** What QStash's API does with a publish: down (503) or taken with its answer lost, sometimes. */
const QSTASH_DOWN_RATE = 0.1;
const QSTASH_LOST_ANSWER_RATE = 0.1;

/**
 * Runs the crash test in a temp dir of its own (and, with `--store
 * postgres`, on a PostgreSQL server of its own); both are removed whatever
 * happens.
 *
 * @param options The command line.
 * @returns The process exit code: 0 if every check held and every kill
 * happened, 1 otherwise.
 * @throws {CheckError} If the temp dir cannot be made or PostgreSQL does
 * not start.
 */
export async function crashTest(options: CrashTestOptions): Promise<number> {
  let dir: string;
  try {
    dir = await Deno.makeTempDir({ prefix: "relayer_crash_" });
  } catch (error) {
    throw new CheckError(
      `could not make a temp dir (${
        (error as Error).message
      }): point TMPDIR at a writable folder`,
      { cause: error },
    );
  }
  // The disk fault fills the SQLite file's disk: a tmpfs of its own, so
  // that it fills this run's folder alone.
  let mounted = false;
  if (options.dbFaults.includes("disk")) {
    const mount = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", `size=${DISK_FAULT_SIZE}`, "tmpfs", dir],
      stdout: "null",
      stderr: "piped",
    }).output().catch((error: Error) => ({
      success: false,
      stderr: new TextEncoder().encode(error.message),
    }));
    if (!mount.success) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw new CheckError(
        `--db-faults disk mounts a tmpfs on the run's folder, and mount refused (${
          new TextDecoder().decode(mount.stderr).trim()
        }): run it as root, where mount is allowed`,
      );
    }
    mounted = true;
  }
  let database: OwnedPostgresServer | null = null;
  let pooler: OwnedPgBouncer | null = null;
  let databaseUrl: string | null = null;
  let google: GoogleStandIn | null = null;
  try {
    // Google's OIDC issuer for the Pub/Sub lane: its keys are served where
    // the service fetches them in production (see tools/_google_stand_in.ts).
    // Its next key (listed mid-run, then the first withdrawn), and a key
    // Google never lists (a forger's made-up kid).
    const [issuer, next, forger] = await Promise.all([
      googleIssuer("crash-key-1"),
      googleIssuer("crash-key-2"),
      googleIssuer("crash-made-up-key"),
    ]);
    try {
      google = await startGoogleStandIn(issuer.jwks);
    } catch (error) {
      throw new CheckError(
        `Google's key endpoint could not be stood in for (${
          errorLine((error as Error).message)
        }): the Pub/Sub lane needs openssl on the PATH (Debian's openssl package)`,
        { cause: error },
      );
    }
    if (options.store !== "kv") {
      // Its own server, stopped below (and by its watchdog if this process dies).
      try {
        // Synchronous commits when the database is to crash: a commit it
        // acknowledged must survive its restart, as on a managed server.
        database = await startPostgres({
          durable: outagesIn(options.dbFaults),
        });
      } catch (error) {
        throw new CheckError(
          `PostgreSQL did not start for --store postgres (${
            errorLine((error as Error).message)
          }): check that the server is installed (Debian's postgresql package) and may write under TMPDIR, or run with --store kv`,
          { cause: error },
        );
      }
      databaseUrl = database.url;
    }
    if (options.store === "pgbouncer") {
      try {
        pooler = await startPgBouncer(database!, { mode: "transaction" });
      } catch (error) {
        throw new CheckError(
          `PgBouncer did not start for --store pgbouncer (${
            errorLine((error as Error).message)
          }): check that it is installed (Debian's pgbouncer package), or run with --store postgres`,
          { cause: error },
        );
      }
      // What a pooler in transaction mode needs (docs/postgres.md).
      databaseUrl = `${pooler.url}?prepare=false`;
    }
    return await runCrashTest(options, {
      dir,
      databaseUrl,
      database,
      google: { issuer, next, forger, standIn: google },
    });
  } finally {
    await google?.stop();
    await pooler?.stop();
    await database?.stop();
    if (mounted) {
      await new Deno.Command("umount", { args: ["-l", dir], stderr: "null" })
        .output().catch(() => {});
    }
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * The run itself: the signer stub, the service, the queue, the kills, then
 * the checks and the summary.
 *
 * @param options The command line.
 * @param where The run's temp dir, the database's URL with `--store
 * postgres`, and Google's issuer (its first key, the next one it rotates
 * to, and a forger's) with the stand-in serving its keys.
 * @returns The process exit code.
 */
async function runCrashTest(
  options: CrashTestOptions,
  where: {
    dir: string;
    databaseUrl: string | null;
    database: OwnedPostgresServer | null;
    google: {
      issuer: GoogleIssuer;
      next: GoogleIssuer;
      forger: GoogleIssuer;
      standIn: GoogleStandIn;
    };
  },
): Promise<number> {
  const { dir, databaseUrl, database, google } = where;
  const outages = outagesIn(options.dbFaults);
  const started = now();
  const trails = new Trails(started);
  const deadline = started + options.deadlineS * 1000;
  const seeds = mulberry32(options.seed);
  const behaviourRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  const stubRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  const queueRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  const killRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  // Drawn last: the other streams are as they were before the redrives.
  const redriveRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  // Drawn after: Pub/Sub's subscriptions without a dead-letter policy and
  // Google's key rotation leave the other streams as they were.
  const pubsubRandom = mulberry32(Math.floor(seeds() * 2 ** 32));
  // Drawn after: which instance each request goes to, which one a kill hits.
  const fleetRandom = mulberry32(Math.floor(seeds() * 2 ** 32));

  const policy = fastPolicy();
  const secret = `crash-secret-${crypto.randomUUID()}`;
  const opsToken = `crash-ops-${crypto.randomUUID()}`;
  const sign = hmacSigner(secret);
  const qstashSecret = `crash-qstash-${crypto.randomUUID()}`;
  let operatorDone = false;
  /** Give-ups and late copies in flight now (a kill may wait for one). */
  let givingUpNow = 0;
  /** Redrives in flight now (a kill may wait for one). */
  let redrivingNow = 0;
  /** The redrive round under way for an intent: what QStash took meanwhile. */
  const redriveRoundsNow = new Map<string, { publications: Publication[] }>();
  /** Letters (`<jobId>@<version>`) whose job QStash took. */
  const publishedLetters = new Set<string>();
  /** Publications the redrives made, being delivered. */
  const redriven = new Set<Promise<void>>();
  /** Whether every first job (and the tool's own re-publications) ended. */
  let jobsDone = false;
  const qstashToken = `crash-qstash-token-${crypto.randomUUID()}`;
  // QStash's publish API: the service publishes redriven jobs there
  // (QSTASH_TOKEN, QSTASH_URL), and each message taken comes back to it as
  // QStash's deliveries, once the redrive round that made it is over.
  const qstash: QStashStandIn = startQStashStandIn({
    token: qstashToken,
    fate: () => {
      const x = redriveRandom();
      return x < QSTASH_DOWN_RATE
        ? "down"
        : x < QSTASH_DOWN_RATE + QSTASH_LOST_ANSWER_RATE
        ? "lose-answer"
        : "take";
    },
    latencyMs: () => 5 + Math.floor(redriveRandom() * 35),
    observe: ({ fate, body, deduplicationId, messageId }) => {
      let intentId = "";
      try {
        intentId = String(JSON.parse(body).intentId);
      } catch {
        // not a job: onPublish reports it
      }
      trails.add(
        intentId,
        `qstash   ${
          fate === "deduplicated"
            ? `dropped a repeat of deduplication id ${
              deduplicationId?.slice(0, 12)
            }… (202 ${messageId})`
            : fate === "down"
            ? "down (503), took nothing"
            : `took ${messageId}${
              fate === "lose-answer" ? ", answer lost" : ""
            } (deduplication id ${deduplicationId?.slice(0, 12)}…)`
        }`,
      );
    },
    onPublish: (publication) => {
      let job: { intentId?: unknown; kind?: unknown } = {};
      try {
        job = JSON.parse(publication.body);
      } catch {
        // reported below
      }
      const what = `QStash took ${
        publication.body.slice(0, 120)
      } for ${publication.url}`;
      if (
        publication.url !== `${PUBLIC_URL}/v1/qstash` ||
        publication.failureCallback !== `${PUBLIC_URL}/v1/qstash/failed` ||
        publication.retries !== String(policy.maxDeliveries - 1) ||
        Object.keys(job).length !== 2 || job.kind !== "settle"
      ) {
        unexpected.push(
          `${what} (retries ${publication.retries}, failure callback ${publication.failureCallback}): not the job, destination, retries and callback a redrive publishes`,
        );
      }
      const round = redriveRoundsNow.get(String(job.intentId));
      if (round === undefined) {
        unexpected.push(`${what}, which no redrive under way asked for`);
      } else round.publications.push(publication);
    },
  });

  const stub = new SignerStub(stubRandom);
  // The stub answers on the tool's own loop: its stalls blur the stub's clock.
  const loop = new LoopWatch();
  loop.start();
  const signer = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    stub.handler,
  );

  const signerBase = `http://127.0.0.1:${signer.addr.port}`;
  let failure: Error | null = null;
  const failed = deferred();
  const fail = (error: Error) => {
    failure ??= error;
    failed.resolve();
  };
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(Deno.env.toObject())) {
    // Every setting the service reads is the run's, none the caller's shell's.
    if (!SETTINGS.has(name) && !PROXY_SETTINGS.includes(name)) {
      env[name] = value;
    }
  }
  // Pub/Sub's own retry policy, as the service is told it: the least
  // minimum backoff whose guaranteed window covers STUCK_AFTER.
  const pubsubMinBackoffMs = Math.ceil(
    policy.stuckAfterMs / (policy.maxDeliveries - 1),
  );
  const pubsubMaxBackoffMs = policy.capMs;
  Object.assign(env, {
    ...google.standIn.env,
    // Deno's own update check would go through the proxy too (and be
    // refused there, as any host but Google's key endpoint is).
    DENO_NO_UPDATE_CHECK: "1",
    PUBSUB_AUDIENCE: `${PUBLIC_URL}/v1/pubsub`,
    PUBSUB_DEAD_LETTER_AUDIENCE: `${PUBLIC_URL}/v1/pubsub/dead-letter`,
    PUBSUB_SERVICE_ACCOUNT: PUBSUB_ACCOUNT,
    PUBSUB_MAX_DELIVERY_ATTEMPTS: String(PUBSUB_MAX_DELIVERY_ATTEMPTS),
    PUBSUB_MIN_BACKOFF: `${pubsubMinBackoffMs}ms`,
    PUBSUB_MAX_BACKOFF: `${pubsubMaxBackoffMs}ms`,
    NO_COLOR: "1",
    SENDER_URL: `http://127.0.0.1:${signer.addr.port}`,
    ...(databaseUrl !== null
      ? { DATABASE_URL: databaseUrl }
      : { KV_PATH: `${dir}/relayer.kv` }),
    WEBHOOK_SECRET: secret,
    QSTASH_TOKEN: qstashToken,
    QSTASH_URL: qstash.url,
    QSTASH_CURRENT_SIGNING_KEY: qstashSecret,
    QSTASH_NEXT_SIGNING_KEY: `${qstashSecret}-next`,
    PUBLIC_URL,
    OPS_TOKEN: opsToken,
    MAX_DELIVERIES: String(policy.maxDeliveries),
    BASE: `${policy.baseMs}ms`,
    CAP: `${policy.capMs}ms`,
    JITTER: policy.jitter,
    STUCK_AFTER: `${policy.stuckAfterMs}ms`,
    SENDER_TIMEOUT: `${SENDER_TIMEOUT_MS}ms`,
    LEASE: `${LEASE_MS}ms`,
    CLOCK_SKEW: "0ms", // every process here reads one clock
  });
  // A start that a database fault cut is started again, as a platform
  // starts again a process that exits at start.
  // The instances: one service process each, all on the one store. With
  // several, each reaches the signer under a prefix of its own, so that the
  // checks know whose sends a kill cut.
  const several = options.instances > 1;
  const servers = Array.from({ length: options.instances }, (_, index) => {
    const server: ServerProcess = new ServerProcess(
      ROOT,
      dir,
      several
        ? { ...env, SENDER_URL: instanceSenderUrl(signerBase, index) }
        : env,
      fail,
      (exit, tries) => {
        const again = startAgain(exit, outages, tries);
        if (again) {
          trails.everyone(
            `server ${server.tag}${server.generation} refused to start (${
              exit.stderr.join(" ").trim().slice(0, 160)
            }): started again (try ${tries + 1} of ${START_TRIES})`,
          );
        }
        return again;
      },
    );
    if (several) server.tag = `${index + 1}.`;
    server.metFault = (startedAt) => startMetFault(stats.dbFaults, startedAt);
    server.onLine = (line, generation) => {
      if (STORE_OWN_FAULT.test(line)) {
        unexpected.push(
          `server ${server.tag}${generation} logged: ${
            line.trim().slice(0, 240)
          }`,
        );
      }
      // The intents it names, and those whose txs it names (a receipt's failure).
      const ids = new Set(line.match(/\bpi_\w+/g) ?? []);
      for (const hash of line.match(/\b0x[0-9a-f]+\b/g) ?? []) {
        const entry = stub.hashes.get(hash);
        if (entry !== undefined) ids.add(entry.intentId);
      }
      for (const id of ids) {
        trails.add(
          id,
          `log[${server.tag}${generation}] ${line.trim().slice(0, 220)}`,
        );
      }
      const behind = settledBehindCutSend(
        line,
        generation,
        now(),
        (id) => stub.sends.get(id) ?? [],
        stats.kills,
        SENDER_TIMEOUT_MS,
        several ? index : undefined,
      );
      if (behind !== undefined) stats.settledBehindCut.add(behind);
    };
    return server;
  });
  /** Resolves once a server is up (with several instances, any). */
  const waitUp = (): Promise<void> =>
    several
      ? Promise.race(servers.map((server) => server.waitUp()))
      : servers[0]!.waitUp();
  /**
   * Where the queue sends a request: the one server, or a live instance
   * drawn by the seed, one not in `avoid` where there is one (the other
   * copy sent at once, the delivery a give-up races).
   */
  const pick = (avoid?: ReadonlySet<ServerProcess>): ServerProcess =>
    several ? pickInstance(servers, fleetRandom, avoid) : servers[0]!;
  /** How many starts were tried again after a refusal, on every instance. */
  const refusals = () =>
    servers.reduce((n, server) => n + server.refusals.length, 0);
  /**
   * With several instances, how the queue spread its work: requests by
   * instance, deliveries sent twice at once and those whose copies went to
   * two instances, give-ups that raced their delivery and those that did
   * it from another instance.
   */
  const spread = {
    requests: servers.map(() => 0),
    pairs: 0,
    pairsApart: 0,
    races: 0,
    racesApart: 0,
  };
  /** Answers since the last kill's restart, on every server: the killer's budget. */
  let answeredSinceStart = 0;

  const stats: Stats = {
    deliveries: 0,
    requests: 0,
    duplicates: 0,
    lostRequests: 0,
    statuses: new Map(),
    restarts: 0,
    kills: [],
    samples: 0,
    giveUps: 0,
    giveUpsInFlight: 0,
    giveUpRepeats: 0,
    republished: 0,
    heldUp: 0,
    qstashJobs: 0,
    pubsubJobs: 0,
    lateCopies: 0,
    pubsubLateCopies: 0,
    deadLetterPushes: 0,
    misdirected: 0,
    pubsubCounted: 0,
    countedMostPushes: 0,
    oldKeyPushes: 0,
    newKeyPushes: 0,
    stalePushes: 0,
    forgedPushes: 0,
    replays: 0,
    resolved: new Map(),
    resolvedInCancel: new Map(),
    killsInGiveUp: 0,
    settledBehindCut: new Set(),
    redriveRounds: 0,
    redrivePairs: 0,
    redriveRetries: 0,
    redriveStatuses: new Map(),
    redrivePublished: 0,
    killsInRedrive: 0,
    killsWhileOtherDown: 0,
    answeredTotal: 0,
    dbFaults: [],
    slowestMs: 0,
  };
  const jobs = new Map<string, JobRecord>();
  const observed = new SentOrder<Observation>();
  const plans: { id: string; initial: State; behaviour: Behaviour }[] = [];
  /** The intents an operator resolved (or tried to), and to what. */
  const resolvedBy = new Map<string, "settled" | "failed">();
  /** The payments whose resolution the operator has sent and not yet read the answer of. */
  const resolving = new Set<string>();
  let allEnded = false;

  const onSignal = () => {
    fail(new Error("interrupted"));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const deadlineTimer = setTimeout(
    () =>
      fail(
        new DeadlineExceeded(
          `the run passed its ${options.deadlineS}s deadline`,
        ),
      ),
    options.deadlineS * 1000,
  );
  const checkAlive = () => {
    if (failure) throw failure;
  };

  const ops = (path: string, init: RequestInit = {}) =>
    operatorCall(`${pick().base}${path}`, opsToken, init);

  /** One delivery of a job (one copy): an answer, or lost with the server. */
  const post = async (
    path: string,
    body: string,
    signed: Record<string, string>,
    to: ServerProcess,
  ): Promise<Attempt> => {
    stats.requests++;
    const base = to.base;
    const sentAt = now();
    const headers = { "content-type": "application/json", ...signed };
    // What the copy sent again answered, where it was a first delivery.
    let unrecordedCopy: AnswerBody | undefined;
    try {
      const res = await fetch(`${base}${path}`, {
        method: "POST",
        body,
        headers,
        signal: AbortSignal.timeout(DELIVERY_BOUND_MS),
      });
      const text = await res.text();
      // Not Pub/Sub's: Google's token does not cover the body and is reused
      // for up to an hour, so its routes cannot refuse a replay (DESIGN §15).
      if (!path.startsWith("/v1/pubsub") && queueRandom() < REPLAY_RATE) {
        // The same signed request again (an attacker's, or a proxy's
        // retry): refused with 401 once its first copy was answered, and
        // it touches nothing (a replay that acted would show as a second
        // delivery, a second send or a second resolution).
        stats.replays++;
        try {
          const again = await fetch(`${base}${path}`, {
            method: "POST",
            body,
            headers,
            signal: AbortSignal.timeout(DELIVERY_BOUND_MS),
          });
          const detail = await again.text();
          const verdict = replayAnswer(
            res.status,
            again.status,
            detail,
            outages,
          );
          if (verdict === "first") {
            try {
              unrecordedCopy = JSON.parse(detail);
            } catch {
              // not an answer of the relayer's: nothing to book
            }
          }
          if (verdict === "unexpected") {
            unexpected.push(
              `a replay of a signed ${path} request answered ${again.status} ${
                detail.slice(0, 200)
              }, not 401 (its first copy answered ${res.status})`,
            );
          }
        } catch {
          // the server died under the replay
        }
      }
      const answeredAt = now();
      stats.slowestMs = Math.max(stats.slowestMs, answeredAt - sentAt);
      if (base === to.base) {
        to.answered++;
        answeredSinceStart++;
      }
      stats.answeredTotal++;
      const fault = stats.dbFaults.at(-1);
      if (
        text.includes(STALE_REFUSAL) &&
        stats.dbFaults.some((done) => done.kind === "retype")
      ) {
        unexpected.push(
          `${path} answered ${res.status} after a change of a column's type: ${
            text.slice(0, 240)
          }`,
        );
      }
      if (fault !== undefined && fault.ready === null) {
        fault.statuses.set(
          res.status,
          (fault.statuses.get(res.status) ?? 0) + 1,
        );
        if (res.status !== 200) {
          let key = text.slice(0, 160);
          try {
            const json = JSON.parse(text);
            key = `${res.status} ${json.title ?? json.outcome}: ${
              String(json.reason ?? json.detail ?? "").slice(0, 160)
            }`;
          } catch {
            // not JSON: kept as it came
          }
          fault.texts.set(key, (fault.texts.get(key) ?? 0) + 1);
        }
      }
      if (
        fault !== undefined && fault.up !== null && fault.firstOk === null &&
        res.status === 200 && sentAt >= fault.up
      ) fault.firstOk = answeredAt;
      stats.statuses.set(res.status, (stats.statuses.get(res.status) ?? 0) + 1);
      return {
        kind: "answer",
        path,
        status: res.status,
        body: answerBody(text),
        retryAfter: res.headers.get("retry-after"),
        ...(unrecordedCopy === undefined ? {} : { unrecordedCopy }),
      };
    } catch (error) {
      stats.lostRequests++;
      if ((error as Error).name === "TimeoutError") {
        // A kill closes the socket; only a delivery the live service never
        // answered times out.
        unexpected.push(
          `a delivery got no answer within ${DELIVERY_BOUND_MS}ms (sent ${
            ((sentAt - started) / 1000).toFixed(1)
          }s into the run)`,
        );
      }
      return { kind: "lost", path, error: (error as Error).message };
    }
  };

  const unexpected: string[] = [];
  const limiter = new Limiter(options.concurrency);

  /**
   * Requests the queue no longer waits for: a delivery still in flight when
   * it gave up, a give-up it repeats later. Awaited before the read-back.
   */
  const inflight = new Set<Promise<void>>();
  const detach = (work: Promise<void>) => {
    const tracked: Promise<void> = work.catch((error) => {
      if (!(error instanceof DeadlineExceeded) && !failure) {
        unexpected.push(
          `a detached request failed: ${(error as Error).message}`,
        );
      }
    }).finally(() => inflight.delete(tracked));
    inflight.add(tracked);
  };
  /** Each give-up's first resolution, by message id: a repeat must answer the same. */
  const firstResolution = new Map<string, string>();

  /**
   * How long Pub/Sub waits before it pushes again after push `n` was
   * refused: its subscription's retry policy, exponential between the
   * bounds the service was told (best effort: never below the minimum).
   */
  const pubsubBackoff = (n: number): number =>
    Math.min(
      pubsubMaxBackoffMs,
      pubsubMinBackoffMs * 2 ** Math.min(n - 1, 20),
    ) + Math.floor(queueRandom() * 10);

  /** {@linkcode bookAnswers}, for the answers of `generation` (the job's current one by default). */
  const book = (
    job: JobRecord,
    n: number,
    attempts: readonly Attempt[],
    live: boolean,
    generation: number = job.generation,
  ) =>
    bookAnswers(job, n, attempts, {
      live,
      generation,
      pubsubBackoff,
      unexpected,
    });

  /**
   * `copies` requests at once, each signed afresh, of delivery `n` (or, with
   * `gaveUp`, of the queue's give-up after delivery `n`), through the job's
   * lane: the generic route, or QStash's routes with the message's id. With
   * several instances each copy goes to a live one drawn by the seed, the
   * copies to different ones where they can; with `race`, the instances
   * taken go in `race.mine`, and those in `race.theirs` (the other side of
   * a give-up and the delivery it races) are avoided too.
   */
  const postCopies = (
    job: JobRecord,
    n: number,
    copies: number,
    what: { gaveUp?: string; publication?: number; deadLetterId?: string },
    race?: {
      mine: Set<ServerProcess>;
      theirs: ReadonlySet<ServerProcess>;
    },
  ) => {
    const taken = new Set<ServerProcess>(race?.theirs);
    const targets = Array.from({ length: copies }, () => {
      const to = pick(taken);
      taken.add(to);
      race?.mine.add(to);
      spread.requests[servers.indexOf(to)]!++;
      return to;
    });
    if (copies > 1) {
      spread.pairs++;
      if (new Set(targets).size > 1) spread.pairsApart++;
    }
    return targets.map(async (to, copy) => {
      const label = `${job.lane}${job.counted ? " (no deliveryAttempt)" : ""} ${
        what.gaveUp === undefined
          ? `delivery ${n}`
          : `give-up after ${n} of ${what.gaveUp}`
      } (${job.messageId}, publication ${job.generation}${
        copies > 1 ? `, copy ${copy + 1} of ${copies}` : ""
      }${several ? `, to server ${to.tag}${to.generation}` : ""})`;
      trails.add(job.intentId, `→ ${label}`);
      const attempt = await postCopy(job, n, copy, what, to);
      if (attempt.kind === "answer" && attempt.status >= 500) {
        // A failure answered after a resolution's first write (a give-up's
        // or a poisoned delivery's void, its move not made) leaves half a
        // resolution until the next delivery finishes it: look at once,
        // before one does, rather than leave it to a sample's luck.
        try {
          const read = await ops(`/v1/intents/${job.intentId}`);
          if (read.status === 200 && isIntentView(read.body)) {
            holdSeen(
              job.intentId,
              read.body,
              `the read after a ${attempt.status} of a ${
                what.gaveUp === undefined ? "delivery" : "give-up"
              }`,
            );
          }
        } catch {
          // the server died under the read
        }
      }
      trails.add(
        job.intentId,
        `← ${label}: ${
          attempt.kind === "lost"
            ? `lost (${attempt.error.slice(0, 80)})`
            : `${attempt.status} ${brief(attempt.body)}${
              attempt.stale ? " (an expired token of the withdrawn key)" : ""
            }`
        }`,
      );
      return attempt;
    });
  };

  /** One copy of delivery `n` (or of the give-up after it) to `to`: see {@linkcode postCopies}. */
  const postCopy = async (
    job: JobRecord,
    n: number,
    copy: number,
    what: { gaveUp?: string; publication?: number; deadLetterId?: string },
    to: ServerProcess,
  ): Promise<Attempt> => {
    const payload = { intentId: job.intentId, kind: "settle" };
    if (job.lane === "pubsub") {
      return await pushPubSub(job, n, payload, what, to);
    }
    if (job.lane === "generic") {
      const body = JSON.stringify(
        what.gaveUp === undefined
          ? {
            job: payload,
            delivery: n,
            ...(namesMessage(job.intentId) ? { messageId: job.messageId } : {}),
            copy,
            // A publication's delivery n is not an earlier one's: signed afresh.
            publication: what.publication,
          }
          : {
            job: payload,
            gaveUp: { deliveries: n, messageId: what.gaveUp },
            copy,
            // A queue's repeat is a new request, signed afresh.
            nonce: crypto.randomUUID(),
          },
      );
      return await post("/v1/deliveries", body, {
        "x-signature": sign(body, Math.floor(Date.now() / 1000)),
      }, to);
    }
    if (what.gaveUp === undefined) {
      // QStash's delivery: the job as the body, its count in
      // Upstash-Retried (from 0), its message id in a header the
      // signature does not cover (a fresh jti keeps copies apart).
      const body = JSON.stringify(payload);
      return await post("/v1/qstash", body, {
        "upstash-signature": await signQStash(
          body,
          `${PUBLIC_URL}/v1/qstash`,
          qstashSecret,
        ),
        "upstash-message-id": job.messageId,
        "upstash-retried": String(n - 1),
      }, to);
    }
    // QStash's failure callback: the job base64 in sourceBody.
    const body = JSON.stringify({
      status: 500,
      sourceMessageId: what.gaveUp,
      sourceBody: btoa(JSON.stringify(payload)),
      retried: n - 1,
      maxRetries: policy.maxDeliveries - 1,
      copy,
    });
    return await post("/v1/qstash/failed", body, {
      "upstash-signature": await signQStash(
        body,
        `${PUBLIC_URL}/v1/qstash/failed`,
        qstashSecret,
      ),
    }, to);
  };

  /**
   * Google's keys as the run rotates them: `signing` signs new tokens; the
   * next key is listed beside the first at `listedAt`; the first key's
   * tokens expire at `expiredAt` (no push carries one after), and once
   * none is in flight (`oldInFlight`) the key is withdrawn, at
   * `withdrawnAt`.
   */
  const rotation: {
    signing: GoogleIssuer;
    listedAt: number | null;
    expiredAt: number | null;
    withdrawnAt: number | null;
    oldInFlight: number;
    newKeyAnsweredAt: number | null;
    staleAnsweredAt: number | null;
  } = {
    signing: google.issuer,
    listedAt: null,
    expiredAt: null,
    withdrawnAt: null,
    oldInFlight: 0,
    newKeyAnsweredAt: null,
    staleAnsweredAt: null,
  };
  /**
   * Google's token for `audience` by `key` (the signing one by default),
   * made once and reused, as Google reuses its tokens for up to an hour.
   */
  const tokens = new Map<string, Promise<string>>();
  const googleToken = (
    audience: string,
    key: GoogleIssuer = rotation.signing,
  ): Promise<string> => {
    let token = tokens.get(`${key.kid} ${audience}`);
    if (token === undefined) {
      token = key.token(audience, PUBSUB_ACCOUNT);
      tokens.set(`${key.kid} ${audience}`, token);
    }
    return token;
  };
  /**
   * The token a push to `audience` carries: the signing key's; between the
   * listing and the expiry of the first key's tokens sometimes one the
   * first key signed before (reused: `old`); after the withdrawal sometimes
   * an expired one of the first key (`stale`: it must be refused).
   */
  const pushToken = async (
    audience: string,
  ): Promise<
    { token: string; stale: boolean; old: boolean; first?: boolean }
  > => {
    // The first push after the withdrawal, then some.
    if (
      rotation.withdrawnAt !== null &&
      (stats.stalePushes === 0 || pubsubRandom() < STALE_TOKEN_RATE)
    ) {
      stats.stalePushes++;
      // Issued an hour and a minute ago: expired, past the clock tolerance.
      const issuedS = Math.floor(Date.now() / 1000) - 3660;
      return {
        token: await google.issuer.token(audience, PUBSUB_ACCOUNT, issuedS),
        stale: true,
        old: false,
      };
    }
    const old = tokens.get(`${google.issuer.kid} ${audience}`);
    if (
      rotation.listedAt !== null && rotation.expiredAt === null &&
      old !== undefined && pubsubRandom() < OLD_TOKEN_RATE
    ) {
      stats.oldKeyPushes++;
      return { token: await old, stale: false, old: true };
    }
    const key = rotation.signing;
    if (key === google.next) stats.newKeyPushes++;
    return {
      token: await googleToken(audience, key),
      stale: false,
      old: false,
      first: key === google.issuer,
    };
  };

  /**
   * `post`, counting a push with the first key's token in flight (the key
   * is withdrawn only once none is), and noting the first answer to one
   * signed by the next key, and to one with an expired token of the first.
   * With several instances, a push whose token the first key signed before
   * the listing counts too: it may reach a process started since, which
   * has no key yet and would fetch the list without it.
   */
  const postPush = async (
    path: string,
    body: string,
    token: { token: string; old: boolean; stale: boolean; first?: boolean },
    to: ServerProcess,
  ): Promise<Attempt> => {
    const first = token.old || (several && token.first === true);
    if (first) rotation.oldInFlight++;
    const next = !token.old && !token.stale &&
      rotation.signing === google.next;
    try {
      const attempt = await post(path, body, {
        authorization: `Bearer ${token.token}`,
      }, to);
      if (attempt.kind === "answer") {
        if (next) rotation.newKeyAnsweredAt ??= now();
        if (token.stale) rotation.staleAnsweredAt ??= now();
      }
      return attempt;
    } finally {
      if (first) rotation.oldInFlight--;
    }
  };

  /** One push with `token` to `path`, which must be refused (401) and touch nothing. */
  const refusedPush = async (
    job: JobRecord,
    path: string,
    body: string,
    token: string,
    what: string,
    to: ServerProcess,
  ): Promise<void> => {
    try {
      const res = await fetch(`${to.base}${path}`, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${token}`,
        },
        signal: AbortSignal.timeout(DELIVERY_BOUND_MS),
      });
      await res.body?.cancel();
      if (res.status !== 401) {
        unexpected.push(
          `${job.intentId}: a push with ${what} answered ${res.status} on ${path}, not 401`,
        );
      }
    } catch {
      // the server died under it
    }
  };

  /**
   * Pub/Sub's push of the job's message (`deliveryAttempt` `n`, the
   * subscription's dead-letter policy being set; none on the subscription
   * without one, whose pushes the service counts), or, with `gaveUp`, the
   * dead-letter topic's push of it: a message of its own (`deadLetterId`)
   * whose attributes name the source subscription, its delivery count and
   * the source's publish time (in Google's other format, `+00:00`).
   */
  const pushPubSub = async (
    job: JobRecord,
    n: number,
    payload: { intentId: string; kind: string },
    what: { gaveUp?: string; deadLetterId?: string },
    to: ServerProcess,
  ): Promise<Attempt> => {
    const data = btoa(JSON.stringify(payload));
    if (what.gaveUp === undefined) {
      const body = JSON.stringify({
        message: {
          data,
          messageId: job.messageId,
          publishTime: job.publishTime,
        },
        subscription: `projects/${PUBSUB_PROJECT}/subscriptions/${
          job.counted ? PUBSUB_COUNTED_SUBSCRIPTION : PUBSUB_SUBSCRIPTION
        }`,
        ...(job.counted ? {} : { deliveryAttempt: n }),
      });
      if (queueRandom() < REPLAY_RATE) {
        // A Google token for another audience (the dead-letter route's):
        // Google issues tokens for any audience, so only the audience
        // check refuses it, and it must touch nothing.
        stats.misdirected++;
        await refusedPush(
          job,
          "/v1/pubsub",
          body,
          await googleToken(`${PUBLIC_URL}/v1/pubsub/dead-letter`),
          "a token for the dead-letter route's audience",
          to,
        );
      }
      if (
        rotation.listedAt !== null &&
        (rotation.withdrawnAt === null || rotation.staleAnsweredAt !== null) &&
        pubsubRandom() < FORGED_KID_RATE
      ) {
        // A key Google never listed: the unknown kid may cost a refetch,
        // rate-limited, and the push is refused. Not between the withdrawal
        // and the first expired token's answer: its refetch would drop the
        // withdrawn key from the process that must still hold it.
        stats.forgedPushes++;
        await refusedPush(
          job,
          "/v1/pubsub",
          body,
          await google.forger.token(`${PUBLIC_URL}/v1/pubsub`, PUBSUB_ACCOUNT),
          `a token of a key Google never listed (kid ${google.forger.kid})`,
          to,
        );
      }
      const token = await pushToken(`${PUBLIC_URL}/v1/pubsub`);
      if (job.counted) {
        job.countedPushes.set(
          job.messageId,
          (job.countedPushes.get(job.messageId) ?? 0) + 1,
        );
      }
      return markPush(
        job,
        await postPush("/v1/pubsub", body, token, to),
        token.stale,
        job.counted,
      );
    }
    stats.deadLetterPushes++;
    const body = JSON.stringify({
      message: {
        data,
        messageId: what.deadLetterId ?? `dl-${what.gaveUp}`,
        publishTime: new Date().toISOString(),
        attributes: {
          CloudPubSubDeadLetterSourceDeliveryCount: String(n),
          CloudPubSubDeadLetterSourceSubscription: PUBSUB_SUBSCRIPTION,
          CloudPubSubDeadLetterSourceSubscriptionProject: PUBSUB_PROJECT,
          CloudPubSubDeadLetterSourceTopicPublishTime: job.publishTime
            .replace(/Z$/, "+00:00"),
        },
      },
      subscription: `projects/${PUBSUB_PROJECT}/subscriptions/relayer-dead`,
    });
    const token = await pushToken(`${PUBLIC_URL}/v1/pubsub/dead-letter`);
    return markPush(
      job,
      await postPush("/v1/pubsub/dead-letter", body, token, to),
      token.stale,
      false,
    );
  };

  /**
   * A push's answer, marked as counted (no `deliveryAttempt`) or stale (an
   * expired token of the withdrawn key), which must have been refused.
   */
  const markPush = (
    job: JobRecord,
    attempt: Attempt,
    stale: boolean,
    counted: boolean,
  ): Attempt => {
    if (attempt.kind !== "answer") return attempt;
    if (stale && attempt.status !== 401) {
      unexpected.push(
        `${job.intentId}: a push with an expired token of Google's withdrawn key (kid ${google.issuer.kid}) answered ${attempt.status} on ${attempt.path}, not 401`,
      );
    }
    return { ...attempt, stale, counted };
  };

  /**
   * The queue gives up on the job after delivery `n` (POST /v1/deliveries
   * with `gaveUp`, as a bridge does), sometimes twice at once, until a copy
   * is acked; sometimes it repeats the give-up later (best effort, as
   * Pub/Sub's dead-lettering is), which must change nothing.
   */
  const giveUp = async (
    job: JobRecord,
    n: number,
    messageId: string,
    live: boolean,
    // The publication given up on, as it was (a repeat comes through its
    // queue even once the job is published again, maybe through another).
    message: JobRecord = { ...job, quiet: [] },
    // Pub/Sub's dead-letter copy: each forward is a message of its own,
    // pushed again (same id) until acked.
    deadLetterId = `dl-${messageId}-1`,
    // With several instances, the delivery it races (still in flight, or
    // held up): each goes to an instance the other did not, where one is.
    race?: { delivery: Set<ServerProcess>; giveUp: Set<ServerProcess> },
  ): Promise<void> => {
    let firstSentAt: number | undefined;
    for (let tries = 1;; tries++) {
      checkAlive();
      if (tries > 200) {
        unexpected.push(`${job.intentId}: give-up ${messageId} never acked`);
        if (live) job.ended = true;
        return;
      }
      const attempts = await limiter.run(async () => {
        await Promise.race([waitUp(), failed.promise]);
        checkAlive();
        const copies = queueRandom() < 0.2 ? 2 : 1;
        givingUpNow++;
        firstSentAt ??= now();
        try {
          return await Promise.all(
            postCopies(
              message,
              n,
              copies,
              { gaveUp: messageId, deadLetterId },
              race && { mine: race.giveUp, theirs: race.delivery },
            ),
          );
        } finally {
          givingUpNow--;
        }
      });
      const { acked, delayMs } = book(
        job,
        n,
        attempts,
        live,
        message.generation,
      );
      for (const attempt of attempts) {
        if (attempt.kind !== "answer" || attempt.status !== 200) continue;
        const { outcome, resolution } = attempt.body;
        if (outcome !== "poison") continue;
        const first = firstResolution.get(messageId);
        if (first === undefined) {
          firstResolution.set(messageId, resolution ?? "");
        } else if (first !== resolution) {
          unexpected.push(
            `${job.intentId}: give-up ${messageId} (${message.lane}) resolved ${
              JSON.stringify(first)
            }, and a repeat of it ${JSON.stringify(resolution)}`,
          );
        }
      }
      if (acked) {
        trails.add(
          job.intentId,
          `give-up of ${messageId} acked${
            live ? ": job ended" : " (a repeat)"
          }`,
        );
        if (!live) return;
        job.ended = true;
        job.quiet.push(
          quietAfterGiveUp(
            message.lane,
            attempts,
            firstSentAt!,
            now(),
            namesMessage(job.intentId),
          ),
        );
        // Always after a give-up that dropped the job of an authorized
        // intent (only the marks stand between a late copy and a send).
        const dropped = attempts.some((a) =>
          a.kind === "answer" &&
          a.body.resolution === "job dropped, intent still authorized"
        );
        // Pub/Sub's 204 says nothing of the resolution: every acked
        // dead-letter push is followed by a late push of its source.
        if (
          message.lane === "pubsub" ||
          (message.lane === "qstash" &&
            (dropped || queueRandom() < LATE_COPY_RATE))
        ) {
          if (message.lane === "pubsub") stats.pubsubLateCopies++;
          else stats.lateCopies++;
          // Mostly past the give-up's lease (only the marks hold it off),
          // sometimes within it.
          const wait = dropped || queueRandom() < 0.7
            ? LEASE_MS + 20 + Math.floor(queueRandom() * 200)
            : Math.floor(queueRandom() * LEASE_MS);
          detach((async () => {
            await sleep(wait);
            if (!failure) await lateCopy(job, message, n + 1);
          })());
        }
        if (queueRandom() < 0.25) {
          stats.giveUpRepeats++;
          const wait = Math.floor(queueRandom() * 150);
          // Pub/Sub's repeat: the same dead-letter copy pushed again, or
          // the message dead-lettered again (best effort), a new copy.
          const again = queueRandom() < 0.5
            ? deadLetterId
            : `dl-${messageId}-${stats.giveUpRepeats + 1}`;
          detach((async () => {
            await sleep(wait);
            if (!failure) {
              await giveUp(job, n, messageId, false, message, again);
            }
          })());
        }
        return;
      }
      await Promise.race([sleep(delayMs), failed.promise]);
    }
  };

  /**
   * A copy of a message the queue gave up on, arriving late (Pub/Sub may
   * push one after it dead-lettered the message; a delivery timed out by
   * the queue may land after its give-up): numbered `n`, past the count
   * the give-up named. It must send nothing: the give-up's marks refuse
   * its write-ahead. `message` is the publication as it was then.
   */
  const lateCopy = async (
    job: JobRecord,
    message: JobRecord,
    n: number,
  ): Promise<void> => {
    trails.add(
      job.intentId,
      `a late copy of ${message.messageId} comes (after its give-up was acked)`,
    );
    const attempts = await limiter.run(async () => {
      await Promise.race([waitUp(), failed.promise]);
      checkAlive();
      givingUpNow++;
      try {
        return await Promise.all(postCopies(message, n, 1, {}));
      } finally {
        givingUpNow--;
      }
    });
    book(job, n, attempts, false, message.generation);
    for (const attempt of attempts) {
      if (attempt.kind !== "answer") continue;
      const reason = attempt.body.reason ?? "";
      if (/^(sent |send: )/.test(reason)) {
        unexpected.push(
          `${job.intentId}: a late copy of ${message.messageId} (delivery ${n}, after its give-up was acked) sent: ${attempt.status} ${
            JSON.stringify(reason)
          }`,
        );
      }
    }
  };

  /** One publication of the job: deliveries until acked, or the queue's give-up. */
  const runGeneration = async (job: JobRecord): Promise<void> => {
    while (!job.ended) {
      checkAlive();
      if (job.delivery >= MAX_DELIVERIES_PER_JOB) {
        unexpected.push(
          `${job.intentId}: still not ended after ${job.delivery} deliveries`,
        );
        job.ended = true;
        return;
      }
      if (
        job.counted &&
        job.delivery >= COUNTED_PUSH_BOUND * policy.maxDeliveries
      ) {
        // Pub/Sub would push on for days; the service's count should have
        // poisoned it at MAX_DELIVERIES.
        unexpected.push(
          `${job.intentId}: Pub/Sub pushed ${job.messageId} ${job.delivery} times without deliveryAttempt and the service never acked it: its own count (by subscription and message id) never poisoned the job`,
        );
        job.ended = true;
        return;
      }
      const last = job.queueLimit !== null &&
        job.delivery + 1 >= job.queueLimit;
      const early = last && job.giveUpInFlight;
      // Sometimes the last delivery is held up before it reaches the
      // service (or before its first store call) while the queue, which
      // timed it out, gives up: the give-up lands first, within the lease.
      const heldUp = early && queueRandom() < 0.5;
      const giveUpAcked = deferred();
      const race = {
        delivery: new Set<ServerProcess>(),
        giveUp: new Set<ServerProcess>(),
      };
      // The slot first, then the gate: a delivery waiting for a slot must
      // not fire into a server that died meanwhile. Only requests already
      // in flight at a kill are lost, and the queue counts them.
      const { n, sent, publication } = await limiter.run(async () => {
        await Promise.race([waitUp(), failed.promise]);
        checkAlive();
        const n = ++job.delivery;
        const publication = job.generation;
        stats.deliveries++;
        const copies = queueRandom() < DUPLICATE_RATE ? 2 : 1;
        if (copies === 2) stats.duplicates++;
        const holdMs = heldUp ? Math.floor(queueRandom() * 100) : 0;
        // Each copy is signed afresh, as a queue's redelivery is: the same
        // signed request twice is a replay, refused with 401 (DESIGN §15).
        const sent = (heldUp
          ? giveUpAcked.promise.then(() =>
            sleep(holdMs)
          )
          : Promise.resolve()).then(() => {
            // Each copy is signed afresh, as a queue's redelivery is.
            return Promise.all(
              postCopies(
                job,
                n,
                copies,
                { publication },
                early
                  ? { mine: race.delivery, theirs: race.giveUp }
                  : undefined,
              ),
            );
          });
        if (!early) await sent;
        return { n, sent, publication };
      });
      if (early) {
        // The queue's deadline for this delivery passed while it runs (its
        // answer comes too late to count) and this was its last: it gives
        // up with the delivery still in flight, at some point of it.
        stats.giveUpsInFlight++;
        trails.add(
          job.intentId,
          `queue gives up with delivery ${n} in flight${
            heldUp ? " (held up until the give-up is acked)" : ""
          }`,
        );
        detach(sent.then((attempts) => {
          book(job, n, attempts, false, publication);
          spread.races++;
          if (![...race.delivery].some((to) => race.giveUp.has(to))) {
            spread.racesApart++;
          }
        }));
        if (!heldUp) await sleep(Math.floor(queueRandom() * 40));
        else stats.heldUp++;
        stats.giveUps++;
        await giveUp(
          job,
          n,
          job.messageId,
          true,
          undefined,
          undefined,
          race,
        ).finally(giveUpAcked.resolve);
        return;
      }
      const { delayMs, acked, lostCopy } = book(job, n, await sent, true);
      if (acked && job.counted) {
        stats.countedMostPushes = Math.max(stats.countedMostPushes, n);
      }
      if (acked) {
        trails.add(job.intentId, `job ended at delivery ${n}`);
        job.ended = true;
        if (lostCopy) job.lostCopyAfterAck = true;
        return;
      }
      if (last) {
        stats.giveUps++;
        await giveUp(job, n, job.messageId, true);
        return;
      }
      await Promise.race([sleep(delayMs), failed.promise]);
    }
  };

  /**
   * QStash or Pub/Sub gives up with its first delivery still at work
   * (timed out on its side; pushes the service never answered counted
   * too): the give-up mostly finds the intent authorized and drops the
   * job, and then only the message's marks keep a late copy from sending.
   */
  const earlyGiveUp = (job: JobRecord) => {
    job.queueLimit = 1;
    job.giveUpInFlight = true;
  };

  /**
   * Sometimes a Pub/Sub publication goes through the subscription without
   * a dead-letter policy: no `deliveryAttempt`, no give-up.
   */
  const drawSubscription = (job: JobRecord) => {
    job.counted = job.lane === "pubsub" &&
      pubsubRandom() < PUBSUB_COUNTED_RATE;
    if (!job.counted) return;
    stats.pubsubCounted++;
    job.queueLimit = null;
    job.giveUpInFlight = false;
  };

  /** The intent's view over the ops API, waiting out kills. */
  const readIntent = async (id: string): Promise<IntentView | null> => {
    for (let tries = 0; tries < 100; tries++) {
      checkAlive();
      await Promise.race([waitUp(), failed.promise]);
      try {
        const { status, body } = await ops(`/v1/intents/${id}`);
        if (status === 200 && isIntentView(body)) return body;
        if (status === 200) {
          unexpected.push(
            `${id}: GET /v1/intents/${id} answered 200 with ${
              JSON.stringify(body)?.slice(0, 200)
            }, not an intent`,
          );
          return null;
        }
        if (status === 404) return null;
      } catch {
        // the server died under the read
      }
      await sleep(20);
    }
    return null;
  };

  /**
   * The job published again (its message taken by the queue at `at`): a new
   * message id, a fresh count, a lane, and whether and when the queue gives
   * up on it, drawn as for a first publication. Ends the quiet that the
   * last acked give-up began.
   */
  const publishAgain = (
    job: JobRecord,
    lane: Lane,
    messageId: string,
    at: number,
  ): void => {
    const quiet = job.quiet.at(-1);
    if (quiet !== undefined) quiet.to = Math.min(quiet.to, at);
    trails.add(
      job.intentId,
      `published again through ${lane} as ${messageId} (publication ${
        job.generation + 1
      })`,
    );
    job.generation++;
    job.delivery = 0;
    job.ended = false;
    delete job.final;
    job.lostCopyAfterAck = false;
    job.messageId = messageId;
    job.publishTime = new Date().toISOString();
    job.lane = lane;
    job.queueLimit = null;
    job.giveUpInFlight = false;
    if (lane !== "generic") {
      if (lane === "qstash") stats.qstashJobs++;
      else stats.pubsubJobs++;
    }
    if (lane !== "generic" && queueRandom() < EARLY_GIVE_UP) earlyGiveUp(job);
    else {
      job.queueLimit = queueRandom() < GIVE_UP_RATE
        ? 1 + Math.floor(queueRandom() * (policy.maxDeliveries + 1))
        : null;
      job.giveUpInFlight = queueRandom() < 0.6;
    }
    drawSubscription(job);
  };

  /**
   * A job, and its publications: once one ends with a dead letter on an
   * intent still created or authorized, an operator sometimes publishes the
   * job afresh (what the redrive route advises for a queue of one's own),
   * with a new message id and a fresh count. Then the job is idle: the
   * operator may redrive its dead letter through the route.
   */
  const runJob = async (job: JobRecord): Promise<void> => {
    for (;;) {
      await runGeneration(job);
      if (job.generation >= 2 || queueRandom() >= 0.5) break;
      const view = await readIntent(job.intentId);
      if (
        view === null || view.deadLetter === null ||
        (view.intent.state !== "created" && view.intent.state !== "authorized")
      ) break;
      stats.republished++;
      publishAgain(
        job,
        laneOf(queueRandom()),
        `m-${job.intentId}-${job.generation + 1}`,
        now(),
      );
    }
    job.idle = true;
  };

  /**
   * One redrive round of `letter` by the operator
   * (`POST /v1/dead-letters/:intentId/:kind/redrive`, or the job id as one
   * encoded segment): sometimes two at once, and after a 503 or an answer
   * lost to a kill, mostly once more (the answer says to try again). What
   * QStash takes meanwhile is held until the round is over (the letter
   * cannot change under it), then delivered as a QStash publication of its
   * own. Then the checks: at most one message taken and one 202 for the
   * letter; a 404 only once another redrive of it may have won; a letter
   * gone only once its job is on the queue; a refusal, or a 503 with
   * nothing lost, leaves it in place.
   */
  const redriveRound = async (
    job: JobRecord,
    letter: DeadLetterView & { version: string },
  ): Promise<void> => {
    const id = job.intentId;
    job.idle = false;
    job.redrives++;
    stats.redriveRounds++;
    const round: { publications: Publication[] } = { publications: [] };
    redriveRoundsNow.set(id, round);
    const key = `${letter.jobId}@${letter.version}`;
    trails.add(
      id,
      `operator redrives the letter listed at version ${letter.version} (#${letter.deliveries} ${letter.cause}, ${
        JSON.stringify(letter.reason.slice(0, 80))
      } → ${letter.resolution})`,
    );
    type Answer = { status: number; title: string } | "lost";
    // Two redrives at once go to two instances, where there are two.
    const targets = new Set<ServerProcess>();
    const redrive = async (copy: number): Promise<Answer> => {
      await Promise.race([waitUp(), failed.promise]);
      checkAlive();
      const path = copy % 2 === 0
        ? `/v1/dead-letters/${id}/settle/redrive`
        : `/v1/dead-letters/${encodeURIComponent(letter.jobId)}/redrive`;
      const to = pick(targets);
      targets.add(to);
      redrivingNow++;
      trails.add(
        id,
        `→ redrive ${path}${
          several ? ` to server ${to.tag}${to.generation}` : ""
        }`,
      );
      let answer: Answer;
      try {
        const res = await fetch(`${to.base}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${opsToken}` },
          signal: AbortSignal.timeout(DELIVERY_BOUND_MS),
        });
        const body = await res.json().catch(() => ({}));
        answer = { status: res.status, title: String(body?.title ?? "") };
      } catch {
        answer = "lost";
      } finally {
        redrivingNow--;
      }
      const label = answer === "lost" ? "lost" : String(answer.status);
      trails.add(
        id,
        `← redrive ${path}: ${
          answer === "lost" ? "lost" : `${answer.status} ${answer.title}`
        }`,
      );
      stats.redriveStatuses.set(
        label,
        (stats.redriveStatuses.get(label) ?? 0) + 1,
      );
      return answer;
    };
    const copies = redriveRandom() < REDRIVE_PAIR_RATE ? 2 : 1;
    if (copies === 2) stats.redrivePairs++;
    const answers = await Promise.all(
      Array.from({ length: copies }, (_, copy) => redrive(copy)),
    );
    const status = (a: Answer) => a === "lost" ? 0 : a.status;
    if (
      !answers.some((a) => status(a) === 202) &&
      answers.some((a) => a === "lost" || a.status === 503) &&
      redriveRandom() < 0.7
    ) {
      stats.redriveRetries++;
      answers.push(await redrive(0));
    }
    // A publish the service sent before a kill may still be on its way, or
    // being read: the restart takes far longer than loopback.
    if (answers.includes("lost")) {
      await Promise.race([waitUp(), failed.promise]);
      await sleep(20);
    }
    await qstash.idle();
    redriveRoundsNow.delete(id);
    const { publications } = round;
    if (publications.length > 0) publishedLetters.add(key);
    trails.add(
      id,
      `redrive round over: QStash took ${
        publications.map((p) => p.messageId).join(", ") || "nothing"
      }; a job on the queue for this letter ${
        publishedLetters.has(key) ? "(this round or an earlier one)" : "never"
      }`,
    );
    const onQueue = publishedLetters.has(key);
    const won = answers.filter((a) => status(a) === 202).length;
    const lost = answers.some((a) => a === "lost");
    const shown = answers.map((a) => a === "lost" ? "lost" : a.status).join(
      ", ",
    );
    const flag = (text: string) =>
      unexpected.push(`${id}: redrive of its dead letter (${shown}): ${text}`);
    if (publications.length > 1) {
      flag(
        `QStash took ${publications.length} messages for one dead letter (${
          publications.map((p) => p.messageId).join(", ")
        }): its redrives published the job more than once`,
      );
    }
    if (won > 1) flag(`${won} redrives of one dead letter answered 202`);
    for (const answer of answers) {
      if (answer === "lost") continue;
      if (![202, 404, 409, 503].includes(answer.status)) {
        flag(`answered ${answer.status} ${JSON.stringify(answer.title)}`);
      }
      if (answer.status === 404 && won === 0 && !lost) {
        flag("answered 404, yet the letter was listed and no redrive won");
      }
    }
    if (won > 0 && !onQueue) {
      flag("answered 202, yet QStash never took a job for the letter");
    }
    const view = await readIntent(id);
    if (view !== null && view.deadLetter === null) {
      if (!onQueue) {
        flag(
          `its dead letter is gone and QStash took no job for it: the intent (${view.intent.state}) is stranded`,
        );
      }
      // Every answer an error (a refusal, or the queue or the store
      // failing): the letter stays. Not under database faults, where a
      // removal may commit unseen and answer 503 (a retry then finds 404).
      if (won === 0 && !lost && !outages) {
        flag("no redrive of it answered 202, yet its dead letter is gone");
      }
    }
    if (publications.length > 0) {
      const publication = publications[0]!;
      stats.redrivePublished++;
      publishAgain(job, "qstash", publication.messageId, publication.at);
      job.redrivenGeneration = job.generation;
      const run = runGeneration(job).then(() => {
        job.idle = true;
      });
      const tracked: Promise<void> = run.catch((error) => {
        if (!(error instanceof DeadlineExceeded) && !failure) {
          unexpected.push(
            `${id}: a redriven job failed: ${(error as Error).message}`,
          );
        }
      }).finally(() => redriven.delete(tracked));
      redriven.add(tracked);
    } else job.idle = true;
  };

  /**
   * The operator: every {@linkcode REDRIVE_EVERY_MS}, lists the dead
   * letters and redrives some whose job is idle (at most
   * {@linkcode MAX_REDRIVES} rounds a job), whatever the intent's state (a
   * settled, failed or reviewed one must be refused with its letter kept);
   * once every first job has ended, one pass more, then it waits for the
   * jobs its redrives published.
   */
  const redriver = async (): Promise<void> => {
    for (;;) {
      const last = jobsDone;
      await Promise.race([sleep(REDRIVE_EVERY_MS), failed.promise]);
      await Promise.race([waitUp(), failed.promise]);
      checkAlive();
      let page: { status: number; body: unknown } | null = null;
      try {
        page = await ops("/v1/dead-letters?limit=1000");
      } catch {
        // the server died under the list
      }
      if (page?.status === 200) {
        const { letters, wrong } = readLetterPage(page.body);
        if (wrong !== null) {
          unexpected.push(
            `GET /v1/dead-letters answered 200 with ${wrong}`,
          );
        }
        const rounds: Promise<void>[] = [];
        for (const letter of letters) {
          const job = jobs.get(letter.intentId);
          if (
            job === undefined || !job.idle || job.redrives >= MAX_REDRIVES ||
            redriveRandom() >= REDRIVE_RATE
          ) continue;
          rounds.push(redriveRound(job, letter));
        }
        await Promise.all(rounds);
      }
      if (last) break;
    }
    while (redriven.size > 0) {
      await Promise.race([Promise.all([...redriven]), failed.promise]);
      checkAlive();
    }
  };

  const sampler = async (): Promise<void> => {
    const ids = plans.map((p) => p.id);
    while (!allEnded && !failure) {
      await Promise.race([waitUp(), failed.promise]);
      if (allEnded || failure) return;
      const batch = new Set<string>();
      for (let i = 0; i < 6 && ids.length > 0; i++) {
        batch.add(ids[Math.floor(Math.random() * ids.length)]!);
      }
      await Promise.all([...batch].map(async (id) => {
        try {
          const sentAt = now();
          const answer = observed.send(id);
          const { status, body } = await ops(`/v1/intents/${id}`);
          if (status === 200) {
            answer({
              state: (body as IntentView).intent.state,
              sentAt,
              answeredAt: now(),
            });
            holdSeen(id, body as IntentView, "a sample");
            stats.samples++;
          }
        } catch {
          // the server died under the sample
        }
      }));
      await sleep(40);
    }
  };

  /**
   * A hold its intent's state contradicts, at any read during the run
   * ({@linkcode holdAgainstState}): half a resolution, seen as it stands.
   */
  const holdSeen = (id: string, view: IntentView, read: string) => {
    const wrong = holdAgainstState(view.intent.state, view.intent.hold);
    if (wrong !== null) {
      unexpected.push(`${id}: I2: ${read} read it ${wrong}`);
    }
  };

  /** Payments seen in review that the operator has not resolved yet. */
  const awaitingOperator = () =>
    plans.filter((p) =>
      !resolvedBy.has(p.id) &&
      observed.get(p.id).at(-1)?.state === "needs_review"
    ).length;

  /** When the operator may try a payment again after a 409 `send-in-flight`. */
  const retryAt = new Map<string, number>();
  /**
   * The payments whose last resolution the store failed under (503), with
   * its target and when it was sent: each must be resolved by the run's end
   * ({@linkcode resolutionStuck}).
   */
  /**
   * The payments whose resolution the store failed under and that could
   * not be read back: the operator reads each again, and resolves it again
   * if it is still in review.
   */
  const resolveAgain = new Set<string>();
  /** The answer to the operator's last resolution of each payment. */
  const lastResolution = new Map<string, string>();
  const storeFailedResolutions = new Map<
    string,
    { to: "settled" | "failed"; at: number }
  >();
  /**
   * An operator resolving payments in review as one should: settled once
   * the signer confirmed one of its txs, failed once nothing may have left
   * (the route itself refuses a failure behind a confirmed or pending tx);
   * any other stays in review. Kills land in the middle of some.
   */
  const operator = async (): Promise<void> => {
    while (!operatorDone && !failure) {
      await Promise.race([sleep(30), failed.promise]);
      await Promise.race([waitUp(), failed.promise]);
      if (operatorDone || failure) return;
      // With a `cancel` fault to come, the payments in review wait for it,
      // so that resolutions (the void and the move of each) meet it.
      if (
        options.dbFaults.includes("cancel") &&
        !stats.dbFaults.some((fault) => fault.kind === "cancel")
      ) continue;
      // Payments seen in review, or whose job has ended short of a final
      // state (in review, most likely), a few at a time.
      const at = performance.now();
      const inReview = plans.filter((p) =>
        awaitsOperator({
          resolved: resolvedBy.has(p.id),
          again: resolveAgain.has(p.id),
          retryAt: retryAt.get(p.id),
          lastSeen: observed.get(p.id).at(-1)?.state,
          jobEnded: jobs.get(p.id)!.ended,
        }, at)
      );
      for (let i = 0; i < 4 && inReview.length > 0; i++) {
        const plan = inReview.splice(
          Math.floor(Math.random() * inReview.length),
          1,
        )[0]!;
        try {
          const sentAt = now();
          const answer = observed.send(plan.id);
          const read = await ops(`/v1/intents/${plan.id}`);
          if (read.status !== 200) continue;
          const { intent } = read.body as IntentView & {
            intent: { version: string };
          };
          answer({ state: intent.state, sentAt, answeredAt: now() });
          holdSeen(plan.id, read.body as IntentView, "the operator");
          resolveAgain.delete(plan.id);
          if (intent.state !== "needs_review") continue;
          // The operator looks at the chain first (the signer's receipts).
          for (const hash of intent.txHashes) {
            const res = await fetch(
              `${signerBase}/receipt/${encodeURIComponent(hash)}`,
            );
            await res.body?.cancel();
          }
          // And looks its nonce up: the stub is the chain, and a payment
          // whose every send it refused (connection refused, not sent)
          // has nothing on it, whatever the relayer could tell; that is
          // the path of most payments failed here, each voiding a hold
          // in review that may have sent (the route's "nonceChecked").
          const resolution = operatorResolution(
            intent.txHashes,
            (hash) => stub.confirmed.has(hash),
            stub.onChain(plan.id),
          );
          if (resolution === null) continue;
          const { to } = resolution;
          resolvedBy.set(plan.id, to);
          resolving.add(plan.id);
          const inCancel = duringCancel(stats.dbFaults, now());
          const { status, body } = await ops(
            `/v1/intents/${plan.id}/resolve`,
            {
              method: "POST",
              // The signer's record is this operator's chain: with nothing
              // of it left, the nonce is checked.
              body: JSON.stringify({
                to,
                version: intent.version,
                ...(resolution.nonceChecked ? { nonceChecked: true } : {}),
              }),
            },
          );
          stats.resolved.set(
            `${to} ${status}`,
            (stats.resolved.get(`${to} ${status}`) ?? 0) + 1,
          );
          if (inCancel) {
            stats.resolvedInCancel.set(
              `${to} ${status}`,
              (stats.resolvedInCancel.get(`${to} ${status}`) ?? 0) + 1,
            );
          }
          const text = JSON.stringify(body);
          trails.add(
            plan.id,
            `operator resolves it ${to} at version ${intent.version}: ${status}${
              status === 200 ? "" : ` ${text.slice(0, 160)}`
            }`,
          );
          // Under database faults, the store may fail under the
          // resolution: the payment stays in review (or the write landed,
          // its answer lost). A receipt the Sender could not read now
          // changes nothing: the operator looks again later.
          lastResolution.set(
            plan.id,
            `${to} ${status}${
              status === 200
                ? ""
                : ` ${/urn:relayer:problem:([\w-]+)/.exec(text)?.[1] ?? ""}`
            } at ${((sentAt - started) / 1000).toFixed(2)}s`,
          );
          const what = resolveAnswer(status, text, outages);
          if (what === "again" && !/receipts-unread/.test(text)) {
            storeFailedResolutions.set(plan.id, { to, at: sentAt - started });
          } else storeFailedResolutions.delete(plan.id);
          if (status === 409 && /problem:refused/.test(text)) {
            const after = await ops(`/v1/intents/${plan.id}`);
            const seen = after.status === 200 && isIntentView(after.body)
              ? after.body.intent as IntentView["intent"] & { version: string }
              : null;
            if (resolutionRefused(status, text, intent.version, seen)) {
              unexpected.push(
                `${plan.id}: resolving it ${to} answered 409 ${
                  text.slice(0, 200)
                }, the store refusing a write the route let through: it is still needs_review at version ${intent.version}`,
              );
            }
          }
          if (what === "unexpected") {
            unexpected.push(
              `${plan.id}: resolving it ${to} answered ${status} ${text}`,
            );
          } else if (
            (what === "again" && /receipts-unread/.test(text)) ||
            (status === 409 && /send-in-flight|send-ended/.test(text))
          ) {
            // Nothing changed; a fail that met a send that may still run
            // (every payment that may have sent meets one first) is made
            // again as the runbook says: later, on a fresh read and a
            // fresh look at the chain. So is one told that a send of the
            // process ended since, its record failed: at once, on a fresh
            // look at the chain.
            const after = await ops(`/v1/intents/${plan.id}`);
            const seen = (after.body as IntentView | null)?.intent;
            if (
              after.status === 200 &&
              (seen?.state !== "needs_review" || seen.hold !== intent.hold)
            ) {
              unexpected.push(
                `${plan.id}: resolving it ${to} answered ${status} ${
                  /urn:relayer:problem:([\w-]+)/.exec(text)?.[1]
                }, but it is ${seen?.state} with hold ${seen?.hold} now`,
              );
            } else {
              resolvedBy.delete(plan.id);
              // Its Retry-After is at most the lease (LEASE_MS) from the
              // first fail that server refused so.
              if (/send-in-flight/.test(text)) {
                retryAt.set(plan.id, performance.now() + LEASE_MS);
              }
            }
          } else if (what === "again") {
            // The store failed under it (an outage, a statement a `cancel`
            // fault cut): the void and the move land together or not at
            // all. Still in review with its hold pending, it is resolved
            // again later; resolved, the write landed and its answer was
            // lost. Anything else is half a resolution, or another's.
            // Read until the store answers (a cancel fault cuts reads
            // too), or the payment is tried again later all the same.
            let after = await ops(`/v1/intents/${plan.id}`);
            for (
              const until = now() + REREAD_MS;
              after.status !== 200 && now() < until && !failure;
            ) {
              await sleep(50);
              after = await ops(`/v1/intents/${plan.id}`);
            }
            if (after.status !== 200) resolveAgain.add(plan.id);
            if (after.status === 200 && isIntentView(after.body)) {
              const seen = after.body.intent;
              holdSeen(
                plan.id,
                after.body,
                "the read after a failed resolution",
              );
              if (seen.state !== "needs_review" && seen.state !== to) {
                unexpected.push(
                  `${plan.id}: resolving it ${to} answered ${status} ${
                    text.slice(0, 160)
                  }, but it is ${seen.state} with hold ${seen.hold} now`,
                );
              } else if (
                seen.state === "needs_review" && seen.hold === intent.hold
              ) {
                resolvedBy.delete(plan.id);
              }
            }
          }
        } catch {
          // The server died under the resolution (it may have landed), or
          // under a read after it: read it again later, and resolve it
          // again if it is still in review.
          resolveAgain.add(plan.id);
        } finally {
          resolving.delete(plan.id);
        }
      }
    }
  };

  /** Whether the killer is killing the server, or starting the next. */
  let killing = false;
  /** Each instance's restart under way (with --alternate), or done. */
  const restarting: Promise<void>[] = servers.map(() => Promise.resolve());
  const killer = async (): Promise<void> => {
    const segment = killSegment(options);
    for (let k = 0; k < options.kills; k++) {
      const budget = Math.max(
        4,
        Math.floor(segment * (0.4 + 0.6 * killRandom())),
      );
      const extraMs = Math.floor(killRandom() * 25);
      while (answeredSinceStart < budget && !allEnded) {
        checkAlive();
        await Promise.race([sleep(5), failed.promise]);
      }
      if (allEnded) return;
      // Every other kill waits (a little) for a give-up or a late copy to
      // be in flight, or for a redrive, so that some land inside one.
      if (killRandom() < 0.5) {
        const until = now() + 300;
        const forRedrive = killRandom() < 0.5;
        while (
          (forRedrive ? redrivingNow : givingUpNow) === 0 && now() < until &&
          !allEnded
        ) {
          checkAlive();
          await Promise.race([sleep(2), failed.promise]);
        }
        await sleep(Math.floor(extraMs / 3));
      } else await sleep(extraMs);
      // Nor before the process that held only the first key has answered a
      // push signed by the next (it has to refetch), nor before the one
      // that still holds the withdrawn key has answered one of its expired
      // tokens (only the token's exp refuses it there).
      const rotating = now() + 300;
      while (
        ((rotation.listedAt !== null && rotation.newKeyAnsweredAt === null) ||
          (rotation.withdrawnAt !== null &&
            rotation.staleAnsweredAt === null)) &&
        now() < rotating && !allEnded
      ) {
        checkAlive();
        await Promise.race([sleep(2), failed.promise]);
      }
      if (givingUpNow > 0) stats.killsInGiveUp++;
      if (redrivingNow > 0) stats.killsInRedrive++;
      if (allEnded) return;
      // One instance at a time; the others keep serving (with
      // --alternate, the last victim may still be starting).
      const index = killVictim(
        k,
        servers.length,
        options.alternate,
        fleetRandom,
      );
      const server = servers[index]!;
      // Its own last restart first: a process being started is not killed.
      await Promise.race([restarting[index], failed.promise]);
      checkAlive();
      if (servers.some((other) => other !== server && !other.live)) {
        stats.killsWhileOtherDown++;
      }
      const generation = server.generation;
      const from = now();
      trails.everyone(`SIGKILL server ${server.tag}${generation}`);
      killing = true;
      await server.kill();
      stats.kills.push({
        from,
        to: now(),
        ...(several ? { instance: index, generation } : {}),
      });
      stats.restarts++;
      // With several instances, the others answer on while it restarts:
      // the next budget counts from the kill.
      if (several) answeredSinceStart = 0;
      const up = server.start(deadline).then(() => {
        if (!several) answeredSinceStart = 0;
        killing = false;
        trails.everyone(`server ${server.tag}${server.generation} up`);
      });
      if (options.alternate) {
        // The next kill, of the next instance, counts from this one: it may
        // land while this one starts. A start that fails fails the run.
        restarting[index] = up.catch((error) => fail(error as Error));
      } else await up;
    }
    await Promise.race([Promise.all(restarting), failed.promise]);
  };

  /**
   * Google rotates its keys mid-run: once {@linkcode ROTATE_AT} of the
   * answers the run expects came, it lists its next key beside the first
   * and signs new tokens with it; once {@linkcode WITHDRAW_AT} came, the
   * first key's tokens have expired (no push carries one), and once none
   * is in flight it is withdrawn (as Google withdraws a key only after its
   * last token expired).
   */
  const rotator = async (): Promise<void> => {
    const expected = options.intents * 3;
    // Each step once the process at work has Google's keys cached (and is
    // not being killed): the listing finds it holding the first key only,
    // the withdrawal still holding the first key. With several instances,
    // once one has them, killed or not (a process started since may not
    // have them yet, and fetches both keys, or the next only, at its first
    // push; a push signed by the first key is withdrawn only once answered).
    const cached = () =>
      several
        ? google.standIn.fetchedAt.length > 0 && answeredSinceStart > 0
        : !killing &&
          (google.standIn.fetchedAt.at(-1) ?? -Infinity) >
            (stats.kills.at(-1)?.to ?? -Infinity) &&
          servers[0]!.answered > 0;
    const steps: [number, () => Promise<void>][] = [
      [ROTATE_AT, () => {
        google.standIn.serve([...google.issuer.jwks, ...google.next.jwks]);
        rotation.signing = google.next;
        rotation.listedAt = now();
        trails.everyone(
          `Google lists key ${google.next.kid} beside ${google.issuer.kid}, and signs new tokens with it`,
        );
        return Promise.resolve();
      }],
      [WITHDRAW_AT, async () => {
        rotation.expiredAt = now();
        while ((rotation.oldInFlight > 0 || !cached()) && !allEnded) {
          checkAlive();
          await Promise.race([sleep(2), failed.promise]);
        }
        google.standIn.serve(google.next.jwks);
        rotation.withdrawnAt = now();
        trails.everyone(
          `Google withdraws key ${google.issuer.kid} (its tokens expired)`,
        );
      }],
    ];
    for (const [share, step] of steps) {
      while (
        (stats.answeredTotal < expected * share || !cached()) && !allEnded
      ) {
        checkAlive();
        await Promise.race([sleep(5), failed.promise]);
      }
      if (allEnded) return;
      await step();
    }
  };

  /** Whether `GET /readyz` answers 200 now (on every live instance). */
  const ready = async (): Promise<boolean> => {
    // A live instance each: one a kill is starting again is not asked.
    const live = servers.filter((server) => server.live);
    if (live.length === 0) return false;
    const answers = await Promise.all(live.map(async (server) => {
      try {
        const res = await fetch(`${server.base}/readyz`, {
          signal: AbortSignal.timeout(5000),
        });
        await res.body?.cancel();
        return res.status === 200;
      } catch {
        return false;
      }
    }));
    return answers.every((ok) => ok);
  };

  /**
   * The database faults, each a seeded 0.3 to 1.5 s after the last one's
   * recovery; each waits until `/readyz` answers 200 and a
   * delivery sent after the database came back is answered 200 (or every
   * job has ended), within {@linkcode RECOVERY_BOUND_MS}.
   */
  const faulter = async (): Promise<void> => {
    const disk = options.dbFaults.includes("disk");
    if (options.dbFaults.length === 0 || (database === null && !disk)) return;
    // Every fault but `disk` is PostgreSQL's (parseOptions refuses them on
    // KV), and `disk` is KV's alone.
    const db = database as OwnedPostgresServer;
    for (const kind of options.dbFaults) {
      // Time, not answers: the answer rate swings with the retry delays.
      const waitMs = 300 + Math.floor(killRandom() * 1200);
      const until = now() + waitMs;
      while (now() < until && !allEnded) {
        checkAlive();
        await Promise.race([sleep(5), failed.promise]);
      }
      if (allEnded) return;
      if (kind === "cancel") {
        // A few payments in review for the operator to resolve under it
        // (it holds them until then), or as many as there are by then.
        const until = now() + CANCEL_WAIT_MS;
        while (awaitingOperator() < CANCEL_REVIEWS && now() < until) {
          if (allEnded) return;
          checkAlive();
          await Promise.race([sleep(5), failed.promise]);
        }
      }
      await sleep(Math.floor(killRandom() * 25));
      const fault: DbFaultRecord = {
        kind,
        from: now(),
        up: null,
        ready: null,
        firstOk: null,
        statuses: new Map(),
        texts: new Map(),
      };
      stats.dbFaults.push(fault);
      if (kind === "retype") {
        // A migration that changes what the store's statements return (a
        // later release's, in a rolling deploy): every statement the
        // instances prepared on their connections before it is stale. Each
        // `retype` turns the columns the other way.
        const to = stats.dbFaults.filter((done) => done.kind === "retype")
                .length % 2 === 1
          ? "numeric"
          : "bigint";
        // One table at a time, as a migration that locks no two at once:
        // one that held a table while it asked for the next could deadlock
        // with a write that holds the second and asks for the first.
        for (
          const [table, column] of [
            ["counters", "deliveries"],
            ["intents", "version"],
            ["dead_letters", "deliveries"],
          ]
        ) {
          await db.psql(
            `ALTER TABLE relayer.${table} ALTER COLUMN ${column} TYPE ${to}`,
          );
        }
      } else if (kind === "cancel") {
        // One psql for the whole hammer: a process per round would cancel
        // every 20 ms or so, and rarely meet a flight as it begins.
        await db.psql(
          `DO $$
          DECLARE
            until timestamptz := clock_timestamp() + interval '${CANCEL_S} seconds';
          BEGIN
            WHILE clock_timestamp() < until LOOP
              PERFORM pg_stat_clear_snapshot();
              PERFORM pg_cancel_backend(pid) FROM pg_stat_activity
                WHERE backend_type = 'client backend' AND pid <> pg_backend_pid();
              PERFORM pg_sleep(0.001);
            END LOOP;
          END
          $$`,
        );
      } else if (kind === "terminate") {
        for (let round = 0; round < 5; round++) {
          await db.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
          );
          if (round < 4) await sleep(200);
        }
      } else if (kind === "disk") {
        await fillDisk(`${dir}/ballast`);
        await sleep(options.dbDownS * 1000);
        await Deno.remove(`${dir}/ballast`);
      } else {
        await db.halt(kind === "immediate" ? "immediate" : "fast");
        if (kind === "down") await sleep(options.dbDownS * 1000);
        await db.resume();
      }
      fault.up = now();
      for (;;) {
        checkAlive();
        if (fault.ready === null && await ready()) fault.ready = now();
        if (fault.ready !== null && (fault.firstOk !== null || allEnded)) {
          break;
        }
        const at = now();
        if (recoveryLate(fault.up, servers, at, loop.stalls)) {
          const stood = Math.round(stoodStill(loop.stalls, fault.up, at));
          unexpected.push(
            `database fault ${kind}: ${
              fault.ready === null
                ? "/readyz did not answer 200"
                : "no delivery was answered 200"
            } within ${RECOVERY_BOUND_MS}ms of the database being back${
              stood === 0 ? "" : ` (and the ${stood}ms this tool stood still)`
            }`,
          );
          fault.ready ??= now();
          break;
        }
        await sleep(100);
      }
    }
  };

  let exitCode = 1;
  try {
    // Several instances start at once, as a deployment's do.
    await Promise.race([
      Promise.all(servers.map((server) => server.start(deadline))),
      failed.promise.then(() => {
        throw failure;
      }),
    ]);

    // Intents: most authorized (with their hold), some only created.
    const width = String(options.intents).length;
    for (let i = 1; i <= options.intents; i++) {
      const id = `pi_${String(i).padStart(Math.max(4, width), "0")}`;
      const initial: State = behaviourRandom() < 0.15
        ? "created"
        : "authorized";
      const behaviour = pickBehaviour(behaviourRandom);
      plans.push({ id, initial, behaviour });
      stub.behaviours.set(id, behaviour);
      jobs.set(id, {
        intentId: id,
        jobId: `${id}/settle`,
        delivery: 0,
        ended: false,
        poisoned: [],
        lost: new Set(),
        unread: new Set(),
        lostCopyAfterAck: false,
        generation: 1,
        queueLimit: behaviourRandom() < GIVE_UP_RATE
          ? 1 + Math.floor(behaviourRandom() * (policy.maxDeliveries + 1))
          : null,
        counted: false,
        countedPushes: new Map(),
        giveUpInFlight: behaviourRandom() < 0.6,
        messageId: `m-${id}-1`,
        publishTime: new Date().toISOString(),
        lane: laneOf(behaviourRandom()),
        quiet: [],
        idle: false,
        redrives: 0,
        redrivenGeneration: 0,
      });
      const lane = jobs.get(id)!.lane;
      if (lane !== "generic") {
        if (lane === "qstash") stats.qstashJobs++;
        else stats.pubsubJobs++;
        if (behaviourRandom() < EARLY_GIVE_UP) earlyGiveUp(jobs.get(id)!);
      }
      drawSubscription(jobs.get(id)!);
    }
    await Promise.all(plans.map((plan) =>
      limiter.run(async () => {
        const { status, body } = await ops("/v1/intents", {
          method: "POST",
          body: JSON.stringify({ id: plan.id, state: plan.initial }),
        });
        if (status !== 201) {
          throw new Error(
            `could not create ${plan.id}: ${status} ${JSON.stringify(body)}`,
          );
        }
      })
    ));

    // With database faults, the jobs are published over the faults' span,
    // so that deliveries meet every fault and every recovery.
    const spreadMs = options.dbFaults.reduce(
      (ms, kind) =>
        ms + 1500 + (kind === "down" ? options.dbDownS * 1000 : 0) +
        (kind === "cancel" ? CANCEL_S * 1000 : 0),
      0,
    );
    const work = Promise.all([
      Promise.all(
        [...jobs.values()].map(async (job) => {
          if (spreadMs > 0) await sleep(Math.floor(queueRandom() * spreadMs));
          await runJob(job);
        }),
      ).then(() => {
        jobsDone = true;
      }),
      redriver(),
    ]).then(() => {
      allEnded = true;
    });
    const background = Promise.all([
      killer(),
      sampler(),
      faulter(),
      rotator(),
    ]);
    // The operator works on until the last late copy is answered.
    const operating = operator();
    await Promise.race([
      Promise.all([work, background]),
      failed.promise.then(() => {
        throw failure;
      }),
    ]);
    // A queue that gave up does not wait for the deliveries it left in
    // flight; the check does: one may still move the intent.
    while (inflight.size > 0) {
      await Promise.race([
        Promise.all([...inflight]),
        failed.promise.then(() => {
          throw failure;
        }),
      ]);
    }
    allEnded = true;
    const jobsEnded = now() - started;
    // The last delivery may have moved a payment to review after the
    // sampler's last read of it: each one not last seen in a final state
    // is read once more, so that the operator is waited for below.
    await Promise.all(
      plans.filter((plan) => {
        const state = observed.get(plan.id).at(-1)?.state;
        return state !== "settled" && state !== "failed" &&
          state !== "created";
      }).map((plan) =>
        limiter.run(async () => {
          const sentAt = now();
          const answer = observed.send(plan.id);
          const view = await readIntent(plan.id);
          if (view === null) return;
          answer({ state: view.intent.state, sentAt, answeredAt: now() });
          holdSeen(plan.id, view, "a sample");
        })
      ),
    );
    // The operator finishes the payments in review with nothing on the
    // chain (each fail of one voids its hold; the first, in each server,
    // is told to come again a lease later: 409 send-in-flight), for a few
    // leases at most.
    const finishBy = performance.now() + OPERATOR_FINISH_MS;
    while (
      !failure && performance.now() < finishBy &&
      !operatorMayStop(
        plans.map((p) => ({
          resolved: resolvedBy.has(p.id),
          resolving: resolving.has(p.id),
          onChain: stub.onChain(p.id),
          storeFailed: storeFailedResolutions.has(p.id),
          lastSeen: observed.get(p.id).at(-1)?.state,
        })),
        resolveAgain.size,
      )
    ) {
      await sleep(50);
    }
    operatorDone = true;
    await operating;
    const operatorEnded = now() - started;
    const runMs = now() - started;

    // Read everything back over the ops API (the last server is healthy).
    const finals = new Map<string, IntentView>();
    await Promise.all(plans.map((plan) =>
      limiter.run(async () => {
        const { status, body } = await ops(`/v1/intents/${plan.id}`);
        if (status === 200 && isIntentView(body)) finals.set(plan.id, body);
        else if (status === 200) {
          unexpected.push(
            `${plan.id}: GET /v1/intents/${plan.id} answered 200 with ${
              JSON.stringify(body)?.slice(0, 200)
            }, not an intent`,
          );
        }
      })
    ));
    // A resolution the store failed under completed by now (landed whole,
    // its answer lost, or made again).
    for (const [id, failure] of storeFailedResolutions) {
      const view = finals.get(id);
      if (view === undefined) continue;
      const stuck = resolutionStuck(
        id,
        failure,
        view.intent.state,
        view.intent.hold,
      );
      if (stuck !== null) unexpected.push(stuck);
    }
    // The payments in review with nothing on the chain the operator left
    // unresolved, with its last answer for each.
    const unresolved = plans.filter((p) =>
      finals.get(p.id)?.intent.state === "needs_review" && !stub.onChain(p.id)
    ).map((p) => ({ id: p.id, last: lastResolution.get(p.id) }));
    const deadLetters: DeadLetterView[] = [];
    let pages = 0;
    for (let cursor: string | null = null;;) {
      const query: string = cursor === null
        ? ""
        : `&cursor=${encodeURIComponent(cursor)}`;
      const { status, body } = await ops(`/v1/dead-letters?limit=50${query}`);
      if (status !== 200) {
        throw new Error(`GET /v1/dead-letters answered ${status}`);
      }
      const page = readLetterPage(body);
      if (page.wrong !== null) {
        unexpected.push(
          `GET /v1/dead-letters answered 200 with ${page.wrong}`,
        );
      }
      deadLetters.push(...page.letters);
      pages++;
      if (page.cursor === null) break;
      cursor = page.cursor;
    }

    loop.stop();
    const { violations, orphans, unclear } = check({
      plans,
      finals,
      deadLetters,
      jobs,
      observed,
      stub,
      kills: stats.kills,
      stalls: loop.stalls,
      started,
      resolvedBy,
    });
    violations.push(...unexpected);
    for (const what of google.standIn.refused) {
      violations.push(
        `the service reached past Google's key endpoint through the proxy: ${what}`,
      );
    }
    for (const what of qstash.refused) {
      violations.push(`QStash's API refused a publish: ${what}`);
    }
    if (stats.pubsubJobs > 0 && google.standIn.fetches === 0) {
      violations.push(
        "Pub/Sub pushes were answered, yet the service never fetched Google's keys: the lane did not verify what it claims",
      );
    }
    if (stats.pubsubJobs > 0 && rotation.withdrawnAt === null) {
      violations.push(
        "every job ended before Google's keys were rotated and the old one withdrawn: the lane did not check what it claims (run more intents)",
      );
    }
    // Each process fetches Google's keys once, then each of its two
    // verifiers at most once a refetch interval for a kid it does not
    // know (the rotation's, a forger's). Generation g runs from the end of
    // kill g - 1 to the end of kill g (the next starts after it). With
    // several instances at once, whose fetches the stand-in cannot tell
    // apart, the bound is the sum of every process's, each instance's
    // processes dated by its own kills.
    const ended = now();
    const fetchesBy = several ? [] : fetchesByGeneration(
      google.standIn.fetchedAt,
      stats.kills,
      started,
      ended,
    );
    if (several) {
      const { processes, allowed } = fleetKeyFetchesAllowed(
        stats.kills,
        options.instances,
        started,
        ended,
      );
      const fetches = google.standIn.fetchedAt.length;
      if (fetches > allowed) {
        violations.push(
          `the ${processes} server processes fetched Google's keys ${fetches} times (at most ${allowed}: each once, then once per verifier and ${
            formatDuration(JWKS_REFETCH_INTERVAL_MS)
          } for an unknown kid): the refetch is not rate-limited`,
        );
      }
      // A send that names no instance of the run would be excused by a
      // kill of any: the checks would pass what they must flag.
      const unnamed = [...stub.sends.values()].flat().filter((send) =>
        !Number.isInteger(send.instance) || send.instance! < 0 ||
        send.instance! >= options.instances
      ).length;
      if (unnamed > 0) {
        violations.push(
          `${unnamed} /send(s) reached the signer without the path of one of the ${options.instances} instances (/i1 to /i${options.instances}): a kill of one would excuse them all`,
        );
      }
    }
    for (const { generation, fetches, lifeMs } of fetchesBy) {
      const allowed = keyFetchesAllowed(lifeMs);
      if (fetches > allowed) {
        violations.push(
          `server ${generation} fetched Google's keys ${fetches} times in ${
            (lifeMs / 1000).toFixed(1)
          }s (at most ${allowed}: once, then once per verifier and ${
            formatDuration(JWKS_REFETCH_INTERVAL_MS)
          } for an unknown kid): the refetch is not rate-limited`,
        );
      }
    }

    // Summary.
    const states = new Map<string, number>();
    const byBehaviour = new Map<string, Map<string, number>>();
    for (const plan of plans) {
      const state = finals.get(plan.id)?.intent.state ?? "missing";
      states.set(state, (states.get(state) ?? 0) + 1);
      const key = plan.initial === "created" ? "(created)" : plan.behaviour;
      const row = byBehaviour.get(key) ?? new Map<string, number>();
      row.set(state, (row.get(state) ?? 0) + 1);
      byBehaviour.set(key, row);
    }
    const show = (m: ReadonlyMap<unknown, number>) =>
      [...m].map(([k, v]) => `${k} ${v}`).join(", ");
    const causes = new Map<string, number>();
    for (const letter of deadLetters) {
      causes.set(letter.cause, (causes.get(letter.cause) ?? 0) + 1);
    }
    const authorized = plans.filter((p) => p.initial === "authorized").length;
    const storeLetters = deadLetters.filter((l) =>
      STORE_ERROR.test(l.lastError)
    );
    const sends = [...stub.sends.values()].reduce((n, s) => n + s.length, 0);
    console.log(
      [
        `crash test   seed ${options.seed}, ${options.intents} intents (${authorized} authorized, ${
          options.intents - authorized
        } created), concurrency ${options.concurrency}${
          several ? `, ${options.instances} instances on the one store` : ""
        }`,
        `store        ${
          options.store === "postgres"
            ? "PostgresStore (a PostgreSQL server of this run)"
            : options.store === "pgbouncer"
            ? "PostgresStore through PgBouncer in transaction mode (?prepare=false)"
            : "KvStore (a SQLite file)"
        }`,
        `policy       ${describePolicy(policy)}; stuck after ${
          formatDuration(policy.stuckAfterMs)
        } (= rescue window); lease ${
          formatDuration(LEASE_MS)
        }; sender timeout ${formatDuration(SENDER_TIMEOUT_MS)}`,
        `kills        ${stats.kills.length} of ${options.kills} (SIGKILL), server restarts ${stats.restarts}${
          refusals() === 0
            ? ""
            : `; started again after refusing to start ${refusals()} (a database fault cut its migration; at most ${
              START_TRIES - 1
            } in a row besides those begun before the database was back)`
        }`,
        ...(stats.dbFaults.length === 0 ? [] : [
          `db faults    ${stats.dbFaults.length} of ${options.dbFaults.length}; slowest delivery answer ${
            (stats.slowestMs / 1000).toFixed(1)
          }s`,
          ...stats.dbFaults.map((f) => {
            const after = (t: number | null) =>
              t === null || f.up === null
                ? "never"
                : `${((t - f.up) / 1000).toFixed(2)}s`;
            return [
              `  ${f.kind.padEnd(9)} at ${
                ((f.from - started) / 1000).toFixed(1)
              }s, database out ${
                f.up === null ? "?" : ((f.up - f.from) / 1000).toFixed(2)
              }s; then /readyz 200 after ${
                after(f.ready)
              }, a delivery 200 after ${after(f.firstOk)}; answers meanwhile: ${
                show(new Map([...f.statuses].sort()))
              }`,
              ...[...f.texts].sort((a, b) => b[1] - a[1]).slice(0, 6).map((
                [text, count],
              ) => `    ${count}× ${text}`),
            ].join("\n");
          }),
        ]),
        ...(several
          ? [
            `instances    ${options.instances} on the one store: queue requests ${
              spread.requests.join(", ")
            }; kills ${
              servers.map((_, index) =>
                stats.kills.filter((kill) => kill.instance === index).length
              ).join(", ")
            }${
              options.alternate
                ? ` (in turn, ${stats.killsWhileOtherDown} while another was down)`
                : ""
            }; ${spread.pairsApart} of ${spread.pairs} requests sent twice at once went to two instances, ${spread.racesApart} of ${spread.races} give-ups raced their delivery from another`,
          ]
          : []),
        `deliveries   ${stats.deliveries} (requests ${stats.requests}, duplicates ${stats.duplicates}, requests lost to kills ${stats.lostRequests})`,
        `answers      ${show(new Map([...stats.statuses].sort()))}`,
        `signer       ${sends} /send, ${stub.confirmed.size} receipts confirmed; ${stats.settledBehindCut.size} intents settled by a delivery behind a write-ahead whose send a kill cut`,
        `samples      ${stats.samples} intent reads during the run`,
        `give-ups     ${stats.giveUps} (${stats.giveUpsInFlight} with the last delivery in flight, ${stats.heldUp} of them held up until after the give-up, ${stats.giveUpRepeats} repeated later), ${stats.republished} jobs published again`,
        `qstash       ${stats.qstashJobs} publications through /v1/qstash (give-ups on /v1/qstash/failed), ${stats.lateCopies} late copies after an acked give-up; ${stats.killsInGiveUp} kills during a give-up or late copy`,
        `pubsub       ${stats.pubsubJobs} publications through /v1/pubsub (Pub/Sub's own backoff, ${
          formatDuration(pubsubMinBackoffMs)
        } to ${
          formatDuration(pubsubMaxBackoffMs)
        }; ${stats.pubsubCounted} without deliveryAttempt, counted by the service and acked within ${stats.countedMostPushes} pushes), ${stats.deadLetterPushes} dead-letter pushes, ${stats.pubsubLateCopies} late copies after an acked one, ${stats.misdirected} with another audience's token (each must be 401)`,
        `google keys  ${
          rotation.listedAt === null
            ? "never rotated"
            : `${google.next.kid} listed at ${
              ((rotation.listedAt - started) / 1000).toFixed(2)
            }s, ${google.issuer.kid} withdrawn at ${
              rotation.withdrawnAt === null
                ? "never"
                : `${((rotation.withdrawnAt - started) / 1000).toFixed(2)}s`
            }`
        }; pushes with ${google.issuer.kid}'s token after the listing ${stats.oldKeyPushes}, with ${google.next.kid}'s ${stats.newKeyPushes}, with an expired token of the withdrawn key ${stats.stalePushes} (each must be 401, then pushed again), with a made-up kid ${stats.forgedPushes} (each must be 401); fetched ${google.standIn.fetches} times through the stand-in (${
          several
            ? `by ${options.instances} instances at once`
            : `by server: ${fetchesBy.map((g) => g.fetches).join(", ")}`
        })`,
        `redrives     ${stats.redriveRounds} rounds on listed letters (${stats.redrivePairs} two at once, ${stats.redriveRetries} tried again after a 503 or a lost answer): answers ${
          show(new Map([...stats.redriveStatuses].sort()))
        }; QStash took ${stats.redrivePublished} jobs (delivered through /v1/qstash), dropped ${qstash.deduplicated} repeated deduplication ids, was down for ${qstash.down} and lost the answer to ${qstash.lostAnswers}; ${stats.killsInRedrive} kills during a redrive`,
        `replays      ${stats.replays} signed requests sent again (each must be 401)`,
        `operator     ${
          stats.resolved.size === 0 ? "0" : show(stats.resolved)
        } resolutions of needs_review (to, status)${
          options.dbFaults.includes("cancel")
            ? `; sent during a cancel fault: ${
              stats.resolvedInCancel.size === 0
                ? "none"
                : show(stats.resolvedInCancel)
            }`
            : ""
        }`,
        `unresolved   ${unresolved.length} payments in review at the end with nothing on the chain (the operator fails each once no send of it can run; it stopped at ${
          (operatorEnded / 1000).toFixed(2)
        }s, every job having ended at ${(jobsEnded / 1000).toFixed(2)}s)${
          unresolved.length === 0
            ? ""
            : `: ${
              unresolved.slice(0, 12).map(({ id, last }) =>
                `${id} (${last ?? "never tried"})`
              ).join(", ")
            }${unresolved.length > 12 ? ", …" : ""}`
        }`,
        `final        ${show(states)}`,
        ...[...byBehaviour].sort().map(([behaviour, row]) =>
          `  ${behaviour.padEnd(24)}${show(row)}`
        ),
        `dead letters ${deadLetters.length} in ${pages} pages (${
          show(causes)
        })${
          storeLetters.length === 0
            ? ""
            : `; ${storeLetters.length} poisoned on a store error: ${
              storeLetters.slice(0, 5).map((l) =>
                `${l.intentId} ${
                  JSON.stringify(l.lastError.slice(0, 120))
                } → ${l.resolution}`
              ).join("; ")
            }`
        }`,
        `orphans      ${
          orphans.length === 0
            ? "0"
            : `${orphans.length} (a duplicate died after the ack): ${
              orphans.join(", ")
            }`
        }`,
        `stalls       the tool's own event loop stood still at most ${
          formatDuration(
            Math.round(Math.max(0, ...loop.stalls.map((w) => w.to - w.from))),
          )
        } (${loop.stalls.length} over ${formatDuration(loop.minMs)}, ${
          loop.stalls.filter((w) => w.to - w.from > SENDER_TIMEOUT_MS).length
        } over the sender timeout)${
          unclear.length === 0
            ? ""
            : `; overlaps at the signer its clock cannot show, not counted (I5): ${unclear.length}`
        }`,
        ...unclear.slice(0, 20).map((u) => `  ${u}`),
        `violations   ${violations.length}`,
        ...violations.slice(0, 50).map((v) => `  ${v}`),
        `time         ${(runMs / 1000).toFixed(1)}s run, ${
          ((now() - started) / 1000).toFixed(1)
        }s in all`,
      ].join("\n"),
    );
    if (options.trace) {
      // The trail of every intent named by a violation or an orphan.
      const flagged = new Set(
        [...violations, ...orphans].flatMap((line) =>
          /^(pi_\w+)/.exec(line)?.[1] ?? []
        ),
      );
      for (const id of flagged) {
        const view = finals.get(id);
        const letter = view?.deadLetter;
        console.log(
          `trail of ${id} (${
            describePlan(plans.find((p) => p.id === id))
          }; ends ${view?.intent.state ?? "missing"}, ${
            letter
              ? `dead letter #${letter.deliveries} ${letter.cause} → ${letter.resolution}`
              : "no dead letter"
          }):\n${trails.show(id)}`,
        );
      }
    }
    // A run that crashed the service fewer times than asked proves less than
    // it says: the kills come after a number of answers sized from
    // --intents, and every job ended first.
    const killed = stats.kills.length;
    if (killed < options.kills) {
      console.error(
        `crash: only ${killed} of ${options.kills} kills happened before every job had ended: run more intents per kill (CI runs 20 a kill, e.g. --intents ${
          Math.max(options.intents * 2, 20 * options.kills)
        } --kills ${options.kills})`,
      );
    }
    const faulted = stats.dbFaults.length;
    if (faulted < options.dbFaults.length) {
      console.error(
        `crash: only ${faulted} of ${options.dbFaults.length} database faults happened before every job had ended: run more intents`,
      );
    }
    // A `cancel` fault is there to meet the resolutions too.
    const unmet = options.dbFaults.includes("cancel") &&
      stats.resolvedInCancel.size === 0;
    if (unmet) {
      console.error(
        "crash: the operator resolved no payment while a cancel fault was under way: run more intents",
      );
    }
    exitCode = violations.length === 0 && killed >= options.kills &&
        faulted >= options.dbFaults.length && !unmet
      ? 0
      : 1;
  } catch (error) {
    const reason = failure ?? error as Error;
    allEnded = true;
    const pending = [...jobs.values()].filter((j) => !j.ended).length;
    console.error(
      failedHeadline(options.seed, reason) +
        (jobs.size > 0
          ? `\n${pending} of ${jobs.size} jobs had not ended`
          : "") +
        `\nkills ${stats.kills.length}, restarts ${stats.restarts} (started again after refusing to start ${refusals()}), deliveries ${stats.deliveries}` +
        `\nlast server output:\n${
          servers.map((server) => server.output()).join("\n")
        }`,
    );
    exitCode = 1;
  } finally {
    allEnded = true;
    loop.stop();
    clearTimeout(deadlineTimer);
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    await Promise.all(servers.map((server) => server.stop()));
    await signer.shutdown();
    await qstash.stop();
  }
  return exitCode;
}

/**
 * The command line's entry: 2 on a bad flag, 0 for `--help`, else the
 * crash test's code.
 *
 * @returns The process exit code.
 * @throws {CheckError} If the run could not be set up (see {@linkcode crashTest}).
 */
async function main(): Promise<number> {
  let options: CrashTestOptions;
  try {
    options = parseOptions(Deno.args);
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(USAGE);
      return 0;
    }
    console.error(`crash: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  return await crashTest(options);
}

// Anything that fails before the run starts (its temp dir, PostgreSQL) is
// one line, `crash: <what failed>: <what to do>`, and exit 1.
if (import.meta.main) await runMain("crash", main);
