/**
 * A Sender written from its docs, on an EVM-like chain (`_evm_world.ts`):
 * the money holds through drops, reorgs, reverts, a signer that times out
 * after broadcasting or answers 5xx with and without flags, crashes between
 * a send and its record, and an operator resolving reviews. The same world
 * catches a signer that breaks what the docs ask (its nonce kept after the
 * broadcast, receipts confirmed before final) and an operator who takes a
 * dropped tx for one that cannot land.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type ReceiptFault,
  run,
  type RunPlan,
  type SendFault,
  type SignerOptions,
} from "./_evm_world.ts";

const sendFault: fc.Arbitrary<SendFault> = fc.constantFrom(
  "ok",
  "ok",
  "ok",
  "503_before",
  "503_before_notsent",
  "502_after",
  "timeout_after",
  "timeout_before",
  "crash_after_broadcast",
  "400_poison_notsent",
  "500_poison",
);
const receiptFault: fc.Arbitrary<ReceiptFault> = fc.constantFrom(
  "ok",
  "ok",
  "ok",
  "503",
  "timeout",
);

function plans(
  signer: SignerOptions,
  operator: RunPlan["operator"],
): fc.Arbitrary<RunPlan> {
  return fc.record({
    seed: fc.integer(),
    intents: fc.integer({ min: 1, max: 3 }),
    signer: fc.constant(signer),
    sendFaults: fc.array(sendFault, { maxLength: 12 }),
    receiptFaults: fc.array(receiptFault, { maxLength: 12 }),
    crashes: fc.uniqueArray(fc.integer({ min: 0, max: 12 }), { maxLength: 2 }),
    revertP: fc.constantFrom(0, 0.1, 0.3),
    operator: fc.constant(operator),
    maxDeliveries: fc.integer({ min: 2, max: 10 }),
    stuckAfterMs: fc.constantFrom(10_000, 30_000, 60_000, 120_000),
  });
}

/** The money holds after `plan`'s run: nothing paid twice, failed though paid, or settled unpaid. */
function moneyHolds(plan: RunPlan) {
  return run(plan).then(({ violations, log }) => {
    assert.deepEqual(violations, [], log.join("\n"));
  });
}

const asDocumented: SignerOptions = {
  keep: "before",
  onNonceUsed: "returnOwn",
  receiptDepth: 3,
};

Deno.test("a Sender written from its docs on an EVM-like chain never pays twice, fails a paid payment or settles an unpaid one, whatever the chain, the signer's faults and the operator do", async () => {
  await fc.assert(
    fc.asyncProperty(plans(asDocumented, "route"), moneyHolds),
    { numRuns: 300 },
  );
  // "nonce too low" answered notSent (409) rather than the own tx's hash: no
  // money lost, only paid payments left to review.
  await fc.assert(
    fc.asyncProperty(
      plans({ ...asDocumented, onNonceUsed: "notSent409" }, "route"),
      moneyHolds,
    ),
    { numRuns: 100 },
  );
});

Deno.test("the EVM-like world catches a signer that keeps its nonce after the broadcast, one that confirms before final, and an operator who takes a dropped tx for one that cannot land", async () => {
  const broken: [string, SignerOptions, RunPlan["operator"], number][] = [
    ["nonce kept after", { ...asDocumented, keep: "after" }, "none", 200],
    [
      "confirmed at depth 1",
      { ...asDocumented, receiptDepth: 1 },
      "route",
      500,
    ],
    ["failed on all dropped", asDocumented, "dropped", 3000],
  ];
  for (const [name, signer, operator, numRuns] of broken) {
    const found = await fc.check(
      fc.asyncProperty(plans(signer, operator), moneyHolds),
      { numRuns, seed: 42 },
    );
    assert.equal(found.failed, true, `${name}: no run lost money`);
  }
});
