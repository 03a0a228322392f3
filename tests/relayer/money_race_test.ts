/**
 * Races under `fc.scheduler()` that try to lose or double money: deliveries
 * from instances whose clocks differ (by up to `clockSkewMs`), a queue's
 * give-ups (repeated, and of two messages), the payments API voiding the
 * hold, an operator resolving a review through the route, and a clock that
 * jumps past leases and `stuckAfter`, all at once. The chain keeps nonces:
 * a rescue reuses the intent's nonce, receipts change answer (pending,
 * dropped, then confirmed) until a tx is final, and a send that failed
 * without `notSent` may have left.
 *
 * The clock ticks, and an instance's clock steps (within the skew),
 * between any two calls; the store fails a call or two (before it acts,
 * or after, its answer lost), which `deliver` and `giveUp` throw and the
 * queue repeats; a delivery runs on its instance's one relayer (beside
 * that instance's give-ups) or on one of its own. A write ahead of a send
 * that lands with its answer lost leaves a send in flight on record that
 * nothing sends: once its lease is over, a delivery or a give-up settles
 * behind it on an earlier tx that confirmed. Captured so, no tx of another
 * nonce may still land.
 *
 * Every delivery carries its message's ids (`DeliverOptions.message`): the
 * job is published as several messages (QStash's, Pub/Sub's, one per
 * redrive, one published after the give-ups), each delivered any number
 * of times, given up on once or repeatedly, and copied late, after its
 * give-up answered and the clock jumped past the give-up's lease. No
 * delivery of a message whose give-up had answered when it started sends
 * (`L1`), and none of a message never given up is refused as a late copy
 * (`L2`). At the end the queue has its last word on every message (its
 * last deliveries, then its give-up, repeated until answered), a late
 * copy of every message given up changes nothing, and nothing is left
 * settling or authorized with no job and no letter; an intent left
 * authorized still sends for a job published afresh.
 *
 * On PostgresStore the races are real: calls run together on connections
 * of their own (READ COMMITTED, row locks), and in one variant every
 * write is held between its read and its flight while the scheduler runs
 * whole writes of others in that gap.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ConflictError,
  createRelayer,
  type Intent,
  type NewIntent,
  notSent,
  type Outcome,
  poison,
  type ReceiptStatus,
  type Relayer,
  type Sender,
  type Store,
  type Transition,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { catchesAsync, fixedRun, handled, runs } from "../_fc.ts";
import {
  type Backend,
  ignoringUnlessCounted,
  kvBackend,
  memoryBackend,
  postgresAvailable,
  postgresBackend,
} from "../_stores.ts";
import { gappedPostgresBackend } from "../_postgres.ts";

type SendKind = "sent" | "not_sent" | "unknown" | "sent_then_throw";
type Read = "pending" | "dropped" | "confirmed" | "reverted" | "error";
/** A queue whose messages the race delivers: QStash counts, Pub/Sub (here) does not. */
type Queue = "qstash" | "pubsub";
type MessageId = "m1" | "m2";
type Actor =
  /** A QStash delivery of message `message`, its `n`th. */
  | {
    kind: "deliver";
    clock: number;
    n: number;
    message: MessageId;
    /**
     * On its instance's one relayer (as main.ts delivers and gives up),
     * whose own sends in flight a give-up there waits for.
     */
    shared: boolean;
  }
  /**
   * A queue's give-up of message `message`, after `deliveries` (its own
   * count: past the policy's, or short of it; absent, `maxDeliveries`).
   */
  | {
    kind: "giveUp";
    clock: number;
    queue: Queue;
    message: MessageId;
    deliveries?: number;
  }
  /**
   * A late copy of the message the race's give-up number `of` gave up on:
   * delivered once that give-up answered and the clock jumped past its
   * lease (a plain delivery of m1 in a race with no give-up).
   */
  | { kind: "late"; clock: number; n: number; of: number }
  /** A job published afresh (a message of its own) once every give-up answered. */
  | { kind: "publish"; clock: number }
  | { kind: "void" }
  /**
   * A redrive (at once, or once the race's delivery or give-up number
   * `after`, if any, has answered); with `then`, its message delivered at
   * once, so numbered.
   */
  | { kind: "redrive"; after?: number; then?: number }
  /** A Pub/Sub push of message `message` without a delivery count: counted by its id. */
  | { kind: "counted"; clock: number; message: MessageId }
  | { kind: "operator"; to: "failed" | "settled" }
  | { kind: "tick"; ms: number }
  /** Instance `clock`'s clock stepped to `offset`, within the skew. */
  | { kind: "step"; clock: number; offset: number };

/**
 * The store failing its `at`th call of the race (counted from 0), or with
 * `ahead` its `at`th write ahead of a send (`beginBroadcast`, a move to
 * `settling`), before the call acts or (`landed`) after it, its answer
 * lost: a send in flight on record that no delivery of this race sends.
 * With `record`, its `at`th record of a send's answer (`recordBroadcast`):
 * before it acts, a send that may have left with its write-ahead still on
 * record.
 */
interface Fault {
  at: number;
  landed: boolean;
  ahead?: boolean;
  record?: boolean;
}

interface Race {
  start: Omit<NewIntent, "id">;
  sends: SendKind[];
  reads: Read[];
  actors: Actor[];
  offsets: number[];
  maxDeliveries: number;
  faults: Fault[];
}

const LEASE_MS = 10_000;
const SKEW_MS = 2_000;
const STUCK_MS = 4_000;
const T0 = 1_000_000;
/** Past a give-up's lease, on every instance's clock. */
const PAST_LEASE_MS = LEASE_MS + 2 * SKEW_MS + 1;
/** Orders of its calls each pinned race runs in. */
const ORDERS = 200;
/**
 * The mark a drop of a message of `pi_1/settle` writes with its letter
 * (`deliveryMarks` in relayer/relayer.ts): Pub/Sub's, known by its id
 * alone here, scoped by the job.
 */
const givingUpMark = (queue: Queue, messageId: string): string =>
  `givingup/${
    queue === "pubsub" ? "pubsub/pi_1/settle" : queue
  }/message/${messageId}`;

/** What a late copy answers (relayer/relayer.ts). */
const LATE_COPY =
  "the queue gave up on this message before: a late copy, nothing sent";

/**
 * A queue's delivery number: mostly 1 to `max`, sometimes one a queue
 * counted through an outage (drawn from 1 to `max` only, a number far past
 * the policy's `maxDeliveries` never came).
 */
const anyNumber = (max: number): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 1, max }) },
    fc.constantFrom(1_000, Number.MAX_SAFE_INTEGER),
  );

/** Settling, its last broadcast declared not sent, nothing sent before: clean. */
const CLEAN_NOT_SENT: Omit<NewIntent, "id"> = {
  state: "settling",
  hold: "pending",
  settlingSince: T0 - 60_000,
  lastBroadcast: { outcome: "not_sent", at: T0 - 60_000, error: "nonce gap" },
  mayHaveSent: false,
};

/**
 * Races drawn over every starting state, actor and fault alike.
 */
