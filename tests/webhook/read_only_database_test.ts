/**
 * The ops routes on a PostgreSQL database that turned read-only (a
 * failover's demoted primary, a standby, `default_transaction_read_only`):
 * on a real server, a write the database refused answers that the
 * database is read-only and nothing changed, not that it may have landed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { ScriptedSender } from "../../mod.ts";
import {
  onReadOnlySchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const OPS = "ops-token-for-tests";
const headers = {
  authorization: `Bearer ${OPS}`,
  "content-type": "application/json",
};

serverUpFirst();

Deno.test({
  name:
    "createApp() on a read-only PostgreSQL: an operator's creation and resolution answer 503 with nothing changed, and the log names the read-only database",
  ignore: !postgresAvailable,
  fn: onReadOnlySchema(async ({ store, writable }) => {
    // Set up through a writable client, on the same schema.
    const settling = await writable.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const review = await writable.transition("pi_2", {
      from: "settling",
      to: "needs_review",
      version: settling.version,
      at: 1,
    });
    const lines: string[] = [];
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      log: (line) => lines.push(line),
    });
    const answers = [
      await app.request("/v1/intents", {
        method: "POST",
        headers,
        body: '{"id":"pi_1","state":"authorized"}',
      }),
      await app.request("/v1/intents/pi_2/resolve", {
        method: "POST",
        headers,
        body: JSON.stringify({ to: "settled", version: review.version }),
      }),
    ];
    for (const res of answers) {
      assert.equal(res.status, 503, res.url);
      assert.equal(res.headers.get("retry-after"), "5");
      const problem = await res.json();
      assert.equal(problem.type, "urn:relayer:problem:store-failed");
      assert.match(
        problem.detail,
        /^The (creation of intent pi_1|resolution of intent pi_2) failed as the database is read-only and took none of it \(a hot standby, .*the relayer's log names it\): nothing changed\. Point the store at the primary .*, then try again\.$/,
      );
    }
    assert.equal(await writable.getIntent("pi_1"), null);
    assert.deepEqual(await writable.getIntent("pi_2"), review);
    assert.ok(
      lines.some((line) =>
        /PostgreSQL refused it as read-only .*nothing was written/.test(line)
      ),
      lines.join("\n"),
    );
  }),
});

Deno.test({
  name:
    "/readyz says the database is read-only only while the store answers reads: once a read fails too, it says a read failed, not that writes are refused as read-only",
  ignore: !postgresAvailable,
  fn: onReadOnlySchema(async ({ store }) => {
    let t = 1_000_000;
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      log: () => {},
      now: () => t,
    });
    const readOnly = await app.request("/readyz");
    assert.equal(readOnly.status, 503);
    assert.match(
      (await readOnly.json()).detail,
      /^The store's write failed as the database is read-only /,
    );
    // The store stops answering reads: the write probe is not asked.
    await store.close();
    t += 60_000;
    const down = await app.request("/readyz");
    assert.equal(down.status, 503);
    assert.equal(
      (await down.json()).detail,
      "The store did not answer a read, or refused a write (the relayer's log says why): deliveries would be answered 503 now.",
    );
  }),
});
