/**
 * What a close of a pool's connection does to a `reserve()` waiting in
 * postgres.js 3.4.9's queue, on a real server: the cases
 * `store/_reserve_turns.ts` rests on. The close hands the head of the
 * queue to the closed connection to open it again (its `initial`,
 * `src/index.js` `onclose`). A `reserve()` handed so is never handed a
 * connection: once the connection is open it is dropped, and never
 * settles (porsager/postgres#1195); if the connection fails to open, or
 * opens with the server's goodbye kept from the session that ended, it is
 * rejected. A `reserve()` behind another request stays queued, and is
 * handed a connection later.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  connect,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { refusingRelay } from "../_refusing_relay.ts";
import { timeout } from "../_timeout.ts";

/** How a promise settled within `ms`: its value, its error, or "pending". */
async function settled<T>(
  promise: Promise<T>,
  ms: number,
): Promise<{ value: T } | { error: unknown } | "pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise.then((value) => ({ value }), (error) => ({ error })),
      new Promise<"pending">((resolve) => {
        timer = setTimeout(() => resolve("pending"), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A client of one connection (through `url`), that connection reserved
 * and its backend's pid, then `body`; the client ended after.
 */
async function oneHeld(
  url: string,
  body: (
    sql: postgres.Sql,
    held: postgres.ReservedSql,
    pid: number,
    admin: postgres.Sql,
  ) => Promise<void>,
) {
  const admin = await connect(1);
  const sql = postgres(url, { max: 1, onnotice: () => {}, max_lifetime: null });
  try {
    const held = await sql.reserve();
    const [row] = await held`SELECT pg_backend_pid() AS pid`;
    await body(sql, held, row!.pid as number, admin);
  } finally {
    await sql.end({ timeout: 1 });
    await admin.end();
  }
}

serverUpFirst();

Deno.test({
  name:
    "postgres.js 3.4.9: a reserve() at the head of the queue when the pool's connection is ended never settles, and the connection opened again serves the pool",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    await oneHeld(await postgresUrl(), async (sql, _held, pid, admin) => {
      const waiting = sql.reserve();
      await new Promise((resolve) => setTimeout(resolve, 50));
      await admin`SELECT pg_terminate_backend(${pid})`;
      // The connection opened again (a query answers on it), and the
      // reserve() it was opened for was not handed it.
      assert.deepEqual(
        await settled(sql`SELECT 1 AS one`.then((rows) => rows[0]), 3_000),
        { value: { one: 1 } },
      );
      assert.equal(await settled(waiting, 500), "pending");
    });
  }),
});

Deno.test({
  name:
    "postgres.js 3.4.9: a reserve() behind a query when the pool's connection is ended stays queued, and is handed the connection opened again once that query is answered",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    await oneHeld(await postgresUrl(), async (sql, _held, pid, admin) => {
      const ahead = sql`SELECT 1 AS one`.then((rows) => rows[0]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const waiting = sql.reserve();
      await new Promise((resolve) => setTimeout(resolve, 50));
      await admin`SELECT pg_terminate_backend(${pid})`;
      assert.deepEqual(await settled(ahead, 3_000), { value: { one: 1 } });
      const handed = await settled(waiting, 3_000);
      assert.ok(handed !== "pending" && "value" in handed, String(handed));
      const [row] = await handed.value`SELECT pg_backend_pid() AS pid`;
      assert.notEqual(row!.pid, pid);
      handed.value.release();
    });
  }),
});

Deno.test({
  name:
    "postgres.js 3.4.9: a reserve() at the head of the queue when the pool's connection is ended under a query is rejected with the server's goodbye, as the connection opens again",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    await oneHeld(await postgresUrl(), async (sql, held, pid, admin) => {
      const asleep = held`SELECT pg_sleep(5)`.catch((e: Error) => e);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const waiting = sql.reserve();
      await new Promise((resolve) => setTimeout(resolve, 50));
      await admin`SELECT pg_terminate_backend(${pid})`;
      const answer = await settled(waiting, 3_000);
      assert.ok(answer !== "pending" && "error" in answer, String(answer));
      assert.equal((answer.error as { code?: string }).code, "57P01");
      assert.match(String(await asleep), /CONNECTION_CLOSED|terminat/);
      // The connection is open again, and serves the pool.
      assert.deepEqual(
        await settled(sql`SELECT 1 AS one`.then((rows) => rows[0]), 3_000),
        { value: { one: 1 } },
      );
    });
  }),
});

Deno.test({
  name:
    "postgres.js 3.4.9: a reserve() at the head of the queue when the pool's connection is ended is rejected when that connection cannot open again",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const relay = await refusingRelay(await postgresUrl());
    try {
      await oneHeld(relay.url, async (sql, _held, pid, admin) => {
        const waiting = sql.reserve();
        await new Promise((resolve) => setTimeout(resolve, 50));
        relay.refuse();
        await admin`SELECT pg_terminate_backend(${pid})`;
        const answer = await settled(waiting, 3_000);
        assert.ok(answer !== "pending" && "error" in answer, String(answer));
        assert.equal((answer.error as { code?: string }).code, "ECONNREFUSED");
      });
    } finally {
      relay.close();
    }
  }),
});
