/**
 * A queue's give-up that runs on another instance than the delivery still
 * sending (Deno Deploy's isolates, two `deno serve` processes on one
 * store): that instance cannot wait for the send as its own, so its check
 * of the receipts may read the intent before the send's record lands. If
 * the record lands between that check and the resolution's own read, the
 * resolution finds a tx on record whose receipt nobody asked, and must
 * ask it: a payment whose tx confirmed is settled, not sent to review
 * (docs/queues.md, "When the queue gives up anyway").
 */
import assert from "node:assert/strict";
import {
  createRelayer,
  type Intent,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { MemoryStore } from "../../store/memory.ts";
import { KvStore } from "../../store/kv.ts";
import { BACKENDS } from "../_stores.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const QUEUE = { queue: "qstash", messageId: "msg_1" } as const;

/** A signer whose send waits for `sendGate`, and whose every tx confirmed. */
function gatedSigner(sendGate: Promise<void>) {
  let sent!: () => void;
  const sending = new Promise<void>((resolve) => sent = resolve);
  const sender: Sender = {
    async send(intent: Intent) {
      sent();
      await sendGate;
      return { txHash: `0x${intent.id}` };
    },
    receipt: (): Promise<ReceiptStatus> => Promise.resolve("confirmed"),
  };
  return { sender, sending };
}

/**
 * `store` whose `getIntent` calls, from the `nth` on, first wait for
 * `before()`: the other instance's record lands between two reads.
 */
function readingLate(
  store: Store,
  nth: number,
  before: () => Promise<void>,
): Store {
  let reads = 0;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== "getIntent") return value.bind(target);
      return async (...args: unknown[]) => {
        if (++reads >= nth) await before();
        return await value.apply(target, args);
      };
    },
  });
}

/** Each backend, and KvStore as two instances on one Deno KV (each its own cache). */
const cases = [
  ...BACKENDS.map((backend) => ({
    name: backend.name,
    async open() {
      const { store, close } = await backend.open();
      return { a: store, b: store, close };
    },
  })),
  {
    name: "KvStore, one instance each",
    async open() {
      const kv = await Deno.openKv(":memory:");
      return {
        a: new KvStore(kv) as Store,
        b: new KvStore(kv) as Store,
        close: () => kv.close(),
      };
    },
  },
];

for (const { name, open } of cases) {
  Deno.test(`${name}: a give-up whose receipt check read the intent before another instance recorded its send asks that tx's receipt, and settles on it`, async () => {
    const { a, b, close } = await open();
    try {
      await a.createIntent({
        id: JOB.intentId,
        state: "authorized",
        hold: "pending",
      });
      let release!: () => void;
      const gate = new Promise<void>((resolve) => release = resolve);
      const { sender, sending } = gatedSigner(gate);
      const sendingHere = createRelayer({ store: a, sender });
      const delivery = sendingHere.deliver(JOB, 1, { message: QUEUE });
      await sending;
      // The give-up's second read is its resolution's: the send is
      // recorded (and its lease released) just before it.
      const givingUpThere = createRelayer({
        store: readingLate(b, 2, async () => {
          release();
          await delivery;
        }),
        sender,
      });
      const outcome = await givingUpThere.giveUp(JOB, {
        deliveries: 3,
        queue: QUEUE,
      });
      assert.equal(
        (await delivery).reason,
        "sent 0xpi_0001, waiting for confirmation",
      );
      const intent = await a.getIntent(JOB.intentId);
      assert.deepEqual(
        [outcome.action, outcome.reason, intent?.state, intent?.hold],
        [
          "done",
          "the queue gave up after 3 deliveries: 0xpi_0001 confirmed, intent settled",
          "settled",
          "captured",
        ],
      );
    } finally {
      await close();
    }
  });
}

Deno.test("a give-up whose receipt check asked the first tx asks the receipt of a rescue's tx another instance recorded since, and settles on it, though the first tx is among those asked", async () => {
  const store = new MemoryStore();
  await store.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  let at = 0;
  const now = () => at;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  let rescuing!: () => void;
  const rescueSent = new Promise<void>((resolve) => rescuing = resolve);
  let sends = 0;
  // The first tx stays pending; the rescue's (same nonce) confirmed.
  const sender: Sender = {
    async send() {
      if (++sends === 1) return { txHash: "0xaaa" };
      rescuing();
      await gate;
      return { txHash: "0xbbb" };
    },
    receipt: (txHash: string): Promise<ReceiptStatus> =>
      Promise.resolve(txHash === "0xbbb" ? "confirmed" : "pending"),
  };
  const here = createRelayer({ store, sender, now });
  assert.equal(
    (await here.deliver(JOB, 1, { message: QUEUE })).reason,
    "sent 0xaaa, waiting for confirmation",
  );
  at = 301_000; // past stuckAfterMs (300 s): the next delivery rescues
  const rescue = here.deliver(JOB, 2, { message: QUEUE });
  await rescueSent;
  // The give-up's check asks 0xaaa's receipt (pending); the rescue's
  // record of 0xbbb lands just before its resolution's read.
  const there = createRelayer({
    store: readingLate(store, 2, async () => {
      release();
      await rescue;
    }),
    sender,
    now,
  });
  const outcome = await there.giveUp(JOB, { deliveries: 3, queue: QUEUE });
  const intent = await store.getIntent(JOB.intentId);
  assert.deepEqual(
    [outcome.action, intent?.state, intent?.hold, intent?.txHashes],
    ["done", "settled", "captured", ["0xaaa", "0xbbb"]],
  );
});
