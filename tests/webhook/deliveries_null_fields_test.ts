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
import { MemoryStore, type Store } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import {
  assertLateCopy,
  authorizedApp,
  generic,
  job,
  LATER_MS,
  sends,
} from "./_late_copy.ts";

/**
 * Runs `run` as one test per store: the memory store, and Deno KV in
 * memory, where a message's hashed id and a give-up without one are keys
 * and letters too.
 */
function onEachStore(
  title: string,
  run: (open: () => Promise<Store>) => Promise<void>,
): void {
  Deno.test(
    `${title} [MemoryStore]`,
    () => run(() => Promise.resolve(new MemoryStore())),
  );
  Deno.test(`${title} [KvStore]`, async () => {
    const kvs: Deno.Kv[] = [];
    try {
      await run(async () => {
        const kv = await Deno.openKv(":memory:");
        kvs.push(kv);
        return new KvStore(kv);
      });
    } finally {
      for (const kv of kvs) kv.close();
    }
  });
}

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
  const fixture = await authorizedApp(new MemoryStore());
  const { app, clock, store } = fixture;
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
  await assertLateCopy(
    fixture,
    generic({ job, delivery: 2, messageId: "m-1", gaveUp: null }, clock.now),
  );
});

onEachStore(
  "POST /v1/deliveries resolves a bridge's give-up that names no message (gaveUp.messageId null or left out): the intent goes to review, a repeat changes nothing, and the log says once a minute what to send",
  async (open) => {
    for (const gaveUp of [{ deliveries: 3, messageId: null }, {}]) {
      const what = JSON.stringify(gaveUp);
      const lines: string[] = [];
      const { app, clock, sender, store } = await authorizedApp(
        await open(),
        { log: (line) => lines.push(line) },
      );
      // Its message had no id: a delivery sends, the receipt stays pending.
      const sent = await app.request(
        "/v1/deliveries",
        generic({ job, messageId: null }, clock.now++),
      );
      assert.equal(sent.status, 503, what);
      await sent.body?.cancel();
      assert.equal(sends(sender), 1, what);
      clock.now += LATER_MS;
      const answer = {
        outcome: "poison",
        job: "pi_0002/settle",
        // The store's count of the job where the bridge sent none.
        delivery: "deliveries" in gaveUp ? 3 : 1,
        reason: `the queue gave up after ${
          "deliveries" in gaveUp ? "3 deliveries" : "1 delivery"
        }`,
        resolution: "last broadcast sent as 0xabc, needs review",
      };
      const res = await app.request(
        "/v1/deliveries",
        generic({ job, gaveUp }, clock.now),
      );
      assert.equal(res.status, 200, `${what}: ${await res.clone().text()}`);
      assert.deepEqual(await res.json(), answer, what);
      const intent = await store.getIntent("pi_0002");
      assert.equal(intent?.state, "needs_review", what);
      const letter = await store.getDeadLetter("pi_0002/settle");
      assert.deepEqual(letter?.queue, { queue: "generic" }, what);
      // Repeated (signed afresh): the first resolution stands.
      clock.now += 1000;
      const repeat = await app.request(
        "/v1/deliveries",
        generic({ job, gaveUp }, clock.now),
      );
      assert.equal(repeat.status, 200, what);
      // Not known as a repeat (no id): as a give-up of another message, it
      // finds the intent in review and changes nothing.
      assert.equal(
        (await repeat.json()).resolution,
        "job dropped, intent already needs_review",
        what,
      );
      assert.equal(
        (await store.getDeadLetter("pi_0002/settle"))?.version,
        letter?.version,
        what,
      );
      assert.equal(
        (await store.getIntent("pi_0002"))?.version,
        intent?.version,
        what,
      );
      assert.equal(sends(sender), 1, what);
      assert.deepEqual(
        lines.filter((line) => / names no message /.test(line)),
        [
          "relayer POST /v1/deliveries: a bridge's give-up on pi_0002/settle names no message (gaveUp.messageId): resolved, but a repeat of it after a redrive is taken for a give-up of the job published since, and a late copy of the message is held off only by the give-up's lease; send your queue's id of the message in the give-up and in each delivery",
        ],
        what,
      );
    }
  },
);

