/**
 * A session postgres.js 3.4.9 opened again on the hot standby listed
 * first (after the primary ended the one before under a statement: it
 * skips the `target_session_attrs` check then) answers the store's reads
 * from the standby, as far as it has replayed, until a write is refused
 * there. Such a read can be older than what another instance already
 * wrote on the primary: here the standby's replay is paused after the
 * intent was created, another store wrote ahead of a broadcast on the
 * primary, and this store, a pool of 2 (one session on each server),
 * reads the intent from before that and writes ahead of a broadcast on
 * the version it had. No second write ahead of a send can come of it: a
 * write reads the intent again and checks the version here, then its
 * flight checks it once more on the server it runs on, under a row lock
 * (`#stillAt`), which the standby refuses as read-only and the primary
 * refuses as stale. With both checks taken out, a second write ahead
 * landed; with either one left, none did. A stale read is a read from
 * the past, which a write that comes long after its read meets anyway.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable } from "../_postgres.ts";
import { standbyFirst, startPair, within } from "./_postgres_pair.ts";

/** Polls `check` every 50 ms until it holds, for `ms` at most. */
async function until(check: () => Promise<boolean>, ms: number) {
  const ends = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > ends) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

Deno.test({
  name:
    "target_session_attrs=primary, a session opened again on the standby unchecked, its replay behind: the store reads the intent from before another instance's write ahead of a broadcast, and its own write ahead of a broadcast on that read is refused, never written",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    const { password } = pair.primary;
    const standby = postgres(
      `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres`,
      { max: 1, onnotice: () => {}, max_lifetime: null },
    );
    const primary = postgres(
      `postgres://postgres:${password}@127.0.0.1:${pair.primary.port}/postgres`,
      { max: 1, onnotice: () => {}, max_lifetime: null },
    );
    try {
      for (const given of [false, true]) {
        const schema = `relayer_${given ? "answered" : "plain"}`;
        const answered = answeredSocketOption(5_000);
        const sql = postgres(standbyFirst(pair, "primary"), {
          max: 2,
          onnotice: () => {},
          max_lifetime: null,
          connect_timeout: 5,
          ...(given ? answered : {}),
        } as postgres.Options<Record<string, never>>);
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 2_000,
        });
        const other = new PostgresStore(primary, { schema });
        const what = given ? "with answeredSocketOption" : "plain";
        try {
          await within(store.migrate(), 10_000);
          const made = await store.createIntent({
            id: "pi_1",
            state: "settling",
            hold: "pending",
            settlingSince: 0,
          });
          // The standby has the intent, then replays nothing more.
          await until(async () => {
            // The schema too may be still to replay.
            const [row] = await standby.unsafe(
              `SELECT to_regclass('${schema}.intents') IS NOT NULL AS there`,
            );
            if (row?.there !== true) return false;
            const rows = await standby.unsafe(
              `SELECT 1 FROM ${schema}.intents WHERE id = 'pi_1'`,
            );
            return rows.length === 1;
          }, 10_000);
          await standby`SELECT pg_wal_replay_pause()`;
          // Another instance writes ahead of its broadcast, on the primary.
          const ahead = await other.beginBroadcast("pi_1", made.version, 1);
          // Both connections of the pool open, on the primary.
          await within(
            Promise.all([sql`SELECT pg_sleep(0.1)`, sql`SELECT pg_sleep(0.1)`]),
            10_000,
          );
          // The primary ends one's session under a statement: postgres.js
          // opens it again on the standby, unchecked.
          const held = sql`SELECT pg_sleep(30)`.catch(() => {});
          await new Promise((resolve) => setTimeout(resolve, 300));
          await pair.primary.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()",
          );
          await held;
          // Both busy at once: the closed one is opened again (its first
          // request rejected with the goodbye it kept).
          for (let i = 0; i < 2; i++) {
            await Promise.all([
              sql`SELECT pg_sleep(0.1)`.catch(() => {}),
              sql`SELECT pg_sleep(0.1)`.catch(() => {}),
            ]);
          }
          // Reads and writes ahead of a broadcast on the version this
          // store had, each read answered by either session: none lands.
          const versions: string[] = [];
          const refusals: string[] = [];
          for (let i = 0; i < 8; i++) {
            // Two reads at once, so that each session answers one: one
            // read at a time may find the same session idle each time.
            const seen = await within(
              Promise.all([store.getIntent("pi_1"), store.getIntent("pi_1")]),
              10_000,
            );
            versions.push(...seen.map((intent) => intent?.version ?? "none"));
            await within(
              store.beginBroadcast("pi_1", made.version, 2 + i),
              10_000,
            ).then(
              () => assert.fail(`${what}: a second write ahead landed`),
              (error: Error) => refusals.push(error.message.slice(0, 80)),
            );
          }
          // The premise: the plain client's reads came from the standby's
          // past. answeredSocketOption's socket opens the session again on
          // the host that answered (the primary), so its reads are current.
          if (!given) {
            assert.ok(versions.includes(made.version), `${what}: ${versions}`);
          }
          assert.equal(refusals.length, 8, what);
          const [row] = await primary.unsafe(
            `SELECT version::text AS version FROM ${schema}.intents WHERE id = 'pi_1'`,
          );
          assert.equal(row?.version, ahead.version, `${what}: one write ahead`);
        } finally {
          await standby`SELECT pg_wal_replay_resume()`;
          store.close();
          other.close();
          await sql.end({ timeout: 0 });
          await answered.socket.closed(5_000);
        }
      }
    } finally {
      await standby.end({ timeout: 0 });
      await primary.end({ timeout: 0 });
      await pair.stop();
    }
  },
});
