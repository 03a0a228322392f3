/**
 * A discard and a redrive of one dead letter, at once on one instance. The
 * redrive's in-flight guard does not hold a discard back, and needs not:
 * a discard takes a letter only once its intent is settled, failed or gone,
 * a redrive only while it is none of these, and both remove the letter by
 * the version they read. So they meet only where the intent ends between
 * the redrive's read and its removal, and then one removal wins, the other
 * is a 409: the job is published once (a job for an ended intent only
 * looks), the letter goes once, and the payment is not touched.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { type Job, ScriptedSender, type Store } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-discard-race-tests";
const ops = { authorization: `Bearer ${OPS}` };
const URL = "/v1/dead-letters/pi_0001/settle";

/** A promise and the function that resolves it. */
function gate(): [Promise<void>, () => void] {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return [promise, open];
}

/** `pi_0001`'s payment, created when its letter was kept, now settled with its hold captured. */
async function settle(store: Store): Promise<void> {
  await store.recordHold("pi_0001");
  let intent = (await store.getIntent("pi_0001"))!;
  for (
    const [from, to] of [
      ["created", "authorized"],
      ["authorized", "settling"],
    ] as const
  ) {
    intent = await store.transition("pi_0001", {
      from,
      to,
      version: intent.version,
      at: 0,
    });
  }
  // Sent, as a delivery records it: a hold is captured on a sent tx.
  intent = await store.beginBroadcast("pi_0001", intent.version, 0);
  intent = await store.recordBroadcast("pi_0001", intent.version, {
    outcome: "sent",
    txHash: "0xabc",
    at: 0,
  });
  await store.transition("pi_0001", {
    from: "settling",
    to: "settled",
    version: intent.version,
    at: 0,
    ledger: "capture",
  });
}

/**
 * An app on `store` whose redrive publishes to `published`, each publish
 * held until `publishing` opens, and whose store's removals for a discard
 * (`keepCount`) wait for `discarding` (`discardReached` once one does), with the letter of `pi_0001/settle`
 * kept for its intent, still created.
 */
async function raceOn(
  store: Store,
  publishing: Promise<void>,
  discarding: Promise<void>,
) {
  await store.createIntent({ id: "pi_0001", state: "created" });
  const published: Job[] = [];
  let publishedOne!: () => void;
  const publishedFirst = new Promise<void>((r) => (publishedOne = r));
  let discardAt!: () => void;
  const discardReached = new Promise<void>((r) => (discardAt = r));
  const redrive = store.redrive.bind(store);
  store.redrive = async (...args: Parameters<typeof store.redrive>) => {
    if (args[2]?.keepCount) {
      discardAt();
      await discarding;
    }
    return await redrive(...args);
  };
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    insecureDev: true, // an unsigned delivery makes the dead letter
    opsToken: OPS,
    log: () => {},
    redriveTo: {
      publish: async (job: Job) => {
        published.push(job);
        publishedOne();
        await publishing;
      },
    },
  });
  const poisoned = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    }),
  });
  assert.equal((await poisoned.json()).outcome, "poison");
  return { app, published, publishedFirst, discardReached };
}

for (const backend of BACKENDS) {
  Deno.test(`createApp() discards a letter whose intent settled while its redrive on the same instance was publishing: the redrive answers 409, its job published once, the letter gone, the payment settled [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const [publishing, publish] = gate();
      const { app, published, publishedFirst } = await raceOn(
        store,
        publishing,
        Promise.resolve(),
      );
      const redrive = app.request(`${URL}/redrive`, {
        method: "POST",
        headers: ops,
      });
      await publishedFirst;
      await settle(store);
      const discard = await app.request(URL, {
        method: "DELETE",
        headers: ops,
      });
      assert.equal(discard.status, 200, JSON.stringify(await discard.json()));
      publish();
      const lost = await redrive;
      const problem = await lost.json();
      assert.equal(lost.status, 409, JSON.stringify(problem));
      assert.match(problem.detail, /published all the same/);
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
      const intent = await store.getIntent("pi_0001");
      assert.equal(intent?.state, "settled");
      assert.equal(intent?.hold, "captured");
    } finally {
      await close();
    }
  });

  Deno.test(`createApp() refuses (409) a discard whose letter a redrive on the same instance removed after the discard read it: one job published, the letter gone once [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const [publishing, publish] = gate();
      const [discarding, discardGoes] = gate();
      const { app, published, publishedFirst, discardReached } = await raceOn(
        store,
        publishing,
        discarding,
      );
      const redrive = app.request(`${URL}/redrive`, {
        method: "POST",
        headers: ops,
      });
      await publishedFirst;
      await settle(store);
      // The discard reads the letter and the settled intent, and waits
      // at its removal while the redrive removes the letter.
      const discard = app.request(URL, { method: "DELETE", headers: ops });
      await discardReached;
      publish();
      const won = await redrive;
      assert.equal(won.status, 202, JSON.stringify(await won.json()));
      discardGoes();
      const refused = await discard;
      const problem = await refused.json();
      assert.equal(refused.status, 409, JSON.stringify(problem));
      assert.match(problem.detail, /changed since it was read/);
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
      assert.equal((await store.getIntent("pi_0001"))?.state, "settled");
    } finally {
      await close();
    }
  });
}
