/**
 * A copy of a send the relayer does not know it made (a proxy between the
 * relayer and the signer that retried the POST after the first's answer was
 * lost; a runtime that sent it again) reaches the signer after the first
 * broadcast. The signer of `_evm_world.ts`, written from the Sender docs,
 * signs the copy with the kept nonce, as the docs ask; the node refuses
 * it ("replacement underpriced": the first is in its mempool). A refusal
 * on a nonce that carries a tx of the intent must not be `notSent`: the
 * relayer, which saw only one request, would fail the payment and void
 * its hold with the first tx in the mempool.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, HttpSender, MemoryStore } from "../../mod.ts";
import { Chain, Signer } from "./_evm_world.ts";

Deno.test("a copy of a send, refused by the node on the intent's kept nonce, is not declared notSent: the payment is never failed with its first tx in the mempool", async () => {
  const chain = new Chain(() => 0.5, 0);
  const signer = new Signer(chain, {
    keep: "before",
    onNonceUsed: "returnOwn",
    receiptDepth: 3,
  });
  // The first POST of each send reaches the signer and broadcasts, and its
  // answer is lost; the proxy sends it again and returns the copy's answer.
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input as string, init);
    if (new URL(request.url).pathname !== "/send") {
      return await signer.fetch(input, init);
    }
    const body = await request.text();
    const copy = () =>
      new Request(request.url, {
        method: "POST",
        headers: request.headers,
        body,
      });
    await signer.handle(copy());
    const answer = await signer.handle(copy());
    return answer === "hang"
      ? Promise.reject(new TypeError("connection reset"))
      : answer;
  };
  const store = new MemoryStore();
  await store.createIntent({ id: "pi0", state: "authorized", hold: "pending" });
  const clock = { t: 1_000_000 };
  const relayer = createRelayer({
    store,
    sender: new HttpSender({ url: "http://signer.test", timeoutMs: 15, fetch }),
    policy: {
      maxDeliveries: 3,
      baseMs: 5000,
      capMs: 120000,
      jitter: "none",
      stuckAfterMs: 60_000,
    },
    now: () => clock.t,
    random: () => 0.5,
  });
  const job = { intentId: "pi0", kind: "settle" } as const;
  const outcomes: string[] = [];
  for (let n = 1; n <= 3; n++) {
    const outcome = await relayer.deliver(job, n);
    outcomes.push(`#${n} ${outcome.action}: ${outcome.reason}`);
    if (outcome.action !== "retry") break;
    clock.t += outcome.delayMs;
  }
  const intent = await store.getIntent("pi0");
  chain.flush(new Set());
  const paid = chain.blocks.flat().filter((m) =>
    m.tx.intentId === "pi0" && m.ok
  );
  assert.equal(paid.length, 1, "the first send's tx lands");
  assert.notEqual(
    `${intent?.state}/${intent?.hold}`,
    "failed/voided",
    `failed with ${paid[0]?.tx.hash} landing:\n${outcomes.join("\n")}`,
  );
});
