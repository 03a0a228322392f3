/**
 * A fail posted while a send still runs in one instance, after another
 * instance rescued the payment (the wall clock stepped past the first
 * send's lease): the rescue's write-ahead replaced the first send's on the
 * intent, and its record cleared it, so the review carries no
 * `broadcasting` while the first send may still leave its tx.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  MemoryStore,
  notSent,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";
import {
  authorizedIntent,
  deliverMidSend,
  failByHand,
  heldSends,
  leasedApp,
  readIntent,
  refusedWhileSending,
} from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-fail-mid-send-rescued-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

/** An instance of the webhook on `store` and `sender`, its clock `clock.now`, a send stuck after 1 s. */
function instance(
  store: Store,
  sender: Sender,
  clock: { now: number },
) {
  return leasedApp(store, {
    clock,
    opsToken: OPS,
    sender,
    policy: { stuckAfterMs: 1_000 },
  });
}

for (const backend of BACKENDS) {
  for (const rescue of ["not_sent", "sent"] as const) {
    Deno.test(`${backend.name}: a fail while a send still runs, after another instance's rescue (${rescue}), is refused and the hold stays pending`, async () => {
      const { store, close } = await backend.open();
      try {
        await authorizedIntent(store);
        const clock = { now: 1_000_000 };
        const { sender, sending, finish, receipt } = heldSends("0xA");
        const rescuer: Sender = {
          send: () =>
            rescue === "sent"
              ? Promise.resolve({ txHash: "0xB" })
              : Promise.reject(notSent(new Error("rejected by the node"))),
          receipt,
        };
        const sendingApp = instance(store, sender(true), clock);
        const rescueApp = instance(store, rescuer, clock);
        const failApp = instance(store, sender(false), clock);
        const { delivery } = await deliverMidSend(sendingApp, {
          job,
          clock,
          sending,
        });
        const rescued = await rescueApp.relayer.deliver(job, 2);
        const mid = await store.getIntent("pi_1");
        const gaveUp = await failApp.relayer.giveUp(job, {
          deliveries: 3,
          queue: { queue: "qstash", messageId: "msg_1" },
        });
        const seen = await readIntent(failApp, headers);
        assert.equal(
          seen.state,
          "needs_review",
          `${JSON.stringify(rescued)} ${JSON.stringify(gaveUp)} ${
            JSON.stringify(mid)
          }`,
        );
        // The operator looks the nonce up: unused, the first tx has not left.
        const answer = await failByHand(failApp, headers, seen.version, true);
        // Then the first send leaves, and its tx confirms.
        await refusedWhileSending(store, answer, {
          delivery,
          leaves: () => finish({ txHash: "0xA" }),
          context: `review ${JSON.stringify(seen)}; `,
        });
      } finally {
        await close();
      }
    });
  }
}

Deno.test("a fail posted to the instance whose rescue replaced a running send's write-ahead, and whose own record failed, is refused while the first send runs", async () => {
  const store = new MemoryStore();
  await authorizedIntent(store);
  const clock = { now: 1_000_000 };
  const { sender, sending, finish, receipt } = heldSends("0xA");
  // The rescuer's store fails the record of its send (its tx left).
  const failingRecords = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key === "recordBroadcast") {
        return () => Promise.reject(new Error("connection reset"));
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const sendingApp = instance(store, sender(true), clock);
  const rescueApp = instance(
    failingRecords,
    { send: () => Promise.resolve({ txHash: "0xB" }), receipt },
    clock,
  );
  const { delivery } = await deliverMidSend(sendingApp, {
    job,
    clock,
    sending,
  });
  await rescueApp.relayer.deliver(job, 2);
  clock.now += 1_000; // the rescue's lease is over: its send ended
  await rescueApp.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  // The operator posts the fail until it is taken or refused for a wait.
  const answers: string[] = [];
  for (let i = 0; i < 3; i++) {
    const seen = await readIntent(rescueApp, headers);
    if (seen.state !== "needs_review") break;
    const answer = await failByHand(rescueApp, headers, seen.version, true);
    const body = await answer.json();
    answers.push(`${answer.status} ${body.type ?? ""}`);
    if (answer.status === 200 || /send-in-flight$/.test(body.type)) break;
  }
  finish({ txHash: "0xA" });
  await delivery;
  const after = await store.getIntent("pi_1");
  assert.equal(
    `${after?.state}/${after?.hold}`,
    "needs_review/pending",
    `answers ${JSON.stringify(answers)}; ${JSON.stringify(after)}`,
  );
});