onEachStore(
  "POST /v1/deliveries takes a messageId that is a text of any form as the message's id (a space, a letter past ASCII, past 200 characters: named by its hash), and an empty one as left out: counted, given up and its late copy held off as any, not refused 400",
  async (open) => {
    // An AMQP message_id is any short string, as a publisher set it; Go's
    // string field without omitempty writes "" for one not set.
    for (const odd of ["order 42", "zahlung-é-1", "x".repeat(201), "a\nb"]) {
      const what = JSON.stringify(odd).slice(0, 20);
      const { app, clock, sender, store } = await authorizedApp(
        await open(),
      );
      const first = await app.request(
        "/v1/deliveries",
        generic({ job, messageId: odd }, clock.now),
      );
      assert.equal(first.status, 503, `${what}: ${await first.clone().text()}`);
      await first.body?.cancel();
      assert.equal(sends(sender), 1, what);
      // Counted under the message, not the job.
      assert.equal(await store.deliveries("pi_0002/settle"), 0, what);
      // Signed a second later: the same body, a fresh signature.
      clock.now += 1000;
      const second = await app.request(
        "/v1/deliveries",
        generic({ job, messageId: odd }, clock.now),
      );
      assert.equal((await second.json()).delivery, 2, what);
      clock.now += LATER_MS;
      const gaveUp = await app.request(
        "/v1/deliveries",
        generic({ job, gaveUp: { messageId: odd } }, clock.now),
      );
      assert.equal(
        gaveUp.status,
        200,
        `${what}: ${await gaveUp.clone().text()}`,
      );
      assert.deepEqual(await gaveUp.json(), {
        outcome: "poison",
        job: "pi_0002/settle",
        delivery: 2,
        reason: "the queue gave up after 2 deliveries",
        resolution: "last broadcast sent as 0xabc, needs review",
      }, what);
      // A repeat is known by the id, as the first: answered from its letter.
      clock.now += 1000;
      const repeat = await app.request(
        "/v1/deliveries",
        generic({ job, gaveUp: { messageId: odd } }, clock.now),
      );
      assert.equal(
        (await repeat.json()).resolution,
        "last broadcast sent as 0xabc, needs review",
        what,
      );
    }
    // A late copy of a message given up on, on an authorized intent.
    const { app, clock, sender, store } = await authorizedApp(await open());
    const gaveUp = await app.request(
      "/v1/deliveries",
      generic({ job, gaveUp: { messageId: "order 42" } }, clock.now),
    );
    assert.equal(gaveUp.status, 200);
    await gaveUp.body?.cancel();
    clock.now += LATER_MS;
    const late = await app.request(
      "/v1/deliveries",
      generic({ job, delivery: 2, messageId: "order 42" }, clock.now++),
    );
    assert.equal(
      (await late.json()).reason,
      "the queue gave up on this message before: a late copy, nothing sent",
    );
    assert.equal(sends(sender), 0);
    // Empty: left out, counted by the job id.
    const empty = await app.request(
      "/v1/deliveries",
      generic({ job, messageId: "" }, clock.now++),
    );
    assert.equal(empty.status, 503, await empty.clone().text());
    assert.equal((await empty.json()).delivery, 1);
    assert.equal(sends(sender), 1);
    assert.equal(await store.deliveries("pi_0002/settle"), 1);
  },
);

onEachStore(
  "POST /v1/deliveries counts two messages of one job whose ids are named by their hash apart, as two ids of printable ASCII are: a second message's first delivery is its 1st",
  async (open) => {
    const { app, clock } = await authorizedApp(await open());
    for (
      const [messageId, count] of [
        ["order 42", 1],
        ["order 42", 2],
        ["order 43", 1],
        ["zahlung-é-1", 1],
        ["order 43", 2],
      ] as const
    ) {
      clock.now += 1000;
      const res = await app.request(
        "/v1/deliveries",
        generic({ job, messageId }, clock.now),
      );
      assert.equal(res.status, 503, await res.clone().text());
      assert.equal((await res.json()).delivery, count, messageId);
    }
  },
);

Deno.test("POST /v1/deliveries takes a delivery or gaveUp.deliveries of null as left out: counted in the store, with no 'not a count' line telling the bridge to send a count", async () => {
  const lines: string[] = [];
  const { app, clock, store } = await authorizedApp(new MemoryStore(), {
    log: (line) => lines.push(line),
  });
  const first = await app.request(
    "/v1/deliveries",
    generic({ job, delivery: null }, clock.now++),
  );
  assert.equal(first.status, 503, await first.clone().text());
  assert.equal((await first.json()).delivery, 1);
  assert.equal(await store.deliveries("pi_0002/settle"), 1);
  // A give-up a minute on (past the route's one line a minute).
  clock.now += 60_000;
  const gaveUp = await app.request(
    "/v1/deliveries",
    generic({ job, gaveUp: { deliveries: null, messageId: null } }, clock.now),
  );
  assert.equal(gaveUp.status, 200, await gaveUp.clone().text());
  assert.equal((await gaveUp.json()).delivery, 1);
  assert.deepEqual(lines.filter((line) => / is not a count; /.test(line)), []);
});
