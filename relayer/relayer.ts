/**
 * The settle worker: runs one delivery of a job, decides what the queue
 * should do next, and resolves the intent when the job is poisoned.
 *
 * @module
 */

import {
  cutAt,
  LINE_BREAKING,
  messageOf,
  oneLine,
  wordsOf,
} from "../policy/_walk.ts";
import {
  assertDelivery,
  assertMs,
  assertOptionNames,
  checkedClock,
  ClockError,
  show,
} from "../policy/_validate.ts";
import { backoff } from "../policy/backoff.ts";
import { intentIdInText } from "./_job_text.ts";
import { decide } from "../policy/decide.ts";
import { jitter } from "../policy/jitter.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { definePolicy, type Policy } from "../policy/policy.ts";
import {
  DEFAULT_CLOCK_SKEW_MS,
  DELIVER_OPTIONS,
  DISCARD_OPTIONS,
  GIVE_UP_OPTIONS,
  QUEUE_ID_NAMES,
  REDRIVE_OPTIONS,
  RELAYER_OPTIONS,
  UNREADABLE_FIELDS,
} from "./_options.ts";
import { planResolution } from "../policy/resolution.ts";
import { isNotSent, poison } from "../policy/sentinels.ts";
import {
  countKeptMs,
  countOrThrow,
  INTENT_ID_RULE,
  intentOrNull,
  isIntentId,
  isRefusal,
  keptText,
  letterOrNull,
  redriveRefusal,
  writtenIntent,
} from "../store/_rules.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { BusyError } from "../store/busy_error.ts";
import { isHeldBySession } from "../store/_held_lock.ts";
import { isNotRead, isNotWritten, notRead } from "../store/_not_written.ts";
import { isSchemaBehind } from "../store/_schema_behind.ts";
import { MAX_TX_HASH } from "./_tx_hash.ts";
import { DEFAULT_LEASE_MS, registerSends, resolveArrivals } from "./_sends.ts";
import { leaveUnrecorded } from "./_unrecorded_claims.ts";
import { markUnderWay } from "./_under_way.ts";
import { ConflictError } from "../store/conflict_error.ts";
import { ReplayError } from "../store/replay_error.ts";
import { INTENT_STATES } from "../store/transitions.ts";
import type {
  Claim,
  DeadLetter,
  Intent,
  QueueIds,
  Store,
  StoredDeadLetter,
  WriteOptions,
} from "../store/store.ts";
import type { ReceiptStatus, Sender } from "./sender.ts";

/**
 * A job: "go and look at intent X". Never the truth, only a reason to look.
 *
 * @example A queue message round trip
 * ```ts
 * import { createRelayer, type Job, MemoryStore, parseJob, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const job: Job = { intentId: "pi_0001", kind: "settle" };
 * const message = JSON.stringify(job); // what the queue carries
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001" });
 * const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
 * const outcome = await relayer.deliver(parseJob(JSON.parse(message)), 1);
 * assert.equal(outcome.reason, "not authorized yet");
 * ```
 */
export interface Job {
  /** The intent to look at, such as `pi_0001`. */
  readonly intentId: string;
  /** What to do with it; the relayer knows one kind. */
  readonly kind: "settle";
}

/**
 * What the queue should do with the job after one delivery. Plain data:
 * the webhook maps it to an HTTP answer, a local queue to a re-enqueue.
 *
 * @example Switch on the action
 * ```ts
 * import { createRelayer, MemoryStore, type Outcome, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // What a queue consumer does: ack the job, or deliver it again later.
 * function answer(outcome: Outcome): { ack: boolean; delayMs?: number } {
 *   switch (outcome.action) {
 *     case "retry":
 *       return { ack: false, delayMs: outcome.delayMs };
 *     case "done":
 *     case "poison":
 *       return { ack: true };
 *   }
 * }
 * const relayer = createRelayer({ store: new MemoryStore(), sender: new ScriptedSender({}), random: () => 0 });
 * const outcome = await relayer.deliver({ intentId: "pi_0404", kind: "settle" }, 1);
 * assert.deepEqual(answer(outcome), { ack: false, delayMs: 2500 });
 * ```
 */
export type Outcome =
  | {
    /** Nothing left to do: ack the job. */
    readonly action: "done";
    /** The delivery this outcome answers. */
    readonly delivery: number;
    /** Why, such as `"0xabc confirmed, intent settled"` or `"intent already failed"`. */
    readonly reason: string;
  }
  | {
    /** Deliver the job again after `delayMs`. */
    readonly action: "retry";
    /** The delivery this outcome answers. */
    readonly delivery: number;
    /** How long to wait, in milliseconds. */
    readonly delayMs: number;
    /** Why the delivery did not finish the job. */
    readonly reason: string;
  }
  | {
    /** The job is poisoned: ack it; its intent has been resolved and a dead letter kept. */
    readonly action: "poison";
    /** The delivery this outcome answers. */
    readonly delivery: number;
    /** `"declared"` or `"exhausted"`. */
    readonly cause: "declared" | "exhausted";
    /** The decision's reason. */
    readonly reason: string;
    /** What the resolution did. */
    readonly resolution: string;
  };

/**
 * The dependencies and settings of {@linkcode createRelayer}.
 *
 * @example A test setup with a fixed clock
 * ```ts
 * import { createRelayer, MemoryStore, type RelayerOptions, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const options: RelayerOptions = {
 *   store: new MemoryStore(),
 *   sender: new ScriptedSender({}),
 *   policy: { maxDeliveries: 3, jitter: "none" },
 *   now: () => 0,
 *   leaseMs: 15_000,
 * };
 * assert.equal(createRelayer(options).policy.baseMs, 5000); // the rest of the policy is the default
 * assert.throws(() => createRelayer({ ...options, leaseMs: 0 }), RangeError);
 * ```
 */
export interface RelayerOptions {
  /** Where intents, holds, leases, counts and dead letters live. */
  readonly store: Store;
  /** The chain client. */
  readonly sender: Sender;
  /**
   * The retry policy, or the fields that differ from `DEFAULT_POLICY`.
   * Any valid policy is taken: its rescue window is not checked against
   * `stuckAfterMs` here. The service's start checks it; a service of one's
   * own does with `checkQueue`, given its queue and this `clockSkewMs`.
   *
   * @default {DEFAULT_POLICY}
   */
  readonly policy?: Partial<Policy>;
  /**
   * The clock: whole milliseconds, as `Date.now()` returns them. A delivery
   * (or a request to `createApp`'s routes) that reads anything else (a
   * fraction, `NaN`, a `Date`, a time before 1970 or past the last one a
   * `Date` can hold) fails, naming the clock, before it writes or sends.
   *
   * @default {Date.now}
   */
  readonly now?: () => number;
  /**
   * A source of numbers in `[0, 1)` for the jitter.
   *
   * @default {Math.random}
   */
  readonly random?: () => number;
  /**
   * How long one delivery holds the per-intent lease while it acts, in
   * milliseconds. It must outlast the Sender's own timeout, with room for
   * the writes around the send: with a Sender that declares its
   * `timeoutMs` (`HttpSender` does), a lease under twice it is refused
   * (RangeError). The lease is timed from before the
   * write-ahead, and a write-ahead that took more than half of it sends
   * nothing (recorded as not sent; the delivery fails as a failed send
   * does, poisoned on the last delivery). A crashed delivery's lease
   * blocks others until it expires.
   *
   * @default {30000}
   */
  readonly leaseMs?: number;
  /**
   * How far apart the clocks of the instances sharing a store may be, in
   * milliseconds. A lease's expiry and a send's `broadcasting` are written
   * by one instance's clock and read by another's: another delivery's
   * lease and send in flight are taken as live this much longer, so a
   * contender whose clock runs ahead (or a holder's behind) by up to this
   * never acts while a send may still be in flight (I5). A crashed
   * delivery's lease so blocks others this much longer.
   *
   * @default {5000}
   */
  readonly clockSkewMs?: number;
}

/**
 * The settle worker built by {@linkcode createRelayer}.
 *
 * @example Deliver, then redrive the dead letter
 * ```ts
 * import { createRelayer, MemoryStore, type Relayer, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001" });
 * const relayer: Relayer = createRelayer({ store, sender: new ScriptedSender({}), policy: { maxDeliveries: 1 } });
 * const job = { intentId: "pi_0001", kind: "settle" } as const;
 * // No delivery number: the relayer counts it in the store (1 of 1 here).
 * assert.equal((await relayer.deliver(job)).action, "poison");
 * // Once an operator has fixed the cause, redrive: the count starts afresh.
 * assert.deepEqual(await relayer.redrive("pi_0001/settle"), job);
 * assert.equal(await store.deliveries("pi_0001/settle"), 0);
 * ```
 */
export interface Relayer {
  /** The policy in force, complete and checked. */
  readonly policy: Policy;
  /**
   * The lease a delivery holds while it acts, in milliseconds
   * (`RelayerOptions.leaseMs`): a delivery that meets another's lease
   * answers busy and waits up to `leaseMs` + 2 × `clockSkewMs`.
   */
  readonly leaseMs: number;
  /**
   * How far apart the instances' clocks may be, in milliseconds
   * (`RelayerOptions.clockSkewMs`).
   */
  readonly clockSkewMs: number;
  /**
   * Runs one delivery of `job`.
   *
   * @param job The job as the queue delivered it.
   * @param delivery The delivery number the queue reports (1-based,
   * counting the first try); omitted, the relayer counts it in the store.
   * @param options The delivery's replay record, which rides in its first
   * write; the key it is counted under; the queue's ids of its message.
   * @returns What the queue should do next.
   * @throws {TypeError} If the job is malformed, `options` (or its
   * `message`) holds a name it does not read, or the clock (`now`)
   * returns anything but whole milliseconds (on any delivery: no policy
   * decides on a caller's mistake).
   * @throws {RangeError} If `delivery` is not an integer from 1 to 2^53 − 1.
   * @throws {ReplayError} If `options.claim` was already used: nothing was done.
   * @throws The store's own error when it fails the delivery's count, or
   * a store call before a send (a lost connection, a statement cut by a
   * timeout, no connection to be had): the first read of the intent, a
   * re-read after a lost race, the write ahead of a send, the replay record
   * written before the signer is asked (or a look-only delivery's one
   * commit), the write that settles a confirmed tx. Nothing was decided,
   * whatever the delivery's number, and the queue should redeliver (the
   * webhook answers 503). Not the job's failure: at
   * the queue's last delivery a blip would otherwise poison the job, and
   * send a paid payment to review. (After a write carrying `options.claim`
   * whose answer was lost, a retry instead; the store failing the record
   * of a send, once the signer was asked, is the job's failure: the tx may
   * have left.)
   */
  deliver(
    job: Job,
    delivery?: number,
    options?: DeliverOptions,
  ): Promise<Outcome>;
  /**
   * The queue gave up on `job` (its failure callback, dead-letter topic or
   * dead-letter queue): poisons it as exhausted, "the queue gave up after
   * N deliveries", and resolves the intent exactly as a poison decision
   * does. A `settling` intent is first settled instead if one of its txs
   * confirmed (its receipts are asked once, for at most 5 s or half the
   * lease; past that it resolves without them): a queue that timed out the
   * delivery reading that receipt gives up while it still runs, and a
   * paid payment must not go to review. Idempotent: when a dead letter of
   * the job exists (a repeat, or the relayer poisoned it first), nothing
   * changes; when the intent is settled or failed (the job finished, its
   * ack lost), nothing changes and the outcome is `done`. Once resolved,
   * the message's queue ids are marked for 32 days: a repeat after its
   * letter was redriven or replaced changes nothing either, and is `done`.
   * A drop of an authorized intent's job holds the intent's lease until it
   * lapses, so a delivery of the job still in flight sends nothing behind
   * it; past that, a late copy of the message (`deliver` with
   * `options.message`) finds the marks and sends nothing either.
   *
   * @param job The job the queue gave up on.
   * @param options How many deliveries the queue made, and its ids.
   * @returns A poison outcome; `done` if the intent is settled or failed
   * (or settled now, on a confirmed tx), or the message was given up
   * before; a retry if another delivery holds the intent's lease.
   * @throws {TypeError} If the job is malformed, `options` (or its
   * `queue`) holds a name it does not read, or the clock (`now`) returns
   * anything but whole milliseconds.
   * @throws {RangeError} If `deliveries` is not an integer from 1 to 2^53 − 1.
   * @throws {ReplayError} If `options.claim` was already used: nothing was done.
   */
  giveUp(job: Job, options: GiveUpOptions): Promise<Outcome>;
  /**
   * Keeps a queue message that is not a job as a dead letter,
   * `<queue>/<id>/unreadable`, so that it is seen (`GET /v1/dead-letters`)
   * before the queue is told to drop it: a message acked unread may have
   * been an intent's only job. Touches nothing else. Such a letter records
   * a message, not a job: it cannot be redriven. A letter kept under the
   * same id that names another intent (or none, where this message names
   * one) stays as it is, and this message is
   * kept as `<queue>/sha256-…/unreadable`, by its bytes: the id may be
   * one the message's signature does not cover.
   *
   * @param message The queue, the message's id, what could be read of it,
   * and why it is unreadable.
   * @returns The dead letter's job id.
   * @throws {TypeError} If `message` has a field it does not read, or its
   * `queue` is not one of the four, or `raw` or `detail` is not a string
   * (nothing is written).
   * @throws {Error} If the store fails: the queue should redeliver the
   * message, not drop it.
   */
  keepUnreadable(message: UnreadableMessage): Promise<string>;
  /**
   * Takes a job out of the dead letters with a fresh delivery count, so it
   * can be delivered again. Removes exactly the dead letter it read: of two
   * concurrent redrives one wins, the other gets a `ConflictError`. In one
   * relayer the other is refused before it reads or publishes, while the
   * first runs; across relayers over one store it is refused at the
   * removal (its publish done), or, if its read came after the winner's
   * removal, finds no letter (`null`): no store records what removed one.
   * `publish` runs before the removal (a failed publish loses nothing; a
   * duplicate carries the same deduplication id); `message` is enqueued on
   * the store's own queue in the removal's commit. The queue ids the letter
   * kept are marked first (as `giveUp` marks them once it resolved), so that
   * a queue repeating that message's give-up later changes nothing
   * (`giveUp` answers "done").
   *
   * @returns The job, or `null` if there is no such dead letter.
   * @throws {ConflictError} If the intent is settled, failed, in review or
   * gone (no job can help it), or another redrive won, or another redrive
   * of `jobId` runs in this relayer.
   * @throws {TypeError} If `jobId` is not a job id (a string with a '/'),
   * or `options` has a field it does not read.
   */
  redrive(jobId: string, options?: RedriveOptions): Promise<Job | null>;
  /**
   * Removes a dead letter that no job can act on, once an operator has
   * dealt with it: a letter whose intent is settled or failed (or does not
   * exist), or one that records an unreadable message whose intent, if it
   * names one, is settled, failed or absent too. A letter whose intent a
   * job can still move (created, authorized, settling) is refused: it is
   * the record that the intent may have no job, so redrive it (or publish
   * a job) first. A letter whose intent is in review is refused too: it is
   * the record of why. Like `redrive`, it marks the queue ids the letter
   * kept first, so a queue repeating that give-up later changes nothing.
   * Unlike a redrive it keeps the job's delivery count: the letter's own
   * write reset the count of the job it ended, and a job delivered since
   * counts on.
   *
   * @param jobId The dead letter's job id.
   * @param options `version`: remove the letter only if it is still the
   * one read (`StoredDeadLetter.version`).
   * @returns The dead letter removed, or `null` if there is none.
   * @throws {ConflictError} If a job can still move the intent, it is in
   * review, or the letter changed since `version` was read (or during the
   * removal).
   * @throws {TypeError} If `jobId` is not a job id (a string with a '/'),
   * or `options` has a field it does not read.
   *
   * @example Discard an unreadable message's letter
   * ```ts
   * import { createRelayer, MemoryStore, ScriptedSender } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const store = new MemoryStore();
   * const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
   * const jobId = await relayer.keepUnreadable({ queue: "local", id: "m-1", raw: "{", detail: "not JSON" });
   * assert.equal((await relayer.discard(jobId))?.jobId, "local/m-1/unreadable");
   * assert.equal(await store.getDeadLetter(jobId), null);
   * ```
   */
  discard(
    jobId: string,
    options?: { readonly version?: string },
  ): Promise<DeadLetter | null>;
}

