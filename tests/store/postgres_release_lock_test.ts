/**
 * PostgresStore's releaseLease() beside a flight on the same intent: a
 * flight locks the intent's row (its version check, FOR SHARE), then
 * writes its lease's row; the release must take the intent's row first
 * too, or the two wait on each other until the server's deadlock check
 * ends one of them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";
import { deadLetter } from "../../testing/_fixtures.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

Deno.test({
  name:
    "PostgresStore.releaseLease() waits behind a flight that holds the intent's row, and takes no lease row the flight then writes: neither waits on the other, and the flight's new lease stands",
  ignore: !postgresAvailable,
  fn: onFreshSchema({
    max: 2,
    connectionWaitMs: 10_000,
    migrateOn: "admin",
    timeoutMs: 60_000,
  }, async ({ admin, schema, store }) => {
    const setup = new PostgresStore(admin, { schema });
    const read = await setup.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    await setup.putDeadLetter(deadLetter("pi_1/settle", 10), {
      intentVersion: read.version,
      lease: { owner: "drop", ttlMs: 100, now: 10, keep: true },
    });
    const intents = `"${schema}".intents`;
    const leases = `"${schema}".leases`;
    // A flight as the store sends one: the intent's row locked by its
    // version check, then its lease written (the drop's lapsed).
    const flight = await admin.reserve();
    try {
      await flight.unsafe("BEGIN");
      await flight.unsafe(
        `SELECT 1 FROM ${intents} WHERE id = 'pi_1' FOR SHARE`,
      );
      const release = store.releaseLease("pi_1", "drop").then(
        () => "released",
        (error: Error) => error.message,
      );
      await sleep(300); // the release waits for the intent's row
      const started = performance.now();
      await flight.unsafe(
        `INSERT INTO ${leases} (intent_id, owner, expires_at)
         VALUES ('pi_1', 'next', 2000)
         ON CONFLICT (intent_id) DO UPDATE
         SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at`,
      );
      const waited = performance.now() - started;
      await flight.unsafe(
        `UPDATE ${intents} SET state = 'settling', settling_since = 500,
         version = version + 1 WHERE id = 'pi_1'`,
      );
      await flight.unsafe("COMMIT");
      assert.equal(await release, "released");
      assert.ok(
        waited < 500,
        `the flight's lease write waited ${
          Math.round(waited)
        } ms behind the release`,
      );
    } finally {
      flight.release();
    }
    // The flight's lease stands: another owner is busy.
    const [lease] = await admin.unsafe(
      `SELECT owner FROM ${leases} WHERE intent_id = 'pi_1'`,
    );
    assert.equal(lease?.owner, "next");
  }),
});
