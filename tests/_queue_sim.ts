/**
 * A virtual-clock model of each queue's documented redelivery rules
 * (DESIGN §14), driving the real relayer (`createRelayer` + `MemoryStore` +
 * `ScriptedSender`) until every job has left its queue, then counting the
 * intents left stranded and the stuck payments poisoned before a rescue.
 *
 * - QStash: the delivery number is `Upstash-Retried + 1`; a retry answer's
 *   `Retry-After` (whole seconds, rounded up) is honoured up to 1 day; after
 *   `retries + 1` deliveries (`retries` at most the plan's cap) it calls the
 *   failure callback, at least once (here once or twice).
 * - Pub/Sub push: its own backoff, anywhere between `minBackoffMs` and
 *   `maxBackoffMs`, whatever we answer; `deliveryAttempt` only with a
 *   dead-letter policy (else the store counts); after `maxDeliveryAttempts`
 *   it forwards to the dead-letter topic, best effort (here once or twice);
 *   without a dead-letter policy it redelivers until retention ends (7 days,
 *   then the message is gone with no signal).
 * - Cloudflare Queues: `message.attempts`; `retry({ delaySeconds })` up to
 *   12 h; after `maxRetries + 1` deliveries the message goes to the
 *   dead-letter queue, whose consumer is the same handler (once or twice),
 *   the message's `attempts` started again at 1 there (Miniflare's) or
 *   kept (`CloudflareQueueSettings.deadLetterAttempts`).
 *   With a message retention (`QueueScenario.cloudflare`), a message is
 *   deleted once its age, counted from the send (its delivery delay
 *   included), reaches it, with no dead letter.
 * - The local KV queue: we re-enqueue with our delay; the store counts; no
 *   limit.
 *
 * At least once everywhere: a delivery can come as two copies at once (the
 * message follows either copy's answer), and the ack of a final answer
 * can be lost, so the queue redelivers a job the relayer already finished
 * (after its own redelivery delay), up to its limit, and then gives up.
 *
 * At a job's end (`event`), a delivery killed mid-send holding the lease
 * (run on another relayer whose send never ends), or the store refusing
 * every call for a while; a give-up that fails or is answered busy is
 * called again as the queue's give-up route retries it.
 *
 * @module
 */

import fc from "fast-check";
import { loadConfig } from "../webhook/config.ts";
import {
  createRelayer,
  DEFAULT_POLICY,
  definePolicy,
  type IntentState,
  JITTERS,
  type Job,
  jobIdOf,
  MemoryStore,
  notSent,
  type Outcome,
  poison,
  type Policy,
  queueLimit,
  type QueueLimits,
  type ReceiptStatus,
  type Relayer,
  rescueWindow,
  ScriptedSender,
  type Sender,
  type SendStep,
} from "../mod.ts";
import { mulberry32 } from "../support/prng.ts";
import { outage as outageStore } from "./_outage.ts";
import { outageDelayMs } from "../policy/_doubled.ts";
import { createQueueHandler } from "../cloudflare/queue_handler.ts";
import {
  CLOUDFLARE_FREE_RETENTION_MS,
  cloudflareDeadLetterMaxWaitSeconds,
  cloudflareDeadLetterMinWaitSeconds,
} from "../policy/_cloudflare_retention.ts";

/** What one broadcast of a payment does. */
export type SendKind =
  | "sent"
  | "timeout"
  | "not_sent"
  | "poison"
  | "not_sent_poison";

/** One payment of a run: where it starts and what its Sender does. */
export interface PaymentPlan {
  readonly start: "created" | "authorized";
  readonly sends: readonly SendKind[];
  readonly receipts: readonly ReceiptStatus[];
}

/** One run: a policy, a queue, payments, and the queue's at-least-once accidents. */
export interface QueueScenario {
  readonly policy: Policy;
  readonly queue: QueueLimits;
  readonly payments: readonly PaymentPlan[];
  /** Global delivery indices the queue hands out as two copies at once. */
  readonly duplicates: readonly number[];
  /** Global delivery indices whose final answer's ack is lost. */
  readonly lostAcks: readonly number[];
  readonly seed: number;
  /** The service's `LEASE`, `CLOCK_SKEW` and `SENDER_TIMEOUT` (10 s, 0, 5 s when absent). */
  readonly settings?: ServiceSettings;
  /** A delivery killed mid-send, or a store outage, at a job's end. */
  readonly event?: QueueEvent;
  /** A queue whose delays are its own (Pub/Sub) takes the longest it may, every time. */
  readonly slowest?: boolean;
  /**
   * With a `killed` event: where the delivery killed sends nothing, a
   * copy of the job killed mid-rescue leaves its write-ahead and lease.
   */
  readonly plantKilled?: boolean;
  /** Cloudflare: the jobs queue's message retention and delivery delay. */
  readonly cloudflare?: CloudflareQueueSettings;
}

/**
 * A Cloudflare jobs queue's settings that bound a message's life: its
 * message retention (none: kept until the queue gives up) and the delay
 * before its first delivery (0 when absent).
 */
export interface CloudflareQueueSettings {
  readonly messageRetentionMs?: number;
  readonly deliveryDelayMs?: number;
  /**
   * The dead-letter queue's message retention, counted from the send too:
   * a message moves there with its age (Miniflare's queue keeps its
   * send's timestamp).
   */
  readonly deadLetterMessageRetentionMs?: number;
  /**
   * The `attempts` a give-up's deliveries on the dead-letter queue carry,
   * which Cloudflare does not document: started again at 1 there
   * (`"restarted"`, Miniflare's, the default) or kept from the jobs queue
   * (`"kept"`: its first delivery there says `maxRetries + 2`).
   */
  readonly deadLetterAttempts?: "restarted" | "kept";
}

/** The settings of the service the relayer runs with, in milliseconds. */
export interface ServiceSettings {
  readonly leaseMs: number;
  readonly clockSkewMs: number;
  readonly senderTimeoutMs: number;
}

/**
 * What befalls each job besides the queue's accidents:
 * - `killed`: the job's delivery number `at` (from 1) runs on another
 *   instance, which is killed once its send began: the lease it took
 *   stands until it lapses, no answer reaches the queue, and the send may
 *   have left. At the number after the queue's last (`limit + 1`), it is a
 *   copy of the job killed right before the give-up route is called.
 *   With `plantKilled`, the delivery is not the one killed: a copy of the
 *   job killed mid-rescue left its write-ahead and lease just before it.
 * - `outage`: the store refuses every call for `ms`, from the moment the
 *   first job reaches delivery number `at` (`limit + 1`: its give-up).
 */
export type QueueEvent =
  | { readonly kind: "killed"; readonly at: number }
  | { readonly kind: "outage"; readonly at: number; readonly ms: number };

const DEFAULT_SETTINGS: ServiceSettings = {
  leaseMs: 10_000,
  clockSkewMs: 0,
  senderTimeoutMs: 5_000,
};

