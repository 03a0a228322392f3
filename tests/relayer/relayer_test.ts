import assert from "node:assert/strict";
import {
  BusyError,
  ConflictError,
  createRelayer,
  type DeadLetter,
  formatOutcome,
  type Intent,
  MemoryStore,
  type NewIntent,
  notSent,
  type Outcome,
  poison,
  type QueueIds,
  type ReceiptStatus,
  type Relayer,
  type RelayerOptions,
  ReplayError,
  ScriptedSender,
  type Sender,
  type SenderScript,
  type Store,
  type StoredDeadLetter,
} from "../../mod.ts";
import {
  type Backend,
  BACKENDS,
  gateTransitions,
  type OpenStore,
  overriding,
} from "../_stores.ts";
import { deadLetter } from "../store/_contract.ts";
import { unmarkingRefusals } from "./_unmarked.ts";
import { notWritten } from "../../store/_not_written.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
/**
 * Past the default lease (30 s) and the clock skew another instance may
 * have (5 s): a give-up that dropped a job of an authorized intent holds
 * it until then.
 */
const LEASE_LAPSED_MS = 35_000;

/** What the store of the refusal tests answers each write it refuses. */
const BY_RULE = "Cannot settle pi_0001 by rule";

/**
 * Settling at the setup's clock, its last broadcast declared not sent: a
 * delivery sends again, the last one too (an authorized intent's first
 * send waits for a delivery that can read its receipt).
 */
const RESENDING: Omit<NewIntent, "id"> = {
  state: "settling",
  hold: "pending",
  settlingSince: 1_000_000,
  lastBroadcast: { outcome: "not_sent", at: 1_000_000 },
  mayHaveSent: false,
};

/**
 * A chain for pi_0001: sends play `script` in order; each receipt answers
 * by its tx hash from `receipts` (pending when absent; an Error is
 * thrown), so a test can tell which tx confirmed.
 */
function perHash(script: SenderScript["sends"]) {
  const scripted = new ScriptedSender({ pi_0001: { sends: script } });
  const receipts: Record<string, ReceiptStatus | Error> = {};
  const asked: string[] = [];
  const sender: Sender = {
    send: (intent, options) => scripted.send(intent, options),
    receipt(txHash) {
      asked.push(txHash);
      const status = receipts[txHash] ?? "pending";
      return status instanceof Error
        ? Promise.reject(status)
        : Promise.resolve(status);
    },
  };
  const sends = () =>
    scripted.calls.filter((call) => call.method === "send").length;
  return { sender, receipts, asked, sends };
}

