/**
 * The crash test's checks of the resolution path (the give-up's void then
 * fail, the operator's resolve route): an intent read at any moment, on a
 * store that voids or captures a hold in the commit of the move it rides
 * in, never shows a hold its state contradicts; and which resolutions
 * were sent while a `cancel` fault was under way; which payments the
 * operator finds nothing of on the chain (the signer stub refused every
 * send), and so fails with its hold voided; and a store's refusal of a
 * resolution the route let through.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  awaitsOperator,
  duringCancel,
  holdAgainstState,
  operatorMayStop,
  operatorResolution,
  resolutionRefused,
  resolutionStuck,
  SignerStub,
} from "../../tools/crash.ts";

Deno.test("holdAgainstState() names a hold half a resolution left: failed with the hold live, a review or a settling intent with its hold voided", () => {
  // What a whole commit leaves.
  for (
    const [state, hold] of [
      ["created", null],
      ["created", "pending"],
      ["authorized", "pending"],
      ["settling", "pending"],
      ["needs_review", "pending"],
      ["failed", "voided"],
      ["failed", null],
      ["settled", "captured"],
    ] as const
  ) {
    assert.equal(holdAgainstState(state, hold), null, `${state} ${hold}`);
  }
  for (
    const [state, hold] of [
      ["failed", "pending"],
      ["failed", "captured"],
      ["needs_review", "voided"],
      ["settling", "voided"],
      ["settled", "pending"],
    ] as const
  ) {
    assert.equal(
      holdAgainstState(state, hold),
      `${state} with a ${hold} hold`,
    );
  }
});

Deno.test("duringCancel() takes a request sent while a cancel fault was under way, and no other fault's or time", () => {
  const faults = [
    { kind: "terminate", from: 100, up: 200 },
    { kind: "cancel", from: 1000, up: 4000 },
    { kind: "cancel", from: 6000, up: null },
  ] as const;
  assert.equal(duringCancel(faults, 150), false);
  assert.equal(duringCancel(faults, 999), false);
  assert.equal(duringCancel(faults, 1000), true);
  assert.equal(duringCancel(faults, 4000), true);
  assert.equal(duringCancel(faults, 4001), false);
  assert.equal(duringCancel(faults, 7000), true);
});

/** A `/send` of `intentId` answered by `stub`. */
async function send(stub: SignerStub, intentId: string): Promise<number> {
  const response = await stub.handler(
    new Request("http://127.0.0.1/send", {
      method: "POST",
      body: JSON.stringify({
        intentId,
        replace: false,
        intent: { state: "settling", hold: "pending" },
      }),
    }),
  );
  await response.body?.cancel();
  return response.status;
}

Deno.test("SignerStub.onChain() finds nothing of a payment whose every send it refused, though a send may have left as the relayer sees it", async () => {
  const stub = new SignerStub(() => 0);
  stub.behaviours.set("pi_0001", "refused");
  stub.behaviours.set("pi_0002", "refused_then_poison");
  stub.behaviours.set("pi_0003", "confirm");
  stub.behaviours.set("pi_0004", "refused_notsent_confirm");
  for (const id of ["pi_0001", "pi_0002"]) {
    await send(stub, id);
    await send(stub, id);
  }
  assert.equal(await send(stub, "pi_0003"), 200);
  assert.equal(await send(stub, "pi_0004"), 502);
  // The relayer cannot tell a refused connection from a send that left:
  // the payments go to review, as may have sent.
  for (const id of ["pi_0001", "pi_0002"]) {
    assert.equal(stub.mayHaveLeft(id, []), true, id);
    assert.equal(stub.onChain(id), false, id);
  }
  assert.equal(stub.onChain("pi_0003"), true);
  assert.equal(stub.onChain("pi_0004"), false);
  assert.equal(await send(stub, "pi_0004"), 503); // not sent
  assert.equal(await send(stub, "pi_0004"), 200);
  assert.equal(stub.onChain("pi_0004"), true);
  assert.equal(stub.onChain("pi_0009"), false); // never sent
});

Deno.test("resolutionRefused() flags a fail the store refused as the route wrote it without its void, and passes a race lost and the route's own refusals", () => {
  // Recorded from a run whose resolve route moved the payment to failed
  // without `ledger: "void"`: the store refused it, and the payment would
  // have stayed in review for ever, the run passing.
  const refused = JSON.stringify({
    type: "urn:relayer:problem:refused",
    title: "Resolution refused",
    status: 409,
    detail:
      "Intent pi_0041 was not failed: Cannot fail pi_0041 while its hold is pending",
  });
  const version = "00000000000001b90000:00000000000000220000";
  assert.equal(
    resolutionRefused(409, refused, version, {
      state: "needs_review",
      version,
    }),
    true,
  );
  // A send's late record moved the version between the route's read and
  // its write: a race lost.
  assert.equal(
    resolutionRefused(409, refused, version, {
      state: "needs_review",
      version: "00000000000001c00000:00000000000000220000",
    }),
    false,
  );
  // Resolved whole since (another operator), or not read back.
  assert.equal(
    resolutionRefused(409, refused, version, { state: "failed", version }),
    false,
  );
  assert.equal(resolutionRefused(409, refused, version, null), false);
  // The route's own refusals, before any write.
  const pending = JSON.stringify({ type: "urn:relayer:problem:tx-pending" });
  assert.equal(
    resolutionRefused(409, pending, version, {
      state: "needs_review",
      version,
    }),
    false,
  );
  assert.equal(
    resolutionRefused(200, "{}", version, { state: "failed", version }),
    false,
  );
});

