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
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  createRelayer,
  type Intent,
  type NewIntent,
  notSent,
  type Outcome,
  poison,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { catchesAsync, handled, runs } from "../_fc.ts";
import { type Backend, kvBackend, memoryBackend } from "../_stores.ts";

type SendKind = "sent" | "not_sent" | "unknown" | "sent_then_throw";
type Read = "pending" | "dropped" | "confirmed" | "reverted" | "error";
type Actor =
  | { kind: "deliver"; clock: number; n: number }
  | { kind: "giveUp"; clock: number; message: "m1" | "m2" }
  | { kind: "void" }
  | { kind: "redrive" }
  | { kind: "counted"; clock: number }
  | { kind: "operator"; to: "failed" | "settled" }
  | { kind: "tick"; ms: number };

interface Race {
  start: Omit<NewIntent, "id">;
  sends: SendKind[];
  reads: Read[];
  actors: Actor[];
  offsets: number[];
  maxDeliveries: number;
}

const LEASE_MS = 10_000;
const SKEW_MS = 2_000;
const STUCK_MS = 4_000;
const T0 = 1_000_000;

const anyRace = (skewMs: number): fc.Arbitrary<Race> =>
  fc.record({
    start: fc.oneof(
      fc.constant<Omit<NewIntent, "id">>({
        state: "authorized",
        hold: "pending",
      }),
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
        fc.record({
          kind: fc.constant("deliver" as const),
          clock: fc.integer({ min: 0, max: 2 }),
          n: fc.integer({ min: 1, max: 3 }),
        }),
        fc.record({
          kind: fc.constant("giveUp" as const),
          clock: fc.integer({ min: 0, max: 2 }),
          message: fc.constantFrom("m1" as const, "m2" as const),
        }),
        fc.constant({ kind: "void" as const }),
        fc.constant({ kind: "redrive" as const }),
        fc.record({
          kind: fc.constant("counted" as const),
          clock: fc.integer({ min: 0, max: 2 }),
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
      ),
      { minLength: 2, maxLength: 6 },
    ),
    offsets: fc.array(fc.integer({ min: 0, max: skewMs }), {
      minLength: 3,
      maxLength: 3,
    }),
    maxDeliveries: fc.integer({ min: 1, max: 3 }),
  });

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

function moneyRace(backend: Backend, skewMs: number) {
  return fc.asyncProperty(anyRace(skewMs), fc.scheduler(), async (race, s) => {
    const { store: truth, close } = await backend.open();
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
      } else if (
        race.start.lastBroadcast?.outcome === "unknown" ||
        race.start.broadcasting != null
      ) {
        nonceKept = ++nonce;
        txs.set("hidden-0", { nonce: nonceKept, known: false });
      }
      let inFlight = 0;
      let sendStart: number | undefined;
      let operatorFailed = false;
      let redriven = false;
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
          const n = replace && nonceKept !== undefined
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

      const store = scheduled(s, truth);
      const relayers = race.offsets.map((offset) =>
        createRelayer({
          store,
          sender,
          policy: {
            maxDeliveries: race.maxDeliveries,
            stuckAfterMs: STUCK_MS,
            jitter: "none",
          },
          now: () => clock.t + offset,
          random: () => 0.5,
          leaseMs: LEASE_MS,
          clockSkewMs: SKEW_MS,
        })
      );
      const OPS = "ops-token-for-money-race";
      const app = createApp({
        store,
        sender,
        opsToken: OPS,
        now: () => clock.t,
      });
      const job = { intentId: "pi_1", kind: "settle" } as const;
      const tick = s.scheduleFunction(function tick(ms: number) {
        // A Sender times out within half the lease: the clock never runs
        // that far while a send is in flight (LEASE >= 2 x SENDER_TIMEOUT).
        clock.t = sendStart === undefined
          ? clock.t + ms
          : Math.min(clock.t + ms, sendStart + LEASE_MS / 2 - 1);
        return Promise.resolve();
      });
      const outcomes: { actor: Actor; outcome: Outcome }[] = [];
      const runs = race.actors.map(async (actor) => {
        switch (actor.kind) {
          case "deliver":
            outcomes.push({
              actor,
              outcome: await relayers[actor.clock]!.deliver(job, actor.n),
            });
            return;
          case "giveUp":
            outcomes.push({
              actor,
              outcome: await relayers[actor.clock]!.giveUp(job, {
                deliveries: race.maxDeliveries,
                queue: { queue: "qstash", messageId: actor.message },
              }),
            });
            return;
          case "void":
            await store.voidHold("pi_1").catch(() => {});
            return;
          case "redrive":
            if (await relayers[0]!.redrive("pi_1/settle").catch(() => null)) {
              redriven = true;
            }
            return;
          case "counted":
            // A Pub/Sub push without a delivery count: counted by message id.
            outcomes.push({
              actor,
              outcome: await relayers[actor.clock]!.deliver(job, undefined, {
                countAs: "pubsub/m1",
              }),
            });
            return;
          case "operator": {
            const read = await store.getIntent("pi_1");
            if (read?.state !== "needs_review") return;
            const answer = await app.request("/v1/intents/pi_1/resolve", {
              method: "POST",
              headers: { authorization: `Bearer ${OPS}` },
              body: JSON.stringify({ to: actor.to, version: read.version }),
            });
            if (answer.status === 200 && actor.to === "failed") {
              operatorFailed = true;
            }
            return;
          }
          case "tick":
            await tick(actor.ms);
            return;
        }
      });
      await s.waitFor(Promise.allSettled(runs));
      for (const r of await Promise.allSettled(runs)) {
        if (r.status === "rejected") {
          violations.push(`an actor threw: ${String(r.reason)}`);
        }
      }

      // The queue's last word: a give-up repeated, alone, until answered.
      let gaveUp = outcomes.some(({ actor, outcome }) =>
        actor.kind === "giveUp" && outcome.action !== "retry"
      );
      const pending = outcomes.filter(({ actor, outcome }) =>
        actor.kind === "giveUp" && outcome.action === "retry"
      );
      for (const { actor } of pending) {
        for (let i = 0; i < 5 && actor.kind === "giveUp"; i++) {
          clock.t += LEASE_MS + 2 * SKEW_MS + 1;
          const again = relayers[0]!.giveUp(job, {
            deliveries: race.maxDeliveries,
            queue: { queue: "qstash", messageId: actor.message },
          });
          const outcome = await s.waitFor(again);
          if (outcome.action !== "retry") {
            gaveUp = true;
            break;
          }
        }
      }
      // A redriven job is a new message: delivered until it is done with
      // (the store counts it), or the queue would give up on it.
      let lastWord = gaveUp;
      if (redriven) {
        lastWord = false;
        for (let i = 0; i < 12; i++) {
          clock.t += LEASE_MS + 2 * SKEW_MS + STUCK_MS;
          const outcome = await s.waitFor(relayers[0]!.deliver(job));
          if (outcome.action !== "retry") {
            lastWord = true;
            break;
          }
        }
      }
      const end = (await truth.getIntent("pi_1"))!;
      const maySent = [...txs.values()].length > 0;
      const confirmed = [...txs.entries()].filter(([, tx]) =>
        tx.fate === "confirmed"
      );
      const nonces = new Set(confirmed.map(([, tx]) => tx.nonce));
      if (nonces.size > 1) violations.push("paid twice: two nonces confirmed");
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
      if (
        lastWord &&
        !["settled", "failed", "needs_review"].includes(end.state) &&
        (await truth.getDeadLetter("pi_1/settle")) === null
      ) {
        violations.push(`stranded: ${end.state} with no job and no letter`);
      }
      assert.deepEqual(
        violations,
        [],
        `${JSON.stringify(end)}\n${JSON.stringify(outcomes)}\n${String(s)}`,
      );
    } finally {
      await close();
    }
  });
}