function suite(backend: Backend): void {
  const open: OpenStore[] = [];
  const test = (title: string, body: () => Promise<void>) =>
    Deno.test(`${title} [${backend.name}]`, async () => {
      try {
        await body();
      } finally {
        while (open.length > 0) await open.pop()!.close();
      }
    });

  interface Setup {
    relayer: Relayer;
    store: Store;
    sender: ScriptedSender;
    clock: { now: number };
  }

  /**
   * A store holding pi_0001 and a relayer over it (or over `wrap(store)`,
   * a view of it that misbehaves); the store returned is the real one.
   */
  async function setup(
    intent: Omit<NewIntent, "id">,
    script: SenderScript = { sends: [] },
    options: Partial<RelayerOptions> = {},
    wrap: (store: Store) => Store = (store) => store,
  ): Promise<Setup> {
    const opened = await backend.open();
    open.push(opened);
    const { store } = opened;
    await store.createIntent({ id: "pi_0001", ...intent });
    const sender = new ScriptedSender({ pi_0001: script });
    const clock = { now: 1_000_000 };
    const relayer = createRelayer({
      store: wrap(store),
      sender,
      policy: { maxDeliveries: 5, jitter: "none" },
      now: () => clock.now,
      random: () => 0,
      ...options,
    });
    return { relayer, store, sender, clock };
  }

  /**
   * The operator redrives pi_0001's letter and the job published again
   * sends; then the queue repeats its give-up for `queue`: the job
   * published since owns the intent, so nothing changes.
   */
  async function redriveThenRepeat(
    relayer: Relayer,
    store: Store,
    queue: QueueIds,
    clock: { now: number },
  ): Promise<void> {
    await relayer.redrive("pi_0001/settle");
    clock.now += LEASE_LAPSED_MS; // the give-up's lease, if it took one
    assert.equal((await relayer.deliver(job, 1)).action, "retry");
    assert.equal((await intent(store)).state, "settling");
    const repeat = await relayer.giveUp(job, { deliveries: 3, queue });
    assert.equal(repeat.action, "done");
    assert.equal((await intent(store)).state, "settling");
  }

  /**
   * Delivers pi_0001's job once, as `record` and with a send scripted:
   * dropped as `resolution` (`label` names the case), nothing sent, the
   * intent left `state`.
   */
  async function neverBroadcasts(
    record: Omit<NewIntent, "id">,
    label: string,
    resolution: string,
    state: Intent["state"],
  ): Promise<void> {
    const { relayer, store, sender } = await setup(record, {
      sends: [{ txHash: "0xno" }],
    });
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison", label);
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      resolution,
    );
    assert.equal(sender.calls.length, 0);
    assert.equal((await intent(store)).state, state);
  }

  /**
   * pi_0001 as `record`, its relayer at two deliveries over a store that
   * refuses each `method` call by its rules, writing nothing, with a
   * ConflictError marked `refused` (unmarked, as a store of one's own
   * may, if `marked` is false); `tries()` counts the calls refused.
   */
  async function refusingByRule(
    record: Omit<NewIntent, "id">,
    method: "transition" | "beginBroadcast",
    marked = true,
  ) {
    let tries = 0;
    const refuse = () => {
      tries++;
      return Promise.reject(
        marked
          ? new ConflictError(BY_RULE, { refused: true })
          : new ConflictError(BY_RULE),
      );
    };
    const { relayer, store } = await setup(
      record,
      undefined,
      { policy: { maxDeliveries: 2, jitter: "none" } },
      (store) =>
        overriding(
          store,
          method === "transition"
            ? { transition: refuse }
            : { beginBroadcast: refuse },
        ),
    );
    return { relayer, store, tries: () => tries };
  }

  async function intent(store: Store): Promise<Intent> {
    const found = await store.getIntent("pi_0001");
    assert.ok(found);
    return found;
  }

  test("createRelayer() settles an authorized intent: send, wait for the receipt, capture, settle", async () => {
    const { relayer, store, sender, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }], receipts: ["pending", "confirmed"] },
    );
    assert.deepEqual(await relayer.deliver(job, 1), {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason: "sent 0xabc, waiting for confirmation",
    });
    const settling = await intent(store);
    assert.equal(settling.state, "settling");
    assert.equal(settling.settlingSince, 1_000_000);
    assert.deepEqual(settling.lastBroadcast, {
      outcome: "sent",
      txHash: "0xabc",
      at: 1_000_000,
    });

    clock.now += 5000;
    assert.deepEqual(await relayer.deliver(job, 2), {
      action: "retry",
      delivery: 2,
      delayMs: 10_000,
      reason: "waiting for 0xabc to confirm",
    });
    clock.now += 10_000;
    assert.deepEqual(await relayer.deliver(job, 3), {
      action: "done",
      delivery: 3,
      reason: "0xabc confirmed, intent settled",
    });
    const settled = await intent(store);
    assert.equal(settled.state, "settled");
    assert.equal(settled.hold, "captured");
    assert.deepEqual(sender.calls, [
      { method: "send", intentId: "pi_0001", replace: false },
      { method: "receipt", txHash: "0xabc" },
      { method: "receipt", txHash: "0xabc" },
    ]);
  });

  test('createRelayer() retries a created intent with "not authorized yet", then drops the job untouched', async () => {
    const { relayer, store } = await setup({ state: "created" }, undefined, {
      policy: { maxDeliveries: 2, jitter: "none" },
    });
    const before = await intent(store);
    assert.deepEqual(await relayer.deliver(job, 1), {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason: "not authorized yet",
    });
    assert.deepEqual(await relayer.deliver(job, 2), {
      action: "poison",
      delivery: 2,
      cause: "exhausted",
      reason: "no luck after 2 deliveries",
      resolution: "job dropped, intent still created",
    });
    const after = await intent(store);
    assert.equal(after.state, "created");
    assert.equal(after.hold, null);
    assert.equal(after.version, before.version, "not a byte written");
  });

  test("createRelayer() waits for a settling intent without tx hash, then rescues it with the same nonce", async () => {
    const { relayer, sender, clock } = await setup(
      { state: "settling", hold: "pending", settlingSince: 1_000_000 - 5000 },
      { sends: [{ txHash: "0xr" }] },
    );
    assert.equal(
      (await relayer.deliver(job, 1) as { reason: string }).reason,
      "settling for 5s without tx hash, waiting",
    );
    assert.equal(sender.calls.length, 0);
    clock.now += 295_000; // exactly stuckAfter (5m) since settlingSince
    assert.equal(
      (await relayer.deliver(job, 2) as { reason: string }).reason,
      "sent 0xr, waiting for confirmation",
    );
    assert.deepEqual(sender.calls, [{
      method: "send",
      intentId: "pi_0001",
      replace: true,
    }]);
  });

  test("createRelayer() treats an imported settling intent as one that may have sent: a tx hash on record is resent with the same nonce, and a rescue declared unsent goes to review, not to failed", async () => {
    // Imported with a hash on record, though the last send stayed home:
    // 0xold may still mine, so only its nonce may be used again.
    const withHash = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "not_sent", at: 1_000_000 },
        txHashes: ["0xold"],
      },
      { sends: [{ txHash: "0xnew" }] },
    );
    await withHash.relayer.deliver(job, 1);
    assert.deepEqual(
      withHash.sender.calls.filter((call) => call.method === "send"),
      [{ method: "send", intentId: "pi_0001", replace: true }],
    );
    // Imported settling with nothing on record: a crash may have hidden a
    // send (DESIGN §5), so a rescue the signer declares unsent is no proof.
    const hidden = await setup(
      { state: "settling", hold: "pending", settlingSince: 0 },
      { sends: [{ error: poison(notSent(new Error("nonce too low"))) }] },
    );
    const outcome = await hidden.relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison");
    assert.equal(
      (outcome as { resolution: string }).resolution,
      "an earlier broadcast may have been sent, needs review",
    );
    const after = await intent(hidden.store);
    assert.deepEqual([after.state, after.hold], ["needs_review", "pending"]);
  });

  test("createRelayer() sends an imported authorized intent that may have sent with the same nonce (replace: true), and one that has not with a fresh one", async () => {
    // The Sender signs a `replace: false` send with a fresh nonce: for an
    // intent whose record says a tx of it may be out there, that tx and
    // the new one could both land, and the payee be paid twice.
    const mayHave: Omit<NewIntent, "id">[] = [
      { mayHaveSent: true },
      { txHashes: ["0xold"] },
      { lastBroadcast: { outcome: "sent", txHash: "0xold", at: 0 } },
      { lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" } },
    ];
    for (const record of [...mayHave, {}]) {
      const { relayer, sender } = await setup(
        { state: "authorized", hold: "pending", ...record },
        { sends: [{ txHash: "0xnew" }] },
      );
      await relayer.deliver(job, 1);
      assert.deepEqual(
        sender.calls.filter((call) => call.method === "send"),
        [{
          method: "send",
          intentId: "pi_0001",
          replace: Object.keys(record).length > 0,
        }],
        JSON.stringify(record),
      );
    }
  });

  test("createRelayer() rescues an unknown broadcast only after stuckAfter", async () => {
    const { relayer, sender, clock } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "unknown", at: 1_000_000, error: "timeout" },
      },
      { sends: [{ txHash: "0xr" }] },
      { policy: { maxDeliveries: 5, jitter: "none", stuckAfterMs: 60_000 } },
    );
    clock.now += 59_999;
    assert.equal(
      (await relayer.deliver(job, 1) as { reason: string }).reason,
      "settling for 59.999s without tx hash, waiting",
    );
    clock.now += 1;
    await relayer.deliver(job, 2);
    assert.deepEqual(sender.calls, [{
      method: "send",
      intentId: "pi_0001",
      replace: true,
    }]);
  });

  test("createRelayer() measures stuck from the later of settlingSince and the last broadcast: a rescue with an unknown outcome waits another stuckAfter", async () => {
    const { relayer, sender, clock } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
      },
      {
        sends: [
          { error: new Error("timeout") }, // the rescue's outcome is unknown too
          { txHash: "0xr2" },
        ],
      },
      { policy: { maxDeliveries: 9, jitter: "none", stuckAfterMs: 60_000 } },
    );
    clock.now = 60_000;
    await relayer.deliver(job, 1); // stuck since 0: rescue (unknown again)
    const sends = () => sender.calls.filter((c) => c.method === "send").length;
    assert.equal(sends(), 1);
    clock.now = 60_001;
    assert.equal(
      (await relayer.deliver(job, 2) as { reason: string }).reason,
      "settling for 1ms without tx hash, waiting",
      "the rescue restarted the clock",
    );
    clock.now = 119_999;
    await relayer.deliver(job, 3);
    assert.equal(sends(), 1, "not repeated on every delivery");
    clock.now = 120_000;
    await relayer.deliver(job, 4);
    assert.equal(sends(), 2, "repeated after another stuckAfter");
  });

  test("createRelayer() broadcasts again after a declared not-sent, writing ahead that a send started", async () => {
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      {
        sends: [{ error: notSent(new Error("nonce gap")) }, { txHash: "0x2" }],
      },
    );
    assert.equal(
      (await relayer.deliver(job, 1) as { reason: string }).reason,
      "send: nonce gap",
    );
    const failedOnce = await intent(store);
    assert.deepEqual(failedOnce.lastBroadcast, {
      outcome: "not_sent",
      at: 1_000_000,
      error: "nonce gap",
    });

    const seen: string[] = [];
    const original = sender.send.bind(sender);
    sender.send = (i, o) => {
      seen.push(i.broadcasting === null ? "nothing in flight" : "in flight");
      return original(i, o);
    };
    await relayer.deliver(job, 2);
    // What was on record while the Sender was sending: a broadcast in flight,
    // so a crash now could never leave a bare "not_sent" behind.
    assert.deepEqual(seen, ["in flight"]);
    assert.equal((await intent(store)).lastBroadcast?.txHash, "0x2");
  });

  test('createRelayer() rethrows a failed send as "send: <message>" and records unknown, whatever the error\'s message is', async () => {
    // An Error whose message was set to a number still gives a string.
    const odd = new Error("x");
    (odd as { message: unknown }).message = 42;
    const cases: [Error, string][] = [
      [new Error("rpc: connection refused"), "rpc: connection refused"],
      [odd, "Error: 42"],
    ];
    for (const [error, message] of cases) {
      const { relayer, store } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ error }] },
      );
      assert.equal(
        (await relayer.deliver(job, 1) as { reason: string }).reason,
        `send: ${message}`,
      );
      assert.deepEqual((await intent(store)).lastBroadcast, {
        outcome: "unknown",
        at: 1_000_000,
        error: message,
      });
    }
  });

  test("createRelayer() resolves a queue's give-up for a settling intent, even with an older dead letter of the job on record", async () => {
    const { store, sender, clock } = await setup({ state: "created" }, {
      sends: [{ error: new Error("rpc timeout") }],
    });
    const relayerWith = (maxDeliveries: number) =>
      createRelayer({
        store,
        sender,
        policy: { maxDeliveries, jitter: "none" },
        now: () => clock.now,
        random: () => 0,
      });
    // Poisoned while created: dropped, with a letter.
    assert.equal((await relayerWith(1).deliver(job, 1)).action, "poison");
    const dropped = (await store.getDeadLetter("pi_0001/settle"))!;
    assert.equal(dropped.resolution, "job dropped, intent still created");
    // Then authorized, and a later delivery of the job sends, outcome unknown.
    await store.recordHold("pi_0001");
    await store.transition("pi_0001", {
      from: "created",
      to: "authorized",
      version: (await intent(store)).version,
      at: clock.now,
    });
    assert.equal((await relayerWith(5).deliver(job, 1)).action, "retry");
    assert.equal((await intent(store)).state, "settling");
    // The queue gives up: the settling intent is resolved (a send may have
    // left, so to review), and the letter says so.
    const outcome = await relayerWith(5).giveUp(job, {
      deliveries: 11,
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    assert.equal(outcome.action, "poison");
    assert.equal((await intent(store)).state, "needs_review");
    assert.notEqual(
      (await store.getDeadLetter("pi_0001/settle"))!.resolution,
      dropped.resolution,
    );
  });

  test("createRelayer() changes nothing on a queue's repeated give-up for a message it already resolved, though a job published since is settling the intent", async () => {
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
    );
    for (
      const [queue, other] of [
        [{ queue: "qstash", messageId: "msg_A" }, {
          queue: "qstash",
          messageId: "msg_B",
        }],
        [{ queue: "cloudflare", dlqId: "dlq-1" }, {
          queue: "cloudflare",
          dlqId: "dlq-2",
        }],
      ] as const
    ) {
      if (queue.queue === "cloudflare") {
        // Start again from authorized, with no letter on record.
        await store.createIntent({
          id: "pi_0002",
          state: "authorized",
          hold: "pending",
        });
      }
      const id = queue.queue === "qstash" ? "pi_0001" : "pi_0002";
      const theJob = { intentId: id, kind: "settle" } as const;
      const first = await relayer.giveUp(theJob, { deliveries: 3, queue });
      assert.equal(
        (first as { resolution: string }).resolution,
        "job dropped, intent still authorized",
      );
      // A job published since, once the give-up's lease lapsed: it sends,
      // and waits for the receipt.
      clock.now += LEASE_LAPSED_MS;
      if (queue.queue === "cloudflare") {
        await store.transition(id, {
          from: "authorized",
          to: "settling",
          version: (await store.getIntent(id))!.version,
          at: 1_000_000,
        });
      } else {
        assert.equal((await relayer.deliver(theJob, 1)).action, "retry");
      }
      assert.equal((await store.getIntent(id))!.state, "settling");
      // The same message's give-up again (at least once): nothing changes.
      const repeat = await relayer.giveUp(theJob, { deliveries: 3, queue });
      assert.equal(
        (repeat as { resolution: string }).resolution,
        "job dropped, intent still authorized",
        queue.queue,
      );
      assert.equal((await store.getIntent(id))!.state, "settling", queue.queue);
      // Another message's give-up is the new job's: it resolves.
      await relayer.giveUp(theJob, { deliveries: 3, queue: other });
      assert.equal(
        (await store.getIntent(id))!.state,
        "needs_review",
        queue.queue,
      );
    }
  });

  test("createRelayer() changes nothing on a queue's repeated give-up that arrives after its dead letter was redriven, while the redriven job settles the intent", async () => {
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
    );
    const queue = { queue: "qstash", messageId: "msg_A", dlqId: "dlq_A" };
    const first = await relayer.giveUp(job, { deliveries: 3, queue });
    assert.equal(
      (first as { resolution: string }).resolution,
      "job dropped, intent still authorized",
    );
    // The operator redrives. Within the give-up's lease the redriven job
    // is busy (a delivery of the old one may still be in flight), never
    // failed; once it lapsed, it sends and waits.
    assert.deepEqual(await relayer.redrive("pi_0001/settle"), job);
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    const early = await relayer.deliver(job, 1);
    assert.equal(early.action, "retry");
    assert.match(early.reason, /busy/);
    assert.equal((await store.getIntent("pi_0001"))!.state, "authorized");
    clock.now += LEASE_LAPSED_MS;
    assert.equal((await relayer.deliver(job, 2)).action, "retry");
    assert.equal((await store.getIntent("pi_0001"))!.state, "settling");
    // QStash repeats the old message's callback, by either of its ids.
    for (
      const ids of [queue, { queue: "qstash", dlqId: "dlq_A" }, {
        queue: "qstash",
        messageId: "msg_A",
      }]
    ) {
      const repeat = await relayer.giveUp(job, { deliveries: 3, queue: ids });
      assert.equal(repeat.action, "done");
      assert.match(repeat.reason, /already resolved: nothing changed/);
    }
    assert.equal((await store.getIntent("pi_0001"))!.state, "settling");
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    // The redriven job's own give-up (another message) resolves it.
    await relayer.giveUp(job, {
      deliveries: 3,
      queue: { queue: "qstash", messageId: "msg_B", dlqId: "dlq_B" },
    });
    assert.equal((await store.getIntent("pi_0001"))!.state, "needs_review");
  });

  test("createRelayer() asks for every receipt at once, so a delivery waits one Sender timeout for them however many txs are on record", async () => {
    let inFlight = 0;
    let most = 0;
    const asked: string[] = [];
    const sender: Sender = {
      send: () => Promise.reject(new Error("signer down")),
      async receipt(txHash) {
        asked.push(txHash);
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        return txHash === "0x2" ? "confirmed" : "pending";
      },
    };
    const hashes = ["0x1", "0x2", "0x3", "0x4", "0x5"];
    // The last broadcast sent 0x5: its receipt and the four before it.
    const { relayer } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "sent", txHash: "0x5", at: 1_000_000 },
        txHashes: hashes,
      },
      undefined,
      { sender },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.reason, "0x2 confirmed, intent settled");
    assert.deepEqual(asked.toSorted(), hashes);
    assert.equal(most, 5, "all five in flight at once");
  });

  test("createRelayer() asks for the earlier receipts at once before a rescue, and settles on the newest that confirmed", async () => {
    let inFlight = 0;
    let most = 0;
    const sender: Sender = {
      send: () => Promise.reject(new Error("signer down")),
      async receipt(txHash) {
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        if (txHash === "0x1") throw new Error("unknown tx");
        return txHash === "0x4" ? "pending" : "confirmed";
      },
    };
    const { relayer } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "not_sent", at: 1_000_000 },
        txHashes: ["0x1", "0x2", "0x3", "0x4"],
      },
      undefined,
      { sender },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.reason, "0x3 confirmed, intent settled");
    assert.equal(most, 4);
  });

  test("createRelayer() ends the count a delivery was counted under (a Pub/Sub message's) with the job's dead letter, so a late duplicate of the message is counted from 1", async () => {
    // Dropped: the intent is not authorized, five deliveries of message m-1.
    const dropped = await setup({ state: "created" });
    const m1 = { countAs: "pubsub/m-1" };
    for (let n = 1; n <= 4; n++) {
      assert.equal(
        (await dropped.relayer.deliver(job, undefined, m1)).action,
        "retry",
      );
    }
    const poisoned = await dropped.relayer.deliver(job, undefined, m1);
    assert.deepEqual([poisoned.action, poisoned.delivery], ["poison", 5]);
    assert.equal(await dropped.store.deliveries("pubsub/m-1"), 0);
    const late = await dropped.relayer.deliver(job, undefined, m1);
    assert.deepEqual([late.action, late.delivery], ["retry", 1]);
    // Failed in a transition: the send declared not sent, at once.
    const failed = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(notSent(new Error("nonce too low"))) }] },
    );
    const outcome = await failed.relayer.deliver(job, undefined, {
      countAs: "pubsub/m-2",
    });
    assert.equal(outcome.action, "poison");
    assert.equal((await intent(failed.store)).state, "failed");
    assert.equal(await failed.store.deliveries("pubsub/m-2"), 0);
  });

  test("createRelayer() answers a burst of copies of one job the store counts as busy, never as a failure", async () => {
    const { relayer } = await setup({ state: "authorized", hold: "pending" });
    // 60 copies at once, none with a delivery number: the store counts them
    // (KvStore's count is a compare-and-set that many of them lose).
    const outcomes = await Promise.all(
      Array.from({ length: 60 }, () => relayer.deliver(job)),
    );
    for (const outcome of outcomes) {
      assert.ok(outcome.delivery >= 1);
      if (outcome.action === "retry") assert.ok(outcome.delayMs >= 0);
    }
  });

  test("createRelayer() uses up the signature of a delivery that finds its intent already settled, though it writes nothing", async () => {
    const { relayer, store } = await setup({
      state: "settled",
      hold: "captured",
    });
    const claim = { key: "v1=done", now: 1_000_000, expiresAt: 1_360_000 };
    const outcome = await relayer.deliver(job, 2, { claim });
    assert.equal(outcome.action, "done");
    await assert.rejects(
      store.admit({ claim: { ...claim, now: 1_000_001 }, now: 1_000_001 }),
      ReplayError,
    );
  });

  for (const n of [2, 5]) {
    test(`createRelayer() throws the store's failure of the replay record of a delivery that finds its intent already settled (delivery ${n} of 5), not a replay, when the record landed and its answer was lost`, async () => {
      const lost = new Error(
        "PostgreSQL lost the connection during the write (read ECONNRESET): it may have landed or not; the next read says which",
      );
      let lose = true;
      const { relayer, store } = await setup(
        { state: "settled", hold: "captured" },
        undefined,
        {},
        (store) =>
          overriding(store, {
            // The record commits; its answer is lost (the session ended).
            admit: async (options) => {
              const counted = await store.admit(options);
              if (!lose || options.claim === undefined) return counted;
              lose = false;
              throw lost;
            },
          }),
      );
      const claim = { key: "v1=lost", now: 1_000_000, expiresAt: 1_360_000 };
      await assert.rejects(
        relayer.deliver(job, n, { claim }),
        (error) => error === lost,
      );
      assert.equal((await intent(store)).state, "settled");
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
      // It landed: the same signed request again is a replay.
      await assert.rejects(relayer.deliver(job, n, { claim }), ReplayError);
    });
  }

  test("createRelayer() answers a first copy the store counts as busy before any count is on record as delivery 1, never as an error", async () => {
    // Every copy lost the count's compare-and-set: none is on record yet.
    const { relayer } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [] },
      {},
      (store) =>
        overriding(store, {
          admit: () => Promise.reject(new BusyError("count contended")),
        }),
    );
    const outcome = await relayer.deliver(job);
    assert.equal(outcome.action, "retry");
    assert.equal(outcome.delivery, 1);
    assert.equal(outcome.action === "retry" && outcome.delayMs, 5000);
  });

  test("createRelayer() keeps a give-up's mark 32 days, past a delivery count's 8 (Pub/Sub keeps a message up to 31), and takes it as gone once it lapsed, whether or not the store has swept it", async () => {
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
    );
    const queue = { queue: "qstash", messageId: "msg_A" };
    const gaveUpAt = clock.now;
    await relayer.giveUp(job, { deliveries: 3, queue });
    await relayer.redrive("pi_0001/settle");
    clock.now += LEASE_LAPSED_MS; // the give-up's lease
    assert.equal((await relayer.deliver(job, 1)).action, "retry");
    // After 9 days (a count would have lapsed) and up to 32: a repeat
    // changes nothing.
    const day = 24 * 60 * 60 * 1000;
    for (const after of [9 * day, 32 * day - 1]) {
      clock.now = gaveUpAt + after;
      assert.match(
        (await relayer.giveUp(job, { deliveries: 3, queue })).reason,
        /already resolved: nothing changed/,
      );
      assert.equal((await store.getIntent("pi_0001"))!.state, "settling");
    }
    // Past them, the mark is no more: the give-up resolves what it finds.
    clock.now = gaveUpAt + 32 * day;
    await relayer.giveUp(job, { deliveries: 3, queue });
    assert.equal((await store.getIntent("pi_0001"))!.state, "needs_review");
  });

  test("createRelayer() changes nothing on a queue's repeated give-up after its letter was replaced by a later poison and that one redriven", async () => {
    const { relayer, store, clock } = await setup(
      { state: "created" },
      { sends: [{ txHash: "0xabc" }] },
    );
    const queue = { queue: "qstash", messageId: "msg_A" };
    await relayer.giveUp(job, { deliveries: 3, queue });
    // The job, published again, is poisoned by the policy: its letter
    // (no queue ids) replaces the give-up's.
    assert.equal((await relayer.deliver(job, 5)).action, "poison");
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.queue,
      undefined,
    );
    // The payment is authorized, the operator redrives, the job sends.
    await store.recordHold("pi_0001");
    await store.transition("pi_0001", {
      from: "created",
      to: "authorized",
      version: (await intent(store)).version,
      at: 1,
    });
    // QStash repeats the first message's failure callback.
    await redriveThenRepeat(relayer, store, queue, clock);
  });

  test("createRelayer() changes nothing on a queue's repeated give-up after a redrive, when the first give-up crashed before it marked the message", async () => {
    let crash = true;
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) =>
        overriding(inner, {
          admit(admission) {
            if (crash && admission.count?.startsWith("gaveup/")) {
              crash = false;
              return Promise.reject(new Error("crashed before the mark"));
            }
            return inner.admit(admission);
          },
        }),
    );
    const queue = { queue: "qstash", messageId: "msg_A" };
    // The give-up resolves (the job is dropped, its letter kept with the
    // queue's ids), then crashes before it marks the message.
    await assert.rejects(
      relayer.giveUp(job, { deliveries: 3, queue }),
      /crashed before the mark/,
    );
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.queue?.messageId,
      "msg_A",
    );
    // The operator redrives; QStash repeats the message's failure callback.
    await redriveThenRepeat(relayer, store, queue, clock);
  });

  test("createRelayer() publishes each redrive of a job under its own deduplication id, so a second dead letter's redrive is not dropped as the first one's duplicate", async () => {
    const { relayer } = await setup({ state: "created" });
    const ids: string[] = [];
    const publish = (_job: unknown, id: string) => {
      ids.push(id);
      return Promise.resolve();
    };
    // Poisoned, redriven, poisoned again, redriven again.
    assert.equal((await relayer.deliver(job, 5)).action, "poison");
    await relayer.redrive("pi_0001/settle", { publish });
    assert.equal((await relayer.deliver(job, 5)).action, "poison");
    await relayer.redrive("pi_0001/settle", { publish });
    assert.equal(ids.length, 2);
    assert.ok(ids.every((id) => id.startsWith("pi_0001/settle:")), `${ids}`);
    assert.notEqual(ids[0], ids[1]);
  });

  test("createRelayer() publishes a redrive on a store made anew (a schema recreated, a file restored) under an id of its own, so the queue does not drop it as the old store's letter of the same version", async () => {
    const ids: string[] = [];
    const publish = (_job: unknown, id: string) => {
      ids.push(id);
      return Promise.resolve();
    };
    // The same job poisoned and redriven on two stores made alike (their
    // letters' versions repeat), a minute apart: within the 10 minutes
    // QStash drops a repeated id, and the second letter would be removed
    // with no job queued.
    for (const offset of [0, 60_000]) {
      const { relayer, clock } = await setup({ state: "created" });
      clock.now += offset;
      assert.equal((await relayer.deliver(job, 5)).action, "poison");
      await relayer.redrive("pi_0001/settle", { publish });
    }
    assert.equal(ids.length, 2);
    assert.notEqual(ids[0], ids[1]);
  });

  /**
   * A redrive of `pi_0001/settle` whose publish QStash took and whose
   * answer was lost (the letter stays, the job on the queue), then
   * QStash's give-up of that job as `msg_1` with the intent still
   * created, then a redrive that goes through: the letter before and
   * after the give-up, and the two deduplication ids published.
   */
  async function redriveOverGiveUp(
    relayer: Relayer,
    store: Store,
  ): Promise<
    { first: StoredDeadLetter; second: StoredDeadLetter; ids: string[] }
  > {
    const ids: string[] = [];
    await assert.rejects(
      relayer.redrive("pi_0001/settle", {
        publish: (_job, id) => {
          ids.push(id);
          return Promise.reject(new Error("QStash's answer was lost"));
        },
      }),
      /answer was lost/,
    );
    const first = await store.getDeadLetter("pi_0001/settle");
    assert.ok(first);
    await relayer.giveUp(job, {
      deliveries: 5,
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    const second = await store.getDeadLetter("pi_0001/settle");
    assert.ok(second);
    assert.equal(second.queue?.messageId, "msg_1");
    assert.notEqual(second.version, first.version);
    // The next redrive publishes under an id of its own: under the first
    // one's, QStash drops it (a repeat within 10 minutes), and the route
    // removes the letter with no job on the queue (the intent stranded).
    await relayer.redrive("pi_0001/settle", {
      publish: (_job, id) => {
        ids.push(id);
        return Promise.resolve();
      },
    });
    assert.equal(ids.length, 2);
    assert.notEqual(ids[0], ids[1]);
    return { first, second, ids };
  }

  test("createRelayer() writes a new dead letter when the queue gives up on a job redriven over a letter naming another message, so the next redrive is not dropped as a repeat of the first", async () => {
    const { relayer, store } = await setup({ state: "created" });
    await relayer.giveUp(job, {
      deliveries: 3,
      queue: { queue: "pubsub", messageId: "dl-1" },
    });
    const { first, second } = await redriveOverGiveUp(relayer, store);
    // Its own letter: this give-up's count, reason and time, not the
    // letter of the message it replaced with only the ids changed.
    assert.deepEqual(
      [second.deliveries, second.reason, second.cause],
      [5, "the queue gave up after 5 deliveries", "exhausted"],
    );
    assert.equal(first.deliveries, 3);
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  });

  test("createRelayer() writes a new dead letter when the queue gives up on a job redriven over a letter its own deliveries poisoned (no queue ids on it), so the next redrive is not dropped as a repeat of the first", async () => {
    const { relayer, store } = await setup({ state: "created" });
    // The job poisoned on its last delivery: a letter that names no message.
    assert.equal((await relayer.deliver(job, 5)).action, "poison");
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.queue,
      undefined,
    );
    const { first, second } = await redriveOverGiveUp(relayer, store);
    // The first resolution's record stands (it may be this very message's,
    // its answer lost): only the queue's ids and the version are new.
    const { version: _1, ...kept } = first;
    const { version: _2, queue: _3, ...rewritten } = second;
    assert.deepEqual(rewritten, kept);
    // The queue repeating that give-up changes nothing.
    const repeat = await relayer.giveUp(job, {
      deliveries: 5,
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    assert.equal(repeat.action, "done");
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  });

  test("createRelayer() keeps the letter that says why an intent is in review when a give-up that read it authorized lands its 'job dropped' late", async () => {
    let entered!: () => void;
    const reached = new Promise<void>((resolve) => entered = resolve);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => release = resolve);
    let held = true;
    const { relayer, store } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: new Error("timeout") }] },
      { policy: { maxDeliveries: 3, jitter: "none" } },
      (inner) =>
        overriding(inner, {
          async putDeadLetter(...args) {
            if (held) {
              held = false;
              entered();
              await gate;
            }
            return await inner.putDeadLetter(...args);
          },
        }),
    );
    // The give-up reads "authorized, no letter" and is held at its write.
    const giveUp = relayer.giveUp(job, {
      deliveries: 3,
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    await reached;
    // Meanwhile another message of the job sends, its outcome unknown, and
    // is poisoned: the intent goes to review, with the letter that says why.
    assert.equal((await relayer.deliver(job, 2)).action, "retry");
    assert.equal((await relayer.deliver(job, 3)).action, "poison");
    const why = "last broadcast unknown, needs review";
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.resolution,
      why,
    );
    release();
    await giveUp;
    assert.equal((await intent(store)).state, "needs_review");
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.resolution,
      why,
    );
  });

  test("createRelayer() treats a Sender answer without txHash as unknown", async () => {
    const { relayer, store } = await setup({
      state: "authorized",
      hold: "pending",
    }, { sends: [{ txHash: "" }] });
    assert.equal(
      (await relayer.deliver(job, 1) as { reason: string }).reason,
      'send: sender returned no txHash: ""; return the tx hash as { txHash: "0x…" }',
    );
    assert.equal((await intent(store)).lastBroadcast?.outcome, "unknown");
  });

  test("createRelayer() records a Sender's txHash over 256 characters as unknown, never in the store", async () => {
    const long = `0x${"f".repeat(70_000)}`;
    const { relayer, store } = await setup({
      state: "authorized",
      hold: "pending",
    }, { sends: [{ txHash: long }] });
    const outcome = await relayer.deliver(job, 1);
    assert.equal(
      outcome.reason,
      'send: sender returned a txHash of 70002 characters (at most 256), starting "0xffffffffffffff": the broadcast may have been sent',
    );
    const after = await intent(store);
    assert.equal(after.lastBroadcast?.outcome, "unknown");
    assert.deepEqual(after.txHashes, []);
    assert.equal(after.mayHaveSent, true);
    // Exactly 256 is recorded.
    const { relayer: ok, store: okStore } = await setup({
      state: "authorized",
      hold: "pending",
    }, { sends: [{ txHash: "a".repeat(256) }] });
    assert.match((await ok.deliver(job, 1)).reason, /^sent a{16}/);
    assert.equal((await intent(okStore)).txHashes[0]?.length, 256);
  });

  test("createRelayer() re-sends a dropped tx with the same nonce and rescues a pending one past stuckAfter", async () => {
    const { relayer, sender, clock } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 1_000_000,
        lastBroadcast: { outcome: "sent", txHash: "0x1", at: 1_000_000 },
      },
      {
        sends: [{ txHash: "0x1" }],
        receipts: ["dropped", "pending", "pending"],
      },
    );
    assert.equal(
      (await relayer.deliver(job, 1) as { reason: string }).reason,
      "sent 0x1, waiting for confirmation",
    );
    clock.now += 1000;
    assert.equal(
      (await relayer.deliver(job, 2) as { reason: string }).reason,
      "waiting for 0x1 to confirm",
    );
    clock.now += 300_000;
    await relayer.deliver(job, 3);
    // Both with the same nonce: a dropped tx may be a replacement whose
    // original mined meanwhile, and a fresh nonce could pay twice.
    assert.deepEqual(sender.calls.filter((c) => c.method === "send"), [
      { method: "send", intentId: "pi_0001", replace: true },
      { method: "send", intentId: "pi_0001", replace: true },
    ]);
  });

  test("createRelayer() settles on an earlier tx that confirmed after a rescue replaced it on record, and only on one that confirmed", async () => {
    for (
      const [rescue, confirms] of [
        // The rescue timed out (unknown): 0x1 is the only hash on record.
        [{ error: new Error("timeout") }, true],
        // The rescue sent 0x2, still pending, while 0x1 mined.
        [{ txHash: "0x2" }, true],
        // Nothing mined: no settle, whatever is asked.
        [{ txHash: "0x2" }, false],
      ] as const
    ) {
      const chain = perHash([{ txHash: "0x1" }, rescue]);
      const { relayer, store, clock } = await setup(
        { state: "authorized", hold: "pending" },
        undefined,
        { sender: chain.sender },
      );
      await relayer.deliver(job, 1); // sends 0x1
      clock.now += 300_000; // stuck: 0x1 still pending, so rescue it
      await relayer.deliver(job, 2);
      if (confirms) chain.receipts["0x1"] = "confirmed";
      clock.now += 5000;
      const outcome = await relayer.deliver(job, 3);
      const after = await intent(store);
      assert.deepEqual(
        after.txHashes,
        "txHash" in rescue ? ["0x1", "0x2"] : ["0x1"],
      );
      assert.ok(chain.asked.includes("0x1"), "the earlier tx was asked for");
      assert.equal(chain.sends(), 2, "no third send into a spent nonce");
      if (confirms) {
        assert.deepEqual(outcome, {
          action: "done",
          delivery: 3,
          reason: "0x1 confirmed, intent settled",
        });
        assert.deepEqual([after.state, after.hold], ["settled", "captured"]);
      } else {
        assert.equal(outcome.action, "retry");
        assert.deepEqual([after.state, after.hold], ["settling", "pending"]);
      }
    }
  });

  test("createRelayer() rescues even when an earlier tx's receipt cannot be read (a replaced tx the node forgot)", async () => {
    const chain = perHash([{ txHash: "0x1" }, { txHash: "0x2" }, {
      txHash: "0x3",
    }]);
    const { relayer, clock } = await setup(
      { state: "authorized", hold: "pending" },
      undefined,
      { sender: chain.sender },
    );
    await relayer.deliver(job, 1); // sends 0x1
    clock.now += 300_000;
    await relayer.deliver(job, 2); // 0x1 pending and stuck: rescue, 0x2
    chain.receipts["0x1"] = new Error("signer answered 404: no such tx");
    clock.now += 300_000;
    const outcome = await relayer.deliver(job, 3); // 0x2 stuck too: rescue
    assert.equal(
      outcome.action === "retry" && outcome.reason,
      "sent 0x3, waiting for confirmation",
    );
    assert.equal(chain.sends(), 3);
  });

  test("createRelayer() never broadcasts for an authorized intent whose hold is not pending", async () => {
    for (const hold of ["voided", "captured"] as const) {
      await neverBroadcasts(
        { state: "authorized", hold },
        hold,
        "job dropped, intent still authorized",
        "authorized",
      );
    }
  });

  test("createRelayer() finishes a settle interrupted between the capture and the state write, once its tx confirmed", async () => {
    const chain = perHash([]);
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "captured",
        settlingSince: 0,
        lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
      },
      undefined,
      { sender: chain.sender },
    );
    // Captured early (by someone else), its tx still pending: wait.
    const early = await relayer.deliver(job, 1);
    assert.equal(
      early.action === "retry" && early.reason,
      "the hold is captured, waiting for a tx on record to confirm",
    );
    assert.equal((await intent(store)).state, "settling");
    chain.receipts["0x1"] = "confirmed";
    const outcome = await relayer.deliver(job, 2);
    assert.deepEqual(outcome, {
      action: "done",
      delivery: 2,
      reason: "the hold is captured: finished an interrupted settle",
    });
    assert.equal((await intent(store)).state, "settled");
    assert.deepEqual(chain.asked, ["0x1", "0x1"]);
    assert.equal(chain.sends(), 0);
  });

  test("createRelayer() cannot broadcast behind a voided hold even through a reader that misses the void: the store refuses the write-ahead", async () => {
    const { relayer, store, sender } = await setup(
      {
        state: "settling",
        hold: "voided",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0 },
      },
      { sends: [{ txHash: "0xno" }] },
      {},
      // A stale ledger cache: the void is not seen.
      (store) =>
        overriding(store, {
          getIntent: async (id: string) => {
            const found = await store.getIntent(id);
            return found && { ...found, hold: "pending" };
          },
        }),
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "retry");
    assert.match(
      outcome.action === "retry" ? outcome.reason : "",
      /nothing may be broadcast without reserved funds/,
    );
    assert.deepEqual(sender.calls, []);
    assert.equal((await intent(store)).broadcasting, null);
  });

  test("createRelayer() never broadcasts for a settling intent with no hold on record", async () => {
    await neverBroadcasts(
      { state: "settling", settlingSince: 0 },
      "no hold",
      "no broadcast on record, needs review",
      "needs_review",
    );
  });

  test("createRelayer() sends nothing while another delivery holds the lease, and answers busy", async () => {
    const { relayer, store, sender } = await setup(
      { state: "settling", hold: "pending", settlingSince: 0 },
      { sends: [{ txHash: "0x1" }] },
    );
    // Another delivery wrote ahead of its own send and holds the lease
    // across it (a long send); this one finds the payment stuck and would
    // rescue it.
    const seen = await intent(store);
    await store.beginBroadcast("pi_0001", seen.version, 0, {
      lease: { owner: "someone else", ttlMs: 10_000_000, now: 0, keep: true },
    });
    for (const n of [1, 9]) {
      const outcome = await relayer.deliver(job, n);
      assert.equal(
        outcome.action === "retry" && outcome.reason,
        "intent pi_0001 is busy with another delivery",
        `#${n}: busy is not failure: retry, even past maxDeliveries`,
      );
    }
    assert.equal(sender.calls.length, 0);
  });

  test("createRelayer() throws the store's failure of a delivery's look at any number, the last included: nothing decided, no letter; a busy look stays busy", async () => {
    // Decided by the policy, a blip at the queue's last delivery poisoned
    // the job, and its resolution, reading the intent once the blip was
    // over, sent a payment whose tx had confirmed to review.
    let fail: Error | undefined;
    const { relayer, store } = await setup(
      { state: "settling", hold: "pending", settlingSince: 0 },
      { sends: [] },
      {},
      (store) =>
        overriding(store, {
          getIntent: (id) => {
            // The next read fails, the look; the reads after it do not.
            const failing = fail;
            fail = undefined;
            return failing ? Promise.reject(failing) : store.getIntent(id);
          },
        }),
    );
    for (const n of [1, 5, 9]) {
      const blip = new Error("connection reset by peer");
      fail = blip;
      await assert.rejects(relayer.deliver(job, n), (error) => error === blip);
    }
    assert.equal((await intent(store)).state, "settling");
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    fail = new BusyError("the pool is busy");
    assert.deepEqual(
      await relayer.deliver(job, 5),
      {
        action: "retry",
        delivery: 5,
        delayMs: 80_000,
        reason: "intent pi_0001 is busy with another delivery",
      },
    );
  });

  /**
   * A relayer over pi_0001 (settling, its tx 0x1 sent at 0, pending) whose
   * store fails the next call of `method` (by `when`) once `fail` is set;
   * the store returned is the real one.
   */
  async function failingOnce<K extends keyof Store>(
    method: K,
    when: (...args: Parameters<NonNullable<Store[K]>>) => boolean = () => true,
  ) {
    const chain = perHash([{ txHash: "0x2" }]);
    const state: { fail: Error | undefined } = { fail: undefined };
    const set = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
      },
      undefined,
      { sender: chain.sender },
      (store) =>
        overriding(store, {
          [method]: (...args: Parameters<NonNullable<Store[K]>>) => {
            const failing = state.fail;
            if (failing === undefined || !when(...args)) {
              return (store[method] as (...a: unknown[]) => unknown)
                .apply(store, args);
            }
            state.fail = undefined;
            return Promise.reject(failing);
          },
        } as Partial<Store>),
    );
    return { ...set, chain, state };
  }

  /**
   * The store's failure is thrown out of a last delivery: nothing decided,
   * no letter, pi_0001 still settling with nothing sent; then the queue's
   * give-up, which reads the receipts first, settles it on 0x1.
   */
  async function thrownThenSettled(
    t: Awaited<ReturnType<typeof failingOnce>>,
    deliver: () => Promise<unknown>,
  ): Promise<void> {
    const blip = new Error("connection reset by peer");
    t.state.fail = blip;
    await assert.rejects(deliver(), (error) => error === blip);
    assert.equal(t.state.fail, undefined, "the store failed the delivery");
    assert.equal((await intent(t.store)).state, "settling");
    assert.equal(await t.store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(t.chain.sends(), 0);
    t.chain.receipts["0x1"] = "confirmed";
    const given = await t.relayer.giveUp(job, {
      deliveries: 5,
      queue: { queue: "pubsub", messageId: "m1", dlqId: "d1" },
    });
    assert.equal(
      given.reason,
      "the queue gave up after 5 deliveries: 0x1 confirmed, intent settled",
    );
    assert.equal((await intent(t.store)).state, "settled");
  }

  test("createRelayer() throws the store's failure of the write that settles a confirmed tx at the last delivery: decided, it sent the paid payment to review", async () => {
    const t = await failingOnce(
      "transition",
      (_id, change) => change.to === "settled",
    );
    t.chain.receipts["0x1"] = "confirmed";
    await thrownThenSettled(t, () => t.relayer.deliver(job, 5));
  });

  test("createRelayer() throws the store's failure of a delivery's replay record before the signer at the last delivery: decided, it sent a payment to review with its receipt unread", async () => {
    const t = await failingOnce(
      "admit",
      (options) => options.claim !== undefined,
    );
    await thrownThenSettled(t, () =>
      t.relayer.deliver(job, 5, {
        claim: { key: "v1=ab12", now: 1_000_000, expiresAt: 1_360_000 },
      }));
  });

  test("createRelayer() throws the store's failure of a rescue's write-ahead at the last delivery: decided, it sent the payment to review before the give-up read the receipts", async () => {
    const t = await failingOnce("beginBroadcast");
    // 0x1 pending for 1000 s: stuck, rescued with its nonce.
    await thrownThenSettled(t, () => t.relayer.deliver(job, 5));
  });

  /**
   * {@linkcode failingOnce}'s pi_0001 after delivery 5 rescued it: the
   * write ahead of the rescue landed and its answer was lost (the delivery
   * threw that), so a send in flight is on record and nothing was sent.
   * Whether the rescue then left is unknown to anyone reading the store.
   */
  async function behindLostWriteAhead() {
    const t = await failingOnce("beginBroadcast");
    const blip = new Error("connection reset by peer");
    const beginBroadcast = t.store.beginBroadcast.bind(t.store);
    t.store.beginBroadcast = async (id, version, at, options) => {
      await beginBroadcast(id, version, at, options);
      throw blip;
    };
    await assert.rejects(t.relayer.deliver(job, 5), (error) => error === blip);
    return t;
  }

  test("createRelayer() settles on a queue's give-up, once the lease is over, a payment whose earlier tx confirmed behind a rescue's write-ahead that landed with its answer lost", async () => {
    const t = await behindLostWriteAhead();
    const inFlight = await intent(t.store);
    assert.equal(inFlight.state, "settling");
    assert.notEqual(inFlight.broadcasting, null);
    assert.equal(t.chain.sends(), 0);
    t.chain.receipts["0x1"] = "confirmed";
    const queue = { queue: "pubsub", messageId: "m1", dlqId: "d1" } as const;
    // The write-ahead's lease still holds: busy, nothing resolved.
    const held = await t.relayer.giveUp(job, { deliveries: 5, queue });
    assert.equal(held.action, "retry", JSON.stringify(held));
    assert.equal((await intent(t.store)).state, "settling");
    t.clock.now += LEASE_LAPSED_MS;
    const given = await t.relayer.giveUp(job, { deliveries: 5, queue });
    assert.deepEqual([given.action, given.reason], [
      "done",
      "the queue gave up after 5 deliveries: 0x1 confirmed, intent settled",
    ]);
    const after = await intent(t.store);
    assert.deepEqual(
      [after.state, after.hold, after.broadcasting, after.txHashes],
      ["settled", "captured", null, ["0x1"]],
    );
    assert.equal(await t.store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(t.chain.sends(), 0);
  });

  test("createRelayer() answers a queue's give-up busy when the write that settles on a confirmed tx finds a send's lease held, even if that lease lapses before the give-up would resolve: the payment is not sent to review", async () => {
    const t = await behindLostWriteAhead();
    t.chain.receipts["0x1"] = "confirmed";
    // The write that settles is refused busy; the lease lapses just after.
    const transition = t.store.transition.bind(t.store);
    t.store.transition = async (id, change, options) => {
      try {
        return await transition(id, change, options);
      } catch (error) {
        if (error instanceof BusyError && change.to === "settled") {
          t.clock.now += LEASE_LAPSED_MS;
        }
        throw error;
      }
    };
    const queue = { queue: "pubsub", messageId: "m1", dlqId: "d1" } as const;
    const held = await t.relayer.giveUp(job, { deliveries: 5, queue });
    assert.equal(held.action, "retry", JSON.stringify(held));
    assert.equal((await intent(t.store)).state, "settling");
    assert.equal(await t.store.getDeadLetter("pi_0001/settle"), null);
    const given = await t.relayer.giveUp(job, { deliveries: 5, queue });
    assert.equal(
      given.reason,
      "the queue gave up after 5 deliveries: 0x1 confirmed, intent settled",
    );
  });

  test("createRelayer() throws the store's failure of the re-read after a lost race at the last delivery: decided, it resolved the intent on a store that had just failed", async () => {
    const t = await failingOnce("getIntent");
    // Between the look and the rescue's write-ahead, another delivery
    // records a send of its own; the re-read after the lost race fails.
    const beginBroadcast = t.store.beginBroadcast.bind(t.store);
    let raced = false;
    t.store.beginBroadcast = async (id, version, at, options) => {
      if (!raced) {
        raced = true;
        await t.store.recordBroadcast(id, version, {
          outcome: "unknown",
          at: 999_000,
          error: "rpc timeout",
        });
        t.state.fail = blip;
      }
      return await beginBroadcast(id, version, at, options);
    };
    const blip = new Error("connection reset by peer");
    // The look passes; the failure is armed for the re-read.
    await assert.rejects(t.relayer.deliver(job, 5), (error) => error === blip);
    assert.equal((await intent(t.store)).state, "settling");
    assert.equal(await t.store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(t.chain.sends(), 0);
  });

  test("createRelayer() throws the store's failure of a delivery's replay record before it asks for an earlier tx's receipt at the last delivery: decided, it sent a payment whose earlier tx confirmed to review", async () => {
    const chain = perHash([{ txHash: "0x2" }]);
    let fail: Error | undefined;
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        txHashes: ["0x1"],
        lastBroadcast: { outcome: "not_sent", at: 0, error: "nonce gap" },
        mayHaveSent: true,
      },
      undefined,
      { sender: chain.sender },
      (store) =>
        overriding(store, {
          admit: (options) => {
            const failing = fail;
            fail = undefined;
            return failing && options.claim !== undefined
              ? Promise.reject(failing)
              : store.admit(options);
          },
        }),
    );
    chain.receipts["0x1"] = "confirmed";
    const blip = new Error("connection reset by peer");
    fail = blip;
    await assert.rejects(
      relayer.deliver(job, 5, {
        claim: { key: "v1=ab12", now: 1_000_000, expiresAt: 1_360_000 },
      }),
      (error) => error === blip,
    );
    assert.deepEqual(chain.asked, [], "no receipt asked without the record");
    assert.equal((await intent(store)).state, "settling");
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    // The same request again, its record written: 0x1 confirmed.
    const again = await relayer.deliver(job, 5, {
      claim: { key: "v1=ab12", now: 1_000_000, expiresAt: 1_360_000 },
    });
    assert.equal(again.reason, "0x1 confirmed, intent settled");
    assert.equal(chain.sends(), 0);
  });

  test("createRelayer() keeps a signed give-up's claim for the write that resolves a settling intent with no tx on record: the store failing that write, the same request again resolves it", async () => {
    const chain = perHash([]);
    let fail: Error | undefined;
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0, error: "nonce gap" },
        mayHaveSent: false,
      },
      undefined,
      { sender: chain.sender },
      (store) =>
        overriding(store, {
          transition: (id, change, options) => {
            const failing = fail;
            fail = undefined;
            return failing
              ? Promise.reject(failing)
              : store.transition(id, change, options);
          },
        }),
    );
    const blip = new Error("connection reset by peer");
    fail = blip;
    const request = {
      deliveries: 5,
      queue: { queue: "generic", messageId: "m-1" },
      claim: { key: "v1=ab12", now: 1_000_000, expiresAt: 1_360_000 },
    } as const;
    await assert.rejects(
      relayer.giveUp(job, request),
      (error) => error === blip,
    );
    assert.equal((await intent(store)).state, "settling");
    const again = await relayer.giveUp(job, request);
    assert.equal(again.action, "poison", JSON.stringify(again));
    assert.equal((await intent(store)).state, "failed");
    assert.deepEqual(chain.asked, []);
  });

  test("createRelayer() names, in a give-up's write that settles behind a send in flight, the tx whose receipt confirmed, not another on record", async () => {
    const chain = perHash([]);
    const named: (string | undefined)[] = [];
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        txHashes: ["0x1", "0x2"],
        lastBroadcast: { outcome: "sent", at: 0, txHash: "0x2" },
        broadcasting: 0, // long past its lease
      },
      undefined,
      { sender: chain.sender },
      (store) =>
        overriding(store, {
          transition: (id, change, options) => {
            named.push(change.confirmed);
            return store.transition(id, change, options);
          },
        }),
    );
    chain.receipts["0x1"] = "dropped";
    chain.receipts["0x2"] = "confirmed";
    const given = await relayer.giveUp(job, {
      deliveries: 5,
      queue: { queue: "pubsub", messageId: "m1", dlqId: "d1" },
    });
    assert.equal(
      given.reason,
      "the queue gave up after 5 deliveries: 0x2 confirmed, intent settled",
    );
    assert.deepEqual(named, ["0x2"]);
    const after = await intent(store);
    assert.deepEqual([after.state, after.broadcasting], ["settled", null]);
    assert.equal(chain.sends(), 0);
  });

  test("createRelayer() throws the store's failure of a give-up's write that settles a confirmed tx as the store threw it", async () => {
    const t = await failingOnce(
      "transition",
      (_id, change) => change.to === "settled",
    );
    t.chain.receipts["0x1"] = "confirmed";
    const blip = new Error("connection reset by peer");
    t.state.fail = blip;
    await assert.rejects(
      t.relayer.giveUp(job, {
        deliveries: 5,
        queue: { queue: "pubsub", messageId: "m1", dlqId: "d1" },
      }),
      (error) => error === blip,
    );
    assert.equal((await intent(t.store)).state, "settling");
    assert.equal(await t.store.getDeadLetter("pi_0001/settle"), null);
  });

  test("createRelayer() leaves the store's failure of a send's record to the policy: at the last delivery the payment goes to review, the hash that left in its letter, its record said to have failed only where the store refused it or marked it not written", async () => {
    // A connection reset says nothing of whether the commit landed; a
    // write the store marked as not written did not, nor one it refused
    // by its rules (a race lost, a replay), marked or not.
    for (
      const [fail, said] of [
        [
          new Error("connection reset by peer"),
          "sent 0x2, and its record may have landed: connection reset by peer",
        ],
        [
          notWritten(new Error("the database refused the write")),
          "sent 0x2, but its record failed: the database refused the write",
        ],
        [
          new ConflictError("pi_0001 changed under the record"),
          "sent 0x2, but its record failed: pi_0001 changed under the record",
        ],
        [
          new ReplayError("the delivery's claim was used before"),
          "sent 0x2, but its record failed: the delivery's claim was used before",
        ],
      ] as const
    ) {
      const t = await failingOnce("recordBroadcast");
      t.chain.receipts["0x1"] = "dropped"; // rescued at once
      t.state.fail = fail;
      const outcome = await t.relayer.deliver(job, 5);
      assert.equal(t.chain.sends(), 1);
      assert.equal(outcome.action, "poison", JSON.stringify(outcome));
      assert.equal((await intent(t.store)).state, "needs_review");
      assert.equal(
        (await t.store.getDeadLetter("pi_0001/settle"))?.lastError,
        said,
      );
    }
  });

  test("createRelayer() backs a busy delivery off by the policy's delay for its number, as a failure would be, or by what is left of the lease that refused it if longer: busy answers spend a queue's retries no faster", async () => {
    const { relayer, store } = await setup(
      { state: "settling", hold: "pending", settlingSince: 0 },
    );
    const seen = await intent(store);
    await store.beginBroadcast("pi_0001", seen.version, 0, {
      lease: { owner: "someone else", ttlMs: 10_000_000, now: 0, keep: true },
    });
    // 5 s doubling to the 2 min cap, unjittered: a busy delivery waiting
    // only the first delay would use up a queue's retry limit (QStash's
    // Upstash-Retries) in the lease's time, long before the rescue window.
    // The lease the store names lapses far ahead: its wait is at most
    // LEASE + 2 × CLOCK_SKEW (40 s), and the policy's delay wins past it.
    for (const [n, delayMs] of [[1, 40_000], [3, 40_000], [9, 120_000]]) {
      const outcome = await relayer.deliver(job, n);
      assert.deepEqual(
        outcome.action === "retry" && [outcome.reason, outcome.delayMs],
        ["intent pi_0001 is busy with another delivery", delayMs],
        `#${n}`,
      );
    }
  });

  test("createRelayer() takes a queue's give-up for a message id another queue's letter names as a give-up of another message: the settling payment is resolved", async () => {
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0x1" }] },
    );
    // A bridge gave up on its message 4242 while the intent was
    // authorized: the job dropped, its letter naming that message.
    const dropped = await relayer.giveUp(job, {
      deliveries: 3,
      queue: { queue: "generic", messageId: "4242" },
    });
    assert.equal(dropped.action, "poison");
    clock.now += LEASE_LAPSED_MS;
    // A job published through Pub/Sub sends; Pub/Sub then gives up on
    // its own message 4242 (its ids are numbers too).
    assert.equal((await relayer.deliver(job, 1)).action, "retry");
    assert.equal((await intent(store)).state, "settling");
    const outcome = await relayer.giveUp(job, {
      deliveries: 5,
      queue: { queue: "pubsub", messageId: "4242" },
    });
    // Not the bridge's give-up repeated: the first resolution does not
    // stand for it, or the payment would stay settling with no job.
    assert.deepEqual(
      outcome.action === "poison" && [outcome.reason, outcome.resolution],
      [
        "the queue gave up after 5 deliveries",
        "last broadcast sent as 0x1, needs review",
      ],
    );
    assert.equal((await intent(store)).state, "needs_review");
    assert.deepEqual((await store.getDeadLetter("pi_0001/settle"))?.queue, {
      queue: "pubsub",
      messageId: "4242",
    });
  });

  test("createRelayer() never sends twice when a race is lost after a send: the record's lost race fails the delivery instead of planning again", async () => {
    let lose = true;
    const { relayer, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0x1" }, { txHash: "0x2" }] },
      { policy: { maxDeliveries: 5, jitter: "none", stuckAfterMs: 0 } },
      (store) =>
        overriding(store, {
          recordBroadcast(...args) {
            if (!lose) return store.recordBroadcast(...args);
            lose = false;
            return Promise.reject(new ConflictError("lost a race"));
          },
        }),
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "retry");
    assert.equal(
      sender.calls.filter((call) => call.method === "send").length,
      1,
    );
  });

  test("createRelayer() never sends twice in one delivery when the record of a failed send lands but is answered as a lost race: the delivery fails instead of planning again", async () => {
    // The record of a send that failed is not wrapped as a sent one's is:
    // its ConflictError reaches the settle loop after the write-ahead
    // landed. Planned again, the delivery read the not_sent it had just
    // recorded and sent again at once, in the same delivery.
    let lose = true;
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      {
        sends: [{ error: notSent(new Error("nonce gap")) }, { txHash: "0x2" }],
      },
      { policy: { maxDeliveries: 5, jitter: "none" } },
      (inner) =>
        overriding(inner, {
          async recordBroadcast(...args) {
            const recorded = await inner.recordBroadcast(...args);
            if (!lose) return recorded;
            lose = false;
            throw new ConflictError("lost a race");
          },
        }),
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "retry");
    assert.equal(
      sender.calls.filter((call) => call.method === "send").length,
      1,
      "one send per delivery",
    );
    assert.equal((await intent(store)).lastBroadcast?.outcome, "not_sent");
  });

  test("createRelayer() settles on an earlier tx that confirmed, after rescuing a send whose write-ahead a crash left in flight", async () => {
    const chain = perHash([{ txHash: "0xnew" }]);
    chain.receipts["0xold"] = "confirmed";
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        txHashes: ["0xold"],
        lastBroadcast: { outcome: "unknown", at: 0 },
        broadcasting: 0,
      },
      { sends: [] },
      { sender: chain.sender },
    );
    await relayer.deliver(job, 1);
    await relayer.deliver(job, 2);
    const after = await intent(store);
    assert.deepEqual([after.state, after.hold], ["settled", "captured"]);
  });

  test("createRelayer() refuses to settle a captured intent while a send is in flight", async () => {
    const { relayer, store } = await setup(
      {
        state: "settling",
        hold: "captured",
        settlingSince: 0,
        txHashes: ["0x1"],
        lastBroadcast: { outcome: "sent", txHash: "0x1", at: 0 },
        broadcasting: 5,
      },
      { sends: [], receipts: ["confirmed"] },
      { policy: { maxDeliveries: 1, jitter: "none" } },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison");
    // The relayer's own refusal, before any store is asked to settle it
    // (a Store of one's own may not refuse).
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.lastError,
      "the hold is captured while a broadcast is in flight",
    );
    assert.equal((await intent(store)).state, "needs_review");
  });

  test("createRelayer() answers done, and keeps no letter, when a queue gives up on a job whose intent already failed or settled", async () => {
    for (const state of ["failed", "settled"] as const) {
      const { relayer, store } = await setup({
        state,
        hold: state === "failed" ? "voided" : "captured",
        ...(state === "settled" ? { txHashes: ["0x1"] } : {}),
      });
      const outcome = await relayer.giveUp(job, {
        deliveries: 1,
        queue: { queue: "qstash", messageId: "msg_1" },
      });
      assert.deepEqual(outcome, {
        action: "done",
        delivery: 1,
        reason: `intent already ${state}`,
      });
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    }
  });

  test("createRelayer() says 'after 1 delivery' when a queue gives up after one", async () => {
    const { relayer } = await setup({ state: "created" });
    const outcome = await relayer.giveUp(job, {
      deliveries: 1,
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    assert.equal(outcome.reason, "the queue gave up after 1 delivery");
  });

  test("createRelayer() refuses a replayed look before it asks the signer about an earlier tx", async () => {
    const chain = perHash([]);
    const { relayer } = await setup(
      {
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        txHashes: ["0xold"],
        lastBroadcast: { outcome: "not_sent", at: 0, error: "nonce gap" },
        mayHaveSent: true,
      },
      { sends: [] },
      { sender: chain.sender },
    );
    const claim = { key: "v1=ab12", now: 0, expiresAt: 360_000_000 };
    await relayer.deliver(job, 1, { claim });
    const asked = chain.asked.length;
    await assert.rejects(relayer.deliver(job, 1, { claim }), ReplayError);
    assert.equal(chain.asked.length, asked, "no receipt asked for a replay");
  });

  test("createRelayer() keeps an unreadable message's letter with 1 delivery when the queue's attempt is 0 or absent", async () => {
    const { relayer, store } = await setup({ state: "created" });
    for (const attempt of [0, undefined]) {
      const jobId = await relayer.keepUnreadable({
        queue: "pubsub",
        id: `m${attempt}`,
        raw: "{",
        detail: "not JSON",
        seen: attempt === undefined ? {} : { attempt },
      });
      assert.equal((await store.getDeadLetter(jobId))?.deliveries, 1);
    }
  });

  test("createRelayer() plans again when the intent changed but kept its state between the look and the write: no second send", async () => {
    const { relayer, store, sender } = await setup(
      { state: "settling", hold: "pending", settlingSince: 0 },
      { sends: [{ txHash: "0x2" }] },
    );
    // This delivery looks (stuck: nothing on record) and would rescue; before
    // its write, another delivery records a send of its own.
    const getIntent = store.getIntent.bind(store);
    let looks = 0;
    store.getIntent = async (id) => {
      const seen = await getIntent(id);
      if (looks++ === 0 && seen) {
        await store.recordBroadcast(id, seen.version, {
          outcome: "sent",
          txHash: "0x1",
          at: 999_999,
        });
      }
      return seen;
    };
    const outcome = await relayer.deliver(job, 1);
    assert.equal(
      outcome.action === "retry" && outcome.reason,
      "waiting for 0x1 to confirm",
    );
    assert.equal(
      sender.calls.filter((c) => c.method === "send").length,
      0,
      "no second send",
    );
  });

  test("createRelayer() keeps the dead letter of a resolution when a duplicate that looked earlier is poisoned too", async () => {
    const { relayer, store } = await setup(
      { state: "needs_review", hold: "pending" },
      undefined,
      { policy: { maxDeliveries: 1, jitter: "none" } },
    );
    const first = {
      jobId: "pi_0001/settle",
      intentId: "pi_0001",
      deliveries: 1,
      cause: "exhausted",
      reason: "no luck after 1 delivery",
      resolution: "last broadcast sent as 0xabc, needs review",
      lastError: "waiting for 0xabc to confirm",
      poisonedAt: 1,
    } as const;
    await store.putDeadLetter(first);
    // This delivery looked while the intent was still settling; another
    // delivery resolved it before this one took the lease.
    const real = store.getIntent.bind(store);
    let looks = 0;
    store.getIntent = async (id) => {
      const intent = await real(id);
      return looks++ === 0 && intent
        ? { ...intent, state: "settling", settlingSince: 1_000_000 }
        : intent;
    };
    const outcome = await relayer.deliver(job, 1);
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      "job dropped, intent already needs_review",
    );
    assert.deepEqual(
      letterOf(await store.getDeadLetter("pi_0001/settle")),
      first,
    );
  });

  test("createRelayer() clips a huge Sender error before storing it", async () => {
    const { relayer, store } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(notSent(new Error("x".repeat(100_000)))) }] },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      "nothing was sent, so the intent failed",
    );
    const stored = await intent(store);
    assert.ok((stored.lastBroadcast?.error?.length ?? 0) < 1100);
    assert.ok(
      ((await store.getDeadLetter("pi_0001/settle"))?.lastError.length ?? 0) <
        1100,
    );
  });

  test("createRelayer() clips a huge Sender error in a retry's reason, which the routes answer the queue with", async () => {
    const { relayer } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: notSent(new Error("x".repeat(100_000))) }] },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "retry");
    assert.ok(outcome.reason.length < 1100, `${outcome.reason.length}`);
    assert.match(outcome.reason, /^send: x+… \(\d+ more characters\)$/);
  });

  test("createRelayer() poisons a declared not-sent: voids the hold, fails the intent, keeps a dead letter", async () => {
    const { relayer, store } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(notSent(new Error("chain id mismatch"))) }] },
    );
    assert.deepEqual(await relayer.deliver(job, 1), {
      action: "poison",
      delivery: 1,
      cause: "declared",
      reason: "retrying will not help",
      resolution: "nothing was sent, so the intent failed",
    });
    const failed = await intent(store);
    assert.equal(failed.state, "failed");
    assert.equal(failed.hold, "voided");
    assert.deepEqual(letterOf(await store.getDeadLetter("pi_0001/settle")), {
      jobId: "pi_0001/settle",
      intentId: "pi_0001",
      deliveries: 1,
      cause: "declared",
      reason: "retrying will not help",
      resolution: "nothing was sent, so the intent failed",
      lastError: "send: chain id mismatch",
      poisonedAt: 1_000_000,
    });
  });

  test("createRelayer() sends a declared poison that may have been sent to review, never to failed", async () => {
    const { relayer, store } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(new Error("node rejected after relay")) }] },
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      "last broadcast unknown, needs review",
    );
    const review = await intent(store);
    assert.equal(review.state, "needs_review");
    assert.equal(review.hold, "pending");
  });

  test("createRelayer() finishes an interrupted resolution and never broadcasts behind a voided hold", async () => {
    const { relayer, store, sender } = await setup(
      {
        state: "settling",
        hold: "voided",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0, error: "nonce gap" },
      },
      { sends: [{ txHash: "0xmust-not-send" }] },
    );
    const outcome = await relayer.deliver(job, 2);
    assert.equal(outcome.action, "poison");
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      "nothing was sent, so the intent failed",
    );
    assert.equal((await intent(store)).state, "failed");
    assert.equal(sender.calls.length, 0);
  });

  test("createRelayer() leaves terminal and needs_review intents alone", async () => {
    for (const state of ["settled", "failed", "needs_review"] as const) {
      const hold = state === "settled"
        ? "captured"
        : state === "failed"
        ? "voided"
        : "pending";
      const { relayer, store, sender } = await setup({ state, hold });
      const before = await intent(store);
      assert.deepEqual(await relayer.deliver(job, 1), {
        action: "done",
        delivery: 1,
        reason: `intent already ${state}`,
      });
      assert.equal((await intent(store)).version, before.version);
      assert.equal(sender.calls.length, 0);
    }
  });

  test("createRelayer() retries a missing intent, then drops the job", async () => {
    const { relayer } = await setup({ state: "created" }, undefined, {
      policy: { maxDeliveries: 2, jitter: "none" },
    });
    const missing = { intentId: "pi_9999", kind: "settle" } as const;
    assert.equal(
      (await relayer.deliver(missing, 1) as { reason: string }).reason,
      "intent pi_9999 not found",
    );
    const outcome = await relayer.deliver(missing, 2);
    assert.equal(
      outcome.action === "poison" && outcome.resolution,
      "job dropped, intent not found",
    );
  });

  test("createRelayer() counts deliveries in the store when the queue gives no number", async () => {
    const { relayer, store } = await setup({ state: "created" }, undefined, {
      policy: { maxDeliveries: 3, jitter: "none" },
    });
    const outcomes = [
      await relayer.deliver(job),
      await relayer.deliver(job),
      await relayer.deliver(job),
    ];
    assert.deepEqual(outcomes.map((o) => [o.action, o.delivery]), [
      ["retry", 1],
      [
        "retry",
        2,
      ],
      ["poison", 3],
    ]);
    // The dead letter ended the run: a job published again counts from 1.
    assert.equal(await store.deliveries("pi_0001/settle"), 0);
  });

  test("createRelayer() lets one of two concurrent deliveries run; the other retries, even past the limit", async () => {
    const { relayer, store, sender } = await setup(
      RESENDING,
      { sends: [{ txHash: "0x1" }] },
      { policy: { maxDeliveries: 1, jitter: "none" } },
    );
    const slow = sender.send.bind(sender);
    sender.send = async (i, o) => {
      // Long enough for the other delivery's few round trips to a real
      // database (PostgresStore) to land while this one holds the lease.
      await new Promise((resolve) => setTimeout(resolve, 50));
      return slow(i, o);
    };
    const [a, b] = await Promise.all([
      relayer.deliver(job, 1),
      relayer.deliver(job, 1),
    ]);
    const busy = [a, b].find((o) =>
      o.action === "retry" && o.reason.includes("busy")
    );
    // Asked back once the send's lease is over (30 s + 2 × 5 s of skew, the
    // clock standing still) when its look saw the send in flight; after the
    // policy's 5 s when its write-ahead lost the race for the lease instead
    // (the store does not say how old the holder's lease is).
    const delayMs = busy?.action === "retry" ? busy.delayMs : undefined;
    assert.ok(delayMs === 40_000 || delayMs === 5000, `delayMs ${delayMs}`);
    assert.deepEqual(busy, {
      action: "retry",
      delivery: 1,
      delayMs,
      reason: "intent pi_0001 is busy with another delivery",
    });
    assert.equal(sender.calls.length, 1);
    assert.equal((await intent(store)).state, "needs_review");
  });

  test("createRelayer() releases the lease when a delivery ends, so the next one runs", async () => {
    // Both deliveries write, so both take the lease; the clock stands
    // still, so a lease left behind would still be live.
    const { relayer, sender } = await setup(
      { state: "authorized", hold: "pending" },
      {
        sends: [{ error: notSent(new Error("nonce gap")) }, { txHash: "0x2" }],
      },
    );
    const first = await relayer.deliver(job, 1);
    assert.equal(first.action === "retry" && first.reason, "send: nonce gap");
    const next = await relayer.deliver(job, 2);
    assert.equal(
      next.action === "retry" && next.reason,
      "sent 0x2, waiting for confirmation",
    );
    assert.equal(sender.calls.length, 2);
  });

  test("createRelayer() reviews a payment the store refuses to fail (no hold to void), instead of retrying it as busy forever", async () => {
    // Imported as settling with no hold: nothing may be broadcast, and the
    // void that failing needs is refused by the ledger.
    const { relayer, store } = await setup({
      state: "settling",
      settlingSince: 0,
      lastBroadcast: { outcome: "not_sent", at: 0 },
    });
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison");
    assert.match(
      outcome.action === "poison" ? outcome.resolution : "",
      /^the store refused the failure \(Cannot void the hold of pi_0001 as it is not recorded\), needs review$/,
    );
    const after = await intent(store);
    assert.deepEqual([after.state, after.hold], ["needs_review", null]);
    assert.match(
      (await store.getDeadLetter("pi_0001/settle"))?.resolution ?? "",
      /the store refused the failure/,
    );
  });

  test("createRelayer() reviews a settling payment whose hold is captured with no sent broadcast on record, instead of settling it", async () => {
    const { relayer, store, sender } = await setup({
      state: "settling",
      hold: "captured",
      settlingSince: 0,
      lastBroadcast: { outcome: "not_sent", at: 0 },
    });
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison");
    const after = await intent(store);
    assert.deepEqual([after.state, after.hold], ["needs_review", "captured"]);
    assert.match(
      (await store.getDeadLetter("pi_0001/settle"))?.lastError ?? "",
      /the hold is captured, but no sent broadcast is on record/,
    );
    assert.deepEqual(sender.calls, []);
  });

  test("createRelayer() with a store of one's own that does not mark its refusals still reviews a payment it refuses to fail, after three tries", async () => {
    const fails: unknown[] = [];
    const { relayer, store } = await setup(
      {
        state: "settling",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0 },
      },
      undefined,
      {},
      // Every ConflictError comes back as a plain one, `refused` unset;
      // each try of the failure (settling → failed) is counted.
      (store) =>
        unmarkingRefusals(store, (key, args) => {
          if (
            key === "transition" &&
            (args[1] as { to?: string } | undefined)?.to === "failed"
          ) fails.push(args[1]);
        }),
    );
    const outcome = await relayer.deliver(job, 1);
    assert.equal(outcome.action, "poison");
    // Three tries, nobody writing between: a marked refusal is tried once.
    assert.equal(fails.length, 3);
    assert.match(
      outcome.action === "poison" ? outcome.resolution : "",
      /^the store refused the failure \(Cannot void the hold of pi_0001 as it is not recorded\), needs review$/,
    );
    assert.equal((await intent(store)).state, "needs_review");
  });

  test("createRelayer() answers a write the store refuses by its rules as this delivery's failure, not as a busy intent", async () => {
    // A store whose rules refuse the move to settling, writing nothing.
    const { relayer: refusing } = await refusingByRule(
      { state: "authorized", hold: "pending" },
      "transition",
    );
    const first = await refusing.deliver(job, 1);
    assert.equal(first.action === "retry" && first.reason, BY_RULE);
    // Busy would retry past maxDeliveries; a failure is poisoned at it.
    assert.equal((await refusing.deliver(job, 2)).action, "poison");
  });

  test("createRelayer() poisons a signed delivery whose first write the store refuses by its rules at the last delivery: a refusal says nothing landed", async () => {
    const { relayer: refusing, store } = await refusingByRule(
      RESENDING,
      "beginBroadcast",
    );
    const claim = (key: string) => ({ key, now: 0, expiresAt: 360_000_000 });
    const first = await refusing.deliver(job, 1, { claim: claim("v1=01") });
    assert.equal(first.action === "retry" && first.reason, BY_RULE);
    // Not a write whose answer was lost: the job is poisoned at its limit,
    // not retried past it.
    const last = await refusing.deliver(job, 2, { claim: claim("v1=02") });
    assert.equal(last.action, "poison");
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.lastError,
      BY_RULE,
    );
  });

  test("createRelayer() does not look again after a write the store refuses by its rules: one try per delivery", async () => {
    // A fresh look would meet the same refusal; looking again only costs
    // reads, and turns the refusal into "busy" if anyone writes meanwhile.
    const { relayer: refusing, tries: transitions } = await refusingByRule(
      { state: "authorized", hold: "pending" },
      "transition",
    );
    const first = await refusing.deliver(job, 1);
    assert.equal(first.action === "retry" && first.reason, BY_RULE);
    assert.equal(transitions(), 1);
  });

  test("createRelayer() with a store of one's own that does not mark its refusals answers a write refused three times, nobody writing between, as a failure, not as a busy intent", async () => {
    // Every try is refused with a plain ConflictError and the intent does
    // not move: a store's rule, not a race. Busy would retry past
    // maxDeliveries forever; a failure is poisoned at it.
    const { relayer: refusing, store, tries: writes } = await refusingByRule(
      RESENDING,
      "beginBroadcast",
      false,
    );
    const first = await refusing.deliver(job, 1);
    assert.equal(first.action === "retry" && first.reason, BY_RULE);
    assert.equal(writes(), 3);
    assert.equal((await refusing.deliver(job, 2)).action, "poison");
    assert.equal(writes(), 6);
    // Nothing ever left: the poison fails the payment.
    assert.equal((await intent(store)).state, "failed");
  });

  test("createRelayer() redrives a dead letter with a fresh count, and refuses a failed intent", async () => {
    const { relayer, store } = await setup({ state: "created" }, undefined, {
      policy: { maxDeliveries: 1 },
    });
    await relayer.deliver(job);
    assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
    assert.deepEqual(await relayer.redrive("pi_0001/settle"), job);
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(await store.deliveries("pi_0001/settle"), 0);
    assert.equal(await relayer.redrive("pi_0001/settle"), null);

    const failed = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(notSent("no")) }] },
    );
    await failed.relayer.deliver(job, 1);
    await assert.rejects(
      failed.relayer.redrive("pi_0001/settle"),
      ConflictError,
    );
  });

  test("createRelayer() discards a letter no job can act on, marking its queue ids, and refuses one whose intent a job can still move", async () => {
    const { relayer, store } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ error: poison(notSent("no")) }] },
    );
    // The intent is authorized: the letter is its record of having no job.
    await store.putDeadLetter(deadLetter("pi_0001/settle", 0));
    await assert.rejects(
      relayer.discard("pi_0001/settle"),
      (error: Error) =>
        error instanceof ConflictError &&
        /is still authorized: the letter is the record that it may have no job\. Redrive it, and discard/
          .test(error.message),
    );
    assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
    // A redriven job fails the payment: its new letter can go.
    await relayer.redrive("pi_0001/settle");
    assert.equal((await relayer.deliver(job, 1)).action, "poison");
    assert.equal((await intent(store)).state, "failed");
    const letter = await store.getDeadLetter("pi_0001/settle");
    assert.ok(letter !== null);
    await assert.rejects(
      relayer.discard("pi_0001/settle", { version: `${letter.version}x` }),
      /changed since it was read/,
    );
    assert.equal(
      (await relayer.discard("pi_0001/settle", { version: letter.version }))
        ?.resolution,
      letter.resolution,
    );
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(await relayer.discard("pi_0001/settle"), null);
    // A give-up the letter recorded, repeated once it is gone, finds its
    // message handled: the letter does not come back (pi_0003 does not
    // exist, so the repeat would drop the job again and keep a letter).
    const reviewed = { intentId: "pi_0003", kind: "settle" } as const;
    const given = { queue: "qstash", messageId: "msg_C" };
    await store.putDeadLetter({
      ...deadLetter("pi_0003/settle", 0),
      resolution: "job dropped, intent not found",
      queue: given,
    });
    await relayer.discard("pi_0003/settle");
    const repeat = await relayer.giveUp(reviewed, {
      deliveries: 3,
      queue: given,
    });
    assert.equal(repeat.action, "done");
    assert.match(repeat.reason, /already resolved: nothing changed/);
    assert.equal(await store.getDeadLetter("pi_0003/settle"), null);
    // An unreadable message's letter that names no intent goes at once.
    const unreadable = await relayer.keepUnreadable({
      queue: "pubsub",
      id: "m-7",
      raw: "{",
      detail: "not JSON",
    });
    assert.equal((await relayer.discard(unreadable))?.jobId, unreadable);
    // One that names an intent a job can still move is refused.
    await store.createIntent({ id: "pi_0002", state: "created" });
    const named = await relayer.keepUnreadable({
      queue: "cloudflare",
      id: "m-8",
      raw: '{"intentId":"pi_0002"}',
      seen: { intentId: "pi_0002" },
      detail: "no kind",
    });
    await assert.rejects(
      relayer.discard(named),
      /pi_0002 is still created: .* Authorize the intent, then publish a job for it \(POST \/v1\/jobs\) \(.*\), and discard the letter once the intent is settled or failed\.$/,
    );
    // In review, the letter is the record of why: it stays until the review ends.
    await store.createIntent({
      id: "pi_0004",
      state: "needs_review",
      hold: "pending",
      settlingSince: 0,
    });
    await store.putDeadLetter(deadLetter("pi_0004/settle", 0));
    await assert.rejects(
      relayer.discard("pi_0004/settle"),
      /pi_0004 is in review: the letter is the record of why/,
    );
    assert.notEqual(await store.getDeadLetter("pi_0004/settle"), null);
    // An unreadable message's letter naming it is not that record: the
    // refusal says to resolve the review, not that this letter says why.
    const inReview = await relayer.keepUnreadable({
      queue: "qstash",
      id: "msg_9",
      raw: '{"intentId":"pi_0004","kind":"refund"}',
      seen: { intentId: "pi_0004" },
      detail: "'kind' must be \"settle\"",
    });
    await assert.rejects(
      relayer.discard(inReview),
      (error: Error) =>
        /pi_0004 is in review: resolve the review \(settle or fail the intent\), then discard this letter/
          .test(error.message) && !/record of why/.test(error.message),
    );
  });

  test("createRelayer() discards a letter without resetting the count of a job delivered after the discard read its intent", async () => {
    // Between the discard's read of the intent (absent) and its removal of
    // the letter, the intent is created and its new job delivered twice.
    const { relayer, store } = await setup(
      { state: "settled" },
      undefined,
      {},
      (store) =>
        overriding(store, {
          async getIntent(id) {
            const read = await store.getIntent(id);
            if (id === "pi_0009") {
              await store.createIntent({ id, state: "created" });
              await store.admit({ count: "pi_0009/settle", now: 0 });
              await store.admit({ count: "pi_0009/settle", now: 0 });
            }
            return read;
          },
        }),
    );
    // The letter of a job for an intent that did not exist.
    await store.putDeadLetter({
      ...deadLetter("pi_0009/settle", 0),
      resolution: "job dropped, intent not found",
    });
    assert.equal(
      (await relayer.discard("pi_0009/settle"))?.jobId,
      "pi_0009/settle",
    );
    assert.equal(await store.getDeadLetter("pi_0009/settle"), null);
    // The live job's count goes on: it is not handed fresh deliveries.
    assert.equal(await store.deliveries("pi_0009/settle"), 2);
  });

  test("createRelayer() discards a letter only once when two discards race", async () => {
    const { relayer, store } = await setup({ state: "settled" });
    await store.putDeadLetter(deadLetter("pi_0001/settle", 0));
    const results = await Promise.allSettled([
      relayer.discard("pi_0001/settle"),
      relayer.discard("pi_0001/settle"),
    ]);
    const removed = results.filter((r) =>
      r.status === "fulfilled" && r.value !== null
    );
    assert.equal(removed.length, 1);
    for (const r of results) {
      if (r.status === "rejected") {
        assert.match(String(r.reason), /changed since it was read/);
      } else if (r !== removed[0]) assert.equal(r.value, null);
    }
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
  });

  test("createRelayer() counts a job published again after its drop from 1, so the authorized intent settles instead of being poisoned at once", async () => {
    const { relayer, store, sender } = await setup(
      { state: "created" },
      { sends: [{ txHash: "0xabc" }] },
    );
    // Counted in the store (no delivery number): five looks, then the drop.
    for (let n = 1; n < 5; n++) {
      assert.equal((await relayer.deliver(job)).action, "retry");
    }
    assert.equal(
      formatOutcome(job, await relayer.deliver(job)),
      "pi_0001/settle   #5  poison       (no luck after 5 deliveries; job dropped, intent still created)",
    );
    // The payments API authorizes the intent and publishes its job again.
    await store.recordHold("pi_0001");
    await store.transition("pi_0001", {
      from: "created",
      to: "authorized",
      version: (await intent(store)).version,
      at: 2_000_000,
    });
    assert.deepEqual(await relayer.deliver(job), {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason: "sent 0xabc, waiting for confirmation",
    });
    assert.equal((await intent(store)).state, "settling");
    assert.equal(sender.calls.length, 1);
  });

  test("createRelayer() sends nothing for an authorized intent at its last delivery or past it: no delivery would be left to read the receipt, so the job is dropped with its letter and the intent stays authorized", async () => {
    for (const n of [5, 43]) {
      const { relayer, store, sender } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ txHash: "0xabc" }] },
      );
      const before = await intent(store);
      assert.deepEqual(await relayer.deliver(job, n), {
        action: "poison",
        delivery: n,
        cause: "exhausted",
        reason: `no luck after ${n} deliveries`,
        resolution: "job dropped, intent still authorized",
      });
      assert.deepEqual(sender.calls, [], `#${n}`);
      const { version: _, ...after } = await intent(store);
      const { version: __, ...was } = before;
      assert.deepEqual(after, was, `#${n}: nothing written on the intent`);
      assert.deepEqual(
        letterOf(await store.getDeadLetter("pi_0001/settle")),
        {
          jobId: "pi_0001/settle",
          intentId: "pi_0001",
          deliveries: n,
          cause: "exhausted",
          reason: `no luck after ${n} deliveries`,
          resolution: "job dropped, intent still authorized",
          lastError: `not sent: delivery ${n} is ${
            n === 5 ? "the last" : "past the last"
          } (maxDeliveries 5): no delivery would be left to read its receipt, and the payment would go to review; redrive the job to send it with a fresh count`,
          poisonedAt: 1_000_000,
        },
      );
    }
  });

  test("createRelayer() sends nothing for an authorized intent whose store-counted delivery reaches maxDeliveries (the local queue, Pub/Sub without a count, a bridge without one)", async () => {
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
    );
    // The count ran on while every delivery was refused before the relayer.
    for (let i = 0; i < 4; i++) {
      await store.admit({ count: "pi_0001/settle", now: 1_000_000 });
    }
    assert.equal(
      formatOutcome(job, await relayer.deliver(job)),
      "pi_0001/settle   #5  poison       (no luck after 5 deliveries; job dropped, intent still authorized)",
    );
    assert.deepEqual(sender.calls, []);
    assert.equal((await intent(store)).state, "authorized");
  });

  test("createRelayer() settles an authorized intent whose last delivery sent nothing once its letter is redriven: the count starts afresh and the first delivery sends", async () => {
    const { relayer, store, sender, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
    );
    assert.equal((await relayer.deliver(job, 7)).action, "poison");
    assert.equal(sender.calls.length, 0);
    assert.deepEqual(await relayer.redrive("pi_0001/settle"), job);
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    // The drop holds the lease until it lapses, as a give-up's does: a
    // copy of its message in flight must not send behind it.
    const held = await relayer.deliver(job, 1);
    assert.equal(
      held.action === "retry" && held.reason,
      "intent pi_0001 is busy with another delivery",
    );
    clock.now += LEASE_LAPSED_MS;
    // Counted in the store from 0 again, as the local queue counts it.
    assert.deepEqual(await relayer.deliver(job), {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason: "sent 0xabc, waiting for confirmation",
    });
    assert.deepEqual(await relayer.deliver(job), {
      action: "done",
      delivery: 2,
      reason: "0xabc confirmed, intent settled",
    });
    const settled = await intent(store);
    assert.deepEqual([settled.state, settled.hold], ["settled", "captured"]);
    assert.equal(
      sender.calls.filter((call) => call.method === "send").length,
      1,
    );
  });

  test("createRelayer() marks the message whose last delivery dropped an authorized intent's job: a copy of it with a lower number sends nothing, and a job redriven since sends", async () => {
    const { relayer, store, sender, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    const dropped = await relayer.deliver(job, 5, m1);
    assert.equal(
      dropped.action === "poison" && dropped.resolution,
      "job dropped, intent still authorized",
    );
    // A copy the queue had in flight, or sent again, after the ack: it
    // would send with no job left to read the receipt. While the drop's
    // lease lasts, busy or a late copy (as the store checks first); past
    // it, a late copy.
    assert.notEqual((await relayer.deliver(job, 2, m1)).action, "poison");
    assert.equal(sender.calls.length, 0);
    clock.now += LEASE_LAPSED_MS;
    assert.deepEqual(await relayer.deliver(job, 2, m1), {
      action: "done",
      delivery: 2,
      reason:
        "the queue gave up on this message before: a late copy, nothing sent",
    });
    assert.equal(sender.calls.length, 0);
    assert.equal((await intent(store)).state, "authorized");
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.resolution,
      "job dropped, intent still authorized",
    );
    await relayer.redrive("pi_0001/settle");
    const again = await relayer.deliver(job, 1, {
      message: { queue: "qstash", messageId: "msg_2" },
    });
    assert.equal(
      again.action === "retry" && again.reason,
      "sent 0xabc, waiting for confirmation",
    );
  });

  /**
   * pi_0001 as `record`, and a queue's give-up of msg_1 cut between its
   * marks and its letter (the store failing the letter's write): the
   * message is marked as being given up on (`givingup/…`), not resolved.
   */
  async function giveUpCut(record: Omit<NewIntent, "id">) {
    let fail = true;
    const opened = await setup(
      record,
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) =>
        overriding(inner, {
          putDeadLetter(letter, options) {
            if (!fail) return inner.putDeadLetter(letter, options);
            fail = false;
            return Promise.reject(new Error("connection reset"));
          },
        }),
    );
    const m1 = { queue: "qstash", messageId: "msg_1" } as const;
    await assert.rejects(
      opened.relayer.giveUp(job, { deliveries: 5, queue: m1 }),
      /connection reset/,
    );
    assert.equal(await opened.store.getDeadLetter("pi_0001/settle"), null);
    return { ...opened, m1 };
  }

  const GIVING_UP =
    "the queue is giving up on this message: nothing sent, and nothing until its give-up resolves";

  test("createRelayer() answers a copy of a message whose give-up is still at work with a retry, not done, and sends nothing: its write ahead is refused by the message's mark", async () => {
    const { relayer, store, sender, clock, m1 } = await giveUpCut({
      state: "authorized",
      hold: "pending",
    });
    // Acked as done, the copy could end the message before its give-up
    // resolved the intent.
    assert.deepEqual(await relayer.deliver(job, 2, { message: m1 }), {
      action: "retry",
      delivery: 2,
      delayMs: 10_000,
      reason: GIVING_UP,
    });
    assert.equal(sender.calls.length, 0);
    assert.equal((await intent(store)).state, "authorized");
    // The queue repeats its give-up: resolved, a copy is done (past the
    // lease its drop holds, which some stores check first).
    const repeat = await relayer.giveUp(job, { deliveries: 5, queue: m1 });
    assert.equal(
      repeat.action === "poison" && repeat.resolution,
      "job dropped, intent still authorized",
    );
    clock.now += LEASE_LAPSED_MS;
    const late = await relayer.deliver(job, 2, { message: m1 });
    assert.equal(
      late.action === "done" && late.reason,
      "the queue gave up on this message before: a late copy, nothing sent",
    );
    assert.equal(sender.calls.length, 0);
  });

  test("createRelayer() answers a copy poisoned on a failure that wrote nothing, of a message whose give-up is still at work, with a retry: it resolves nothing and keeps no letter", async () => {
    const { relayer, store, m1 } = await giveUpCut({ state: "created" });
    // Its last delivery by the policy: "not authorized yet" is exhausted.
    // Resolved here, it wrote the letter the give-up is still to write.
    assert.deepEqual(await relayer.deliver(job, 5, { message: m1 }), {
      action: "retry",
      delivery: 5,
      delayMs: 80_000,
      reason: GIVING_UP,
    });
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    assert.equal((await intent(store)).state, "created");
  });

  test("createRelayer() counts a last delivery's drop's give-up marks once, in its letter's commit, living 32 days as a give-up's do: a store that kept them has none written again", async () => {
    const carried: string[][] = [];
    const { relayer, store, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) =>
        overriding(inner, {
          putDeadLetter(letter, options) {
            if (options?.marks) carried.push([...options.marks.keys]);
            return inner.putDeadLetter(letter, options);
          },
        }),
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    const at = clock.now;
    const dropped = await relayer.deliver(job, 5, m1);
    assert.equal(dropped.action, "poison");
    assert.equal(carried.length, 1);
    const [marks] = carried as [string[]];
    assert.ok(marks.length > 0);
    const day = 24 * 60 * 60 * 1000;
    for (const mark of marks) {
      assert.deepEqual(
        [
          await store.deliveries(mark, at),
          await store.deliveries(mark, at + 32 * day - 1),
          await store.deliveries(mark, at + 32 * day),
        ],
        [1, 1, 0],
        mark,
      );
    }
  });

  test("createRelayer() marks only an authorized intent's message at its last delivery's drop: a created or missing intent's drop carries no marks", async () => {
    const carried: unknown[] = [];
    const { relayer } = await setup(
      { state: "created" },
      undefined,
      {},
      (inner) =>
        overriding(inner, {
          putDeadLetter(letter, options) {
            carried.push(options?.marks);
            return inner.putDeadLetter(letter, options);
          },
        }),
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    for (
      const [dropped, resolution] of [
        [job, "job dropped, intent still created"],
        [
          { intentId: "pi_9999", kind: "settle" },
          "job dropped, intent not found",
        ],
      ] as const
    ) {
      const outcome = await relayer.deliver(dropped, 5, m1);
      assert.equal(
        outcome.action === "poison" && outcome.resolution,
        resolution,
      );
    }
    assert.deepEqual(carried, [undefined, undefined]);
  });

  test("createRelayer() releases the lease of a last delivery's drop once its message is marked: the letter's redrive sends at its first delivery, at once", async () => {
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    const dropped = await relayer.deliver(job, 5, m1);
    assert.equal(
      dropped.action === "poison" && dropped.resolution,
      "job dropped, intent still authorized",
    );
    // The runbook's bulk redrive, right after the drop: a new message.
    assert.deepEqual(await relayer.redrive("pi_0001/settle"), job);
    const m2 = { message: { queue: "qstash", messageId: "msg_2" } } as const;
    assert.deepEqual(await relayer.deliver(job, 1, m2), {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason: "sent 0xabc, waiting for confirmation",
    });
    assert.deepEqual(await relayer.deliver(job, 2, m2), {
      action: "done",
      delivery: 2,
      reason: "0xabc confirmed, intent settled",
    });
    assert.equal(
      sender.calls.filter((call) => call.method === "send").length,
      1,
    );
    assert.equal((await intent(store)).state, "settled");
  });

  test("createRelayer() keeps the copies of a dropped message home once the drop's lease is released: numbered lower or at the last, delivered after the drop or in flight across it", async () => {
    let gate: ReturnType<typeof gateTransitions> | undefined;
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) => (gate = gateTransitions(inner)).store,
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    // A copy numbered lower read the intent and is at its write ahead.
    const inFlight = relayer.deliver(job, 3, m1);
    await gate!.reached;
    const dropped = await relayer.deliver(job, 5, m1);
    assert.equal(
      dropped.action === "poison" && dropped.resolution,
      "job dropped, intent still authorized",
    );
    const letter = await store.getDeadLetter("pi_0001/settle");
    gate!.release();
    const late = {
      reason:
        "the queue gave up on this message before: a late copy, nothing sent",
    };
    assert.deepEqual(await inFlight, { action: "done", delivery: 3, ...late });
    // Copies the queue delivers after the drop, at once (no lease waited).
    for (const n of [1, 4, 5, 6]) {
      assert.deepEqual(await relayer.deliver(job, n, m1), {
        action: "done",
        delivery: n,
        ...late,
      });
    }
    assert.deepEqual(sender.calls, []);
    assert.equal((await intent(store)).state, "authorized");
    // The letter stays the record of the drop, unreplaced.
    assert.equal(
      (await store.getDeadLetter("pi_0001/settle"))?.version,
      letter?.version,
    );
  });

  test("createRelayer() keeps a copy of a dropped message at the last number, held across the drop and its release, from resolving the intent another message of the job is settling", async () => {
    // The copy is held at its letter's write (it read the intent before
    // the other message's send) or at its resolution's read (answered
    // after the send): the first letter written, the second read made.
    for (const heldAt of ["write", "read"] as const) {
      let reads = 0;
      let writes = 0;
      let reach!: () => void;
      const reached = new Promise<void>((r) => reach = r);
      let open!: () => void;
      const gate = new Promise<void>((r) => open = r);
      const hold = async () => {
        reach();
        await gate;
      };
      const { relayer, store, sender } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
        {},
        (inner) =>
          overriding(inner, {
            async getIntent(id) {
              if (++reads === 2 && heldAt === "read") await hold();
              return await inner.getIntent(id);
            },
            async putDeadLetter(letter, options) {
              if (++writes === 1 && heldAt === "write") await hold();
              return await inner.putDeadLetter(letter, options);
            },
          }),
      );
      const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
      const copy = relayer.deliver(job, 5, m1);
      await reached;
      const dropped = await relayer.deliver(job, 5, m1);
      assert.equal(
        dropped.action === "poison" && dropped.resolution,
        "job dropped, intent still authorized",
        `held at its ${heldAt}`,
      );
      // Another message of the job (a duplicated publish) sends at once.
      const m2 = { message: { queue: "qstash", messageId: "msg_2" } } as const;
      assert.equal(
        (await relayer.deliver(job, 1, m2)).reason,
        "sent 0xabc, waiting for confirmation",
        `held at its ${heldAt}`,
      );
      open();
      assert.deepEqual(await copy, {
        action: "done",
        delivery: 5,
        reason:
          "the queue gave up on this message before: a late copy, nothing sent",
      }, `held at its ${heldAt}`);
      assert.equal(
        (await intent(store)).state,
        "settling",
        `held at its ${heldAt}`,
      );
      assert.deepEqual(await relayer.deliver(job, 2, m2), {
        action: "done",
        delivery: 2,
        reason: "0xabc confirmed, intent settled",
      }, `held at its ${heldAt}`);
      assert.equal(
        sender.calls.filter((call) => call.method === "send").length,
        1,
      );
    }
  });

  test("createRelayer() answers a last delivery's drop as before when the store fails its lease's release, with an Error or anything else, at once or in its promise: the lease is held until it lapses", async () => {
    const failures: [string, () => Promise<void>][] = [
      ["an Error", () => Promise.reject(new Error("connection reset"))],
      ["a string", () => Promise.reject("connection reset")],
      ["a throw at once", () => {
        throw new Error("not connected");
      }],
    ];
    for (const [name, release] of failures) {
      const { relayer, store, sender, clock } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ txHash: "0xabc" }] },
        {},
        (inner) => overriding(inner, { releaseLease: release }),
      );
      const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
      const dropped = await relayer.deliver(job, 5, m1);
      assert.equal(
        dropped.action === "poison" && dropped.resolution,
        "job dropped, intent still authorized",
        name,
      );
      assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null, name);
      // Its copies send nothing (busy on MemoryStore, which looks at the
      // lease before the marks); another message is busy until it lapses.
      assert.ok(
        [
          "the queue gave up on this message before: a late copy, nothing sent",
          "intent pi_0001 is busy with another delivery",
        ].includes((await relayer.deliver(job, 1, m1)).reason),
        name,
      );
      const m2 = { message: { queue: "qstash", messageId: "msg_2" } } as const;
      assert.equal(
        (await relayer.deliver(job, 1, m2)).reason,
        "intent pi_0001 is busy with another delivery",
        name,
      );
      clock.now += LEASE_LAPSED_MS;
      assert.equal(
        (await relayer.deliver(job, 2, m2)).reason,
        "sent 0xabc, waiting for confirmation",
        name,
      );
      assert.equal(
        sender.calls.filter((call) => call.method === "send").length,
        1,
        name,
      );
    }
  });

  test("createRelayer() keeps a copy of a dropped message at the last number, held at its letter's write across the drop's release and a redrive, from writing the letter again", async () => {
    // The copy read the intent and looked for the message's marks before
    // the drop's landed: before the drop's letter, or between its letter
    // (which carries the message's givingup/ mark) and its resolved mark
    // (the drop held there). The copy is held at its letter's write until
    // the drop released its lease and the operator redrove the letter.
    for (
      const readAt of ["before the letter", "before the resolved mark"] as const
    ) {
      let writes = 0;
      let marks = 0;
      const gated = () => {
        let reach!: () => void;
        const reached = new Promise<void>((r) => reach = r);
        let open!: () => void;
        const gate = new Promise<void>((r) => open = r);
        return {
          reached,
          open,
          hold: async () => {
            reach();
            await gate;
          },
        };
      };
      const copyAt = gated();
      const dropAt = gated();
      const { relayer, store, sender } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
        {},
        (inner) =>
          overriding(inner, {
            async putDeadLetter(letter, options) {
              const n = ++writes;
              if (n === (readAt === "before the letter" ? 1 : 2)) {
                await copyAt.hold();
              }
              return await inner.putDeadLetter(letter, options);
            },
            async admit(admission) {
              if (
                readAt === "before the resolved mark" &&
                admission.count?.startsWith("gaveup/") && ++marks === 1
              ) {
                await dropAt.hold();
              }
              return await inner.admit(admission);
            },
          }),
      );
      const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
      let copy: Promise<Outcome>;
      let drop: Promise<Outcome>;
      if (readAt === "before the letter") {
        copy = relayer.deliver(job, 5, m1);
        await copyAt.reached;
        drop = relayer.deliver(job, 5, m1);
      } else {
        drop = relayer.deliver(job, 5, m1);
        await dropAt.reached;
        copy = relayer.deliver(job, 5, m1);
        await copyAt.reached;
        dropAt.open();
      }
      const dropped = await drop;
      assert.equal(
        dropped.action === "poison" && dropped.resolution,
        "job dropped, intent still authorized",
        readAt,
      );
      // The drop released its lease; the operator redrives its letter.
      assert.deepEqual(await relayer.redrive("pi_0001/settle"), job, readAt);
      copyAt.open();
      assert.deepEqual(await copy, {
        action: "done",
        delivery: 5,
        reason:
          "the queue gave up on this message before: a late copy, nothing sent",
      }, readAt);
      // The redriven job is alive: its letter does not come back.
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null, readAt);
      const m2 = { message: { queue: "qstash", messageId: "msg_2" } } as const;
      assert.equal(
        (await relayer.deliver(job, 1, m2)).reason,
        "sent 0xabc, waiting for confirmation",
        readAt,
      );
      assert.deepEqual(await relayer.deliver(job, 2, m2), {
        action: "done",
        delivery: 2,
        reason: "0xabc confirmed, intent settled",
      }, readAt);
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null, readAt);
      assert.equal(
        sender.calls.filter((call) => call.method === "send").length,
        1,
        readAt,
      );
    }
  });

  test("createRelayer() holds the lease of a last delivery's drop that names no message, or whose marks failed: nothing else keeps a copy in flight home", async () => {
    // The givingup/ mark fails only at a store of one's own that ignores
    // a letter's marks: the relayer then writes it after the letter.
    for (const cutAt of [undefined, "givingup/", "gaveup/"]) {
      let cut = cutAt !== undefined;
      const { relayer, sender, clock } = await setup(
        { state: "authorized", hold: "pending" },
        { sends: [{ txHash: "0xabc" }] },
        {},
        (inner) =>
          overriding(inner, {
            admit(...args) {
              if (cut && args[0].count?.startsWith(cutAt!)) {
                cut = false;
                return Promise.reject(new Error("connection reset"));
              }
              return inner.admit(...args);
            },
            putDeadLetter(letter, options) {
              if (cutAt !== "givingup/") {
                return inner.putDeadLetter(letter, options);
              }
              const { marks: _ignored, ...rest } = options ?? {};
              return inner.putDeadLetter(letter, rest);
            },
          }),
      );
      const drop = relayer.deliver(
        job,
        5,
        cutAt === undefined
          ? {}
          : { message: { queue: "qstash", messageId: "msg_1" } },
      );
      if (cutAt === undefined) {
        assert.equal((await drop).action, "poison");
      } else await assert.rejects(drop, /connection reset/);
      // Another message of the job, numbered lower: busy while the lease lasts.
      const m2 = { message: { queue: "qstash", messageId: "msg_2" } } as const;
      const held = await relayer.deliver(job, 1, m2);
      assert.equal(
        held.action === "retry" && held.reason,
        "intent pi_0001 is busy with another delivery",
        `cut at ${cutAt}`,
      );
      assert.deepEqual(sender.calls, [], `cut at ${cutAt}`);
      clock.now += LEASE_LAPSED_MS;
      assert.equal(
        (await relayer.deliver(job, 2, m2)).reason,
        "sent 0xabc, waiting for confirmation",
        `cut at ${cutAt}`,
      );
    }
  });

  test("createRelayer() marks nothing for a last delivery's drop whose letter failed: it has not answered, and a copy of its message then sends", async () => {
    let cut = true;
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) =>
        overriding(inner, {
          putDeadLetter(...args) {
            if (cut) {
              cut = false;
              return Promise.reject(new Error("connection reset"));
            }
            return inner.putDeadLetter(...args);
          },
        }),
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    await assert.rejects(relayer.deliver(job, 5, m1), /connection reset/);
    // The letter and its givingup/ mark land together or not at all: a
    // mark left without its letter would refuse every later send of this
    // message, whose job lives on.
    assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    assert.equal(
      (await relayer.deliver(job, 2, m1)).reason,
      "sent 0xabc, waiting for confirmation",
    );
    assert.equal(sender.calls.filter((c) => c.method === "send").length, 1);
  });

  test("createRelayer() drops the job again at its message's next delivery past the last when a drop was cut between its marks: its copies then answer as late copies", async () => {
    let cut = true;
    const { relayer, store, sender, clock } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }] },
      {},
      (inner) =>
        overriding(inner, {
          admit(...args) {
            if (cut && args[0].count?.startsWith("gaveup/")) {
              cut = false;
              return Promise.reject(new Error("connection reset"));
            }
            return inner.admit(...args);
          },
        }),
    );
    const m1 = { message: { queue: "qstash", messageId: "msg_1" } } as const;
    // The letter and the givingup/ mark landed, the gaveup/ mark did not:
    // the delivery has not answered, and the queue delivers it again.
    await assert.rejects(relayer.deliver(job, 5, m1), /connection reset/);
    clock.now += LEASE_LAPSED_MS;
    const again = await relayer.deliver(job, 6, m1);
    assert.equal(
      again.action === "poison" && again.resolution,
      "job dropped, intent still authorized",
    );
    // Within the second drop's lease, busy or a late copy (as the store
    // checks first); past it, a late copy.
    assert.notEqual((await relayer.deliver(job, 2, m1)).action, "poison");
    clock.now += LEASE_LAPSED_MS;
    assert.deepEqual(await relayer.deliver(job, 2, m1), {
      action: "done",
      delivery: 2,
      reason:
        "the queue gave up on this message before: a late copy, nothing sent",
    });
    assert.equal(sender.calls.length, 0);
    assert.equal((await intent(store)).state, "authorized");
  });

  test("createRelayer() still sends an authorized intent at the delivery before the last: the last is left to read the receipt", async () => {
    const { relayer, store, sender } = await setup(
      { state: "authorized", hold: "pending" },
      { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
    );
    assert.deepEqual(await relayer.deliver(job, 4), {
      action: "retry",
      delivery: 4,
      delayMs: 40_000,
      reason: "sent 0xabc, waiting for confirmation",
    });
    assert.equal(sender.calls.length, 1);
    assert.equal((await intent(store)).state, "settling");
    assert.equal((await relayer.deliver(job, 5)).action, "done");
    assert.equal((await intent(store)).state, "settled");
  });

  test("createRelayer() still sends again at the last delivery for a settling intent whose last broadcast was declared not sent: sending nothing would fail a payment that can still be sent", async () => {
    const { relayer, store, sender } = await setup(
      RESENDING,
      { sends: [{ txHash: "0xabc" }] },
    );
    const outcome = await relayer.deliver(job, 5);
    assert.equal(sender.calls.length, 1);
    assert.deepEqual(
      outcome.action === "poison" && outcome.resolution,
      "last broadcast sent as 0xabc, needs review",
    );
    assert.equal((await intent(store)).state, "needs_review");
  });

  test("createRelayer() rejects a malformed job, a bad delivery number and a bad lease", async () => {
    const { relayer } = await setup({ state: "created" });
    await assert.rejects(
      relayer.deliver({ intentId: "", kind: "settle" }),
      TypeError,
    );
    await assert.rejects(
      relayer.deliver({ intentId: "pi 1", kind: "settle" }),
      /'intentId' must be 1-128 characters/,
    );
    await assert.rejects(
      relayer.deliver({ intentId: "pi_1", kind: "refund" } as never),
      /'kind' must be "settle"/,
    );
    await assert.rejects(
      relayer.deliver(job, 0),
      /Cannot deliver as 'delivery' must be an integer >= 1: current value is 0/,
    );
    assert.throws(
      () =>
        createRelayer({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          leaseMs: 0,
        }),
      RangeError,
    );
  });
}

