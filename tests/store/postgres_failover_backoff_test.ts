/**
 * A failover with no primary to connect to, under
 * `target_session_attrs=primary`: the standby listed first and the primary
 * stopped, or the standby listed alone. postgres.js 3.4.9 connects again
 * at once for the query that opened a connection when it passed over a
 * standby or a connect to one of several hosts failed (its backoff counts
 * neither), so with the service's socket (`answeredSocketOption`) it
 * logged in to the standby about a hundred times a second for as long as
 * the outage lasted. The socket now hands on a failed connection's close
 * late once every listed host failed in a row (50 ms, doubling, at most
 * 1 s), and closes a standby listed alone as failed, so postgres.js's own
 * backoff spaces those; the store's calls still fail within
 * `connectionWaitMs`. Logins are counted by the standby itself
 * (`pg_stat_database.sessions`), connects by the socket. Once the client
 * ended and its socket was closed, no session of it is left on the
 * standby: postgres.js's end leaves a reconnect timer running, whose
 * login, to a standby listed alone, stayed there idle until the socket
 * refused connects after its `closed()`.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { countedSocket } from "./_counted_socket.ts";
import { standbyFirst, startPair } from "./_postgres_pair.ts";

/** Sessions the standby opened so far (pg_stat_database counts them at their end). */
async function sessions(
  standby: postgres.Sql,
): Promise<number> {
  const [row] = await standby`
    SELECT pg_stat_clear_snapshot(), sum(sessions)::int AS n FROM pg_stat_database`;
  return row?.n as number;
}

Deno.test({
  name:
    "target_session_attrs=primary, the primary stopped: one pair for both host lists",
  ignore: !postgresAvailable,
  async fn(t) {
    const pair = await startPair();
    try {
      await pair.primary.halt("fast");
      for (
        const listed of [
          "standby, then the primary stopped",
          "the standby alone",
        ]
      ) {
        await t.step(
          `target_session_attrs=primary, ${listed}: the store's writes fail within connectionWaitMs, and the client logs in to the standby a few times a second, not hundreds`,
          async () => {
            const { password } = pair.primary;
            const url = listed === "the standby alone"
              ? `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres?target_session_attrs=primary`
              : standbyFirst(pair, "primary");
            const standby = postgres(
              `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres`,
              { max: 1, onnotice: () => {}, max_lifetime: null },
            );
            const { socket, count } = countedSocket(2_000);
            const sql = postgres(url, {
              max: 2,
              onnotice: () => {},
              max_lifetime: null,
              connect_timeout: 2,
              backoff: reconnectBackoffS,
              socket,
            } as postgres.Options<Record<string, never>>);
            const store = new PostgresStore(sql, { connectionWaitMs: 1_000 });
            // The client's sessions on the standby once it ended.
            let left: number | undefined;
            try {
              const before = await sessions(standby);
              const madeBefore = count.made;
              const started = performance.now();
              const failures: number[] = [];
              const ends = performance.now() + 3_000;
              // Two callers, as two workers of the service.
              await Promise.all([0, 1].map(async (w) => {
                for (let i = 0; performance.now() < ends; i++) {
                  const at = performance.now();
                  await assert.rejects(() =>
                    store.createIntent({ id: `pi_${w}_${i}` })
                  );
                  failures.push(performance.now() - at);
                }
              }));
              const seconds = (performance.now() - started) / 1_000;
              // Sessions end as the client passes over the standby: give the
              // last ones their moment to be counted.
              await new Promise((resolve) => setTimeout(resolve, 300));
              const logins = (await sessions(standby)) - before;
              const rate = logins / seconds;
              const connects = (count.made - madeBefore) / seconds;
              assert.ok(
                Math.max(...failures) < 1_000 + 500,
                `a call took ${Math.max(...failures).toFixed(0)} ms`,
              );
              const measured = `${rate.toFixed(1)} standby logins a second, ${
                connects.toFixed(1)
              } connects a second over ${seconds.toFixed(1)} s`;
              assert.ok(rate <= 20 && connects <= 40, measured);
            } finally {
              store.close();
              await sql.end({ timeout: 0 });
              await socket.closed(5_000);
              // postgres.js 3.4.9 leaves a connection's reconnect timer (its
              // backoff, at most 1 s here) running past its end: its connect
              // the socket refuses, and no session of the client is left on
              // the standby (its login stayed there, idle, when the
              // standby was listed alone).
              await new Promise((resolve) => setTimeout(resolve, 1_500));
              try {
                const [row] = await standby`
                  SELECT count(*)::int AS n FROM pg_stat_activity
                  WHERE backend_type = 'client backend'
                    AND pid <> pg_backend_pid()`;
                left = row?.n;
              } finally {
                await standby.end({ timeout: 0 });
              }
            }
            assert.equal(left, 0, "sessions of the client left on the standby");
          },
        );
      }
    } finally {
      await pair.stop();
    }
  },
});
