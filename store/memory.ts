/**
 * The in-memory store: the default for tests, examples and library use.
 * No I/O; every operation is atomic because it runs without an `await`
 * between its read and its write.
 *
 * @module
 */

import { ConflictError } from "./conflict_error.ts";
import { Sweep } from "./_sweep.ts";
import {
  assertClaimable,
  broadcastBegun,
  broadcastRecorded,
  checkClaim,
  checkCount,
  checkCountTtl,
  checkDeadLetter,
  checkLease,
  checkMs,
  checkRelease,
  checkResetCount,
  checkUncounted,
  checkWriteOptions,
  CLAIM_GRACE_MS,
  counted,
  type CountRecord,
  cursorAfter,
  frozenBroadcast,
  heldBy,
  type IntentRecord,
  isEarlierCount,
  keptLetter,
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

/**
 * A {@linkcode Store} in a `Map`. Versions are per-intent counters; leases
 * expire by the clock the caller passes in. Delivery counts and replay
 * records expire, swept a few at each write (a replay record 10 minutes
 * after its `expiresAt`, as the other stores keep theirs); intents (their leases with
 * them) and dead letters are kept for as long as the store lives, as a
 * database keeps them: memory grows with the intents and letters, so a
 * service that runs for days keeps them in `KvStore` or `PostgresStore`.
 *
 * @example Create and read an intent
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const intent = await store.getIntent("pi_0001");
 * assert.equal(intent?.state, "authorized");
 * assert.equal(intent?.hold, "pending");
 * assert.equal(intent?.lastBroadcast, null);
 * ```
 */
export class MemoryStore implements Store {
  #intents = new Map<string, { record: IntentRecord; version: number }>();
  #counts = new Map<string, CountRecord>();
  #claims = new Map<string, { expiresAt: number }>();
  #sweepCounts = new Sweep(this.#counts);
  #sweepClaims = new Sweep(this.#claims);
  #leases = new Map<string, LeaseRecord>();
  #deadLetters = new Map<string, StoredDeadLetter>();
  /** The letters newest first, sorted once for every page until a letter is kept or taken. */
  #letterOrder: readonly StoredDeadLetter[] | null = null;
  #deadLetterVersions = 0;

  /**
   * Constructs a new, empty store. It takes no options: from JavaScript,
   * `new MemoryStore({ prefix })` or `new MemoryStore(url)` would otherwise
   * run on an unshared store in this process's memory, as if the argument
   * had been honoured.
   *
   * @param options Nothing, or an empty object.
   * @throws {TypeError} If `options` is anything else.
   */
  constructor(options?: Record<string, never>) {
    if (options === undefined) return;
    // Only the key is named: a value (a database URL) may hold a password.
    const key = typeof options === "object" && options !== null
      ? Object.keys(options)[0]
      : undefined;
    // An array is no options object, empty or not (its items are no keys).
    const array = Array.isArray(options);
    if (
      typeof options === "object" && options !== null && !array &&
      key === undefined
    ) {
      return;
    }
    throw new TypeError(
      `Cannot create MemoryStore as it takes no options: current value is ${
        array
          ? "an array"
          : key === undefined
          ? options === null ? "null" : typeof options
          : `an object with ${JSON.stringify(key.slice(0, 40))}`
      }; it keeps intents in this process's memory, one store per instance: pass nothing, or use KvStore or PostgresStore for a prefix or a database`,
    );
  }

  #read(id: string): Intent | null {
    const entry = this.#intents.get(id);
    return entry
      ? Object.freeze({ ...entry.record, version: String(entry.version) })
      : null;
  }

  #write(id: string, written: IntentRecord): Intent {
    const version = (this.#intents.get(id)?.version ?? 0) + 1;
    // The store keeps what it was given as it was: a caller's later change
    // to the broadcast it passed, or to one it read, changes nothing here.
    const lastBroadcast = frozenBroadcast(written.lastBroadcast);
    const record = lastBroadcast === written.lastBroadcast
      ? written
      : { ...written, lastBroadcast };
    this.#intents.set(id, { record, version });
    return Object.freeze({ ...record, version: String(version) });
  }

  #expect(id: string, version: string): IntentRecord {
    const entry = this.#intents.get(id);
    if (!entry) {
      throw new ConflictError(
        `Cannot write intent ${id} as it does not exist`,
        {
          refused: true,
        },
      );
    }
    if (String(entry.version) !== version) {
      throw new ConflictError(
        `Cannot write intent ${id} as it changed since it was read; re-read it`,
      );
    }
    return entry.record;
  }

  /**
   * One delivery write: checks the version, the lease and the claim, then
   * applies everything. No await between the checks and the writes, so it
   * is one commit.
   */
  #writeIntent(
    id: string,
    version: string,
    update: (record: IntentRecord) => IntentRecord,
    options: WriteOptions,
    deadLetter?: DeadLetter,
    late?: (record: IntentRecord) => IntentRecord | null,
  ): Intent {
    // The arguments first, as a built-in error at the entry: a malformed
    // one is a TypeError whatever the intent's state, in every store.
    checkWriteOptions(options, deadLetter);
    const entry = this.#intents.get(id);
    if (late && entry && isEarlierCount(version, entry.version)) {
      // A send that outlived its settling: its record, on the version it
      // read, is written on the intent as it is now (lateBroadcastRecorded).
      // A version the intent never had is a race lost (#expect), as in
      // every store.
      const next = late(entry.record);
      if (next !== null) {
        return this.#writeIntent(
          id,
          String(entry.version),
          () => next,
          lateOptions(options, this.#leases.get(id) ?? null),
        );
      }
    }
    const record = this.#expect(id, version);
    // The give-up marks right after the version, as the other stores
    // check them (with their read): a late copy of a message the queue
    // gave up on is answered so, whatever else its write meets.
    for (const key of uncountedKeys(options)) {
      checkUncounted(
        id,
        key,
        this.#counts.get(key) ?? null,
        options.lease?.now,
      );
    }
    const next = update(record);
    const lease = options.lease
      ? leaseAfter(id, this.#leases.get(id) ?? null, options.lease)
      : undefined;
    if (options.claim) this.#checkClaim(options.claim);
    this.#setLease(id, lease);
    if (options.claim) this.#claim(options.claim);
    if (deadLetter) this.#putDeadLetter(deadLetter, options.resetCount);
    return this.#write(id, next);
  }

  /**
   * Leaves the intent's lease as a write's `leaseAfter` says: its own kept,
   * or (`null`) removed: its own released, or another's that lapsed (a live
   * one threw), so a crashed delivery's lease does not outlive it on an
   * intent nobody writes again. `undefined`: the write carried none.
   */
  #setLease(id: string, lease: LeaseRecord | null | undefined): void {
    if (lease) this.#leases.set(id, lease);
    else if (lease === null) this.#leases.delete(id);
  }

  #checkClaim(claim: Claim): void {
    assertClaimable(this.#claims.get(claim.key) ?? null, claim);
  }

  #claim(claim: Claim): void {
    this.#claims.delete(claim.key);
    this.#claims.set(claim.key, { expiresAt: claim.expiresAt });
    // Swept CLAIM_GRACE_MS late, as the other stores delete theirs: a
    // replay is decided by `expiresAt` against the admitting clock, but a
    // record swept by a clock running ahead (one that NTP then steps back)
    // would be gone while its signature still verifies.
    this.#sweepClaims.run(claim.now - CLAIM_GRACE_MS);
  }

  #putDeadLetter(deadLetter: DeadLetter, resetCount?: string): void {
    // The poisoned run of deliveries ends here: a job published again for
    // the intent is counted from 1.
    this.#counts.delete(deadLetter.jobId);
    if (resetCount !== undefined) this.#counts.delete(resetCount);
    // Frozen, its queue ids too: it is handed out as it is by the reads.
    const { queue } = deadLetter;
    this.#letterOrder = null;
    this.#deadLetters.set(
      deadLetter.jobId,
      Object.freeze({
        ...keptLetter(deadLetter),
        ...(queue ? { queue: Object.freeze({ ...queue }) } : {}),
        version: String(++this.#deadLetterVersions),
      }),
    );
  }

  #hold(id: string, op: "record" | "void" | "capture"): HoldState {
    const entry = this.#intents.get(id);
    if (!entry) {
      throw new ConflictError(
        `Cannot ${op} the hold of ${id} as the intent does not exist`,
        { refused: true },
      );
    }
    const hold = heldBy(entry.record, op);
    if (hold !== entry.record.hold) this.#write(id, { ...entry.record, hold });
    return hold;
  }

  /**
   * Creates an intent (setup and admin).
   *
   * @param intent The intent's fields.
   * @returns The intent as stored.
   * @throws {ConflictError} If an intent with that id exists.
   * @throws {TypeError} If a field is invalid or one a new intent does not
   * take (a misspelling; an intent's `version` is ignored).
   */
  createIntent(intent: NewIntent): Promise<Intent> {
    return attempt(() => {
      const record = newIntentRecord(intent);
      if (this.#intents.has(record.id)) {
        throw new ConflictError(
          `Cannot create intent ${record.id} as it exists`,
          { refused: true },
        );
      }
      return this.#write(record.id, record);
    });
  }

  /**
   * Reads an intent with its hold and last broadcast.
   *
   * @param id The intent id.
   * @returns The intent, or `null` if there is none.
   */
  getIntent(id: string): Promise<Intent | null> {
    return Promise.resolve(this.#read(id));
  }

  /**
   * Moves an intent along the transition table, in one commit with its
   * ledger change, dead letter, lease and claim.
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
    options?: WriteOptions,
  ): Promise<Intent> {
    const refused = transitionRefusal(id, change);
    if (refused !== undefined) return Promise.reject(refused);
    options ??= {};
    return attempt(() =>
      this.#writeIntent(
        id,
        change.version,
        (record) => transitioned(record, change),
        options,
        change.deadLetter,
      )
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
    options?: WriteOptions,
  ): Promise<Intent> {
    options ??= {};
    return attempt(() =>
      this.#writeIntent(
        id,
        version,
        (record) => broadcastBegun(record, at),
        options,
      )
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
    options?: WriteOptions,
  ): Promise<Intent> {
    options ??= {};
    return attempt(() =>
      this.#writeIntent(
        id,
        version,
        (record) => broadcastRecorded(record, broadcast),
        options,
        undefined,
        (record) => lateBroadcastRecorded(record, broadcast),
      )
    );
  }

  /**
   * Records a `pending` hold before authorization. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  recordHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "record"));
  }

  /**
   * Voids the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  voidHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "void"));
  }

  /**
   * Captures the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  captureHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "capture"));
  }

  /**
   * Counts a delivery and/or claims a replay record, in one commit.
   *
   * @param admission What to count and claim, and the time.
   * @returns The delivery number if counted, else `null`.
   * @throws {ReplayError} If the claim was already used.
   */
  admit(admission: Admission): Promise<number | null> {
    return attempt(() => {
      checkMs("now", admission.now);
      // Before the claim is written: a refused admission writes nothing.
      if (admission.ttlMs !== undefined) checkCountTtl(admission.ttlMs);
      checkCount(admission.count);
      if (admission.claim) this.#checkClaim(admission.claim);
      if (admission.claim) this.#claim(admission.claim);
      if (admission.count === undefined) return null;
      return this.#count(admission.count, admission.now, admission.ttlMs);
    });
  }

  /** Counts one more under `key` at `now`, living `ttlMs`: the count. */
  #count(key: string, now: number, ttlMs: number | undefined): number {
    const next = counted(this.#counts.get(key) ?? null, now, ttlMs);
    this.#counts.delete(key);
    this.#counts.set(key, next);
    this.#sweepCounts.run(now);
    return next.n;
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
  deliveries(jobId: string, now?: number): Promise<number> {
    return attempt(() => {
      if (now !== undefined) checkMs("now", now);
      const count = this.#counts.get(jobId);
      if (count === undefined) return 0;
      return now !== undefined && count.expiresAt <= now ? 0 : count.n;
    });
  }

  /**
   * Keeps a dead letter, replacing an older one for the same job, and
   * resets the job's delivery count.
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
    options?:
      & Pick<WriteOptions, "claim" | "resetCount" | "lease">
      & { readonly intentVersion?: string; readonly marks?: Marks },
  ): Promise<void> {
    options ??= {};
    return attempt(() => {
      checkDeadLetter(deadLetter);
      checkResetCount(options.resetCount);
      const { marks } = options;
      const keys = markKeys(marks, deadLetter, options.resetCount);
      const id = deadLetter.intentId;
      if (options.claim) checkClaim(options.claim);
      if (options.lease && options.intentVersion === undefined) {
        throw new TypeError(
          "putDeadLetter: a lease needs options.intentVersion, the version of the intent the caller read",
        );
      }
      if (options.lease) checkLease(options.lease);
      if (options.lease && !this.#intents.has(id)) {
        throw new ConflictError(
          `Cannot keep the dead letter of ${deadLetter.jobId} as the intent does not exist`,
          { refused: true },
        );
      }
      // An intent not there is not at the version read: a race lost, as
      // in the other stores, which the caller decides again on a fresh
      // read (one that finds no intent keeps the letter without a version).
      if (
        options.intentVersion !== undefined &&
        String(this.#intents.get(id)?.version) !== options.intentVersion
      ) {
        throw new ConflictError(
          `Cannot keep the dead letter of ${deadLetter.jobId} as intent ${id} changed since it was read; re-read it`,
        );
      }
      const lease = options.lease
        ? leaseAfter(id, this.#leases.get(id) ?? null, options.lease)
        : undefined;
      if (options.claim) this.#checkClaim(options.claim);
      this.#setLease(id, lease);
      if (options.claim) this.#claim(options.claim);
      this.#putDeadLetter(deadLetter, options.resetCount);
      for (const key of keys) this.#count(key, marks!.now, marks!.ttlMs);
    });
  }

  /**
   * Releases the intent's lease if `owner` holds it (live or lapsed), and
   * moves the intent's version: a write decided on a read from before the
   * release is refused as a race lost.
   *
   * @param intentId The intent.
   * @param owner The delivery that took the lease.
   * @throws {TypeError} If either is not a non-empty string.
   */
  releaseLease(intentId: string, owner: string): Promise<void> {
    return attempt(() => {
      checkRelease(intentId, owner);
      if (this.#leases.get(intentId)?.owner === owner) {
        this.#leases.delete(intentId);
        const entry = this.#intents.get(intentId);
        if (entry) this.#write(intentId, entry.record);
      }
    });
  }

  /**
   * Reads the dead letter of a job.
   *
   * @param jobId The job id.
   * @returns The dead letter with its version, or `null`.
   */
  getDeadLetter(jobId: string): Promise<StoredDeadLetter | null> {
    return Promise.resolve(this.#deadLetters.get(jobId) ?? null);
  }

  /**
   * Lists dead letters, newest first.
   *
   * @param options The page size (1–1000, default 50) and the cursor of the previous page.
   * @returns One page.
   * @throws {RangeError} If `limit` is out of range.
   * @throws {TypeError} If `cursor` is not one this store returned.
   */
  listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage> {
    options ??= {};
    return attempt(() => {
      const limit = pageLimit(options.limit);
      const after = options.cursor ? readCursor(options.cursor) : null;
      const sorted = this.#letterOrder ??= [...this.#deadLetters.values()]
        .sort(newestFirst);
      const start = after ? firstAfter(sorted, after) : 0;
      const items = sorted.slice(start, start + limit);
      const last = items.at(-1);
      const more = start + limit < sorted.length;
      return {
        items,
        cursor: more && last ? cursorAfter(last) : null,
      };
    });
  }

  /**
   * Takes out exactly the dead letter read and resets its job's count
   * (left as it is with `keepCount`).
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
    options?: { readonly enqueue?: unknown; readonly keepCount?: boolean },
  ): Promise<DeadLetter> {
    options ??= {};
    return attempt(() => {
      if (options.enqueue !== undefined) {
        throw new TypeError(
          "Cannot enqueue in a redrive as MemoryStore has no queue: publish the job yourself",
        );
      }
      const stored = this.#deadLetters.get(jobId);
      if (stored === undefined || stored.version !== version) {
        throw new ConflictError(
          `Cannot redrive ${jobId} as its dead letter changed or is gone since it was read; re-read it`,
        );
      }
      this.#deadLetters.delete(jobId);
      this.#letterOrder = null;
      if (options.keepCount !== true) this.#counts.delete(jobId);
      const { version: _, ...deadLetter } = stored;
      return deadLetter;
    });
  }
}

function newestFirst(
  a: Pick<DeadLetter, "poisonedAt" | "jobId">,
  b: Pick<DeadLetter, "poisonedAt" | "jobId">,
): number {
  return b.poisonedAt - a.poisonedAt || byCodePoint(a.jobId, b.jobId);
}

/** The index of the first letter of `sorted` after `after` (its length if none). */
function firstAfter(
  sorted: readonly StoredDeadLetter[],
  after: Pick<DeadLetter, "poisonedAt" | "jobId">,
): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (newestFirst(sorted[mid]!, after) > 0) high = mid;
    else low = mid + 1;
  }
  return low;
}

function attempt<T>(write: () => T): Promise<T> {
  try {
    return Promise.resolve(write());
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Orders strings by code point, as KvStore (UTF-8 keys) and PostgresStore
 * (`COLLATE "C"`) do; `<` compares UTF-16 code units, which puts U+FF01
 * after an emoji. Code units order as code points but for surrogates: a
 * pair stands for a code point above U+FFFF, so where both units are at
 * U+D800 or above, surrogates move above U+E000–U+FFFF (ids hold no lone
 * surrogate: every store refuses one). Compared unit by unit, with no
 * copy, as a page of many letters of one millisecond sorts them all.
 */
function byCodePoint(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}