for (const backend of BACKENDS) suite(backend);

/** A dead letter as kept, without the store's version. */
function letterOf(stored: StoredDeadLetter | null): DeadLetter | null {
  if (stored === null) return null;
  const { version: _, ...letter } = stored;
  return letter;
}

Deno.test("createRelayer() redrive loses nothing when a prompt queue delivers the job, and it is poisoned again, before the dead letter is removed", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001" });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    now: () => 0,
    random: () => 0,
  });
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  await relayer.deliver(job); // counted: 1 of 1, poisoned
  const first = await store.getDeadLetter("pi_0001/settle");
  assert.equal(first?.deliveries, 1);
  // The queue delivers the published job at once, before the removal: a
  // fresh run, 1 of 1 again, poisoned again, with a new dead letter.
  await assert.rejects(
    relayer.redrive("pi_0001/settle", {
      publish: async (j) => void await relayer.deliver(j),
    }),
    ConflictError,
  );
  // The letter the redrive read changed under it: it removed nothing, so
  // the job's record is still there, the newer one.
  const kept = await store.getDeadLetter("pi_0001/settle");
  assert.notEqual(kept?.version, first?.version);
  assert.equal(kept?.deliveries, 1);
});

Deno.test("createRelayer() refuses to redrive a needs_review intent's dead letter: it is the record of why, and the refusal says to resolve the review, then discard it", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    now: () => 0,
  });
  await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 1);
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
  await assert.rejects(
    relayer.redrive("pi_0001/settle"),
    /already needs_review: no job can help it/,
  );
  // The refusal says what to do instead: on call meets it for each review
  // in a burst of letters it redrives.
  await assert.rejects(
    relayer.redrive("pi_0001/settle"),
    /resolve the review by hand \(settle or fail the intent\), then discard the letter$/,
  );
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createRelayer() refuses to redrive an unreadable message's dead letter, saying it records no job, and publishes nothing", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  const published: unknown[] = [];
  const publish = (job: unknown) => {
    published.push(job);
    return Promise.resolve();
  };
  // One that names no intent, and one whose intent could be read.
  const nameless = await relayer.keepUnreadable({
    queue: "local",
    id: "m-1",
    raw: "{",
    detail: "not JSON",
  });
  const named = await relayer.keepUnreadable({
    queue: "pubsub",
    id: "m-2",
    raw: '{"intentId":"pi_0001","kind":"refund"}',
    seen: { intentId: "pi_0001" },
    detail: "'kind' must be \"settle\"",
  });
  for (const jobId of [nameless, named]) {
    await assert.rejects(
      relayer.redrive(jobId, { publish }),
      (error: unknown) => {
        assert.ok(error instanceof ConflictError, String(error));
        assert.equal(error.refused, true);
        assert.equal(
          error.message,
          `Cannot redrive ${jobId} as it records an unreadable queue message, not a job: there is nothing to redrive. Publish a readable job for its intent (POST /v1/jobs) if it needs one, then discard the letter`,
        );
        return true;
      },
    );
    assert.notEqual(await store.getDeadLetter(jobId), null, jobId);
  }
  assert.deepEqual(published, []);
});

