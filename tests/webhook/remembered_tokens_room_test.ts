/**
 * The room an app keeps for QStash tokens it saw while the store could
 * not record them (at most 10,000, the oldest forgotten first): a token
 * is kept there only while the store has no record of it, so that a
 * long outage's tokens are not pushed out by tokens the store holds. One
 * pushed out and sent again once the store is back, with Upstash-Retried
 * raised, is taken as a later delivery: an authorized payment's job
 * dropped unsent, or a paid one sent to review.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { AUTHORIZED, makeApp } from "./_app.ts";
import { post } from "./_oversized_qstash.ts";
import { outage } from "../_outage.ts";
import { signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** An app over a store that is down while `down.now` is set, and a QStash delivery of `job` signed with token `jti`. */
async function appWithOutage() {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  const down = { now: true };
  const { app } = await makeApp({
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
    deps: { store: outage(memory, () => down.now), log: () => {} },
  });
  const body = JSON.stringify(job);
  const send = async (jti: string) =>
    await post(app, "/v1/qstash", body, {
      messageId: "msg_1",
      signature: await signQStash(body, { jti }),
    });
  /**
   * Sends each token of `jtis`, each answered `status` (or, for
   * "taken", anything but a replay's 401).
   */
  const each = async (jtis: Iterable<string>, status: number | "taken") => {
    for (const jti of jtis) {
      const res = await send(jti);
      const text = await res.text();
      if (status === "taken") {
        assert.notEqual(res.status, 401, `${jti}: ${text}`);
      } else assert.equal(res.status, status, `${jti}: ${text}`);
    }
  };
  return { down, send, each };
}

/** `jwt_<from>` … `jwt_<to - 1>`. */
function* tokens(from: number, to: number): Generator<string> {
  for (let i = from; i < to; i++) yield `jwt_${i}`;
}

Deno.test("a QStash token the store records once it is back leaves the app's room for tokens seen while it was down: 10,000 more such tokens after it keep the oldest one, a 401 replay when it comes again", async () => {
  const { down, send, each } = await appWithOutage();
  // Two tokens while the store is down; the second comes again once it
  // is back, refused and recorded now.
  await each(["jwt_a", "jwt_b"], 503);
  down.now = false;
  await each(["jwt_b"], 401);
  // Down again: 9,999 tokens more, 10,000 with the first.
  down.now = true;
  await each(tokens(0, 9_999), 503);
  down.now = false;
  const again = await send("jwt_a");
  assert.equal(again.status, 401, await again.text());
});

Deno.test("QStash deliveries the store recorded take no room among the tokens an app saw while the store was down: 10,000 of them after it keep such a token, a 401 replay when it comes again", async () => {
  const { down, send, each } = await appWithOutage();
  await each(["jwt_a"], 503);
  down.now = false;
  await each(tokens(0, 10_000), "taken");
  const again = await send("jwt_a");
  assert.equal(again.status, 401, await again.text());
});