// As above, but the rescue's send was declared not sent and the store
// refused its record as busy (nothing written): the rescuer knows its own
// send ended, and its write-ahead is still on the intent. The first send,
// whose write-ahead the rescue's replaced (mayHaveSent), may still run.
Deno.test("a fail posted to the instance whose rescue replaced a running send's write-ahead, and whose own send ended with its record refused, is refused while the first send runs", async () => {
  const store = new MemoryStore();
  await authorizedIntent(store);
  const clock = { now: 1_000_000 };
  const { sender, sending, finish, receipt } = heldSends("0xA");
  const refusedRecords = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key === "recordBroadcast") {
        return () =>
          Promise.reject(new BusyError("intent pi_1 is leased to another"));
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const sendingApp = instance(store, sender(true), clock);
  const rescueApp = instance(refusedRecords, {
    send: () => Promise.reject(notSent(new Error("nonce too low"))),
    receipt,
  }, clock);
  const { delivery } = await deliverMidSend(sendingApp, {
    job,
    clock,
    sending,
  });
  await rescueApp.relayer.deliver(job, 2);
  clock.now += 1_000;
  await rescueApp.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  const seen = await readIntent(rescueApp, headers);
  assert.equal(seen.state, "needs_review");
  assert.notEqual(seen.broadcasting, null);
  const answer = await failByHand(rescueApp, headers, seen.version, true);
  const body = await answer.json();
  finish({ txHash: "0xA" });
  await delivery;
  assert.equal(answer.status, 409, JSON.stringify(body));
  assert.match(body.type, /send-in-flight$/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
});

Deno.test("a review that may have sent waits a lease again once a record moves its version: the wait is keyed by the version, not the intent", async () => {
  const store = new MemoryStore();
  await authorizedIntent(store);
  const clock = { now: 1_000_000 };
  let mono = 0;
  let finish!: (sent: { txHash: string }) => void;
  let began!: () => void;
  const sending = new Promise<void>((resolve) => began = resolve);
  // Every tx reads dropped: no receipt stops the fail.
  const receipt = () => Promise.resolve<ReceiptStatus>("dropped");
  const app = (send: Sender["send"]) =>
    leasedApp(store, {
      clock,
      opsToken: OPS,
      sender: { send, receipt },
      monotonicNow: () => mono,
      policy: { stuckAfterMs: 1_000 },
    });
  const sendingApp = app(() => {
    began();
    return new Promise((resolve) => finish = resolve);
  });
  const rescueApp = app(() =>
    Promise.reject(notSent(new Error("rejected by the node")))
  );
  const failApp = app(() => Promise.reject(new Error("sends nothing")));
  const delivery = sendingApp.relayer.deliver(job, 1);
  await sending;
  clock.now += 60_000; // the wall clock steps forward mid-send
  await rescueApp.relayer.deliver(job, 2);
  await failApp.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  const fail = async () => {
    const seen = await readIntent(failApp, headers);
    const answer = await failByHand(failApp, headers, seen.version, true);
    return { seen, status: answer.status, body: await answer.json() };
  };
  const first = await fail();
  assert.equal(first.seen.state, "needs_review");
  assert.equal(first.seen.broadcasting, null);
  assert.equal(first.status, 409, JSON.stringify(first.body));
  assert.match(first.body.type, /send-in-flight$/);
  // A lease later, the first send's record lands (its tx reads dropped):
  // the version moves, and the wait starts again from this sight of it.
  mono += 200;
  finish({ txHash: "0xA" });
  await delivery;
  const second = await fail();
  assert.notEqual(second.seen.version, first.seen.version);
  assert.deepEqual(second.seen.txHashes, ["0xA"]);
  assert.equal(second.status, 409, JSON.stringify(second.body));
  assert.match(second.body.type, /send-in-flight$/);
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // A lease after that sight, it is taken.
  mono += 200;
  const third = await fail();
  assert.equal(third.status, 200, JSON.stringify(third.body));
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});
