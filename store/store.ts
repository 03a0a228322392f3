/**
 * The storage interface: intents with their holds, leases, delivery
 * counts and dead letters. Always async, so a memory map and a remote
 * database fit the same shape.
 *
 * @module
 */

import type { IntentState } from "./transitions.ts";

/**
 * The ledger's reservation of the payer's funds: `pending` → `voided` | `captured`.
 *
 * @example The hold moves one way
 * ```ts
 * import { ConflictError, type HoldState, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001" });
 * const hold: HoldState = await store.recordHold("pi_0001");
 * assert.equal(hold, "pending");
 * assert.equal(await store.voidHold("pi_0001"), "voided");
 * // Released funds cannot be captured.
 * await assert.rejects(store.captureHold("pi_0001"), ConflictError);
 * ```
 */
export type HoldState = "pending" | "voided" | "captured";

/**
 * The outcome of one broadcast, as the relayer recorded it before reacting
 * to it:
 * - `sent`: the node accepted it; `txHash` is known.
 * - `not_sent`: the Sender declared that nothing left the process.
 * - `unknown`: anything else; the bytes may have reached a node.
 *
 * @example Record a refused broadcast
 * ```ts
 * import { type Broadcast, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent = await store.createIntent({ id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0 });
 * const refused: Broadcast = { outcome: "not_sent", at: 1000, error: "insufficient gas" };
 * const after = await store.recordBroadcast(intent.id, intent.version, refused);
 * assert.deepEqual(after.lastBroadcast, refused);
 * assert.equal(after.mayHaveSent, false); // the chain is still clean
 * ```
 */
export interface Broadcast {
  /** What happened. */
  readonly outcome: "sent" | "not_sent" | "unknown";
  /** The transaction hash, when `sent`. */
  readonly txHash?: string;
  /** When it was recorded, in milliseconds of the injected clock. */
  readonly at: number;
  /** The error text, when not `sent`. */
  readonly error?: string;
}

/**
 * A payment intent as read from the store, with its hold and last broadcast.
 *
 * @example Read, then write on what was read
 * ```ts
 * import { type Intent, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const intent: Intent | null = await store.getIntent("pi_0001");
 * assert.ok(intent !== null);
 * const change = { from: intent.state, to: "settling", version: intent.version, at: 1000 } as const;
 * const settling = await store.transition(intent.id, change);
 * assert.equal(settling.settlingSince, 1000);
 * assert.notEqual(settling.version, intent.version);
 * ```
 */
export interface Intent {
  /** The intent id, such as `pi_0001`. */
  readonly id: string;
  /** Where the payment is. */
  readonly state: IntentState;
  /** The hold on the payer's funds; `null` before one is recorded. */
  readonly hold: HoldState | null;
  /** The last broadcast on record; `null` when none was recorded. */
  readonly lastBroadcast: Broadcast | null;
  /**
   * When a broadcast started whose outcome is not on record yet (written
   * ahead of every send); `null` when every started broadcast is recorded.
   * Left set by a crash between a send and its record: that send may have
   * left.
   */
  readonly broadcasting: number | null;
  /**
   * `true` once any broadcast of this intent may have left the process:
   * recorded `sent` or `unknown`, or started and never recorded. It never
   * goes back to `false`: a later "not sent" does not unsend an earlier
   * transaction.
   */
  readonly mayHaveSent: boolean;
  /** When the intent entered `settling`; `null` before. */
  readonly settlingSince: number | null;
  /**
   * An opaque version of the intent and its hold: pass it back to a write
   * to make it a compare-and-set on what was read.
   */
  readonly version: string;
}

/**
 * The fields of a new intent (setup and admin).
 *
 * @example Import an intent mid-flight
 * ```ts
 * import { MemoryStore, type NewIntent } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const imported: NewIntent = {
 *   id: "pi_0002",
 *   state: "settling",
 *   hold: "pending",
 *   settlingSince: 0,
 *   lastBroadcast: { outcome: "sent", txHash: "0xabc", at: 0 },
 * };
 * const intent = await new MemoryStore().createIntent(imported);
 * assert.equal(intent.mayHaveSent, true); // defaulted from the sent broadcast
 * ```
 */
export interface NewIntent {
  /** The intent id, such as `pi_0001`. */
  readonly id: string;
  /**
   * The state to start in.
   *
   * @default {"created"}
   */
  readonly state?: IntentState;
  /**
   * The hold, if one is already recorded.
   *
   * @default {null}
   */
  readonly hold?: HoldState | null;
  /** The last broadcast, for importing an intent mid-flight. */
  readonly lastBroadcast?: Broadcast | null;
  /** A broadcast started and not recorded, for importing an intent mid-flight. */
  readonly broadcasting?: number | null;
  /**
   * Whether a broadcast may have left, for importing an intent mid-flight.
   *
   * @default {true if lastBroadcast is sent or unknown}
   */
  readonly mayHaveSent?: boolean;
  /** When it entered `settling`, for importing an intent mid-flight. */
  readonly settlingSince?: number | null;
}

