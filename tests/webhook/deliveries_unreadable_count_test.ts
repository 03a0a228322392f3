/**
 * A delivery on `POST /v1/deliveries` whose `delivery` cannot be read (a
 * count passed on as a string, as SQS's `ApproximateReceiveCount` is; a
 * 0-based count; `null`, which is one left out) is counted in the store,
 * as one without it is: the job keeps its policy's deliveries and is
 * poisoned and resolved by the policy at the end. Refused 400, it stopped
 * at the queue before the policy decided: a bridge that takes a 4xx as
 * final dropped the job, its intent left with no job and no dead letter,
 * and one that retries it spent its queue's deliveries on refusals until
 * its give-up resolved the intent, unsent.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { assertThirdToReview, genericRequest, makeApp, NOW } from "./_app.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
/** Its send's outcome unknown a moment ago: each delivery waits, the last resolves it. */
const settling: NewIntent = {
  id: "pi_0001",
  state: "settling",
  hold: "pending",
  settlingSince: NOW,
  lastBroadcast: { outcome: "unknown", at: NOW, error: "timeout" },
};

/**
 * The bridge's signed delivery of the job, with `fields` beside it, signed
 * `ago` seconds before the test clock's time (a body signed twice in one
 * second is the same signed request, refused as a replay).
 */
function delivery(
  fields: Record<string, unknown>,
  ago = 0,
): Promise<RequestInit> {
  return genericRequest(JSON.stringify({ job, ...fields }), {
    timeS: Math.floor(NOW / 1000) - ago,
  });
}

Deno.test("POST /v1/deliveries counts a delivery whose 'delivery' cannot be read in the store, as one without it: a retry with its Retry-After, the next counted #2, the last poisoned by the policy", async () => {
  for (
    const count of ["3", 0, -1, 1.5, 1e300, null, true, [2], { n: 2 }, ""]
  ) {
    const what = JSON.stringify(count);
    const { app, store } = await makeApp({ intents: [settling] });
    const first = await app.request(
      "/v1/deliveries",
      await delivery({ delivery: count }),
    );
    assert.equal(first.status, 503, `${what}: ${await first.clone().text()}`);
    assert.equal(first.headers.get("retry-after"), "3", what);
    const answer = await first.json();
    assert.equal(answer.outcome, "retry", what);
    assert.equal(answer.delivery, 1, what);
    assert.equal(await store.deliveries("pi_0001/settle"), 1, what);
    const second = await app.request("/v1/deliveries", await delivery({}));
    assert.equal(second.status, 503, what);
    assert.equal((await second.json()).delivery, 2, what);
    const last = await app.request(
      "/v1/deliveries",
      await delivery({ delivery: count }, 1),
    );
    await assertThirdToReview(last, store, what);
  }
});

Deno.test("POST /v1/deliveries counts a delivery whose 'delivery' cannot be read under its messageId, as one without it, and logs it at most once a minute, saying what to send", async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app, store } = await makeApp({
    intents: [settling],
    deps: {
      log: (line) => lines.push(line),
      now: () => t,
      policy: { maxDeliveries: 10 },
    },
  });
  const counts = () => lines.filter((line) => / is not a count; /.test(line));
  const deliver = async (fields: Record<string, unknown>) => {
    // Signed at the clock's time: each request is a fresh signature.
    const body = JSON.stringify({ job, ...fields });
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS: Math.floor(t / 1000) }),
    );
    assert.equal(res.status, 503, await res.clone().text());
    return (await res.json()).delivery;
  };
  // Well formed or left out: nothing said.
  assert.equal(await deliver({ delivery: 4 }), 4);
  assert.equal(await deliver({ messageId: "m-1" }), 1);
  assert.deepEqual(counts(), []);
  // Counted as the message's deliveries without a count are.
  assert.equal(await deliver({ delivery: "5", messageId: "m-1" }), 2);
  t += 1000;
  assert.equal(await deliver({ delivery: null, messageId: "m-1" }), 3);
  assert.deepEqual(counts(), [
    'relayer POST /v1/deliveries: delivery "5" is not a count; the delivery was counted here (#2); send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
  ]);
  // Without a messageId, by the job id.
  t += 60_000;
  assert.equal(await deliver({ delivery: 0 }), 1);
  assert.equal(await store.deliveries("pi_0001/settle"), 1);
  assert.deepEqual(counts().slice(1), [
    "relayer POST /v1/deliveries: delivery 0 is not a count; the delivery was counted here (#1); send an integer >= 1 (parse a count your queue gives as a string), or leave it out",
  ]);
  // One line a minute for the route: a give-up's count that cannot be
  // read within that minute says nothing more.
  t += 1000;
  const gaveUp = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({ job, gaveUp: { deliveries: "7", messageId: "m-1" } }),
      { timeS: Math.floor(t / 1000) },
    ),
  );
  assert.equal(gaveUp.status, 200, await gaveUp.clone().text());
  await gaveUp.body?.cancel();
  assert.equal(counts().length, 2);
});