Deno.test("MemoryStore: no race of deliveries, give-ups, voids, an operator and a jumping clock loses or doubles money (clocks within clockSkewMs)", async () => {
  await fc.assert(moneyRace(memoryBackend, SKEW_MS), { numRuns: runs(300) });
});

Deno.test("KvStore: no race of deliveries, give-ups, voids, an operator and a jumping clock loses or doubles money (clocks within clockSkewMs)", async () => {
  await fc.assert(moneyRace(kvBackend, SKEW_MS), { numRuns: runs(100) });
});

Deno.test("MemoryStore: clocks apart by half a lease more than clockSkewMs still keep one send at a time (a Sender within half the lease)", async () => {
  await fc.assert(moneyRace(memoryBackend, SKEW_MS + LEASE_MS / 2 - 1), {
    numRuns: runs(300),
  });
});

Deno.test("the money race catches clocks apart by more than a lease", async () => {
  // Proof the property can fail: clocks twice LEASE + CLOCK_SKEW apart, a
  // contender takes a lease its holder still uses.
  assert.equal(
    await catchesAsync(
      moneyRace(memoryBackend, 2 * (LEASE_MS + SKEW_MS)),
      1000,
    ),
    true,
  );
});

Deno.test({
  name:
    "a direct voidHold() is refused on a payment in review whose tx may have left",
  // Kept out of the suite: today's stores allow it (the model test and the
  // review route test rely on a void "by hand elsewhere"), and changing
  // that is a rule change for every store, not a fix. Reviewers' finding:
  // the void skips the route's receipt checks, and a tx that then confirms
  // leaves a paid payment that can never settle, its payer's funds released.
  ignore: true,
  async fn() {
    for (const backend of [memoryBackend, kvBackend]) {
      const { store, close } = await backend.open();
      try {
        const sent = await store.createIntent({
          id: "pi_1",
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          lastBroadcast: { outcome: "sent", txHash: "0xa", at: 1 },
        });
        await store.transition("pi_1", {
          from: "settling",
          to: "needs_review",
          version: sent.version,
          at: 2,
        });
        await assert.rejects(store.voidHold("pi_1"), /money may have moved/);
      } finally {
        await close();
      }
    }
  },
});
