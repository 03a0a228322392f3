/**
 * PostgresStore on a role (or database, or connection) whose
 * `synchronous_commit` is `off`, a common tuning for speed: PostgreSQL then
 * answers a `COMMIT` before its WAL is on disk, and a server crash in the
 * next moments (up to 3 × `wal_writer_delay`) loses it. A write-ahead the
 * store answered as landed, lost so after the relayer sent, left the intent
 * `authorized` with nothing on record of the send: the next delivery sent
 * the payment again, on a record that says nothing may have left. The
 * store's writes commit synchronously whatever the session's setting, as
 * they run at READ COMMITTED whatever its default level.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createRelayer, type Intent } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { isTypeFetchLost, PostgresStore } from "../../store/postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

for (const fetchTypes of [true, false]) {
  Deno.test({
    name: `PostgresStore${
      fetchTypes ? "" : " on a client made with fetch_types: false"
    } keeps a send's write-ahead and record it answered as landed through a server crash, though the role's synchronous_commit is off, so the next delivery does not send again`,
    ignore: !postgresAvailable,
    fn: timeout(60_000, async () => {
      // A server of the test's own, crashed below; its own default is
      // synchronous_commit = on, and its WAL writer flushes only every 10 s,
      // so a commit not flushed at COMMIT stays in memory until the crash.
      const server = await startPostgres({ durable: true });
      const admin = postgres(server.url, { max: 1, onnotice: () => {} });
      const schema = "relayer";
      let sql: postgres.Sql | undefined;
      let store: PostgresStore | undefined;
      // A crash under a client: its type query's rejection is no one's.
      const lost = (event: PromiseRejectionEvent) => {
        if (isTypeFetchLost(event.reason)) event.preventDefault();
      };
      globalThis.addEventListener("unhandledrejection", lost);
      try {
        await admin.unsafe(`ALTER SYSTEM SET wal_writer_delay = '10s'`);
        await admin.unsafe(`SELECT pg_reload_conf()`);
        const owner = new PostgresStore(admin, { schema });
        await owner.migrate();
        await owner.createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        });
        // The service's client: its sessions as `ALTER ROLE … SET
        // synchronous_commit = off` makes them.
        sql = postgres(server.url, {
          max: 2,
          onnotice: () => {},
          fetch_types: fetchTypes,
          connection: { synchronous_commit: "off" },
          max_lifetime: null,
        });
        store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
        const sent: Intent[] = [];
        const relayer = createRelayer({
          store,
          sender: {
            send: (intent) => {
              sent.push(intent);
              return Promise.resolve({ txHash: `0xabc${sent.length}` });
            },
            receipt: () => Promise.resolve("pending" as const),
          },
        });
        const first = await relayer.deliver(
          { intentId: "pi_0001", kind: "settle" },
          1,
        );
        assert.equal(first.action, "retry"); // sent; its receipt pending
        assert.equal(sent.length, 1);
        await server.halt("immediate");
        await server.resume();
        const after = await new PostgresStore(admin, { schema }).getIntent(
          "pi_0001",
        );
        // Before: "authorized", no broadcast, mayHaveSent false.
        assert.deepEqual(
          [after?.state, after?.lastBroadcast?.txHash, after?.mayHaveSent],
          ["settling", "0xabc1", true],
        );
        await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 2)
          .catch(() => {});
        assert.equal(sent.length, 1, "the payment was sent again");
      } finally {
        store?.close();
        await sql?.end({ timeout: 0 }).catch(() => {});
        await admin.end({ timeout: 0 }).catch(() => {});
        await server.stop();
        globalThis.removeEventListener("unhandledrejection", lost);
      }
    }),
  });
}

Deno.test({
  name:
    "moveKvToPostgres() keeps what it answered as moved through a server crash, though the role's synchronous_commit is off",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const server = await startPostgres({ durable: true });
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    const kv = await Deno.openKv(":memory:");
    let sql: postgres.Sql | undefined;
    try {
      await admin.unsafe(`ALTER SYSTEM SET wal_writer_delay = '10s'`);
      await admin.unsafe(`SELECT pg_reload_conf()`);
      await new PostgresStore(admin, { schema: "relayer" }).migrate();
      const source = new KvStore(kv);
      for (let i = 1; i <= 3; i++) {
        await source.createIntent({
          id: `pi_000${i}`,
          state: "authorized",
          hold: "pending",
        });
      }
      sql = postgres(server.url, {
        max: 1,
        onnotice: () => {},
        connection: { synchronous_commit: "off" },
      });
      const report = await moveKvToPostgres(kv, sql);
      assert.equal(report.moved.intents, 3);
      await server.halt("immediate");
      await server.resume();
      // Before: 0, the schema empty after the move said it was done.
      const [{ count }] = await admin<[{ count: number }]>`
        SELECT count(*)::int AS count FROM relayer.intents`;
      assert.equal(count, 3, "the move's commit was lost in the crash");
    } finally {
      kv.close();
      await sql?.end({ timeout: 0 }).catch(() => {});
      await admin.end({ timeout: 0 }).catch(() => {});
      await server.stop();
    }
  }),
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name: `PostgresStore${
      fetchTypes ? "" : " on a client made with fetch_types: false"
    } keeps a role's synchronous_commit = local: with the synchronous standby gone, its writes answer, as the role chose, instead of each waiting for it`,
    ignore: !postgresAvailable,
    fn: timeout(60_000, async () => {
      const server = await startPostgres({ durable: true });
      const admin = postgres(server.url, { max: 1, onnotice: () => {} });
      const schema = "relayer";
      // The service's sessions as `ALTER ROLE … SET synchronous_commit =
      // local` makes them: flushed to the primary's disk at COMMIT (a
      // crash keeps them), never waiting for a synchronous standby.
      const sql = postgres(server.url, {
        max: 2,
        onnotice: () => {},
        fetch_types: fetchTypes,
        connection: { synchronous_commit: "local" },
      });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1500,
      });
      try {
        await new PostgresStore(admin, { schema }).migrate();
        // A synchronous standby that is gone (it never connects).
        await admin.unsafe(
          `ALTER SYSTEM SET synchronous_standby_names = 'gone'`,
        );
        await admin.unsafe(`SELECT pg_reload_conf()`);
        await new Promise((resolve) => setTimeout(resolve, 200));
        // Before: "PostgreSQL did not answer the write within 1500ms: it
        // may have landed or not", the session waiting for the standby.
        await store.createIntent({ id: "pi_0001", state: "authorized" });
        const [{ waiting }] = await admin<[{ waiting: number }]>`
          SELECT count(*)::int AS waiting FROM pg_stat_activity
          WHERE wait_event = 'SyncRep'`;
        assert.equal(waiting, 0, "a write waits for the standby");
        assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
      } finally {
        store.close();
        await sql.end({ timeout: 0 }).catch(() => {});
        await admin.end({ timeout: 0 }).catch(() => {});
        await server.stop();
      }
    }),
  });
}