/**
 * The options of one delivery ({@linkcode Relayer.deliver}).
 *
 * @example A signed delivery's replay record
 * ```ts
 * import { createRelayer, type DeliverOptions, MemoryStore, ReplayError, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const relayer = createRelayer({ store: new MemoryStore(), sender: new ScriptedSender({}), now: () => 0 });
 * const job = { intentId: "pi_0404", kind: "settle" } as const;
 * const options: DeliverOptions = { claim: { key: "v1=ab12", now: 0, expiresAt: 360_000 } };
 * assert.equal((await relayer.deliver(job, 1, options)).action, "retry");
 * await assert.rejects(relayer.deliver(job, 1, options), ReplayError);
 * ```
 */
export interface DeliverOptions {
  /** The signed request's replay record: refused if used before. */
  readonly claim?: Claim;
  /**
   * The key the store counts this delivery under, when the queue reports
   * no delivery number (Pub/Sub counts by subscription and message id).
   *
   * @default {the job id}
   */
  readonly countAs?: string;
  /**
   * The ids the queue's give-up of this message would carry (QStash's
   * message id, Cloudflare's message id as `dlqId`, a Pub/Sub message's
   * source as `dlqId`, `<project>/<subscription>@<publish time>#<intent
   * id>` as its dead-letter copy names it): once `giveUp` has marked that
   * message (before it drops the job, or once it resolved), a copy of the
   * message that would send (the first send, or a rescue) sends nothing.
   * It is `done` once the give-up resolved ("the queue gave up on this
   * message before: a late copy, nothing sent"), and a retry while the
   * give-up is still at work ("the queue is giving up on this message:
   * nothing sent, and nothing until its give-up resolves").
   * Checked in the write ahead of the send: no store round trip of its
   * own; and after each read of the intent a poison of a delivery that
   * wrote nothing would resolve, which such a copy answers the same way
   * instead of resolving the intent (a job published since may be
   * settling it). Without it, a late copy is not
   * told from any other delivery. A delivery that drops an authorized
   * intent's job (its last, which sends nothing) marks its message so,
   * then releases the intent's lease its letter took (where the store has
   * `releaseLease`): a redrive of the letter sends at its first delivery.
   * Without it, that drop holds the lease until it lapses, and a redrive
   * delivered within it answers busy.
   */
  readonly message?: QueueIds;
}

/**
 * What a queue says when it gives up ({@linkcode Relayer.giveUp}).
 *
 * @example QStash's failure callback
 * ```ts
 * import { createRelayer, type GiveUpOptions, MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0002", state: "authorized", hold: "pending" });
 * const relayer = createRelayer({ store, sender: new ScriptedSender({}), now: () => 0 });
 * const options: GiveUpOptions = { deliveries: 6, queue: { queue: "qstash", messageId: "msg_1", dlqId: "dlq_1" } };
 * const outcome = await relayer.giveUp({ intentId: "pi_0002", kind: "settle" }, options);
 * assert.equal(outcome.reason, "the queue gave up after 6 deliveries");
 * assert.equal((await store.getDeadLetter("pi_0002/settle"))?.queue?.dlqId, "dlq_1");
 * ```
 */
export interface GiveUpOptions {
  /** How many deliveries the queue made, 1-based. */
  readonly deliveries: number;
  /** The queue's ids of the message, kept on the dead letter. */
  readonly queue: QueueIds;
  /** The signed callback's replay record. */
  readonly claim?: Claim;
}

/**
 * A queue message that is not a job ({@linkcode Relayer.keepUnreadable}).
 *
 * @example Keep a message without a kind
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender, type UnreadableMessage } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
 * const message: UnreadableMessage = {
 *   queue: "cloudflare",
 *   id: "8f2c0a",
 *   raw: '{"intentId":"pi_0002"}',
 *   seen: { intentId: "pi_0002" },
 *   detail: `'kind' must be "settle"`,
 * };
 * assert.equal(await relayer.keepUnreadable(message), "cloudflare/8f2c0a/unreadable");
 * const letter = await store.getDeadLetter("cloudflare/8f2c0a/unreadable");
 * assert.equal(letter?.intentId, "pi_0002");
 * ```
 */
export interface UnreadableMessage {
  /** The queue: `"pubsub"`, `"qstash"`, `"cloudflare"`, `"local"`, `"generic"` (a bridge on `POST /v1/deliveries`). */
  readonly queue: "pubsub" | "qstash" | "cloudflare" | "local" | "generic";
  /** The queue's id of the message; one that is not 1-128 of A-Z a-z 0-9 _ . : - is replaced by a hash of `raw`. */
  readonly id?: unknown;
  /** The message as received, for the hash. */
  readonly raw: string;
  /** What could be read of it: its intent id and delivery count, if any. */
  readonly seen?: { readonly intentId?: unknown; readonly attempt?: unknown };
  /** Why it is unreadable, in words. */
  readonly detail: string;
  /**
   * The verified request's replay record, claimed with the letter: a
   * replay of the same signed message writes nothing (`ReplayError`).
   */
  readonly claim?: Claim;
}

/** How each queue is named in an unreadable message's reason. */
const QUEUE_NAMES: Readonly<Record<UnreadableMessage["queue"], string>> = {
  pubsub: "Pub/Sub",
  qstash: "QStash",
  cloudflare: "Cloudflare Queues",
  local: "local queue",
  generic: "bridge",
};

/**
 * Where a redriven job goes ({@linkcode Relayer.redrive}).
 *
 * @example Publish before the dead letter is removed
 * ```ts
 * import { createRelayer, type Job, MemoryStore, type RedriveOptions, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001" });
 * const relayer = createRelayer({ store, sender: new ScriptedSender({}), policy: { maxDeliveries: 1 } });
 * await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 1);
 * const published: string[] = [];
 * const options: RedriveOptions = {
 *   publish: (job: Job, deduplicationId: string) => {
 *     published.push(deduplicationId);
 *     return Promise.resolve();
 *   },
 * };
 * await relayer.redrive("pi_0001/settle", options);
 * assert.equal(published.length, 1);
 * assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
 * ```
 */
export interface RedriveOptions {
  /**
   * Publishes the job to a queue before the dead letter is removed, with a
   * deduplication id unique to the dead letter read (the job id, the
   * letter's version and the time it was written), so the loser of two
   * concurrent redrives publishes a duplicate the queue drops. What it resolves to is not read (a Worker's
   * `env.JOBS.send(job)` answers its queue's metrics); a rejection keeps
   * the letter.
   */
  readonly publish?: (job: Job, deduplicationId: string) => Promise<unknown>;
  /** The message to enqueue on the store's own queue (Deno KV) in the removal's commit. */
  readonly message?: (job: Job) => unknown;
}

/**
 * How long a give-up waits for a settling intent's receipts before it
 * resolves the intent without them (see `giveUp`): a Sender's own
 * timeout may be longer, or absent, and a queue's give-up push has a
 * deadline of its own (Pub/Sub's 10 s unless set).
 */
const GIVE_UP_RECEIPTS_MS = 5_000;

/** How many intents' unrecorded txs a relayer keeps for the resolve route (the most recent). */
const UNRECORDED_INTENTS = 1024;

/** How many unrecorded txs a relayer keeps for one intent: as many as a store keeps on record. */
const UNRECORDED_PER_INTENT = 32;

/**
 * How long a give-up's mark lives: longer than a queue can send the same
 * message's give-up again. Pub/Sub keeps a message up to 31 days (a
 * subscription's `messageRetentionDuration`) and may dead-letter it more
 * than once; a mark that lapsed first would let that copy resolve a
 * payment a job published since is settling.
 */
const GIVE_UP_MARK_MS = 32 * 24 * 60 * 60 * 1000;

/** The marks of a delivery that names no message: one array for all of them. */
const NO_MARKS: readonly string[] = Object.freeze([]);

/** `deliver`'s options when none are given: nothing to check. */
const NO_OPTIONS: DeliverOptions = Object.freeze({});

/** A queue gave up on a job whose intent is already settled or failed: nothing to do. */
class Finished extends Error {}

/**
 * A give-up's resolution found a tx on record whose receipt its check
 * did not ask (recorded since, by a delivery on another instance, which
 * the give-up could not wait for as its own): the check runs again.
 */
class ReceiptsUnasked extends Error {}

/**
 * How many times a give-up checks the receipts before its resolution,
 * at most: each time again only because a tx was recorded since the
 * last. The last resolves on what it reads, as before.
 */
const RECEIPT_CHECKS = 3;

/**
 * A delivery at or past `maxDeliveries` found its intent authorized and
 * sent nothing (see `plan`): the job's failure, decided as any other.
 */
class LastDelivery extends Error {}

/**
 * The store failed a delivery's settle step before any send: its look
 * (the first read of the intent), a read or write-ahead after it, the
 * replay record before the signer is asked (or a look-only delivery's),
 * or the write that settles a confirmed tx. Not the job's failure:
 * `deliver` throws `error` as the store threw it (a give-up, as it came).
 * A failure of a send's record is not one: the tx may have left, and that
 * delivery's failure is the send's.
 */
class StoreFailed extends Error {
  constructor(readonly error: unknown) {
    super("the store failed the delivery");
  }
}

/**
 * Runs a store call of the settle step; anything it throws but the
 * store's own answers (busy, a lost race or a refusal, a replay) and a
 * clock that cannot be read is the store failing ({@linkcode StoreFailed}).
 */
async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (
      error instanceof BusyError || error instanceof ConflictError ||
      error instanceof ReplayError || error instanceof ClockError ||
      error instanceof StoreFailed
    ) throw error;
    throw new StoreFailed(error);
  }
}

/**
 * The error of a redrive's or a discard's read (of its dead letter, or of
 * its intent) that the store failed, made before anything of the call was
 * published or written: a copy of the store's error (its name and words,
 * as the log shows them), marked as nothing read or written, its `cause`
 * the store's error, which is left unmarked (a store may hand one error
 * to every read of a group, some of them a write's read back after a
 * commit that may have landed). A refusal the routes word already (a
 * conflict, the schema behind, a write's refusal, a read marked so) is
 * passed on as it is.
 */
function readBeforeWrite(error: unknown): unknown {
  if (
    error instanceof ConflictError || isSchemaBehind(error) ||
    isNotWritten(error) || isNotRead(error)
  ) {
    return error;
  }
  let words = messageOf(error);
  let name = "Error";
  try {
    if (error instanceof Error && typeof error.message === "string") {
      words = wordsOf(error);
      if (typeof error.name === "string") name = error.name;
    }
  } catch {
    // A proxy's trap: the words messageOf() found.
  }
  const copy = new Error(words, { cause: error });
  copy.name = name;
  return notRead(copy);
}

/**
 * Reads the dead letter of `jobId` first thing in a redrive or a discard;
 * a failure as {@linkcode readBeforeWrite} words it.
 */
async function readLetter(
  store: Store,
  jobId: string,
): Promise<StoredDeadLetter | null> {
  return letterOrNull(
    jobId,
    await beforeWrite(() => store.getDeadLetter(jobId)),
  );
}

/** What `read` answers; its failure as {@linkcode readBeforeWrite} words it. */
async function beforeWrite(read: () => unknown): Promise<unknown> {
  try {
    return await read();
  } catch (error) {
    throw readBeforeWrite(error);
  }
}

/**
 * Reads an intent, refusing one whose state is none of the machine's, or
 * that lacks `lastBroadcast`: a
 * Store of one's own that maps its rows wrongly (`"AUTHORIZED"` from a SQL
 * enum) would otherwise have every delivery answered "intent already …",
 * acked, and the payment left with no job and no dead letter. A
 * `TypeError` here is the store failing: the delivery throws, and nothing
 * is acked.
 */
async function readIntent(store: Store, id: string): Promise<Intent | null> {
  return checkedIntent(id, await store.getIntent(id));
}

/**
 * {@linkcode readIntent} in a redrive or a discard, before anything of it
 * is published or written: a failure of the store's read as
 * {@linkcode readBeforeWrite} words it; a refused answer as before.
 */
async function readIntentBeforeWrite(
  store: Store,
  id: string,
): Promise<Intent | null> {
  return checkedIntent(id, await beforeWrite(() => store.getIntent(id)));
}

/** What a store's `getIntent` answered for `id`, checked as {@linkcode readIntent} says. */
function checkedIntent(id: string, read: unknown): Intent | null {
  const intent = intentOrNull(id, read);
  if (intent === null) return intent;
  // Left out, it reads as `undefined`: named here, not met later as
  // "Cannot read properties of undefined (reading 'outcome')". Fields the
  // relayer reads the safe way when left out (`mayHaveSent`: may have
  // sent; `broadcasting`: a send in flight) are not refused, so such a
  // store keeps reaching review as before.
  const broadcast: unknown = intent.lastBroadcast;
  if (
    broadcast === undefined ||
    (broadcast !== null && typeof broadcast !== "object")
  ) {
    throw new TypeError(
      `Cannot read intent ${id} as the store returned intent ${id} without 'lastBroadcast' (a broadcast or null): fix the Store's getIntent, and run the store contract (@relayer/poison/testing) against it`,
    );
  }
  if (!(INTENT_STATES as readonly unknown[]).includes(intent.state)) {
    throw new TypeError(
      `Cannot read intent ${id} as the store returned intent ${id} in state ${
        JSON.stringify(String(intent.state).slice(0, 40))
      }, which is not an intent state (${
        INTENT_STATES.join(", ")
      }): fix the Store's getIntent, and run the store contract (@relayer/poison/testing) against it`,
    );
  }
  return intent;
}

/**
 * A delivery of a message the queue gave up on: its write ahead of the
 * send was refused, and nothing was written. `resolved`: the give-up was
 * resolved, and this is the queue's late copy; otherwise the give-up is
 * still at work (busy, or stopped before its resolution, to be repeated).
 */
class LateCopy extends Error {
  constructor(readonly resolved: boolean) {
    super(
      resolved
        ? "the queue gave up on this message before: a late copy, nothing sent"
        : "the queue is giving up on this message: nothing sent, and nothing until its give-up resolves",
    );
  }
}

/**
 * A queue's give-up repeated for the message a dead letter records: the
 * first resolution stands, and the repeat answers as that one did.
 */
