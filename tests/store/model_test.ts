/**
 * Model-based tests of the stores: random sequences of store operations
 * (with exact expected results from a plain model) and relayer deliveries
 * (with crashes and duplicates, checked against the state machine), run on
 * MemoryStore and KvStore. A store that skips the version check fails it.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  BusyError,
  ConflictError,
  createRelayer,
  type HoldState,
  type Intent,
  INTENT_STATES,
  type IntentState,
  notSent,
  poison,
  type Relayer,
  type Sender,
  type Store,
  TRANSITIONS,
} from "../../mod.ts";
import { type Backend, BACKENDS, memoryBackend } from "../_stores.ts";
import { catchesAsync, runs } from "../_fc.ts";
import { deadLetter } from "./_contract.ts";

const INTENTS = ["pi_a", "pi_b", "pi_c"] as const;
const JOBS = ["job_a", "job_b"] as const;
const LEASES = ["lease_a", "lease_b"] as const;
const OWNERS = ["o1", "o2", "o3"] as const;
const LEASE_TTL = 1000;

/** The plain model: what each operation must do, without versions, I/O or concurrency. */
interface Model {
  intents: Map<string, { state: IntentState; hold: HoldState | null }>;
  deliveries: Map<string, number>;
  leases: Map<string, { owner: string; expiresAt: number }>;
  dead: Map<string, number>; // jobId → poisonedAt
  now: number;
}

/** The real system: a store, a relayer over a crashable view of it, and the versions seen. */
interface Real {
  store: Store;
  versions: Map<string, string[]>;
  deliver(
    intentId: string,
    outcome: SendOutcome,
    crashAt: number | null,
    copies: number,
  ): Promise<void>;
}

type SendOutcome = "sent" | "not_sent" | "poison_not_sent" | "unknown";

function modelHold(
  hold: HoldState | null,
  op: "record" | "void" | "capture",
  state: IntentState = "created",
): HoldState | "conflict" {
  const target = op === "record"
    ? "pending"
    : op === "void"
    ? "voided"
    : "captured";
  if (hold === target) return hold;
  if (op === "record" && hold === null) {
    return state === "created" || state === "authorized"
      ? "pending"
      : "conflict";
  }
  if (op !== "record" && hold === "pending") return target;
  return "conflict";
}

/** What the relayer wrote that the model reads from the real store: whether a broadcast may have left, and the last one's outcome. */
type Broadcasts = Pick<
  Intent,
  "mayHaveSent" | "broadcasting" | "lastBroadcast" | "txHashes"
>;

/**
 * Whether the state and the broadcasts on record allow a hold change by
 * `op` (the hold itself aside): no void where money may have moved (a
 * review's only in a move, `alone` false), a capture only of a settling
 * or needs_review intent, and of a settling one only once a send returned
 * a tx hash, with none in flight.
 */
function stateAllows(
  state: IntentState,
  seen: Broadcasts,
  op: "record" | "void" | "capture",
  alone: boolean,
): boolean {
  const sentMaybe = seen.mayHaveSent || seen.broadcasting !== null;
  if (op === "void") {
    return !(state === "settled" ||
      ((state === "settling" || (state === "needs_review" && alone)) &&
        sentMaybe));
  }
  if (op === "capture") {
    if (state === "settling") {
      return seen.txHashes.length > 0 && seen.broadcasting === null;
    }
    return state === "needs_review";
  }
  return true;
}

async function rejectsConflict(
  promise: Promise<unknown>,
  what: string,
): Promise<void> {
  await assert.rejects(promise, ConflictError, what);
}

async function sameAsModel(m: Model, r: Real, id: string): Promise<void> {
  const real = await r.store.getIntent(id);
  const model = m.intents.get(id);
  assert.deepEqual(
    real && { state: real.state, hold: real.hold },
    model ?? null,
    `intent ${id}`,
  );
  if (real) r.versions.get(id)!.push(real.version);
}

