/**
 * The runbook's bulk redrive of an authorized intent's letter right after
 * its last delivery dropped the job (nothing sent): on QStash, whose
 * deliveries name their message, the drop marked that message and released
 * the intent's lease, so the redriven job (a new message) sends at its
 * first delivery, and the dropped message's copies still send nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Job, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { BACKENDS } from "../_stores.ts";
import { job, qstash, sends } from "./_late_copy.ts";
import { QSTASH } from "./_signing.ts";

const OPS = "ops-token-for-last-delivery-tests";

for (const backend of BACKENDS) {
  Deno.test(`a redrive of a letter a QStash last delivery left sends at the redriven job's first delivery, at once; the dropped message's copies send nothing [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.createIntent({
        id: "pi_0002",
        state: "authorized",
        hold: "pending",
      });
      const sender = new ScriptedSender({
        pi_0002: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
      });
      const published: Job[] = [];
      const app = createApp({
        store,
        sender,
        policy: { maxDeliveries: 2 },
        now: () => 1_000_000,
        random: () => 0,
        qstash: QSTASH,
        opsToken: OPS,
        redriveTo: {
          publish: (job: Job) => Promise.resolve(void published.push(job)),
        },
      });
      // Delivery 2 of 2 (retried once) finds the intent authorized.
      const dropped = await app.request(
        "/v1/qstash",
        await qstash("msg_1", "1"),
      );
      assert.equal(dropped.status, 200);
      assert.equal(
        (await dropped.json()).resolution,
        "job dropped, intent still authorized",
      );
      // A copy of the dropped message, delivered again at once: nothing sent.
      const lateCopy = async (retried: string) => {
        const late = await app.request(
          "/v1/qstash",
          await qstash("msg_1", retried),
        );
        assert.equal(late.status, 200);
        assert.equal(
          (await late.json()).reason,
          "the queue gave up on this message before: a late copy, nothing sent",
        );
      };
      await lateCopy("0");
      assert.equal(sends(sender), 0);
      const redriven = await app.request(
        "/v1/dead-letters/pi_0002/settle/redrive",
        { method: "POST", headers: { authorization: `Bearer ${OPS}` } },
      );
      assert.equal(redriven.status, 202);
      assert.deepEqual(published, [job]);
      // QStash delivers the published job as a message of its own.
      const first = await app.request("/v1/qstash", await qstash("msg_2", "0"));
      assert.equal(first.status, 503);
      assert.equal(
        (await first.json()).reason,
        "sent 0xabc, waiting for confirmation",
      );
      assert.equal(sends(sender), 1);
      assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
      // At the last number, a copy of the dropped message neither sends
      // nor resolves the intent the redriven job is settling.
      await lateCopy("1");
      assert.equal(sends(sender), 1);
      assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
    } finally {
      await close();
    }
  });
}