Deno.test("formatOutcome() keeps a space after a job id of any length", () => {
  const outcome = {
    action: "retry",
    delivery: 1,
    delayMs: 5000,
    reason: "not authorized yet",
  } as const;
  assert.match(
    formatOutcome({ intentId: "pi_0001", kind: "settle" }, outcome),
    /^pi_0001\/settle {3}#1 /,
  );
  assert.match(
    formatOutcome({ intentId: "pi_0002_notsent", kind: "settle" }, outcome),
    /^pi_0002_notsent\/settle #1 /,
  );
});

Deno.test("formatOutcome() never cuts a long reason inside a surrogate pair", () => {
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  // The emoji's two halves at 499 and 500: the cut keeps neither.
  for (const at of [497, 498, 499]) {
    const reason = `${"a".repeat(at)}\u{1F600}${"b".repeat(20)}`;
    const line = formatOutcome(job, {
      action: "retry",
      delivery: 1,
      delayMs: 5000,
      reason,
    });
    assert.ok(
      line.isWellFormed(),
      `at ${at}: ${JSON.stringify(line.slice(-4))}`,
    );
    assert.ok(line.endsWith("…)"));
  }
});

Deno.test("formatOutcome() flattens the line breaks of every kind: C1 controls (NEL) and the line and paragraph separators some log viewers break on", () => {
  const line = formatOutcome({ intentId: "pi_0001", kind: "settle" }, {
    action: "retry",
    delivery: 1,
    delayMs: 5000,
    reason: "rpc down\u0085next\u2028line\u2029para\u009bx",
  });
  assert.equal(
    line,
    "pi_0001/settle   #1  retry        (rpc down next line para x)",
  );
});