class CreateIntent implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly state: IntentState,
    readonly hold: HoldState | null,
    readonly last: "sent" | "not_sent" | null = null,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const create = r.store.createIntent({
      id: this.id,
      state: this.state,
      hold: this.hold,
      ...(this.state === "settling" ? { settlingSince: m.now } : {}),
      ...(this.state === "settling" && this.last !== null
        ? {
          lastBroadcast: this.last === "sent"
            ? { outcome: "sent", txHash: "0xmodel", at: m.now }
            : { outcome: "not_sent", at: m.now },
        }
        : {}),
    });
    if (m.intents.has(this.id)) {
      return await rejectsConflict(create, "create twice");
    }
    await create;
    m.intents.set(this.id, { state: this.state, hold: this.hold });
    r.versions.set(this.id, []);
    await sameAsModel(m, r, this.id);
  }
  toString = () =>
    `create(${this.id}, ${this.state}, ${this.hold}${
      this.last ? `, last ${this.last}` : ""
    })`;
}

class Move implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly to: IntentState,
    readonly ledger: "void" | "capture" | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.intents.has(this.id);
  async run(m: Model, r: Real) {
    const model = m.intents.get(this.id)!;
    const current = await r.store.getIntent(this.id);
    const move = r.store.transition(this.id, {
      from: model.state,
      to: this.to,
      version: current!.version,
      at: m.now,
      ...(this.ledger ? { ledger: this.ledger } : {}),
    });
    const seen = current!;
    const hold = this.ledger ? modelHold(model.hold, this.ledger) : model.hold;
    const allowed = TRANSITIONS[model.state].includes(this.to) &&
      hold !== "conflict" &&
      (hold === model.hold ||
        stateAllows(model.state, seen, this.ledger!, false)) &&
      // I1: a settling intent fails only when every broadcast stayed home.
      !(model.state === "settling" && this.to === "failed" &&
        (seen.mayHaveSent || seen.broadcasting !== null ||
          seen.lastBroadcast?.outcome !== "not_sent")) &&
      !(this.to === "authorized" && hold !== "pending") &&
      !(this.to === "settling" && hold !== "pending") &&
      !(this.to === "failed" && (hold === "pending" || hold === "captured")) &&
      !(this.to === "settled" && hold !== "captured");
    if (!allowed) await rejectsConflict(move, this.toString());
    else {
      await move;
      m.intents.set(this.id, {
        state: this.to,
        hold: hold as HoldState | null,
      });
    }
    await sameAsModel(m, r, this.id);
  }
  toString = () =>
    `move(${this.id} → ${this.to}${this.ledger ? `, ${this.ledger}` : ""})`;
}

/** A move the table and the ledger allow, but on a version read before the last write: must be refused. */
class StaleMove implements fc.AsyncCommand<Model, Real> {
  constructor(readonly id: string, readonly pick: number) {}
  check = (m: Readonly<Model>) => m.intents.has(this.id);
  async run(m: Model, r: Real) {
    const model = m.intents.get(this.id)!;
    const seen = (await r.store.getIntent(this.id))!;
    const current = seen.version;
    const stale = r.versions.get(this.id)!.find((v) => v !== current);
    // Moves the rules allow on the current version, so that only its
    // staleness can refuse one.
    const ledgerAllows = (op: "void" | "capture") =>
      modelHold(model.hold, op) === model.hold ||
      stateAllows(model.state, seen, op, false);
    const valid = TRANSITIONS[model.state].flatMap(
      (to): { to: IntentState; ledger?: "void" | "capture" }[] => {
        if (to === "authorized") {
          return model.hold === "pending" ? [{ to }] : [];
        }
        if (to === "failed") {
          const clean = model.state !== "settling" ||
            (!seen.mayHaveSent && seen.broadcasting === null &&
              seen.lastBroadcast?.outcome === "not_sent");
          return modelHold(model.hold, "void") === "voided" && clean &&
              ledgerAllows("void")
            ? [{ to, ledger: "void" as const }]
            : [];
        }
        if (to === "settled") {
          return modelHold(model.hold, "capture") === "captured" &&
              ledgerAllows("capture")
            ? [{ to, ledger: "capture" as const }]
            : [];
        }
        return [{ to }];
      },
    );
    const move = valid[this.pick % Math.max(1, valid.length)];
    if (stale === undefined || move === undefined) return;
    await rejectsConflict(
      r.store.transition(this.id, {
        from: model.state,
        version: stale,
        at: m.now,
        ...move,
      }),
      `stale move of ${this.id} to ${move.to}`,
    );
    await sameAsModel(m, r, this.id);
  }
  toString = () => `staleMove(${this.id}, #${this.pick})`;
}

