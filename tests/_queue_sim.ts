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
 *   dead-letter queue, whose consumer is the same handler (once or twice).
 * - The local KV queue: we re-enqueue with our delay; the store counts; no
 *   limit.
 *
 * At least once everywhere: a delivery can come as two copies at once (the
 * message follows either copy's answer), and the ack of a final answer
 * can be lost, so the queue redelivers a job the relayer already finished
 * (after its own redelivery delay), up to its limit, and then gives up.
 *
 * @module
 */

import fc from "fast-check";
import { loadConfig } from "../webhook/config.ts";
import {
  createRelayer,
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
  type SendStep,
} from "../mod.ts";
import { mulberry32 } from "../support/prng.ts";

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
}

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
  /** How long it keeps a message at all (`Infinity`: until it gives up). */
  readonly retentionMs: number;
}

const DAY_MS = 86_400_000;
const SECOND = 1000;

/** Whole seconds, rounded up, as `Retry-After` and `delaySeconds` carry it. */
function seconds(delayMs: number): number {
  return Math.ceil(delayMs / SECOND) * SECOND;
}

/** The documented model of a queue. */
export function modelOf(queue: QueueLimits): QueueModel {
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
      };
    case "pubsub": {
      const { minBackoffMs: min, maxBackoffMs: max } = queue;
      // Best effort between the bounds: sometimes the minimum, sometimes its
      // own exponential step, sometimes anything in between.
      const own = (n: number, random: () => number) => {
        const pick = random();
        if (pick < 0.4) return min;
        if (pick < 0.7) return Math.min(max, min * 2 ** Math.min(n - 1, 30));
        return min + Math.floor(random() * (max - min + 1));
      };
      return {
        limit,
        counts: queue.maxDeliveryAttempts !== undefined,
        next: (_delayMs, n, random) => own(n, random),
        redeliver: own,
        giveUpCalls: onceOrTwice,
        retentionMs: 7 * DAY_MS,
      };
    }
    case "cloudflare":
      return {
        limit,
        counts: true,
        next: (delayMs) => Math.min(seconds(delayMs), DAY_MS / 2),
        redeliver: () => 0, // the consumer's retry_delay, 0 by default
        giveUpCalls: onceOrTwice,
        retentionMs: Infinity,
      };
    case "kv":
      return {
        limit,
        counts: false,
        next: (delayMs) => delayMs,
        redeliver: () => SECOND,
        giveUpCalls: () => 0,
        retentionMs: Infinity,
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
  model: QueueModel = modelOf(scenario.queue),
): Promise<QueueRunReport> {
  const { policy, queue } = scenario;
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
  const relayer = createRelayer({
    store,
    sender,
    policy,
    now: () => clock,
    random,
    leaseMs: 10_000,
  });

  const stats: QueueRunReport["stats"] = {
    deliveries: 0,
    queueGaveUp: 0,
    giveUpCalls: 0,
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
    due: clock,
    count: 0,
    alive: true,
  }));
  const cap = 4 * policy.maxDeliveries + 40;
  let index = 0;
  const violations: string[] = [];

  while (jobs.some((j) => j.alive)) {
    const job = jobs.filter((j) => j.alive).reduce((a, b) =>
      b.due < a.due ? b : a
    );
    clock = Math.max(clock, job.due);
    if (clock - job.born > model.retentionMs) {
      job.alive = false; // retention over: gone, with no signal
      continue;
    }
    job.count++;
    if (job.count > cap) {
      violations.push(`${job.job.intentId} still delivered after ${cap}`);
      job.alive = false;
      continue;
    }
    const n = job.count;
    const i = index++;
    const copies = scenario.duplicates.includes(i) ? 2 : 1;
    stats.deliveries += copies;
    const outcomes = await Promise.all(
      Array.from(
        { length: copies },
        () => relayer.deliver(job.job, model.counts ? n : undefined),
      ),
    );
    if (outcomes.some((o) => o.action === "poison")) {
      notePoison(job.job.intentId);
    }
    // The message follows one copy's answer: when the other copy took the
    // lease, that is a busy retry, even at the policy's last delivery.
    const answer = outcomes[copies === 2 && queueRandom() < 0.5 ? 1 : 0]!;
    let final = answer.action !== "retry";
    let waitMs = answer.action === "retry"
      ? model.next(answer.delayMs, n, queueRandom)
      : 0;
    if (final && scenario.lostAcks.includes(i)) {
      final = false; // the ack never reached the queue
      waitMs = model.redeliver(n, queueRandom);
    }
    if (final) {
      job.alive = false;
      continue;
    }
    if (n >= model.limit) {
      // The queue gives up: its give-up route (failure callback, dead-letter
      // topic, dead-letter queue) reaches the relayer, maybe more than once.
      job.alive = false;
      stats.queueGaveUp++;
      const calls = model.giveUpCalls(queueRandom);
      for (let c = 0; c < calls; c++) {
        stats.giveUpCalls++;
        const outcome = await giveUp(relayer, job.job, n, queue.kind);
        if (outcome.action === "poison") notePoison(job.job.intentId);
      }
      continue;
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
    if (at !== undefined && stuck(scenario.payments[i]!)) {
      const before = sender.calls.slice(0, at).some((call) =>
        call.method === "send" && call.intentId === id && call.replace
      );
      if (!before) poisonedBeforeRescue.push(id);
    }
  }
  unresolved.push(...violations);
  return { stranded, unresolved, poisonedBeforeRescue, stats };
}

/** The env a service with this policy and queue would start with. */
export function envOf(
  policy: Policy,
  queue: QueueLimits,
): Record<string, string> {
  const env: Record<string, string> = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
    MAX_DELIVERIES: String(policy.maxDeliveries),
    BASE: `${policy.baseMs}ms`,
    CAP: `${policy.capMs}ms`,
    JITTER: policy.jitter,
    STUCK_AFTER: `${policy.stuckAfterMs}ms`,
    // The simulation runs every instance on one clock.
    CLOCK_SKEW: "0",
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
export function accepts(policy: Policy, queue: QueueLimits): boolean {
  try {
    loadConfig(envOf(policy, queue));
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
  });
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
