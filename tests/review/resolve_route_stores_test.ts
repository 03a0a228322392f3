/**
 * Review: POST /v1/intents/:id/resolve must accept the version that
 * GET /v1/intents/:id shows, on every shipped store. A store's version is
 * opaque (store.ts: "An opaque version of the intent and its hold"); KvStore's
 * is "<intent versionstamp>:<hold versionstamp>", which the route's
 * /^[0-9a-f]{1,64}$/ check refuses with a 400, so on the default deployment
 * (main.ts runs KvStore) no payment in review can be resolved.
 */
import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { ScriptedSender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-review-tests";
const headers = { authorization: `Bearer ${OPS}` };

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: POST /v1/intents/:id/resolve takes the version GET /v1/intents/:id shows`, async () => {
    const { store, close } = await backend.open();
    try {
      const created = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      await store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: created.version,
        at: 1,
      });
      const app = createApp({
        store,
        sender: new ScriptedSender({}),
        opsToken: OPS,
      });
      const read = await app.request("/v1/intents/pi_1", { headers });
      assert.equal(read.status, 200);
      const { intent } = await read.json();
      const res = await app.request("/v1/intents/pi_1/resolve", {
        method: "POST",
        headers,
        body: JSON.stringify({ to: "failed", version: intent.version }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal((await store.getIntent("pi_1"))?.state, "failed");
      assert.equal((await store.getIntent("pi_1"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}