/** How a queue behaves, as its documentation says. */
export interface QueueModel {
  /** Deliveries before it gives up (`Infinity`: never). */
  readonly limit: number;
  /** Whether it reports the delivery number (else the store counts). */
  readonly counts: boolean;
  /** The wait before the next delivery, after a retry answer asking for `delayMs`. */
  next(delayMs: number, delivery: number, random: () => number): number;
  /** The wait before redelivering after a lost ack (no answer reached it). */
  redeliver(delivery: number, random: () => number): number;
  /** How many times its give-up signal reaches the relayer (0: none). */
  giveUpCalls(random: () => number): number;
  /**
   * How long it keeps a message at all (`Infinity`: until it gives up):
   * a delivery at an age past it never comes.
   */
  readonly retentionMs: number;
  /** The wait before a message's first delivery (0 when absent). */
  readonly firstDelayMs?: number;
  /**
   * How old, from the send, a give-up may be when the queue calls it
   * (absent: any age): a call at an age past it never comes.
   */
  readonly deadLetterRetentionMs?: number;
  /**
   * The wait before the next delivery after delivery `n` (the `streak`-th
   * in a row) failed unexpectedly, the store down: a 503 with no
   * `Retry-After`, or the handler's own retry. Absent: `redeliver`.
   */
  failed?(n: number, streak: number, random: () => number): number;
  /**
   * The wait after a delivery killed mid-send, whose answer never came:
   * absent, `redeliver` (Pub/Sub waits its ack deadline first).
   */
  killed?(n: number, random: () => number): number;
  /**
   * The wait before the give-up's call `k + 1`, after call `k` (from 1)
   * failed or was answered busy asking for `delayMs`, `sinceMs` after its
   * first call; `undefined`: the queue calls it no more (the give-up is
   * lost). Absent: never called again.
   */
  giveUpRetry?(
    k: number,
    delayMs: number,
    sinceMs: number,
    random: () => number,
  ): number | undefined;
}

const DAY_MS = 86_400_000;
const SECOND = 1000;

/** Whole seconds, rounded up, as `Retry-After` and `delaySeconds` carry it. */
function seconds(delayMs: number): number {
  return Math.ceil(delayMs / SECOND) * SECOND;
}

/**
 * QStash's own backoff before its retry `n` (from 1), where no
 * `Retry-After` reached it: min(1 day, e^(2.5 n)) s, in whole seconds
 * taken down, as `policy/_qstash_callback.ts` counts it (the least).
 */
function qstashOwnMs(n: number): number {
  return Math.min(DAY_MS, Math.floor(Math.exp(2.5 * n)) * SECOND);
}

/** What `delaySeconds` the Cloudflare handler asks for: 1 s to 12 h, rounded up. */
function cloudflareSeconds(delayMs: number): number {
  return Math.min(DAY_MS / 2, Math.max(SECOND, seconds(delayMs)));
}

/**
 * The fewest `deadLetterMaxRetries` `createQueueHandler` takes with this
 * policy: the dead-letter queue's consumer retries a give-up that many
 * times. Its own start check, not a copy of it.
 */
function cloudflareDeadLetterRetries(policy: Policy): number {
  const known = dlqRetries.get(policy.baseMs);
  if (known !== undefined) return known;
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy,
  });
  for (let retries = 0; retries <= 100; retries++) {
    try {
      createQueueHandler({
        relayer,
        maxRetries: 100,
        deadLetterQueue: "relayer-jobs-dlq",
        deadLetterMaxRetries: retries,
      });
      dlqRetries.set(policy.baseMs, retries);
      return retries;
    } catch (error) {
      // Refused for its retries: one more. Refused for what it checks
      // after them (the jobs queue's retention, not given here, counted as
      // 24 h, which 100 retries may outlast): these retries were taken.
      if (!String(error).includes("'deadLetterMaxRetries'")) {
        dlqRetries.set(policy.baseMs, retries);
        return retries;
      }
    }
  }
  throw new Error("no deadLetterMaxRetries taken");
}
const dlqRetries = new Map<number, number>();

/**
 * The documented model of a queue; `policy` gives the delays the
 * Cloudflare and KV handlers retry a failure with (the default policy's
 * when absent), and `settings` the lease the Cloudflare handler counts in
 * the waits a dead-letter retention must leave room for.
 */
