/**
 * Races under `fc.scheduler()`: two deliveries of one job and a poison
 * resolution (a third delivery at the last allowed number), with every
 * store call and every Sender call resolving in an order fast-check picks.
 * The deliveries run on one relayer (one process) or one each, a queue's
 * give-up of the job may race them, and the store may fail a call or two
 * (before it acts, or after, its answer lost), which is thrown out.
 * I1–I6 must hold in every order. On MemoryStore and, where a server can
 * run, on PostgresStore: there the writes really race on the database and
 * only their answers are reordered.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type Broadcast,
  createRelayer,
  type Intent,
  type NewIntent,
  notSent,
  poison,
  type ReceiptStatus,
  type Sender,
  type Store,
  type WriteOptions,
} from "../../mod.ts";
import { catchesAsync, fixedRun, handled, runs } from "../_fc.ts";
import {
  type Backend,
  memoryBackend,
  postgresAvailable,
  postgresBackend,
} from "../_stores.ts";

type SendKind = "sent" | "not_sent" | "not_sent_poison" | "unknown";

interface Race {
  start: Omit<NewIntent, "id">;
  sends: SendKind[];
  receipt: ReceiptStatus;
  deliveries: [number, number, number];
  maxDeliveries: number;
  /** All three deliveries on one relayer (one process), not one each. */
  oneRelayer: boolean;
  /** A queue's give-up of the job racing them, on the first delivery's relayer. */
  giveUp: boolean;
  /** Store calls (counted from 0) that fail: before they act, or after (`landed`). */
  faults: { at: number; landed: boolean }[];
}

const lastBroadcasts: (Broadcast | null)[] = [
  null,
  { outcome: "not_sent", at: 0, error: "nonce gap" },
  { outcome: "unknown", at: 0, error: "timeout" },
  { outcome: "sent", txHash: "0xold", at: 0 },
];

const anyRace: fc.Arbitrary<Race> = fc.record({
  start: fc.oneof(
    fc.constant<Omit<NewIntent, "id">>({
      state: "authorized",
      hold: "pending",
    }),
    fc.constantFrom(...lastBroadcasts).map((lastBroadcast) => ({
      state: "settling" as const,
      hold: "pending" as const,
      settlingSince: 0,
      lastBroadcast,
      broadcasting: null,
    })),
  ),
  sends: fc.array(
    fc.constantFrom<SendKind>("sent", "not_sent", "not_sent_poison", "unknown"),
    {
      minLength: 1,
      maxLength: 3,
    },
  ),
  receipt: fc.constantFrom<ReceiptStatus>("confirmed", "pending", "dropped"),
  maxDeliveries: fc.integer({ min: 1, max: 3 }),
  deliveries: fc.tuple(
    fc.integer({ min: 1, max: 3 }),
    fc.integer({ min: 1, max: 3 }),
    fc.constant(3),
  ),
  oneRelayer: fc.boolean(),
  giveUp: fc.boolean(),
  faults: fc.oneof(
    fc.constant<Race["faults"]>([]),
    fc.array(fc.record({ at: fc.nat({ max: 20 }), landed: fc.boolean() }), {
      minLength: 1,
      maxLength: 2,
    }),
  ),
});

/** What the store throws for a race's fault. */
class StoreBlip extends Error {
  constructor() {
    super("store blip");
  }
}

/** `store`, failing the calls `faults` names. */
function failing(store: Store, faults: Race["faults"]): Store {
  let calls = 0;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const fault = faults.find((f) => f.at === calls++);
        if (fault !== undefined && !fault.landed) throw new StoreBlip();
        const answer = await value.apply(target, args);
        if (fault !== undefined) throw new StoreBlip();
        return answer;
      };
    },
  });
}

/** What the races reached, counted over a run. */
interface RaceReach {
  /** Deliveries and give-ups the store failed, thrown out. */
  blips: number;
  /** Busy answers on a relayer whose own send was in flight. */
  ownBusy: number;
  /** Give-ups answered. */
  giveUps: number;
}

/** Every method of `store`, resolved when the scheduler says so. */
function scheduled(s: fc.Scheduler, store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      return typeof value === "function"
        ? s.scheduleFunction(handled(value.bind(target)))
        : value;
    },
  });
}

