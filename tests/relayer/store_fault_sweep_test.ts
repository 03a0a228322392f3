/**
 * Every store call of a job's life, failed in turn: for each call the
 * relayer makes (its count's admission, its look, a write-ahead, a send's
 * record, the replay record, a receipt's settle, a resolution, a give-up's
 * reads and writes), the store answers busy (a `BusyError` another
 * session's lock or a cancelled statement makes: nothing landed), fails
 * before the call lands, or lands it and loses the answer; also for a
 * window of several calls at once (a store busy for a while). A queue then
 * delivers the job as queues do (a retry or a throw is delivered again, up
 * to its limit; then its give-up, called again until it answers), the
 * store back. Whatever failed: no payment is made twice, none fails or has
 * its hold voided once a tx of it may have left, none settles on nothing,
 * and none is stranded (neither resolved, nor dropped with a dead letter).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  MemoryStore,
  notSent,
  type Outcome,
  poison,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { heldBySession } from "../../store/_held_lock.ts";

const ID = "pi_0001";
const JOB = { intentId: ID, kind: "settle" } as const;
const LEASE_MS = 200;
const POLICY = {
  maxDeliveries: 4,
  baseMs: 100,
  capMs: 400,
  jitter: "none",
  stuckAfterMs: 1000,
} as const;
/** The queue's own limit: deliveries it makes before it gives up. */
const QUEUE_LIMIT = POLICY.maxDeliveries;

type Fault = "busy" | "before" | "lost";
type SendMode = "ok" | "timeoutLanded" | "notSentThenOk" | "declaredPoison";

/** The chain: one nonce per fresh send; a nonce mined once. */
class Chain {
  nonce = 0;
  mined = new Set<number>();
  /** Txs of this payment that landed (a second is a payment made twice). */
  paid = 0;
  /** Whether a tx may have left (sent, or an unknown answer). */
  mayHaveLeft = false;
  txs = new Map<string, { lands: boolean; asked: number }>();
  #n = 0;
  send(replace: boolean, lands: boolean): string {
    if (this.nonce === 0 || !replace) this.nonce++;
    const hash = `0x${(++this.#n).toString(16).padStart(4, "0")}`;
    const ok = lands && !this.mined.has(this.nonce);
    if (ok) {
      this.mined.add(this.nonce);
      this.paid++;
    }
    this.txs.set(hash, { lands: ok, asked: 0 });
    return hash;
  }
  receipt(hash: string): ReceiptStatus {
    const tx = this.txs.get(hash);
    if (tx === undefined || !tx.lands) return "dropped";
    return tx.asked++ === 0 ? "pending" : "confirmed";
  }
}

/** A store over `inner` whose calls `from`..`from + width - 1` fail as `fault` says. */
function faulty(
  inner: Store,
  state: { calls: number; on: boolean },
  fault: Fault,
  from: number,
  width: number,
): Store {
  return new Proxy(inner, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const call = ++state.calls;
        const hit = state.on && call >= from && call < from + width;
        if (hit && fault === "busy") {
          throw heldBySession(
            `Cannot ${
              String(key)
            } as another session cancelled its statement: nothing was written; retry`,
            new Error("canceling statement due to user request"),
          );
        }
        if (hit && fault === "before") {
          throw new Error(`store unreachable (${String(key)})`);
        }
        const result = await value.apply(target, args);
        if (hit) throw new Error(`store answer lost (${String(key)})`);
        return result;
      };
    },
  }) as Store;
}

interface Run {
  readonly violations: string[];
  readonly log: string[];
  /** How many store calls the run made. */
  readonly calls: number;
}

