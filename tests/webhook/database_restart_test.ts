/**
 * The database goes away under the service and comes back (a failover, a
 * restart for maintenance): the service must take it back at once, not
 * after postgres.js's reconnect backoff (3ⁿ/100 s, to 20 s, kept by each
 * connection as it drew it when it closed).
 *
 * @module
 */

import assert from "node:assert/strict";
import { openService } from "../../main.ts";
import { reconnectBackoffS } from "../../store/postgres.ts";
import { loadConfig } from "../../webhook/config.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-secret-of-16-chars",
};

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

Deno.test("reconnectBackoffS() starts at 25–50 ms, doubles, and never waits over 1 s", () => {
  assert.equal(reconnectBackoffS(0, () => 0), 0.025);
  assert.equal(reconnectBackoffS(1, () => 0.999999), 0.1 * (0.5 + 0.4999995));
  for (const retries of [5, 10, 50, 1000, 1e9]) {
    assert.ok(reconnectBackoffS(retries, () => 0.999999) <= 1);
    assert.ok(reconnectBackoffS(retries, () => 0) >= 0.5);
  }
});

Deno.test({
  name:
    "openService() on PostgreSQL: after the database was down for 12 s under reads, every connection of the pool reads again within 3 s of its return",
  ignore: !postgresAvailable,
  fn: timeout(90_000, async () => {
    // Synchronous commits: the server is stopped and started under load.
    const server = await startPostgres({ durable: true });
    const service = await openService(
      loadConfig({ ...base, DATABASE_URL: server.url }),
      { log: () => {} },
    );
    try {
      const read = () => service.store.getIntent("pi_0001");
      // The whole pool open: a read on each connection at once.
      await Promise.all(Array.from({ length: 10 }, read));
      await server.halt("fast");
      // Ten readers through the outage: every connection fails its
      // connects again and again (each failure lengthens the backoff).
      let down = true;
      const readers = Array.from({ length: 10 }, async () => {
        while (down) {
          await read().catch(() => {});
          await sleep(50);
        }
      });
      await sleep(12_000);
      down = false;
      await Promise.all(readers);
      await server.resume();
      const back = performance.now();
      // A read per connection of the pool, each tried until it answers.
      const took = await Promise.all(
        Array.from({ length: 10 }, async () => {
          for (;;) {
            try {
              await read();
              return performance.now() - back;
            } catch {
              await sleep(50);
            }
          }
        }),
      );
      const slowest = Math.max(...took);
      assert.ok(
        slowest < 3_000,
        `the slowest of 10 reads answered ${
          Math.round(slowest)
        } ms after the database was back (${
          took.map((ms) => Math.round(ms)).join(", ")
        } ms)`,
      );
    } finally {
      await service.close();
      await server.stop();
    }
  }),
});
