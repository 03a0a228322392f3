/**
 * A pool of several connections under `target_session_attrs=primary`, a
 * hot standby listed first (see `postgres_standby_test.ts`): connections
 * opened at once, and ended for their idle time, each pass over the
 * standby at most once and land on the primary; a list of three hosts (a
 * standby, a host that is down, the primary); and a failover (the primary
 * stopped, the standby promoted) under writes of the store.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";
import { downPort } from "./_down_port.ts";
import { countedSocket } from "./_counted_socket.ts";
import {
  type Pair,
  standbyFirst,
  startPair,
  within,
} from "./_postgres_pair.ts";

/** Where `n` queries at once ran: the standby's answers, and the ports. */
async function at(
  sql: postgres.Sql,
  n: number,
): Promise<{ standby: number; ports: Set<number> }> {
  const rows = await within(
    Promise.all(
      Array.from(
        { length: n },
        () =>
          sql`SELECT pg_is_in_recovery() AS standby, inet_server_port() AS port, pg_sleep(0.05)`,
      ),
    ),
    10_000,
  );
  return {
    standby: rows.filter(([row]) => row?.standby === true).length,
    ports: new Set(rows.map(([row]) => row?.port as number)),
  };
}

/**
 * The client sessions on the server at `port` but the one asking, once
 * there are none or `ms` passed: a pool's idle end waited for, and a
 * shared pair checked clean.
 */
