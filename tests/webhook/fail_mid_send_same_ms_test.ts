/**
 * A fail posted to the instance whose own send of the payment ended with
 * its record landed (`not_sent`), while another instance's send, written
 * ahead at the same millisecond by its own wall clock (a clock behind by
 * the time between the two, or one that reads coarse time), still runs
 * and the give-up put the payment in review. The review carries that
 * other send's write-ahead, `broadcasting` equal to the first send's and
 * `mayHaveSent` false (the first send's record cleared its write-ahead,
 * so the second replaced none): the first instance must not take it for
 * its own send that ended. Refused 409 `send-in-flight`, the hold stays
 * pending, and the tx that then leaves is on record. On every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";
import {
  authorizedIntent,
  failByHand,
  leasedApp,
  sameMillisecondRace,
} from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-fail-mid-send-same-ms-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a fail posted to an instance whose own send ended (recorded) while another's, written ahead at the same millisecond, still runs is refused`, async () => {
    const { store, close } = await backend.open();
    try {
      await sameMillisecondRace(store, OPS);
    } finally {
      await close();
    }
  });
}

Deno.test("a fail posted to the instance whose own send ended with its record failed, the review carrying that send's write-ahead (mayHaveSent false), waits out the send bound, then send-ended once, then taken", async () => {
  // The send's record fails (the store down for it). Its write-ahead stays
  // on the intent, but an error that says nothing of the write may hide a
  // record that landed (and cleared it, for another send to write ahead
  // at the same millisecond): this process cannot tell, so it waits.
  class FailingRecord extends MemoryStore {
    override recordBroadcast(): Promise<never> {
      return Promise.reject(new Error("store down for the record"));
    }
  }
  const store = new FailingRecord();
  await authorizedIntent(store);
  const clock = { now: 1_000_000, mono: 0 };
  const app = leasedApp(store, {
    clock,
    opsToken: OPS,
    sender: {
      send: () => Promise.resolve({ txHash: "0xT" }),
      receipt: () => Promise.resolve("dropped"),
    },
    monotonicNow: () => clock.mono,
  });
  await app.relayer.deliver(job, 1).catch(() => {});
  clock.now += 60_000;
  const gaveUp = await app.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  const seen = (await store.getIntent("pi_1"))!;
  assert.equal(seen.state, "needs_review");
  assert.equal(seen.broadcasting, 1_000_000);
  assert.equal(seen.mayHaveSent, false);
  const fail = () => failByHand(app, headers, seen.version, true);
  const waiting = await fail();
  const waitingBody = await waiting.json();
  assert.equal(waiting.status, 409, JSON.stringify(waitingBody));
  assert.match(waitingBody.type, /send-in-flight$/);
  clock.mono += 200; // the send bound (the lease) has passed
  const first = await fail();
  const firstBody = await first.json();
  assert.equal(first.status, 409, JSON.stringify(firstBody));
  assert.match(firstBody.type, /send-ended$/);
  const taken = await fail(); // told once
  assert.equal(taken.status, 200, await taken.clone().text());
  assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
});