export function modelOf(
  queue: QueueLimits,
  policy: Policy = DEFAULT_POLICY,
  slowest = false,
  cloudflare: CloudflareQueueSettings = {},
  settings: ServiceSettings = DEFAULT_SETTINGS,
): QueueModel {
  const limit = queueLimit(queue);
  const onceOrTwice = (random: () => number) => random() < 0.5 ? 1 : 2;
  switch (queue.kind) {
    case "qstash":
      return {
        limit,
        counts: true,
        next: (delayMs) => Math.min(seconds(delayMs), DAY_MS),
        // No Retry-After reached it: QStash's own exponential backoff.
        redeliver: (n) =>
          Math.min(DAY_MS, Math.round(Math.exp(2.5 * n)) * SECOND),
        giveUpCalls: onceOrTwice,
        retentionMs: Infinity,
        failed: (n) => qstashOwnMs(n),
        killed: (n) => qstashOwnMs(n),
        // The failure callback is retried as many times as the message,
        // on QStash's own backoff: the give-up route sends no
        // Retry-After, for a failure or a busy answer.
        giveUpRetry: (k) => k <= queue.retries ? qstashOwnMs(k) : undefined,
      };
    case "pubsub": {
      const { minBackoffMs: min, maxBackoffMs: max } = queue;
      // Best effort between the bounds: sometimes the minimum, sometimes its
      // own exponential step, sometimes anything in between.
      const own = (n: number, random: () => number) => {
        const pick = random();
        if (slowest || pick < 0.15) return max; // the slowest it may be
        if (pick < 0.4) return min;
        if (pick < 0.7) return Math.min(max, min * 2 ** Math.min(n - 1, 30));
        return min + Math.floor(random() * (max - min + 1));
      };
      // A push takes up to the ack deadline before Pub/Sub counts it
      // failed (a slow Sender, or no answer at all), then the backoff.
      const ackMs = queue.ackDeadlineMs ?? 10_000;
      const push = (random: () => number) =>
        slowest || random() < 0.3 ? ackMs : 0;
      // Without a dead-letter policy nothing gives up: the retention ends
      // the message, with no give-up route (`queueLimit` still counts the
      // deliveries that surely fit in it, for the start check).
      const dead = queue.maxDeliveryAttempts !== undefined;
      return {
        limit: dead ? queue.maxDeliveryAttempts! : Infinity,
        counts: dead,
        next: (_delayMs, n, random) => push(random) + own(n, random),
        // No answer reached it: the ack deadline ran out first.
        redeliver: (n, random) => ackMs + own(n, random),
        giveUpCalls: dead ? onceOrTwice : () => 0,
        retentionMs: queue.retentionMs ?? 7 * DAY_MS,
        failed: (n, _streak, random) => push(random) + own(n, random),
        // An unanswered push fails at its ack deadline.
        killed: (n, random) => ackMs + own(n, random),
        // The dead-letter topic's push subscription (no dead-letter policy
        // of its own, docs/queues.md) pushes until the give-up answers, for
        // as long as it retains the message: 7 days unless set. Its retry
        // policy is its own; taken here as the jobs subscription's, and
        // at least a second.
        giveUpRetry: (k, _delayMs, sinceMs, random) =>
          sinceMs > 7 * DAY_MS ? undefined : Math.max(SECOND, own(k, random)),
      };
    }
    case "cloudflare": {
      const dlq = cloudflareDeadLetterRetries(policy);
      // The longest wait the handler asks there: what the dead-letter
      // retention leaves a message as old as the jobs queue makes it; and
      // the shortest, the busy give-up's wait that retention counts.
      const dlqLimits = {
        baseMs: policy.baseMs,
        capMs: policy.capMs,
        leaseMs: settings.leaseMs,
        clockSkewMs: settings.clockSkewMs,
        maxRetries: queue.maxRetries,
        deliveryDelayMs: cloudflare.deliveryDelayMs,
      };
      // Not given, the retention the handler counts: 24 h.
      const dlqMaxWaitMs = cloudflareDeadLetterMaxWaitSeconds(
        dlqLimits,
        cloudflare.deadLetterMessageRetentionMs ?? CLOUDFLARE_FREE_RETENTION_MS,
      ) * SECOND;
      const dlqMinWaitMs = cloudflareDeadLetterMinWaitSeconds(
        dlqLimits,
        cloudflare.deadLetterMessageRetentionMs,
      ) * SECOND;
      return {
        limit,
        counts: true,
        next: (delayMs) => Math.min(seconds(delayMs), DAY_MS / 2),
        redeliver: () => 0, // the consumer's retry_delay, 0 by default
        giveUpCalls: onceOrTwice,
        // Counted from the send (Cloudflare does not say the retention
        // waits for a first delivery), and a message that reaches it is
        // deleted: none is delivered at an age of the retention or more.
        retentionMs: cloudflare.messageRetentionMs === undefined
          ? Infinity
          : cloudflare.messageRetentionMs - 1,
        firstDelayMs: cloudflare.deliveryDelayMs ?? 0,
        // The dead-letter queue's, from the send as well.
        deadLetterRetentionMs:
          cloudflare.deadLetterMessageRetentionMs === undefined
            ? Infinity
            : cloudflare.deadLetterMessageRetentionMs - 1,
        // The handler's retry after an outage: the policy's base, doubled
        // with the message's attempts, up to the policy's cap.
        failed: (n) =>
          cloudflareSeconds(outageDelayMs(n, policy.baseMs, policy.capMs)),
        // A Worker killed mid-batch: Cloudflare retries the batch after
        // the consumer's retry_delay.
        killed: () => 0,
        // The dead-letter queue's consumer is the same handler: a failure
        // waits the base doubled with its attempts (started again at 1
        // there, as on Miniflare, or kept from the jobs queue's `limit`
        // deliveries) up to 12 h, or what the dead-letter retention
        // leaves, and at least the busy give-up's wait that retention
        // counts; a busy give-up at least as long; `deadLetterMaxRetries`
        // retries, the fewest the handler takes.
        giveUpRetry: (k, delayMs) =>
          k <= dlq
            ? Math.max(
              cloudflareSeconds(delayMs),
              Math.min(
                dlqMaxWaitMs,
                Math.max(
                  dlqMinWaitMs,
                  cloudflareSeconds(
                    outageDelayMs(
                      cloudflare.deadLetterAttempts === "kept" ? limit + k : k,
                      policy.baseMs,
                      DAY_MS / 2,
                    ),
                  ),
                ),
              ),
            )
            : undefined,
      };
    }
    case "kv":
      return {
        limit,
        counts: false,
        next: (delayMs) => delayMs,
        redeliver: () => SECOND,
        giveUpCalls: () => 0,
        retentionMs: Infinity,
        // A fresh message after the base, doubled with each failure in a
        // row, up to the cap (webhook/_local_queue.ts).
        failed: (_n, streak) =>
          outageDelayMs(streak, policy.baseMs, policy.capMs),
      };
  }
}

/**
 * The relayer's give-up entry point, for a queue that stops delivering: its
 * failure callback, dead-letter topic or dead-letter queue reaching the
 * relayer, which poisons the job as exhausted and resolves the intent
 * (DESIGN §14). One place, so a twin can stand in for it.
 */
export async function giveUp(
  relayer: Relayer,
  job: Job,
  deliveries: number,
  queue: QueueLimits["kind"],
): Promise<Outcome> {
  return await relayer.giveUp(job, {
    deliveries,
    queue: { queue, messageId: `msg_${jobIdOf(job)}` },
  });
}

/** What one run found. */
export interface QueueRunReport {
  /** Intents neither terminal nor needs_review, with no live job and no dead letter. */
  readonly stranded: string[];
  /** Intents whose job ended with the intent still settling (not resolved by §5). */
  readonly unresolved: string[];
  /** Stuck payments poisoned (by the policy or the queue) before any rescue. */
  readonly poisonedBeforeRescue: string[];
  readonly stats: {
    deliveries: number;
    queueGaveUp: number;
    giveUpCalls: number;
    /** Give-up calls that failed (the store down) or were answered busy. */
    giveUpRetried: number;
    /** Deliveries killed mid-send, their lease left standing. */
    killed: number;
    /** Deliveries the store failed. */
    failed: number;
    rescues: number;
    finalStates: Partial<Record<IntentState | "missing", number>>;
  };
}

function step(id: string, kind: SendKind, i: number): SendStep {
  switch (kind) {
    case "sent":
      return { txHash: `0x${id}_${i}` };
    case "timeout":
      return { error: new Error("rpc timeout") };
    case "not_sent":
      return { error: notSent(new Error("signer refused")) };
    case "poison":
      return { error: poison(new Error("node rejected after relay")) };
    case "not_sent_poison":
      return { error: poison(notSent(new Error("chain id mismatch"))) };
  }
}

/** A payment that will sit in settling with a broadcast that may be out. */
function stuck(plan: PaymentPlan): boolean {
  return plan.start === "authorized" &&
    (plan.sends[0] === "timeout" || plan.sends[0] === "sent");
}

/**
 * Runs a scenario through a queue model and the real relayer.
 *
 * @param scenario The run.
 * @param model The queue's behaviour; defaults to the documented one.
 */