const anyPlainRace = (skewMs: number): fc.Arbitrary<Race> =>
  fc.record({
    start: fc.oneof(
      fc.constant<Omit<NewIntent, "id">>({
        state: "authorized",
        hold: "pending",
      }),
      // Imported authorized with a send on record (a tx that may land):
      // drawn only clean, no race began so, and the payments API's void of
      // such a hold went unseen.
      fc.constantFrom<Omit<NewIntent, "id">>(
        {
          state: "authorized",
          hold: "pending",
          lastBroadcast: { outcome: "sent", txHash: "0xold", at: T0 - 60_000 },
        },
        { state: "authorized", hold: "pending", mayHaveSent: true },
      ),
      fc.constantFrom<Omit<NewIntent, "id">>(
        {
          state: "settling",
          hold: "pending",
          settlingSince: T0 - 60_000,
          lastBroadcast: {
            outcome: "not_sent",
            at: T0 - 60_000,
            error: "nonce gap",
          },
          mayHaveSent: false,
        },
        {
          state: "settling",
          hold: "pending",
          settlingSince: T0 - 60_000,
          lastBroadcast: { outcome: "sent", txHash: "0xold", at: T0 - 60_000 },
        },
        {
          state: "settling",
          hold: "pending",
          settlingSince: T0 - 60_000,
          lastBroadcast: { outcome: "unknown", at: T0 - 60_000, error: "t/o" },
        },
        {
          state: "settling",
          hold: "pending",
          settlingSince: T0 - 60_000,
          broadcasting: T0 - 60_000,
        },
        // A rescue of a sent tx written ahead, its answer lost, its lease
        // long over: the give-up settles if that tx confirms.
        {
          state: "settling",
          hold: "pending",
          settlingSince: T0 - 60_000,
          lastBroadcast: { outcome: "sent", txHash: "0xold", at: T0 - 60_000 },
          broadcasting: T0 - 30_000,
        },
      ),
    ),
    sends: fc.array(
      fc.constantFrom<SendKind>(
        "sent",
        "not_sent",
        "unknown",
        "sent_then_throw",
      ),
      { minLength: 1, maxLength: 4 },
    ),
    reads: fc.array(
      fc.constantFrom<Read>(
        "pending",
        "dropped",
        "confirmed",
        "reverted",
        "error",
      ),
      { minLength: 1, maxLength: 8 },
    ),
    actors: fc.array(
      fc.oneof(
        {
          arbitrary: fc.record({
            kind: fc.constant("deliver" as const),
            clock: fc.integer({ min: 0, max: 2 }),
            n: anyNumber(3),
            message: fc.constantFrom("m1" as const, "m2" as const),
            shared: fc.boolean(),
          }),
          weight: 2,
        },
        {
          arbitrary: fc.record({
            kind: fc.constant("giveUp" as const),
            clock: fc.integer({ min: 0, max: 2 }),
            queue: fc.constantFrom("qstash" as const, "pubsub" as const),
            message: fc.constantFrom("m1" as const, "m2" as const),
          }).chain((giveUp) =>
            // Drawn at maxDeliveries only: a queue whose count ran past
            // the policy's (or whose limit stops short of it) never gave up.
            fc.oneof(
              { weight: 3, arbitrary: fc.constant(giveUp) },
              anyNumber(4).map((deliveries) => ({ ...giveUp, deliveries })),
            )
          ),
          weight: 2,
        },
        {
          arbitrary: fc.record({
            kind: fc.constant("late" as const),
            clock: fc.integer({ min: 0, max: 2 }),
            n: anyNumber(4),
            of: fc.nat({ max: 3 }),
          }),
          weight: 2,
        },
        fc.record({
          kind: fc.constant("publish" as const),
          clock: fc.integer({ min: 0, max: 2 }),
        }),
        fc.constant({ kind: "void" as const }),
        {
          // After a delivery or a give-up that may have left a letter:
          // drawn at the race's start, a redrive found a letter in none of
          // 3,000 races (1,142 redrives tried). Its message delivered while
          // the race runs, too: drawn without, a redrive's job was
          // delivered only once the race was over.
          arbitrary: fc.record({
            kind: fc.constant("redrive" as const),
            after: fc.nat({ max: 7 }),
          }).chain((redrive) =>
            fc.oneof(
              fc.constant(redrive),
              anyNumber(3).map((then) => ({ ...redrive, then })),
            )
          ),
          weight: 2,
        },
        fc.record({
          kind: fc.constant("counted" as const),
          clock: fc.integer({ min: 0, max: 2 }),
          message: fc.constantFrom("m1" as const, "m2" as const),
        }),
        fc.record({
          kind: fc.constant("operator" as const),
          to: fc.constantFrom("failed" as const, "settled" as const),
        }),
        fc.record({
          kind: fc.constant("tick" as const),
          ms: fc.constantFrom(
            1_000,
            LEASE_MS / 2 + 1,
            LEASE_MS + SKEW_MS + 1,
            STUCK_MS,
          ),
        }),
        fc.record({
          kind: fc.constant("step" as const),
          clock: fc.integer({ min: 0, max: 2 }),
          offset: fc.integer({ min: 0, max: skewMs }),
        }),
      ),
      { minLength: 2, maxLength: 8 },
    ),
    offsets: fc.array(fc.integer({ min: 0, max: skewMs }), {
      minLength: 3,
      maxLength: 3,
    }),
    maxDeliveries: fc.integer({ min: 1, max: 3 }),
    faults: fc.oneof(
      fc.constant<Fault[]>([]),
      fc.array(
        fc.record({ at: fc.nat({ max: 40 }), landed: fc.boolean() }),
        { minLength: 1, maxLength: 2 },
      ),
      fc.array(
        fc.record({
          at: fc.nat({ max: 2 }),
          landed: fc.boolean(),
          ahead: fc.constant(true),
        }),
        { minLength: 1, maxLength: 2 },
      ),
    ),
  });

/**
 * A race aimed at a write-ahead left on record over a clean chain: from
 * {@linkcode CLEAN_NOT_SENT}, a delivery sends (a tx that may leave) and
 * the store loses the record of its answer, then, past its lease, the
 * queue gives up on the message or delivers it for the last time, among
 * the race's other actors. Only the write-ahead says a tx may have left:
 * a give-up that missed it would fail the payment and void its hold (I1).
 * Drawn among the plain races alone, such a give-up (planted: a store and
 * a plan that ignore `broadcasting`) was caught in 2 of 10 seeds (1 to
 * 10) of 5,000 runs; with 1 race in 5 drawn so, in all 10, within 114.
 */
const lostRecordRace = (skewMs: number): fc.Arbitrary<Race> =>
  fc.record({
    race: anyPlainRace(skewMs),
    first: fc.constantFrom<SendKind>("sent", "sent_then_throw", "unknown"),
    clock: fc.integer({ min: 0, max: 2 }),
    shared: fc.boolean(),
    behind: fc.oneof(
      fc.record({
        kind: fc.constant("giveUp" as const),
        clock: fc.integer({ min: 0, max: 2 }),
        queue: fc.constant("qstash" as const),
        message: fc.constant("m1" as const),
      }),
      fc.record({
        kind: fc.constant("deliver" as const),
        clock: fc.integer({ min: 0, max: 2 }),
        n: fc.constant(2),
        message: fc.constant("m1" as const),
        shared: fc.boolean(),
      }),
    ),
  }).map(({ race, first, clock, shared, behind }): Race => {
    const aimed: Actor[] = [
      { kind: "deliver", clock, n: 1, message: "m1", shared },
      { kind: "tick", ms: PAST_LEASE_MS },
      behind,
    ];
    return {
      ...race,
      start: CLEAN_NOT_SENT,
      sends: [first, ...race.sends],
      actors: [...aimed, ...race.actors].slice(0, 8),
      maxDeliveries: 2,
      faults: [{ at: 0, landed: false, record: true }],
    };
  });