class Repeated extends Error {
  constructor(readonly letter: DeadLetter) {
    super("the queue repeated its give-up");
  }
}

/**
 * Text kept in the store (errors from a Sender can be any size; Deno KV
 * values are at most 64 KiB), as every store keeps it (see `keptText`):
 * a store of one's own gets what the stores here read back.
 */
function clip(text: string, max = 1000): string {
  if (text.length <= max) return keptText(text);
  const kept = cutAt(text, max);
  return keptText(`${kept}… (${text.length - kept.length} more characters)`);
}

/**
 * The id of a job, the key of its delivery count and dead letter:
 * `"<intentId>/<kind>"`.
 *
 * @param job The job.
 * @returns Its id, such as `"pi_0001/settle"`.
 * @throws {TypeError} If `job` is not an object whose `intentId` and
 * `kind` are strings.
 *
 * @example The key of a job's count and dead letter
 * ```ts
 * import { jobIdOf } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(jobIdOf({ intentId: "pi_0001", kind: "settle" }), "pi_0001/settle");
 * ```
 */
export function jobIdOf(job: Job): string {
  // From JavaScript, an intent id alone or an unparsed job made
  // "undefined/undefined": one count shared by every job.
  if (typeof job?.intentId !== "string" || typeof job.kind !== "string") {
    throw new TypeError(
      `Cannot make a job id as 'job' must be { intentId, kind } with both strings: current value is ${
        show(job)
      }; pass the job parseJob() read`,
    );
  }
  return `${job.intentId}/${job.kind}`;
}

/**
 * The worker's line for one delivery: job, delivery number, action, and
 * why (for a poison, `"<decision reason>; <resolution text>"`, DESIGN §5).
 * The demo, the webhook's log and the local queue's log all print it. It
 * is one line: control characters in the reason (a Sender's multi-line
 * error) become spaces, and a reason is cut at 500 characters.
 *
 * @param job The job delivered.
 * @param outcome What the delivery answered.
 * @returns The line, without a prefix.
 * @throws {TypeError} If `outcome` has no `action` or `reason`, or `job`
 * is not a job.
 *
 * @example The line of a poisoned delivery
 * ```ts
 * import { formatOutcome } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const line = formatOutcome({ intentId: "pi_0003", kind: "settle" }, {
 *   action: "poison",
 *   delivery: 3,
 *   cause: "exhausted",
 *   reason: "no luck after 3 deliveries",
 *   resolution: "job dropped, intent still created",
 * });
 * assert.equal(
 *   line,
 *   "pi_0003/settle   #3  poison       (no luck after 3 deliveries; job dropped, intent still created)",
 * );
 * ```
 */
export function formatOutcome(job: Job, outcome: Outcome): string {
  if (
    typeof outcome?.action !== "string" || typeof outcome.reason !== "string"
  ) {
    throw new TypeError(
      `Cannot format outcome as 'outcome' must have an action and a reason: current value is ${
        show(outcome)
      }; pass what deliver() or giveUp() answered`,
    );
  }
  const text = outcome.action === "poison"
    ? `${outcome.reason}; ${outcome.resolution}`
    : outcome.reason;
  return `${jobIdOf(job).padEnd(16)} #${outcome.delivery}  ${
    outcome.action.padEnd(13)
  }(${
    text.length > LINE_TEXT_MAX || LINE_BREAKING.test(text)
      ? lineText(text)
      : text
  })`;
}

/** How much of a reason a worker line shows; the dead letter keeps it all. */
const LINE_TEXT_MAX = 500;

/**
 * A reason made fit for one log line: a Sender's own error may span lines
 * (viem's carry "Request Arguments:" and "Details:" on lines of their
 * own), and a line break in a log line starts what reads as another line.
 */
function lineText(text: string): string {
  const flat = oneLine(text);
  return flat.length <= LINE_TEXT_MAX
    ? flat
    : `${cutAt(flat, LINE_TEXT_MAX - 1)}…`;
}

/**
 * Whether two give-ups are the same queue's word on the same message: the
 * same queue, and the same message id or dead-letter id. A Pub/Sub message
 * id is unique within its topic only, and two dead-letter topics may push
 * to one service: a letter that names its source message (`dlqId`) is
 * known by that alone.
 */
function sameMessage(recorded: QueueIds | undefined, given: QueueIds): boolean {
  if (recorded === undefined || recorded.queue !== given.queue) return false;
  const byId = !(given.queue === "pubsub" && recorded.dlqId !== undefined);
  return (byId && given.messageId !== undefined &&
    recorded.messageId === given.messageId) ||
    (given.dlqId !== undefined && recorded.dlqId === given.dlqId);
}

/**
 * A dead letter its job's deliveries wrote (it names no message), kept as
 * the first resolution recorded it, with the ids of the queue's give-up
 * that rewrites it: a repeat of that give-up is then known by them, and
 * the rewrite gives the letter a new version, so that a redrive of it
 * publishes under a deduplication id of its own.
 */
function firstRecord(letter: StoredDeadLetter, queue: QueueIds): DeadLetter {
  const { version: _, ...first } = letter;
  return { ...first, queue };
}

/** The most bytes of UTF-8 a queue's id is kept with (see {@linkcode keptIds}). */
const QUEUE_ID_MAX_BYTES = 1024;

/**
 * A queue's ids as a give-up keeps them: an id over
 * {@linkcode QUEUE_ID_MAX_BYTES} bytes, or with U+0000 or a lone surrogate
 * (no queue we know of makes one; a bridge's bug may) is kept as
 * `sha256:<hex of its UTF-8>`. Its mark is a
 * store key (Deno KV takes 2 KiB, a PostgreSQL index about 2.7) and its
 * letter a value (Deno KV takes 64 KiB): kept as it is, a long id would
 * fail the give-up on every repeat, the intent's resolution with it.
 * The same id always gives the same hash, so repeats are still known.
 */
function keptIds(what: string, ids: QueueIds): QueueIds {
  // A misspelt `messageId` would leave the message without its marks.
  assertOptionNames(what, ids, QUEUE_ID_NAMES, {
    example: '{ queue: "qstash", messageId }',
  });
  // Anything else is left to the store's checks, which refuse it.
  const kept = <T>(id: T): T | string => {
    if (typeof id !== "string") return id;
    // U+0000 (PostgreSQL text cannot hold it: every delivery of the message
    // failed there alone) or a lone surrogate (PostgreSQL and Deno KV keep
    // U+FFFD, the memory store the surrogate): hashed, every store keeps
    // the same id.
    const storable = keptText(id) === id;
    // A UTF-16 unit is at most 3 bytes of UTF-8: most ids need no encoding.
    if (storable && id.length * 3 <= QUEUE_ID_MAX_BYTES) return id;
    const bytes = new TextEncoder().encode(id);
    return storable && bytes.length <= QUEUE_ID_MAX_BYTES
      ? id
      : `sha256:${bytesToHex(sha256(bytes))}`;
  };
  return {
    ...ids,
    queue: kept(ids.queue),
    ...(ids.messageId === undefined ? {} : { messageId: kept(ids.messageId) }),
    ...(ids.dlqId === undefined ? {} : { dlqId: kept(ids.dlqId) }),
  };
}

/**
 * The count keys that mark a queue's message as given up and resolved:
 * `gaveup/<queue>/message/<id>` and `gaveup/<queue>/dlq/<id>`. A repeat of
 * that give-up finds one even when the dead letter that recorded the
 * message is gone (redriven) or replaced (the job poisoned again since).
 * No job id has this shape (an intent id holds no `/`). QStash's and
 * Cloudflare's ids are unique to a message; a bridge's (`generic`) are
 * its own, and may come back for another job (a counter per queue), so its
 * marks are the job's: `gaveup/generic/<jobId>/message/<id>`. Within a job
 * they must not repeat (`docs/queues.md`): a job published again after its
 * give-up, under an id its give-up named, would be taken for a late copy.
 * A Pub/Sub id is unique within its topic only, and two dead-letter topics
 * may push to one service: a give-up that names its source message
 * (`dlqId`, which holds its subscription and intent) is marked by that
 * alone, one that does not (a copy published by hand) by its id as the
 * job's, `gaveup/pubsub/<jobId>/message/<id>`.
 */
function gaveUpKeys(ids: QueueIds | undefined, jobId: string): string[] {
  if (ids === undefined) return [];
  const scope = ids.queue === "generic" ? `generic/${jobId}` : ids.queue;
  const source = ids.queue === "pubsub" ? pubSubSource(ids.dlqId) : undefined;
  // Where the message id is a mark of its own, and under which scope.
  const byId = ids.queue !== "pubsub"
    ? scope
    : ids.dlqId === undefined
    ? `pubsub/${jobId}`
    : undefined;
  return [
    ...(ids.messageId === undefined || byId === undefined
      ? []
      : [`gaveup/${byId}/message/${ids.messageId}`]),
    ...(ids.dlqId === undefined ? [] : [`gaveup/${scope}/dlq/${ids.dlqId}`]),
    ...(source === undefined ? [] : [`gaveup/pubsub/source/${source}`]),
  ];
}

/** A resolved give-up's mark (`gaveup/…`) as the one written before its drop (`givingup/…`). */
function givingUpKey(key: string): string {
  return `givingup/${key.slice("gaveup/".length)}`;
}

/** The reverse of {@linkcode givingUpKey}. */
function resolvedKey(key: string): string {
  return `gaveup/${key.slice("givingup/".length)}`;
}

/**
 * The marks a delivery of a message carries in its write ahead of a send,
 * refused while one is on record: `givingup/…`, each of
 * {@linkcode gaveUpKeys} that a delivery can name, which a give-up writes
 * before it drops the job (see `giveUp`). For a Pub/Sub push whose source
 * parses, only its source with the time in milliseconds: the push writes
 * its publish time in a format of its own ("…Z"), the dead-letter copy in
 * another ("…+00:00"), so its `dlq` mark could match only where the source
 * does, and one check fewer lets two write-aheads share a commit on Deno
 * KV back-ends that take 10 checks (`@deno/kv`, `denokv`).
 */
function deliveryMarks(ids: QueueIds | undefined, jobId: string): string[] {
  const keys = gaveUpKeys(ids, jobId);
  const sourced = ids?.queue === "pubsub" &&
    keys.some((key) => key.startsWith("gaveup/pubsub/source/"));
  return (sourced
    ? keys.filter((key) => !key.startsWith("gaveup/pubsub/dlq/"))
    : keys).map(givingUpKey);
}

/**
 * A Pub/Sub source message (`<project>/<subscription>@<publish time>#<intent>`)
 * with its publish time as whole milliseconds: the dead-letter copy names
 * it in an attribute of its own format ("…T11:00:00.123+00:00"), a push of
 * the message itself in its `publishTime` ("…T11:00:00.123Z"), and a late
 * copy of the message is known by it. `undefined` if it is not one.
 */
function pubSubSource(dlqId: string | undefined): string | undefined {
  const match = dlqId?.match(/^([^@]*)@(.*)#([^#]*)$/);
  if (!match) return undefined;
  const at = Date.parse(match[2]!);
  return Number.isSafeInteger(at) ? `${match[1]}@${at}#${match[3]}` : undefined;
}

/**
 * Checks a job from the outside world (a queue message) and returns it in
 * its canonical shape.
 *
 * @param job Anything.
 * @returns The job.
 * @throws {TypeError} If it is not an object `{ intentId, kind: "settle" }`
 * with a valid intent id.
 *
 * @example Check a queue message
 * ```ts
 * import { parseJob } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseJob({ intentId: "pi_0001", kind: "settle" }), {
 *   intentId: "pi_0001",
 *   kind: "settle",
 * });
 * assert.throws(() => parseJob({ intentId: "" }), TypeError);
 * ```
 */
export function parseJob(job: unknown): Job {
  // From JavaScript, an intent id alone (`parseJob("pi_0001")`) was said
  // to lack an intent id, the one thing it held.
  if (typeof job !== "object" || job === null) throw notAJob(job);
  const { intentId, kind } = job as Record<string, unknown>;
  if (!isIntentId(intentId)) {
    // Looked for only here: a job read well pays for no more than typeof.
    if (Array.isArray(job)) throw notAJob(job);
    // The generic route's body where the job itself belongs (a QStash
    // publish, a Pub/Sub or Cloudflare message, POST /v1/jobs): said so,
    // not read as a job without an intent id.
    const { job: inner } = job as Record<string, unknown>;
    if (intentId === undefined && typeof inner === "object" && inner !== null) {
      throw new TypeError(
        `Cannot read job as it is wrapped in {"job": …}, the body POST /v1/deliveries takes: send the job itself, such as {"intentId":"pi_0001","kind":"settle"}`,
      );
    }
    throw new TypeError(
      `Cannot read job as 'intentId' must be ${INTENT_ID_RULE}: current value is ${
        show(intentId)
      }`,
    );
  }
  if (kind !== "settle") {
    throw new TypeError(
      `Cannot read job as 'kind' must be "settle": current value is ${
        show(kind)
      }`,
    );
  }
  return { intentId, kind };
}

/** The refusal of a job that is no object (a string, an array, null). */
function notAJob(job: unknown): TypeError {
  // A bridge that serialized the job, then the message around it: said
  // so, as the text of a job reads as one only to the eye.
  const twice = intentIdInText(job);
  if (twice !== undefined) {
    return new TypeError(
      `Cannot read job as it is encoded as JSON twice (a JSON text of the job for intent ${twice}): send the object itself, such as {"intentId":"pi_0001","kind":"settle"}, not its JSON.stringify`,
    );
  }
  return new TypeError(
    `Cannot read job as it must be an object such as {"intentId":"pi_0001","kind":"settle"}: current value is ${
      show(job)
    }`,
  );
}

/**
 * Checks a delivery number the relayer may keep in a dead letter: an
 * integer from 1 to 2^53 − 1. `decide` and `backoff` take any integer >= 1,
 * but a number past that cannot be stored, and the resolution that keeps it
 * comes after the send: refused here, before anything is read or sent.
 */
function assertKeptDelivery(what: string, delivery: unknown): void {
  assertDelivery(what, delivery);
  if (!Number.isSafeInteger(delivery)) {
    throw new RangeError(
      `Cannot ${what} as 'delivery' must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}: current value is ${
        show(delivery)
      }`,
    );
  }
}

/**
 * Checks the job id of a dead letter to redrive or discard: a string with
 * a '/' (`<intentId>/settle`, `<queue>/<id>/unreadable`). From JavaScript,
 * the job itself or its intent id alone found no letter, and the answer
 * (`null`) read as "no such letter", not as a wrong argument.
 */
function assertLetterId(what: string, jobId: unknown): void {
  if (typeof jobId !== "string" || !jobId.includes("/")) {
    throw new TypeError(
      `Cannot ${what} as 'jobId' must be a dead letter's job id such as "pi_0001/settle": current value is ${
        show(jobId)
      }; pass jobIdOf(job), or the jobId of a letter listDeadLetters() answered`,
    );
  }
}

/** The methods of a `Store`: an object lacking one is not a store. */
const STORE_METHODS = [
  "createIntent",
  "getIntent",
  "transition",
  "beginBroadcast",
  "recordBroadcast",
  "recordHold",
  "voidHold",
  "captureHold",
  "admit",
  "deliveries",
  "putDeadLetter",
  "getDeadLetter",
  "listDeadLetters",
  "redrive",
] as const;

/**
 * Checks, at construction, what the relayer calls on each delivery: a
 * missing Sender would otherwise fail every send as "may have been sent",
 * and so send every payment to review, from JavaScript or past a cast.
 */
function assertDependencies(
  store: unknown,
  sender: unknown,
  now: unknown,
  random: unknown,
): void {
  const missing = (what: unknown, names: readonly string[]) =>
    names.filter((name) =>
      typeof (what as Record<string, unknown> | null | undefined)?.[name] !==
        "function"
    );
  const storeMissing = missing(store, STORE_METHODS);
  if (storeMissing.length > 0) {
    throw new TypeError(
      `Cannot create relayer as 'store' is not a Store: it lacks ${
        storeMissing.join(", ")
      }; pass a MemoryStore, KvStore, PostgresStore or a store of your own`,
    );
  }
  const senderMissing = missing(sender, ["send", "receipt"]);
  if (senderMissing.length > 0) {
    throw new TypeError(
      `Cannot create relayer as 'sender' is not a Sender: it lacks ${
        senderMissing.join(" and ")
      }; pass an HttpSender or an object with send() and receipt()`,
    );
  }
  for (const [name, value] of [["now", now], ["random", random]] as const) {
    if (typeof value !== "function") {
      throw new TypeError(
        `Cannot create relayer as '${name}' must be a function: current value is ${
          show(value)
        }`,
      );
    }
  }
}

/**
 * Why a delivery is busy. Another database session holding what the write
 * needs (a lock past the store's bound) is said as the store said it, so
 * the log line sends the operator to the database's sessions; the hash of
 * a send whose record it held up stays in the line.
 */
function busyReason(job: Job, failure?: BusyError): string {
  if (isHeldBySession(failure)) {
    return clip(`intent ${job.intentId} is busy: ${oneLine(failure!.message)}`);
  }
  const sent = failure instanceof SentBusyError
    ? `; sent ${failure.txHash} first, but its record failed`
    : "";
  const clocks = failure instanceof InFlightError ? failure.clocks : "";
  return `intent ${job.intentId} is busy with another delivery${sent}${clocks}`;
}

/**
 * Another delivery's send in flight, read on the intent: busy, with what
 * its write-ahead's time says of the clocks (`clocks`, empty when nothing).
 */
class InFlightError extends BusyError {
  readonly clocks: string;
  constructor(
    message: string,
    options: { leaseExpiresAt: number; clocks: string },
  ) {
    super(message, { leaseExpiresAt: options.leaseExpiresAt });
    this.clocks = options.clocks;
  }
}

/**
 * A send the signer accepted whose record then met another delivery's
 * lease: busy, as any held lease is, with the hash kept for the log line,
 * the only place it is then found.
 */
class SentBusyError extends BusyError {
  constructor(readonly txHash: string, cause: BusyError) {
    super(`sent ${txHash}, but its record failed: ${cause.message}`, {
      cause,
    });
  }
}

/**
 * Refuses a lease under twice the timeout the Sender declares
 * (`Sender.timeoutMs`, as `HttpSender` does): the lease is renewed right
 * before a send and must outlast it, as the service's `LEASE` must be at
 * least twice `SENDER_TIMEOUT`. Read once, when the relayer is made.
 */
function assertLeaseOutlastsSends(
  leaseMs: number,
  sender: Sender,
  leaseDefault: boolean,
): void {
  const timeoutMs: unknown = sender.timeoutMs;
  if (timeoutMs === undefined) return;
  if (
    typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) ||
    timeoutMs < 0
  ) {
    throw new TypeError(
      `Cannot create relayer as 'sender.timeoutMs' must be a number of milliseconds >= 0, or absent for a Sender with no timeout of its own: current value is ${
        show(timeoutMs)
      }`,
    );
  }
  if (leaseMs < 2 * timeoutMs) {
    throw new RangeError(
      `Cannot create relayer as 'leaseMs' must be at least twice the Sender's 'timeoutMs' (${timeoutMs}): current value is ${leaseMs}${
        leaseDefault ? " (the default)" : ""
      }. The lease is renewed right before a send and must outlast it, with room for the writes around it, or two deliveries could send at once: set leaseMs to at least ${
        2 * timeoutMs
      }, or lower the Sender's timeoutMs`,
    );
  }
}