export async function simulateQueue(
  scenario: QueueScenario,
  model: QueueModel = modelOf(
    scenario.queue,
    scenario.policy,
    scenario.slowest,
    scenario.cloudflare,
    scenario.settings,
  ),
): Promise<QueueRunReport> {
  const { policy, queue, event } = scenario;
  const settings = scenario.settings ?? DEFAULT_SETTINGS;
  const random = mulberry32(scenario.seed);
  const queueRandom = mulberry32(scenario.seed ^ 0x5bd1e995);
  const store = new MemoryStore();
  const ids = scenario.payments.map((_, i) => `pi_${i}`);
  const scripts: Record<
    string,
    { sends: SendStep[]; receipts: ReceiptStatus[] }
  > = {};
  for (const [i, plan] of scenario.payments.entries()) {
    const id = ids[i]!;
    await store.createIntent({
      id,
      state: plan.start,
      hold: plan.start === "authorized" ? "pending" : null,
    });
    scripts[id] = {
      sends: plan.sends.map((kind, n) => step(id, kind, n)),
      receipts: [...plan.receipts],
    };
  }
  const sender = new ScriptedSender(scripts);
  let clock = 1_000_000;
  // The outage, once a job reached its number: [from, until).
  let outage: { from: number; until: number } | undefined;
  const live = outageStore(
    store,
    () => outage !== undefined && clock >= outage.from && clock < outage.until,
  );
  const startOutage = (n: number) => {
    if (event?.kind === "outage" && outage === undefined && n >= event.at) {
      outage = { from: clock, until: clock + event.ms };
    }
  };
  const options = {
    store: live,
    policy,
    now: () => clock,
    random,
    leaseMs: settings.leaseMs,
    clockSkewMs: settings.clockSkewMs,
  };
  const relayer = createRelayer({ ...options, sender });
  // Another instance, killed once its send began: the send never ends,
  // and its lease stands until it lapses. Its receipts are the chain's.
  let began: (() => void) | undefined;
  const killedSender: Sender = {
    send: (intent, { replace }) => {
      sender.calls.push({ method: "send", intentId: intent.id, replace });
      began?.();
      return new Promise(() => {});
    },
    receipt: (txHash) => sender.receipt(txHash),
  };
  const killer = createRelayer({ ...options, sender: killedSender });
  /**
   * A delivery on the killed instance: its outcome, or `undefined` once
   * its send began.
   */
  const killedDelivery = async (
    job: Job,
    n: number | undefined,
  ): Promise<Outcome | Error | undefined> => {
    const sending = new Promise<undefined>((resolve) =>
      began = () => resolve(undefined)
    );
    const run = killer.deliver(job, n).catch((error: Error) => error);
    const first = await Promise.race([run, sending]);
    began = undefined;
    return first;
  };
  /**
   * A copy of the job on another instance (published again, or on a clock
   * `CLOCK_SKEW` ahead) found the settling payment stuck, wrote ahead of a
   * rescue and was killed: its write-ahead and lease stand, as
   * `tests/webhook/qstash_busy_give_up_retries_test.ts` leaves them.
   * Nothing where the payment is not settling with its hold pending.
   */
  const plantKilled = async (intentId: string): Promise<void> => {
    const intent = await live.getIntent(intentId).catch(() => null);
    if (intent?.state !== "settling" || intent.hold !== "pending") return;
    try {
      await live.beginBroadcast(intent.id, intent.version, clock, {
        lease: {
          owner: "killed",
          ttlMs: settings.leaseMs,
          now: clock,
          keep: true,
        },
      });
      stats.killed++;
      sender.calls.push({ method: "send", intentId, replace: true });
    } catch {
      // Another holds the lease, or the intent moved: no copy got in.
    }
  };

  const stats: QueueRunReport["stats"] = {
    deliveries: 0,
    queueGaveUp: 0,
    giveUpCalls: 0,
    giveUpRetried: 0,
    killed: 0,
    failed: 0,
    rescues: 0,
    finalStates: {},
  };
  // Sender calls made before each intent's first poison: a rescue must be among them.
  const callsAtPoison = new Map<string, number>();
  const notePoison = (id: string) => {
    if (!callsAtPoison.has(id)) callsAtPoison.set(id, sender.calls.length);
  };

  const jobs = ids.map((id) => ({
    job: { intentId: id, kind: "settle" } as Job,
    born: clock,
    due: clock + (model.firstDelayMs ?? 0),
    count: 0,
    streak: 0,
    failures: 0,
    giveUpFailures: 0,
    alive: true,
    // Past the queue's last delivery: its give-up's calls so far.
    givingUp: 0,
    extraCalls: 0,
    gaveUpAt: 0,
    gaveUpAfter: 0,
  }));
  const cap = 4 * policy.maxDeliveries + 40 +
    (event === undefined ? 0 : 400);
  let index = 0;
  const violations: string[] = [];
  // The number a give-up stands at: the queue's last delivery, or (no
  // limit) the policy's last.
  const end = Number.isFinite(model.limit)
    ? model.limit + 1
    : policy.maxDeliveries + 1;

  while (jobs.some((j) => j.alive)) {
    const job = jobs.filter((j) => j.alive).reduce((a, b) =>
      b.due < a.due ? b : a
    );
    clock = Math.max(clock, job.due);
    if (job.givingUp > 0) {
      // The queue's give-up route, called again after a failure or busy.
      await callGiveUp(job);
      continue;
    }
    if (clock - job.born > model.retentionMs) {
      job.alive = false; // retention over: gone, with no signal
      continue;
    }
    job.count++;
    // Deliveries the store failed are bounded by the outage, not counted.
    if (job.count - job.failures > cap) {
      violations.push(`${job.job.intentId} still delivered after ${cap}`);
      job.alive = false;
      continue;
    }
    const n = job.count;
    startOutage(n);
    const i = index++;
    const number = model.counts ? n : undefined;
    let final: boolean;
    let waitMs: number;
    const killing = event?.kind === "killed" && event.at === n;
    if (killing && scenario.plantKilled) await plantKilled(job.job.intentId);
    const killed = killing && !scenario.plantKilled
      ? await killedDelivery(job.job, number)
      : null;
    stats.deliveries++;
    if (killed === undefined) {
      // Killed mid-send: no answer reached the queue.
      stats.killed++;
      final = false;
      waitMs = (model.killed ?? model.redeliver)(n, queueRandom);
    } else {
      const copies = killed === null && scenario.duplicates.includes(i) ? 2 : 1;
      stats.deliveries += copies - 1;
      const outcomes: (Outcome | Error)[] = killed === null
        ? await Promise.all(
          Array.from(
            { length: copies },
            () =>
              relayer.deliver(job.job, number).catch((error: Error) => error),
          ),
        )
        : [killed];
      if (
        outcomes.some((o) => !(o instanceof Error) && o.action === "poison")
      ) {
        notePoison(job.job.intentId);
      }
      // The message follows one copy's answer: when the other copy took the
      // lease, that is a busy retry, even at the policy's last delivery.
      const answer = outcomes[copies === 2 && queueRandom() < 0.5 ? 1 : 0]!;
      if (answer instanceof Error) {
        // The store failed it: a 503, nothing decided.
        job.streak++;
        job.failures++;
        stats.failed++;
        final = false;
        waitMs = (model.failed ?? ((m, _s, r) => model.redeliver(m, r)))(
          n,
          job.streak,
          queueRandom,
        );
      } else {
        job.streak = 0;
        final = answer.action !== "retry";
        waitMs = answer.action === "retry"
          ? model.next(answer.delayMs, n, queueRandom)
          : 0;
        if (final && scenario.lostAcks.includes(i)) {
          final = false; // the ack never reached the queue
          waitMs = model.redeliver(n, queueRandom);
        }
      }
    }
    if (final) {
      job.alive = false;
      continue;
    }
    if (n >= model.limit) {
      // The queue gives up: its give-up route (failure callback, dead-letter
      // topic, dead-letter queue) reaches the relayer, maybe more than once.
      stats.queueGaveUp++;
      job.gaveUpAt = clock;
      job.gaveUpAfter = n;
      if (event?.kind === "killed" && event.at === n + 1) {
        // A copy of the job on another instance, killed mid-send right
        // before the give-up.
        if (scenario.plantKilled) await plantKilled(job.job.intentId);
        else {
          const copy = await killedDelivery(
            job.job,
            model.counts ? n : undefined,
          );
          if (copy === undefined) stats.killed++;
          if (
            copy !== undefined && !(copy instanceof Error) &&
            copy.action === "poison"
          ) {
            notePoison(job.job.intentId);
          }
        }
      }
      const calls = model.giveUpCalls(queueRandom);
      if (calls === 0) {
        job.alive = false; // nothing tells the relayer
        continue;
      }
      job.extraCalls = calls - 1;
      await callGiveUp(job);
      continue;
    }
    job.due = clock + waitMs;
  }

  /** One call of a job's give-up route, and what the queue does after it. */
  async function callGiveUp(job: (typeof jobs)[number]): Promise<void> {
    if (clock - job.born > (model.deadLetterRetentionMs ?? Infinity)) {
      job.alive = false; // the dead-letter queue's retention is over
      return;
    }
    startOutage(end);
    job.givingUp++;
    stats.giveUpCalls++;
    const outcome = await giveUp(
      relayer,
      job.job,
      job.gaveUpAfter,
      queue.kind,
    ).catch((error: Error) => error);
    if (!(outcome instanceof Error) && outcome.action !== "retry") {
      if (outcome.action === "poison") notePoison(job.job.intentId);
      job.alive = false;
      // At least once: the route may be called again.
      for (let c = 0; c < job.extraCalls; c++) {
        stats.giveUpCalls++;
        const again = await giveUp(
          relayer,
          job.job,
          job.gaveUpAfter,
          queue.kind,
        )
          .catch((error: Error) => error);
        if (!(again instanceof Error) && again.action === "poison") {
          notePoison(job.job.intentId);
        }
      }
      return;
    }
    // Failed (the store down) or busy: the queue calls it again, or not.
    stats.giveUpRetried++;
    const waitMs = model.giveUpRetry?.(
      job.givingUp,
      outcome instanceof Error ? 0 : outcome.delayMs,
      clock - job.gaveUpAt,
      queueRandom,
    );
    if (outcome instanceof Error) job.giveUpFailures++;
    if (waitMs === undefined || job.givingUp - job.giveUpFailures > cap) {
      job.alive = false; // the give-up is lost
      return;
    }
    job.due = clock + waitMs;
  }

  const stranded: string[] = [];
  const unresolved: string[] = [];
  const poisonedBeforeRescue: string[] = [];
  for (const [i, id] of ids.entries()) {
    const intent = await store.getIntent(id);
    const state = intent?.state ?? "missing";
    stats.finalStates[state] = (stats.finalStates[state] ?? 0) + 1;
    const dead = await store.getDeadLetter(
      jobIdOf({ intentId: id, kind: "settle" }),
    );
    const resolved = state === "settled" || state === "failed" ||
      state === "needs_review";
    if (!resolved && dead === null) stranded.push(id);
    if (state === "settling") unresolved.push(id);
    const rescues = sender.calls.filter((call) =>
      call.method === "send" && call.intentId === id && call.replace
    );
    stats.rescues += rescues.length;
    // A poison that found the intent settled (a late give-up) poisoned no payment.
    const at = state === "settled" ? undefined : callsAtPoison.get(id);
    // Nor one before anything was sent: a job that met the store down
    // until its last delivery is dropped with its intent still authorized
    // (relayer.ts, `LastDelivery`), its letter kept for a redrive.
    const sends = at === undefined
      ? []
      : sender.calls.slice(0, at).filter((call) =>
        call.method === "send" && call.intentId === id
      );
    if (sends.length > 0 && stuck(scenario.payments[i]!)) {
      if (!sends.some((call) => call.method === "send" && call.replace)) {
        poisonedBeforeRescue.push(id);
      }
    }
  }
  unresolved.push(...violations);
  return { stranded, unresolved, poisonedBeforeRescue, stats };
}

