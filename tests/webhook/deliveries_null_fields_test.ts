/**
 * A bridge on `POST /v1/deliveries` whose serializer writes an optional
 * field it has no value for as `null` (Jackson's default for a Java
 * class's fields, Go's pointer fields without `omitempty`, Python's
 * `None`; an AMQP message without a `message_id` property passed on as
 * it came) sends `{"job":…,"delivery":null,"messageId":null,"gaveUp":null}`
 * on a delivery and `{"job":…,"delivery":null,"messageId":null,"gaveUp":{…}}`
 * on a give-up. Each `null` is taken as the field left out: refused 400,
 * every such delivery or give-up stopped at the queue before the policy
 * decided, and a bridge that takes a 4xx as final dropped it, its intent
 * left with no job and no dead letter.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { authorizedApp, generic, job, LATER_MS, sends } from "./_late_copy.ts";

Deno.test("POST /v1/deliveries takes a messageId of null as left out: the delivery is counted by the job id and runs, not refused 400", async () => {
  const { app, clock, sender, store } = await authorizedApp(new MemoryStore());
  const first = await app.request(
    "/v1/deliveries",
    generic({ job, messageId: null }, clock.now++),
  );
  assert.equal(first.status, 503, await first.clone().text());
  assert.equal((await first.json()).delivery, 1);
  assert.equal(sends(sender), 1);
  assert.equal(await store.deliveries("pi_0002/settle"), 1);
  // With a count of its own, that count.
  const second = await app.request(
    "/v1/deliveries",
    generic({ job, delivery: 2, messageId: null }, clock.now++),
  );
  assert.equal(second.status, 503, await second.clone().text());
  assert.equal((await second.json()).delivery, 2);
});

Deno.test("POST /v1/deliveries takes a gaveUp of null as left out: the body is a delivery, as a serializer writes one with every field, not refused 400", async () => {
  const { app, clock, sender, store } = await authorizedApp(new MemoryStore());
  const first = await app.request(
    "/v1/deliveries",
    generic(
      { job, delivery: null, messageId: null, gaveUp: null },
      clock.now++,
    ),
  );
  assert.equal(first.status, 503, await first.clone().text());
  assert.equal((await first.json()).delivery, 1);
  assert.equal(sends(sender), 1);
  const second = await app.request(
    "/v1/deliveries",
    generic({ job, delivery: 2, messageId: "m-1", gaveUp: null }, clock.now++),
  );
  assert.equal(second.status, 503, await second.clone().text());
  assert.deepEqual(await second.json(), {
    outcome: "retry",
    job: "pi_0002/settle",
    delivery: 2,
    reason: "waiting for 0xabc to confirm",
    delayMs: 5_000, // 10 s, its equal jitter at its floor (random 0)
  });
  assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
});

Deno.test("POST /v1/deliveries takes a delivery or messageId of null beside gaveUp as left out: the give-up resolves, a repeat changes nothing, and a late copy of its message sends nothing", async () => {
  const { app, clock, sender, store } = await authorizedApp(new MemoryStore());
  const body = {
    job,
    delivery: null,
    messageId: null,
    gaveUp: { deliveries: 3, messageId: "m-1" },
  };
  const gaveUp = await app.request("/v1/deliveries", generic(body, clock.now));
  assert.equal(gaveUp.status, 200, await gaveUp.clone().text());
  const answer = {
    outcome: "poison",
    job: "pi_0002/settle",
    delivery: 3,
    reason: "the queue gave up after 3 deliveries",
    resolution: "job dropped, intent still authorized",
  };
  assert.deepEqual(await gaveUp.json(), answer);
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.deepEqual(letter?.queue, { queue: "generic", messageId: "m-1" });
  // The bridge repeats it (signed afresh): the first resolution stands.
  clock.now += 1000;
  const repeat = await app.request("/v1/deliveries", generic(body, clock.now));
  assert.equal(repeat.status, 200);
  assert.deepEqual(await repeat.json(), answer);
  assert.equal(
    (await store.getDeadLetter("pi_0002/settle"))?.version,
    letter?.version,
  );
  // Its queue's late copy of m-1, every field written: nothing sent.
  clock.now += LATER_MS;
  const late = await app.request(
    "/v1/deliveries",
    generic({ job, delivery: 2, messageId: "m-1", gaveUp: null }, clock.now),
  );
  assert.equal(late.status, 200);
  assert.equal(
    (await late.json()).reason,
    "the queue gave up on this message before: a late copy, nothing sent",
  );
  assert.equal(sends(sender), 0);
  assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
});
