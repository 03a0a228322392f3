/**
 * Clocks (review): two instances, each with a store of its own over one
 * shared state (one MemoryStore object, two Deno KV handles on one file,
 * two PostgresStores on one schema with a client each), whose clocks
 * disagree by up to `clockSkewMs` (30 s here, as `CLOCK_SKEW=30s` sets),
 * one of them stepped back mid-run as NTP does. Neither may send while the
 * other's send is in flight by real time (I5), nor void the hold behind it
 * (I6); past the bound the docs promise nothing, and it shows.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, MemoryStore, type Store } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { connect, freshSchema, postgresAvailable } from "../_postgres.ts";
import { gatedSender } from "./_gated_sender.ts";
import { slowWriteAhead } from "../_stores.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const SKEW = 30_000;
const LEASE = 20_000;
/** The Sender's timeout: `LEASE` = 2 × it, the least `loadConfig` takes. */
const SENDER_TIMEOUT = 10_000;
const POLICY = {
  maxDeliveries: 10,
  baseMs: 1_000,
  capMs: 60_000,
  jitter: "none" as const,
  stuckAfterMs: 10_000,
};

/** Two stores over one state, one per instance. */
interface Pair {
  readonly a: Store;
  readonly b: Store;
  close(): Promise<void>;
}

const PAIRS: readonly { name: string; open(): Promise<Pair> }[] = [
  {
    name: "MemoryStore (one object)",
    open() {
      const store = new MemoryStore();
      return Promise.resolve({ a: store, b: store, close: async () => {} });
    },
  },
  {
    name: "KvStore (two handles on one file)",
    async open() {
      const dir = await Deno.makeTempDir();
      const path = `${dir}/relayer.kv`;
      const kvA = await Deno.openKv(path);
      const kvB = await Deno.openKv(path);
      return {
        a: new KvStore(kvA),
        b: new KvStore(kvB),
        async close() {
          kvA.close();
          kvB.close();
          await Deno.remove(dir, { recursive: true });
        },
      };
    },
  },
  ...(postgresAvailable
    ? [{
      name: "PostgresStore (two clients on one schema)",
      async open(): Promise<Pair> {
        const sqlA = await connect(2);
        const sqlB = await connect(2);
        const schema = freshSchema();
        const a = new PostgresStore(sqlA, { schema });
        await a.migrate();
        return {
          a,
          b: new PostgresStore(sqlB, { schema }),
          async close() {
            await sqlA.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
            await sqlA.end();
            await sqlB.end();
          },
        };
      },
    }]
    : []),
];

/**
 * `store`, whose write-ahead (the write that keeps the lease across a send)
 * takes `takesMs` of real time, during which `clock` is stepped by
 * `stepMs` (negative: back, as NTP corrects a clock that ran fast).
 */
function steppedWriteAhead(
  store: Store,
  real: { t: number },
  clock: { offset: number },
  takesMs: number,
  stepMs: number,
): Store {
  // `slowWriteAhead` moves real time once a write-ahead: the clock steps
  // with it.
  const stepping = {
    get t() {
      return real.t;
    },
    set t(t: number) {
      real.t = t;
      clock.offset += stepMs;
    },
  };
  return slowWriteAhead(store, stepping, takesMs);
}

interface Run {
  /** The holder's clock, against real time, when it writes ahead. */
  readonly holderOffsetMs: number;
  /** How far the holder's clock steps during its write-ahead. */
  readonly holderStepMs: number;
  /** How long the write-ahead takes, by real time. */
  readonly writeAheadMs: number;
  /** The contender's clock, against real time. */
  readonly contenderOffsetMs: number;
  /** The contender's delivery number. */
  readonly contenderDelivery: number;
}

/**
 * The holder (instance A) writes ahead and sends; the send is held in
 * flight until its Sender timeout runs out by real time, less a
 * millisecond. The contender (instance B) delivers the job then. Returns
 * the most sends in flight at once, the contender's outcome, and the
 * intent after both.
 */