Deno.test("resolutionStuck() flags a payment still in review whose last resolution the store failed under, and passes one resolved since or never failed so", () => {
  // A route that, once the store failed under a payment's resolution,
  // answered 503 to every later one (passed, 503s being allowed under a
  // cancel fault): the payment stayed in review with its hold pending.
  const failure = { to: "failed", at: 9_680 } as const;
  assert.equal(
    resolutionStuck("pi_0043", failure, "needs_review", "pending"),
    "pi_0043: resolving it failed at 9.68s was answered 503 (the store failed under it), and it is still needs_review at the end with hold pending: the resolution never completed",
  );
  // Landed whole (its answer lost), or made again.
  assert.equal(resolutionStuck("pi_0043", failure, "failed", "voided"), null);
  assert.equal(
    resolutionStuck("pi_0043", { to: "settled", at: 1 }, "settled", "captured"),
    null,
  );
  // No store failure on its last resolution (a 409 of the route's since).
  assert.equal(
    resolutionStuck("pi_0043", undefined, "needs_review", "pending"),
    null,
  );
});

Deno.test("awaitsOperator() looks at payments in review and those whose job ended short of a final state, not at those read settled, failed or created", () => {
  const ended = {
    resolved: false,
    again: false,
    retryAt: undefined,
    jobEnded: true,
  } as const;
  // With 300 intents, the operator's four looks a round went to the 200
  // jobs ended settled or failed, and 34 payments in review with nothing
  // on the chain were still there at the end (seed 42).
  for (const lastSeen of ["settled", "failed", "created"] as const) {
    assert.equal(awaitsOperator({ ...ended, lastSeen }, 0), false, lastSeen);
  }
  for (
    const lastSeen of [
      "needs_review",
      "settling",
      "authorized",
      undefined,
    ] as const
  ) {
    assert.equal(awaitsOperator({ ...ended, lastSeen }, 0), true, lastSeen);
  }
  // Read in review, its job still running.
  assert.equal(
    awaitsOperator({ ...ended, jobEnded: false, lastSeen: "needs_review" }, 0),
    true,
  );
  assert.equal(
    awaitsOperator({ ...ended, jobEnded: false, lastSeen: "settling" }, 0),
    false,
  );
  // Resolved: not again, unless its resolution is to be made again (the
  // server died under it, or the store failed and it was not read back).
  const review = { ...ended, lastSeen: "needs_review" } as const;
  assert.equal(awaitsOperator({ ...review, resolved: true }, 0), false);
  assert.equal(
    awaitsOperator({ ...review, resolved: true, again: true }, 0),
    true,
  );
  // A 409 send-in-flight: not before its lease is over.
  assert.equal(awaitsOperator({ ...review, retryAt: 500 }, 499), false);
  assert.equal(awaitsOperator({ ...review, retryAt: 500 }, 500), true);
});

Deno.test("operatorResolution() settles a payment with a confirmed tx, fails one the chain holds nothing of with nonceChecked, fails one with a tx on record unconfirmed without it, and leaves in review one the chain holds a tx of that is on no record", () => {
  const confirmed = (hash: string) => hash === "0xok";
  // Nothing on the chain: its nonce is free, nothing of it can land.
  assert.deepEqual(operatorResolution([], confirmed, false), {
    to: "failed",
    nonceChecked: true,
  });
  // A tx on record, unconfirmed: the route reads its receipt (and refuses
  // a pending one); the nonce was not found free.
  assert.deepEqual(operatorResolution(["0xpending"], confirmed, true), {
    to: "failed",
    nonceChecked: false,
  });
  // A confirmed tx, whatever else is on record.
  for (const onChain of [true, false]) {
    assert.deepEqual(
      operatorResolution(["0xpending", "0xok"], confirmed, onChain),
      { to: "settled", nonceChecked: false },
    );
  }
  // A tx on the chain with no hash on record (its send's answer lost):
  // a fail would void the hold of a payment that may be made.
  assert.equal(operatorResolution([], confirmed, true), null);
});

Deno.test("operatorMayStop() waits for a resolution under way: one answered 409 send-ended is made again, and stopping as it was sent left it in review", () => {
  const payment = {
    resolved: true,
    resolving: false,
    onChain: false,
    storeFailed: false,
    lastSeen: "needs_review",
  } as const;
  assert.equal(operatorMayStop([payment], 0), true);
  // Marked resolved as its POST is sent; a 409 send-ended unmarks it and
  // it is made again at once: the operator may not stop in between.
  assert.equal(operatorMayStop([{ ...payment, resolving: true }], 0), false);
  assert.equal(operatorMayStop([{ ...payment, resolved: false }], 0), false);
  assert.equal(operatorMayStop([payment], 1), false);
  // On the chain, or out of review: nothing for the operator.
  assert.equal(
    operatorMayStop([{ ...payment, resolved: false, onChain: true }], 0),
    true,
  );
  assert.equal(
    operatorMayStop([{ ...payment, resolved: false, lastSeen: "failed" }], 0),
    true,
  );
  assert.equal(
    operatorMayStop([{
      ...payment,
      resolved: false,
      onChain: true,
      storeFailed: true,
    }], 0),
    false,
  );
});
