/**
 * An operator's fail of a payment in review whose send's write-ahead
 * (`broadcasting`) is timed past the last instant a `Date` can hold (an
 * import, a store written by a clock beyond it) was answered 500 ("The
 * relayer failed unexpectedly"): the refusal that names the send's start
 * threw `RangeError: Invalid time value`, so the payment could never be
 * failed by hand. The refusal names that time in milliseconds instead,
 * and the wait it asks for stands, on every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, OPS } from "./_app.ts";
import { BACKENDS } from "../_stores.ts";
import { MemoryStore, type Store } from "../../mod.ts";

const FAR = 8_640_000_000_000_001;

/**
 * An operator's fail of `pi_0002`, in review on `store` with its
 * write-ahead at `broadcasting`: the answer, and the intent before it.
 */
async function failInReview(store: Store, broadcasting: number) {
  await store.createIntent({
    id: "pi_0002",
    state: "needs_review",
    hold: "pending",
    settlingSince: 1_000,
    broadcasting,
  });
  const before = await store.getIntent("pi_0002");
  const { app } = await makeApp({ deps: { store } });
  const res = await app.request("/v1/intents/pi_0002/resolve", {
    method: "POST",
    headers: { authorization: `Bearer ${OPS}` },
    body: JSON.stringify({
      to: "failed",
      version: before?.version,
      nonceChecked: true,
    }),
  });
  return { res, answer: await res.json(), before };
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a fail of a payment in review whose write-ahead is timed past what a Date can hold is refused as a send that may be in flight, naming the time in milliseconds`, async () => {
    const { store, close } = await backend.open();
    try {
      const { res, answer, before } = await failInReview(store, FAR);
      assert.equal(res.status, 409, JSON.stringify(answer));
      assert.match(answer.type, /send-in-flight$/);
      assert.match(
        answer.detail,
        new RegExp(
          `^A send of intent pi_0002 was begun at ${FAR} ms since 1970 \\(past what a Date can show\\) \\(by the sending instance's clock\\)`,
        ),
      );
      assert.equal(res.headers.get("retry-after"), "30");
      assert.deepEqual(await store.getIntent("pi_0002"), before);
    } finally {
      await close();
    }
  });
}

Deno.test("a fail of a payment in review names its write-ahead's time as ISO 8601 up to the last instant a Date holds, and in milliseconds past it either way", async () => {
  const shown: Record<string, string> = {};
  for (
    const at of [
      8_640_000_000_000_000,
      -8_640_000_000_000_000,
      -8_640_000_000_000_001,
    ]
  ) {
    const { res, answer } = await failInReview(new MemoryStore(), at);
    assert.equal(res.status, 409, JSON.stringify(answer));
    shown[at] = /was begun at (.*) \(by the sending/.exec(answer.detail)?.[1] ??
      answer.detail;
  }
  assert.deepEqual(shown, {
    "8640000000000000": "+275760-09-13T00:00:00.000Z",
    "-8640000000000000": "-271821-04-20T00:00:00.000Z",
    "-8640000000000001":
      "-8640000000000001 ms since 1970 (past what a Date can show)",
  });
});