/**
 * Builds the settle worker. One call of `deliver` per delivery of a job;
 * the answer says what the queue should do next.
 *
 * A delivery first looks at the intent without a lease: most deliveries
 * only look (a receipt still pending, a payment not stuck yet) and cost one
 * read. To act, its first write checks the version the look read and takes
 * the intent's lease in the same commit, so two deliveries never act on one
 * intent at once; a send is two commits (the write-ahead with the lease,
 * the record with its release). A delivery numbered at or past the
 * policy's `maxDeliveries` makes no first send: a send ends in a retry to
 * read its receipt, so there it could only be poisoned and the payment sent
 * to review; it finds its intent `authorized`, sends nothing, and is
 * poisoned with the intent left authorized, for a redrive. On failure it
 * asks `decide`. When the job
 * is poisoned it re-reads the intent and resolves it by the state it is in
 * now: drop the job, void the hold *then* fail the intent (only if the last
 * broadcast was declared not sent), or send it to review. A dead letter is
 * kept in the same write. Building it draws no random number and does no
 * I/O: the first delivery does.
 *
 * @param options The store, the Sender, the policy, the clock and the
 * source of randomness.
 * @returns The relayer.
 * @throws {RangeError} If the policy or `leaseMs` is invalid, or `leaseMs`
 * is under twice the `timeoutMs` the Sender declares (`HttpSender` does).
 * @throws {TypeError} If `store` lacks a `Store` method, `sender` lacks
 * `send` or `receipt` or declares a `timeoutMs` that is not a number of
 * milliseconds, `now` or `random` is not a function, or the options
 * are not an object or name an option it does not read (a misspelt
 * `leaseMs` would fall back to its default).
 *
 * @example A payment whose Sender declares nothing was sent
 * ```ts
 * import { createRelayer, MemoryStore, notSent, poison, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const sender = new ScriptedSender({
 *   pi_0001: { sends: [{ error: poison(notSent(new Error("chain id mismatch"))) }] },
 * });
 * const relayer = createRelayer({ store, sender, now: () => 0, random: () => 0.5 });
 *
 * const outcome = await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 1);
 * assert.deepEqual(outcome, {
 *   action: "poison",
 *   delivery: 1,
 *   cause: "declared",
 *   reason: "retrying will not help",
 *   resolution: "nothing was sent, so the intent failed",
 * });
 * const intent = await store.getIntent("pi_0001");
 * assert.equal(intent?.state, "failed");
 * assert.equal(intent?.hold, "voided");
 * ```
 */
