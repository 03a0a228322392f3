/**
 * The settle worker: runs one delivery of a job, decides what the queue
 * should do next, and resolves the intent when the job is poisoned.
 *
 * @module
 */

import { messageOf } from "../policy/_walk.ts";
import { assertDelivery, assertMs } from "../policy/_validate.ts";
import { backoff } from "../policy/backoff.ts";
import { decide } from "../policy/decide.ts";
import { jitter } from "../policy/jitter.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { definePolicy, type Policy } from "../policy/policy.ts";
import { planResolution } from "../policy/resolution.ts";
import { isNotSent, poison } from "../policy/sentinels.ts";
import { isIntentId } from "../store/_rules.ts";
import { ConflictError } from "../store/conflict_error.ts";
import type { DeadLetter, Intent, Store } from "../store/store.ts";
import type { Sender } from "./sender.ts";

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
   *
   * @default {DEFAULT_POLICY}
   */
  readonly policy?: Partial<Policy>;
  /**
   * The clock, in milliseconds.
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
   * milliseconds. It must outlast the Sender's own timeout; a crashed
   * delivery's lease blocks others until it expires.
   *
   * @default {30000}
   */
  readonly leaseMs?: number;
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
   * Runs one delivery of `job`.
   *
   * @param job The job as the queue delivered it.
   * @param delivery The delivery number the queue reports (1-based,
   * counting the first try); omitted, the relayer counts it in the store.
   * @returns What the queue should do next.
   * @throws {TypeError} If the job is malformed.
   * @throws {RangeError} If `delivery` is not an integer >= 1.
   */
  deliver(job: Job, delivery?: number): Promise<Outcome>;
  /**
   * Takes a job out of the dead letters with a fresh delivery count, so it
   * can be enqueued again. With `enqueue`, the job is enqueued *before* the
   * dead letter is removed, so a failed enqueue loses nothing.
   *
   * @returns The job to enqueue, or `null` if there is no such dead letter.
   * @throws {ConflictError} If the intent is settled or failed: no job can
   * help it.
   */
  redrive(
    jobId: string,
    enqueue?: (job: Job) => Promise<void>,
  ): Promise<Job | null>;
}

/** Another delivery holds the intent's lease. */
class Busy extends Error {}

