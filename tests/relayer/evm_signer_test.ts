/**
 * A Sender written from its docs, on an EVM-like chain (`_evm_world.ts`):
 * the money holds through drops, reorgs, reverts, a signer that times out
 * after broadcasting or answers 5xx with and without flags, crashes between
 * a send and its record, and an operator resolving reviews. The same world
 * catches a signer that breaks what the docs ask (its nonce kept after the
 * broadcast, receipts confirmed before final) and an operator who takes a
 * dropped tx for one that cannot land. A first send that reaches the
 * signer after a rescue of its intent signs with the nonce the rescue kept.
 *
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { createRelayer, HttpSender, MemoryStore } from "../../mod.ts";
import { runs } from "../_fc.ts";
import {
  Chain,
  type ReceiptFault,
  run,
  type RunPlan,
  type SendFault,
  Signer,
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
    { numRuns: runs(300) },
  );
  // "nonce too low" answered notSent (409) rather than the own tx's hash,
  // against the Sender docs: no money lost while every send is the
  // relayer's own (its mayHaveSent stands), only paid payments left to
  // review; a copy it never sent loses money (send_copy_test.ts).
  await fc.assert(
    fc.asyncProperty(
      plans({ ...asDocumented, onNonceUsed: "notSent409" }, "route"),
      moneyHolds,
    ),
    { numRuns: runs(100) },
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

Deno.test("a first send that reaches the signer after a rescue of its intent signs with the nonce the rescue kept: at most one tx of the payment can land", async () => {
  const chain = new Chain(() => 0.5, 0);
  const signer = new Signer(chain, asDocumented);
  // The signer runs the first send minutes late: the relayer's request
  // times out (maybe sent) and the signer runs it after the rescue.
  const late: Request[] = [];
  const fetch: typeof globalThis.fetch = (input, init) => {
    const req = new Request(input as string, init);
    if (late.length === 0 && new URL(req.url).pathname === "/send") {
      late.push(req);
      return Promise.reject(new TypeError("connection reset"));
    }
    return signer.fetch(input, init);
  };
  const store = new MemoryStore();
  await store.createIntent({ id: "pi0", state: "authorized", hold: "pending" });
  const clock = { t: 1_000_000 };
  const relayer = createRelayer({
    store,
    sender: new HttpSender({ url: "http://signer.test", timeoutMs: 15, fetch }),
    now: () => clock.t,
    random: () => 0.5,
  });
  const job = { intentId: "pi0", kind: "settle" } as const;
  const first = await relayer.deliver(job, 1);
  assert.equal(first.action, "retry");
  clock.t += 301_000; // past stuckAfterMs: the relayer rescues
  await relayer.deliver(job, 2); // the rescue: replace: true, no nonce kept
  const sends = [...chain.signed.values()];
  assert.equal(sends.length, 1, "the rescue reached the signer");
  assert.equal(sends[0]!.fee, 120, "the rescue was sent with replace: true");
  // The first send, replace: false, reaches the signer now.
  const [req] = late;
  assert.equal((await req!.clone().json()).replace, false);
  await signer.handle(req!);
  chain.flush(new Set());
  const paid = chain.blocks.flat().filter((m) =>
    m.tx.intentId === "pi0" && m.ok
  );
  assert.equal(
    paid.length,
    1,
    `paid by ${paid.map((m) => `${m.tx.hash}@${m.tx.nonce}`)}`,
  );
});