class Hold implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly op: "record" | "void" | "capture",
  ) {}
  check = (m: Readonly<Model>) => m.intents.has(this.id);
  async run(m: Model, r: Real) {
    const model = m.intents.get(this.id)!;
    // Whether a broadcast may have left is the relayer's business, not the
    // model's: read it, to know whether a void is still allowed.
    const seen = (await r.store.getIntent(this.id))!;
    const call = this.op === "record"
      ? r.store.recordHold(this.id)
      : this.op === "void"
      ? r.store.voidHold(this.id)
      : r.store.captureHold(this.id);
    let expected = modelHold(model.hold, this.op, model.state);
    if (
      expected !== model.hold &&
      !stateAllows(model.state, seen, this.op, true)
    ) expected = "conflict";
    if (expected === "conflict") await rejectsConflict(call, this.toString());
    else {
      assert.equal(await call, expected);
      model.hold = expected;
    }
    await sameAsModel(m, r, this.id);
  }
  toString = () => `${this.op}Hold(${this.id})`;
}

class Count implements fc.AsyncCommand<Model, Real> {
  constructor(readonly jobId: string) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const n = (m.deliveries.get(this.jobId) ?? 0) + 1;
    assert.equal(await r.store.admit({ count: this.jobId, now: m.now }), n);
    m.deliveries.set(this.jobId, n);
    assert.equal(await r.store.deliveries(this.jobId), n);
  }
  toString = () => `count(${this.jobId})`;
}

/**
 * A write that carries a lease (leases ride in intent writes): on an
 * intent of its own per lease key, so the model of the lease stays plain.
 */
class Lease implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly key: string,
    readonly owner: string,
    readonly op: "keep" | "release",
    readonly advanceMs: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    m.now += this.advanceMs;
    const id = `lease_${this.key}`;
    const current = await r.store.getIntent(id) ??
      await r.store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
    const lease = m.leases.get(this.key);
    const busy = lease !== undefined && lease.owner !== this.owner &&
      lease.expiresAt > m.now;
    const write = r.store.beginBroadcast(id, current.version, m.now, {
      lease: {
        owner: this.owner,
        ttlMs: LEASE_TTL,
        now: m.now,
        keep: this.op === "keep",
      },
    });
    if (busy) {
      await assert.rejects(write, BusyError, this.toString());
      return;
    }
    await write;
    if (this.op === "keep") {
      m.leases.set(this.key, {
        owner: this.owner,
        expiresAt: m.now + LEASE_TTL,
      });
    } else if (lease?.owner === this.owner) m.leases.delete(this.key);
  }
  toString = () =>
    `${this.op}Lease(${this.key}, ${this.owner}, +${this.advanceMs}ms)`;
}

class PutDeadLetter implements fc.AsyncCommand<Model, Real> {
  constructor(readonly jobId: string, readonly poisonedAt: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    await r.store.putDeadLetter(deadLetter(this.jobId, this.poisonedAt));
    m.dead.set(this.jobId, this.poisonedAt);
    await sameDeadLetters(m, r);
  }
  toString = () => `putDeadLetter(${this.jobId}, ${this.poisonedAt})`;
}

class Redrive implements fc.AsyncCommand<Model, Real> {
  constructor(readonly jobId: string) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const read = await r.store.getDeadLetter(this.jobId);
    assert.equal(read !== null, m.dead.has(this.jobId));
    if (read !== null) {
      const removed = await r.store.redrive(this.jobId, read.version);
      assert.equal(removed.jobId, this.jobId);
      m.dead.delete(this.jobId);
      m.deliveries.delete(this.jobId);
      assert.equal(await r.store.deliveries(this.jobId), 0);
    }
    await sameDeadLetters(m, r);
  }
  toString = () => `redrive(${this.jobId})`;
}

async function sameDeadLetters(m: Model, r: Real): Promise<void> {
  const real: string[] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<Store["listDeadLetters"]>> = await r.store
      .listDeadLetters({ limit: 2, cursor });
    real.push(...page.items.map((d) => `${d.jobId}@${d.poisonedAt}`));
    cursor = page.cursor;
  } while (cursor !== null);
  const expected = [...m.dead].sort(([a, x], [b, y]) =>
    y - x || (a < b ? -1 : 1)
  ).map(([j, t]) => `${j}@${t}`);
  assert.deepEqual(real, expected);
}

