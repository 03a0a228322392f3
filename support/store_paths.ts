/**
 * The delivery paths whose store cost we pin, defined once for the KV
 * operation test (`kv_ops_test.ts`), the table script (`bench/kv_ops.ts`)
 * and the store benchmark (`bench/store_bench.ts`).
 *
 * A path is an intent, a Sender script and a delivery number: enough to
 * make one call of `deliver` take one branch of the relayer. Each path
 * states the outcome it must end in, so a measurement of the wrong branch
 * fails instead of being reported.
 *
 * @module
 */

import { isDeepStrictEqual } from "node:util";
import {
  createRelayer,
  DEFAULT_POLICY,
  type HoldState,
  type Intent,
  type IntentState,
  jobIdOf,
  type NewIntent,
  notSent,
  type Outcome,
  poison,
  ScriptedSender,
  type SenderScript,
  type Store,
} from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import { CountingKv, type KvCounts } from "./counting_kv.ts";

/** The injected clock's time for every path: fixed, so reasons are exact. */
export const NOW = 1_700_000_000_000;

/** The injected randomness: the middle of the equal jitter. */
export const RANDOM = (): number => 0.5;

/** The short names of the paths, as the issue lists them. */
export type PathId = "a" | "b" | "c" | "d" | "e" | "f" | "g";

/** One branch of a delivery, with the outcome and state it must end in. */
export interface DeliveryPath {
  /** The letter for it. */
  readonly id: PathId;
  /** What the delivery does, for test names and the table. */
  readonly name: string;
  /** The intent before the delivery (its id is given per run). */
  readonly intent: Omit<NewIntent, "id">;
  /** What the Sender does. */
  readonly script: SenderScript;
  /**
   * The delivery number the queue gives, or `"store"`: the relayer counts
   * it (one delivery is counted during setup, so the measured one is 2).
   */
  readonly delivery: number | "store";
  /** The outcome the delivery must return. */
  readonly outcome: Outcome;
  /** The intent's state and hold after the delivery. */
  readonly after: {
    readonly state: IntentState;
    readonly hold: HoldState | null;
  };
}

const TX = "0xabc";
const waiting: Omit<NewIntent, "id"> = {
  state: "settling",
  hold: "pending",
  // Entered settling 5 s ago with no broadcast on record: well inside
  // stuckAfterMs, so the relayer waits rather than rescues.
  settlingSince: NOW - 5_000,
};
const sent: Omit<NewIntent, "id"> = {
  state: "settling",
  hold: "pending",
  settlingSince: NOW - 20_000,
  lastBroadcast: { outcome: "sent", txHash: TX, at: NOW - 15_000 },
};
const waitingReason = "settling for 5s without tx hash, waiting";

/** Every path, in the order. */
export const PATHS: readonly DeliveryPath[] = [
  {
    id: "a",
    name: "a retry that waits (queue-counted)",
    intent: waiting,
    script: { sends: [] },
    delivery: 2,
    outcome: {
      action: "retry",
      delivery: 2,
      delayMs: 7_500,
      reason: waitingReason,
    },
    after: { state: "settling", hold: "pending" },
  },
  {
    id: "b",
    name: "a broadcast from authorized",
    intent: { state: "authorized", hold: "pending" },
    script: { sends: [{ txHash: TX }] },
    delivery: 1,
    outcome: {
      action: "retry",
      delivery: 1,
      delayMs: 3_750,
      reason: `sent ${TX}, waiting for confirmation`,
    },
    after: { state: "settling", hold: "pending" },
  },
  {
    id: "c",
    name: "a retry on a pending receipt",
    intent: sent,
    script: { sends: [{ txHash: TX }], receipts: ["pending"] },
    delivery: 2,
    outcome: {
      action: "retry",
      delivery: 2,
      delayMs: 7_500,
      reason: `waiting for ${TX} to confirm`,
    },
    after: { state: "settling", hold: "pending" },
  },
  {
    id: "d",
    name: "a confirmed settle",
    intent: sent,
    script: { sends: [{ txHash: TX }], receipts: ["confirmed"] },
    delivery: 2,
    outcome: {
      action: "done",
      delivery: 2,
      reason: "0xabc confirmed, intent settled",
    },
    after: { state: "settled", hold: "captured" },
  },
  {
    id: "e",
    name: "a poison that fails the intent",
    intent: { state: "authorized", hold: "pending" },
    script: {
      sends: [{ error: poison(notSent(new Error("chain id mismatch"))) }],
    },
    delivery: 1,
    outcome: {
      action: "poison",
      delivery: 1,
      cause: "declared",
      reason: "retrying will not help",
      resolution: "nothing was sent, so the intent failed",
    },
    after: { state: "failed", hold: "voided" },
  },
  {
    id: "f",
    name: "a poison that drops the job",
    intent: { state: "created" },
    script: { sends: [] },
    delivery: DEFAULT_POLICY.maxDeliveries,
    outcome: {
      action: "poison",
      delivery: DEFAULT_POLICY.maxDeliveries,
      cause: "exhausted",
      reason: `no luck after ${DEFAULT_POLICY.maxDeliveries} deliveries`,
      resolution: "job dropped, intent still created",
    },
    after: { state: "created", hold: null },
  },
  {
    id: "g",
    name: "a retry that waits (store-counted)",
    intent: waiting,
    script: { sends: [] },
    delivery: "store",
    outcome: {
      action: "retry",
      delivery: 2,
      delayMs: 7_500,
      reason: waitingReason,
    },
    after: { state: "settling", hold: "pending" },
  },
];