const anyRace = (skewMs: number): fc.Arbitrary<Race> =>
  fc.oneof(
    { weight: 4, arbitrary: anyPlainRace(skewMs) },
    { weight: 1, arbitrary: lostRecordRace(skewMs) },
  );

/** What the store throws for a race's {@linkcode Fault}. */
class StoreBlip extends Error {
  constructor(readonly call: string) {
    super(`store blip in ${call}`);
  }
}

/** Whether a store call is a write ahead of a send: `beginBroadcast`, or a move to `settling`. */
function writesAhead(key: PropertyKey, args: readonly unknown[]): boolean {
  return key === "beginBroadcast" ||
    (key === "transition" &&
      (args[1] as { to?: string } | undefined)?.to === "settling");
}

/**
 * `store`, failing the calls `faults` names while `racing()` (the queue's
 * last word runs on a store that answers).
 */
function failing(
  store: Store,
  faults: readonly Fault[],
  racing: () => boolean,
): Store {
  let calls = 0;
  let aheads = 0;
  let records = 0;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const ahead = writesAhead(key, args);
        const record = key === "recordBroadcast";
        const fault = racing()
          ? faults.find((f) =>
            f.ahead
              ? ahead && f.at === aheads
              : f.record
              ? record && f.at === records
              : f.at === calls
          )
          : undefined;
        calls++;
        if (ahead) aheads++;
        if (record) records++;
        if (fault !== undefined && !fault.landed) {
          throw new StoreBlip(String(key));
        }
        const answer = await value.apply(target, args);
        if (fault !== undefined) throw new StoreBlip(String(key));
        return answer;
      };
    },
  });
}

/**
 * `store`, each call started when the scheduler says and answered when
 * the store answers: on a real server, calls started together run
 * together, on connections of their own, and land in the server's order.
 */
function started(s: fc.Scheduler, store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      const call = value.bind(target);
      return async (...args: unknown[]) => {
        await s.schedule(Promise.resolve(), `start ${String(key)}`);
        return await call(...args);
      };
    },
  });
}

/**
 * `store`, each call started at once and answered when the scheduler
 * says: on MemoryStore, a call acts in the order it is made.
 */
function scheduled(s: fc.Scheduler, store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      return typeof value === "function"
        ? s.scheduleFunction(handled(value.bind(target)))
        : value;
    },
  });
}

/** A tx on the simulated chain. */
interface Tx {
  nonce: number;
  /** Final: "confirmed" or "reverted"; undefined while it may go either way. */
  fate?: "confirmed" | "reverted";
  /** Recorded by a hash the relayer saw. */
  known: boolean;
}

/** What the races reached, counted over a run (during the race, not the queue's last word). */
interface Reach {
  /** Deliveries begun after their message's give-up answered. */
  late: number;
  /** Late copies answered "a late copy, nothing sent". */
  refused: number;
  /** Late copies refused a rescue of another message's send (the intent settling). */
  lostRace: number;
  /** Redrives whose message was delivered while the race ran. */
  redriveDelivered: number;
  /** Sends by a job published after the give-ups. */
  afresh: number;
  /** Deliveries the store failed on a call other than a read (so after their look), thrown out of `deliver`. */
  blipAfterLook: number;
  /** Give-ups the store failed, thrown out of `giveUp`. */
  blipGiveUp: number;
  /** Give-ups that ran while their relayer's own send of the intent was in flight. */
  ownSendInFlight: number;
  /** Busy answers that wait out another send's lease (longer than the policy's delay). */
  inFlightBusy: number;
  /** Ticks of the clock while a send was in flight. */
  tickedMidSend: number;
  /** Instances' clocks stepped while a send was in flight. */
  steppedMidSend: number;
  /**
   * Settles behind a send in flight on record (a write-ahead whose lease
   * lapsed) on a tx on record that confirmed (`Transition.confirmed`),
   * the queue's last word included.
   */
  confirmedBehindSend: number;
  /**
   * Of those, the ones a delivery made (not a give-up): it settles at once,
   * where it sent a rescue into the spent nonce.
   */
  confirmedBehindSendOnDelivery: number;
}

/**
 * `store`, counting in `reach` each move to `settled` that names a
 * confirmed tx and lands on an intent with a send in flight: the record it
 * moved is the one read just before, as the versions match. The version
 * each such move wrote is added to `behind`.
 */
function countingConfirmed(
  store: Store,
  reach: Reach,
  behind: Set<string>,
): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== "transition") return value.bind(target);
      return async (id: string, change: Transition, ...rest: unknown[]) => {
        const before = change.confirmed === undefined
          ? null
          : await target.getIntent(id);
        const after = await value.call(target, id, change, ...rest);
        if (
          before !== null && before.version === change.version &&
          before.broadcasting !== null
        ) {
          reach.confirmedBehindSend++;
          behind.add(after.version);
        }
        return after;
      };
    },
  });
}

/**
 * The races `races` on `backend` (or the one made for each race's
 * scheduler), their store seen through `wrap` if given; only the
 * violations matching `which` count, if given. What it reached is added
 * to `reach`, if given.
 */