async function run(
  mode: SendMode,
  counted: boolean,
  fault: Fault,
  from: number,
  width: number,
): Promise<Run> {
  const memory = new MemoryStore();
  await memory.createIntent({ id: ID, state: "authorized", hold: "pending" });
  const state = { calls: 0, on: true };
  const store = faulty(memory, state, fault, from, width);
  const chain = new Chain();
  let t = 1_000_000;
  let sends = 0;
  const log: string[] = [];
  const violations: string[] = [];
  const sender: Sender = {
    send(_intent, { replace }) {
      sends++;
      if (mode === "declaredPoison") {
        return Promise.reject(poison(notSent(new Error("chain id mismatch"))));
      }
      if (mode === "notSentThenOk" && sends === 1) {
        return Promise.reject(notSent(new Error("node refused the tx")));
      }
      if (mode === "timeoutLanded" && sends === 1) {
        chain.mayHaveLeft = true;
        chain.send(replace, true);
        return Promise.reject(new Error("timeout after landing"));
      }
      chain.mayHaveLeft = true;
      return Promise.resolve({ txHash: chain.send(replace, true) });
    },
    receipt(txHash) {
      return Promise.resolve(chain.receipt(txHash));
    },
  };
  const relayer = createRelayer({
    store,
    sender,
    policy: POLICY,
    now: () => t,
    random: () => 0.5,
    leaseMs: LEASE_MS,
    clockSkewMs: 0,
  });
  const claims: string[] = [];
  const note = (how: string, outcome: Outcome | Error) => {
    log.push(
      `${how}: ${
        outcome instanceof Error ? `threw ${outcome.message}` : JSON.stringify(
          outcome,
        )
      }`,
    );
    if (outcome instanceof Error) return;
    if (outcome.action === "poison") claims.push(outcome.resolution);
  };
  let ended = false;
  for (let n = 1; n <= QUEUE_LIMIT && !ended; n++) {
    const outcome = await relayer.deliver(
      JOB,
      counted ? undefined : n,
      counted ? {} : { message: { queue: "qstash", messageId: "m1" } },
    ).catch((error: Error) => error);
    note(`deliver #${n}`, outcome);
    if (!(outcome instanceof Error) && outcome.action !== "retry") {
      ended = true;
    }
    // A retry comes back after its delay; a 503 after the queue's own.
    t += outcome instanceof Error || outcome.action !== "retry"
      ? 600
      : Math.max(outcome.delayMs, 600);
  }
  // The give-up is called again until it answers (QStash's failure
  // callback, a dead-letter subscription's push), past any window here.
  for (let call = 1; call <= 20 && !ended; call++) {
    const outcome = await relayer.giveUp(JOB, {
      deliveries: QUEUE_LIMIT,
      queue: { queue: "qstash", messageId: "m1" },
    }).catch((error: Error) => error);
    note(`giveUp ${call}`, outcome);
    if (!(outcome instanceof Error) && outcome.action !== "retry") {
      ended = true;
    }
    t += 600;
  }
  const intent = (await memory.getIntent(ID))!;
  const letter = await memory.getDeadLetter(`${ID}/settle`);
  const s = `${intent.state} hold ${intent.hold}`;
  if (chain.paid > 1) violations.push(`${s}: paid ${chain.paid} times`);
  if (chain.mayHaveLeft && intent.state === "failed") {
    violations.push(`${s}: failed after a tx may have left`);
  }
  if (chain.mayHaveLeft && intent.hold === "voided") {
    violations.push(`${s}: hold voided after a tx may have left`);
  }
  if (intent.state === "failed" && intent.hold !== "voided") {
    violations.push(`${s}: failed with its hold not voided`);
  }
  if (
    intent.state === "settled" &&
    (chain.paid === 0 || intent.hold !== "captured")
  ) {
    violations.push(`${s}: settled on nothing paid or uncaptured`);
  }
  const resolved = ["settled", "failed", "needs_review"].includes(intent.state);
  if (!resolved && letter === null) {
    violations.push(`${s}: stranded (not resolved, no dead letter)`);
  }
  if (!ended && !resolved) {
    violations.push(`${s}: the queue's give-up never answered`);
  }
  for (const claim of claims) {
    if (/intent failed/.test(claim) && intent.state !== "failed") {
      violations.push(`${s}: an answer said failed: ${claim}`);
    }
  }
  return { violations, log, calls: state.calls };
}

const MODES: readonly SendMode[] = [
  "ok",
  "timeoutLanded",
  "notSentThenOk",
  "declaredPoison",
];

