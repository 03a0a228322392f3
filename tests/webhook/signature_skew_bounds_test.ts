/**
 * The generic route's `X-Signature` time at exactly its bounds, by the
 * injected clock of the instance that answers, on every store: a `t`
 * exactly 30 s ahead of one instance's clock and exactly 5 minutes old by
 * another's is taken, once (its replay record, written at the first, is
 * live at the second), and a millisecond past either bound is refused
 * before anything is counted or written.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, SECRET } from "./_app.ts";
import { signHmac } from "./_signing.ts";
import { BACKENDS } from "../_stores.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const T = 1_800_000_000; // unix seconds
const body = JSON.stringify({ job });

/** What each of `clocks` answers to one signed request, in turn, and the delivery count after. */
async function answers(
  backend: (typeof BACKENDS)[number],
  clocks: readonly number[],
): Promise<{ statuses: number[]; count: number; reasons: string[] }> {
  const { store, close } = await backend.open();
  try {
    await store.createIntent({
      id: "pi_0001",
      state: "settling",
      hold: "pending",
      settlingSince: T * 1000 - 1000,
      lastBroadcast: { outcome: "sent", txHash: "0xabc", at: T * 1000 - 1000 },
    });
    const signature = signHmac(SECRET, body, T);
    const statuses: number[] = [];
    const reasons: string[] = [];
    for (const clock of clocks) {
      const { app } = await makeApp({ deps: { store, now: () => clock } });
      const res = await app.request("/v1/deliveries", {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "x-signature": signature,
        },
      });
      statuses.push(res.status);
      const answer = await res.json();
      reasons.push(String(answer.reason ?? answer.detail));
    }
    return {
      statuses,
      count: await store.deliveries("pi_0001/settle", T * 1000),
      reasons,
    };
  } finally {
    await close();
  }
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a signature exactly 30 s ahead of one instance's clock is taken, and its replay exactly 5 minutes old by another's is refused as a replay`, async () => {
    const { statuses, count, reasons } = await answers(backend, [
      T * 1000 - 30_000,
      T * 1000 + 300_000,
    ]);
    assert.deepEqual(statuses, [503, 401], reasons.join("\n"));
    assert.equal(reasons[0], "waiting for 0xabc to confirm");
    assert.doesNotMatch(reasons[1]!, /5 minutes old/);
    assert.equal(count, 1);
  });

  Deno.test(`${backend.name}: a signature exactly 5 minutes old is taken; one a millisecond past either bound is refused, and nothing is counted`, async () => {
    const edge = await answers(backend, [T * 1000 + 300_000]);
    assert.deepEqual(edge.statuses, [503], edge.reasons.join("\n"));
    assert.equal(edge.count, 1);
    for (const clock of [T * 1000 - 30_001, T * 1000 + 300_001]) {
      const past = await answers(backend, [clock]);
      assert.deepEqual(past.statuses, [401], String(clock));
      assert.match(
        past.reasons[0]!,
        /more than 5 minutes old, or more than 30 seconds ahead of this server's clock/,
      );
      assert.equal(past.count, 0, String(clock));
    }
  });
}
