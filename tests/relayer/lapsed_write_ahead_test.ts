/**
 * A delivery that meets a send in flight on record whose lease is over (a
 * write-ahead that landed with its answer lost, a delivery that died
 * mid-send) while an earlier tx of the payment confirmed: it settles on
 * that tx at once, as the queue's give-up does, and sends nothing. The
 * send in flight reuses that tx's nonce, so no rescue of it can land.
 */
import assert from "node:assert/strict";
import {
  ConflictError,
  createRelayer,
  type Intent,
  type ReceiptStatus,
  type Relayer,
  ScriptedSender,
  type Sender,
  type Store,
} from "../../mod.ts";
import { type Backend, BACKENDS, overriding } from "../_stores.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
/** Past the default lease (30 s) and clock skew (5 s). */
const LEASE_LAPSED_MS = 35_000;
/** Past the default lease and the default `stuckAfter` (5 min). */
const STUCK_MS = 301_000;

interface World {
  relayer: Relayer;
  store: Store;
  clock: { now: number };
  receipts: Record<string, ReceiptStatus>;
  /** The Sender's sends so far. */
  sends(): number;
  /** The tx hashes whose receipt was asked, in order. */
  asked: string[];
  close(): Promise<void> | void;
}

/**
 * pi_0001 settling on `backend`, its tx 0x1 sent long ago and still
 * pending, so the first delivery rescues it: the rescue's write-ahead
 * lands and its answer is lost, nothing sent. The relayer sees the store
 * through `wrap`, if given; the Sender answers a send with 0x2.
 */
async function behindLostWriteAhead(
  backend: Backend,
  wrap: (store: Store) => Store = (store) => store,
): Promise<World> {
  const { store, close } = await backend.open();
  await store.createIntent({
    id: job.intentId,
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
  });
  const scripted = new ScriptedSender({
    pi_0001: { sends: [{ txHash: "0x2" }] },
  });
  const receipts: Record<string, ReceiptStatus> = {};
  const asked: string[] = [];
  const sender: Sender = {
    send: (intent, options) => scripted.send(intent, options),
    receipt(txHash) {
      asked.push(txHash);
      return Promise.resolve(receipts[txHash] ?? "pending");
    },
  };
  const blip = new Error("connection reset by peer");
  let lose = true;
  const viewed = overriding(wrap(store), {
    async beginBroadcast(id, version, at, options) {
      const after = await store.beginBroadcast(id, version, at, options);
      if (!lose) return after;
      lose = false;
      throw blip;
    },
  });
  const clock = { now: 1_000_000 };
  const relayer = createRelayer({
    store: viewed,
    sender,
    policy: { maxDeliveries: 5, jitter: "none" },
    now: () => clock.now,
    random: () => 0,
  });
  await assert.rejects(relayer.deliver(job, 1), (error) => error === blip);
  const sends = () =>
    scripted.calls.filter((call) => call.method === "send").length;
  const inFlight = await read(store);
  assert.equal(inFlight.broadcasting, clock.now, "the write-ahead landed");
  assert.equal(sends(), 0);
  return { relayer, store, clock, receipts, sends, asked, close };
}

async function read(store: Store): Promise<Intent> {
  const found = await store.getIntent(job.intentId);
  assert.ok(found !== null);
  return found;
}

/** Asserts pi_0001 settled on 0x1, captured, the write-ahead cleared. */
async function settledOn0x1(store: Store): Promise<void> {
  const after = await read(store);
  assert.deepEqual(
    [after.state, after.hold, after.broadcasting, after.txHashes],
    ["settled", "captured", null, ["0x1"]],
  );
}

/**
 * `store` as a store of one's own that ignores `Transition.confirmed`: it
 * refuses the capture behind a send in flight, marking the refusal unless
 * `unmarked`.
 */
function ignoringConfirmed(unmarked = false) {
  return (store: Store): Store =>
    overriding(store, {
      async transition(id, change, options) {
        const { confirmed: _, ...rest } = change;
        try {
          return await store.transition(id, rest, options);
        } catch (error) {
          if (!unmarked || !(error instanceof ConflictError)) throw error;
          throw new ConflictError(error.message);
        }
      },
    });
}

