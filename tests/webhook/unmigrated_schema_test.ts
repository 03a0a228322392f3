/**
 * The routes on a PostgreSQL schema never migrated, or migrated by an
 * older version (a Worker deployed before its migration): every ops route
 * says the schema needs migrating and what to run, in the 503 its other
 * store failures answer, never that a write "may have landed" or that the
 * store could not be reached; a delivery stays a 503 the queue retries.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { PostgresStore } from "../../store/postgres.ts";
import { type Job, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";
import { QSTASH, signHmac, signQStash } from "./_signing.ts";

const ignore = !postgresAvailable;
const SECRET = "local-secret-0123456789-unmigrated";
const OPS = "ops-token-0123456789-unmigrated";
const NOW = 1_000_000;
const ops = { authorization: `Bearer ${OPS}` };

/** The app on `store`, with a queue for jobs and redrives that counts what it is given. */
function appOn(store: PostgresStore) {
  const queued: Job[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    webhookSecret: SECRET,
    qstash: QSTASH,
    opsToken: OPS,
    now: () => NOW,
    random: () => 0,
    log: () => {},
    enqueue: (job) => Promise.resolve(void queued.push(job)),
    redriveTo: { publish: (job) => Promise.resolve(void queued.push(job)) },
  });
  return { app, queued };
}

/** POSTs `body` to `/v1/deliveries`, signed with the route's secret. */
function signedPost(app: ReturnType<typeof appOn>["app"], body: string) {
  return app.request("/v1/deliveries", {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "x-signature": signHmac(SECRET, body, Math.floor(NOW / 1000)),
    },
  });
}

const OPS_CALLS: [string, string, RequestInit, string][] = [
  ["POST", "/v1/intents", {
    body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
  }, "store-failed"],
  ["GET", "/v1/intents/pi_0001", {}, "store-failed"],
  ["POST", "/v1/intents/pi_0001/resolve", {
    body: JSON.stringify({ to: "failed", version: "1", nonceChecked: true }),
  }, "store-failed"],
  ["GET", "/v1/dead-letters", {}, "store-failed"],
  ["DELETE", "/v1/dead-letters/pi_0001/settle", {}, "store-failed"],
  ["POST", "/v1/dead-letters/pi_0001/settle/redrive", {}, "redrive-failed"],
  ["POST", "/v1/jobs", {
    body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
  }, "store-failed"],
];

/** Asserts every ops route and a delivery on `store`'s schema say to migrate it. */
async function assertSaysMigrate(store: PostgresStore) {
  const { app, queued } = appOn(store);
  for (const [method, path, init, type] of OPS_CALLS) {
    const res = await app.request(path, {
      method,
      ...init,
      headers: ops,
    });
    const body = await res.json();
    const which = `${method} ${path}: ${body.detail}`;
    assert.equal(res.status, 503, which);
    assert.equal(body.type, `urn:relayer:problem:${type}`, which);
    assert.equal(res.headers.get("retry-after"), "5", which);
    assert.match(
      body.detail,
      /schema is not migrated, or was migrated by an older version[^]*nothing changed[^]*run migrate\(\)[^]*then try again/,
      which,
    );
    assert.doesNotMatch(
      body.detail,
      /may have landed|could not reach|did not complete/,
      which,
    );
  }
  assert.deepEqual(queued, [], "nothing queued");
  // Readiness says why, an operator's curl too.
  const ready = await app.request("/readyz");
  const notReady = await ready.json();
  assert.equal(ready.status, 503);
  assert.equal(notReady.type, "urn:relayer:problem:not-ready");
  assert.match(
    notReady.detail,
    /schema is not migrated[^]*run migrate\(\)/,
    notReady.detail,
  );
  // A delivery: the queue delivers it again, and the answer says why.
  const delivery = JSON.stringify({
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  const res = await signedPost(app, delivery);
  const body = await res.json();
  assert.equal(res.status, 503, body.detail);
  assert.equal(body.type, "urn:relayer:problem:delivery-failed");
  // The queue waits on its own backoff: no retry mends it until then.
  assert.equal(res.headers.get("retry-after"), null);
  // A bridge's give-up: the queue calls again.
  const gaveUp = JSON.stringify({
    job: { intentId: "pi_0001", kind: "settle" },
    gaveUp: { deliveries: 7, messageId: "m-1" },
  });
  const given = await signedPost(app, gaveUp);
  const givenUp = await given.json();
  assert.equal(given.status, 503, givenUp.detail);
  assert.equal(givenUp.type, "urn:relayer:problem:delivery-failed");
  assert.match(
    givenUp.detail,
    /^The give-up could not be resolved now as the store's schema is not migrated[^]*run migrate\(\)[^]*the queue will call again\.$/,
    givenUp.detail,
  );
  // An unreadable message, whose dead letter cannot be kept: redelivered.
  const unreadable = await app.request("/v1/qstash", {
    method: "POST",
    body: "{",
    headers: {
      "upstash-signature": await signQStash("{"),
      "upstash-retried": "0",
      "upstash-message-id": "msg_A1",
    },
  });
  const kept = await unreadable.json();
  assert.equal(unreadable.status, 503, kept.detail);
  assert.equal(kept.type, "urn:relayer:problem:delivery-failed");
  assert.match(
    kept.detail,
    /could not be kept as a dead letter[^]*schema is not migrated[^]*run migrate\(\)/,
    kept.detail,
  );
  assert.match(
    body.detail,
    /schema is not migrated[^]*run migrate\(\)[^]*the queue will redeliver it/,
    body.detail,
  );
}

Deno.test({
  name:
    "every route on a PostgreSQL schema never migrated says to run migrate(), nothing changed, in its 503, and a delivery stays a 503 the queue retries",
  ignore,
  async fn() {
    const { store } = await openPostgresStore({ migrated: false });
    await assertSaysMigrate(store);
  },
});

Deno.test({
  name:
    "every route on a PostgreSQL schema an older version migrated (no intents.tx_hashes, no dead_letters) says to run migrate(), nothing changed",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await openPostgresStore();
    await sql.unsafe(
      `ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes; DROP TABLE "${schema}".dead_letters`,
    );
    await assertSaysMigrate(store);
    // The new intent's write was refused whole.
    assert.equal(
      (await sql.unsafe(`SELECT id FROM "${schema}".intents`)).length,
      0,
    );
    await close();
  },
});

Deno.test({
  name:
    "/readyz says the store's read failed on a schema behind only while it does: once migrated, a refused write is said as one",
  ignore,
  async fn() {
    const { schema, sql, store, close } = await openPostgresStore({
      migrated: false,
    });
    let now = NOW;
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      webhookSecret: SECRET,
      now: () => now,
      random: () => 0,
      log: () => {},
    });
    const detail = async () => {
      const answer = await app.request("/readyz");
      assert.equal(answer.status, 503);
      return ((await answer.json()) as { detail: string }).detail;
    };
    try {
      assert.match(
        await detail(),
        /^The store's read failed as the store's schema is not migrated/,
      );
      // Migrated, then its counters gone: reads answer, the write probe is refused.
      await store.migrate();
      await sql.unsafe(`DROP TABLE "${schema}".counters`);
      now += 60_000; // past the probes' cache
      assert.equal(
        await detail(),
        "The store did not answer a read, or refused a write (the relayer's log says why): deliveries would be answered 503 now.",
      );
    } finally {
      await close();
    }
  },
});
