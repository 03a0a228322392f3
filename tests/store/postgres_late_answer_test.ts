/**
 * PostgresStore when a write's flight is answered only after
 * `connectionWaitMs` (the server or the network stalled): the write
 * answers at once that it may have landed, keeps its connection until the
 * answers come, and then hands it back, alive, to the pool.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { relayed } from "./_cut.ts";

serverUpFirst();

// The COMMIT each client path sends last: postgres.js's own on `sql.begin`'s
// path, the store's COMMIT AND CHAIN (a round trip of its own after the
// statements') on a client made with `fetch_types: false`. A server that
// stops answering there (a COMMIT waiting for a synchronous standby that is
// gone, a partition, a stalled host) held the write, and its delivery, on
// the second path for as long as it lasted: here 1.5 s, in production for
// good.
for (
  const { fetchTypes, commit } of [
    { fetchTypes: true, commit: "COMMIT" },
    { fetchTypes: false, commit: "COMMIT AND CHAIN" },
  ]
) {
  Deno.test({
    name: `PostgresStore${
      fetchTypes ? "" : " on a client made with fetch_types: false"
    } answers a write whose ${commit} is answered only past connectionWaitMs that it may have landed, within the bound, and hands the connection back once the answer comes: with a pool of one, the next write gets it`,
    ignore: !postgresAvailable,
    fn: timeout(30_000, async () => {
      const admin = await connect(1);
      const schema = freshSchema();
      let hold = false;
      const relay = new AbortController();
      const sql = postgres(
        relayed(await postgresUrl(), async (text) => {
          if (hold && text.includes(`${commit}\0`)) {
            hold = false;
            await new Promise((resolve) => setTimeout(resolve, 1500));
          }
        }, relay.signal),
        { max: 1, onnotice: () => {}, fetch_types: fetchTypes },
      );
      try {
        const other = new PostgresStore(admin, { schema });
        await other.migrate();
        await other.createIntent({
          id: "a",
          state: "authorized",
          hold: "pending",
        });
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 1000,
        });
        hold = true;
        const started = performance.now();
        await assert.rejects(
          store.transition("a", {
            from: "authorized",
            to: "settling",
            version: "1",
            at: 600,
          }),
          /^Error: PostgreSQL did not answer the write within 1000ms: it may have landed or not; the next read says which$/,
        );
        assert.ok(
          performance.now() - started < 1400,
          `answered after ${Math.round(performance.now() - started)}ms`,
        );
        assert.equal(hold, false, `the ${commit} was held`);
        // The answer comes 1.5 s after the COMMIT was sent: the write
        // landed, and its connection is the pool's again.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await store.createIntent({ id: "b", state: "authorized" });
        assert.equal((await store.getIntent("b"))?.state, "authorized");
        assert.equal((await store.getIntent("a"))?.state, "settling");
      } finally {
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
        await sql.end({ timeout: 1 });
        relay.abort();
      }
    }),
  });
}

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false answers a write refused as stale, whose second try is still waiting for its BEGIN when the bound of the first runs out, that nothing was written, not that it may have landed",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const admin = await connect(1);
    const schema = freshSchema();
    let armed = false;
    let begins = 0;
    const relay = new AbortController();
    const sleep = (ms: number) =>
      new Promise((resolve) => setTimeout(resolve, ms));
    const sql = postgres(
      relayed(await postgresUrl(), async (text) => {
        if (!armed) return;
        // The first try's BEGIN and statements slow (it has its connection
        // at 0.5 s, refused as stale at 1.1 s, past the bound on getting
        // one), the second try's BEGIN slower still: the first try's bound
        // on its answers runs out at 1.5 s, the second not begun.
        if (/^Q.*begin isolation/is.test(text)) {
          await sleep(++begins === 1 ? 500 : 1200);
        } else if (text.includes("SET LOCAL lock_timeout")) {
          await sleep(600);
        }
      }, relay.signal),
      { max: 1, onnotice: () => {}, fetch_types: false },
    );
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
      assert.equal(await store.admit({ count: "job_1", now: 1 }), 1);
      // The admission's prepared statement returns something else now.
      await admin.unsafe(
        `ALTER TABLE "${schema}".counters ALTER COLUMN deliveries TYPE numeric`,
      );
      armed = true;
      // Before: "PostgreSQL did not answer the write within 1000ms: it may
      // have landed or not; the next read says which".
      await assert.rejects(
        store.admit({ count: "job_1", now: 2 }),
        /^Error: PostgreSQL gave the store no connection within 1000ms: the pool is busy, or the server is unreachable; nothing was written, so try again$/,
      );
      assert.equal(begins, 2, "the write went again once");
      // The second try, begun late, rolls back: nothing of it lands.
      await sleep(1500);
      armed = false;
      const [row] = await admin.unsafe(
        `SELECT deliveries::int AS n FROM "${schema}".counters`,
      );
      assert.equal(row?.n, 1);
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      await sql.end({ timeout: 1 });
      relay.abort();
    }
  }),
});