/** The env a service with this policy and queue would start with. */
export function envOf(
  policy: Policy,
  queue: QueueLimits,
  settings: ServiceSettings = DEFAULT_SETTINGS,
): Record<string, string> {
  const env: Record<string, string> = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
    MAX_DELIVERIES: String(policy.maxDeliveries),
    BASE: `${policy.baseMs}ms`,
    CAP: `${policy.capMs}ms`,
    JITTER: policy.jitter,
    STUCK_AFTER: `${policy.stuckAfterMs}ms`,
    LEASE: `${settings.leaseMs}ms`,
    // The simulation runs every instance on one clock; the relayer still
    // waits out the skew it is told of.
    CLOCK_SKEW: `${settings.clockSkewMs}ms`,
    SENDER_TIMEOUT: `${settings.senderTimeoutMs}ms`,
  };
  switch (queue.kind) {
    case "qstash":
      return {
        ...env,
        QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
        QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
        PUBLIC_URL: "https://relayer.example.test",
        QSTASH_RETRIES: String(queue.retries),
      };
    case "pubsub":
      return {
        ...env,
        PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
        PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
        PUBSUB_MIN_BACKOFF: `${queue.minBackoffMs}ms`,
        PUBSUB_MAX_BACKOFF: `${queue.maxBackoffMs}ms`,
        ...(queue.retentionMs !== undefined
          ? { PUBSUB_MESSAGE_RETENTION: `${queue.retentionMs}ms` }
          : {}),
        ...(queue.maxDeliveryAttempts !== undefined
          ? {
            PUBSUB_MAX_DELIVERY_ATTEMPTS: String(queue.maxDeliveryAttempts),
            PUBSUB_DEAD_LETTER_AUDIENCE:
              "https://relayer.example.test/v1/pubsub/dead-letter",
          }
          : {}),
      };
    case "cloudflare":
      return { ...env, CLOUDFLARE_MAX_RETRIES: String(queue.maxRetries) };
    case "kv":
      return { ...env, KV_QUEUE: "1" };
  }
}

