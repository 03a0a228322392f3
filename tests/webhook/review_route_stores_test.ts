/**
 * `POST /v1/intents/:id/resolve` takes the version `GET /v1/intents/:id`
 * shows, on every shipped store: a store's version is opaque, and
 * KvStore's ("<intent versionstamp>:<hold versionstamp>") was refused as
 * not hex, so on main.ts's store no payment in review could be resolved.
 *
 * @module
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
