/**
 * PostgresStore's writes waiting for a connection of a postgres.js pool
 * when one of its connections closes: the store asks again after each
 * close (postgres.js 3.4.9 loses a `reserve()` it hands to the closed
 * connection, porsager/postgres#1195), and a connection that comes for an
 * ask no longer needed goes back to the pool at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  betweenReadAndFlight,
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

/** `promise`'s value, or "no answer" after `ms`. */
async function within<T>(ms: number, promise: Promise<T>) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<"no answer">((resolve) => {
        timer = setTimeout(() => resolve("no answer"), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A store on a fresh schema over a pool of one connection; `between` runs
 * after each write's read, before its `reserve()`.
 */
async function oneConnection(
  body: (
    store: PostgresStore,
    sql: postgres.Sql,
    admin: postgres.Sql,
    hook: { between?: () => Promise<void> },
  ) => Promise<void>,
) {
  const admin = await connect(2);
  const schema = freshSchema();
  const sql = postgres(await postgresUrl(), {
    max: 1,
    onnotice: () => {},
    max_lifetime: null,
  });
  try {
    await new PostgresStore(admin, { schema }).migrate();
    const hook: { between?: () => Promise<void> } = {};
    const store = new PostgresStore(
      betweenReadAndFlight(sql, async () => {
        const between = hook.between;
        delete hook.between;
        await between?.();
      }),
      { schema, connectionWaitMs: 8_000 },
    );
    await body(store, sql, admin, hook);
  } finally {
    await sql.end({ timeout: 1 });
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

/** Ends the server's side of `held` once the write has queued its wait. */
async function endHeld(admin: postgres.Sql, held: postgres.ReservedSql) {
  const [row] = await held`SELECT pg_backend_pid() AS pid`;
  await new Promise((resolve) => setTimeout(resolve, 100));
  await admin`SELECT pg_terminate_backend(${row!.pid as number})`;
}

Deno.test({
  name:
    "PostgresStore asks again after every close of the pool's connections, not only the first: each of two writes, waiting when the connection is ended, gets the one that opens again",
  ignore: !postgresAvailable,
  fn: timeout(30_000, () =>
    oneConnection(async (store, sql, admin, hook) => {
      for (const id of ["pi_1", "pi_2"]) {
        const created = await store.createIntent({ id, hold: "pending" });
        let held: postgres.ReservedSql | undefined;
        hook.between = async () => {
          held = await sql.reserve();
        };
        const write = store.transition(id, {
          from: "created",
          to: "authorized",
          version: created.version,
          at: 1,
        }).then(() => "written", (error: Error) => error.message);
        while (held === undefined) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await endHeld(admin, held);
        assert.equal(await within(3_000, write), "written", id);
      }
    })),
});

Deno.test({
  name:
    "PostgresStore releases at once a connection that comes for a write's second ask once the first was served: a close that lost no wait leaves the pool whole",
  ignore: !postgresAvailable,
  fn: timeout(30_000, () =>
    oneConnection(async (store, sql, admin, hook) => {
      const created = await store.createIntent({ id: "pi_1", hold: "pending" });
      let held: postgres.ReservedSql | undefined;
      let ahead: Promise<unknown> | undefined;
      hook.between = async () => {
        held = await sql.reserve();
        // Another caller's query, queued first: the one handed to the
        // connection that closes, so the write's first ask is not lost.
        ahead = sql`SELECT 1`.execute();
      };
      const write = store.transition("pi_1", {
        from: "created",
        to: "authorized",
        version: created.version,
        at: 1,
      }).then(() => "written", (error: Error) => error.message);
      while (held === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await endHeld(admin, held);
      assert.equal(await within(3_000, write), "written");
      await ahead;
      // The second ask's connection went back: the pool of one answers.
      assert.deepEqual(
        await within(3_000, sql`SELECT 1 AS one`.then((rows) => rows[0])),
        { one: 1 },
      );
      assert.equal(
        await within(3_000, store.admit({ count: "pi_1/settle", now: 1 })),
        1,
      );
    })),
});

Deno.test({
  name:
    "PostgresStore chains postgres.js's onclose once per client, however many writes reserve a connection: the chain does not grow with each write, and the caller's onclose is called once per close",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    let closes = 0;
    const sql = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      onclose: () => void closes++,
    });
    const options = sql.options as { onclose?: unknown };
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const store = new PostgresStore(sql, { schema });
      const other = new PostgresStore(sql, { schema });
      await store.admit({ count: "pi_1/settle", now: 1 });
      const chained = options.onclose;
      for (let n = 2; n <= 20; n++) {
        await (n % 2 === 0 ? store : other).admit({
          count: "pi_1/settle",
          now: n,
        });
      }
      assert.equal(options.onclose, chained, "the chain grew with the writes");
      const [row] = await sql`SELECT pg_backend_pid() AS pid`;
      await admin`SELECT pg_terminate_backend(${row!.pid as number})`;
      while (closes === 0) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.equal(await store.admit({ count: "pi_1/settle", now: 21 }), 21);
      assert.equal(closes, 1);
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});
