/**
 * Group commit for Deno KV: atomic operations that wait while a commit is
 * in flight go out together, as one commit.
 *
 * A Deno KV on a SQLite file commits one transaction at a time, and a
 * commit costs little more for holding more (on our machines about 1,900
 * one-write commits/s with 50 in flight, 1,700 with 1, and 60,000 writes/s
 * at 64 a commit: `deno task kv-commits`), so a delivery's write is bound
 * by the commit rate, not by its size. Databases answer this with group
 * commit; this is that, above the KV handle:
 *
 * - an operation that finds no commit in flight commits at once, alone:
 *   no added latency when the store is quiet;
 * - operations that arrive while a commit is in flight queue, and when it
 *   returns, the queue goes out as one commit (their checks and mutations
 *   side by side), within Deno KV's limits;
 * - two operations that touch a common key (checked or written) never
 *   share a commit: both checks would pass on the same versionstamp and
 *   both writes would land, a lost update. The later one waits for the
 *   next commit. Keys are compared as Deno KV stores them (a lone
 *   surrogate is U+FFFD; byte parts are their bytes); an operation with a
 *   key part of any other kind commits alone;
 * - a group all of whose checks pass is exactly its operations committed
 *   one by one. If a check fails, or the back-end refuses the group (Deno
 *   KV with a `TypeError` or `RangeError`, `@deno/kv` or KV Connect with a
 *   named limit or a 4xx: a limit, a value it cannot store), nothing of it
 *   was written: the group is halved and each half tried
 *   again, down to single operations, so each gets the answer it would
 *   have had alone, and one refused operation among 64 costs 13 commits
 *   (the group, then two per halving), not 65. A back-end that refuses a
 *   group for its checks (`@deno/kv` and a self-hosted `denokv` allow 10,
 *   Deno's own 100) is grouped within 10 from then on;
 *   One exception: a KV Connect client that sent the group again after a
 *   lost answer gets `{ ok: false }` for a group that landed. The halves
 *   then fail their checks too (each operation checks a key it writes, so
 *   none lands twice), each operation ends answered `{ ok: false }`, and
 *   `KvStore` reads back that its write landed: the answers are right, at
 *   the cost of the halvings (about two commits per operation);
 * - a SQLite file that another handle writes too (a second process,
 *   `deno serve --parallel`'s workers) refuses a commit with "database is
 *   locked" when the other wrote between the commit's reads of its checks
 *   and its first write: SQLite's SQLITE_BUSY, which Deno KV's own retry
 *   loop does not catch there. Nothing of it was written, so the group is
 *   committed again, as it is, after a short wait (for up to about 5 s).
 *   Still locked then (a program holds a write transaction open on the
 *   file), every operation of the group gets that error, marked as
 *   nothing written, with no halving;
 * - a SQLite file whose disk is full, or that this process can only
 *   read, refuses the commit and rolls it back ("database or disk is
 *   full", "Can not write to a read-only database."): nothing of it was
 *   written. Halving would only repeat the refusal, so every operation of
 *   the group gets it at once, worded for an operator (what is wrong,
 *   what to do) and marked as nothing written (`_not_written.ts`);
 * - a SQLite file found damaged ("database disk image is malformed",
 *   "file is not a database") fails the commit with an error worded for an
 *   operator (`_damaged_file.ts`), its outcome unknown: every operation of
 *   the group gets it, none is halved or tried again;
 * - any other error (the handle closed, the connection to a remote KV
 *   lost) leaves the outcome unknown, as it would for each operation
 *   alone: every operation of the group gets that error.
 *
 * Every operation in a group gets the group's versionstamp, which is the
 * versionstamp of every key it wrote. Operations are applied between their
 * `commit()` call and its answer. Those that share a key go out in the
 * order of their calls (one that enqueues too: it commits alone, but
 * waits for the earlier ones on its keys): a later one is parked until the
 * earlier is taken into a group, so a backlog of writes on one key costs
 * each take nothing to pass over. Others may not (one parked behind an
 * earlier write goes out after writes called later; one with a key part
 * of a kind Deno KV does not store is not held in line, as Deno KV refuses
 * it).
 * A commit in flight holds every write queued behind it; the commit's own
 * timeout (the handle's) bounds that wait.
 *
 * @module
 */