const sendKind = fc.constantFrom<SendKind>(
  "timeout",
  "timeout",
  "sent",
  "sent",
  "not_sent",
  "poison",
  "not_sent_poison",
);

/** Payments: timeouts, stuck receipts, drops, declared poison; a few never authorized. */
export const anyPayments: fc.Arbitrary<PaymentPlan[]> = fc.array(
  fc.record({
    start: fc.constantFrom<"created" | "authorized">(
      "authorized",
      "authorized",
      "authorized",
      "created",
    ),
    sends: fc.array(sendKind, { minLength: 1, maxLength: 4 }),
    receipts: fc.oneof(
      fc.constant<ReceiptStatus[]>(["pending"]), // stuck for good
      fc.array(
        fc.constantFrom<ReceiptStatus>("confirmed", "pending", "dropped"),
        { minLength: 1, maxLength: 3 },
      ),
    ),
  }),
  { minLength: 1, maxLength: 3 },
);

/** The queue's at-least-once accidents, by global delivery index. */
export const anyAccidents: fc.Arbitrary<
  Pick<QueueScenario, "duplicates" | "lostAcks" | "seed">
> = fc.record({
  duplicates: fc.uniqueArray(fc.nat({ max: 30 }), { maxLength: 3 }),
  lostAcks: fc.uniqueArray(fc.nat({ max: 12 }), { maxLength: 4 }),
  seed: fc.integer(),
});

/** The start-up check, exactly as the service runs it. */
export function accepts(
  policy: Policy,
  queue: QueueLimits,
  settings?: ServiceSettings,
): boolean {
  try {
    loadConfig(envOf(policy, queue, settings));
    return true;
  } catch {
    return false;
  }
}

/** A queue kind. */
export type Kind = QueueLimits["kind"];

const policyFields = fc.record({
  maxDeliveries: fc.integer({ min: 2, max: 12 }),
  baseMs: fc.constantFrom(1000, 5000, 30_000),
  capMs: fc.constantFrom(10_000, 120_000, 3_600_000, 2 * DAY_MS),
  jitter: fc.constantFrom<"equal" | "none">("equal", "none"),
}).map((fields) => ({
  ...fields,
  // loadConfig refuses BASE above CAP.
  capMs: Math.max(fields.capMs, fields.baseMs),
}));

/**
 * A queue of `kind` that does not stop before the policy's last delivery,
 * built by mapping (its limit is the policy's plus some slack).
 */
function queueFor(
  kind: Kind,
  maxDeliveries: number,
): fc.Arbitrary<QueueLimits> {
  // Often exactly the policy's limit: where a lost ack or a busy last
  // delivery makes the queue give up, and its give-up route must resolve.
  const slack = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5 }));
  switch (kind) {
    case "qstash":
      // QSTASH_RETRIES is at most the plan's cap (3, 5, 20 … 100): the cap
      // is the queue's limit, and the setting says it. At least 2: the
      // failure callback is retried as often, and one retry (12 s after
      // it) does not outlast a give-up busy behind the default lease.
      return slack.map((extra) => ({
        kind: "qstash" as const,
        retries: Math.min(100, Math.max(maxDeliveries - 1, 2) + extra),
      }));
    case "pubsub":
      return fc.record({
        attempts: fc.option(slack, { nil: undefined }),
        minBackoffMs: fc.constantFrom(1000, 10_000, 60_000, 600_000),
        spread: fc.constantFrom(0, 1000, 60_000, 600_000),
      }).map(({ attempts, minBackoffMs, spread }) => ({
        kind: "pubsub" as const,
        ...(attempts === undefined
          ? {}
          : { maxDeliveryAttempts: Math.max(5, maxDeliveries + attempts) }),
        minBackoffMs,
        maxBackoffMs: Math.min(600_000, minBackoffMs + spread),
      }));
    case "cloudflare":
      return slack.map((extra) => ({
        kind: "cloudflare" as const,
        maxRetries: Math.min(100, maxDeliveries - 1 + extra),
      }));
    case "kv":
      return fc.constant({ kind: "kv" as const });
  }
}

/**
 * Configurations `loadConfig` accepts, by mapping: `stuckAfterMs` is put
 * somewhere in (0, the shorter of the policy's window and the queue's].
 */
export function acceptedScenario(kind: Kind): fc.Arbitrary<QueueScenario> {
  return policyFields.chain((fields) =>
    fc.record({
      fields: fc.constant(fields),
      queue: queueFor(kind, fields.maxDeliveries),
      fraction: fc.oneof(
        fc.constant(1),
        fc.double({ min: 0, max: 1, noNaN: true }),
      ),
      payments: anyPayments,
      accidents: anyAccidents,
    })
  ).map(({ fields, queue, fraction, payments, accidents }) => {
    const loose = definePolicy({ ...fields, stuckAfterMs: 0 });
    const window = Math.min(rescueWindow(loose), rescueWindow(loose, queue));
    const stuckAfterMs = Math.max(1, Math.floor(fraction * window));
    return {
      policy: definePolicy({ ...fields, stuckAfterMs }),
      queue,
      payments,
      ...accidents,
      // A queue that does not report the delivery number is counted in the
      // store, where a duplicate copy spends a delivery of the policy's (we
      // count deliveries, not failures) and so shortens the window in time.
      // The window check cannot see duplicates; (ii) is proven here for
      // queues that number their deliveries, and the store-counted queues
      // with duplicates are checked for (i) below.
      duplicates: modelOf(queue).counts ? accidents.duplicates : [],
    };
  }).filter((scenario) =>
    // A Cloudflare queue's retention, not given, is counted as 24 h: a
    // policy whose waits outlast it is refused (given one, it is
    // cloudflareRetentionScenario's).
    scenario.queue.kind !== "cloudflare" ||
    accepts(scenario.policy, scenario.queue)
  );
}

