/**
 * A store read after every connection of its pool was ended at once (a
 * failover whose old server is gone, a pooler restarted), on a real
 * server through a relay that drops them all: the client hears of each
 * end only as it next writes on that connection. A read meets each ended
 * connection at most once, and is asked again on the next: asked as many
 * times as the pool has connections, it reaches one opened anew and
 * answers, in a pool of 2, 3 or 4, read after read in a row and many at
 * once. Before, a read was asked once more only: in a pool of 3 or 4 the
 * ask met another ended connection, and the first read of every round
 * failed "PostgreSQL lost the connection during the store's read" (in a
 * pool of 2 the store's probe after the first loss most often met the
 * other ended connection first).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { refusingRelay } from "../_refusing_relay.ts";
import { timeout } from "../_timeout.ts";

const ROUNDS = 3;

serverUpFirst();

for (const max of [2, 3, 4]) {
  for (const atOnce of [false, true]) {
    Deno.test({
      name: `PostgresStore (a pool of ${max}): ${
        atOnce ? `${2 * max} reads at once` : `${max + 1} reads in a row`
      } after every connection of the pool was ended at once all answer, round after round`,
      ignore: !postgresAvailable,
      // The relay runs in this process, and the dropped connections'
      // timers (postgres.js's reconnect, the store's probe) may end after
      // the test on a loaded machine.
      sanitizeOps: false,
      sanitizeResources: false,
      fn: timeout(30_000, async () => {
        const admin = await connect(2);
        const schema = freshSchema();
        const seeded = new PostgresStore(admin, { schema });
        await seeded.migrate();
        await seeded.createIntent({ id: "pi_1", hold: "pending" });
        const relay = await refusingRelay(await postgresUrl());
        try {
          const seen: string[][] = [];
          // A client of its own each round: every connection of its pool
          // opened by the reads that open it, none left from a round before.
          for (let round = 0; round < ROUNDS; round++) {
            const sql = postgres(relay.url, {
              max,
              backoff: reconnectBackoffS,
              onnotice: () => {},
              max_lifetime: null,
              connection: { application_name: schema },
            });
            const store = new PostgresStore(sql, {
              schema,
              connectionWaitMs: 5_000,
            });
            const read = () =>
              store.getIntent("pi_1").then(
                (intent) => `${intent?.hold}`,
                (error: Error) => error.message,
              );
            try {
              // Every connection of the pool open and idle: `max` reads at
              // once take one each, as each finds none open.
              assert.deepEqual(
                await Promise.all(Array.from({ length: max }, read)),
                Array(max).fill("pending"),
              );
              for (let waited = 0;; waited += 20) {
                const [idle] = await admin<{ n: number }[]>`
                  SELECT count(*)::int AS n FROM pg_stat_activity
                  WHERE application_name = ${schema} AND state = 'idle'`;
                if (idle!.n === max) break;
                assert.ok(waited < 5_000, `${idle!.n} of ${max} open`);
                await new Promise((resolve) => setTimeout(resolve, 20));
              }
              relay.drop();
              if (atOnce) {
                seen.push(
                  await Promise.all(Array.from({ length: 2 * max }, read)),
                );
              } else {
                const reads: string[] = [];
                for (let n = 0; n <= max; n++) reads.push(await read());
                seen.push(reads);
              }
            } finally {
              store.close();
              await sql.end({ timeout: 0 });
            }
          }
          // Before, in a row: the first read of a round met two ended
          // connections and failed, "PostgreSQL lost the connection during
          // the store's read (Error: read ECONNRESET): nothing was read, so
          // try again" (in each round of a pool of 3 or 4).
          assert.deepEqual(
            seen,
            seen.map((reads) => reads.map(() => "pending")),
          );
        } finally {
          relay.close();
          await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await admin.end();
        }
      }),
    });
  }
}