/**
 * The path with letter `id`.
 *
 * @throws {RangeError} If there is none.
 */
export function pathOf(id: PathId): DeliveryPath {
  const path = PATHS.find((p) => p.id === id);
  if (path === undefined) {
    throw new RangeError(`Cannot find path as 'id' is unknown: ${id}`);
  }
  return path;
}

/**
 * Sets up `path` on `store` for intent `intentId` and returns the one
 * delivery to run. Setup (the intent, a counted first delivery) is done
 * when the promise resolves, so a caller can time or count the delivery
 * alone.
 */
export async function preparePath(
  path: DeliveryPath,
  store: Store,
  intentId: string,
): Promise<() => Promise<Outcome>> {
  const job = { intentId, kind: "settle" } as const;
  await store.createIntent({ id: intentId, ...path.intent });
  if (path.delivery === "store") {
    await store.admit({ count: jobIdOf(job), now: NOW });
  }
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ [intentId]: path.script }),
    now: () => NOW,
    random: RANDOM,
  });
  const delivery = path.delivery === "store" ? undefined : path.delivery;
  return () => relayer.deliver(job, delivery);
}

/**
 * Checks that a delivery took its path: the outcome and the intent after
 * it are the ones the path states.
 *
 * @throws {Error} If they are not.
 */
export function assertTook(
  path: DeliveryPath,
  outcome: Outcome,
  intent: Intent | null,
): void {
  const after = { state: intent?.state, hold: intent?.hold };
  if (
    !isDeepStrictEqual(outcome, path.outcome) ||
    !isDeepStrictEqual(after, path.after)
  ) {
    throw new Error(
      `Path ${path.id} (${path.name}) went elsewhere: expected ${
        JSON.stringify(path.outcome)
      } and ${JSON.stringify(path.after)}, got ${JSON.stringify(outcome)} and ${
        JSON.stringify(after)
      }`,
    );
  }
}

/** The KV operations of one `Store` method call the relayer made. */
export interface StoreCall extends KvCounts {
  /** The `Store` method. */
  readonly method: string;
}

/** What one delivery of a path cost on `KvStore`. */
export interface Measurement {
  /** The path measured. */
  readonly path: DeliveryPath;
  /** What the delivery returned. */
  readonly outcome: Outcome;
  /** The intent after the delivery. */
  readonly intent: Intent | null;
  /** Every KV operation of the delivery. */
  readonly total: KvCounts;
  /** The store calls of the delivery, in order, with their KV operations. */
  readonly calls: readonly StoreCall[];
  /**
   * The poison resolution's share (see {@linkcode resolutionOf}); `null`
   * unless the outcome is a poison.
   */
  readonly resolution: KvCounts | null;
}

/**
 * The store calls of a poison resolution: from the relayer's re-read of
 * the intent after the decision (its last `getIntent`: the settle step
 * reads first, then the resolution re-reads) to the end of the delivery.
 */
export function resolutionCalls(
  calls: readonly StoreCall[],
): readonly StoreCall[] {
  const start = calls.findLastIndex((c) => c.method === "getIntent");
  return start < 0 ? [] : calls.slice(start);
}

/** The KV operations of a poison resolution, summed over {@linkcode resolutionCalls}. */
export function resolutionOf(calls: readonly StoreCall[]): KvCounts {
  return sum(resolutionCalls(calls));
}

function sum(calls: readonly KvCounts[]): KvCounts {
  return calls.reduce(
    (total, c) => ({
      reads: total.reads + c.reads,
      commits: total.commits + c.commits,
    }),
    { reads: 0, commits: 0 },
  );
}

/**
 * A view of `store` that records each method call with the KV operations
 * it made. The relayer awaits one store call at a time, so the counts
 * between a call's start and end are that call's own.
 */
function traced(store: Store, kv: CountingKv, calls: StoreCall[]): Store {
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const before = kv.counts;
        try {
          return await value.apply(target, args);
        } finally {
          const after = kv.counts;
          calls.push({
            method: String(property),
            reads: after.reads - before.reads,
            commits: after.commits - before.commits,
          });
        }
      };
    },
  });
}

/**
 * Runs one delivery of `path` on a `KvStore` over a fresh in-memory Deno
 * KV and counts its operations; setup is not counted. The handle is
 * closed before this returns.
 *
 * @throws {Error} If the delivery did not take its path.
 */
export async function measurePath(path: DeliveryPath): Promise<Measurement> {
  const kv = await Deno.openKv(":memory:");
  try {
    const counting = new CountingKv(kv);
    const store = new KvStore(counting);
    const calls: StoreCall[] = [];
    const run = await preparePath(
      path,
      traced(store, counting, calls),
      "pi_0001",
    );
    counting.reset();
    calls.length = 0;
    const outcome = await run();
    const total = counting.counts;
    const intent = await store.getIntent("pi_0001");
    assertTook(path, outcome, intent);
    return {
      path,
      outcome,
      intent,
      total,
      calls,
      resolution: outcome.action === "poison" ? resolutionOf(calls) : null,
    };
  } finally {
    kv.close();
  }
}
