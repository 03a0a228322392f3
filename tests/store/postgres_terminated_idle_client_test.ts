/**
 * PostgresStore on the docs' short client (`postgres(url)`, with or
 * without `reconnectBackoffS`, no `answeredSocketOption`), its idle
 * connections ended by the server (`pg_terminate_backend`, as an
 * operator, `idle_session_timeout` or a restart ends them) right before
 * the next read, on a real server: the read the end meets is asked once
 * again, on a connection opened anew, and answers, round after round, in a
 * pool of 1, 2 or 3. In a pool of several the read asked again may meet
 * another ended connection (the server ends them one after the other, and the
 * second may still be taking it): it is asked again as many times as the
 * pool has connections, and answers.
 *
 * The end reaches the client as a reset of the read (`read ECONNRESET`)
 * in most runs here, and postgres.js 3.4.9 reports the close a turn after
 * the error: the store's probe of the pool, sent in the error's turn, was
 * written to nothing and kept the connection from opening again, so every
 * later read of a pool of 1 "did not answer within …ms".
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
import { timeout } from "../_timeout.ts";

const WAIT_MS = 1_000;
const ROUNDS = 5;

serverUpFirst();

for (const max of [1, 2, 3]) {
  for (const backoff of [false, true]) {
    Deno.test({
      name: `PostgresStore on postgres(url${
        backoff ? ", { backoff: reconnectBackoffS }" : ""
      }) (a pool of ${max}): a read after the server ended its idle connections answers, asked again, round after round`,
      ignore: !postgresAvailable,
      fn: timeout(30_000, async () => {
        const admin = await connect(2);
        const schema = freshSchema();
        const sql = postgres(await postgresUrl(), {
          max,
          ...(backoff ? { backoff: reconnectBackoffS } : {}),
          onnotice: () => {},
          max_lifetime: null,
          connection: { application_name: schema },
        });
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: WAIT_MS,
        });
        try {
          await store.migrate();
          await store.createIntent({ id: "pi_1", hold: "pending" });
          const seen: string[] = [];
          for (let round = 0; round < ROUNDS; round++) {
            // Every connection of the pool open and idle (`max` reads at
            // once take one each, the store's probes after an end may still
            // be opening one), then ended.
            for (let waited = 0;; waited += 20) {
              await Promise.all(
                Array.from({ length: max }, () => store.getIntent("pi_1")),
              );
              // (A pool of 1: its read answered on its one connection.)
              if (max === 1) break;
              const [idle] = await admin<{ n: number }[]>`
                SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE application_name = ${schema} AND state = 'idle'`;
              if (idle!.n === max) break;
              assert.ok(waited < 5_000, `${idle!.n} of ${max} open`);
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
            await admin`
              SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = ${schema}`;
            // A read meets each ended connection once at most, and is asked
            // again as many times as the pool has connections: it answers.
            const reads: string[] = [];
            while (reads.length <= max && reads.at(-1) !== "pending") {
              reads.push(
                await store.getIntent("pi_1").then(
                  (intent) => `${intent?.hold}`,
                  (error: Error) =>
                    /^PostgreSQL lost the connection during the store's read/
                        .test(error.message)
                      ? "lost"
                      : error.message,
                ),
              );
            }
            seen.push(reads.join(", "));
          }
          // What the pool answered in each round. Before, a read that met
          // more ended connections than it was asked failed as lost
          // ("lost, pending"), and once a pool of 1 was jammed every later
          // read did not answer. One round in a pool of 1 may meet
          // postgres.js 3.4.9's known race (a query handed over between a
          // socket's error and its close, held until connectionWaitMs; the
          // next read answers: docs/postgres.md's limits), never two.
          const held = new RegExp(
            `^PostgreSQL did not answer the store's read within ${WAIT_MS}ms: [^,]*, or the server is unreachable; retry, pending$`,
          );
          const other = seen.filter((reads) => reads !== "pending");
          assert.ok(
            max === 1 && other.length === 1 && held.test(other[0]!) ||
              other.length === 0,
            JSON.stringify(seen),
          );
        } finally {
          store.close();
          await sql.end({ timeout: 1 });
          await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await admin.end();
        }
      }),
    });
  }
}