function moneyRace(
  backend: Backend | ((s: fc.Scheduler) => Backend),
  races: fc.Arbitrary<Race>,
  wrap?: (store: Store) => Store,
  which?: RegExp,
  reach?: Reach,
  { stillWriteAheads = false, freshRescues = false }: {
    readonly stillWriteAheads?: boolean;
    /** A Sender that signs a rescue with a fresh nonce, against its contract. */
    readonly freshRescues?: boolean;
  } = {},
) {
  return fc.asyncProperty(races, fc.scheduler(), async (race, s) => {
    const { store: truth, close } =
      await (typeof backend === "function" ? backend(s) : backend).open();
    try {
      await truth.createIntent({ id: "pi_1", ...race.start });
      const violations: string[] = [];
      const clock = { t: T0 };
      const txs = new Map<string, Tx>();
      // The starting intent's history on the chain.
      let nonce = 0;
      let nonceKept: number | undefined;
      if (race.start.lastBroadcast?.outcome === "sent") {
        nonceKept = ++nonce;
        txs.set("0xold", { nonce: nonceKept, known: true });
        // A rescue of it in flight: the same nonce.
        if (race.start.broadcasting != null) {
          txs.set("hidden-1", { nonce: nonceKept, known: false });
        }
      } else if (
        race.start.lastBroadcast?.outcome === "unknown" ||
        race.start.broadcasting != null || race.start.mayHaveSent === true
      ) {
        nonceKept = ++nonce;
        txs.set("hidden-0", { nonce: nonceKept, known: false });
      }
      let inFlight = 0;
      let sendStart: number | undefined;
      let operatorFailed = false;
      let sends = 0;
      let reads = 0;
      let txCount = 0;

      // The chain decides when the send is called; its answer comes when
      // the scheduler says: the send is in flight until then.
      const broadcast = s.scheduleFunction(
        handled(function broadcast(intent: Intent, replace: boolean) {
          const kind = race.sends[Math.min(sends++, race.sends.length - 1)]!;
          if (kind === "not_sent") {
            return Promise.reject(notSent(new Error("signer refused")));
          }
          const n = replace && nonceKept !== undefined && !freshRescues
            ? nonceKept
            : (nonceKept = ++nonce);
          const hash = `0x${++txCount}`;
          txs.set(hash, { nonce: n, known: kind === "sent" });
          if (kind === "sent") return Promise.resolve({ txHash: hash });
          return Promise.reject(
            new Error(
              kind === "unknown" ? "timeout" : `sent ${intent.id}, then lost`,
            ),
          );
        }),
      );
      const sender: Sender = {
        async send(intent: Intent, { replace }) {
          inFlight++;
          sendStart ??= clock.t;
          try {
            if (inFlight > 1) violations.push("I5: two sends at once");
            const now = await truth.getIntent(intent.id);
            if (now?.hold !== "pending" || now.state !== "settling") {
              violations.push(
                `I6: send while ${now?.state} with hold ${now?.hold}`,
              );
            }
            return await broadcast(intent, replace);
          } finally {
            inFlight--;
            if (inFlight === 0) sendStart = undefined;
          }
        },
        receipt: s.scheduleFunction(
          handled(function receipt(hash: string): Promise<ReceiptStatus> {
            const tx = txs.get(hash);
            if (tx === undefined) return Promise.resolve("dropped");
            const read = race.reads[reads++ % race.reads.length]!;
            if (tx.fate === undefined) {
              const taken = [...txs.values()].some((o) =>
                o !== tx && o.nonce === tx.nonce && o.fate === "confirmed"
              );
              if (read === "confirmed" && !taken) tx.fate = "confirmed";
              else if (read === "reverted") tx.fate = "reverted";
            }
            if (tx.fate === "confirmed") return Promise.resolve("confirmed");
            if (tx.fate === "reverted") {
              return Promise.reject(poison(new Error(`${hash} reverted`)));
            }
            if (read === "error") {
              return Promise.reject(new Error("node unreachable"));
            }
            return Promise.resolve(read === "dropped" ? "dropped" : "pending");
          }),
        ),
      };

      /** The versions written by a move that settled behind a send in flight. */
      const settledBehind = new Set<string>();
      const counted = reach
        ? countingConfirmed(truth, reach, settledBehind)
        : truth;
      const ordered = (typeof backend === "function" ? started : scheduled)(
        s,
        failing(
          wrap ? wrap(counted) : counted,
          race.faults,
          () => racing,
        ),
      );
      /** Writes ahead of a send made and not yet answered. */
      let aheadInFlight = 0;
      const store: Store = new Proxy(ordered, {
        get(target, key) {
          const value = Reflect.get(target, key, target);
          if (typeof value !== "function") return value;
          return async (...args: unknown[]) => {
            const ahead = writesAhead(key, args);
            if (ahead) aheadInFlight++;
            try {
              return await value.apply(target, args);
            } finally {
              if (ahead) aheadInFlight--;
            }
          };
        },
      });
      // Each instance's clock, as the race steps them.
      const offsets = [...race.offsets];
      const policy = {
        maxDeliveries: race.maxDeliveries,
        stuckAfterMs: STUCK_MS,
        jitter: "none",
      } as const;
      const relayerOn = (clockIndex: number, using: Sender): Relayer =>
        createRelayer({
          store,
          sender: using,
          policy,
          now: () => clock.t + offsets[clockIndex]!,
          random: () => 0.5,
          leaseMs: LEASE_MS,
          clockSkewMs: SKEW_MS,
        });
      /**
       * Each instance's deliveries running on its one relayer (whether a
       * late copy), and its sends in flight: a send there while only late
       * copies run is theirs (L1).
       */
      const instances = race.offsets.map(() => ({
        running: new Set<{ key: string; late: boolean }>(),
        sending: 0,
        sent: 0,
      }));
      const relayers = instances.map((instance, i) =>
        relayerOn(i, {
          async send(intent, options) {
            const running = [...instance.running];
            if (running.length > 0 && running.every((r) => r.late)) {
              violations.push(
                `L1: a copy of ${
                  running[0]!.key
                }, delivered after its give-up answered, sent`,
              );
            }
            instance.sending++;
            instance.sent++;
            try {
              return await sender.send(intent, options);
            } finally {
              instance.sending--;
            }
          },
          receipt: sender.receipt,
        })
      );
      const OPS = "ops-token-for-money-race";
      const app = createApp({
        store,
        sender,
        opsToken: OPS,
        now: () => clock.t,
        // Every instance's lease, which every send ends within; and the
        // race's own time, which the instances' steps (offsets) leave
        // alone, as the monotonic clock the send-in-flight wait counts
        // on: an operator's fail of a payment that may have sent lands
        // once the race's ticks passed a lease from the first one refused.
        leaseMs: LEASE_MS,
        monotonicNow: () => clock.t,
      });
      const job = { intentId: "pi_1", kind: "settle" } as const;
      // The clock moves when the scheduler says, not when it is asked to
      // (a scheduled function runs at once and only its answer waits):
      // a tick or a step lands between any two calls of the race.
      const tick = async (ms: number) => {
        await s.schedule(Promise.resolve(), `tick(${ms})`);
        if (stillWriteAheads && aheadInFlight > 0) return;
        if (racing && reach && sendStart !== undefined) reach.tickedMidSend++;
        // A Sender times out within half the lease: the clock never runs
        // that far while a send is in flight (LEASE >= 2 x SENDER_TIMEOUT).
        clock.t = sendStart === undefined
          ? clock.t + ms
          : Math.min(clock.t + ms, sendStart + LEASE_MS / 2 - 1);
      };
      const step = async (i: number, to: number) => {
        await s.schedule(Promise.resolve(), `step(${i}, ${to})`);
        if (racing && reach && sendStart !== undefined) reach.steppedMidSend++;
        offsets[i] = to;
      };

      /** The queue's messages of the job, by `<queue>/<id>`. */
      const messages = new Map<string, {
        /** Delivered, or published (a redrive's, one published afresh). */
        published: boolean;
        /** A give-up of it was asked for. */
        given: boolean;
        /** A give-up of it answered (not busy): the queue is done with it. */
        resolved: boolean;
        /** Acked: answered done or poison, or given up on. */
        finished: boolean;
      }>();
      const message = (key: string) => {
        let m = messages.get(key);
        if (m === undefined) {
          m = {
            published: false,
            given: false,
            resolved: false,
            finished: false,
          };
          messages.set(key, m);
        }
        return m;
      };
      const log: string[] = [];
      let racing = true;
      /** Messages a copy of which was refused as a late copy. */
      const refusedLate = new Set<string>();
      /**
       * One delivery of message `key` (its `n`th, or counted by the store
       * under its key), by an instance of its own whose Sender knows
       * whether the message's give-up had answered when it began.
       */
      const deliver = async (
        key: string,
        clockIndex: number,
        n: number | undefined,
        shared = false,
      ): Promise<Outcome> => {
        const [queue, messageId] = key.split("/") as [Queue, string];
        const m = message(key);
        m.published = true;
        const late = m.resolved;
        if (late && racing && reach) reach.late++;
        const running = { key, late };
        const relayer = shared ? relayers[clockIndex]! : relayerOn(clockIndex, {
          send(intent, options) {
            if (racing && reach && key.startsWith("qstash/fresh")) {
              reach.afresh++;
            }
            if (late) {
              violations.push(
                `L1: a copy of ${key}, delivered after its give-up answered, sent`,
              );
            }
            return sender.send(intent, options);
          },
          receipt: sender.receipt,
        });
        if (shared) instances[clockIndex]!.running.add(running);
        let outcome: Outcome;
        try {
          outcome = await relayer.deliver(job, n, {
            message: { queue, messageId },
            ...(n === undefined ? { countAs: key } : {}),
          });
        } catch (error) {
          // The store failing: nothing decided, the queue delivers again.
          if (!(error instanceof StoreBlip)) throw error;
          log.push(`deliver ${key}${late ? " (late)" : ""}: threw ${error}`);
          if (reach && error.call !== "getIntent") reach.blipAfterLook++;
          // Its answer lost after its drop's letter (a mark that landed
          // and failed): the message may be marked, its copies refused.
          // The letter may be gone already (a redrive took it), but not
          // the message's mark, which lands only with it.
          if (
            (await truth.getDeadLetter("pi_1/settle"))?.resolution ===
              "job dropped, intent still authorized" ||
            await truth.deliveries(givingUpMark(queue, messageId)) > 0
          ) m.given = true;
          return {
            action: "retry",
            delivery: n ?? 0,
            delayMs: 0,
            reason: error.message,
          };
        } finally {
          instances[clockIndex]!.running.delete(running);
        }
        log.push(
          `deliver ${key}${late ? " (late)" : ""}: ${JSON.stringify(outcome)}`,
        );
        if (
          outcome.action === "poison" &&
          outcome.resolution === "job dropped, intent still authorized"
        ) {
          // Acked with nothing on the chain: the relayer marks the message
          // as a give-up does, so its later copies are late copies.
          m.given = true;
          m.resolved = true;
        }
        if (
          reach && outcome.action === "done" &&
          outcome.reason.endsWith(" confirmed, intent settled") &&
          settledBehind.has((await truth.getIntent("pi_1"))?.version ?? "")
        ) {
          // This delivery's move: a settled intent is written no more.
          reach.confirmedBehindSendOnDelivery++;
        }
        if (
          racing && reach && outcome.action === "retry" &&
          outcome.delayMs > LEASE_MS
        ) {
          reach.inFlightBusy++;
        }
        if (outcome.reason === LATE_COPY && racing && reach) {
          reach.refused++;
          // Refused a rescue: another message's job moved the intent on.
          if ((await truth.getIntent("pi_1"))?.state !== "authorized") {
            reach.lostRace++;
          }
        }
        // Checked once the race is over: a delivery that drops the job
        // marks its message before it returns, and a copy may be refused
        // in between.
        if (outcome.reason === LATE_COPY) refusedLate.add(key);
        if (outcome.action !== "retry") m.finished = true;
        return outcome;
      };
      const giveUp = async (
        key: string,
        clockIndex: number,
        deliveries?: number,
      ): Promise<Outcome> => {
        const [queue, messageId] = key.split("/") as [Queue, string];
        const m = message(key);
        m.given = true;
        const instance = instances[clockIndex]!;
        const sendsBefore = instance.sent;
        const overlapped = instance.sending > 0;
        let outcome: Outcome;
        try {
          outcome = await relayers[clockIndex]!.giveUp(job, {
            deliveries: deliveries ?? race.maxDeliveries,
            queue: { queue, messageId },
          });
        } catch (error) {
          // The store failing: the queue gives up again.
          if (!(error instanceof StoreBlip)) throw error;
          log.push(`giveUp ${key}: threw ${error}`);
          if (reach) reach.blipGiveUp++;
          return {
            action: "retry",
            delivery: race.maxDeliveries,
            delayMs: 0,
            reason: error.message,
          };
        }
        log.push(`giveUp ${key}: ${JSON.stringify(outcome)}`);
        if (
          racing && reach && (overlapped || instance.sent > sendsBefore)
        ) {
          reach.ownSendInFlight++;
        }
        if (outcome.action !== "retry") {
          m.resolved = true;
          m.finished = true;
        }
        return outcome;
      };
      const qstashCount = (n: number, key: string) =>
        key.startsWith("qstash/") ? n : undefined;

      const ended = race.actors.map(() => Promise.withResolvers<void>());
      const giveUps = race.actors.flatMap((a, i) =>
        a.kind === "giveUp" ? [i] : []
      );
      /** The redrives' messages, by deduplication id. */
      const redrives = new Map<string, number>();
      const act = async (actor: Actor, i: number) => {
        switch (actor.kind) {
          case "deliver":
            await deliver(
              `qstash/${actor.message}`,
              actor.clock,
              actor.n,
              actor.shared,
            );
            return;
          case "giveUp":
            await giveUp(
              `${actor.queue}/${actor.message}`,
              actor.clock,
              actor.deliveries,
            );
            return;
          case "late": {
            if (giveUps.length === 0) {
              await deliver("qstash/m1", actor.clock, actor.n);
              return;
            }
            const of = giveUps[actor.of % giveUps.length]!;
            const given = race.actors[of] as Extract<Actor, { kind: "giveUp" }>;
            await ended[of]!.promise;
            await tick(PAST_LEASE_MS);
            const key = `${given.queue}/${given.message}`;
            await deliver(key, actor.clock, qstashCount(actor.n, key));
            return;
          }
          case "publish":
            await Promise.all(giveUps.map((g) => ended[g]!.promise));
            await tick(PAST_LEASE_MS);
            await deliver(`qstash/fresh${i}`, actor.clock, 1);
            return;
          case "void":
            await store.voidHold("pi_1").catch(() => {});
            return;
          case "redrive": {
            const ends = race.actors.flatMap((a, j) =>
              ["deliver", "giveUp", "counted"].includes(a.kind) ? [j] : []
            );
            if (actor.after !== undefined && ends.length > 0) {
              await ended[ends[actor.after % ends.length]!]!.promise;
            }
            // A redrive publishes the job again, a message of its own,
            // before it removes the letter (as the route's redriveTo does):
            // published, the job is on the queue whether or not the
            // removal's answer comes back. The queue drops a duplicate of
            // one deduplication id (two redrives of one letter).
            let key: string | undefined;
            await relayers[0]!.redrive("pi_1/settle", {
              publish: (_job, deduplicationId) => {
                key = `qstash/redrive${
                  redrives.get(deduplicationId) ??
                    redrives.set(deduplicationId, redrives.size + 1).size
                }`;
                message(key).published = true;
                return Promise.resolve();
              },
            }).catch(() => null);
            if (key !== undefined && actor.then !== undefined) {
              if (reach && racing) reach.redriveDelivered++;
              await deliver(key, 0, actor.then);
            }
            return;
          }
          case "counted":
            // A Pub/Sub push without a delivery count: counted by message id.
            await deliver(`pubsub/${actor.message}`, actor.clock, undefined);
            return;
          case "operator": {
            const read = await store.getIntent("pi_1").catch(() => null);
            if (read?.state !== "needs_review") return;
            const answer = await app.request("/v1/intents/pi_1/resolve", {
              method: "POST",
              headers: { authorization: `Bearer ${OPS}` },
              // An operator who says they looked the nonce up: what they
              // then do is theirs, and the race checks what it leaves.
              body: JSON.stringify({
                to: actor.to,
                version: read.version,
                nonceChecked: true,
              }),
            });
            if (answer.status === 200 && actor.to === "failed") {
              operatorFailed = true;
            }
            return;
          }
          case "tick":
            await tick(actor.ms);
            return;
          case "step":
            await step(actor.clock, actor.offset);
            return;
        }
      };
      const runs = race.actors.map(async (actor, i) => {
        try {
          await act(actor, i);
        } finally {
          ended[i]!.resolve();
        }
      });
      await s.waitFor(Promise.allSettled(runs));
      racing = false;
      for (const r of await Promise.allSettled(runs)) {
        if (r.status === "rejected") {
          violations.push(`an actor threw: ${String(r.reason)}`);
        }
      }

      for (const key of refusedLate) {
        if (!message(key).given) {
          violations.push(
            `L2: ${key}, never given up on, refused as a late copy`,
          );
        }
      }
      // The queue's last word on every message it still holds: its last
      // deliveries, then its give-up, repeated, alone, until answered.
      for (const [key, m] of messages) {
        if (m.finished || !(m.published || m.given)) continue;
        for (let i = 0; i < 3 && !m.finished && !m.given; i++) {
          clock.t += LEASE_MS + 2 * SKEW_MS + STUCK_MS;
          await s.waitFor(deliver(key, 0, undefined));
        }
        for (let i = 0; i < 5 && !m.finished; i++) {
          clock.t += PAST_LEASE_MS;
          await s.waitFor(giveUp(key, 0));
        }
        if (!m.finished) violations.push(`the queue never finished ${key}`);
      }
      // A late copy of every message given up on changes nothing (and,
      // L1, sends nothing), wherever the intent is now.
      for (const [key, m] of messages) {
        if (!m.resolved) continue;
        clock.t += PAST_LEASE_MS;
        const before = (await truth.getIntent("pi_1"))!;
        await s.waitFor(deliver(key, 0, qstashCount(race.maxDeliveries, key)));
        const after = (await truth.getIntent("pi_1"))!;
        if (before.state !== after.state || before.hold !== after.hold) {
          violations.push(
            `a late copy of ${key} moved ${before.state}/${before.hold} to ${after.state}/${after.hold}`,
          );
        }
      }
      const end = (await truth.getIntent("pi_1"))!;
      const maySent = [...txs.values()].length > 0;
      const confirmed = [...txs.entries()].filter(([, tx]) =>
        tx.fate === "confirmed"
      );
      const nonces = new Set(confirmed.map(([, tx]) => tx.nonce));
      if (nonces.size > 1) violations.push("paid twice: two nonces confirmed");
      // Captured on a tx that confirmed, no tx of another nonce may still
      // land: that send, cleared from the record, would pay again.
      const spent = new Set(
        [...txs.values()].flatMap((tx) => tx.fate ? [tx.nonce] : []),
      );
      const open = [...txs.entries()].find(([, tx]) => !spent.has(tx.nonce));
      if (end.hold === "captured" && nonces.size > 0 && open !== undefined) {
        violations.push(
          `paid twice: captured on a confirmed tx while ${
            open[0]
          } (another nonce) may still land`,
        );
      }
      if (end.state === "failed") {
        if (maySent && !operatorFailed) {
          violations.push("I1: failed though a tx may have left");
        }
        if (end.hold !== "voided") violations.push("I2: failed, hold not void");
      }
      if (end.hold === "voided" && maySent && end.state !== "failed") {
        violations.push(
          `hold voided while ${end.state} and a tx may have left`,
        );
      }
      if (end.state === "settled") {
        if (end.hold !== "captured") violations.push("settled, not captured");
        if (confirmed.length === 0) {
          // An operator may settle on what the chain shows outside the store.
          const byOperator = race.actors.some((a) =>
            a.kind === "operator" && a.to === "settled"
          );
          if (!byOperator) violations.push("settled with no tx confirmed");
        }
      }
      if (confirmed.length > 0 && end.state === "failed") {
        violations.push("a tx confirmed but the intent failed");
      }
      // Every message finished: the queue holds no job for the intent.
      if (
        messages.size > 0 &&
        !["settled", "failed", "needs_review"].includes(end.state)
      ) {
        if (end.state === "settling") {
          violations.push("stranded: settling, and the queue holds no job");
        } else if ((await truth.getDeadLetter("pi_1/settle")) === null) {
          violations.push(`stranded: ${end.state} with no job and no letter`);
        }
      }
      // A job published after every give-up still sends; at most 1
      // delivery, its first is its last, which sends nothing for an
      // authorized intent (no delivery would be left to read the receipt)
      // and drops the job again, its letter the record.
      if (end.state === "authorized" && end.hold === "pending") {
        // Past any lease on clock 0, the afresh delivery's: one taken on a
        // clock further ahead (the races with clocks apart by more than
        // clockSkewMs) lapses that much later there.
        clock.t += PAST_LEASE_MS + Math.max(...offsets) - offsets[0]!;
        const before = sends;
        const outcome = await s.waitFor(deliver("qstash/afresh", 0, 1));
        if (race.maxDeliveries > 1 && sends === before) {
          violations.push(
            `a job published after the give-ups sent nothing: ${outcome.reason}`,
          );
        }
        if (
          race.maxDeliveries === 1 &&
          (sends !== before || outcome.action !== "poison" ||
            outcome.resolution !== "job dropped, intent still authorized")
        ) {
          violations.push(
            `a job published after the give-ups, at its last delivery, sent or was not dropped: ${outcome.reason}`,
          );
        }
      }
      const shown = which === undefined
        ? violations
        : violations.filter((v) => which.test(v));
      assert.deepEqual(
        shown,
        [],
        `${JSON.stringify(end)}\n${log.join("\n")}\n${String(s)}`,
      );
    } finally {
      await close();
    }
  });
}