import type { KvAtomic, KvKey, KvLike } from "./kv.ts";
import { notWritten } from "./_not_written.ts";
import { damagedFile } from "./_damaged_file.ts";
import { closedKv } from "./_closed_kv.ts";

/** How many commits may be in flight at once; the rest wait and group. */
export const IN_FLIGHT = 1;
/** Deno KV's limits on one atomic operation (Deno 2). */
const MAX_CHECKS = 100;
const MAX_MUTATIONS = 1000;
/**
 * The checks a commit may hold on the other back-ends: `@deno/kv` on Node
 * and a self-hosted `denokv` over KV Connect (denokv's `MAX_CHECKS`). A
 * handle that refuses a group for its checks groups within this from then on.
 */
export const STRICT_CHECKS = 10;
/**
 * At most this many operations in one group. (Deno KV's 800 KiB on a
 * commit's keys and values, and its 80 KiB on the keys it sets, are not
 * counted here: a group over either is refused before any I/O and halved.
 * Only keys under a prefix of a kilobyte or more reach 80 KiB in 64 writes.)
 */
const MAX_OPS = 64;
/**
 * How many waiting operations a group's take looks at past its first. No
 * two of them share a key (a later one is parked), so only the limits on
 * checks and mutations leave one out; this bounds the take when they do.
 */
const SCAN = 4 * MAX_OPS;

type Result = { ok: true; versionstamp: string } | { ok: false };
type Check = { readonly key: KvKey; readonly versionstamp: string | null };

type Mutation =
  | {
    readonly type: "set";
    readonly key: KvKey;
    readonly value: unknown;
    readonly options: { expireIn?: number } | undefined;
  }
  | { readonly type: "delete"; readonly key: KvKey }
  | {
    readonly type: "enqueue";
    readonly value: unknown;
    readonly options: { delay?: number } | undefined;
  };

interface Op {
  readonly checks: readonly Check[];
  readonly mutations: readonly Mutation[];
  /**
   * The keys it checks or writes, as Deno KV compares them; `undefined`:
   * a key could not be read (Deno KV will refuse it).
   */
  readonly keys: readonly string[] | undefined;
  /** Whether it commits alone: it enqueues, or a key could not be read. */
  readonly alone: boolean;
  resolve(result: Result): void;
  reject(error: unknown): void;
  /** How many earlier waiting operations share a key with it. */
  waits: number;
  /** The later operations that wait for it to be taken. */
  followers: Op[] | undefined;
}

/** The commit pipeline of one KV handle. */
export class GroupCommit {
  #kv: KvLike;
  /**
   * The operations that may go in the next group, `#queue[#head]` onward,
   * in order: none waits on an earlier one, so no two share a key.
   */
  #queue: Op[] = [];
  #head = 0;
  /**
   * For each key, the last operation submitted with it that is not yet
   * taken: a later one with that key waits for it (its follower), parked
   * outside `#queue` until every operation it waits for is taken.
   */
  #last = new Map<string, Op>();
  #inFlight = 0;
  #canEnqueue: boolean | undefined;
  #maxChecks = MAX_CHECKS;

  /**
   * Constructs a new instance. It does no I/O until the first commit.
   *
   * @param kv The handle every commit goes to.
   */
  constructor(kv: KvLike) {
    this.#kv = kv;
  }

  /** An atomic operation that records what it is given and commits through the group. */
  atomic(): KvAtomic {
    // Whether the handle has a queue (`@deno/kv` may not), asked once.
    this.#canEnqueue ??= typeof this.#kv.atomic().enqueue === "function";
    return this.#canEnqueue ? new QueueRecorder(this) : new Recorder(this);
  }