/** The first delivery of an authorized pi_0001 whose send fails with `message`. */
async function firstDeliveryFailingWith(message: string) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({
      pi_0001: { sends: [{ error: new Error(message) }] },
    }),
    random: () => 0,
  });
  return await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 1);
}

Deno.test("a retry's reason clipped at 1,000 characters never ends inside a surrogate pair", async () => {
  for (const at of [998, 999]) {
    const message = `${"a".repeat(at - "send: ".length)}\u{1F600}${
      "b".repeat(50)
    }`;
    const outcome = await firstDeliveryFailingWith(message);
    assert.equal(outcome.action, "retry");
    assert.ok(outcome.reason.isWellFormed(), `at ${at}`);
    assert.match(outcome.reason, /… \(\d+ more characters\)$/);
  }
});

Deno.test("formatOutcome() keeps a Sender's multi-line error on one log line, cut at 500 characters, while the delivery keeps all of it", async () => {
  // viem's errors span lines: "Request Arguments:", "Details:", "Version:".
  const viem = [
    "The request took too long to respond.",
    "",
    "URL: http://rpc.example",
    "Request body: " + "x".repeat(600),
    "",
    "Details: The request timed out.\r\nVersion: viem@2.21.0",
  ].join("\n");
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  const outcome = await firstDeliveryFailingWith(viem);
  assert.equal(outcome.action, "retry");
  assert.ok(outcome.reason.includes("\nURL: http://rpc.example"));
  const line = formatOutcome(job, outcome);
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(line, /[\r\n\u0000-\u001f]/);
  assert.match(line, /\(send: The request took too long to respond\. URL: /);
  assert.ok(line.endsWith("…)"), line.slice(-20));
  assert.equal(line.length, "pi_0001/settle   #1  retry        (".length + 501);
});

/**
 * An authorized pi_0001 on a MemoryStore whose first `transition` (the
 * write-ahead, authorized to settling) commits, then loses its answer (the
 * connection drops after `COMMIT`); a relayer over it. With `resend`,
 * pi_0001 is settling, its last broadcast declared not sent, and the write
 * whose answer is lost is its next send's write-ahead (`beginBroadcast`):
 * the write a last delivery makes (an authorized intent's first send
 * waits for a delivery that can read its receipt).
 */
async function lostAnswer(
  policy: RelayerOptions["policy"] = {},
  resend = false,
) {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    hold: "pending",
    ...(resend
      ? {
        state: "settling",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0 },
        mayHaveSent: false,
      }
      : { state: "authorized" }),
  });
  let drop = true;
  const lose =
    <A extends unknown[], T>(write: (...args: A) => Promise<T>) =>
    async (...args: A): Promise<T> => {
      const written = await write(...args);
      if (drop) {
        drop = false;
        throw new Error("connection reset after COMMIT");
      }
      return written;
    };
  const store = overriding(
    memory,
    resend
      ? { beginBroadcast: lose(memory.beginBroadcast.bind(memory)) }
      : { transition: lose(memory.transition.bind(memory)) },
  );
  const clock = { now: 0 };
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xaa" }] } }),
    policy,
    now: () => clock.now,
    random: () => 0,
  });
  return { memory, relayer, clock };
}

