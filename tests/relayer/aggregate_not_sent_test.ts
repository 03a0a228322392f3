/**
 * A send that went to several nodes fails as an `AggregateError` of their
 * failures (`Promise.any`'s): "not sent" only when every node's failure
 * says so. Before, one node's declared refusal beside another's timeout
 * (a tx it may have taken) was read as nothing sent: the payment failed
 * and its hold was voided while that tx could still land.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  createRelayer,
  type Intent,
  MemoryStore,
  notSent,
  type ReceiptStatus,
  type Sender,
} from "../../mod.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

/** A Sender that gives each send to two nodes, as `Promise.any` does. */
function twoNodes(
  a: () => Promise<string>,
  b: () => Promise<string>,
): Sender {
  return {
    async send(_intent: Intent) {
      return { txHash: await Promise.any([a(), b()]) };
    },
    receipt(): Promise<ReceiptStatus> {
      return Promise.resolve("pending");
    },
  };
}

const timedOut = () => Promise.reject(new Error("node a: timed out"));
const refused = () =>
  Promise.reject(notSent(new Error("node b: nonce too low")));

/** Delivers the job until it is poisoned (at most 2 deliveries). */
async function deliveredOut(sender: Sender) {
  const store = new MemoryStore();
  await store.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 2 },
  });
  assert.equal((await relayer.deliver(JOB, 1)).action, "retry");
  const outcome = await relayer.deliver(JOB, 2);
  return { outcome, intent: await store.getIntent(JOB.intentId) };
}

Deno.test("a node's refusal beside another node's timeout is not 'not sent': the payment goes to review, its hold pending", async () => {
  const { outcome, intent } = await deliveredOut(twoNodes(timedOut, refused));
  assert.equal(outcome.action, "poison", JSON.stringify(outcome));
  assert.equal(intent?.state, "needs_review", outcome.reason);
  assert.equal(intent?.hold, "pending");
  assert.equal(intent?.lastBroadcast?.outcome, "unknown");
});

Deno.test("every node's refusal declared not sent is 'not sent': the hold is voided and the payment failed", async () => {
  const { outcome, intent } = await deliveredOut(twoNodes(refused, refused));
  assert.equal(intent?.state, "failed", outcome.reason);
  assert.equal(intent?.hold, "voided");
  assert.equal(intent?.lastBroadcast?.outcome, "not_sent");
});