/** Any configuration, accepted or not, for (iii). */
export const anyScenario: fc.Arbitrary<QueueScenario> = fc.record({
  policy: fc.record({
    maxDeliveries: fc.integer({ min: 1, max: 12 }),
    baseMs: fc.constantFrom(1000, 5000, 30_000),
    capMs: fc.constantFrom(10_000, 120_000, 3_600_000, 2 * DAY_MS),
    jitter: fc.constantFrom(...JITTERS),
    stuckAfterMs: fc.constantFrom(
      1,
      1000,
      30_000,
      300_000,
      1_200_000,
      2 * DAY_MS,
    ),
  }).map((fields) => definePolicy(fields)),
  queue: fc.oneof(
    fc.record({
      kind: fc.constant("qstash" as const),
      retries: fc.integer({ min: 0, max: 20 }),
    }),
    fc.record({
      attempts: fc.option(fc.integer({ min: 5, max: 15 }), { nil: undefined }),
      minBackoffMs: fc.constantFrom(0, 1000, 10_000, 60_000, 600_000),
      spread: fc.constantFrom(0, 1000, 600_000),
    }).map(({ attempts, minBackoffMs, spread }): QueueLimits => ({
      kind: "pubsub",
      ...(attempts === undefined ? {} : { maxDeliveryAttempts: attempts }),
      minBackoffMs,
      maxBackoffMs: Math.min(600_000, minBackoffMs + spread),
    })),
    fc.record({
      kind: fc.constant("cloudflare" as const),
      maxRetries: fc.integer({ min: 0, max: 12 }),
    }),
    fc.constant({ kind: "kv" as const }),
  ),
  payments: anyPayments,
}).chain((base) =>
  anyAccidents.map((accidents) => ({
    ...base,
    ...accidents,
    // As for accepted runs: duplicates only where the queue numbers them.
    duplicates: modelOf(base.queue).counts ? accidents.duplicates : [],
  }))
);

/** `LEASE`, `CLOCK_SKEW` and `SENDER_TIMEOUT` as `loadConfig` takes them (LEASE at least twice SENDER_TIMEOUT), short enough for quick runs. */
export const anySettings: fc.Arbitrary<ServiceSettings> = fc.record({
  senderTimeoutMs: fc.constantFrom(1000, 5000, 10_000),
  leaseMs: fc.oneof(
    fc.constantFrom(2000, 10_000, 30_000, 60_000),
    fc.integer({ min: 2000, max: 300_000 }),
  ),
  clockSkewMs: fc.constantFrom(0, 1000, 5000),
}).map((s) => ({ ...s, leaseMs: Math.max(s.leaseMs, 2 * s.senderTimeoutMs) }));

/** See {@linkcode acceptedEventScenario}. */
export interface TightPubSub {
  /** Taken off the least retention the check takes (0: as it is). */
  readonly shiftMs: (settings: ServiceSettings) => number;
}

/**
 * The least `PUBSUB_MESSAGE_RETENTION` the start check takes with these
 * settings (by bisection over Pub/Sub's 10 min … 31 days), or `undefined`.
 */
function leastRetention(
  policy: Policy,
  queue: Extract<QueueLimits, { kind: "pubsub" }>,
  settings: ServiceSettings,
): number | undefined {
  const takes = (retentionMs: number) =>
    accepts(policy, { ...queue, retentionMs }, settings);
  let low = 600_000;
  let high = 2_678_400_000;
  if (!takes(high)) return undefined;
  if (takes(low)) return low;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (takes(mid)) high = mid;
    else low = mid;
  }
  return high;
}

/**
 * Accepted configurations of `kind` (as {@linkcode acceptedScenario}),
 * with `LEASE`, `CLOCK_SKEW` and `SENDER_TIMEOUT` generated, for Pub/Sub
 * sometimes a message retention (the least the start check takes, or
 * more), and an event at a job's end: a delivery killed mid-send at any
 * number, including the last and the give-up, or a store outage of up to
 * `outageMs(settings)`. Only settings `loadConfig` takes are kept, the
 * queue as it reads them. With `tight` (Pub/Sub), the corner where the
 * retention alone bounds a job: no dead-letter policy, the least
 * retention the start check takes (less `tight.shiftMs`, for a twin of
 * the check), Pub/Sub as slow as it may be, the event at the policy's
 * last deliveries; in half the runs a step within the busy wait and a
 * `LEASE` (raised where needed) that puts the need past Pub/Sub's 10 min
 * floor, where the retention's room for that wait alone saves the job.
 */
export function acceptedEventScenario(
  kind: Kind,
  outageMs: (settings: ServiceSettings) => number,
  tight?: TightPubSub,
): fc.Arbitrary<QueueScenario> {
  return fc.record({
    base: acceptedScenario(kind),
    settings: anySettings,
    retention: fc.constantFrom<"none" | "least" | "hour" | "week">(
      "none",
      "least",
      "least",
      "hour",
      "week",
    ),
    // QSTASH_RETRIES from MAX_DELIVERIES − 1 (its default) up: the start
    // check says which it takes.
    retries: fc.oneof(fc.constant(0), fc.nat({ max: 4 })),
    // Pub/Sub backoffs off the round values too: where a step is about a
    // lease long.
    backoff: fc.option(
      fc.record({
        min: fc.integer({ min: 1000, max: 600_000 }),
        spread: fc.oneof(fc.constant(0), fc.nat({ max: 600_000 })),
      }),
      { freq: 2 },
    ),
    // With `tight`, where a Pub/Sub step is within a busy wait: the
    // retention's room for that wait is what then bounds the job.
    tightStep: fc.double({ min: 0, max: 1, noNaN: true }),
    killed: fc.boolean(),
    fromQueue: fc.boolean(),
    slowest: fc.boolean(),
    plantKilled: fc.boolean(),
    back: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.nat({ max: 12 })),
    outage: fc.oneof(
      fc.constant(1),
      fc.double({ min: 0, max: 1, noNaN: true }),
    ),
  }).map(
    (
      {
        base,
        settings,
        retries,
        backoff,
        retention,
        tightStep,
        killed,
        fromQueue,
        slowest,
        plantKilled,
        back,
        outage,
      },
    ):
      | QueueScenario
      | undefined => {
      let queue = base.queue;
      if (queue.kind === "pubsub" && backoff !== null) {
        queue = {
          ...queue,
          minBackoffMs: backoff.min,
          maxBackoffMs: Math.min(600_000, backoff.min + backoff.spread),
        };
      }
      if (queue.kind === "qstash") {
        const least = base.policy.maxDeliveries - 1;
        queue = { ...queue, retries: Math.min(100, least + retries) };
      }
      if (queue.kind === "pubsub" && tight !== undefined) {
        const { maxDeliveryAttempts: _, ...rest } = queue;
        queue = rest;
        // Half the runs where the retention's room for a busy wait is
        // what bounds the job: a step (the ack deadline and the longest
        // backoff) within that wait, so the push after a busy last one
        // comes before the wait ends, and a least retention above
        // Pub/Sub's 10 min floor (which would leave room of its own).
        if (tightStep < 0.5) {
          const n = base.policy.maxDeliveries;
          const floorMs = 600_000;
          // The lease raised (it may be) so that n steps and one wait can
          // pass the floor with each step within the wait.
          const leaseMs = Math.max(
            settings.leaseMs,
            Math.ceil(floorMs / (n + 1)) + 1000,
          );
          settings = { ...settings, leaseMs };
          const busyMs = leaseMs + 2 * settings.clockSkewMs;
          const ackMs = 2 * settings.senderTimeoutMs + 5000;
          // Past floor / (n + 1): the push after the wait comes after a
          // least retention of the floor too.
          const lowMs = Math.max(ackMs, floorMs / (n + 1));
          const stepMs = lowMs + 2 * tightStep * Math.max(0, busyMs - lowMs);
          const maxBackoffMs = Math.min(
            600_000,
            Math.max(1000, Math.floor(stepMs - ackMs)),
          );
          queue = {
            ...queue,
            minBackoffMs: Math.min(queue.minBackoffMs ?? 10_000, maxBackoffMs),
            maxBackoffMs,
          };
        }
        retention = "least";
        slowest = true;
        fromQueue = false;
        back = Math.min(back, 2);
      }
      if (queue.kind === "pubsub" && retention !== "none") {
        const least = leastRetention(base.policy, queue, settings);
        const retentionMs = least === undefined
          ? undefined
          : retention === "least"
          ? least
          : Math.max(least, retention === "hour" ? 3_600_000 : 7 * DAY_MS);
        if (retentionMs !== undefined) queue = { ...queue, retentionMs };
      }
      if (!accepts(base.policy, queue, settings)) return undefined;
      if (queue.kind === "pubsub") {
        // As the service reads it: with a retention, its ack deadline too.
        queue = loadConfig(envOf(base.policy, queue, settings)).queues.pubsub;
        if (tight !== undefined && queue.retentionMs !== undefined) {
          const retentionMs = Math.max(
            600_000,
            queue.retentionMs - tight.shiftMs(settings),
          );
          queue = { ...queue, retentionMs };
        }
      }
      // The job's end: the policy's last delivery, or the queue's (where
      // its give-up comes), whichever is first or, at random, last.
      const ends = [
        base.policy.maxDeliveries + 1,
        Math.min(queueLimit(queue), 500) + 1,
      ].sort((a, b) => a - b);
      const at = Math.max(1, ends[fromQueue ? 1 : 0]! - back);
      const event: QueueEvent = killed ? { kind: "killed", at } : {
        kind: "outage",
        at,
        ms: Math.max(1, Math.floor(outage * outageMs(settings))),
      };
      return { ...base, queue, settings, event, slowest, plantKilled };
    },
  ).filter((s): s is QueueScenario => s !== undefined);
}