export function createRelayer(options: RelayerOptions): Relayer {
  // A misspelt option (`leaseMS`, `polcy`) would fall back to its default.
  assertOptionNames("create relayer", options, RELAYER_OPTIONS, {
    example: "{ store, sender }",
  });
  const {
    store,
    sender,
    now: clock = Date.now,
    random = Math.random,
    leaseMs = DEFAULT_LEASE_MS,
    clockSkewMs = DEFAULT_CLOCK_SKEW_MS,
  } = options;
  assertDependencies(store, sender, clock, random);
  // Checked on every read: a clock off by its type (`performance.now()`'s
  // fractions, a `Date`, `NaN`) took a payment for stuck at once, and the
  // store's refusal of the time it wrote named a field, not the clock.
  const now = checkedClock("run a delivery", clock);
  const policy = definePolicy(options.policy);
  assertMs("create relayer", "leaseMs", leaseMs, 1);
  assertLeaseOutlastsSends(leaseMs, sender, options.leaseMs === undefined);
  assertMs("create relayer", "clockSkewMs", clockSkewMs, 0);
  const giveUpReceiptsMs = Math.min(GIVE_UP_RECEIPTS_MS, leaseMs / 2);
  // A count the store keeps (the queue numbers no delivery: the local
  // Deno KV queue, the generic route without one) lives past the longest
  // wait asked between two deliveries: with 8 days alone, a cap past that
  // (the local queue takes up to 720h) let the count lapse between two
  // deliveries, and the job was never poisoned, its intent never resolved.
  const countTtlMs = countKeptMs(policy.capMs, leaseMs, clockSkewMs);
  // Drawn on the first delivery, not here: building a relayer at a
  // Worker's top level must not draw random numbers.
  let instance: string | undefined;
  let deliveriesStarted = 0;
  // The sends this relayer has in flight, by intent (how many deliveries
  // are between their write-ahead and its record). A copy delivered here
  // while one runs is busy whatever the clock says: a wall clock that
  // steps forward mid-send (a VM resumed, NTP stepped it) reads the send's
  // lease as lapsed and the payment as stuck, and the copy would rescue
  // beside the send (I5). On the local Deno KV queue that copy is certain:
  // Deno KV redelivers a message whose handler still runs once the wall
  // clock passes its deadline.
  // Each entry is the set of those sends, so that a queue's give-up can
  // wait for them to end (see ownSendsEnded).
  const sending = new Map<string, Set<Promise<unknown>>>();
  // The sends of this process whose outcome then failed its record (the
  // store takes the record of a send that outlived the intent's
  // settling on the intent in review; a store error, say), by intent, the most recent
  // intents kept: the txs they returned, in the log alone, and whether
  // one ended since the resolve route last said so. The route reads
  // those txs' receipts beside the ones on record, and refuses a fail
  // once after such a send ended: the operator's look at the nonce may
  // have come before its tx left.
  const unrecorded = new Map<
    string,
    {
      readonly txHashes: readonly string[];
      /** The last resolve request under way when the route said so; none: unsaid. */
      readonly toldUpTo?: number;
    }
  >();

  // The write-aheads of this process's sends that ended with no record
  // landed, so still on the intent (`<intent id>\0<broadcasting>`), the
  // most recent kept: a review that still carries one of them waits
  // for no send in the resolve route, as that send's own process knows it
  // ended; any other write-ahead may be a send still running elsewhere.
  const endedWriteAheads = new Set<string>();

  // The job ids whose redrive runs in this relayer, each taken out when
  // its redrive ends, whatever the outcome. A redrive of one of them is
  // the loser of two at once (an operator's double click, a retried
  // request), answered as such before it reads: its read may come after
  // the winner removed the letter, when it would find none. Across
  // instances no store records what removed a letter; that loser finds
  // none.
  const redriving = new Set<string>();

  /** Keeps that the send of `intentId` written ahead at `broadcasting` ended. */
  function keepEnded(intentId: string, broadcasting: number | null): void {
    if (broadcasting === null) return;
    const key = `${intentId}\0${broadcasting}`;
    endedWriteAheads.delete(key);
    endedWriteAheads.add(key);
    if (endedWriteAheads.size > UNRECORDED_INTENTS) {
      endedWriteAheads.delete(endedWriteAheads.values().next().value!);
    }
  }

  /** Keeps a send of `intentId` whose outcome is on no record, and its tx if it returned one. */
  function keepUnrecorded(intentId: string, txHash?: string): void {
    const kept = unrecorded.get(intentId)?.txHashes ?? [];
    unrecorded.delete(intentId);
    unrecorded.set(intentId, {
      txHashes: txHash === undefined || kept.includes(txHash)
        ? kept
        : [...kept, txHash].slice(-UNRECORDED_PER_INTENT),
    });
    if (unrecorded.size > UNRECORDED_INTENTS) {
      unrecorded.delete(unrecorded.keys().next().value!);
    }
  }

  /**
   * Whether a send of `intentId` ended unrecorded and the resolve request
   * numbered `arrival` cannot have been told: the first to ask since, and
   * any that arrived before that answer (a second operator's, a retry sent
   * while the first try ran), which can not have followed it.
   */
  function tellUnrecorded(intentId: string, arrival: number): boolean {
    const kept = unrecorded.get(intentId);
    if (kept === undefined) return false;
    if (kept.toldUpTo !== undefined) return arrival <= kept.toldUpTo;
    unrecorded.set(intentId, { ...kept, toldUpTo: resolveArrivals() });
    return true;
  }

  /**
   * One delivery's writes: each carries the delivery's lease, and the
   * first one its replay record. `committed` says whether any write landed
   * (after which a lost race is not a reason to plan again).
   */
  class Delivery {
    committed = false;
    /**
     * A write carrying the claim failed in a way that does not say whether
     * it landed (a connection lost after the commit, say): the claim may be
     * on record already, by this very delivery.
     */
    claimMaybeUsed = false;
    /** A give-up's: its message is marked as given up on (see `markGivingUp`). */
    givingMarked = false;
    constructor(
      readonly owner: string,
      public claim: Claim | undefined,
      /** The give-up marks of the message delivered (see `DeliverOptions.message`). */
      readonly marks: readonly string[] = NO_MARKS,
    ) {}

    /**
     * The options of the next write: `keep` holds the lease across a send.
     * Its time is read `clockSkewMs` early and its life that much longer:
     * the expiry written is the same, and another's lease counts as live
     * for `clockSkewMs` more, whatever its holder's clock said.
     */
    options(keep = false): WriteOptions {
      const at = now();
      const early = Math.min(clockSkewMs, at);
      return {
        lease: {
          owner: this.owner,
          ttlMs: leaseMs + early,
          now: at - early,
          keep,
        },
        ...(this.claim ? { claim: this.claim } : {}),
      };
    }

    /**
     * Runs a write; once it lands, the claim has been used. After a write
     * whose answer was lost (`claimMaybeUsed`) the delivery writes nothing
     * more: `deliver` answers retry, and a give-up's error goes out as it is.
     */
    async write<T>(write: (options: WriteOptions) => Promise<T>, keep = false) {
      // Outside the try: a clock that cannot be read wrote nothing.
      const options = this.options(keep);
      let result: T;
      try {
        result = await write(options);
      } catch (error) {
        // A store's refusal (a replay, a lost race) says nothing landed.
        if (
          this.claim !== undefined && !(error instanceof ReplayError) &&
          !(error instanceof ConflictError) && !(error instanceof BusyError)
        ) this.claimMaybeUsed = true;
        throw error;
      }
      this.claim = undefined;
      this.committed = true;
      return result;
    }

    /**
     * A delivery that wrote nothing still uses its signature: one commit.
     * Also called before the Sender is asked anything, so that a replayed
     * request is refused before it reaches the signer.
     */
    async close(): Promise<void> {
      if (this.claim === undefined) return;
      try {
        await store.admit({ claim: this.claim, now: now() });
      } catch (error) {
        // Found on record after a write whose answer was lost: that write
        // landed (or a replay's did, long ago: the two cannot be told
        // apart). Either way the signature is used, and this delivery
        // writes nothing more, so it is answered as the failure it had.
        if (!(error instanceof ReplayError && this.claimMaybeUsed)) throw error;
      }
      this.claim = undefined;
    }
  }

  /** The policy's delay after delivery `n`, for a retry `decide` did not make. */
  function retryDelayMs(n: number): number {
    return jitter(backoff(n, policy), policy.jitter, random);
  }

  /**
   * Another delivery's send in flight, written ahead at `broadcasting` by
   * this clock: busy as a held lease is, one that lapses once the send is
   * `leaseMs` + `clockSkewMs` old ({@linkcode busyWaitMs} waits it out).
   */
  function inFlight(message: string, broadcasting: number): BusyError {
    // Written by a clock further ahead of this one than the bound: the one
    // case the lease does not cover, and only the clock behind can see it.
    const aheadMs = broadcasting - now();
    return new InFlightError(message, {
      leaseExpiresAt: broadcasting + leaseMs + clockSkewMs,
      clocks: aheadMs > clockSkewMs
        ? `; its send was begun ${
          formatDuration(aheadMs)
        } ahead of this clock, more than clockSkewMs (${
          formatDuration(clockSkewMs)
        }) allows: two sends may overlap, keep the instances' clocks synchronised`
        : "",
    });
  }

  function begin(
    claim: Claim | undefined,
    marks: readonly string[] = NO_MARKS,
  ): Delivery {
    instance ??= crypto.randomUUID();
    return new Delivery(`${instance}:${++deliveriesStarted}`, claim, marks);
  }

  async function deliver(
    input: Job,
    delivery?: number,
    options: DeliverOptions = NO_OPTIONS,
  ): Promise<Outcome> {
    if (options !== NO_OPTIONS) {
      assertOptionNames("deliver", options, DELIVER_OPTIONS, {
        example: "{ message }",
      });
    }
    const job = parseJob(input);
    const jobId = jobIdOf(job);
    if (delivery !== undefined) assertKeptDelivery("deliver", delivery);
    let claim = options.claim;
    let n = delivery;
    if (n === undefined) {
      // Counted before anything is done: a delivery that crashes still used one.
      const count = options.countAs ?? jobId;
      try {
        const admitted: unknown = await store.admit({
          count,
          ...(claim ? { claim } : {}),
          now: now(),
          ttlMs: countTtlMs,
        });
        if (!Number.isSafeInteger(admitted) || (admitted as number) < 1) {
          // A count as its driver read it (postgres.js reads an int8 as
          // text): met later by `decide`, after the send, it failed every
          // delivery naming a number the caller never gave, and the
          // payment was never poisoned.
          throw new TypeError(
            `Cannot count a delivery of ${jobId} as the store's admit() returned ${
              show(admitted)
            }, not a delivery number (an integer >= 1): fix the Store's admit (a count read as text or as a BigInt must be made a number), and run the store contract (@relayer/poison/testing) against it`,
          );
        }
        n = admitted as number;
      } catch (error) {
        if (!(error instanceof BusyError)) throw error;
        // Not counted: copies of this job arriving at once won the count
        // (or a database session held its row). Busy, as a held lease is;
        // it answers the count on record.
        // A count the store cannot read now either (busy, or a read's own
        // error: PostgresStore's for a statement another session
        // cancelled is a plain Error) is answered as the first: the store
        // already said busy, and nothing of this delivery was written.
        const seen = Math.max(
          1,
          await store.deliveries(count, now()).then(
            (seen) => countOrThrow(count, seen),
            () => 1,
          ),
        );
        if (claim !== undefined) leaveUnrecorded(claim);
        return {
          action: "retry",
          delivery: seen,
          delayMs: retryDelayMs(seen),
          reason: busyReason(job, error),
        };
      }
      claim = undefined;
    }
    // Kept as a give-up keeps them: a long id's marks are its hash. No
    // message, no marks: nothing built on a delivery that carries none.
    const d = begin(
      claim,
      options.message === undefined ? undefined : deliveryMarks(
        keptIds("deliver this message", options.message),
        jobId,
      ),
    );
    let outcome: Outcome;
    try {
      outcome = await counted(job, jobId, n, d, options);
    } catch (error) {
      // The store busy on the call that records the delivery's replay
      // claim (its statement cancelled, another session's lock): nothing
      // of it landed, so the delivery is busy, as a busy write in the
      // settle step is, and not the store failing. Its claim stays unused.
      if (!(error instanceof BusyError)) throw error;
      outcome = busyAnswer(job, n, error);
    }
    // Answered with its claim on no record: the caller may remember the
    // request as used (see _unrecorded_claims.ts).
    if (d.claim !== undefined) leaveUnrecorded(d.claim);
    return outcome;
  }

  /** A delivery's work once it is counted (`n`) and begun (`d`). */
  async function counted(
    job: Job,
    jobId: string,
    n: number,
    d: Delivery,
    options: DeliverOptions,
  ): Promise<Outcome> {
    let failure: unknown;
    try {
      const reason = await settle(job.intentId, d, n);
      // A look-only delivery's replay record: the store failing it is not
      // the job's failure either (see below). Decided on, a retry's or a
      // poison's write would claim the record again, and find it on record
      // by this very delivery if it landed and its answer was lost.
      await storeCall(() => d.close());
      return { action: "done", delivery: n, reason };
    } catch (error) {
      failure = error;
    }
    // The store failing is not the job's failure, and no policy decides on
    // it: counted as one, a blip at the queue's last delivery poisoned the
    // job, and its resolution, reading the intent once the blip was over,
    // sent a payment whose tx had confirmed to review (its look failed, or
    // the write that settles it). Out as the store threw it, it is the
    // caller's 503 (nothing decided), and at the queue's last delivery its
    // give-up resolves, receipts first. After a write whose answer was lost
    // it is the retry below, as it was: nothing is resolved then either.
    if (failure instanceof StoreFailed) {
      if (!d.claimMaybeUsed) throw failure.error;
      failure = failure.error;
    }
    if (failure instanceof LateCopy) return await lateCopy(n, d, failure);
    // A clock that cannot be read is the caller's mistake, not this
    // delivery's failure: no policy decides on it, whatever the number.
    if (failure instanceof ClockError) throw failure;
    if (failure instanceof BusyError) return await busy(job, n, d, failure);
    const decision = decide(failure, n, policy, { random });
    if (decision.action === "retry" || d.claimMaybeUsed) {
      // After a write whose answer was lost, no resolution: whether the
      // write landed is for the next delivery to read, and a replay whose
      // write failed so must not go on to write without its record.
      await d.close();
      return {
        action: "retry",
        delivery: n,
        delayMs: decision.action === "retry"
          ? decision.delayMs
          : retryDelayMs(n),
        reason: clip(
          decision.action === "retry" ? decision.reason : messageOf(failure),
        ),
      };
    }
    try {
      const resolution = await resolve(job, jobId, d, {
        cause: decision.cause,
        reason: decision.reason,
        deliveries: n,
        lastError: clip(messageOf(failure)),
        // Counted under the queue's message id: that count ends here too,
        // so a late duplicate of the message is counted from 1.
        ...(options.countAs !== undefined && options.countAs !== jobId
          ? { resetCount: options.countAs }
          : {}),
        lastDelivery: failure instanceof LastDelivery,
      });
      return { ...decision, delivery: n, resolution };
    } catch (error) {
      if (error instanceof LateCopy) return await lateCopy(n, d, error);
      if (error instanceof BusyError) return await busy(job, n, d, error);
      throw error;
    }
  }

  /**
   * Throws a `LateCopy` if the message a delivery poisoned on a failure
   * that wrote nothing (a receipt still pending, its number past the
   * policy's) was given up on: the give-up was the queue's last word on
   * the message, and a job published since (a redrive, a duplicated
   * publish) may be settling the intent. Resolved here, it would send
   * that payment to review and replace the give-up's letter. Answered as
   * its write ahead would have been. Looked for after each read of the
   * intent the resolution acts on (see `resolve`): a drop of the message
   * releases its lease once its marks landed, so a read that sees what
   * another message of the job wrote since is followed by a look that
   * sees the marks.
   */
  async function lateUnlessDropping(d: Delivery, lastDelivery: boolean) {
    if (d.committed || d.marks.length === 0 || !await wasMarked(d.marks)) {
      return;
    }
    const resolved = await wasMarked(d.marks.map(resolvedKey));
    // Not a last delivery that found the intent authorized while the
    // message's drop is unresolved: that drop (this message's own, cut
    // between its marks) has no give-up to finish it, and dropping the
    // job again touches nothing but the letter.
    if (resolved || !lastDelivery) throw new LateCopy(resolved);
  }

  async function giveUp(input: Job, options: GiveUpOptions): Promise<Outcome> {
    assertOptionNames("give up", options, GIVE_UP_OPTIONS, {
      example: "{ deliveries, queue }",
    });
    const job = parseJob(input);
    const jobId = jobIdOf(job);
    const n = options.deliveries;
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new RangeError(
        `Cannot give up as 'deliveries' must be an integer from 1 to ${Number.MAX_SAFE_INTEGER} (the deliveries the queue made): current value is ${
          show(n)
        }`,
      );
    }
    const queue = keptIds("give up on this queue message", options.queue);
    const d = begin(options.claim);
    const reason = `the queue gave up after ${n} deliver${
      n === 1 ? "y" : "ies"
    }`;
    const poisoned = {
      action: "poison",
      delivery: n,
      cause: "exhausted",
    } as const;
    try {
      await ownSendsEnded(job.intentId);
      let resolution: string | undefined;
      for (let check = 1; resolution === undefined; check++) {
        const { settled, asked } = await settledBeforeReview(job.intentId, d);
        if (settled !== undefined) {
          return {
            action: "done",
            delivery: n,
            reason: `${reason}: ${settled}`,
          };
        }
        try {
          resolution = await resolve(job, jobId, d, {
            cause: "exhausted",
            reason,
            deliveries: n,
            lastError: `the ${queue.queue} queue gave up`,
            queue,
            onlyOnce: true,
            ...(check < RECEIPT_CHECKS ? { asked } : {}),
          });
        } catch (error) {
          if (!(error instanceof ReceiptsUnasked)) throw error;
        }
      }
      // Resolved: the message is marked, so that a repeat of this give-up
      // changes nothing even once its letter is redriven or replaced. If
      // the mark fails, the queue repeats, and the repeat marks it. It
      // lives 32 days, longer than Pub/Sub keeps a message.
      // Given up on too, if the resolution dropped no job: its deliveries
      // look for those marks.
      await markGivingUp(queue, jobId, d);
      await markGivenUp(queue, jobId);
      return { ...poisoned, reason, resolution };
    } catch (error) {
      if (error instanceof BusyError) {
        // Its replay record busy too (a cancelled statement, another
        // session's lock): nothing of it landed, so the give-up is busy,
        // as a delivery's is, and not the store failing.
        return await busy(job, n, d, error).catch((closing: unknown) => {
          if (closing instanceof BusyError) return busyAnswer(job, n, error);
          throw closing;
        });
      }
      // Its receipts' replay record, or the write that settles: as it came.
      if (error instanceof StoreFailed) throw error.error;
      if (error instanceof Finished) {
        return { action: "done", delivery: n, reason: error.message };
      }
      if (error instanceof Repeated) {
        // Answered as the first was, from its letter: a repeat whose count
        // the store gave has a count the letter's write reset. Marked again,
        // in case the first crashed before its mark.
        const { letter } = error;
        await markGivingUp(queue, jobId, d);
        await markGivenUp(queue, jobId);
        return {
          action: "poison",
          delivery: letter.deliveries,
          cause: letter.cause,
          reason: letter.reason,
          resolution: letter.resolution,
        };
      }
      throw error;
    }
  }

  /** A copy of a message the queue gave up on: it sent nothing, and resolves nothing. */
  async function lateCopy(
    n: number,
    d: Delivery,
    late: LateCopy,
  ): Promise<Outcome> {
    await d.close();
    // Until the give-up resolves, the copy is not done: acked, it could
    // end the message while the intent it left settling (a send made
    // before the give-up began) waits for the give-up to resolve it.
    return late.resolved
      ? { action: "done", delivery: n, reason: late.message }
      : {
        action: "retry",
        delivery: n,
        delayMs: retryDelayMs(n),
        reason: late.message,
      };
  }

  /**
   * Another delivery is acting on this intent right now. That is not this
   * job's failure, so it never poisons the job, even past maxDeliveries:
   * the holder may crash and leave the intent to us. The lease's TTL bounds
   * how long this can last. The queue still counts the answer as one of
   * its deliveries: behind a send in flight, the delay is at least what is
   * left of that send's lease, so that the next delivery finds it over.
   */
  async function busy(
    job: Job,
    n: number,
    d: Delivery,
    failure?: BusyError,
  ): Promise<Outcome> {
    await d.close();
    return busyAnswer(job, n, failure);
  }

  /** The retry that answers a busy delivery `n`, its claim closed or not. */
  function busyAnswer(job: Job, n: number, failure?: BusyError): Outcome {
    return {
      action: "retry",
      delivery: n,
      delayMs: Math.max(retryDelayMs(n), busyWaitMs(failure)),
      reason: busyReason(job, failure),
    };
  }

  /**
   * How long a busy answer must wait at least: what is left of the lease
   * that made it busy (`leaseExpiresAt`, by this clock: a send in flight the
   * look read, or the lease the store said refused the write), and
   * `clockSkewMs`, as the next delivery may run on a clock that far behind;
   * never more than `leaseMs` + 2 × `clockSkewMs`; 0 when nothing says
   * (another session's lock). Waited out in one retry, so that one lease
   * costs a copy of its job one delivery, not several of a queue's few.
   */
  function busyWaitMs(failure: BusyError | undefined): number {
    const lapses = failure?.leaseExpiresAt;
    if (typeof lapses !== "number" || !Number.isFinite(lapses)) return 0;
    return Math.min(
      leaseMs + 2 * clockSkewMs,
      Math.max(0, lapses + clockSkewMs - now()),
    );
  }

  /** What acting on an intent does: returns why the job is done, or throws. */
  type Act = (intent: Intent, d: Delivery) => Promise<string>;

  /**
   * The settle step (DESIGN §6). Looks first, without the lease: most
   * deliveries only look (a receipt still pending, a payment not stuck yet)
   * and cost one read. To act, its first write checks the version the look
   * read and takes the lease in one commit, so two deliveries never act on
   * one intent at once. If the intent moved since the look, it plans again
   * on what the intent is now. `n` is the delivery's number.
   */
  async function settle(id: string, d: Delivery, n: number): Promise<string> {
    // A store's busy answer stays one (§13); anything else is the store failing.
    let seen = await storeCall(() => readIntent(store, id));
    for (let attempt = 1;; attempt++) {
      const step = await plan(id, seen, d, n);
      if (typeof step === "string") return step;
      try {
        return await step(seen!, d);
      } catch (error) {
        // Only a race lost before anything landed may be planned again: a
        // lost race after a send must never lead to a second send.
        if (!(error instanceof ConflictError) || d.committed) throw error;
        // The store refused the write by its rules: a fresh look would
        // meet the same refusal. That is this delivery's failure, not a
        // busy intent.
        if (isRefusal(error)) throw error;
        const read = seen!.version;
        // Nothing landed: failing, the store fails this delivery as its look would.
        seen = await storeCall(() => readIntent(store, id));
        if (attempt === 3) {
          // Three refusals with nobody writing between: a store of one's
          // own that does not mark its refusals. Not a busy intent.
          if (seen?.version === read) throw error;
          throw contended(id, error);
        }
        continue;
      }
    }
  }

  /**
   * What the settle step would do with `intent` at delivery `n`: a reason
   * it is done, an action, or a throw why not yet.
   */
  async function plan(
    id: string,
    intent: Intent | null,
    d: Delivery,
    n: number,
  ): Promise<string | Act> {
    if (intent === null) throw new Error(`intent ${id} not found`);
    switch (intent.state) {
      case "created":
        throw new Error("not authorized yet");
      case "authorized":
        if (intent.hold !== "pending") {
          // The funds are not reserved (voided or captured elsewhere):
          // nothing may be broadcast for this payment.
          throw poison(
            new Error(
              `the hold of ${id} is ${
                intent.hold ?? "not recorded"
              }: nothing to settle`,
            ),
          );
        }
        if (n >= policy.maxDeliveries) {
          // A send never ends a delivery (it retries to read the receipt),
          // so at or past the last delivery it could only be poisoned, and
          // the payment sent to review with its tx unread: certain after an
          // outage the queue counted through (a wrong secret, the store
          // down), whose first delivery taken is the last. Nothing sent and
          // nothing written, the poison drops the job (DESIGN §5), and its
          // letter's redrive sends with a fresh count. Deliberately unlike
          // DESIGN §6, which moves authorized to settling unconditionally.
          throw new LastDelivery(
            `not sent: delivery ${n} is ${
              n === policy.maxDeliveries ? "the last" : "past the last"
            } (maxDeliveries ${policy.maxDeliveries}): no delivery would be left to read its receipt, and the payment would go to review; redrive the job to send it with a fresh count`,
          );
        }
        // Entering settling is the write-ahead of the first send. An intent
        // imported with a send on record (mayHaveSent) reuses its nonce: a
        // fresh one could land beside the tx that may be out there.
        return (current, d) =>
          broadcast(
            current,
            d,
            current.mayHaveSent,
            (options) =>
              store.transition(id, {
                from: "authorized",
                to: "settling",
                version: current.version,
                at: now(),
              }, options),
            "transition",
          );
      case "settling":
        return await planSettling(intent, d);
      default:
        return `intent already ${intent.state}`; // nothing for the relayer to do
    }
  }

  async function planSettling(
    intent: Intent,
    d: Delivery,
  ): Promise<string | Act> {
    if (intent.hold === "voided") {
      // A poison resolution was interrupted between the void and the state
      // write. Finish it as a poison; never broadcast behind a voided hold.
      throw poison(
        new Error("the hold is voided: finishing an interrupted resolution"),
      );
    }
    if (intent.hold === "captured") {
      if (intent.txHashes.length === 0 || intent.broadcasting !== null) {
        // Captured with no sent tx on record, or with a send in flight:
        // the payer was charged for what may never reach the payee. A
        // person must look; settling it would hide that.
        throw poison(
          new Error(
            intent.txHashes.length === 0
              ? "the hold is captured, but no sent broadcast is on record"
              : "the hold is captured while a broadcast is in flight",
          ),
        );
      }
      // The relayer captures once a tx confirmed, then settles: a crash
      // between the two leaves this. Someone else may have captured early,
      // so finish it only on a tx that confirmed.
      if ((await confirmedAmong(intent.txHashes, d)) === undefined) {
        throw new Error(
          "the hold is captured, waiting for a tx on record to confirm",
        );
      }
      return (current, d) =>
        settled(
          current,
          d,
          "the hold is captured: finished an interrupted settle",
        );
    }
    if (intent.hold !== "pending") {
      // No funds reserved: nothing may be broadcast. Resolve by what is on record.
      throw poison(
        new Error(
          `the hold of ${intent.id} is not recorded: nothing may be broadcast`,
        ),
      );
    }
    const last = intent.lastBroadcast;
    // The txs sent before the last broadcast: a rescue replaced them on
    // record, but one may have confirmed meanwhile. Asked for when the last
    // broadcast is not a confirmed tx, so that a paid payment settles
    // instead of being rescued into a spent nonce and reviewed.
    const earlier = intent.txHashes.filter((hash) =>
      last?.outcome !== "sent" || hash !== last.txHash
    );
    if (
      intent.broadcasting === null && last?.outcome !== "sent" &&
      earlier.length > 0
    ) {
      const confirmed = await confirmedAmong(earlier, d);
      if (confirmed !== undefined) return settledOn(confirmed);
    }
    // One clock for "stuck": from the later of entering settling, the last
    // recorded broadcast and an unrecorded one's start. A rescue restarts
    // it, so a rescue whose outcome is unknown waits another stuckAfter.
    const stuckMs = now() -
      Math.max(
        intent.settlingSince ?? 0,
        last?.at ?? -Infinity,
        intent.broadcasting ?? -Infinity,
      );
    const rescue: Act = (current, d) => broadcast(current, d, true);
    if (
      intent.broadcasting !== null || last === null ||
      last.outcome === "unknown"
    ) {
      // A broadcast may be out there: wait for it, then rescue it.
      if (
        intent.broadcasting !== null &&
        (sending.has(intent.id) ||
          now() - intent.broadcasting < leaseMs + clockSkewMs)
      ) {
        // Begun less than a lease ago, or still running here: its delivery
        // may still hold the lease and be sending. Busy, not this job's
        // failure (§13).
        throw inFlight(
          `intent ${intent.id} is being sent by another delivery (for ${
            formatDuration(now() - intent.broadcasting)
          })`,
          intent.broadcasting,
        );
      }
      const waitOrRescue = (): Act => {
        if (stuckMs < policy.stuckAfterMs) {
          // Timed ahead of this clock (another instance's, running ahead):
          // 0s, and how far, not a negative time.
          throw new Error(
            `settling for ${
              formatDuration(Math.max(0, stuckMs))
            } without tx hash, waiting${
              stuckMs < 0
                ? ` (its time is ${
                  formatDuration(-stuckMs)
                } ahead of this clock)`
                : ""
            }`,
          );
        }
        return rescue; // same nonce
      };
      if (
        intent.broadcasting !== null && intent.mayHaveSent !== false &&
        intent.txHashes.length > 0
      ) {
        // A send in flight on record whose lease is over (its answer lost,
        // or its delivery died mid-send), written ahead once a tx of the
        // payment may have left: it reuses that tx's nonce. A tx on record
        // that confirmed settles, as the queue's give-up does, and the
        // store clears the write-ahead in the same write; a rescue would
        // only be refused its spent nonce.
        const confirmed = await confirmedAmong(intent.txHashes, d);
        if (confirmed !== undefined) {
          return async (current, d) => {
            for (let attempt = 1;; attempt++) {
              try {
                return await settledOn(confirmed)(current, d);
              } catch (error) {
                // A store of one's own that ignores `confirmed` refuses the
                // capture behind a send in flight: carry on as before
                // (nothing landed). Unmarked, a refusal is told from a race
                // lost by the version on record (a race is planned again),
                // and from a conflict that passes, nobody writing between,
                // by three tries, as `settle` tells them.
                if (!(error instanceof ConflictError)) throw error;
                if (isRefusal(error)) break;
                const seen = await storeCall(() =>
                  readIntent(store, current.id)
                );
                if (seen?.version !== current.version) throw error;
                if (attempt === 3) break;
              }
            }
            return await waitOrRescue()(current, d);
          };
        }
      }
      return waitOrRescue();
    }
    if (last.outcome === "not_sent") {
      // This attempt stayed home. Send afresh, or with the same nonce if an
      // earlier attempt may be on chain.
      return (current, d) => broadcast(current, d, current.mayHaveSent);
    }
    const txHash = last.txHash ?? "";
    // A replay stops here, before the signer. The store failing the record
    // is not the job's failure: poisoned on it, the payment went to review
    // with its receipt unread.
    await storeCall(() => d.close());
    // Every receipt at once: a delivery waits one Sender timeout for them,
    // not one per tx (up to 32), and stays within its queue's deadline.
    // Called inside a Promise: a Sender of plain JavaScript that answers
    // the status itself, or throws before returning a Promise, is read as
    // `send` is, and the earlier txs are still asked.
    const [read, confirmed] = await Promise.all([
      new Promise<ReceiptStatus>((answer) => answer(sender.receipt(txHash)))
        .then(
          (status) => ({ status }),
          (error: unknown) => ({ error }),
        ),
      earlier.length > 0 ? confirmedAmong(earlier, d) : undefined,
    ]);
    // An earlier tx that confirmed settles, whatever the last one's receipt
    // says (even a failure to read it, or a revert declared poison).
    if (
      (!("status" in read) || read.status !== "confirmed") &&
      confirmed !== undefined
    ) {
      return settledOn(confirmed);
    }
    if (!("status" in read)) throw read.error;
    const { status } = read;
    switch (status) {
      case "confirmed":
        return settledOn(txHash);
      case "dropped":
        // Same nonce: the dropped tx may have been a replacement whose
        // original mined meanwhile; a fresh nonce could pay twice.
        return rescue;
      case "pending":
        if (stuckMs >= policy.stuckAfterMs) return rescue;
        throw new Error(`waiting for ${txHash} to confirm`);
      default:
        throw new Error(
          `sender returned an unknown receipt status for ${txHash}: ${
            show(status)
          }; answer "confirmed", "pending" or "dropped"`,
        );
    }
  }

  /**
   * The newest of `hashes` whose tx the Sender says confirmed; `undefined`
   * if none did. A receipt that cannot be read counts as not confirmed: an
   * old tx the node no longer knows (replaced, evicted) must not block what
   * comes next. All are asked at once, so a delivery waits one Sender
   * timeout for them, however many there are (at most 32). Never rejects.
   */
  async function confirmedAmong(
    hashes: readonly string[],
    d: Delivery,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    // A replay stops here, before the signer (the store failing: see planSettling).
    await storeCall(() => d.close());
    const statuses = await Promise.all(hashes.map(async (hash) => {
      try {
        return await (signal === undefined
          ? sender.receipt(hash)
          : sender.receipt(hash, { signal }));
      } catch {
        return undefined; // not confirmed as far as we can tell
      }
    }));
    const newest = statuses.lastIndexOf("confirmed");
    return newest === -1 ? undefined : hashes[newest];
  }

  /**
   * Before a give-up resolves a `settling` intent (to review, as it may
   * have sent), asks its txs' receipts once (waiting at most 5 s, or half
   * the lease if shorter), and settles on one that confirmed: the queue
   * may have timed out the very delivery that read it, and gives up while
   * that delivery still runs. Behind a send in flight too (a write-ahead
   * whose answer was lost, a delivery that died mid-send): that send
   * reuses the confirmed tx's nonce, and the store clears it in the write
   * that settles, once its lease is over (busy until then). Returns why it
   * settled, if it did, and the txs whose receipts it asked (none if the
   * intent moved meanwhile): the resolution reads the intent again, and a
   * tx on record beyond those (another instance's send, recorded since the
   * read here) is checked again before the payment goes to review.
   */
  async function settledBeforeReview(
    intentId: string,
    d: Delivery,
  ): Promise<{ settled?: string; asked: readonly string[] }> {
    const intent = await readIntent(store, intentId);
    if (intent?.state !== "settling" || intent.txHashes.length === 0) {
      return { asked: [] };
    }
    // The replay record first, outside the receipts' budget (the store's
    // calls have bounds of their own): a record still in flight when the
    // budget ran out was claimed again by the resolution's write, and if
    // it landed first, the give-up was refused as a replay of itself.
    await storeCall(() => d.close());
    // A give-up is the queue's last word, and needed only the store: a
    // Sender that does not answer must not hold it up. Past the budget,
    // resolve as before, and tell the Sender its requests are not wanted.
    const stop = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const confirmed = await Promise.race([
      confirmedAmong(intent.txHashes, d, stop.signal),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => {
          resolve(undefined);
          stop.abort(
            new DOMException(
              `The give-up stopped waiting for receipts after ${
                formatDuration(giveUpReceiptsMs)
              }.`,
              "AbortError",
            ),
          );
        }, giveUpReceiptsMs);
      }),
    ]).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
    });
    if (confirmed === undefined) return { asked: intent.txHashes };
    try {
      return {
        settled: await settledOn(confirmed)(intent, d),
        asked: intent.txHashes,
      };
    } catch (error) {
      if (error instanceof ConflictError) return { asked: [] };
      throw error;
    }
  }

  /**
   * Waits for this relayer's own sends of the intent in flight to end, for
   * at most the give-up's receipts budget (a timer, not the clock, which
   * may have stepped). Resolved while one runs, the payment would go to
   * review with no hash on record and the send's record be refused; held
   * up for good by a send that never ends, the queue's last word would
   * never resolve its intent.
   */
  async function ownSendsEnded(intentId: string): Promise<void> {
    const runs = sending.get(intentId);
    if (runs === undefined) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...runs]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, giveUpReceiptsMs);
      }),
    ]).finally(() => {
      if (timer !== undefined) clearTimeout(timer);
    });
  }

  /** The step that settles on a confirmed tx. */
  function settledOn(txHash: string): Act {
    return (current, d) =>
      settled(current, d, `${txHash} confirmed, intent settled`, txHash);
  }

  /**
   * Moves a settling intent to settled; ledger first: the capture goes in
   * the same commit. `confirmed` names the tx whose receipt said so.
   */
  async function settled(
    current: Intent,
    d: Delivery,
    reason: string,
    confirmed?: string,
  ): Promise<string> {
    // The store failing here is not the job's failure: poisoned on it, a
    // payment whose tx confirmed went to review. Landed or not, the next
    // look (or the queue's give-up, receipts first) settles it.
    await storeCall(() =>
      d.write((options) =>
        store.transition(current.id, {
          from: "settling",
          to: "settled",
          version: current.version,
          at: now(),
          ledger: "capture",
          ...(confirmed === undefined ? {} : { confirmed }),
        }, options)
      )
    );
    return reason;
  }

  /**
   * The write ahead of a send, with the lease kept across it. It carries
   * the give-up marks of the message delivered: a copy of a message the
   * queue gave up on sends nothing, whether it would make the first send
   * (the job dropped, the intent left authorized) or, having lost the race
   * for that write to a job published since, a rescue beside that job's.
   * Refused while a mark is on record: a `LateCopy`, nothing written.
   * The store failing it is not the job's failure (nothing was sent):
   * landed or not, the write-ahead keeps the next delivery from sending
   * beside it. The queue's give-up reads the receipts first; landed (its
   * answer lost), it is a send in flight on record: once its lease is
   * over, a later delivery or the give-up settles on a tx on record that
   * confirmed, or the give-up sends the payment to review.
   */
  async function wroteAhead(
    d: Delivery,
    writeAhead: (options: WriteOptions) => Promise<Intent>,
  ): Promise<Intent> {
    try {
      return await storeCall(() =>
        d.write(
          (options) =>
            writeAhead(
              d.marks.length === 0
                ? options
                : { ...options, unlessCounted: d.marks },
            ),
          true,
        )
      );
    } catch (error) {
      if (
        d.marks.length > 0 && !d.committed && isRefusal(error) &&
        await storeCall(() => wasMarked(d.marks))
      ) {
        // Marked as given up on; resolved too, if its give-up's own marks
        // are on record (`gaveup/…` for each `givingup/…`).
        throw new LateCopy(
          await storeCall(() => wasMarked(d.marks.map(resolvedKey))),
        );
      }
      throw error;
    }
  }

  /**
   * Broadcasts and records the outcome *before* reacting to it: two
   * commits. The first writes ahead of the send (`broadcasting`), checks
   * the version the look read and takes (or renews) the lease for the whole
   * send, which `leaseMs` must outlast; the second records the outcome and
   * releases the lease. A crash between the send and its record leaves
   * "may have left" on record, never a stale "not sent".
   *
   * The lease is timed from before the write-ahead, so a write-ahead held
   * up in the store (a locked row, a busy pool, a queued commit) eats into
   * it. One that took more than half the lease does not send: what is left
   * might lapse mid-send, and another delivery could then act on the
   * intent while this one sends (I5). Nothing left the process, so it is
   * recorded `not_sent`, and the delivery fails as any failed send does.
   */
  async function broadcast(
    intent: Intent,
    d: Delivery,
    replace: boolean,
    writeAhead: (options: WriteOptions) => Promise<Intent> = (options) =>
      store.beginBroadcast(intent.id, intent.version, now(), options),
    writeAheadMethod = "beginBroadcast",
  ): Promise<never> {
    // Counted before the write-ahead can land: a copy that reads it here
    // finds the send in flight.
    const run = sendRecorded(d, replace, writeAhead, {
      method: writeAheadMethod,
      id: intent.id,
    });
    const runs = sending.get(intent.id) ?? new Set<Promise<unknown>>();
    runs.add(run);
    sending.set(intent.id, runs);
    try {
      return await run;
    } finally {
      runs.delete(run);
      if (runs.size === 0) sending.delete(intent.id);
    }
  }

  /** Whether a send's record landed, which clears its write-ahead. */
  interface Recorded {
    landed: boolean;
    /**
     * The store answered the record that nothing was written: a race lost,
     * busy, a replay, or an error it marked so (a full disk, a read-only
     * database, a closed handle).
     */
    refused: boolean;
  }

  /** Runs the write of a send's record, keeping in `record` what the store answered. */
  async function recordWrite(
    record: Recorded,
    write: () => Promise<Intent>,
  ): Promise<Intent> {
    try {
      const written = await write();
      record.landed = true;
      return written;
    } catch (error) {
      record.refused = error instanceof ConflictError ||
        error instanceof BusyError || error instanceof ReplayError ||
        isNotWritten(error);
      throw error;
    }
  }

  /** {@linkcode broadcast}'s two commits and the send between them. */
  async function sendRecorded(
    d: Delivery,
    replace: boolean,
    writeAhead: (options: WriteOptions) => Promise<Intent>,
    // What the write-ahead calls, for a refusal of its answer.
    called: { readonly method: string; readonly id: string },
  ): Promise<never> {
    const leaseFrom = now();
    const current = writtenIntent(
      called.method,
      called.id,
      await wroteAhead(d, writeAhead),
    );
    const record: Recorded = { landed: false, refused: false };
    try {
      return await sendWrittenAhead(d, replace, current, leaseFrom, record);
    } finally {
      // Only a write-ahead its record left on the intent: a record that
      // landed cleared it, and a `broadcasting` of the same time read after
      // is another send's (another instance's wall clock read the same
      // millisecond), which may still run. Only a record the store refused
      // (nothing written) left it: one answered with an error that says
      // nothing (a connection cut after the commit, a flight not answered
      // in time that lands later) may have landed, before a read or after.
      if (!record.landed && record.refused) {
        keepEnded(current.id, current.broadcasting);
      }
    }
  }

  /** {@linkcode sendRecorded} once its write-ahead landed as `current`. */
  async function sendWrittenAhead(
    d: Delivery,
    replace: boolean,
    current: Intent,
    leaseFrom: number,
    record: Recorded,
  ): Promise<never> {
    const tookMs = now() - leaseFrom;
    if (tookMs > leaseMs / 2) {
      const why = `the write ahead of the send took ${
        formatDuration(tookMs)
      } of the ${formatDuration(leaseMs)} lease`;
      // Nothing left: the store failing this record is not the job's failure.
      await storeCall(() =>
        recordWrite(
          record,
          () =>
            d.write((options) =>
              store.recordBroadcast(current.id, current.version, {
                outcome: "not_sent",
                at: now(),
                error: why,
              }, options)
            ),
        )
      );
      throw new Error(
        `not sent: ${why}, and what is left might lapse mid-send`,
      );
    }
    let txHash: string;
    try {
      const answer: unknown = await sender.send(current, { replace });
      if (typeof answer !== "object" || answer === null) {
        // A forgotten `return`, or a bare hash: say what came back and
        // what was expected, not the engine's words about destructuring.
        const shown = JSON.stringify(answer) ?? String(answer);
        throw new Error(
          `sender returned ${
            shown.length > 40 ? `${shown.slice(0, 40)}…` : shown
          }, not { txHash }: return the tx hash as { txHash: "0x…" }`,
        );
      }
      ({ txHash } = answer as { txHash: string });
      if (typeof txHash !== "string" || txHash === "") {
        throw new Error(
          `sender returned no txHash: ${
            show(txHash)
          }; return the tx hash as { txHash: "0x…" }`,
        );
      }
      if (txHash.length > MAX_TX_HASH) {
        // Not recorded (it could exceed the store's value limit): the
        // broadcast may have left, so it is recorded as unknown.
        throw new Error(
          `sender returned a txHash of ${txHash.length} characters (at most ${MAX_TX_HASH}), starting ${
            JSON.stringify(txHash.slice(0, 16))
          }: the broadcast may have been sent`,
        );
      }
      if (keptText(txHash) !== txHash) {
        // PostgreSQL cannot keep it as it came (U+0000), nor UTF-8 (a lone
        // surrogate, written as U+FFFD): recorded, it would be a hash the
        // chain never made, on PostgresStore alone. As a long one, the
        // broadcast may have left.
        throw new Error(
          `sender returned a txHash with U+0000 or a lone surrogate, which no store keeps as it came, starting ${
            JSON.stringify(txHash.slice(0, 16))
          }: the broadcast may have been sent`,
        );
      }
    } catch (error) {
      const outcome = isNotSent(error) ? "not_sent" : "unknown";
      try {
        await recordWrite(
          record,
          () =>
            d.write((options) =>
              store.recordBroadcast(current.id, current.version, {
                outcome,
                at: now(),
                error: clip(messageOf(error)),
              }, options)
            ),
        );
      } catch (recordError) {
        // It may have left, and nothing says so: the resolve route asks.
        if (outcome === "unknown") keepUnrecorded(current.id);
        throw recordError;
      }
      throw new Error(`send: ${messageOf(error)}`, { cause: error });
    }
    let answered: unknown;
    try {
      answered = await recordWrite(
        record,
        () =>
          d.write((options) =>
            store.recordBroadcast(current.id, current.version, {
              outcome: "sent",
              txHash,
              at: now(),
            }, options)
          ),
      );
    } catch (error) {
      // On no record, it may still confirm: the resolve route reads it.
      keepUnrecorded(current.id, txHash);
      if (error instanceof BusyError) {
        // Busy, as any held lease is, and the hash still goes in the log.
        throw new SentBusyError(txHash, error);
      }
      // The hash may be in no store now (its record may not have landed;
      // "broadcasting" stays, so the payment waits, then is rescued with the same nonce,
      // or goes to review): the delivery's reason, the worker's log line,
      // is the only place an operator can find the tx that left. Only a
      // refusal says nothing was written: any other error (a connection
      // reset after the commit went out, a write not answered in time)
      // says nothing of whether it landed, and "failed" would say more.
      throw new Error(
        record.refused
          ? `sent ${txHash}, but its record failed: ${messageOf(error)}`
          : `sent ${txHash}, and its record may have landed: ${
            messageOf(error)
          }`,
        { cause: error },
      );
    }
    let recorded: Intent;
    try {
      recorded = writtenIntent("recordBroadcast", current.id, answered);
    } catch (error) {
      // The store's write returned without the intent: it may have written
      // the record, so "failed" would say more than is known. Kept as on
      // no record: the resolve route reads whichever it was.
      keepUnrecorded(current.id, txHash);
      throw new Error(
        `sent ${txHash}, and its record may have landed: ${messageOf(error)}`,
        { cause: error },
      );
    }
    if (recorded.state === "needs_review") {
      // A send that outlived its settling: the store kept its tx on the
      // intent a give-up put in review meanwhile, where no delivery reads
      // its receipt; said so, not as a wait for its confirmation.
      throw new Error(
        `sent ${txHash} after intent ${current.id} went to review: its tx is on record there, for an operator to resolve`,
      );
    }
    // Sent is not settled: the queue brings the job back to read the receipt.
    throw new Error(`sent ${txHash}, waiting for confirmation`);
  }

  /**
   * Resolves a poisoned job's intent by the state it is in now (DESIGN §5),
   * re-read after the decision, in one commit: the dead letter rides in
   * the intent's move. A lost race re-reads and resolves again.
   */
  async function resolve(
    job: Job,
    jobId: string,
    d: Delivery,
    poisoned:
      & Pick<DeadLetter, "cause" | "reason" | "lastError" | "deliveries">
      & {
        readonly queue?: QueueIds;
        /** Change nothing if the job was poisoned before (a queue's repeated give-up). */
        readonly onlyOnce?: boolean;
        /** The count the delivery was counted under, when not the job id: reset with the letter. */
        readonly resetCount?: string;
        /** A delivery's, poisoned as its last found the intent authorized. */
        readonly lastDelivery?: boolean;
        /**
         * A give-up's: the txs whose receipts it asked. A settling intent
         * with another on record is not sent to review: `ReceiptsUnasked`.
         */
        readonly asked?: readonly string[];
      },
  ): Promise<string> {
    const {
      onlyOnce = false,
      queue,
      resetCount,
      lastDelivery = false,
      asked,
      ...rest
    } = poisoned;
    const reset = resetCount === undefined ? {} : { resetCount };
    for (let attempt = 1;; attempt++) {
      const intent = await readIntent(store, job.intentId);
      if (!onlyOnce) await lateUnlessDropping(d, lastDelivery);
      if (
        !onlyOnce && intent?.state === "settling" &&
        intent.broadcasting !== null && sending.has(intent.id)
      ) {
        // This relayer's own send for it is in flight, whatever the clock
        // says of its lease: resolved now, the payment would go to review
        // with no hash on record, and the send's record of the tx that
        // left be refused. Busy, as the copies of its job are. (A queue's
        // give-up waited for it first, up to a bound: see ownSendsEnded.)
        throw inFlight(
          `intent ${intent.id} is being sent by another delivery`,
          intent.broadcasting,
        );
      }
      const plan = planResolution(intent);
      // Only a job that may have been resolved before has a letter to keep:
      // a queue's give-up, or an intent past settling. Never a settling
      // intent: resolving one moves it on, so a letter on record there is
      // from an earlier life of the job (dropped while the intent was
      // created or authorized), and this give-up must resolve it.
      const letter = onlyOnce ||
          (intent !== null &&
            ["settled", "failed", "needs_review"].includes(intent.state))
        ? letterOrNull(jobId, await store.getDeadLetter(jobId))
        : null;
      if (letter !== null && queue && sameMessage(letter.queue, queue)) {
        // The queue repeating its give-up for the message this letter
        // records, whatever the intent does now (a job published since may
        // be settling it): the first resolution stands.
        await d.close();
        throw new Repeated(letter);
      }
      if (queue && await wasGivenUp(queue, jobId)) {
        // The same, after the letter that recorded this message was
        // redriven or replaced: a job published since owns the intent now.
        await d.close();
        throw new Finished(
          "the queue repeated its give-up for a message already resolved: nothing changed",
        );
      }
      if (
        letter !== null && intent?.state !== "settling" &&
        !(onlyOnce &&
          (intent?.state === "authorized" || intent?.state === "created"))
      ) {
        // A late duplicate, or a queue repeating its give-up: the dead
        // letter on record says what the first resolution did. Not a give-up
        // of another message on an authorized intent (a job published again
        // after a drop): it drops that job, so it writes its own letter and
        // holds the lease below, or a delivery of that job still at work
        // could send behind it and leave the intent settling with no job.
        // Nor on a created one (the letter names another message, or none:
        // one that names this message was answered above): a redrive that
        // published the job and did not remove the letter (it crashed, or
        // the queue's answer was lost) leaves it on record; kept as it is,
        // its next redrive would publish under the same deduplication id,
        // which QStash drops for 10 minutes, and remove the letter with no
        // job on the queue. A letter that names no message (the job's own
        // deliveries poisoned it) may record this very message, its answer
        // lost: it is written again as it was, with this message's ids
        // (see firstRecord), so its record stands under a new version.
        await d.close();
        return plan.text;
      }
      if (
        onlyOnce && (intent?.state === "settled" || intent?.state === "failed")
      ) {
        // The job finished before the queue gave up (a lost ack): nothing to resolve.
        await d.close();
        throw new Finished(`intent already ${intent.state}`);
      }
      if (
        asked !== undefined && intent?.state === "settling" &&
        plan.action === "review" &&
        intent.txHashes.some((hash) => !asked.includes(hash))
      ) {
        // A tx recorded since the give-up asked the receipts: a delivery
        // on another instance, whose send the give-up could not wait for
        // as its own, recorded it between the two reads. It may be the
        // very tx that confirmed: ask its receipt before any review.
        throw new ReceiptsUnasked();
      }
      const deadLetter: DeadLetter = letter !== null && onlyOnce && queue &&
          intent?.state === "created" && letter.queue === undefined
        ? firstRecord(letter, queue)
        : {
          jobId,
          intentId: job.intentId,
          ...rest,
          reason: keptText(rest.reason),
          lastError: keptText(rest.lastError),
          resolution: plan.text,
          poisonedAt: now(),
          ...(queue ? { queue } : {}),
        };
      try {
        if (intent === null || plan.action === "drop") {
          // Only on the intent this plan read: another delivery that moved
          // it since (and kept the letter that says why it is in review,
          // say) must not be overwritten by a stale "job dropped".
          // A queue's give-up on an authorized intent also holds its lease
          // (until it lapses): a delivery of the job still in flight, that
          // read the intent before this drop, must not start a send behind
          // it, with no job left to follow it up. A job published again
          // meanwhile is busy until then. A store of one's own that ignores
          // the lease keeps the letter, as before.
          if (onlyOnce && queue) {
            // And before the drop, the message is marked as given up on: a
            // delivery of it writing ahead of a send from now on is
            // refused. Marked only after it, a delivery that read the
            // intent before the drop and wrote ahead once the drop's lease
            // had lapsed (this give-up held up between its writes) sent
            // under a letter that says the job was dropped, and the queue,
            // done with the message, left the intent settling.
            await markGivingUp(queue, jobId, d);
          }
          // A delivery's drop of an authorized intent's job (its last
          // delivery sends nothing: see plan) acks the message while
          // nothing is on the chain. Like a give-up's, it takes the lease
          // with its letter, so that a copy of the message in flight,
          // numbered lower, does not send behind it with no job left to
          // follow it up; and it marks the message as given up on in the
          // letter's own commit (`givingup/…`, what a copy's write ahead
          // is refused by, whatever the lease), then as resolved once the
          // letter is written. Marked only after the letter, a drop held
          // up between the two past its lease let a copy that read the
          // intent before it send under a letter that says the job was
          // dropped; marked before it, a letter that lost its race left
          // the mark on a message whose job lives on. Cut before the
          // resolved mark, the delivery has not answered: the queue
          // delivers the message again, and that delivery drops it again
          // (see deliver), sending nothing. Once both marks landed, they
          // do the lease's work for every copy of the message (its ids
          // are its own, the same in each copy), and the lease is
          // released: held on, it only kept another message of the job (a
          // redrive's, a job published again, which has a job to follow
          // its send up) busy for a lease, and a queue's deliveries spent
          // on busy answers brought the redriven job to its last
          // delivery, which dropped it again. A delivery that names no
          // message has no marks, and holds the lease until it lapses, as
          // before.
          const unsent = !onlyOnce && intent?.state === "authorized" &&
            d.marks.length > 0;
          await d.write((options) =>
            store.putDeadLetter(deadLetter, {
              ...(options.claim ? { claim: options.claim } : {}),
              ...(intent === null ? {} : { intentVersion: intent.version }),
              ...(intent?.state === "authorized" && options.lease
                ? { lease: { ...options.lease, keep: true } }
                : {}),
              ...(unsent
                ? {
                  marks: {
                    keys: d.marks,
                    now: now(),
                    ttlMs: GIVE_UP_MARK_MS,
                  },
                }
                : {}),
              ...reset,
            })
          );
          if (unsent) {
            await markUnmarked(d.marks);
            await mark(d.marks.map(resolvedKey));
            await releaseDropLease(job.intentId, d);
          }
        } else {
          await d.write((options) =>
            store.transition(intent.id, {
              from: "settling",
              to: plan.action === "fail" ? "failed" : "needs_review",
              version: intent.version,
              at: now(),
              deadLetter,
              ...(plan.action === "fail" ? { ledger: "void" } as const : {}),
            }, { ...options, ...reset })
          );
        }
        return plan.text;
      } catch (error) {
        if (!(error instanceof ConflictError)) throw error;
        // The store refused to fail the payment (its hold cannot be voided,
        // or a broadcast may have left). When in doubt, review; never retry
        // a refusal forever. On the third try, one a store of one's own did
        // not mark counts too, if nobody wrote meanwhile.
        // Not for a drop: its letter is written by every delivery that
        // drops the job, and theirs race on the letter, not the intent.
        const refused = isRefusal(error) ||
          (attempt === 3 && intent !== null && plan.action !== "drop" &&
            (await readIntent(store, intent.id))?.version === intent.version);
        if (refused && plan.action === "fail" && intent !== null) {
          return await reviewRefused(intent, deadLetter, d, error, reset);
        }
        if (refused) throw error;
        if (attempt === 3) throw contended(job.intentId, error);
      }
    }
  }

  /**
   * Sends to review an intent whose failure the store refused, with the
   * store's reason in the resolution. A lost race here is a busy intent.
   */
  async function reviewRefused(
    intent: Intent,
    deadLetter: DeadLetter,
    d: Delivery,
    refusal: ConflictError,
    reset: { readonly resetCount?: string },
  ): Promise<string> {
    const text =
      `the store refused the failure (${refusal.message}), needs review`;
    try {
      await d.write((options) =>
        store.transition(intent.id, {
          from: "settling",
          to: "needs_review",
          version: intent.version,
          at: now(),
          deadLetter: { ...deadLetter, resolution: text },
        }, { ...options, ...reset })
      );
    } catch (error) {
      if (error instanceof ConflictError) throw contended(intent.id, error);
      throw error;
    }
    return text;
  }

  /** Lost the race three times in a row: others are busy with the intent; retry later. */
  function contended(intentId: string, cause: unknown): BusyError {
    return new BusyError(
      `Cannot write intent ${intentId} as other deliveries keep changing it`,
      { cause },
    );
  }

  /**
   * Releases the lease a delivery's drop took with its letter, once the
   * message's marks hold its copies off (see `resolve`). The release moves
   * the intent's version: a copy that read the intent before the marks
   * landed finds its letter's write a race lost, and the marks on its
   * next read, so a letter a redrive took does not come back. A store without
   * `releaseLease` holds it until it lapses, as before; so does a release
   * the store fails: the letter and the marks stand, and the drop's
   * answer is the same.
   */
  async function releaseDropLease(intentId: string, d: Delivery) {
    if (typeof store.releaseLease !== "function") return;
    try {
      await store.releaseLease(intentId, d.owner);
    } catch {
      // Held until it lapses (LEASE + CLOCK_SKEW), as it was before.
    }
  }

  /** Marks a give-up with these ids as resolved, for 32 days (see {@linkcode gaveUpKeys}). */
  async function markGivenUp(
    ids: QueueIds | undefined,
    jobId: string,
  ): Promise<void> {
    await mark(gaveUpKeys(ids, jobId));
  }

  /**
   * Marks a message the queue is giving up on, before its job is dropped:
   * the marks its deliveries carry (see {@linkcode deliveryMarks}). Not the
   * marks of a resolved give-up: a give-up that stops between the two is
   * repeated by the queue, and the repeat must not read as resolved.
   * The give-up's first write when it drops the job: its replay record, if
   * not yet written, rides in the first mark's commit, so that a copy of
   * the signed request is refused before it writes anything (written
   * after the marks, with the letter, each racing copy wrote its marks
   * and only then was refused).
   */
  async function markGivingUp(
    ids: QueueIds,
    jobId: string,
    d: Delivery,
  ): Promise<void> {
    if (d.givingMarked) return;
    const marks = deliveryMarks(ids, jobId);
    const [first, ...rest] = marks;
    if (first !== undefined && d.claim !== undefined) {
      await d.write((options) =>
        store.admit({
          count: first,
          ...(options.claim ? { claim: options.claim } : {}),
          now: now(),
          ttlMs: GIVE_UP_MARK_MS,
        })
      );
      await mark(rest);
    } else {
      await mark(marks);
    }
    d.givingMarked = true;
  }

  /**
   * Writes those of these give-up marks not on record, each for 32 days:
   * the marks a letter's write carried, which a store of one's own that
   * ignores `marks` left out. A read each, where the store kept them.
   */
  async function markUnmarked(keys: readonly string[]): Promise<void> {
    for (const key of keys) {
      const seen = countOrThrow(key, await store.deliveries(key, now()));
      if (seen === 0) await mark([key]);
    }
  }

  /** Writes these give-up marks, each for 32 days. */
  async function mark(keys: readonly string[]): Promise<void> {
    for (const key of keys) {
      await store.admit({ count: key, now: now(), ttlMs: GIVE_UP_MARK_MS });
    }
  }

  /**
   * Whether a give-up with these ids was resolved before. A Pub/Sub copy
   * known by its id alone is also looked for as an earlier version marked
   * it, `gaveup/pubsub/message/<id>`, for as long as such marks live.
   */
  function wasGivenUp(ids: QueueIds, jobId: string): Promise<boolean> {
    const earlier = ids.queue === "pubsub" && ids.dlqId === undefined &&
        ids.messageId !== undefined
      ? [`gaveup/pubsub/message/${ids.messageId}`]
      : [];
    return wasMarked([...gaveUpKeys(ids, jobId), ...earlier]);
  }

  /** Whether one of these give-up marks is on record. */
  async function wasMarked(keys: readonly string[]): Promise<boolean> {
    for (const key of keys) {
      if (countOrThrow(key, await store.deliveries(key, now())) > 0) {
        return true;
      }
    }
    return false;
  }

  async function redrive(
    jobId: string,
    options: RedriveOptions = {},
  ): Promise<Job | null> {
    assertLetterId("redrive", jobId);
    assertOptionNames("redrive", options, REDRIVE_OPTIONS, {
      example: "{ publish }",
    });
    if (redriving.has(jobId)) {
      throw markUnderWay(
        new ConflictError(
          `Cannot redrive ${jobId} as another redrive of it is under way on this instance: that one removes the letter and queues the job, or fails and keeps the letter. This one read and queued nothing; do not queue the job again. Once that one has answered, a redrive of a letter still listed (GET /v1/dead-letters) goes ahead`,
        ),
      );
    }
    redriving.add(jobId);
    try {
      return await redriveOnce(jobId, options);
    } finally {
      redriving.delete(jobId);
    }
  }

  /** {@linkcode redrive} once no other redrive of `jobId` runs here. */
  async function redriveOnce(
    jobId: string,
    options: RedriveOptions,
  ): Promise<Job | null> {
    // Its reads come before anything is published or written: a failure
    // of either changed nothing, and says so.
    const deadLetter = await readLetter(store, jobId);
    if (deadLetter === null) return null;
    const intent = await readIntentBeforeWrite(store, deadLetter.intentId);
    const refused = redriveRefusal(jobId, deadLetter.intentId, intent?.state);
    if (refused !== null) throw refused;
    const job: Job = { intentId: deadLetter.intentId, kind: "settle" };
    // Publish first: if that fails the dead letter is still there; a job
    // published twice is harmless (it only says "go and look"), and the
    // loser of two redrives publishes the same deduplication id. The
    // letter's time joins its version, which a store made anew repeats
    // (a schema recreated, a file restored from a backup): under the old
    // store's id, QStash would drop the job and the letter go with none.
    const deduplicationId =
      `${jobId}:${deadLetter.version}:${deadLetter.poisonedAt}`;
    if (options.publish) await options.publish(job, deduplicationId);
    // The give-up marked its message once resolved; marked again here, in
    // case it crashed between its resolution and its mark: a repeat after
    // the letter is gone must still find the message handled. Marked
    // first: a mark without the removal (a lost race) changes nothing.
    await markGivenUp(deadLetter.queue, jobId);
    try {
      await store.redrive(
        jobId,
        deadLetter.version,
        options.message ? { enqueue: options.message(job) } : {},
      );
    } catch (error) {
      // Lost to another redrive (or a new poisoning): the job went out all
      // the same, and the answer says so, or it reads as if nothing was
      // queued and the job is queued again by hand.
      if (!(error instanceof ConflictError) || !options.publish) throw error;
      throw new ConflictError(
        `${error.message}. The job was published all the same (deduplication id ${deduplicationId}): a queue that deduplicates drops it, and on any other it is a second job for the intent, which is harmless (a job only says "go and look"); do not queue it again`,
        { cause: error, refused: error.refused },
      );
    }
    return job;
  }

  async function discard(
    jobId: string,
    options: { readonly version?: string } = {},
  ): Promise<DeadLetter | null> {
    assertLetterId("discard", jobId);
    assertOptionNames("discard", options, DISCARD_OPTIONS, {
      example: "{ version }",
    });
    // Its reads come before its first write (the marks): a failure of
    // either changed nothing, and says so.
    const letter = await readLetter(store, jobId);
    if (letter === null) return null;
    const changed = () =>
      new ConflictError(
        `Cannot discard ${jobId} as its dead letter changed since it was read; re-read it`,
      );
    if (options.version !== undefined && options.version !== letter.version) {
      // Both named: a version that never was the letter's reads the same
      // as one that changed, and the caller can tell which.
      throw new ConflictError(
        `Cannot discard ${jobId} as its dead letter's version is ${
          show(letter.version)
        }, not ${
          show(options.version)
        }: it changed since it was read, or that was never its version; re-read it`,
      );
    }
    if (isIntentId(letter.intentId)) {
      const state = (await readIntentBeforeWrite(store, letter.intentId))
        ?.state;
      if (state !== undefined && state !== "settled" && state !== "failed") {
        const unreadable = jobId !== `${letter.intentId}/settle`;
        throw new ConflictError(
          `Cannot discard ${jobId} as intent ${letter.intentId} is ${
            state === "needs_review"
              ? unreadable
                ? "in review: resolve the review (settle or fail the intent), then discard this letter, which records an unreadable message of its."
                : "in review: the letter is the record of why. Once the review has settled or failed the intent, discard it."
              : `still ${state}: the letter is the record that it may have no job. ${
                state === "created"
                  ? `Authorize the intent, then ${
                    unreadable
                      ? "publish a job for it (POST /v1/jobs)"
                      : "redrive it"
                  } (a job of an intent still created retries "not authorized yet" until it is poisoned again)`
                  : unreadable
                  ? "Publish a job for the intent (POST /v1/jobs)"
                  : "Redrive it"
              }, and discard the letter once the intent is settled or failed.`
          }`,
        );
      }
    }
    // Marked first, as a redrive does: a repeat of the queue's give-up
    // after the letter is gone must still find the message handled.
    await markGivenUp(letter.queue, jobId);
    try {
      // The count is kept: the letter's own write reset the one it ended,
      // and a job delivered since (for an intent created after the read
      // above) counts on.
      return await store.redrive(jobId, letter.version, { keepCount: true });
    } catch (error) {
      if (error instanceof ConflictError) throw changed();
      throw error;
    }
  }

  async function keepUnreadable(message: UnreadableMessage): Promise<string> {
    assertOptionNames(
      "keep an unreadable message",
      message,
      UNREADABLE_FIELDS,
      {
        example: "{ queue, raw, detail }",
      },
    );
    const { queue, id, raw, seen = {}, detail, claim } = message;
    if (!Object.hasOwn(QUEUE_NAMES, queue)) {
      throw new TypeError(
        `Cannot keep an unreadable message as 'queue' must be one of ${
          Object.keys(QUEUE_NAMES).map((name) => `"${name}"`).join(", ")
        }: current value is ${show(queue)}`,
      );
    }
    for (const [name, value] of [["raw", raw], ["detail", detail]] as const) {
      if (typeof value !== "string") {
        throw new TypeError(
          `Cannot keep an unreadable message as '${name}' must be a string (${
            name === "raw" ? "the message as received" : "why it is unreadable"
          }): current value is ${show(value)}`,
        );
      }
    }
    const hashed = `sha256-${
      bytesToHex(sha256(new TextEncoder().encode(raw))).slice(0, 32)
    }`;
    const intentId = isIntentId(seen.intentId) ? seen.intentId : "";
    let name = isIntentId(id) ? id : hashed;
    if (name !== hashed) {
      // The id is the queue's word, which its signature may not cover
      // (QStash's Upstash-Message-Id): a letter under it that names
      // another intent, or none where this one names one, is another
      // message's, the record that its intent (found or not) may have no
      // job. Written over, it named this one's intent, or none, and its
      // discard was no longer held. This message is kept by its bytes, as
      // one without an id is.
      const kept = await store.getDeadLetter(`${queue}/${name}/unreadable`);
      if (kept !== null && kept.intentId !== intentId) name = hashed;
    }
    const jobId = `${queue}/${name}/unreadable`;
    const attempt = seen.attempt;
    await store.putDeadLetter({
      jobId,
      intentId,
      deliveries:
        typeof attempt === "number" && Number.isSafeInteger(attempt) &&
          attempt >= 1
          ? attempt
          : 1,
      cause: "declared",
      reason: keptText(
        cutAt(`unreadable ${QUEUE_NAMES[queue]} message: ${detail}`, 300),
      ),
      resolution: "message acked unread; nothing else was touched",
      lastError: keptText(cutAt(detail, 300)),
      poisonedAt: now(),
    }, claim ? { claim } : {});
    return jobId;
  }

  const relayer = {
    policy,
    leaseMs,
    clockSkewMs,
    deliver,
    giveUp,
    redrive,
    discard,
    keepUnreadable,
  };
  // The webhook's resolve route asks: a payment whose send still runs here
  // is not failed by hand, nor one whose send here ended on no record
  // without that being said and its tx read (see relayer/_sends.ts).
  registerSends(relayer, {
    inFlight: (intentId) => sending.has(intentId),
    unrecorded: (intentId) => unrecorded.get(intentId)?.txHashes ?? [],
    endedUnrecorded: tellUnrecorded,
    ended: (intentId, broadcasting) =>
      endedWriteAheads.has(`${intentId}\0${broadcasting}`),
  });
  return relayer;
}