/**
 * Deliveries 2 and 3 behind the lapsed write-ahead, as before the settle
 * behind it: the first waits (not stuck yet), the second, past
 * `stuckAfter`, rescues on the kept nonce with 0x2.
 */
async function waitsThenRescues(t: World): Promise<void> {
  const waiting = await t.relayer.deliver(job, 2);
  assert.deepEqual(
    [waiting.action, waiting.reason],
    ["retry", "settling for 35s without tx hash, waiting"],
  );
  t.clock.now += STUCK_MS;
  const rescued = await t.relayer.deliver(job, 3);
  assert.deepEqual(
    [rescued.action, rescued.reason],
    ["retry", "sent 0x2, waiting for confirmation"],
  );
  assert.equal(t.sends(), 1);
}

for (const backend of BACKENDS) {
  const test = (title: string, body: () => Promise<void>) =>
    Deno.test(`${title} [${backend.name}]`, body);

  test("a delivery behind a lapsed write-ahead settles at once on an earlier tx that confirmed, sending nothing, where it rescued into the spent nonce", async () => {
    const t = await behindLostWriteAhead(backend);
    try {
      t.receipts["0x1"] = "confirmed";
      // The write-ahead's lease holds: busy, no receipt asked, nothing sent.
      const held = await t.relayer.deliver(job, 2);
      assert.equal(held.action, "retry", JSON.stringify(held));
      assert.deepEqual(t.asked, ["0x1"]); // the first delivery's
      t.clock.now += STUCK_MS;
      const outcome = await t.relayer.deliver(job, 3);
      assert.deepEqual(
        [outcome.action, outcome.reason],
        ["done", "0x1 confirmed, intent settled"],
      );
      assert.equal(t.sends(), 0, "a rescue was sent");
      await settledOn0x1(t.store);
    } finally {
      await t.close();
    }
  });

  test("a delivery behind a lapsed write-ahead settles on an earlier tx that confirmed before the payment is stuck", async () => {
    const t = await behindLostWriteAhead(backend);
    try {
      t.receipts["0x1"] = "confirmed";
      t.clock.now += LEASE_LAPSED_MS;
      const outcome = await t.relayer.deliver(job, 2);
      assert.deepEqual(
        [outcome.action, outcome.reason],
        ["done", "0x1 confirmed, intent settled"],
      );
      assert.equal(t.sends(), 0);
      await settledOn0x1(t.store);
    } finally {
      await t.close();
    }
  });

  test("a delivery behind a lapsed write-ahead with no tx confirmed waits, then rescues on the kept nonce, as before", async () => {
    const t = await behindLostWriteAhead(backend);
    try {
      t.clock.now += LEASE_LAPSED_MS;
      await waitsThenRescues(t);
      const after = await read(t.store);
      assert.deepEqual(
        [after.state, after.broadcasting, after.txHashes],
        ["settling", null, ["0x1", "0x2"]],
      );
    } finally {
      await t.close();
    }
  });

  for (const unmarked of [false, true]) {
    test(
      `a delivery behind a lapsed write-ahead on a store that ignores Transition.confirmed (its refusal ${
        unmarked ? "unmarked" : "marked"
      }) waits and rescues as before, then settles on the earlier tx`,
      async () => {
        const t = await behindLostWriteAhead(
          backend,
          ignoringConfirmed(unmarked),
        );
        try {
          t.receipts["0x1"] = "confirmed";
          t.clock.now += LEASE_LAPSED_MS;
          await waitsThenRescues(t);
          assert.equal((await read(t.store)).broadcasting, null);
          // Nothing in flight now: the capture needs no `confirmed`.
          const settled = await t.relayer.deliver(job, 4);
          assert.deepEqual(
            [settled.action, settled.reason],
            ["done", "0x1 confirmed, intent settled"],
          );
          const after = await read(t.store);
          assert.deepEqual(
            [after.state, after.hold, after.broadcasting],
            ["settled", "captured", null],
          );
        } finally {
          await t.close();
        }
      },
    );
  }
}