Deno.test("MemoryStore: no race of deliveries, give-ups, voids, an operator and a jumping clock loses or doubles money (clocks within clockSkewMs)", async () => {
  await fc.assert(moneyRace(memoryBackend, anyRace(SKEW_MS)), {
    numRuns: runs(5000),
  });
});

Deno.test("KvStore: no race of deliveries, give-ups, voids, an operator and a jumping clock loses or doubles money (clocks within clockSkewMs)", async () => {
  await fc.assert(moneyRace(kvBackend, anyRace(SKEW_MS)), {
    numRuns: runs(1000),
  });
});

Deno.test({
  name:
    "PostgresStore: no race of deliveries, give-ups, voids, an operator and a jumping clock loses or doubles money (clocks within clockSkewMs)",
  ignore: !postgresAvailable,
  async fn() {
    await fc.assert(moneyRace(postgresBackend, anyRace(SKEW_MS)), {
      numRuns: runs(200),
    });
  },
});

Deno.test({
  name:
    "PostgresStore, every write held between its read and its flight: no race loses or doubles money (calls started in the scheduler's order, landing in the server's)",
  ignore: !postgresAvailable,
  async fn() {
    // Whole writes of other actors (a give-up's mark, a rescue's write
    // ahead, a void) land between a write's read and its flight, where
    // only the flight's compare-and-set and its check of the marks stand.
    // A void whose flight lost to the give-up's move to review re-reads
    // the intent there, and is refused.
    await fc.assert(
      moneyRace(
        (s) =>
          gappedPostgresBackend(() => s.schedule(Promise.resolve(), "gap")),
        anyRace(SKEW_MS),
      ),
      { numRuns: runs(200) },
    );
  },
});

