/**
 * A queue's late copy of a message it already gave up on: the give-up
 * dropped the job of an authorized intent (nothing sent) and held its
 * lease for `leaseMs` + `clockSkewMs`; a copy of that message arriving
 * after that must send nothing either, or the payment is sent under a
 * dead letter that says "job dropped, intent still authorized". A job
 * published since (another message) still settles the intent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, type Store } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { overriding } from "../_stores.ts";
import {
  assertLateCopy,
  authorizedApp,
  deadLetterPush,
  generic,
  job,
  LATER_MS,
  pubsubPush,
  qstash,
  qstashFailed,
  sends,
} from "./_late_copy.ts";

const STORES: readonly {
  name: string;
  open: () => Promise<{ store: Store; close(): void }>;
}[] = [
  {
    name: "MemoryStore",
    open: () => Promise.resolve({ store: new MemoryStore(), close() {} }),
  },
  {
    name: "KvStore",
    open: async () => {
      const kv = await Deno.openKv(":memory:");
      return { store: new KvStore(kv), close: () => kv.close() };
    },
  },
];

for (const { name, open } of STORES) {
  Deno.test(`a late QStash copy of a message its failure callback gave up on sends nothing; another message's job still sends [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
      const gaveUp = await app.request(
        "/v1/qstash/failed",
        await qstashFailed("msg_1"),
      );
      assert.equal(gaveUp.status, 200);
      assert.equal(
        (await gaveUp.json()).resolution,
        "job dropped, intent still authorized",
      );
      clock.now += LATER_MS;
      const late = await app.request("/v1/qstash", await qstash("msg_1", "4"));
      assert.equal(late.status, 200);
      assert.deepEqual(await late.json(), {
        outcome: "done",
        job: "pi_0002/settle",
        delivery: 5,
        reason:
          "the queue gave up on this message before: a late copy, nothing sent",
      });
      assert.equal(sends(sender), 0);
      assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
      // The letter still says what is true.
      assert.equal(
        (await store.getDeadLetter("pi_0002/settle"))?.resolution,
        "job dropped, intent still authorized",
      );
      // A job published since is another message: it settles the intent.
      const fresh = await app.request("/v1/qstash", await qstash("msg_2", "0"));
      assert.equal(fresh.status, 503);
      assert.equal(sends(sender), 1);
      assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
    } finally {
      close();
    }
  });

  Deno.test(`a late Pub/Sub copy of a message its dead-letter topic gave up on sends nothing [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const { app, clock, sender } = await authorizedApp(store);
      const gaveUp = await app.request(
        "/v1/pubsub/dead-letter",
        await deadLetterPush(),
      );
      assert.equal(gaveUp.status, 204);
      clock.now += LATER_MS;
      // The source message itself, pushed again after it was dead-lettered.
      const late = await app.request(
        "/v1/pubsub",
        await pubsubPush("2070443601311540", "2026-11-30T11:00:00.123Z", 5),
      );
      assert.equal(late.status, 204);
      assert.equal(sends(sender), 0);
      assert.equal((await store.getIntent("pi_0002"))?.state, "authorized");
    } finally {
      close();
    }
  });

  Deno.test(`a bridge's late copy of a message its give-up named sends nothing when the delivery names it too; another message still sends [${name}]`, async () => {
    const { store, close } = await open();
    try {
      const fixture = await authorizedApp(store);
      const { app, clock, sender } = fixture;
      const gaveUp = await app.request(
        "/v1/deliveries",
        generic(
          { job, gaveUp: { deliveries: 3, messageId: "m-1" } },
          clock.now,
        ),
      );
      assert.equal(gaveUp.status, 200);
      clock.now += LATER_MS;
      await assertLateCopy(
        fixture,
        generic({ job, delivery: 2, messageId: "m-1" }, clock.now),
      );
      // A message published since has another id: it settles the intent.
      const fresh = await app.request(
        "/v1/deliveries",
        generic({ job, delivery: 1, messageId: "m-2" }, clock.now),
      );
      assert.equal(fresh.status, 503);
      assert.equal(sends(sender), 1);
    } finally {
      close();
    }
  });
}

Deno.test("a Pub/Sub push's write ahead of its send carries one give-up mark, its source with the time in milliseconds: two such writes fit a commit of 10 checks", async () => {
  const memory = new MemoryStore();
  const marks: (readonly string[] | undefined)[] = [];
  const store = overriding(memory, {
    transition: (id, change, options) => {
      marks.push(options?.unlessCounted);
      return memory.transition(id, change, options);
    },
  });
  const { app, sender } = await authorizedApp(store);
  const res = await app.request(
    "/v1/pubsub",
    await pubsubPush("2070443601311540", "2026-11-30T11:00:00.123Z", 1),
  );
  assert.equal(res.status, 503); // sent, waiting for its receipt
  assert.equal(sends(sender), 1);
  assert.deepEqual(marks, [[
    `givingup/pubsub/source/p/relayer@${
      Date.parse("2026-11-30T11:00:00.123Z")
    }#pi_0002`,
  ]]);
});

Deno.test("a late QStash copy is known when the failure callback spells the source message's id as QStash's docs have, sourceMessasgeId", async () => {
  const { app, clock, sender } = await authorizedApp(new MemoryStore());
  const gaveUp = await app.request(
    "/v1/qstash/failed",
    await qstashFailed("msg_1", "sourceMessasgeId"),
  );
  assert.equal(gaveUp.status, 200);
  clock.now += LATER_MS;
  const late = await app.request("/v1/qstash", await qstash("msg_1", "4"));
  assert.equal(late.status, 200);
  assert.equal((await late.json()).outcome, "done");
  assert.equal(sends(sender), 0);
});

Deno.test("a bridge's delivery whose messageId is not a text is refused, 400, naming the field and the dead letter kept for its job, and sends nothing", async () => {
  const store = new MemoryStore();
  const { app, clock, sender } = await authorizedApp(store);
  // A null or an empty text is one left out, and a text of any other form
  // an id (deliveries_null_fields_test.ts): the bridge's own code sends a
  // number or an object for every message, and its first test shows it.
  for (const messageId of [7, true, { id: "m-1" }, ["m-1"]]) {
    const res = await app.request(
      "/v1/deliveries",
      generic({ job, delivery: 1, messageId }, clock.now++),
    );
    assert.equal(res.status, 400);
    assert.match(
      (await res.json()).detail,
      /^'messageId' must be your queue's id of the message, a text: current value is /,
    );
  }
  const number = await app.request(
    "/v1/deliveries",
    generic({ job, delivery: 1, messageId: 7 }, clock.now += 1000),
  );
  assert.equal(
    (await number.json()).detail,
    `'messageId' must be your queue's id of the message, a text: current value is 7. A delivery is {"job":{"intentId":"pi_0001","kind":"settle"},"delivery":1,"messageId":"m-1"} ('delivery' and 'messageId' are optional). Kept as the dead letter generic/sha256-561573eaa85c2cde1affb57b0850c0ac/unreadable: send the delivery again with its messageId as a text (or none), or publish a job for intent pi_0002, then discard the letter.`,
  );
  assert.equal(sends(sender), 0);
  assert.equal(await store.deliveries("pi_0002/settle"), 0);
  // Its one letter, naming its intent (deliveries_unreadable_job_test.ts).
  assert.deepEqual(
    (await store.listDeadLetters({ limit: 10 })).items.map((
      letter,
    ) => [letter.jobId, letter.intentId]),
    [["generic/sha256-561573eaa85c2cde1affb57b0850c0ac/unreadable", "pi_0002"]],
  );
});