/** The queue's give-up of the job, as a Pub/Sub dead-letter would ask it. */
const giveUpOn = {
  deliveries: 5,
  queue: { queue: "pubsub", messageId: "m-1" },
};

/**
 * Two instances on one store behind pi_0001's lapsed write-ahead (its
 * earlier tx 0x1 confirmed): each reads the receipt only once both have
 * read the intent, so both plan the capture on the same version; the
 * capture of `second` goes to the store only once that of `first` has
 * been answered. Counts the captures that landed and the sends.
 */
async function twoInstancesBehind(backend: Backend) {
  const { store, close } = await backend.open();
  const broadcasting = 1_000_000;
  await store.createIntent({
    id: job.intentId,
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
    broadcasting,
  });
  let asking = 0;
  let bothAsked!: () => void;
  const barrier = new Promise<void>((resolve) => bothAsked = resolve);
  let sends = 0;
  const sender: Sender = {
    send() {
      sends++;
      return Promise.resolve({ txHash: "0x2" });
    },
    async receipt() {
      if (++asking === 2) bothAsked();
      await barrier;
      return "confirmed";
    },
  };
  let captures = 0;
  let firstAnswered!: () => void;
  const answered = new Promise<void>((resolve) => firstAnswered = resolve);
  const view = (first: boolean): Store =>
    overriding(store, {
      async transition(id, change, options) {
        if (!first) await answered;
        try {
          const after = await store.transition(id, change, options);
          if (change.to === "settled") captures++;
          return after;
        } finally {
          if (first) firstAnswered();
        }
      },
    });
  const clock = { now: broadcasting + LEASE_LAPSED_MS };
  const relayerOn = (first: boolean) =>
    createRelayer({
      store: view(first),
      sender,
      policy: { maxDeliveries: 5, jitter: "none" },
      now: () => clock.now,
      random: () => 0,
    });
  return {
    store,
    first: relayerOn(true),
    second: relayerOn(false),
    captures: () => captures,
    sends: () => sends,
    close,
  };
}