/** A relayer delivery; the model learns the outcome from the store and checks it against the state machine. */
class Deliver implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly id: string,
    readonly outcome: SendOutcome,
    readonly crashAt: number | null,
    readonly copies: number,
  ) {}
  check = (m: Readonly<Model>) => m.intents.has(this.id);
  async run(m: Model, r: Real) {
    m.now += 60_000; // past any lease a crashed delivery left behind
    const before = m.intents.get(this.id)!;
    await r.deliver(this.id, this.outcome, this.crashAt, this.copies);
    const after = (await r.store.getIntent(this.id))!;
    const reachable = (from: IntentState, to: IntentState): boolean =>
      from === to || TRANSITIONS[from].some((s) => reachable(s, to));
    assert.ok(
      reachable(before.state, after.state),
      `${before.state} → ${after.state}`,
    );
    if (after.state !== before.state) {
      assert.ok(
        !["created", "needs_review"].includes(before.state),
        "the relayer moved what it must not",
      );
    }
    if (after.state === "failed" && before.state !== "failed") {
      // The relayer failed it: only with a voided hold and a clean chain.
      assert.equal(after.hold, "voided");
      assert.equal(after.mayHaveSent, false);
    }
    if (after.state === "failed") {
      assert.ok(after.hold !== "pending" && after.hold !== "captured");
    }
    if (after.state === "settled" && before.state !== "settled") {
      assert.equal(after.hold, "captured");
    }
    m.intents.set(this.id, { state: after.state, hold: after.hold });
    r.versions.get(this.id)!.push(after.version);
    const dead = await r.store.getDeadLetter(`${this.id}/settle`);
    if (dead) m.dead.set(dead.jobId, dead.poisonedAt);
    await sameDeadLetters(m, r);
  }
  toString = () =>
    `deliver(${this.id}, ${this.outcome}${
      this.crashAt === null ? "" : `, crash at write ${this.crashAt}`
    }${this.copies > 1 ? ", duplicated" : ""})`;
}

const anyIntent = fc.constantFrom(...INTENTS);
const anyState = fc.constantFrom(...INTENT_STATES);
const anyHold = fc.constantFrom<HoldState | null>(
  null,
  "pending",
  "voided",
  "captured",
);

const createIntent = fc.tuple(
  anyIntent,
  fc.constantFrom<IntentState>("created", "authorized", "settling"),
  anyHold,
  fc.constantFrom(null, "sent" as const, "not_sent" as const),
)
  .map(([id, state, hold, last]) =>
    new CreateIntent(
      id,
      state,
      state === "authorized" ? "pending" : hold,
      last,
    )
  );

const commands = [
  createIntent,
  createIntent, // twice: most commands need an intent to act on
  fc.tuple(
    anyIntent,
    anyState,
    fc.constantFrom(undefined, "void" as const, "capture" as const),
  ).map(
    ([id, to, ledger]) => new Move(id, to, ledger),
  ),
  fc.tuple(anyIntent, fc.nat({ max: 2 })).map(([id, pick]) =>
    new StaleMove(id, pick)
  ),
  fc.tuple(
    anyIntent,
    fc.constantFrom("record" as const, "void" as const, "capture" as const),
  ).map(
    ([id, op]) => new Hold(id, op),
  ),
  fc.constantFrom(...JOBS).map((jobId) => new Count(jobId)),
  fc.tuple(
    fc.constantFrom(...LEASES),
    fc.constantFrom(...OWNERS),
    fc.constantFrom("keep" as const, "release" as const),
    fc.constantFrom(0, 1, 500, 999, 1000, 1001),
  ).map(([key, owner, op, advance]) => new Lease(key, owner, op, advance)),
  fc.tuple(
    fc.constantFrom("dl_a/settle", "dl_b/settle", "dl_c/settle"),
    fc.nat({ max: 50 }),
  ).map(
    ([jobId, at]) => new PutDeadLetter(jobId, at),
  ),
  fc.constantFrom("dl_a/settle", "dl_b/settle", "pi_a/settle").map((jobId) =>
    new Redrive(jobId)
  ),
  fc.tuple(
    anyIntent,
    fc.constantFrom<SendOutcome>(
      "sent",
      "not_sent",
      "poison_not_sent",
      "unknown",
    ),
    fc.option(fc.nat({ max: 8 }), { nil: null }),
    fc.constantFrom(1, 1, 2),
  ).map(([id, outcome, crashAt, copies]) =>
    new Deliver(id, outcome, crashAt, copies)
  ),
];