Deno.test("MemoryStore: clocks apart by half a lease more than clockSkewMs still keep one send at a time (a Sender within half the lease, a write-ahead that takes no time)", async () => {
  // The margin is what the write-ahead leaves of the lease: one that
  // takes up to half of it (which still sends) leaves none, and a clock
  // ahead by more than clockSkewMs then takes the lease mid-send.
  await fc.assert(
    moneyRace(
      memoryBackend,
      anyRace(SKEW_MS + LEASE_MS / 2 - 1),
      undefined,
      undefined,
      undefined,
      { stillWriteAheads: true },
    ),
    { numRuns: runs(5000) },
  );
});

Deno.test("the money race catches clocks apart by more than clockSkewMs behind a write-ahead that took time", async () => {
  // Proof the margin above is the write-ahead's (found by the race once
  // its clock moved between any two calls): m1's delivery on clock 1
  // writes ahead, the clock moves 4 s before its answer, and its send
  // (under half the lease, so it sends) lasts half a lease; the late copy
  // of m2 on clock 0, 3,071 ms ahead, finds the lease lapsed, and sends.
  const race: Race = {
    start: { state: "authorized", hold: "pending" },
    sends: ["sent"],
    reads: ["pending"],
    actors: [
      { kind: "deliver", clock: 1, n: 1, message: "m1", shared: false },
      { kind: "tick", ms: 4_000 },
      { kind: "giveUp", clock: 0, queue: "qstash", message: "m2" },
      { kind: "late", clock: 0, n: 1, of: 0 },
    ],
    offsets: [3_071, 0, 0],
    // Two: a first delivery that is the last sends nothing.
    maxDeliveries: 2,
    faults: [],
  };
  const run = (stillWriteAheads: boolean) =>
    fc.check(
      moneyRace(
        memoryBackend,
        fc.constant(race),
        undefined,
        /^I5:/,
        undefined,
        { stillWriteAheads },
      ),
      fixedRun(1, ORDERS),
    );
  assert.equal((await run(false)).failed, true);
  assert.equal((await run(true)).failed, false);
});