function raceKeepsInvariants(
  breaker: (store: Store) => Store = (store) => store,
  backend: Backend = memoryBackend,
  { leaseOrder = true, reach }: {
    readonly leaseOrder?: boolean;
    readonly reach?: RaceReach;
  } = {},
) {
  return fc.asyncProperty(anyRace, fc.scheduler(), async (race, s) => {
    // Not closed on a failure: a failed run's store stays out of the pool.
    const { store: truth, close } = await backend.open();
    await truth.createIntent({ id: "pi_1", ...race.start });
    const violations: string[] = [];
    /** Each leased write, as the store ordered it (by the version it made). */
    const leased: { version: number; owner: string; keep: boolean }[] = [];
    let inFlight = 0;
    let maybeSent = race.start.lastBroadcast?.outcome === "sent" ||
      race.start.lastBroadcast?.outcome === "unknown";
    let sends = 0;

    // I5, checked outside the store: a lease granted while another owner
    // holds it. Judged in the order the store made the writes (their
    // versions): a real database may answer two writes on two connections
    // in the other order.
    const watched: Store = new Proxy(breaker(truth), {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (
          key === "transition" || key === "beginBroadcast" ||
          key === "recordBroadcast"
        ) {
          return async (id: string, ...args: unknown[]) => {
            const result = await value.call(target, id, ...args) as Intent;
            const lease = (args.at(-1) as WriteOptions | undefined)?.lease;
            if (lease !== undefined) {
              leased.push({
                version: Number(result.version),
                owner: lease.owner,
                keep: lease.keep === true,
              });
            }
            return result;
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const leaseViolations = (): string[] => {
      const found: string[] = [];
      let holder: string | undefined;
      for (const write of [...leased].sort((a, b) => a.version - b.version)) {
        if (holder !== undefined && holder !== write.owner) {
          found.push(
            `I5: pi_1 written by ${write.owner} while ${holder} held its lease`,
          );
        }
        if (write.keep) holder = write.owner;
        else if (holder === write.owner) holder = undefined;
      }
      return found;
    };

    // The scheduler runs a scheduled function at once and holds back only
    // its answer: a send is in flight from its call until the relayer has
    // that answer, so the count wraps the scheduled call.
    const scheduledSend = s.scheduleFunction(
      handled(async function send(intent: Intent) {
        if ((await truth.getIntent(intent.id))?.hold === "voided") {
          violations.push("I6: broadcast behind a voided hold");
        }
        const kind = race.sends[Math.min(sends++, race.sends.length - 1)]!;
        if (kind === "sent") {
          maybeSent = true;
          return { txHash: `0x${sends}` };
        }
        if (kind === "unknown") maybeSent = true;
        throw kind === "not_sent"
          ? notSent(new Error("signer refused"))
          : kind === "not_sent_poison"
          ? poison(notSent(new Error("bad chain id")))
          : new Error("timeout");
      }),
    );
    const sender: Sender = {
      async send(intent: Intent) {
        inFlight++;
        try {
          if (inFlight > 1) violations.push("I5: two broadcasts at once");
          return await scheduledSend(intent);
        } finally {
          inFlight--;
        }
      },
      receipt: s.scheduleFunction(function receipt() {
        return Promise.resolve(race.receipt);
      }),
    };

    // Each delivery in a process of its own, as a queue's copies land on
    // different workers: only the store's lease keeps them apart. (Within
    // one relayer, its own sends in flight do too, clock or no clock: one
    // relayer for all three would hide a store that ignores leases.)
    const relayer = () =>
      createRelayer({
        store: scheduled(s, failing(watched, race.faults)),
        sender,
        policy: { maxDeliveries: race.maxDeliveries, stuckAfterMs: 0 },
        now: () => 1000,
        random: () => 0.5,
      });
    const job = { intentId: "pi_1", kind: "settle" } as const;
    const one = relayer();
    const relayers = race.deliveries.map((_, i) =>
      race.oneRelayer || i === 0 ? one : relayer()
    );
    const deliveries = race.deliveries.map((n, i) =>
      relayers[i]!.deliver(job, n).then((outcome) => {
        if (
          reach && race.oneRelayer && inFlight > 0 &&
          outcome.action === "retry" && /busy/.test(outcome.reason)
        ) reach.ownBusy++;
        return outcome;
      })
    );
    if (race.giveUp) {
      deliveries.push(
        one.giveUp(job, {
          deliveries: race.maxDeliveries,
          queue: { queue: "qstash", messageId: "m1" },
        }).then((outcome) => {
          if (reach) reach.giveUps++;
          return outcome;
        }),
      );
    }
    await s.waitFor(Promise.allSettled(deliveries));

    for (const result of await Promise.allSettled(deliveries)) {
      if (result.status === "rejected") {
        // The store failing: nothing decided, the queue delivers again.
        if (result.reason instanceof StoreBlip) {
          if (reach) reach.blips++;
          continue;
        }
        violations.push(`a delivery threw: ${String(result.reason)}`);
      }
    }
    const end = (await truth.getIntent("pi_1"))!;
    if (end.state === "failed") {
      if (end.lastBroadcast?.outcome !== "not_sent") {
        violations.push("I1: failed without a not-sent broadcast");
      }
      if (maybeSent) {
        violations.push("I1: failed although a broadcast may have left");
      }
      if (end.hold === "pending") {
        violations.push("I2: failed with a pending hold");
      }
    }
    if (end.state === "settled" && end.hold !== "captured") {
      violations.push("I6: settled without a captured hold");
    }
    if (
      ["created", "authorized"].includes(end.state) &&
      race.start.state !== end.state
    ) {
      violations.push(`I3: moved backwards to ${end.state}`);
    }
    if (leaseOrder) violations.push(...leaseViolations());
    assert.deepEqual(violations, [], String(s));
    await close();
  });
}

Deno.test("createRelayer() keeps I1–I6 when two deliveries and a poison resolution race in any order", async () => {
  await fc.assert(raceKeepsInvariants(), { numRuns: runs(500) });
});

Deno.test({
  name:
    "createRelayer() keeps I1–I6 when two deliveries and a poison resolution race in any order [PostgresStore]",
  ignore: !postgresAvailable,
  async fn() {
    await fc.assert(raceKeepsInvariants(undefined, postgresBackend), {
      numRuns: runs(200),
    });
  },
});

Deno.test("the races reach store failures thrown out of deliver and giveUp, busy answers behind the relayer's own send, and give-ups", async () => {
  const reach: RaceReach = { blips: 0, ownBusy: 0, giveUps: 0 };
  await fc.assert(
    raceKeepsInvariants(undefined, memoryBackend, { reach }),
    fixedRun(42, 100),
  );
  for (const [name, count] of Object.entries(reach)) {
    assert.ok(count > 0, `${name} never reached`);
  }
});

/** `store`, with every write made as if no lease rode in it. */
function ignoringLeases(store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (
        key === "transition" || key === "beginBroadcast" ||
        key === "recordBroadcast"
      ) {
        // Every write as if no lease rode in it.
        return (...args: unknown[]) =>
          value.apply(
            target,
            args.map((arg) => {
              if (
                typeof arg !== "object" || arg === null || !("lease" in arg)
              ) {
                return arg;
              }
              const { lease: _, ...rest } = arg as WriteOptions;
              return rest;
            }),
          );
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

Deno.test("the race property catches a store that ignores leases", async () => {
  assert.equal(await catchesAsync(raceKeepsInvariants(ignoringLeases)), true);
});

/**
 * `store` with no guard at all: no lease, and a write-ahead taken over
 * whatever version the intent has now, so two deliveries that read the
 * same intent both send.
 */
function unguarded(store: Store): Store {
  const free = ignoringLeases(store);
  return new Proxy(free, {
    get(target, key) {
      if (key !== "beginBroadcast") return Reflect.get(target, key);
      return async (id: string, _version: string, ...rest: unknown[]) => {
        const current = (await store.getIntent(id))!.version;
        return await target.beginBroadcast(
          id,
          current,
          ...(rest as [number, WriteOptions?]),
        );
      };
    },
  });
}

Deno.test("the race property's in-flight count alone catches two sends at once, on a store without a guard", async () => {
  // Without the lease-order check, only the count of sends between a call
  // and its answer can see the overlap.
  assert.equal(
    await catchesAsync(
      raceKeepsInvariants(unguarded, memoryBackend, { leaseOrder: false }),
    ),
    true,
  );
});
