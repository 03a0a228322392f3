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