async function sessionsLeft(
  { password, port }: { password: string; port: number },
  ms: number,
): Promise<string[]> {
  const sql = postgres(
    `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    { max: 1, onnotice: () => {}, max_lifetime: null },
  );
  try {
    const until = performance.now() + ms;
    for (;;) {
      const rows = await sql<{ query: string }[]>`
        SELECT query FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`;
      if (rows.length === 0 || performance.now() >= until) {
        return rows.map((row) => row.query);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await sql.end({ timeout: 0 });
  }
}

/**
 * Fails unless, within 5 s, neither server of `pair` has a client session
 * but the one asking: what a case that shares the pair starts from.
 */
async function noSessionsOn(pair: Pair): Promise<void> {
  const { password } = pair.primary;
  for (const port of [pair.primary.port, pair.standbyPort]) {
    assert.deepEqual(
      await sessionsLeft({ password, port }, 5_000),
      [],
      `sessions left on port ${port}`,
    );
  }
}

/**
 * A pool of 4 over `url`, plain and then with answeredSocketOption: in
 * each of `rounds`, `queries` at once all land on the primary at `port`,
 * with `connects` connects at most, and every connection then ends for
 * its idle time (1 s) before the next round (waited for on the primary,
 * 1.6 s at most).
 */
async function landsOnPrimary(
  url: string,
  primary: { password: string; port: number },
  { rounds, queries, connects }: {
    rounds: number;
    queries: number;
    connects: number;
  },
): Promise<void> {
  for (const given of [false, true]) {
    const { socket, count } = countedSocket(5_000);
    const sql = postgres(url, {
      max: 4,
      idle_timeout: 1,
      onnotice: () => {},
      max_lifetime: null,
      connect_timeout: 5,
      ...(given ? { socket } : {}),
    } as postgres.Options<Record<string, never>>);
    const what = given ? "with answeredSocketOption" : "plain";
    try {
      for (let round = 0; round < rounds; round++) {
        const before = count.made;
        const where = await at(sql, queries);
        assert.deepEqual(
          { standby: where.standby, ports: [...where.ports] },
          { standby: 0, ports: [primary.port] },
          `${what}, round ${round}`,
        );
        if (given) {
          assert.ok(
            count.made - before <= connects,
            `${count.made - before} connects in round ${round}`,
          );
        }
        if (round < rounds - 1) await sessionsLeft(primary, 1_600);
      }
    } finally {
      await sql.end({ timeout: 0 });
      await socket.closed(5_000);
    }
  }
}

Deno.test({
  name:
    "target_session_attrs=primary under the store's writes while the primary stops: a pair of its own for each case, started while the case before runs",
  ignore: !postgresAvailable,
  async fn(t) {
    let next: Promise<Pair> | undefined = startPair({ durable: true });
    try {
      for (const end of ["promoted", "restarted"] as const) {
        await t.step(
          `target_session_attrs=primary under the store's writes while the primary stops and ${
            end === "promoted"
              ? "the standby is promoted"
              : "starts again, the standby not promoted"
          }: writes go on on the primary, none acknowledged is lost, none said unwritten landed`,
          async () => {
            for (const given of [false, true]) {
              const pair: Pair = await next!;
              next = end === "restarted" && given
                ? undefined
                : startPair({ durable: true });
              // Its failure is the case's, once it is awaited there.
              next?.catch(() => {});
              const { socket } = countedSocket(2_000);
              const sql = postgres(standbyFirst(pair, "primary"), {
                max: 4,
                onnotice: () => {},
                max_lifetime: null,
                connect_timeout: 2,
                ...(given ? { socket } : {}),
              } as postgres.Options<Record<string, never>>);
              const store = new PostgresStore(sql, { connectionWaitMs: 2_000 });
              const what = given ? "with answeredSocketOption" : "plain";
              const written: string[] = [];
              const unwritten: string[] = [];
              // Writes answered after the primary was back, and those refused.
              let backAt = Infinity;
              let after = 0;
              // Each worker's writes begun a second past the return that landed.
              const settled = [0, 0, 0, 0];
              const refusedAfter: string[] = [];
              let stopping = false;
              try {
                await within(store.migrate(), 10_000);
                const worker = async (w: number) => {
                  for (let i = 0; !stopping; i++) {
                    const id = `pi_${w}_${i}`;
                    const began = performance.now();
                    try {
                      await within(
                        store.createIntent({ id, state: "created" }),
                        15_000,
                      );
                      written.push(id);
                      if (performance.now() > backAt) after++;
                      if (began > backAt + 1_000) settled[w]!++;
                    } catch (error) {
                      const message = (error as Error).message;
                      if (/nothing (?:of it )?was written/.test(message)) {
                        unwritten.push(id);
                      }
                      // A second past the primary's return, a refusal is one
                      // for good.
                      if (performance.now() > backAt + 1_000) {
                        refusedAfter.push(message.slice(0, 100));
                      }
                      await new Promise((resolve) => setTimeout(resolve, 50));
                    }
                  }
                };
                const workers = [0, 1, 2, 3].map(worker);
                // The primary stops under the writes: once each worker's
                // second write landed (the next is in flight), or after
                // 1 s at most, where it waited that second out.
                const writing = performance.now() + 1_000;
                while (
                  performance.now() < writing &&
                  ![0, 1, 2, 3].every((w) => written.includes(`pi_${w}_1`))
                ) {
                  await new Promise((resolve) => setTimeout(resolve, 10));
                }
                await pair.primary.halt("fast");
                await new Promise((resolve) => setTimeout(resolve, 1_000));
                if (end === "promoted") await pair.promote();
                else await pair.primary.resume();
                backAt = performance.now();
                // The writes go on until each worker landed two begun a
                // second past the return (the four connections each took
                // some, a refusal for good among them counted), or for 4 s,
                // where they ran those 4 s out.
                while (
                  performance.now() < backAt + 4_000 &&
                  !settled.every((n) => n >= 2)
                ) {
                  await new Promise((resolve) => setTimeout(resolve, 10));
                }
                stopping = true;
                await Promise.all(workers);
              } finally {
                store.close();
                await sql.end({ timeout: 0 });
                await socket.closed(5_000);
              }
              const port = end === "promoted"
                ? pair.standbyPort
                : pair.primary.port;
              const check = postgres(
                `postgres://postgres:${pair.primary.password}@127.0.0.1:${port}/postgres`,
                { max: 1, onnotice: () => {} },
              );
              try {
                const rows = await check<{ id: string }[]>`
            SELECT id FROM relayer.intents`;
                const there = new Set(rows.map((row) => row.id));
                assert.deepEqual(
                  written.filter((id) => !there.has(id)),
                  [],
                  what,
                );
                assert.deepEqual(
                  unwritten.filter((id) => there.has(id)),
                  [],
                  what,
                );
                assert.deepEqual(refusedAfter.slice(0, 3), [], what);
                assert.ok(
                  after > 0,
                  `${what}: no write after the primary was back`,
                );
              } finally {
                await check.end({ timeout: 0 });
                await pair.stop();
              }
            }
          },
        );
      }
    } finally {
      await next?.then((pair) => pair.stop(), () => {});
    }
  },
});