Deno.test("the money races reach late copies, refused on the first send and on a rescue, jobs published afresh that send, and give-ups and deliveries that settle behind a lapsed write-ahead on a tx that confirmed", async () => {
  const reach: Reach = {
    late: 0,
    refused: 0,
    lostRace: 0,
    redriveDelivered: 0,
    afresh: 0,
    blipAfterLook: 0,
    blipGiveUp: 0,
    ownSendInFlight: 0,
    inFlightBusy: 0,
    tickedMidSend: 0,
    steppedMidSend: 0,
    confirmedBehindSend: 0,
    confirmedBehindSendOnDelivery: 0,
  };
  await fc.assert(
    moneyRace(memoryBackend, anyRace(SKEW_MS), undefined, undefined, reach),
    fixedRun(42, 3000),
  );
  for (const [name, count] of Object.entries(reach)) {
    assert.ok(count > 0, `${name} never reached`);
  }
});

Deno.test("the money race catches a capture behind a send of another nonce (a Sender that rescues with a fresh one)", async () => {
  // Proof the check can fail: a capture on a tx that confirmed is sound
  // only while every other send of the payment reuses that tx's nonce (a
  // give-up behind a lapsed write-ahead clears that send from the record).
  assert.equal(
    await catchesAsync(
      moneyRace(
        memoryBackend,
        anyRace(SKEW_MS),
        undefined,
        /another nonce/,
        undefined,
        { freshRescues: true },
      ),
      1000,
    ),
    true,
  );
});

Deno.test("the money race catches clocks apart by more than a lease", async () => {
  // Proof the property can fail: clocks twice LEASE + CLOCK_SKEW apart, a
  // contender takes a lease its holder still uses.
  assert.equal(
    await catchesAsync(
      moneyRace(memoryBackend, anyRace(2 * (LEASE_MS + SKEW_MS))),
      1000,
    ),
    true,
  );
});

/**
 * A race the property found, pinned as written rather than as a seed and
 * path (which name another race once the generator changes), run in
 * `orders` orders of its calls.
 */
function replay(race: Race, orders: number) {
  return fc.assert(
    moneyRace(memoryBackend, fc.constant(race)),
    fixedRun(1, orders),
  );
}

Deno.test("the money race's first late copy that sent: a copy that lost the race for the first send to a job published since rescued beside it (L1)", async () => {
  // The failure the extended races found before the fix (see
  // tests/relayer/late_copy_rescue_test.ts): the give-up of pubsub/m1, a
  // job published afresh and a late copy of m1 racing for the first send.
  await replay({
    start: { state: "authorized", hold: "pending" },
    sends: ["sent"],
    reads: ["dropped", "pending"],
    actors: [
      { kind: "publish", clock: 0 },
      { kind: "giveUp", clock: 0, queue: "pubsub", message: "m1" },
      { kind: "redrive" },
      { kind: "late", clock: 0, n: 1, of: 0 },
    ],
    offsets: [0, 0, 0],
    maxDeliveries: 2,
    faults: [],
  }, ORDERS);
});

Deno.test("the money race's give-up held up between its letter and its mark: a delivery of its message wrote ahead once the drop's lease lapsed, and sent under the letter (stranded)", async () => {
  // Found by the race once late copies were refused: the give-up of
  // qstash/m2 dropped the job (its letter and lease), the clock passed the
  // lease before it marked the message, and a delivery of m2 that had read
  // the intent before the drop wrote ahead and sent; the late copy after
  // was refused, and nothing was left to finish the settling intent. The
  // give-up now marks the message before it drops the job.
  await replay({
    start: { state: "authorized", hold: "pending" },
    sends: ["sent"],
    reads: ["pending"],
    actors: [
      { kind: "giveUp", clock: 0, queue: "qstash", message: "m2" },
      { kind: "operator", to: "failed" },
      { kind: "giveUp", clock: 0, queue: "qstash", message: "m2" },
      { kind: "giveUp", clock: 0, queue: "qstash", message: "m2" },
      { kind: "late", clock: 0, n: 1, of: 0 },
      { kind: "operator", to: "failed" },
    ],
    offsets: [0, 0, 0],
    maxDeliveries: 2,
    faults: [],
  }, ORDERS);
});

Deno.test("the money race's drop at the last delivery held up between its letter and its marks: a lower copy of its message wrote ahead once the drop's lease lapsed, and sent under the letter (stranded)", async () => {
  // Found by the race with clocks apart: m1's delivery 2 found the intent
  // authorized and dropped the job (its letter and lease), the clock
  // passed the lease before it marked the message, and m1's delivery 1,
  // which had read the intent before the drop, wrote ahead and sent; the
  // marks landed after, the late copy of m1 answered done, and nothing was
  // left to finish the settling intent. The drop now marks the message as
  // given up on in its letter's own commit, which m1's write ahead meets.
  await replay({
    start: {
      state: "authorized",
      hold: "pending",
      lastBroadcast: { outcome: "sent", txHash: "0xold", at: 940000 },
    },
    sends: ["sent"],
    reads: ["pending"],
    actors: [
      { kind: "tick", ms: 12001 },
      { kind: "operator", to: "failed" },
      { kind: "deliver", clock: 0, n: 1, message: "m1", shared: false },
      { kind: "late", clock: 0, n: 2, of: 0 },
      { kind: "step", clock: 0, offset: 0 },
    ],
    offsets: [0, 0, 0],
    maxDeliveries: 2,
    faults: [{ at: 1, landed: false, ahead: true }],
  }, ORDERS);
});