Deno.test("createRelayer() takes a write that landed but whose answer was lost as this delivery's failure, not a replay, and the signature stays used", async () => {
  const { memory, relayer } = await lostAnswer();
  const claim = { key: "v1=ab12", now: 0, expiresAt: 360_000 };
  const outcome = await relayer.deliver(job, 1, { claim });
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /connection reset after COMMIT/);
  // The write landed: the intent is settling with a send written ahead.
  const intent = await memory.getIntent("pi_0001");
  assert.equal(intent?.state, "settling");
  assert.notEqual(intent?.broadcasting, null);
  // The same signed request again is a replay.
  await assert.rejects(relayer.deliver(job, 1, { claim }), ReplayError);
});

Deno.test("createRelayer() answers a last delivery whose write landed but whose answer was lost with a retry and writes nothing more; the next delivery resolves it", async () => {
  const { memory, relayer, clock } = await lostAnswer(
    { maxDeliveries: 1 },
    true,
  );
  const claim = { key: "v1=ab12", now: 0, expiresAt: 360_000 };
  const outcome = await relayer.deliver(job, 1, { claim });
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /connection reset after COMMIT/);
  // Not poisoned, so asked back after the policy's delay for its number,
  // equal jitter's floor of 5 s (random 0), as any retry: not at once.
  assert.equal(outcome.action === "retry" && outcome.delayMs, 2500);
  // What landed stands, and nothing was resolved on top of it.
  assert.equal((await memory.getIntent("pi_0001"))?.state, "settling");
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  await assert.rejects(relayer.deliver(job, 1, { claim }), ReplayError);
  // The queue's next delivery, once the lease the write-ahead took has
  // lapsed, reads it: a send written ahead and never made may be out there.
  clock.now = 60_000;
  const next = await relayer.deliver(job, 2, {
    claim: { ...claim, key: "v1=cd34" },
  });
  assert.equal(next.action, "poison");
  assert.equal((await memory.getIntent("pi_0001"))?.state, "needs_review");
});