/**
 * The least jobs-queue `messageRetentionMs` `createQueueHandler` takes
 * with this policy, queue, settings and delivery delay (whole seconds,
 * by bisection over Cloudflare's 60 s … 14 days): the handler's own
 * check, not a copy of it. `undefined` when it takes none.
 */
export function leastCloudflareRetention(
  policy: Policy,
  queue: Extract<QueueLimits, { kind: "cloudflare" }>,
  settings: ServiceSettings,
  deliveryDelayMs: number,
  option: "messageRetentionMs" | "deadLetterMessageRetentionMs" =
    "messageRetentionMs",
): number | undefined {
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    policy,
    leaseMs: settings.leaseMs,
    clockSkewMs: settings.clockSkewMs,
  });
  const takes = (seconds: number) => {
    try {
      createQueueHandler({
        relayer,
        maxRetries: queue.maxRetries,
        deadLetterQueue: "relayer-jobs-dlq",
        deadLetterMaxRetries: 100,
        [option]: seconds * SECOND,
        deliveryDelayMs,
      });
      return true;
    } catch {
      return false;
    }
  };
  let low = 60;
  let high = 1_209_600;
  if (!takes(high)) return undefined;
  if (takes(low)) return low * SECOND;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (takes(mid)) high = mid;
    else low = mid;
  }
  return high * SECOND;
}

/**
 * Accepted Cloudflare configurations with an event at a job's end (as
 * {@linkcode acceptedEventScenario}), a delivery delay (none, 1 s … 1 h)
 * and, as `option`, the least retention `createQueueHandler` takes with
 * them, less `shiftMs` (at least 60 s).
 */
function cloudflareLeastRetentionScenario(
  outageMs: (settings: ServiceSettings) => number,
  option: "messageRetentionMs" | "deadLetterMessageRetentionMs",
  shiftMs: (
    least: number,
    deliveryDelayMs: number,
    scenario: QueueScenario,
    settings: ServiceSettings,
  ) => number,
): fc.Arbitrary<QueueScenario> {
  return fc.tuple(
    acceptedEventScenario("cloudflare", outageMs),
    fc.constantFrom<number>(0, 1000, 30_000, 300_000, 900_000, 3_600_000),
  ).map(([scenario, deliveryDelayMs]): QueueScenario | undefined => {
    const { policy, queue } = scenario;
    if (queue.kind !== "cloudflare") return undefined;
    const settings = scenario.settings ?? DEFAULT_SETTINGS;
    const least = leastCloudflareRetention(
      policy,
      queue,
      settings,
      deliveryDelayMs,
      option,
    );
    if (least === undefined) return undefined;
    const retentionMs = Math.max(
      60_000,
      least - shiftMs(least, deliveryDelayMs, scenario, settings),
    );
    return {
      ...scenario,
      cloudflare: { [option]: retentionMs, deliveryDelayMs },
    };
  }).filter((s): s is QueueScenario => s !== undefined);
}

/**
 * Accepted Cloudflare configurations with an event at a job's end (as
 * {@linkcode acceptedEventScenario}), a delivery delay (none, 1 s … 1 h)
 * and the least jobs-queue message retention `createQueueHandler` takes
 * with them, less `shiftMs` (for a twin of the check; at least 60 s).
 */
export function cloudflareRetentionScenario(
  outageMs: (settings: ServiceSettings) => number,
  shiftMs: (deliveryDelayMs: number, settings: ServiceSettings) => number =
    () => 0,
): fc.Arbitrary<QueueScenario> {
  return cloudflareLeastRetentionScenario(
    outageMs,
    "messageRetentionMs",
    (_least, deliveryDelayMs, _scenario, settings) =>
      shiftMs(deliveryDelayMs, settings),
  );
}

/**
 * Accepted Cloudflare configurations with an event at a job's end (as
 * {@linkcode acceptedEventScenario}), a delivery delay (none, 1 s … 1 h),
 * no jobs-queue retention, and the least dead-letter queue retention
 * `createQueueHandler` takes with them, less `shiftMs` (for a twin of the
 * check; at least 60 s).
 */
export function cloudflareDeadLetterRetentionScenario(
  outageMs: (settings: ServiceSettings) => number,
  shiftMs: (
    least: number,
    scenario: QueueScenario,
    settings: ServiceSettings,
  ) => number = () => 0,
): fc.Arbitrary<QueueScenario> {
  return cloudflareLeastRetentionScenario(
    outageMs,
    "deadLetterMessageRetentionMs",
    (least, _deliveryDelayMs, scenario, settings) =>
      shiftMs(least, scenario, settings),
  );
}