/**
 * A compare-and-set move of the state machine. The store applies it only
 * if the intent is still at `version`, and only if `from` → `to` is in the
 * transition table.
 *
 * @example Fail a payment, ledger first
 * ```ts
 * import { ConflictError, MemoryStore, type Transition } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent = await store.createIntent({ id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0 });
 * const fail: Transition = { from: "settling", to: "failed", version: intent.version, at: 1000, ledger: "void" };
 * const failed = await store.transition(intent.id, fail);
 * assert.equal(failed.hold, "voided");
 * // The same move on the version it replaced is a lost race.
 * await assert.rejects(store.transition(intent.id, fail), ConflictError);
 * ```
 */
export interface Transition {
  /** The state the writer read. */
  readonly from: IntentState;
  /** The state it moves to. */
  readonly to: IntentState;
  /** The version the writer read. */
  readonly version: string;
  /**
   * When the move happens. Entering `settling` records it as
   * `settlingSince` and as `broadcasting`: the relayer broadcasts next, so
   * the move is also the write-ahead of the first send.
   */
  readonly at: number;
  /**
   * A hold change to make *first*, in the same write: `"void"` for
   * `failed`, `"capture"` for `settled`. A store that can commit both at
   * once does; one that cannot must write the ledger before the state, so
   * an interruption leaves a voided hold behind a `settling` intent (which
   * the relayer finishes), never a `failed` intent with a `pending` hold.
   */
  readonly ledger?: "void" | "capture";
  /** A dead letter to keep in the same write (a poison resolution). */
  readonly deadLetter?: DeadLetter;
}

/**
 * A job that was poisoned: acked and gone from the queue, kept here for operators.
 *
 * @example Read what the relayer kept
 * ```ts
 * import { createRelayer, type DeadLetter, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const sender = new ScriptedSender({});
 * const relayer = createRelayer({ store, sender, policy: { maxDeliveries: 1 } });
 * await relayer.deliver({ intentId: "pi_0404", kind: "settle" }, 1);
 * const letter: DeadLetter | null = await store.getDeadLetter("pi_0404/settle");
 * assert.equal(letter?.cause, "exhausted");
 * assert.equal(letter?.lastError, "intent pi_0404 not found");
 * assert.equal(letter?.resolution, "job dropped, intent not found");
 * ```
 */
export interface DeadLetter {
  /** The job id, such as `pi_0001/settle`. */
  readonly jobId: string;
  /** The intent it was about. */
  readonly intentId: string;
  /** How many deliveries it had. */
  readonly deliveries: number;
  /** Why it was poisoned. */
  readonly cause: "declared" | "exhausted";
  /** The decision's reason. */
  readonly reason: string;
  /** What the resolution did, such as `"nothing was sent, so the intent failed"`. */
  readonly resolution: string;
  /** The message of the error the last delivery failed with. */
  readonly lastError: string;
  /** When it was poisoned, in milliseconds of the injected clock. */
  readonly poisonedAt: number;
}

/**
 * One page of dead letters, newest first.
 *
 * @example Walk every page
 * ```ts
 * import { type DeadLetter, type DeadLetterPage, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const base = { deliveries: 1, cause: "exhausted", reason: "", resolution: "", lastError: "" } as const;
 * for (const n of [1, 2, 3]) {
 *   await store.putDeadLetter({ ...base, jobId: `pi_${n}/settle`, intentId: `pi_${n}`, poisonedAt: n });
 * }
 * const seen: DeadLetter[] = [];
 * let page: DeadLetterPage | undefined;
 * do {
 *   page = await store.listDeadLetters({ limit: 2, cursor: page?.cursor ?? null });
 *   seen.push(...page.items);
 * } while (page.cursor !== null);
 * assert.deepEqual(seen.map((d) => d.poisonedAt), [3, 2, 1]);
 * ```
 */
export interface DeadLetterPage {
  /** The dead letters on this page. */
  readonly items: readonly DeadLetter[];
  /** Pass to the next call for the following page; `null` on the last page. */
  readonly cursor: string | null;
}

/**
 * A lease request: who asks, for how long, and what time it is.
 *
 * @example One delivery at a time
 * ```ts
 * import { type LeaseRequest, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const first: LeaseRequest = { owner: "delivery-1", ttlMs: 30_000, now: 0 };
 * const second: LeaseRequest = { owner: "delivery-2", ttlMs: 30_000, now: 10_000 };
 * assert.equal(await store.acquireLease("pi_0001", first), true);
 * assert.equal(await store.acquireLease("pi_0001", second), false);
 * // Once the first lease expires, another delivery may take it.
 * assert.equal(await store.acquireLease("pi_0001", { ...second, now: 30_000 }), true);
 * ```
 */
