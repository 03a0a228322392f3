/**
 * The QStash key roll docs/webhook.md walks through: QStash signs with its
 * current key, and a roll makes the next key current and draws a new next.
 * Each step of the service's two settings takes what QStash signs with then,
 * and the wrong order, or a second roll before the service was updated,
 * refuses every delivery.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { QSTASH, signQStash } from "./_signing.ts";

const A = "sig_roll_key_a_0123456789";
const B = "sig_roll_key_b_0123456789";
const C = "sig_roll_key_c_0123456789";
const D = "sig_roll_key_d_0123456789";

/**
 * What a service holding `current` and `next` answers a delivery QStash
 * signed with `key`: 401, or the relayer's outcome for it (`retry`: its
 * intent is not in the store yet), which only a delivery taken reaches.
 */
async function statusUnder(
  current: string,
  next: string,
  key: string,
): Promise<401 | string> {
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    qstash: {
      currentSigningKey: current,
      nextSigningKey: next,
      url: QSTASH.url,
    },
  });
  const body = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": await signQStash(body, { key }) },
  });
  const answer = await res.json();
  if (res.status === 401) return 401;
  assert.equal(res.status, 503, JSON.stringify(answer));
  assert.equal(answer.reason, "intent pi_0001 not found");
  return answer.outcome;
}

Deno.test("a QStash key roll drops nothing when the service's current key is updated first: (A, B), (B, B), (B, C) each take B, which QStash signs with after the roll", async () => {
  // Before the roll QStash signs with A; after it, with B (the old next).
  assert.equal(await statusUnder(A, B, A), "retry");
  for (const [current, next] of [[A, B], [B, B], [B, C]] as const) {
    assert.equal(
      await statusUnder(current, next, B),
      "retry",
      `${current} ${next}`,
    );
  }
});

Deno.test("a QStash key roll refuses every delivery when the service's next key is updated first, or when QStash rolls twice before the service is updated", async () => {
  assert.equal(await statusUnder(A, C, B), 401); // the next key first
  assert.equal(await statusUnder(A, B, C), 401); // rolled twice: C signs
  assert.equal(await statusUnder(B, C, D), 401); // and again, a step on
});