/** Text kept in the store (errors from a Sender can be any size; Deno KV values are at most 64 KiB). */
function clip(text: string, max = 1000): string {
  return text.length <= max
    ? text
    : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/**
 * The id of a job, the key of its delivery count and dead letter:
 * `"<intentId>/<kind>"`.
 *
 * @param job The job.
 * @returns Its id, such as `"pi_0001/settle"`.
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
  return `${job.intentId}/${job.kind}`;
}

/**
 * The worker's line for one delivery: job, delivery number, action, and
 * why (for a poison, `"<decision reason>; <resolution text>"`, DESIGN §5).
 * The demo, the webhook's log and the local queue's log all print it.
 *
 * @param job The job delivered.
 * @param outcome What the delivery answered.
 * @returns The line, without a prefix.
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
  const text = outcome.action === "poison"
    ? `${outcome.reason}; ${outcome.resolution}`
    : outcome.reason;
  return `${jobIdOf(job).padEnd(17)}#${outcome.delivery}  ${
    outcome.action.padEnd(13)
  }(${text})`;
}

/**
 * Checks a job from the outside world (a queue message) and returns it in
 * its canonical shape.
 *
 * @param job Anything.
 * @returns The job.
 * @throws {TypeError} If it is not `{ intentId, kind: "settle" }` with a
 * valid intent id.
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
  const { intentId, kind } =
    (typeof job === "object" && job !== null ? job : {}) as Record<
      string,
      unknown
    >;
  if (!isIntentId(intentId)) {
    throw new TypeError(
      `Cannot read job as 'intentId' must be 1-128 characters of A-Z a-z 0-9 _ . : -: current value is ${
        JSON.stringify(intentId) ?? "undefined"
      }`,
    );
  }
  if (kind !== "settle") {
    throw new TypeError(
      `Cannot read job as 'kind' must be "settle": current value is ${
        JSON.stringify(kind) ?? "undefined"
      }`,
    );
  }
  return { intentId, kind };
}

/**
 * Builds the settle worker. One call of `deliver` per delivery of a job;
 * the answer says what the queue should do next.
 *
 * A delivery first looks at the intent without a lease: most deliveries
 * only look (a receipt still pending, a payment not stuck yet) and cost one
 * read. To act (a write or a broadcast) it takes the intent's lease and
 * re-reads, so two deliveries never act on one intent at once; on failure
 * it asks `decide`. When the job is poisoned it re-reads the intent and resolves it
 * by the state it is in now: drop the job, void the hold *then* fail the
 * intent (only if the last broadcast was declared not sent), or send it to
 * review. A dead letter is kept in the same write.
 *
 * @param options The store, the Sender, the policy, the clock and the
 * source of randomness.
 * @returns The relayer.
 * @throws {RangeError} If the policy or `leaseMs` is invalid.
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
  const {
    store,
    sender,
    now = Date.now,
    random = Math.random,
    leaseMs = 30_000,
  } = options;
  const policy = definePolicy(options.policy);
  assertMs("create relayer", "leaseMs", leaseMs, 1);
  const instance = crypto.randomUUID();
  let deliveriesStarted = 0;

  async function deliver(input: Job, delivery?: number): Promise<Outcome> {
    const job = parseJob(input);
    const jobId = jobIdOf(job);
    if (delivery !== undefined) assertDelivery("deliver", delivery);
    const n = delivery ?? await store.countDelivery(jobId);
    const lease = new Lease(job.intentId, `${instance}:${++deliveriesStarted}`);
    try {
      let failure: unknown;
      try {
        return {
          action: "done",
          delivery: n,
          reason: await settle(job.intentId, lease),
        };
      } catch (error) {
        failure = error;
      }
      if (failure instanceof Busy) return busy(job, n);
      const decision = decide(failure, n, policy, { random });
      if (decision.action === "retry") return { ...decision, delivery: n };
      await lease.take();
      const resolution = await resolve(job, jobId, {
        ...decision,
        delivery: n,
        lastError: clip(messageOf(failure)),
      });
      return { ...decision, delivery: n, resolution };
    } catch (error) {
      if (error instanceof Busy) return busy(job, n);
      throw error;
    } finally {
      await lease.release();
    }
  }

  /**
   * Another delivery is acting on this intent right now. That is not this
   * job's failure, so it never poisons the job, even past maxDeliveries:
   * the holder may crash and leave the intent to us. The lease's TTL bounds
   * how long this can last.
   */
  function busy(job: Job, n: number): Outcome {
    return {
      action: "retry",
      delivery: n,
      delayMs: jitter(backoff(n, policy), policy.jitter, random),
      reason: `intent ${job.intentId} is busy with another delivery`,
    };
  }

  /**
   * The per-intent lease of one delivery, taken only when the delivery is
   * about to act (write or broadcast): most deliveries only look (a receipt
   * still pending, a payment not stuck yet) and cost one read.
   */
  class Lease {
    #held = false;
    constructor(readonly intentId: string, readonly owner: string) {}

    async take(): Promise<void> {
      if (this.#held) return;
      if (
        !await store.acquireLease(this.intentId, {
          owner: this.owner,
          ttlMs: leaseMs,
          now: now(),
        })
      ) {
        throw new Busy();
      }
      this.#held = true;
    }

    /**
     * Renews the lease right before a send, so the whole send (bounded by
     * the Sender's timeout, which `leaseMs` must outlast) runs under it; a
     * lease that expired and was taken over means no send.
     */
    async renew(): Promise<void> {
      if (
        !await store.renewLease(this.intentId, {
          owner: this.owner,
          ttlMs: leaseMs,
          now: now(),
        })
      ) {
        this.#held = false;
        throw new Busy();
      }
    }

    async release(): Promise<void> {
      if (this.#held) await store.releaseLease(this.intentId, this.owner);
    }
  }

  /** What acting on an intent does, under the lease: returns why the job is done, or throws. */
  type Act = (intent: Intent, lease: Lease) => Promise<string>;

  /**
   * The settle step (DESIGN §6). Looks first, without the lease; to act it
   * takes the lease, re-reads, and acts only on the intent as it is under
   * the lease, so two deliveries never act on one intent at once. Returns
   * why the job is done; throws why it is not.
   */
  async function settle(id: string, lease: Lease): Promise<string> {
    const seen = await store.getIntent(id);
    const step = await plan(id, seen);
    if (typeof step === "string") return step;
    await lease.take();
    const intent = await store.getIntent(id);
    if (intent !== null && intent.version === seen?.version) {
      return await step(intent, lease);
    }
    // It moved between the look and the lease: decide again on what it is now.
    const again = await plan(id, intent);
    return typeof again === "string" ? again : await again(intent!, lease);
  }

  /** What the settle step would do with `intent`: a reason it is done, an action, or a throw why not yet. */
  async function plan(
    id: string,
    intent: Intent | null,
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
        return async (current, lease) => {
          const settling = await store.transition(id, {
            from: "authorized",
            to: "settling",
            version: current.version,
            at: now(),
          });
          return await broadcast(settling, lease, false, true);
        };
      case "settling":
        return await planSettling(intent);
      default:
        return `intent already ${intent.state}`; // nothing for the relayer to do
    }
  }

  async function planSettling(
    intent: Intent,
  ): Promise<string | Act> {
    if (intent.hold === "voided") {
      // A poison resolution was interrupted between the void and the state
      // write. Finish it as a poison; never broadcast behind a voided hold.
      throw poison(
        new Error("the hold is voided: finishing an interrupted resolution"),
      );
    }
    if (intent.hold === "captured") {
      // A settle was interrupted between the capture and the state write:
      // the money moved, so finish it.
      return (current) =>
        settled(
          current,
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
    if (
      intent.broadcasting !== null || last === null ||
      last.outcome === "unknown"
    ) {
      // A broadcast may be out there: wait for it, then rescue it.
      const settlingMs = now() - (intent.settlingSince ?? 0);
      if (settlingMs < policy.stuckAfterMs) {
        throw new Error(
          `settling for ${formatDuration(settlingMs)} without tx hash, waiting`,
        );
      }
      return (current, lease) => broadcast(current, lease, true); // rescue: same nonce
    }
    if (last.outcome === "not_sent") {
      // This attempt stayed home. Send afresh, or with the same nonce if an
      // earlier attempt may be on chain.
      return (current, lease) => broadcast(current, lease, current.mayHaveSent);
    }
    const txHash = last.txHash ?? "";
    const status = await sender.receipt(txHash);
    switch (status) {
      case "confirmed":
        return (current) =>
          settled(current, `${txHash} confirmed, intent settled`);
      case "dropped":
        // Same nonce: the dropped tx may have been a replacement whose
        // original mined meanwhile; a fresh nonce could pay twice.
        return (current, lease) => broadcast(current, lease, true);
      case "pending":
        if (now() - last.at >= policy.stuckAfterMs) {
          return (current, lease) => broadcast(current, lease, true);
        }
        throw new Error(`waiting for ${txHash} to confirm`);
      default:
        throw new Error(
          `sender returned an unknown receipt status for ${txHash}: ${
            String(status)
          }`,
        );
    }
  }

  /** Moves a settling intent to settled; ledger first: the capture goes with (or before) the state write. */
  async function settled(current: Intent, reason: string): Promise<string> {
    await store.transition(current.id, {
      from: "settling",
      to: "settled",
      version: current.version,
      at: now(),
      ledger: "capture",
    });
    return reason;
  }

  /**
   * Broadcasts and records the outcome *before* reacting to it. A write
   * ahead of the send (`broadcasting`) means a crash between the send and
   * its record leaves "may have left" on record, never a stale "not sent".
   */
  async function broadcast(
    intent: Intent,
    lease: Lease,
    replace: boolean,
    wroteAhead = false,
  ): Promise<never> {
    // Entering settling writes ahead of the first send. Any other send
    // writes ahead itself; if an earlier one is still unrecorded (a crash
    // between its send and its record), the store marks it may-have-sent.
    const current = wroteAhead
      ? intent
      : await store.beginBroadcast(intent.id, intent.version, now());
    await lease.renew();
    let txHash: string;
    try {
      ({ txHash } = await sender.send(current, { replace }));
      if (typeof txHash !== "string" || txHash === "") {
        throw new Error(
          `sender returned no txHash: ${JSON.stringify(txHash) ?? "undefined"}`,
        );
      }
    } catch (error) {
      await store.recordBroadcast(current.id, current.version, {
        outcome: isNotSent(error) ? "not_sent" : "unknown",
        at: now(),
        error: clip(messageOf(error)),
      });
      throw new Error(`send: ${messageOf(error)}`, { cause: error });
    }
    await store.recordBroadcast(current.id, current.version, {
      outcome: "sent",
      txHash,
      at: now(),
    });
    // Sent is not settled: the queue brings the job back to read the receipt.
    throw new Error(`sent ${txHash}, waiting for confirmation`);
  }

  /** Resolves a poisoned job's intent by the state it is in now (DESIGN §5). */
  async function resolve(
    job: Job,
    jobId: string,
    poisoned: Pick<DeadLetter, "cause" | "reason" | "lastError"> & {
      delivery: number;
    },
  ): Promise<string> {
    const intent = await store.getIntent(job.intentId);
    const plan = planResolution(intent);
    const deadLetter: DeadLetter = {
      jobId,
      intentId: job.intentId,
      deliveries: poisoned.delivery,
      cause: poisoned.cause,
      reason: poisoned.reason,
      resolution: plan.text,
      lastError: poisoned.lastError,
      poisonedAt: now(),
    };
    if (intent === null || plan.action === "drop") {
      // A late duplicate of a job whose resolution already ran must not
      // overwrite the dead letter that says what that resolution did.
      const resolvedBefore = intent !== null &&
        ["settled", "failed", "needs_review"].includes(intent.state) &&
        (await store.getDeadLetter(jobId)) !== null;
      if (!resolvedBefore) await store.putDeadLetter(deadLetter);
    } else {
      await store.transition(intent.id, {
        from: "settling",
        to: plan.action === "fail" ? "failed" : "needs_review",
        version: intent.version,
        at: now(),
        deadLetter,
        ...(plan.action === "fail" ? { ledger: "void" } as const : {}),
      });
    }
    return plan.text;
  }

  async function redrive(
    jobId: string,
    enqueue?: (job: Job) => Promise<void>,
  ): Promise<Job | null> {
    const deadLetter = await store.getDeadLetter(jobId);
    if (deadLetter === null) return null;
    const intent = await store.getIntent(deadLetter.intentId);
    if (intent?.state === "settled" || intent?.state === "failed") {
      throw new ConflictError(
        `Cannot redrive ${jobId} as intent ${deadLetter.intentId} is already ${intent.state}: no job can help it`,
      );
    }
    const job: Job = { intentId: deadLetter.intentId, kind: "settle" };
    // Enqueue first: if that fails the dead letter is still there; a job
    // enqueued twice is harmless (it only says "go and look").
    if (enqueue) await enqueue(job);
    await store.redrive(jobId);
    return job;
  }

  return { policy, deliver, redrive };
}