Deno.test("the money race catches a store that ignores a late copy's give-up marks (L1)", async () => {
  // Proof the property can fail: past the give-up's lease, only the marks
  // in the write ahead of the send keep a late copy from sending.
  assert.equal(
    await catchesAsync(
      moneyRace(memoryBackend, anyRace(SKEW_MS), ignoringUnlessCounted, /^L1:/),
      300,
    ),
    true,
  );
});

/**
 * Breaks I1 behind a write-ahead: a reader blind to the write-ahead on
 * record (a give-up plans a fail after a send declared not sent) and a
 * store that takes the fail through review, voiding the hold while the
 * send may have left.
 */
const voidsBehindSend = (store: Store): Store =>
  new Proxy(store, {
    get(target, key) {
      if (key === "getIntent") {
        return async (id: string) => {
          const intent = await target.getIntent(id);
          return intent === null ? null : { ...intent, broadcasting: null };
        };
      }
      if (key === "transition") {
        return async (id: string, change: Transition) => {
          if (change.from !== "settling" || change.to !== "failed") {
            return await target.transition(id, change);
          }
          const { ledger: _, ...review } = change;
          const moved = await target.transition(id, {
            ...review,
            to: "needs_review",
          });
          return await target.transition(id, {
            from: "needs_review",
            to: "failed",
            version: moved.version,
            at: change.at,
            ledger: "void",
          });
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

Deno.test("the money race catches a give-up that voids a hold with a write-ahead on record (I1)", async () => {
  // Drawn among the plain races alone (see lostRecordRace), this breaker
  // was caught in 3 of 10 seeds (1 to 10) of 300 runs, not in seed 1's;
  // with the races aimed at a lost record, in all 10, within 61 runs.
  const caught = (races: fc.Arbitrary<Race>, seed: number) =>
    fc.check(
      moneyRace(memoryBackend, races, voidsBehindSend, /^I1: .* may have left/),
      fixedRun(seed, 300),
    );
  assert.equal((await caught(anyRace(SKEW_MS), 1)).failed, true);
});

Deno.test("a direct voidHold() is refused on a payment in review whose tx may have left, on every store", async () => {
  // Reviewers' finding: the void skipped the resolve route's checks of the
  // chain, and a tx that then confirmed left a paid payment that could
  // never settle, its payer's funds released. The void rides in the
  // resolution's move to failed instead.
  const backends = [memoryBackend, kvBackend];
  if (postgresAvailable) backends.push(postgresBackend);
  for (const backend of backends) {
    const { store, close } = await backend.open();
    try {
      const sent = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "sent", txHash: "0xa", at: 1 },
      });
      const review = await store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: sent.version,
        at: 2,
      });
      await assert.rejects(
        store.voidHold("pi_1"),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /money may have moved/.test(error.message),
      );
      // 0xa confirms: the operator's "settled" still finds the hold.
      const settled = await store.transition("pi_1", {
        from: "needs_review",
        to: "settled",
        version: review.version,
        at: 3,
        ledger: "capture",
      });
      assert.deepEqual([settled.state, settled.hold], ["settled", "captured"]);
    } finally {
      await close();
    }
  }
});

Deno.test("a direct voidHold() is refused on an authorized payment imported with a send that may have left, on every store", async () => {
  // Found by the money race once it began with such an import: the
  // payments API voided the hold of an authorized intent whose tx on record
  // (0xold) may still land, so that tx would pay the payee with the payer's
  // funds released. A send on record is sent again on its nonce, and the
  // payment settles or goes to review, where its hold is voided only once
  // the chain shows nothing can land. A clean authorized intent is still
  // voided at once (a payment cancelled before any send).
  const backends = [memoryBackend, kvBackend];
  if (postgresAvailable) backends.push(postgresBackend);
  const imported: Omit<NewIntent, "id">[] = [
    {
      state: "authorized",
      hold: "pending",
      lastBroadcast: { outcome: "sent", txHash: "0xold", at: 1 },
    },
    {
      state: "authorized",
      hold: "pending",
      lastBroadcast: { outcome: "unknown", at: 1, error: "timeout" },
    },
    { state: "authorized", hold: "pending", mayHaveSent: true },
    { state: "authorized", hold: "pending", txHashes: ["0xold"] },
    { state: "authorized", hold: "pending", broadcasting: 1 },
  ];
  for (const backend of backends) {
    const { store, close } = await backend.open();
    try {
      for (const [i, intent] of imported.entries()) {
        await store.createIntent({ id: `pi_${i}`, ...intent });
        await assert.rejects(
          store.voidHold(`pi_${i}`),
          (error) =>
            error instanceof ConflictError && error.refused &&
            /money may have moved/.test(error.message) &&
            // What to do, starting on the chain: the payments API's cancel
            // meets this, and delivering the job alone would pay.
            /Look its txs and its nonce up on the chain/.test(error.message) &&
            /first use its nonce with a tx of your own/.test(error.message) &&
            error.message.includes(`POST /v1/intents/pi_${i}/resolve`),
          `${backend.name}: ${JSON.stringify(intent)}`,
        );
        assert.equal((await store.getIntent(`pi_${i}`))?.hold, "pending");
      }
      await store.createIntent({
        id: "pi_clean",
        state: "authorized",
        hold: "pending",
      });
      await store.voidHold("pi_clean");
      assert.equal((await store.getIntent("pi_clean"))?.hold, "voided");
    } finally {
      await close();
    }
  }
});

Deno.test("the money race's drop at the last delivery whose answer was lost after its marks landed, its letter redriven before the race looked: its message was dropped all the same (L2)", async () => {
  // Found by the race: m1's delivery 2 dropped the job, its letter and
  // givingup/ mark landed, and a later call of the drop failed once it
  // had acted; a redrive took the letter before the race looked for it,
  // so the race took m1 for a message never given up on, and its later
  // copies, refused as late copies, for a violation of L2. The mark,
  // which lands only with the letter, says it was dropped.
  await replay({
    start: { state: "authorized", hold: "pending" },
    sends: ["sent"],
    reads: ["pending"],
    actors: [
      { kind: "late", clock: 0, n: 2, of: 0 },
      { kind: "late", clock: 0, n: 1000, of: 0 },
      { kind: "tick", ms: 1000 },
      { kind: "publish", clock: 0 },
      { kind: "late", clock: 0, n: 1000, of: 0 },
      { kind: "counted", clock: 0, message: "m1" },
      { kind: "redrive", after: 0, then: 1 },
      { kind: "tick", ms: 1000 },
    ],
    offsets: [0, 0, 0],
    maxDeliveries: 2,
    faults: [{ at: 16, landed: true }],
  }, ORDERS);
});