export interface LeaseRequest {
  /** A token unique to the delivery that holds the lease. */
  readonly owner: string;
  /** How long the lease lasts without renewal, in milliseconds. */
  readonly ttlMs: number;
  /** The current time of the injected clock, in milliseconds. */
  readonly now: number;
}

/**
 * Everything the relayer keeps. Every write is a compare-and-set or an
 * idempotent operation: a lost race surfaces as a `ConflictError`, never as
 * a silent overwrite.
 *
 * Implementations: `MemoryStore` (no I/O) and `KvStore` (Deno KV). Both
 * pass the same contract suite.
 *
 * @example Code against the interface
 * ```ts
 * import { type Intent, MemoryStore, type Store } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Works with any Store: MemoryStore here, KvStore in production.
 * async function authorize(store: Store, id: string, at: number): Promise<Intent> {
 *   // The hold is recorded before the move, as the transition table requires.
 *   const created = await store.createIntent({ id, hold: "pending" });
 *   return await store.transition(id, { from: "created", to: "authorized", version: created.version, at });
 * }
 * const intent = await authorize(new MemoryStore(), "pi_0001", 0);
 * assert.equal(intent.state, "authorized");
 * assert.equal(intent.hold, "pending");
 * ```
 */
export interface Store {
  /**
   * Creates an intent (setup and admin).
   *
   * @throws {ConflictError} If an intent with that id exists.
   */
  createIntent(intent: NewIntent): Promise<Intent>;

  /** Reads an intent with its hold and last broadcast; `null` if there is none. */
  getIntent(id: string): Promise<Intent | null>;

  /**
   * Moves an intent along the transition table, as a compare-and-set on
   * `change.version`, with the ledger change and dead letter it carries.
   * Refuses `failed` unless the hold is voided (after `ledger: "void"`) or
   * absent, and `settled` unless it is captured.
   *
   * @returns The intent after the move.
   * @throws {ConflictError} If the intent changed since it was read, the
   * move is not in the table, or the ledger forbids it.
   */
  transition(id: string, change: Transition): Promise<Intent>;

  /**
   * Writes ahead of a broadcast on a `settling` intent: sets
   * `broadcasting`, as a compare-and-set on `version`. If an earlier
   * broadcast is still unrecorded, it may have left: `mayHaveSent` becomes
   * `true`.
   *
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed since it was read or is
   * not `settling`.
   */
  beginBroadcast(id: string, version: string, at: number): Promise<Intent>;

  /**
   * Records the outcome of a broadcast on a `settling` intent, as a
   * compare-and-set on `version`: sets `lastBroadcast`, clears
   * `broadcasting`, and sets `mayHaveSent` unless the outcome is
   * `not_sent`.
   *
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed since it was read or is
   * not `settling`.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
  ): Promise<Intent>;

  /**
   * Records a `pending` hold. Idempotent: a pending hold stays as it is.
   *
   * @throws {ConflictError} If the hold is voided or captured.
   */
  recordHold(id: string): Promise<HoldState>;

  /**
   * Voids the hold. Idempotent: a voided hold stays voided.
   *
   * @throws {ConflictError} If the hold is captured (money moved).
   */
  voidHold(id: string): Promise<HoldState>;

  /**
   * Captures the hold. Idempotent: a captured hold stays captured.
   *
   * @throws {ConflictError} If the hold is voided (the funds were released).
   */
  captureHold(id: string): Promise<HoldState>;

  /**
   * Counts one more delivery of a job, atomically, for queues that report
   * no count of their own.
   *
   * @returns The delivery number, 1-based: 1 on the first call.
   */
  countDelivery(jobId: string): Promise<number>;

  /** The deliveries counted for a job so far; 0 if none. */
  deliveries(jobId: string): Promise<number>;

  /**
   * Takes the per-intent lease if it is free or expired.
   *
   * @returns `true` if `request.owner` now holds it.
   */
  acquireLease(intentId: string, request: LeaseRequest): Promise<boolean>;

  /**
   * Extends a lease its owner still holds.
   *
   * @returns `false` if the lease expired and someone else took it.
   */
  renewLease(intentId: string, request: LeaseRequest): Promise<boolean>;

  /** Releases the lease if `owner` holds it; otherwise does nothing. */
  releaseLease(intentId: string, owner: string): Promise<void>;

  /** Keeps a dead letter, replacing an older one for the same job. */
  putDeadLetter(deadLetter: DeadLetter): Promise<void>;

  /** Reads the dead letter of a job; `null` if there is none. */
  getDeadLetter(jobId: string): Promise<DeadLetter | null>;

  /** Lists dead letters, newest first. */
  listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage>;

  /**
   * Takes a dead letter out and resets its job's delivery count, in one
   * write, so the job can be delivered afresh.
   *
   * @returns The dead letter removed; `null` if there was none.
   */
  redrive(jobId: string): Promise<DeadLetter | null>;
}