  /**
   * Queues an operation (a snapshot: later changes to the recorder do not
   * reach it); it commits at once if no commit is in flight.
   */
  submit(
    checks: readonly Check[],
    mutations: readonly Mutation[],
  ): Promise<Result> {
    const { keys, alone } = keysOf(checks, mutations);
    return new Promise<Result>((resolve, reject) => {
      const op: Op = {
        checks,
        mutations,
        keys,
        alone,
        resolve,
        reject,
        waits: 0,
        followers: undefined,
      };
      for (const key of keys ?? []) {
        const before = this.#last.get(key);
        // Once per earlier operation, however many keys they share.
        if (
          before !== undefined && before !== op &&
          before.followers?.at(-1) !== op
        ) {
          (before.followers ??= []).push(op);
          op.waits++;
        }
        this.#last.set(key, op);
      }
      if (op.waits === 0) this.#queue.push(op);
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < IN_FLIGHT && this.#head < this.#queue.length) {
      const group = this.#take();
      this.#inFlight++;
      this.#run(group).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /**
   * Takes the next group off the queue: the first operation (whatever its
   * size: alone, it gets Deno KV's own answer), then, in order, every one
   * of the next {@linkcode SCAN} that fits within the limits and shares no
   * key with the group.
   *
   * The writes parked behind a key are not in the queue, the scan is
   * bounded and the queue is read from a moving head, so a take costs
   * O({@linkcode SCAN}) whatever the backlog. A backlog of writes that all
   * wait on one key (each its own commit) drains in time linear in its
   * length: a scan of the whole queue per take was quadratic (40,000 such
   * writes took 16.5 s on a handle that commits at once; 0.13 s now).
   */
  #take(): Op[] {
    const queue = this.#queue;
    const first = queue[this.#head++]!;
    if (first.alone || this.#head === queue.length) {
      this.#compact();
      this.#taken(first);
      return [first];
    }
    const group: Op[] = [first];
    const keys = new Set(first.keys!);
    let checks = first.checks.length;
    let mutations = first.mutations.length;
    const left: Op[] = [];
    const end = Math.min(queue.length, this.#head + SCAN);
    let i = this.#head;
    for (; i < end && group.length < MAX_OPS; i++) {
      const op = queue[i]!;
      const fits = !op.alone &&
        checks + op.checks.length <= this.#maxChecks &&
        mutations + op.mutations.length <= MAX_MUTATIONS &&
        op.keys!.every((key) => !keys.has(key));
      if (!fits) {
        left.push(op);
        continue;
      }
      for (const key of op.keys!) keys.add(key);
      checks += op.checks.length;
      mutations += op.mutations.length;
      group.push(op);
    }
    // The ones passed over go back, in order, just before the unscanned
    // rest: written in place, never spread into a call (a queue of 150,000
    // overflowed the call stack there, and the pipeline stopped with every
    // write unanswered).
    this.#head = i - left.length;
    for (let j = 0; j < left.length; j++) queue[this.#head + j] = left[j]!;
    this.#compact();
    for (const op of group) this.#taken(op);
    return group;
  }

  /**
   * An operation left the queue for a group: a later one that shares a key
   * with it may go in the next group, once nothing else holds it back.
   */
  #taken(op: Op): void {
    for (const key of op.keys ?? []) {
      if (this.#last.get(key) === op) this.#last.delete(key);
    }
    for (const follower of op.followers ?? []) {
      if (--follower.waits === 0) this.#queue.push(follower);
    }
  }

  /** Drops the taken head of the queue once it is most of the array. */
  #compact(): void {
    const head = this.#head;
    if (head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (head >= 1024 && head * 2 >= this.#queue.length) {
      this.#queue = this.#queue.slice(head);
      this.#head = 0;
    }
  }

  /** Commits a group; settles every one of its operations, never rejects. */
  async #run(group: readonly Op[]): Promise<void> {
    if (group.length === 1) {
      const [op] = group as [Op];
      try {
        op.resolve(await this.#commit(group));
      } catch (error) {
        op.reject(error);
      }
      return;
    }
    let result: Result | undefined;
    try {
      // Building may throw (a value Deno KV cannot store): nothing was
      // sent, so the group is halved below like a refused one.
      const atomic = this.#build(group);
      try {
        result = await this.#commit(group, atomic);
      } catch (error) {
        if (!isRefusal(error) || isLocked(error)) {
          // The outcome is unknown, or the file still locked after every
          // try: each operation alone would see this.
          for (const op of group) op.reject(error);
          return;
        }
        // Refused whole: nothing was written. Halve it below, and if the
        // back-end allows fewer checks than Deno's own, group within them.
        if (tooManyChecks(error, group)) this.#maxChecks = STRICT_CHECKS;
      }
    } catch {
      // Not built: halve it below.
    }
    if (result?.ok) {
      for (const op of group) op.resolve(result);
      return;
    }
    // A check failed or the group was refused: the halves share no key,
    // so they may go at the same time.
    const half = group.length >> 1;
    await Promise.all([
      this.#run(group.slice(0, half)),
      this.#run(group.slice(half)),
    ]);
  }

  /**
   * Commits the group's operations as one atomic, again while a SQLite
   * file another handle writes answers "database is locked" (nothing
   * written): {@linkcode whileLocked}'s tries, then that error, marked as
   * nothing written.
   */
  async #commit(
    group: readonly Op[],
    atomic: KvAtomic = this.#build(group),
  ): Promise<Result> {
    try {
      return await whileLocked((attempt) =>
        (attempt === 1 ? atomic : this.#build(group)).commit()
      );
    } catch (error) {
      throw fileRefusal(error) ?? damagedFile(error, "write") ??
        closedKv(error, "write") ??
        (isLocked(error) ? notWritten(lockedWords(error)) : error);
    }
  }

  /** One atomic of the group's operations, not yet committed. */
  #build(ops: readonly Op[]): KvAtomic {
    const atomic = this.#kv.atomic();
    for (const op of ops) {
      if (op.checks.length > 0) atomic.check(...op.checks);
      for (const mutation of op.mutations) {
        if (mutation.type === "set") {
          if (mutation.options === undefined) {
            atomic.set(mutation.key, mutation.value);
          } else atomic.set(mutation.key, mutation.value, mutation.options);
        } else if (mutation.type === "delete") atomic.delete(mutation.key);
        else if (mutation.options === undefined) {
          atomic.enqueue!(mutation.value);
        } else atomic.enqueue!(mutation.value, mutation.options);
      }
    }
    return atomic;
  }
}

/**
 * How long a commit answered "database is locked" is tried again, from its
 * first try, and the longest wait between two tries: 1, 2, 4, 8, then 16
 * ms. Time, not a count of tries: on a loaded machine each try and each
 * wait runs long, and 320 tries (5 s idle) took over 8 s, past a drain's
 * wait for its deliveries. denokv's own loop for SQLITE_BUSY waits 5 to 20
 * ms between tries, with no end.
 */
const LOCKED_MS = 5_000;
const LOCKED_WAIT_MS = 16;

/**
 * `attempt(1)`, then `attempt(2)` and on while it fails as `locked` says a
 * SQLite file another handle holds refuses it, having written nothing:
 * until a refusal comes {@linkcode LOCKED_MS} (5 s) or more after the
 * first try began, then that last error.
 */
export async function whileLocked<T>(
  attempt: (attempt: number) => Promise<T>,
  locked: (error: unknown) => boolean = isLocked,
): Promise<T> {
  const started = performance.now();
  for (let tries = 1;; tries++) {
    try {
      return await attempt(tries);
    } catch (error) {
      if (!locked(error) || performance.now() - started >= LOCKED_MS) {
        throw error;
      }
    }
    await new Promise((resolve) =>
      setTimeout(resolve, Math.min(LOCKED_WAIT_MS, 2 ** (tries - 1)))
    );
  }
}

/**
 * Whether Deno KV refused a commit as its SQLite file was locked by
 * another handle (SQLITE_BUSY): a `TypeError` "database is locked" on
 * Deno, an `Error` with `code` `"GenericFailure"` from `@deno/kv`'s addon
 * on Node (the same back-end, Rust's backtrace after the words when
 * `RUST_BACKTRACE` is set), raised before the commit wrote anything. denokv's SQLite back-end runs
 * the commit in a deferred transaction: its checks read, then its first
 * write (the bump of the data version) asks for the write lock, and only
 * that step can meet SQLITE_BUSY (a transaction that holds the lock is
 * never refused it again). The statement refused writes nothing, and
 * denokv answers the commit with that error without writing the rest, so
 * nothing of it landed.
 */
function isLocked(error: unknown): error is Error {
  return (error instanceof TypeError ||
    error instanceof Error &&
      (error as { code?: unknown }).code === "GenericFailure") &&
    /^database is locked\b/.test(error.message);
}

/**
 * A commit refused as locked (`error`, {@linkcode isLocked}), in Deno's
 * words, "database is locked": `@deno/kv`'s addon on Node adds its cause
 * ("\n\nCaused by:\n    Error code 5: database is locked") and, when
 * `RUST_BACKTRACE` is set, Rust's backtrace, which a log line would quote.
 * Deno's own `TypeError` as it is; the addon's as an `Error` of its first
 * words, its `cause` the original.
 */
function lockedWords(error: Error): Error {
  if ((error as { code?: unknown }).code !== "GenericFailure") return error;
  const end = error.message.indexOf("\n");
  return end === -1
    ? error
    : new Error(error.message.slice(0, end), { cause: error });
}

/**
 * A commit that SQLite refused for its file, worded for an operator and
 * marked as nothing written; `undefined` for any other error.
 *
 * - "database or disk is full" (SQLITE_FULL): a write of the commit's
 *   frames to the WAL met ENOSPC. The frame that marks the commit is the
 *   last one written, so the transaction never committed, and SQLite
 *   rolled it back: nothing landed, and nothing is recovered from the WAL
 *   at the next open either. Space freed, the same handle writes again.
 * - "Can not write to a read-only database." (Deno KV opened the file
 *   read-only: a read-only volume, a file another user owns) and SQLite's
 *   "attempt to write a readonly database": refused before any write.
 *
 * An I/O error ("disk I/O error") is not one: a failed fsync, or a
 * wal-index that could not grow, may come after the commit's frames are
 * in the WAL, and a later open recovers them; it stays unknown.
 */
function fileRefusal(error: unknown): Error | undefined {
  const message = error instanceof Error ? error.message : "";
  if (/^database or disk is full\b/.test(message)) {
    return notWritten(
      new Error(
        'Cannot write to Deno KV as the disk that holds its SQLite file is full (SQLite: "database or disk is full"): nothing was written. Free space on that disk; writes resume once there is room, without a restart (but Deno KV stops the process, "KV collect expired failed: database or disk is full", when it next deletes expired keys on the full disk: start it again then)',
        { cause: error },
      ),
    );
  }
  const readOnly =
    /^(?:Can not write to a read-only database\.|attempt to write a readonly database\b)/
      .exec(message);
  if (readOnly) {
    return notWritten(
      new Error(
        `Cannot write to Deno KV as its SQLite file is read-only to this process (SQLite: "${
          readOnly[0]
        }"): nothing was written. Make the file, its -wal and -shm files and their folder writable by this process (a volume mounted read-only, files another user owns), then restart the service (a file Deno KV opened read-only stays read-only until it is opened again)`,
        { cause: error },
      ),
    );
  }
  return undefined;
}

/**
 * What the other back-ends answer a commit they refuse before writing
 * anything: `@deno/kv` rejects with a plain `Error` named by the limit
 * (`TooManyChecks`, `AtomicWriteTooLarge`, …, then a backtrace), and
 * a KV Connect client (Deno's, or `@deno/kv` given a URL) with the
 * server's 4xx answer.
 */
const NAMED_REFUSAL =
  /^(?:TooMany[A-Za-z]+|[A-Za-z]+TooLarge|KeyTooLong|ValueTooLong)\b/;
const KV_CONNECT_REFUSAL =
  /^(?:KV Connect failed to call '[^']*' \(status=4\d\d\b|Unexpected response status: 4\d\d\b)/;

/**
 * Whether the back-end refused a commit before writing anything: a limit
 * passed, a key or value it cannot store. Deno KV rejects with a
 * `TypeError` or `RangeError` for these; the other back-ends as
 * {@linkcode NAMED_REFUSAL} and {@linkcode KV_CONNECT_REFUSAL} say.
 */
function isRefusal(error: unknown): boolean {
  if (error instanceof TypeError || error instanceof RangeError) return true;
  const message = error instanceof Error ? error.message : "";
  return NAMED_REFUSAL.test(message) || KV_CONNECT_REFUSAL.test(message);
}

/**
 * Whether a refused group had more checks than {@linkcode STRICT_CHECKS}
 * and the back-end named that limit (`TooManyChecks` from `@deno/kv`,
 * "Too many checks" in a denokv server's 4xx answer). Another refusal
 * (a 401, a 429) leaves the budget as it is.
 */
function tooManyChecks(error: unknown, group: readonly Op[]): boolean {
  let checks = 0;
  for (const op of group) checks += op.checks.length;
  if (checks <= STRICT_CHECKS) return false;
  const message = error instanceof Error ? error.message : "";
  return /TooManyChecks|Too many checks/.test(message);
}

/**
 * The keys an operation checks or writes, as Deno KV compares them
 * (`undefined` if a key part is of a kind this does not know: Deno KV will
 * answer for it), and whether it must commit alone: it enqueues, or its
 * keys are not known. One that enqueues still waits, by its keys, for the
 * earlier writes on them.
 */
function keysOf(
  checks: readonly Check[],
  mutations: readonly Mutation[],
): { keys: string[] | undefined; alone: boolean } {
  const keys: string[] = [];
  let alone = false;
  try {
    for (const { key } of checks) {
      const text = keyOf(key);
      if (text === undefined) return { keys: undefined, alone: true };
      keys.push(text);
    }
    for (const mutation of mutations) {
      if (mutation.type === "enqueue") {
        alone = true;
        continue;
      }
      const text = keyOf(mutation.key);
      if (text === undefined) return { keys: undefined, alone: true };
      keys.push(text);
    }
  } catch {
    // Not an array, a getter that throws: alone.
    return { keys: undefined, alone: true };
  }
  return { keys, alone };
}

/**
 * A key as a string such that two keys Deno KV stores as one give the same
 * string: a string part as Deno KV encodes it (a lone surrogate becomes
 * U+FFFD), a byte part as its bytes, whatever the view. Two different keys
 * may, in contrived cases, give the same string; that only keeps them in
 * different groups. `undefined` for a part of any other kind.
 */
function keyOf(key: KvKey): string | undefined {
  if (!Array.isArray(key)) return undefined;
  let text = "";
  for (const part of key as readonly unknown[]) {
    switch (typeof part) {
      case "string":
        text += `s${wellFormed(part)}\u0000`;
        break;
      case "number":
      case "bigint":
      case "boolean":
        text += `${typeof part}:${String(part)}\u0000`;
        break;
      default:
        if (!ArrayBuffer.isView(part)) return undefined;
        text += `b${hex(part)}\u0000`;
    }
  }
  return text;
}

// A high surrogate not followed by a low one, or a low one not preceded by
// a high one (no `u` flag: these match code units).
const HAS_LONE =
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const EVERY_LONE = new RegExp(HAS_LONE.source, "g");

/** The string with every lone surrogate replaced by U+FFFD, as UTF-8 encoding does. */
function wellFormed(text: string): string {
  return HAS_LONE.test(text) ? text.replace(EVERY_LONE, "\uFFFD") : text;
}

function hex(view: ArrayBufferView): string {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let text = "";
  for (const byte of bytes) text += byte.toString(16).padStart(2, "0");
  return text;
}

/** An atomic operation that records, then commits through the group. */
class Recorder implements KvAtomic {
  #group: GroupCommit;
  protected checks: Check[] = [];
  protected mutations: Mutation[] = [];
  #committed = false;

  constructor(group: GroupCommit) {
    this.#group = group;
  }

  check(...checks: { key: KvKey; versionstamp: string | null }[]): this {
    for (const { key, versionstamp } of checks) {
      this.checks.push({ key, versionstamp });
    }
    return this;
  }

  set(key: KvKey, value: unknown, options?: { expireIn?: number }): this {
    this.mutations.push({ type: "set", key, value, options });
    return this;
  }

  delete(key: KvKey): this {
    this.mutations.push({ type: "delete", key });
    return this;
  }

  commit(): Promise<Result> {
    if (this.#committed) {
      return Promise.reject(
        new TypeError("Cannot commit an atomic operation twice"),
      );
    }
    this.#committed = true;
    // A snapshot: what is added after this call is not committed, as with
    // Deno KV's own atomic.
    return this.#group.submit([...this.checks], [...this.mutations]);
  }
}

/** A recorder on a handle that has a queue: it can enqueue too. */
class QueueRecorder extends Recorder {
  enqueue(value: unknown, options?: { delay?: number }): this {
    this.mutations.push({ type: "enqueue", value, options });
    return this;
  }
}