for (const fault of ["busy", "before", "lost"] as const) {
  for (const counted of [false, true]) {
    Deno.test(
      `createRelayer() keeps the money invariants with each store call in turn failing ${
        fault === "busy"
          ? "busy"
          : fault === "before"
          ? "before it lands"
          : "after it lands"
      } (${counted ? "counted in the store" : "numbered by the queue"})`,
      async () => {
        const bad: string[] = [];
        let runs = 0;
        for (const mode of MODES) {
          // The calls a run makes with the store sound, plus the give-up's.
          const { calls } = await run(mode, counted, fault, 0, 0);
          for (const width of [1, 3, 8]) {
            for (let from = 1; from <= calls; from++) {
              runs++;
              const r = await run(mode, counted, fault, from, width);
              if (r.violations.length > 0) {
                bad.push(
                  `${mode} calls ${from}..${from + width - 1}: ${
                    r.violations.join(" | ")
                  }\n  ${r.log.join("\n  ")}`,
                );
              }
            }
          }
        }
        assert.ok(runs > 20, `only ${runs} runs`);
        assert.deepEqual(bad, []);
      },
    );
  }
}

Deno.test("the fault sweep reports an intent its store left stranded (the check can fail)", async () => {
  // A store busy through the queue's deliveries and its give-up's calls:
  // the intent stays authorized with no letter, and the sweep says so.
  const r = await run("ok", false, "busy", 1, 10_000);
  assert.ok(
    r.violations.some((v) => /stranded/.test(v)),
    r.violations.join("\n") + "\n" + r.log.join("\n"),
  );
});

/** PostgresStore's error for a read whose statement was cancelled (not a `BusyError`). */
function cancelledLook(id: string): Error {
  return new Error(
    `The store's read of intent ${id} failed as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was read; retry`,
  );
}

for (
  const [name, state, lastBroadcast, expected] of [
    ["an authorized", "authorized", null, "authorized"],
    ["a settling", "settling", "0x1", "settled"],
  ] as const
) {
  for (const counted of [false, true]) {
    Deno.test(
      `createRelayer() answers each delivery of ${name} intent whose look is cancelled by throwing (counted, nothing decided), and ${
        counted
          ? "the local queue's next delivery, the store back and its count past maxDeliveries,"
          : "the queue's give-up"
      } resolves it, nothing sent, nothing stranded`,
      async () => {
        const memory = new MemoryStore();
        await memory.createIntent({
          id: ID,
          state,
          hold: "pending",
          ...(lastBroadcast === null ? {} : {
            settlingSince: 0,
            lastBroadcast: { outcome: "sent", txHash: lastBroadcast, at: 0 },
          }),
        });
        let cancelling = true;
        const store = new Proxy(memory, {
          get(target, key) {
            const value = Reflect.get(target, key, target);
            if (typeof value !== "function") return value;
            if (key === "getIntent") {
              return (id: string) =>
                cancelling
                  ? Promise.reject(cancelledLook(id))
                  : target.getIntent(id);
            }
            return value.bind(target);
          },
        });
        const sends: boolean[] = [];
        const relayer = createRelayer({
          store,
          sender: {
            send: (_intent, { replace }) => {
              sends.push(replace);
              return Promise.reject(new Error("no send expected"));
            },
            receipt: () => Promise.resolve("confirmed"),
          },
          policy: POLICY,
          now: () => 0,
          random: () => 0.5,
        });
        for (let n = 1; n <= QUEUE_LIMIT; n++) {
          // Thrown as the store threw it: the webhook's 503, nothing decided.
          await assert.rejects(
            relayer.deliver(JOB, counted ? undefined : n),
            /read of intent pi_0001 failed as another session cancelled/,
          );
        }
        // Counted each time (the count landed before the look).
        assert.equal(
          await memory.deliveries(`${ID}/settle`),
          counted ? QUEUE_LIMIT : 0,
        );
        assert.equal((await memory.getIntent(ID))?.state, state);
        assert.equal(await memory.getDeadLetter(`${ID}/settle`), null);
        // The store back: the queue gives up, or (the local queue, which
        // never does) delivers again, counted past maxDeliveries.
        cancelling = false;
        const given = counted
          ? await relayer.deliver(JOB)
          : await relayer.giveUp(JOB, {
            deliveries: QUEUE_LIMIT,
            queue: { queue: "qstash", messageId: "m1" },
          });
        assert.notEqual(given.action, "retry", JSON.stringify(given));
        const intent = await memory.getIntent(ID);
        assert.equal(intent?.state, expected, JSON.stringify(given));
        if (expected === "authorized") {
          assert.ok(await memory.getDeadLetter(`${ID}/settle`) !== null);
        }
        assert.deepEqual(sends, []);
      },
    );
  }
}