Deno.test({
  name:
    "target_session_attrs=primary, the standby listed first: one pair for the pool and session cases, each starting with no session of the last left on either server",
  ignore: !postgresAvailable,
  async fn(t) {
    const pair = await startPair();
    try {
      await t.step(
        "target_session_attrs=primary, a pool of 4, the standby listed first: connections opened at once, and opened again after their idle end, all land on the primary, each passing over the standby at most once",
        async () => {
          await noSessionsOn(pair);
          // Four connections, each over the standby once at most.
          await landsOnPrimary(
            standbyFirst(pair, "primary"),
            pair.primary,
            {
              rounds: 3,
              queries: 16,
              connects: 8,
            },
          );
        },
      );
      await t.step(
        "target_session_attrs=primary over a standby, a host that is down and the primary: a pool of 4 lands on the primary, with answeredSocketOption and without",
        async () => {
          await noSessionsOn(pair);
          const { password, port } = pair.primary;
          const url =
            `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort},127.0.0.1:${await downPort()},127.0.0.1:${port}/postgres?target_session_attrs=primary`;
          await landsOnPrimary(url, pair.primary, {
            rounds: 2,
            queries: 12,
            connects: 12,
          });
        },
      );
      await t.step(
        "target_session_attrs=primary, the standby listed first: a session the primary ends under a query (pg_terminate_backend) and the client opens again on the standby leaves the store's writes refused as read-only once at most, not for good",
        async () => {
          await noSessionsOn(pair);
          for (
            const [given, types] of [[false, true], [true, true], [true, false]]
          ) {
            const { socket } = countedSocket(5_000);
            const sql = postgres(standbyFirst(pair, "primary"), {
              max: 1,
              onnotice: () => {},
              max_lifetime: null,
              connect_timeout: 5,
              // Without type fetching the store writes through sql.begin.
              fetch_types: types,
              ...(given ? { socket } : {}),
            } as postgres.Options<Record<string, never>>);
            const store = new PostgresStore(sql, {
              schema: `relayer_${given ? "answered" : "plain"}_${types}`,
              connectionWaitMs: 2_000,
            });
            const what = `${
              given ? "with answeredSocketOption" : "plain"
            }, fetch_types ${types}`;
            try {
              await within(store.migrate(), 10_000);
              await within(store.createIntent({ id: "pi_0" }), 10_000);
              // The pool's one connection runs a statement; the primary ends
              // its session under it (an operator's pg_terminate_backend, a
              // failover tool). postgres.js 3.4.9 keeps the goodbye that came
              // for the statement, and the connection it opens again (at the
              // next host, the standby) rejects its first request with it and
              // skips the target_session_attrs check: it serves from the
              // standby.
              const held = sql`SELECT pg_sleep(30)`.catch(() => {});
              await new Promise((resolve) => setTimeout(resolve, 300));
              await pair.primary.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()",
              );
              await held;
              const failures: string[] = [];
              let written = 0;
              for (let i = 1; i <= 6; i++) {
                try {
                  await within(store.createIntent({ id: `pi_${i}` }), 10_000);
                  written++;
                } catch (error) {
                  failures.push((error as Error).message.slice(0, 90));
                }
              }
              const refused = failures.filter((m) => /read-only/.test(m));
              assert.ok(
                refused.length <= 1 && written >= 4,
                `${what}: ${written} written; ${failures.join(" | ")}`,
              );
              const [where] = await within(
                sql`SELECT pg_is_in_recovery() AS standby`,
                10_000,
              );
              assert.equal(where?.standby, false, what);
            } finally {
              store.close();
              await sql.end({ timeout: 0 });
              await socket.closed(5_000);
            }
          }
        },
      );
    } finally {
      await pair.stop();
    }
  },
});

Deno.test({
  name:
    "target_session_attrs=primary: a write refused for another reason than read-only (a lock held past lock_timeout) keeps its session",
  ignore: !postgresAvailable,
  async fn() {
    const url = new URL(await postgresUrl());
    url.searchParams.set("target_session_attrs", "primary");
    const sql = postgres(url.href, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
    } as postgres.Options<Record<string, never>>);
    const holder = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      // postgres.js 3.4.9's end() leaves a lifetime's timer behind.
      max_lifetime: null,
    });
    const schema = "relayer_kept_session";
    const store = new PostgresStore(sql, { schema, connectionWaitMs: 1_000 });
    try {
      await store.migrate();
      const [before] = await sql`SELECT pg_backend_pid() AS pid`;
      let release = () => {};
      const released = new Promise<void>((resolve) => release = resolve);
      let locked = () => {};
      const holding = new Promise<void>((resolve) => locked = resolve);
      const held = holder.begin(async (tx) => {
        await tx.unsafe(
          `LOCK TABLE ${schema}.intents IN ACCESS EXCLUSIVE MODE`,
        );
        locked();
        await released;
      });
      await holding;
      await assert.rejects(
        () => store.createIntent({ id: "pi_1" }),
        /lock_timeout/,
      );
      release();
      await held;
      const [after] = await sql`SELECT pg_backend_pid() AS pid`;
      assert.equal(after?.pid, before?.pid);
    } finally {
      store.close();
      await sql.end({ timeout: 0 });
      await holder.end({ timeout: 0 });
    }
  },
});
