/**
 * The in-memory store: the default for tests, examples and library use.
 * No I/O; every operation is atomic because it runs without an `await`
 * between its read and its write.
 *
 * @module
 */

import { ConflictError } from "./conflict_error.ts";
import {
  broadcastBegun,
  broadcastRecorded,
  type IntentRecord,
  newIntentRecord,
  nextHold,
  pageLimit,
  transitioned,
} from "./_rules.ts";
import type {
  Broadcast,
  DeadLetter,
  DeadLetterPage,
  HoldState,
  Intent,
  LeaseRequest,
  NewIntent,
  Store,
  Transition,
} from "./store.ts";

interface Lease {
  owner: string;
  expiresAt: number;
}

/**
 * A {@linkcode Store} in a `Map`. Versions are per-intent counters; leases
 * expire by the clock the caller passes in.
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
  #deliveries = new Map<string, number>();
  #leases = new Map<string, Lease>();
  #deadLetters = new Map<string, DeadLetter>();

  #read(id: string): Intent | null {
    const entry = this.#intents.get(id);
    return entry
      ? Object.freeze({ ...entry.record, version: String(entry.version) })
      : null;
  }

  #write(id: string, record: IntentRecord): Intent {
    const version = (this.#intents.get(id)?.version ?? 0) + 1;
    this.#intents.set(id, { record, version });
    return Object.freeze({ ...record, version: String(version) });
  }

  #expect(id: string, version: string): IntentRecord {
    const entry = this.#intents.get(id);
    if (!entry) {
      throw new ConflictError(`Cannot write intent ${id} as it does not exist`);
    }
    if (String(entry.version) !== version) {
      throw new ConflictError(
        `Cannot write intent ${id} as it changed since it was read; re-read it`,
      );
    }
    return entry.record;
  }

  #hold(id: string, op: "record" | "void" | "capture"): HoldState {
    const entry = this.#intents.get(id);
    if (!entry) {
      throw new ConflictError(
        `Cannot ${op} the hold of ${id} as the intent does not exist`,
      );
    }
    const hold = nextHold(entry.record, op);
    if (hold !== entry.record.hold) this.#write(id, { ...entry.record, hold });
    return hold;
  }

  /**
   * Creates an intent (setup and admin). See {@linkcode Store.createIntent}.
   */
  createIntent(intent: NewIntent): Promise<Intent> {
    return attempt(() => {
      const record = newIntentRecord(intent);
      if (this.#intents.has(record.id)) {
        throw new ConflictError(
          `Cannot create intent ${record.id} as it exists`,
        );
      }
      return this.#write(record.id, record);
    });
  }

  /**
   * Reads an intent with its hold and last broadcast. See {@linkcode
   * Store.getIntent}.
   */
  getIntent(id: string): Promise<Intent | null> {
    return Promise.resolve(this.#read(id));
  }

  /**
   * Moves an intent along the transition table, as a compare-and-set on
   * `change.version`, with the ledger change and dead letter it carries. See
   * {@linkcode Store.transition}.
   */
  transition(id: string, change: Transition): Promise<Intent> {
    return attempt(() => {
      const next = transitioned(this.#expect(id, change.version), change);
      if (change.deadLetter) {
        this.#deadLetters.set(change.deadLetter.jobId, {
          ...change.deadLetter,
        });
      }
      return this.#write(id, next);
    });
  }

  /**
   * Writes ahead of a broadcast on a `settling` intent. See {@linkcode
   * Store.beginBroadcast}.
   */
  beginBroadcast(id: string, version: string, at: number): Promise<Intent> {
    return attempt(() =>
      this.#write(id, broadcastBegun(this.#expect(id, version), at))
    );
  }

  /**
   * Records the outcome of a broadcast on a `settling` intent, as a compare-
   * and-set on `version`. See {@linkcode Store.recordBroadcast}.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
  ): Promise<Intent> {
    return attempt(() =>
      this.#write(id, broadcastRecorded(this.#expect(id, version), broadcast))
    );
  }

  /** Records a `pending` hold. See {@linkcode Store.recordHold}. */
  recordHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "record"));
  }

  /** Voids the hold. See {@linkcode Store.voidHold}. */
  voidHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "void"));
  }

  /** Captures the hold. See {@linkcode Store.captureHold}. */
  captureHold(id: string): Promise<HoldState> {
    return attempt(() => this.#hold(id, "capture"));
  }

  /**
   * Counts one more delivery of a job, atomically, for queues that report no
   * count of their own. See {@linkcode Store.countDelivery}.
   */
  countDelivery(jobId: string): Promise<number> {
    const n = (this.#deliveries.get(jobId) ?? 0) + 1;
    this.#deliveries.set(jobId, n);
    return Promise.resolve(n);
  }

  /**
   * The deliveries counted for a job so far. See {@linkcode Store.deliveries}.
   */
  deliveries(jobId: string): Promise<number> {
    return Promise.resolve(this.#deliveries.get(jobId) ?? 0);
  }

  /**
   * Takes the per-intent lease if it is free or expired. See {@linkcode
   * Store.acquireLease}.
   */
  acquireLease(intentId: string, request: LeaseRequest): Promise<boolean> {
    const lease = this.#leases.get(intentId);
    if (
      lease && lease.owner !== request.owner && lease.expiresAt > request.now
    ) {
      return Promise.resolve(false);
    }
    this.#leases.set(intentId, {
      owner: request.owner,
      expiresAt: request.now + request.ttlMs,
    });
    return Promise.resolve(true);
  }

  /**
   * Extends a lease its owner still holds. See {@linkcode Store.renewLease}.
   */
  renewLease(intentId: string, request: LeaseRequest): Promise<boolean> {
    const lease = this.#leases.get(intentId);
    if (!lease || lease.owner !== request.owner) return Promise.resolve(false);
    lease.expiresAt = request.now + request.ttlMs;
    return Promise.resolve(true);
  }

  /**
   * Releases the lease if `owner` holds it. See {@linkcode Store.releaseLease}.
   */
  releaseLease(intentId: string, owner: string): Promise<void> {
    if (this.#leases.get(intentId)?.owner === owner) {
      this.#leases.delete(intentId);
    }
    return Promise.resolve();
  }

  /**
   * Keeps a dead letter, replacing an older one for the same job. See
   * {@linkcode Store.putDeadLetter}.
   */
  putDeadLetter(deadLetter: DeadLetter): Promise<void> {
    this.#deadLetters.set(deadLetter.jobId, { ...deadLetter });
    return Promise.resolve();
  }

  /** Reads the dead letter of a job. See {@linkcode Store.getDeadLetter}. */
  getDeadLetter(jobId: string): Promise<DeadLetter | null> {
    return Promise.resolve(this.#deadLetters.get(jobId) ?? null);
  }

  /**
   * Lists dead letters, newest first. See {@linkcode Store.listDeadLetters}.
   */
  listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage> {
    options ??= {};
    return attempt(() => {
      const limit = pageLimit(options.limit);
      const sorted = [...this.#deadLetters.values()].sort(newestFirst);
      const start = options.cursor
        ? sorted.findIndex((d) => newestFirst(d, cursorOf(options.cursor!)) > 0)
        : 0;
      const items = start < 0 ? [] : sorted.slice(start, start + limit);
      const last = items.at(-1);
      const more = start >= 0 && start + limit < sorted.length;
      return {
        items,
        cursor: more && last ? `${last.poisonedAt}|${last.jobId}` : null,
      };
    });
  }

  /**
   * Takes a dead letter out and resets its job's delivery count, in one write,
   * so the job can be delivered afresh. See {@linkcode Store.redrive}.
   */
  redrive(jobId: string): Promise<DeadLetter | null> {
    const deadLetter = this.#deadLetters.get(jobId) ?? null;
    this.#deadLetters.delete(jobId);
    this.#deliveries.delete(jobId);
    return Promise.resolve(deadLetter);
  }
}

function newestFirst(
  a: Pick<DeadLetter, "poisonedAt" | "jobId">,
  b: Pick<DeadLetter, "poisonedAt" | "jobId">,
): number {
  return b.poisonedAt - a.poisonedAt ||
    (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0);
}

function cursorOf(cursor: string): Pick<DeadLetter, "poisonedAt" | "jobId"> {
  const bar = cursor.indexOf("|");
  const poisonedAt = Number(cursor.slice(0, bar));
  if (bar < 0 || !Number.isFinite(poisonedAt)) {
    throw new TypeError(
      `Cannot list dead letters as 'cursor' is not one this store returned: current value is ${
        JSON.stringify(cursor)
      }`,
    );
  }
  return { poisonedAt, jobId: cursor.slice(bar + 1) };
}

function attempt<T>(write: () => T): Promise<T> {
  try {
    return Promise.resolve(write());
  } catch (error) {
    return Promise.reject(error);
  }
}
