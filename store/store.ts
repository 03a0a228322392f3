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
 * // Imported mid-flight, with nothing sent so far (else it may have sent).
 * const intent = await store.createIntent({
 *   id: "pi_0001",
 *   state: "settling",
 *   hold: "pending",
 *   settlingSince: 0,
 *   mayHaveSent: false,
 * });
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
  /**
   * Every tx hash a send of this intent returned, oldest first (the newest
   * 32): a rescue whose outcome is unknown replaces the last broadcast, but
   * not the tx that may confirm meanwhile.
   */
  readonly txHashes: readonly string[];
  /** When the intent entered `settling`; `null` before. */
  readonly settlingSince: number | null;
  /**
   * An opaque version of the intent and its hold: pass it back to a write
   * to make it a compare-and-set on what was read.
   */
  readonly version: string;
}

/**
 * The fields of a new intent (setup and admin). `createIntent` refuses any
 * other with a `TypeError` naming it (`"satte" is not a field of a new
 * intent (id, state, …)`), but for `version`: an intent as read, passed
 * back (a copy into another store), is taken, with a version of its own.
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
  /**
   * The intent id, such as `pi_0001`: 1 to 128 of `A–Z a–z 0–9 _ . : -`,
   * not `.` or `..` (any other is a `TypeError`).
   */
  readonly id: string;
  /**
   * The state to start in.
   *
   * @default {"created"}
   */
  readonly state?: IntentState;
  /**
   * The hold, if one is already recorded. A `failed` intent whose hold is
   * `pending` or `captured`, or a `settled` one whose hold is `voided`, is
   * a `TypeError`: no other write reaches those (I2, I6).
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
   * Leave it out unless you know: the default counts anything that could
   * have left. `false` beside a send on record (a last broadcast `sent` or
   * `unknown`, a tx hash, or a broadcast in flight on an `authorized`
   * intent) contradicts that record and is a `TypeError`: the relayer would
   * send on a fresh nonce, and the rules let the hold be voided, while that
   * send may still land. So is a `created` intent with a send at all:
   * import it as `authorized`.
   *
   * @default {true if a broadcast is in flight, lastBroadcast is sent or unknown, txHashes is not empty, the intent is settling with no lastBroadcast (a crash may have hidden a send), or it is needs_review (money may have moved)}
   */
  readonly mayHaveSent?: boolean;
  /**
   * The tx hashes its sends returned, for importing an intent mid-flight.
   *
   * @default {the last broadcast's hash if it is sent, else none}
   */
  readonly txHashes?: readonly string[];
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
 * const intent = await store.createIntent({
 *   id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0,
 *   lastBroadcast: { outcome: "not_sent", at: 0 }, // the only send stayed home
 * });
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
  /**
   * The hash of a tx on record (`txHashes`) whose receipt the writer read
   * `confirmed`. Only a move from `settling` to `settled` with `ledger:
   * "capture"` reads it, and only while a send is in flight
   * (`broadcasting`): the payment is paid, and that send, written ahead
   * after a tx of the intent may have left, reuses its nonce, so it cannot
   * pay again. The capture is then allowed, and the write-ahead cleared in
   * the same write. Without it, or naming a hash not on record, or on an
   * intent whose record says nothing had left before that send
   * (`mayHaveSent: false`: its nonce may be a fresh one), the capture is
   * refused while a send is in flight.
   */
  readonly confirmed?: string;
  /**
   * A dead letter to keep in the same write (a poison resolution), which
   * resets its job's delivery count as {@linkcode Store.putDeadLetter} does.
   */
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
  /** The queue's own ids, when the queue gave up on the job (its failure callback or dead-letter topic). */
  readonly queue?: QueueIds;
}

/**
 * The ids a queue gave a job it gave up on, kept on the dead letter so an
 * operator can find the message in the queue's own console.
 *
 * @example A QStash failure callback's ids
 * ```ts
 * import type { QueueIds } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const ids: QueueIds = { queue: "qstash", messageId: "msg_123", dlqId: "dlq_456" };
 * assert.equal(ids.queue, "qstash");
 * ```
 */