/** A store that dies at write number `crashAt` of one delivery (and stays dead for it). */
function crashing(store: Store, crashAt: number | null): Store {
  let writes = 0;
  let dead = false;
  const reads = new Set([
    "getIntent",
    "deliveries",
    "getDeadLetter",
    "listDeadLetters",
  ]);
  return new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        if (dead) throw new Error("process crashed");
        if (!reads.has(String(key)) && writes++ === crashAt) {
          dead = true;
          throw new Error("process crashed");
        }
        return await value.apply(target, args);
      };
    },
  });
}

function realFor(store: Store): Real {
  const now = { ms: 0 };
  return {
    store,
    versions: new Map(),
    async deliver(intentId, outcome, crashAt, copies) {
      const broadcastsWithoutFunds: string[] = [];
      const sender: Sender = {
        async send(intent) {
          // I6, checked against the store itself: nothing is broadcast for
          // an intent whose hold is not pending.
          // (Recorded, not thrown: the relayer would take a throw for a failed send.)
          const hold = (await store.getIntent(intent.id))?.hold;
          if (hold !== "pending") {
            broadcastsWithoutFunds.push(`${intent.id} (hold ${hold})`);
          }
          switch (outcome) {
            case "sent":
              return Promise.resolve({ txHash: `0x${intent.id}` });
            case "not_sent":
              return Promise.reject(notSent(new Error("signer refused")));
            case "poison_not_sent":
              return Promise.reject(
                poison(notSent(new Error("chain id mismatch"))),
              );
            default:
              return Promise.reject(new Error("timeout"));
          }
        },
        receipt: () => Promise.resolve("confirmed"),
      };
      const relayer: Relayer = createRelayer({
        store: crashing(store, crashAt),
        sender,
        policy: { maxDeliveries: 3, stuckAfterMs: 0 },
        now: () => now.ms,
        random: () => 0.5,
        leaseMs: 1000,
      });
      now.ms += 60_000;
      const results = await Promise.allSettled(
        Array.from(
          { length: copies },
          () => relayer.deliver({ intentId, kind: "settle" }),
        ),
      );
      assert.deepEqual(
        broadcastsWithoutFunds,
        [],
        "I6: a broadcast behind a hold that is not pending",
      );
      // A delivery may only fail because the process "crashed" (or the
      // store refused a stale write); anything else is a bug.
      for (const result of results) {
        if (result.status === "rejected") {
          const error = result.reason;
          assert.ok(
            (error instanceof Error && error.message === "process crashed") ||
              error instanceof ConflictError,
            `a delivery threw: ${String(error)}`,
          );
        }
      }
    },
  };
}

function modelRun(backend: Backend, wrap: (store: Store) => Store = (s) => s) {
  return fc.asyncProperty(
    fc.commands(commands, { maxCommands: 60, size: "medium" }),
    async (cmds) => {
      const { store, close } = await backend.open();
      try {
        const model: Model = {
          intents: new Map(),
          deliveries: new Map(),
          leases: new Map(),
          dead: new Map(),
          now: 0,
        };
        await fc.asyncModelRun(
          () => ({ model, real: realFor(wrap(store)) }),
          cmds,
        );
      } finally {
        await close();
      }
    },
  );
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} behaves like the plain model under store and relayer operations`, async () => {
    await fc.assert(modelRun(backend), {
      numRuns: runs(backend.name === "MemoryStore" ? 200 : 100),
    });
  });
}

Deno.test("the model-based test catches a store that skips the version check", async () => {
  /** Compares nothing: reads the current version and writes over whatever is there. */
  const careless = (store: Store): Store =>
    new Proxy(store, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (key === "transition") {
          return async (
            id: string,
            change: Parameters<Store["transition"]>[1],
          ) => {
            const current = await target.getIntent(id);
            return await target.transition(id, {
              ...change,
              version: current?.version ?? change.version,
            });
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  assert.equal(await catchesAsync(modelRun(memoryBackend, careless)), true);
});