async function run(pair: Pair, r: Run) {
  await pair.a.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  const real = { t: 1_800_000_000_000 };
  const holderClock = { offset: r.holderOffsetMs };
  const gate = gatedSender();
  const common = {
    sender: gate.sender,
    leaseMs: LEASE,
    clockSkewMs: SKEW,
    policy: POLICY,
  };
  const holder = createRelayer({
    ...common,
    store: steppedWriteAhead(
      pair.a,
      real,
      holderClock,
      r.writeAheadMs,
      r.holderStepMs,
    ),
    now: () => real.t + holderClock.offset,
  });
  const contender = createRelayer({
    ...common,
    store: pair.b,
    now: () => real.t + r.contenderOffsetMs,
  });
  const started = gate.nextStart();
  const first = holder.deliver(JOB, 1);
  await started;
  // The send is still in flight: a millisecond short of its timeout.
  real.t += SENDER_TIMEOUT - 1;
  const second = await Promise.race([
    contender.deliver(JOB, r.contenderDelivery),
    gate.nextStart().then(() => "sent" as const),
  ]);
  gate.releaseAll();
  await first.catch(() => {});
  if (second === "sent") gate.releaseAll();
  return {
    maxInFlight: gate.maxInFlight,
    second,
    intent: await pair.b.getIntent(JOB.intentId),
  };
}

for (const pair of PAIRS) {
  Deno.test(`${pair.name}: a contender 30s ahead (clockSkewMs 30s) does not send beside a send in flight`, async () => {
    const opened = await pair.open();
    try {
      const out = await run(opened, {
        holderOffsetMs: 0,
        holderStepMs: 0,
        writeAheadMs: LEASE / 2,
        contenderOffsetMs: SKEW,
        contenderDelivery: 2,
      });
      assert.equal(out.maxInFlight, 1, JSON.stringify(out.second));
      assert.notEqual(out.second, "sent");
    } finally {
      await opened.close();
    }
  });

  Deno.test(`${pair.name}: a holder whose clock steps 30s back during its write-ahead (the write measured short) still sends only while no other instance acts`, async () => {
    const opened = await pair.open();
    try {
      // The write-ahead takes 39 s of real time, half the lease and 29 s:
      // by the stepped clock, 9 s, so the holder sends. Its send lasts to
      // 49 s after the lease was taken; the contender, on real time,
      // reads the lease as live until 20 s + 30 s.
      const out = await run(opened, {
        holderOffsetMs: 0,
        holderStepMs: -(SKEW - 1_000),
        writeAheadMs: LEASE / 2 + SKEW - 1_000 - 1,
        contenderOffsetMs: 0,
        contenderDelivery: 2,
      });
      assert.equal(out.maxInFlight, 1, JSON.stringify(out.second));
    } finally {
      await opened.close();
    }
  });

  Deno.test(`${pair.name}: a contender 30s ahead at the job's last delivery neither sends nor voids the hold behind a send in flight`, async () => {
    const opened = await pair.open();
    try {
      const out = await run(opened, {
        holderOffsetMs: 0,
        holderStepMs: 0,
        writeAheadMs: LEASE / 2,
        contenderOffsetMs: SKEW,
        contenderDelivery: POLICY.maxDeliveries,
      });
      assert.equal(out.maxInFlight, 1);
      assert.notEqual(out.second, "sent");
      assert.equal(
        typeof out.second === "object" && out.second.action,
        "retry",
        JSON.stringify(out.second),
      );
      assert.equal(out.intent?.hold, "pending");
      assert.notEqual(out.intent?.state, "failed");
    } finally {
      await opened.close();
    }
  });

  // Past the bound: what docs/policy.md says ("can send twice at once").
  Deno.test(`${pair.name}: past the bound (a contender 31s ahead, clockSkewMs 30s) two sends are in flight at once, as the docs say`, async () => {
    const opened = await pair.open();
    try {
      const out = await run(opened, {
        holderOffsetMs: 0,
        holderStepMs: 0,
        writeAheadMs: LEASE / 2,
        contenderOffsetMs: SKEW + 1_000,
        contenderDelivery: 2,
      });
      assert.equal(out.maxInFlight, 2);
      assert.equal(out.second, "sent");
    } finally {
      await opened.close();
    }
  });
}