for (const backend of BACKENDS) {
  const test = (title: string, body: () => Promise<void>) =>
    Deno.test(`${title} [${backend.name}]`, body);

  for (const winner of ["delivery", "give-up"] as const) {
    test(`a delivery and another instance's give-up behind one lapsed write-ahead capture once; the ${winner} settles, the other finds it settled`, async () => {
      const t = await twoInstancesBehind(backend);
      try {
        const [byDelivery, byGiveUp] = winner === "delivery"
          ? [t.first, t.second]
          : [t.second, t.first];
        const [delivered, gaveUp] = await Promise.all([
          byDelivery.deliver(job, 2),
          byGiveUp.giveUp(job, giveUpOn),
        ]);
        assert.equal(t.captures(), 1);
        assert.equal(t.sends(), 0);
        assert.deepEqual(
          [delivered.action, gaveUp.action],
          ["done", "done"],
          JSON.stringify([delivered, gaveUp]),
        );
        const settledBy = winner === "delivery"
          ? delivered.reason
          : gaveUp.reason;
        assert.match(settledBy, /0x1 confirmed, intent settled$/);
        await settledOn0x1(t.store);
        assert.equal(
          await t.store.getDeadLetter(`${job.intentId}/settle`),
          null,
        );
      } finally {
        await t.close();
      }
    });
  }

  test("two instances' deliveries behind one lapsed write-ahead capture once: the other finds it settled", async () => {
    const t = await twoInstancesBehind(backend);
    try {
      const outcomes = await Promise.all([
        t.first.deliver(job, 2),
        t.second.deliver(job, 2),
      ]);
      assert.equal(t.captures(), 1);
      assert.equal(t.sends(), 0);
      assert.deepEqual(
        outcomes.map((outcome) => [outcome.action, outcome.reason]),
        [
          ["done", "0x1 confirmed, intent settled"],
          ["done", "intent already settled"],
        ],
      );
      await settledOn0x1(t.store);
    } finally {
      await t.close();
    }
  });

  test("a delivery behind a lapsed write-ahead recorded with every send declared not sent (a fresh nonce's) never captures on a tx on record that confirmed", async () => {
    const { store: stored, close } = await backend.open();
    try {
      const broadcasting = 1_000_000;
      // 0x1 on record, but the record says nothing left, so the send in
      // flight took a fresh nonce and may land beside 0x1. createIntent
      // refuses such an import now; one taken before is read as it was
      // stored (and so from a store of one's own that takes it).
      await stored.createIntent({
        id: job.intentId,
        state: "settling",
        hold: "pending",
        settlingSince: broadcasting,
        lastBroadcast: { outcome: "not_sent", at: 0 },
        txHashes: ["0x1"],
        broadcasting,
      });
      const store = overriding(stored, {
        getIntent: async (id) => {
          const intent = await stored.getIntent(id);
          return intent && { ...intent, mayHaveSent: false };
        },
      });
      const sender = new ScriptedSender({
        pi_0001: { sends: [{ txHash: "0x2" }], receipts: ["confirmed"] },
      });
      const relayer = createRelayer({
        store,
        sender,
        policy: { maxDeliveries: 5, jitter: "none" },
        now: () => broadcasting + LEASE_LAPSED_MS,
        random: () => 0,
      });
      const outcome = await relayer.deliver(job, 2);
      assert.deepEqual(
        [outcome.action, outcome.reason],
        ["retry", "settling for 35s without tx hash, waiting"],
      );
      const after = await read(store);
      assert.deepEqual(
        [after.state, after.hold, after.broadcasting],
        ["settling", "pending", broadcasting],
      );
      assert.deepEqual(sender.calls, []);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  for (
    const [inFlight, conflicted] of [[true, 1], [false, 1], [true, 2], [
      false,
      2,
    ]] as const
  ) {
    Deno.test(`a delivery ${inFlight ? "behind a lapsed write-ahead" : "with nothing in flight"} whose capture meets ${conflicted === 1 ? "a conflict" : "two conflicts"} that ${conflicted === 1 ? "passes" : "pass"}, nobody writing between, settles at the last delivery [${backend.name}]`, async () => {
      const { store, close } = await backend.open();
      try {
        const broadcasting = 1_000_000;
        await store.createIntent({
          id: job.intentId,
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
          broadcasting: inFlight ? broadcasting : null,
        });
        // What a store answers a lost race that left the intent as it
        // was (a serialization failure): unmarked.
        let conflicts: number = conflicted;
        const viewed = overriding(store, {
          transition(id, change, options) {
            if (conflicts-- > 0) {
              return Promise.reject(
                new ConflictError(
                  `Cannot write intent ${id} as another writer changed it at the same time; re-read it`,
                ),
              );
            }
            return store.transition(id, change, options);
          },
        });
        const scripted = new ScriptedSender({
          pi_0001: { sends: [{ txHash: "0x2" }] },
        });
        const sender: Sender = {
          send: (intent, options) => scripted.send(intent, options),
          receipt: (txHash) =>
            Promise.resolve(txHash === "0x1" ? "confirmed" : "pending"),
        };
        const relayer = createRelayer({
          store: viewed,
          sender,
          policy: { maxDeliveries: 5, jitter: "none" },
          now: () => broadcasting + LEASE_LAPSED_MS,
          random: () => 0,
        });
        const outcome = await relayer.deliver(job, 5);
        assert.deepEqual(
          [outcome.action, outcome.reason],
          ["done", "0x1 confirmed, intent settled"],
          JSON.stringify(outcome),
        );
        assert.deepEqual(scripted.calls, []);
        await settledOn0x1(store);
        assert.equal(await store.getDeadLetter(`${job.intentId}/settle`), null);
      } finally {
        await close();
      }
    });
  }
}

/**
 * pi_0001 settling on `backend` behind a send in flight written ahead at
 * 1_000_000 and lapsed (the clock at `clockMs`), its txs `txHashes` on
 * record (the last as the last broadcast), each confirmed as `confirmed`
 * says. The relayer sees the store through `methods`; counts the sends and
 * the captures tried.
 */
async function lapsedWith(
  backend: Backend,
  options: {
    txHashes: readonly string[];
    confirmed: readonly string[];
    clockMs: number;
    methods?: (store: Store) => Partial<Store>;
  },
) {
  const { store, close } = await backend.open();
  await store.createIntent({
    id: job.intentId,
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "sent", txHash: options.txHashes.at(-1)!, at: 0 },
    txHashes: [...options.txHashes],
    broadcasting: 1_000_000,
  });
  let sends = 0;
  let captures = 0;
  const sender: Sender = {
    send() {
      sends++;
      return Promise.resolve({ txHash: "0x9" });
    },
    receipt: (txHash) =>
      Promise.resolve(
        options.confirmed.includes(txHash) ? "confirmed" : "pending",
      ),
  };
  const own = options.methods?.(store) ?? {};
  const viewed = overriding(store, {
    ...own,
    transition(id, change, writeOptions) {
      if (change.to === "settled") captures++;
      return (own.transition ?? store.transition.bind(store))(
        id,
        change,
        writeOptions,
      );
    },
  });
  const relayer = createRelayer({
    store: viewed,
    sender,
    policy: { maxDeliveries: 5, jitter: "none" },
    now: () => options.clockMs,
    random: () => 0,
  });
  return {
    store,
    relayer,
    sends: () => sends,
    captures: () => captures,
    close,
  };
}

for (const backend of BACKENDS) {
  const test = (title: string, body: () => Promise<void>) =>
    Deno.test(`${title} [${backend.name}]`, body);

  for (const confirmed of ["0x1", "0x2"]) {
    test(`a delivery behind a lapsed write-ahead settles on the tx on record that confirmed (${confirmed} of 0x1 and 0x2), whichever it is`, async () => {
      const t = await lapsedWith(backend, {
        txHashes: ["0x1", "0x2"],
        confirmed: [confirmed],
        clockMs: 1_000_000 + LEASE_LAPSED_MS,
      });
      try {
        const outcome = await t.relayer.deliver(job, 2);
        assert.deepEqual(
          [outcome.action, outcome.reason],
          ["done", `${confirmed} confirmed, intent settled`],
        );
        assert.equal(t.sends(), 0);
        const after = await read(t.store);
        assert.deepEqual(
          [after.state, after.hold, after.broadcasting],
          ["settled", "captured", null],
        );
      } finally {
        await t.close();
      }
    });
  }

  test("a delivery behind a lapsed write-ahead whose capture the store fails (not a conflict) throws that failure as it came, once, and sends nothing", async () => {
    const blip = new Error("connection reset by peer");
    const t = await lapsedWith(backend, {
      txHashes: ["0x1"],
      confirmed: ["0x1"],
      // Past stuckAfter: carrying on as after a refusal would rescue.
      clockMs: 1_000_000 + STUCK_MS,
      methods: () => ({ transition: () => Promise.reject(blip) }),
    });
    try {
      await assert.rejects(t.relayer.deliver(job, 5), (e) => e === blip);
      assert.equal(t.captures(), 1);
      assert.equal(t.sends(), 0);
      const after = await read(t.store);
      assert.deepEqual(
        [after.state, after.broadcasting],
        ["settling", 1_000_000],
      );
    } finally {
      await t.close();
    }
  });

  test("a delivery behind a lapsed write-ahead whose capture meets an unmarked conflict, and whose re-read the store then fails, throws that failure at the last delivery (the store's, not the job's)", async () => {
    const blip = new Error("connection reset by peer");
    // Once each: a resolution after them (the job's failure, poisoned)
    // would read the intent and settle on 0x1.
    let conflicts = 1;
    let failures = 0;
    const t = await lapsedWith(backend, {
      txHashes: ["0x1"],
      confirmed: ["0x1"],
      clockMs: 1_000_000 + LEASE_LAPSED_MS,
      methods: (store) => ({
        transition(id, change, options) {
          if (conflicts-- <= 0) return store.transition(id, change, options);
          failures = 1;
          return Promise.reject(
            new ConflictError(
              `Cannot write intent ${id} as another writer changed it at the same time; re-read it`,
            ),
          );
        },
        getIntent: (id) =>
          failures-- === 1 ? Promise.reject(blip) : store.getIntent(id),
      }),
    });
    try {
      await assert.rejects(t.relayer.deliver(job, 5), (e) => e === blip);
      assert.equal(t.sends(), 0);
      assert.equal(await t.store.getDeadLetter(`${job.intentId}/settle`), null);
      assert.equal((await read(t.store)).state, "settling");
    } finally {
      await t.close();
    }
  });

  for (const unmarked of [false, true]) {
    test(
      `a delivery behind a lapsed write-ahead on a store that ignores Transition.confirmed tries the capture ${
        unmarked
          ? "three times (its refusal unmarked)"
          : "once (its refusal marked)"
      }, then waits`,
      async () => {
        const t = await lapsedWith(backend, {
          txHashes: ["0x1"],
          confirmed: ["0x1"],
          clockMs: 1_000_000 + LEASE_LAPSED_MS,
          methods: (store) => ({
            transition: ignoringConfirmed(unmarked)(store).transition,
          }),
        });
        try {
          const outcome = await t.relayer.deliver(job, 2);
          assert.deepEqual(
            [outcome.action, outcome.reason],
            ["retry", "settling for 35s without tx hash, waiting"],
          );
          assert.equal(t.captures(), unmarked ? 3 : 1);
          assert.equal(t.sends(), 0);
        } finally {
          await t.close();
        }
      },
    );
  }

  test("a delivery whose last broadcast's outcome is unknown, nothing in flight, asks each receipt on record once", async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: job.intentId,
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "unknown", at: 1_000_000, error: "timeout" },
        txHashes: ["0x1"],
      });
      const asked: string[] = [];
      const sender: Sender = {
        send: () => Promise.resolve({ txHash: "0x2" }),
        receipt(txHash) {
          asked.push(txHash);
          return Promise.resolve("pending");
        },
      };
      const relayer = createRelayer({
        store,
        sender,
        policy: { maxDeliveries: 5, jitter: "none" },
        now: () => 1_000_000 + LEASE_LAPSED_MS,
        random: () => 0,
      });
      const outcome = await relayer.deliver(job, 2);
      assert.deepEqual(
        [outcome.action, outcome.reason],
        ["retry", "settling for 35s without tx hash, waiting"],
      );
      assert.deepEqual(asked, ["0x1"]);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`a delivery behind a lapsed write-ahead whose capture loses a race to a write that keeps the intent settling (the send in flight recorded) plans again, and settles on the earlier tx [${backend.name}]`, async () => {
    let raced = false;
    const t = await lapsedWith(backend, {
      txHashes: ["0x1"],
      confirmed: ["0x1"],
      clockMs: 1_000_000 + LEASE_LAPSED_MS,
      methods: (store) => ({
        async transition(id, change, options) {
          if (!raced) {
            raced = true;
            // The delivery that wrote ahead records that nothing left.
            await store.recordBroadcast(id, change.version, {
              outcome: "not_sent",
              at: 1_000_000 + LEASE_LAPSED_MS,
              error: "refused",
            });
          }
          return await store.transition(id, change, options);
        },
      }),
    });
    try {
      const outcome = await t.relayer.deliver(job, 2);
      assert.deepEqual(
        [outcome.action, outcome.reason],
        ["done", "0x1 confirmed, intent settled"],
        JSON.stringify(outcome),
      );
      assert.equal(t.sends(), 0);
      const after = await read(t.store);
      assert.deepEqual(
        [after.state, after.hold, after.broadcasting],
        ["settled", "captured", null],
      );
    } finally {
      await t.close();
    }
  });
}