Deno.test("createRelayer() backs a busy delivery off by the policy's delay when the store's BusyError gives no usable lapse time (NaN, Infinity): never a delay of NaN or of a whole lease", async () => {
  for (const leaseExpiresAt of [Number.NaN, Infinity, -Infinity]) {
    const memory = new MemoryStore();
    await memory.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    // A Store of one's own that says another holds the lease, and names a
    // lapse time that is no time.
    const busy = () =>
      Promise.reject(new BusyError("lease held", { leaseExpiresAt }));
    const relayer = createRelayer({
      store: overriding(memory, { beginBroadcast: busy, transition: busy }),
      sender: new ScriptedSender({}),
      policy: { maxDeliveries: 5, jitter: "none" },
      now: () => 0,
      random: () => 0,
      clockSkewMs: 0,
    });
    const outcome = await relayer.deliver(job, 2);
    assert.deepEqual(
      outcome.action === "retry" && [outcome.reason, outcome.delayMs],
      ["intent pi_0001 is busy with another delivery", 10_000],
      String(leaseExpiresAt),
    );
  }
});

Deno.test("createRelayer() writes nothing for a replayed request whose first write fails without an answer, even at the last delivery", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "not_sent", at: 0, error: "nonce gap" },
    mayHaveSent: false,
  });
  const claim = { key: "v1=ab12", now: 0, expiresAt: 360_000 };
  await memory.admit({ claim, now: 0 }); // the original request
  let reset = true;
  const store = overriding(memory, {
    beginBroadcast(...args: Parameters<Store["beginBroadcast"]>) {
      if (!reset) return memory.beginBroadcast(...args);
      reset = false;
      return Promise.reject(new Error("connection reset"));
    },
  });
  const sender = new ScriptedSender({ pi_0001: { sends: [] } });
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 3 },
    now: () => 0,
    random: () => 0,
  });
  const outcome = await relayer.deliver(job, 3, { claim });
  assert.equal(outcome.action, "retry");
  const after = await memory.getIntent("pi_0001");
  assert.deepEqual([after?.state, after?.hold], ["settling", "pending"]);
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  assert.equal(sender.calls.length, 0);
});

