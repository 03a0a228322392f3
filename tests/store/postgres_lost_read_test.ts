/**
 * A read whose connection is lost under it, on a real server: the store
 * asks it again, on a connection opened anew, and that answers, as many
 * times as the pool has connections (2 here). Lost once more, the store
 * rejects with an error that names PostgreSQL, says the
 * connection was lost and nothing was read, and what to do (try again),
 * keeping the lost connection's error as its `cause` and its `code`; not
 * postgres.js's bare `read ECONNRESET`, which says neither, as a log line
 * or a 503's reason.
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

const LOST =
  /^PostgreSQL lost the connection during the store's read \((.+)\): nothing was read, so try again$/;

/** How the connection is lost while the read waits on a table lock. */
const LOSSES = [
  { name: "reset (an RST: ECONNRESET)", code: "ECONNRESET" },
  { name: "ended by the server (pg_terminate_backend)", code: undefined },
] as const;

serverUpFirst();

for (const fetchTypes of [true, false]) {
  for (const loss of LOSSES) {
    for (const times of [1, 2, 3]) {
      Deno.test({
        name: times < 3
          ? `PostgresStore: a read whose connection is ${loss.name} ${
            times === 1 ? "once" : "twice, in a pool of 2,"
          } is asked again on a connection opened anew, and answers (fetch_types: ${fetchTypes})`
          : `PostgresStore: a read whose connection is ${loss.name} three times, in a pool of 2, rejects saying PostgreSQL lost it, nothing was read and to try again, its cause and code kept (fetch_types: ${fetchTypes})`,
        ignore: !postgresAvailable,
        fn: timeout(30_000, async () => {
          const admin = await connect(2);
          const schema = freshSchema();
          const seeded = new PostgresStore(admin, { schema });
          await seeded.migrate();
          await seeded.createIntent({ id: "a", hold: "pending" });
          const relay = await refusingRelay(await postgresUrl());
          const name = `relayer_lost_read_${fetchTypes}`;
          // An end by the server goes straight to it: the relay passes no
          // reset of the server's on (its pipe stops at the error), and a
          // read it held so would wait out connectionWaitMs.
          const url = loss.code === undefined ? await postgresUrl() : relay.url;
          const sql = postgres(url, {
            max: 2,
            onnotice: () => {},
            backoff: reconnectBackoffS,
            fetch_types: fetchTypes,
            connection: { application_name: name },
          });
          const store = new PostgresStore(sql, {
            schema,
            connectionWaitMs: 5_000,
          });
          const lock = await admin.reserve();
          // The sessions whose read was lost: one reset through the relay
          // waits on the lock still, its client gone.
          const lost = new Set<number>();
          try {
            assert.equal((await store.getIntent("a"))?.hold, "pending");
            await lock.unsafe(
              `BEGIN; LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
            );
            const reading = store.getIntent("a").then(
              (intent) => `answered ${intent?.hold}`,
              (error: Error) => error,
            );
            // The read waits on the lock: its connection is lost under it,
            // and so is the read asked again, on a session of its own.
            for (let n = 0; n < times; n++) {
              for (let waited = 0;; waited += 20) {
                const rows = await admin<{ pid: number }[]>`
                  SELECT pid FROM pg_stat_activity
                  WHERE application_name = ${name} AND wait_event_type = 'Lock'`;
                const row = rows.find(({ pid }) => !lost.has(pid));
                if (row !== undefined) {
                  lost.add(row.pid);
                  if (loss.code === undefined) {
                    await admin`SELECT pg_terminate_backend(${row.pid})`;
                  } else relay.reset();
                  break;
                }
                assert.ok(waited < 5_000, "the read never waited on the lock");
                await new Promise((resolve) => setTimeout(resolve, 20));
              }
            }
            if (times < 3) {
              // Asked again: it waits on the lock on a session of its own,
              // and answers once the lock goes.
              for (let waited = 0;; waited += 20) {
                const rows = await admin<{ pid: number }[]>`
                  SELECT pid FROM pg_stat_activity
                  WHERE application_name = ${name} AND wait_event_type = 'Lock'`;
                if (rows.some(({ pid }) => !lost.has(pid))) break;
                assert.ok(waited < 5_000, "the read was not asked again");
                await new Promise((resolve) => setTimeout(resolve, 20));
              }
              await lock.unsafe("ROLLBACK");
              assert.equal(await reading, "answered pending");
              return;
            }
            const error = await reading;
            assert.ok(error instanceof Error, `it ${error}`);
            const said = LOST.exec(error.message);
            assert.ok(said, `what it said: ${error.message}`);
            const cause = error.cause;
            assert.ok(cause instanceof Error, "the lost connection's error");
            assert.equal(said[1], `${cause.name}: ${cause.message}`);
            const code = (cause as { code?: unknown }).code;
            assert.equal((error as { code?: unknown }).code, code);
            if (loss.code !== undefined) assert.equal(code, loss.code);
            // And the store reads again once the connection is back.
            await lock.unsafe("ROLLBACK");
            assert.equal((await store.getIntent("a"))?.hold, "pending");
          } finally {
            await lock.unsafe("ROLLBACK").catch(() => {});
            lock.release();
            store.close();
            await sql.end({ timeout: 1 });
            relay.close();
            await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
            await admin.end();
          }
        }),
      });
    }
  }
}