export interface QueueIds {
  /** Which queue: `"qstash"`, `"pubsub"`, `"cloudflare"`, `"generic"` (a bridge on `POST /v1/deliveries`). */
  readonly queue: string;
  /** The queue's id of the message. */
  readonly messageId?: string;
  /**
   * The id of the message in the queue's dead-letter queue, where it has
   * one (QStash's dead-letter id, Cloudflare's dead-letter message id).
   * For Pub/Sub, the source message the dead-letter topic's
   * copy forwards (its subscription, publish time and intent), which
   * every copy of it names: Pub/Sub may dead-letter a message more than
   * once, each copy with a `messageId` of its own.
   */
  readonly dlqId?: string;
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
 * import { BusyError, type LeaseRequest, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent = await store.createIntent({ id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0 });
 * const first: LeaseRequest = { owner: "delivery-1", ttlMs: 30_000, now: 0 };
 * // The write-ahead of a send takes the lease and keeps it across the send.
 * const ahead = await store.beginBroadcast(intent.id, intent.version, 0, { lease: { ...first, keep: true } });
 * // Another delivery cannot write while the lease is live...
 * const second: LeaseRequest = { owner: "delivery-2", ttlMs: 30_000, now: 10_000 };
 * const record = { outcome: "unknown", at: 10_000, error: "timeout" } as const;
 * await assert.rejects(store.recordBroadcast(intent.id, ahead.version, record, { lease: second }), BusyError);
 * // ...but once it expires, it may.
 * await store.recordBroadcast(intent.id, ahead.version, record, { lease: { ...second, now: 30_000 } });
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
 * A replay record: the proof that a signed delivery was used. Claiming a
 * key that is already claimed, and not expired, is refused with a
 * `ReplayError`. The record is void after `expiresAt` (the signature is
 * refused by its age from then on). A store that deletes expired records
 * by a clock of its own (a database's TTL or sweep) keeps each 10 minutes
 * longer, as the shipped stores do: a deleting clock that runs ahead of
 * the admitting instance's would otherwise forget a record still needed,
 * and admit a replay.
 *
 * @example A signature used twice
 * ```ts
 * import { type Claim, MemoryStore, ReplayError } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const claim: Claim = { key: "v1=9f2c…", now: 0, expiresAt: 360_000 };
 * assert.equal(await store.admit({ claim, now: 0 }), null);
 * await assert.rejects(store.admit({ claim, now: 1000 }), ReplayError);
 * ```
 */
export interface Claim {
  /** What identifies the signed request: a token's `jti`, a signature. */
  readonly key: string;
  /** The current time of the injected clock, in milliseconds. */
  readonly now: number;
  /** When the record stops refusing its key, in milliseconds of the same clock. */
  readonly expiresAt: number;
}

/**
 * What rides in a write besides its change: the delivery's lease and its
 * replay record, so that a delivery's writes are as few commits as the
 * write-ahead needs (one before a send, one after).
 *
 * @example Take the lease with the write-ahead, release it with the record
 * ```ts
 * import { MemoryStore, type WriteOptions } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const intent = await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const take: WriteOptions = { lease: { owner: "d1", ttlMs: 30_000, now: 0, keep: true } };
 * const settling = await store.transition(intent.id, { from: "authorized", to: "settling", version: intent.version, at: 0 }, take);
 * // ... the send happens here, under the lease ...
 * const release: WriteOptions = { lease: { owner: "d1", ttlMs: 30_000, now: 900 } };
 * const sent = await store.recordBroadcast(settling.id, settling.version, { outcome: "sent", txHash: "0xabc", at: 900 }, release);
 * assert.equal(sent.lastBroadcast?.txHash, "0xabc");
 * ```
 */
export interface WriteOptions {
  /**
   * The writer's lease on the intent. The write is refused with a
   * `BusyError` if another owner holds a live lease. With `keep: true` the
   * writer holds the lease afterwards, until `now + ttlMs` (taken or
   * renewed); otherwise the write releases the writer's lease, if any.
   * Without it, the write ignores leases (setup and admin).
   */
  readonly lease?: LeaseRequest & {
    /**
     * Hold the lease after the write (across a send).
     *
     * @default {false}
     */
    readonly keep?: boolean;
  };
  /** A replay record to claim in the same commit. */
  readonly claim?: Claim;
  /**
   * With a write that keeps a dead letter: another delivery count to reset
   * in the same commit, besides the job's own (the key the delivery was
   * counted under, such as a Pub/Sub message's). Ignored by a write that
   * keeps no dead letter.
   */
  readonly resetCount?: string;
  /**
   * Count keys (as {@linkcode Store.admit} writes them) that refuse the
   * write while one is on record and not lapsed at the lease's `now` (any
   * on record, without a lease): a `ConflictError` with `refused`, nothing
   * written. The relayer passes the give-up mark of the message it
   * delivers (`givingup/…`, which `Relayer.giveUp` writes before it
   * drops the job, or once it resolved) on the write ahead of a send, so a
   * late copy of a message the queue gave up on sends nothing. Checked in
   * the write's own commit (on PostgreSQL also in the read it makes
   * anyway): no round trip of its own. A mark committed between a write's read and its commit may
   * answer as a race lost (`refused: false`), with nothing written; the
   * caller's fresh look then meets it. A store of one's own that ignores it
   * leaves that guard out. At most 5 keys (Deno KV reads them with 5
   * others, in one `getMany` of at most 10): more is a `TypeError`.
   *
   * @default {[]}
   */
  readonly unlessCounted?: readonly string[];
}

/**
 * What {@linkcode Store.admit} writes in one commit: a delivery count for
 * queues that report none, and the delivery's replay record.
 *
 * @example Count a delivery and claim its signature at once
 * ```ts
 * import { type Admission, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const admission: Admission = { count: "pi_0001/settle", claim: { key: "sig-1", now: 0, expiresAt: 360_000 }, now: 0 };
 * assert.equal(await store.admit(admission), 1);
 * assert.equal(await store.admit({ count: "pi_0001/settle", now: 1000 }), 2);
 * ```
 */
export interface Admission {
  /** Count one more delivery of this job id (1-based); the count expires `ttlMs` after its last write (8 days unless given). */
  readonly count?: string;
  /**
   * How long the count lives after this write, in milliseconds. The
   * relayer keeps a queue's give-up mark (a count under `gaveup/…`) 32
   * days, as long as a Pub/Sub message can be kept and dead-lettered
   * again, and a delivery count 8 days past the longest wait it asks
   * between two deliveries (the policy's `capMs`, or a busy delivery's
   * lease and clock skew twice): with a cap past 8 days, a count of 8
   * days lapsed between two deliveries, and the job was never poisoned. A
   * store of one's own that ignores it keeps the default.
   *
   * @default {691200000} (8 days)
   */
  readonly ttlMs?: number;
  /** A replay record to claim in the same commit. */
  readonly claim?: Claim;
  /** The current time of the injected clock, in milliseconds. */
  readonly now: number;
}

/**
 * Count keys a dead letter's write counts in its own commit, as
 * {@linkcode Store.admit} counts them: see {@linkcode Store.putDeadLetter}.
 *
 * @example Keep a letter and mark its message as given up on, at once
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.putDeadLetter({
 *   jobId: "pi_0001/settle",
 *   intentId: "pi_0001",
 *   deliveries: 3,
 *   cause: "exhausted",
 *   reason: "no luck after 3 deliveries",
 *   resolution: "job dropped, intent still authorized",
 *   lastError: "not sent: delivery 3 is the last (maxDeliveries 3)",
 *   poisonedAt: 0,
 * }, { marks: { keys: ["givingup/qstash/message/msg_1"], now: 0 } });
 * assert.equal(await store.deliveries("givingup/qstash/message/msg_1", 0), 1);
 * ```
 */
export interface Marks {
  /** At most 5 distinct count keys, none the count the letter resets. */
  readonly keys: readonly string[];
  /** The current time of the injected clock, in milliseconds. */
  readonly now: number;
  /**
   * How long each count lives after this write, in milliseconds.
   *
   * @default {691200000} (8 days)
   */
  readonly ttlMs?: number;
}

/**
 * A dead letter as read back from the store, with the version a redrive
 * checks.
 *
 * @example Redrive exactly the letter that was read
 * ```ts
 * import { MemoryStore, type StoredDeadLetter } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.putDeadLetter({
 *   jobId: "pi_0001/settle", intentId: "pi_0001", deliveries: 3, cause: "exhausted",
 *   reason: "no luck after 3 deliveries", resolution: "job dropped, intent still created",
 *   lastError: "not authorized yet", poisonedAt: 0,
 * });
 * const letter: StoredDeadLetter | null = await store.getDeadLetter("pi_0001/settle");
 * assert.ok(letter !== null);
 * assert.equal((await store.redrive(letter.jobId, letter.version)).deliveries, 3);
 * ```
 */
export interface StoredDeadLetter extends DeadLetter {
  /** An opaque version: pass it to `redrive` to remove exactly this letter. */
  readonly version: string;
}

/**
 * Everything the relayer keeps. Every write is a compare-and-set or an
 * idempotent operation: a lost race surfaces as a `ConflictError`, never as
 * a silent overwrite, and a write that breaks a rule as a `ConflictError`
 * with `refused: true` (the relayer retries a race, never a refusal). A delivery's writes carry its lease and replay record
 * (`WriteOptions`), so each is one commit.
 *
 * Implementations: `MemoryStore` (no I/O), `KvStore` (Deno KV) and
 * `PostgresStore`. All pass the same contract suite.
 *
 * @example Code against the interface
 * ```ts
 * import { type Intent, MemoryStore, type Store } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Works with any Store: MemoryStore here, KvStore or PostgresStore in production.
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
   * @throws {TypeError} If a field is invalid or not one of
   * {@linkcode NewIntent}'s (a misspelt `satte` would leave the intent
   * `created`; an intent's `version`, as read, is ignored), or the record
   * contradicts itself about what may have left (see
   * {@linkcode NewIntent.mayHaveSent}) or about its hold: a `failed` intent whose hold is `pending` or
   * `captured`, a `settled` one whose hold is `voided` (see
   * {@linkcode NewIntent.hold}).
   */
  createIntent(intent: NewIntent): Promise<Intent>;

  /** Reads an intent with its hold and last broadcast; `null` if there is none. */
  getIntent(id: string): Promise<Intent | null>;

  /**
   * Moves an intent along the transition table, as a compare-and-set on
   * `change.version`, with the ledger change and dead letter it carries, in
   * one commit. Refuses `failed` unless the hold is voided (after
   * `ledger: "void"`) or absent, and `settled` unless it is captured. A
   * ledger change that rides in the move obeys `voidHold`'s and
   * `captureHold`'s rules, but for one: a `needs_review` intent that may
   * have sent is voided in its move to `failed` (the resolution, once the
   * chain was checked), where `voidHold` alone refuses. A `settling`
   * intent fails only when its last broadcast was declared `not_sent` and
   * no earlier one may have left (I1): otherwise it goes to review.
   *
   * @returns The intent after the move.
   * @throws {ConflictError} If the intent changed since it was read, the
   * move is not in the table, or the ledger forbids it.
   * @throws {BusyError} If `options.lease` is given and another owner holds the lease.
   * @throws {ReplayError} If `options.claim` was already claimed.
   * @throws {TypeError} If `change` is no object, names a field a
   * `Transition` has not, or its `version` is no string or its `ledger`
   * neither `"void"` nor `"capture"` (nothing is read or written).
   */
  transition(
    id: string,
    change: Transition,
    options?: WriteOptions,
  ): Promise<Intent>;

  /**
   * Writes ahead of a broadcast on a `settling` intent: sets
   * `broadcasting`, as a compare-and-set on `version`. If an earlier
   * broadcast is still unrecorded, it may have left: `mayHaveSent` becomes
   * `true`.
   *
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed since it was read, is
   * not `settling`, or its hold is not `pending` (I6: nothing is broadcast
   * without reserved funds).
   * @throws {BusyError} If `options.lease` is given and another owner holds the lease.
   * @throws {ReplayError} If `options.claim` was already claimed.
   */
  beginBroadcast(
    id: string,
    version: string,
    at: number,
    options?: WriteOptions,
  ): Promise<Intent>;

  /**
   * Records the outcome of a broadcast on a `settling` intent, as a
   * compare-and-set on `version`: sets `lastBroadcast`, clears
   * `broadcasting`, and sets `mayHaveSent` unless the outcome is
   * `not_sent`.
   *
   * One record is taken on a version older than the intent's: that of a
   * send that outlived its settling (its lease lapsed, and a give-up put
   * the intent in review while it ran). On a `needs_review` intent, a
   * `sent` or `unknown` outcome given a stale `version` is written on the
   * intent as it is now: `lastBroadcast` set, its `txHash` appended to
   * `txHashes` (once), `mayHaveSent` true, `broadcasting` cleared, and
   * the version moved, so that a fail decided on the review as read before
   * is a race lost, and its tx is on record for every instance (the
   * resolve route reads its receipt); the state and the hold do not
   * change. Another owner's lease, live or not, neither refuses it nor is
   * touched (the writer's own is released or kept as by any write); a
   * race lost to another write is decided again. Anything else on a stale
   * version (`not_sent`, a `settling`, `settled` or `failed` intent) is a
   * race lost, as for every write, and a review on its own version is
   * refused: no send holds it. A stale version is one the intent had: a
   * string no store made (`"garbage"`, `""`, one ahead of the intent's, a
   * version misspelt, a value that is not a string) is a race lost that
   * writes nothing, in review too, as for every write; so is another
   * intent's version, where the store can tell (one the intent has not
   * had yet). A store that counts an intent's writes (`MemoryStore`,
   * `PostgresStore`) can tell every one; `KvStore`, whose versions are
   * Deno KV's versionstamps, takes any version spelt as one and no later
   * than the intent's for its past (another intent's earlier one, or one
   * made up such as `"00000000000000000000:-"`).
   *
   * @example A send that outlived its settling keeps its tx
   * ```ts
   * import { MemoryStore } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const store = new MemoryStore();
   * const settling = await store.createIntent({ id: "pi_0001", state: "settling", hold: "pending", settlingSince: 0 });
   * const ahead = await store.beginBroadcast(settling.id, settling.version, 0);
   * const review = await store.transition(settling.id, { from: "settling", to: "needs_review", version: ahead.version, at: 60_000 });
   * // The send returns after the give-up: its record names the version it read.
   * const late = await store.recordBroadcast(settling.id, ahead.version, { outcome: "sent", txHash: "0xabc", at: 61_000 });
   * assert.deepEqual([late.state, late.hold, late.txHashes], ["needs_review", "pending", ["0xabc"]]);
   * assert.notEqual(late.version, review.version);
   * ```
   *
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed since it was read (but
   * for the record above) or is not `settling`.
   * @throws {BusyError} If `options.lease` is given and another owner
   * holds the lease (not for the record above).
   * @throws {ReplayError} If `options.claim` was already claimed.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
    options?: WriteOptions,
  ): Promise<Intent>;

  /**
   * Records a `pending` hold on a `created` or `authorized` intent.
   * Idempotent: a pending hold stays as it is.
   *
   * @throws {ConflictError} If the hold is voided or captured, or the
   * intent is missing or past authorization.
   */
  recordHold(id: string): Promise<HoldState>;

  /**
   * Voids the hold (an operator or the payments API releasing the funds).
   * Idempotent: a voided hold stays voided. Refused where money may have
   * moved: a `settling` or `needs_review` intent that may have sent, or a
   * settled one. A payment in review that may have sent is failed with its
   * hold voided in one write, once the chain was checked:
   * `POST /v1/intents/:id/resolve` with `"to":"failed"`, or
   * `transition(id, { from: "needs_review", to: "failed", ledger: "void", … })`.
   *
   * @throws {ConflictError} If the hold is captured, the intent is missing,
   * `settled`, or `settling` or `needs_review` with a broadcast that may
   * have left (with `refused: true`).
   */
  voidHold(id: string): Promise<HoldState>;

  /**
   * Captures the hold of a `settling` or `needs_review` intent (the states
   * that move to `settled`); a `settling` one only once a send returned a
   * tx hash and none is in flight (the relayer captures once that tx
   * confirmed, and settles on a captured hold only on a confirmed tx).
   * Idempotent: a captured hold stays captured.
   *
   * @throws {ConflictError} If the hold is voided (the funds were
   * released), the intent is missing or in another state, or it is
   * `settling` without a sent broadcast on record or with one in flight.
   */
  captureHold(id: string): Promise<HoldState>;

  /**
   * Counts a delivery and/or claims a replay record, in one commit (a
   * delivery that writes nothing else).
   *
   * @returns The delivery number when `admission.count` is given (1 on the
   * first call, and again once the count has expired), else `null`.
   * @throws {ReplayError} If `admission.claim` was already claimed.
   * @throws {BusyError} If the store could not count it for concurrent
   * admissions of the same job (nothing written; retry later).
   * @throws {TypeError} If `now` is not a whole number of milliseconds, or
   * `admission.ttlMs` is given and is not one of at least 1, with a count
   * or without, or `admission.count` is given and is not a string
   * (nothing written, the claim included).
   */
  admit(admission: Admission): Promise<number | null>;

  /**
   * The deliveries counted for a job so far; 0 if none. With `now`, a
   * count that has lapsed by then (`admit` would count from 1) reads 0,
   * whether or not the store has removed it yet.
   *
   * @throws {TypeError} If `now` is not a whole number of milliseconds.
   */
  deliveries(jobId: string, now?: number): Promise<number>;

  /**
   * Keeps a dead letter, replacing an older one for the same job (a
   * poisoned job whose intent the relayer did not touch), and resets the
   * job's delivery count in the same write: the poisoned run of deliveries
   * ends there, and a job published again for the intent (once it is
   * authorized, say) is counted from 1 instead of poisoned at once.
   * `options.resetCount` names another count to reset with it (the key the
   * delivery was counted under, when not the job id).
   *
   * With `options.intentVersion`, the letter is kept only if its intent
   * is still at that version: a resolution that read the intent as
   * `created` or `authorized` and decided to drop the job must not land
   * after another delivery moved the intent on (and kept the letter that
   * says why it is in review, say).
   *
   * With `options.lease` (and `options.intentVersion`, which it needs), the
   * write takes (`keep: true`) or releases the intent's lease as a
   * delivery write does, and is refused with a `BusyError` while another
   * owner holds a live one. A queue's give-up
   * that drops a job holds it: a delivery of the job still in flight, that
   * read the intent before the drop, then cannot start a send behind it
   * for as long as the lease lives. A store of one's own that ignores it
   * keeps the letter, as before.
   *
   * With `options.marks`, each of its count keys is counted once more in
   * the letter's own commit, as {@linkcode Store.admit} counts it (living
   * `marks.ttlMs` from `marks.now`): the letter and its marks land
   * together or not at all. A delivery's drop of an authorized intent's
   * job marks the message it delivered so (`givingup/…`, which every copy
   * of the message carries in its write ahead of a send, `unlessCounted`):
   * marked only after its letter, a drop held up between the two past its
   * lease let a copy that read the intent before the drop send under a
   * letter that says the job was dropped. A store of one's own that ignores
   * it has the relayer write each mark after the letter, as before.
   *
   * @throws {ReplayError} If `options.claim` was already claimed.
   * @throws {BusyError} If `options.lease` is given and another owner
   * holds the intent's lease (nothing is written).
   * @throws {TypeError} If `options.lease` is given without
   * `options.intentVersion`, or `options.marks` names more than 5 keys, a
   * key twice, an empty key, or the count the letter resets (its job's, or
   * `options.resetCount`), or its `now` is not a whole number of
   * milliseconds, or its `ttlMs` not one of at least 1.
   * @throws {ConflictError} If the intent is no longer at
   * `options.intentVersion` (nothing is written, the claim included), or if
   * a store that reads before it commits (`KvStore`) saw another letter for
   * the same job land in between: the caller decides again on a fresh read
   * (the relayer's resolution does). Stores that write in one step keep the
   * last letter instead.
   */
  putDeadLetter(
    deadLetter: DeadLetter,
    options?: Pick<WriteOptions, "claim" | "resetCount" | "lease"> & {
      /** The version of the intent the caller read: see above. */
      readonly intentVersion?: string;
      /** Count keys to count in the letter's commit: see above. */
      readonly marks?: Marks;
    },
  ): Promise<void>;

  /**
   * Releases the intent's lease if `owner` holds it, live or lapsed; a
   * lease another owner holds (one taken once this owner's lapsed), or
   * none, is left as it is, and so is the intent's version. A release of
   * `owner`'s lease moves the intent's version and writes nothing else:
   * a write decided on a read from before it is a race lost
   * (`ConflictError`, not `refused`), decided again on a fresh read. The
   * relayer calls it once a delivery that dropped an authorized
   * intent's job, keeping the lease with its letter, has marked the
   * message it delivered: the marks then keep that message's copies
   * from sending, and a job published again (a redrive) may send at once.
   * A copy at the last number that read the intent before the marks
   * landed then finds its letter's write refused, and the marks on its
   * next read; with a release that left the version, it wrote the letter
   * again, bringing back one a redrive took while the redriven job lives.
   * Optional: without it, such a lease is held until it lapses, as before.
   *
   * @throws {TypeError} If `intentId` or `owner` is not a non-empty string.
   */
  releaseLease?(intentId: string, owner: string): Promise<void>;

  /** Reads the dead letter of a job; `null` if there is none. */
  getDeadLetter(jobId: string): Promise<StoredDeadLetter | null>;

  /**
   * Lists dead letters, newest first (those of the same `poisonedAt` in
   * their job ids' code-point order), a page at a time: pass the page's
   * `cursor` to read the next one (`null` after the last page).
   *
   * @throws {RangeError} If `limit` is not an integer in 1 … 1000.
   * @throws {TypeError} If `cursor` is not one this store returned. Its
   * message names `'cursor'`: the ops route answers such an error with a
   * 400 and any other with a 500.
   */
  listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage>;

  /**
   * Takes out exactly the dead letter that was read (`version`) and resets
   * its job's delivery count, in one commit, so the job can be delivered
   * afresh. A store with a queue of its own (Deno KV) enqueues
   * `options.enqueue` in the same commit. With `options.keepCount`, the
   * count is left as it is: a letter discarded, not redriven, must not
   * reset the count of a job delivered since (the letter's own write
   * already reset the count it ended). A store of one's own that ignores
   * `keepCount` resets the count, as before.
   *
   * @returns The dead letter removed.
   * @throws {ConflictError} If the dead letter is gone or changed since it
   * was read (another redrive won).
   * @throws {TypeError} If `options.enqueue` is given to a store without a queue.
   */
  redrive(
    jobId: string,
    version: string,
    options?: { readonly enqueue?: unknown; readonly keepCount?: boolean },
  ): Promise<DeadLetter>;
}