Deno.test("createRelayer() records the signature of a delivery whose write failed before it landed", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  let refuse = true;
  const store = overriding(memory, {
    transition(...args: Parameters<Store["transition"]>) {
      if (!refuse) return memory.transition(...args);
      refuse = false;
      return Promise.reject(new Error("connection refused"));
    },
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xaa" }] } }),
    now: () => 0,
    random: () => 0,
  });
  const claim = { key: "v1=ab12", now: 0, expiresAt: 360_000 };
  const outcome = await relayer.deliver(job, 1, { claim });
  assert.equal(outcome.action, "retry");
  assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
  await assert.rejects(relayer.deliver(job, 1, { claim }), ReplayError);
});

Deno.test("createRelayer() answers busy, and throws nothing, when deliveries that drop the job keep racing on its dead letter while the intent stays as read", async () => {
  // Found by the money race on KvStore: four deliveries of a job whose hold
  // was voided each dropped it; three lost the race on the letter (a store
  // answers that as changed since read, not refused), and the third try
  // took the intent's unchanged version for a store's unmarked refusal and
  // threw the race out of deliver().
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "voided",
  });
  let lost = 0;
  const store = overriding(memory, {
    putDeadLetter: (letter, options) => {
      lost++;
      if (lost <= 3) {
        return Promise.reject(
          new ConflictError(
            "Cannot keep the dead letter of pi_1/settle as it changed since it was read; re-read it",
          ),
        );
      }
      return memory.putDeadLetter(letter, options);
    },
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    now: () => 1_000,
    random: () => 0,
  });
  const outcome = await relayer.deliver(
    { intentId: "pi_1", kind: "settle" },
    1,
  );
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /busy with another delivery/);
  assert.equal(lost, 3);
});

Deno.test("createRelayer() refuses to discard a created intent's letter saying to authorize it before a redrive, which alone only poisons its job again", async () => {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    now: () => 0,
  });
  const poisoned = await relayer.deliver(job, 1);
  assert.equal(poisoned.action, "poison");
  await assert.rejects(
    relayer.discard("pi_0001/settle"),
    (error: Error) =>
      error instanceof ConflictError &&
      /is still created: .*Authorize the intent, then redrive/.test(
        error.message,
      ) &&
      /not authorized yet/.test(error.message),
  );
  // A redriven job of the intent still created is poisoned again.
  await relayer.redrive("pi_0001/settle");
  assert.equal((await relayer.deliver(job, 1)).action, "poison");
  assert.equal((await store.getIntent("pi_0001"))?.state, "created");
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});
