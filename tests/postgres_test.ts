/**
 * The PostgreSQL harness of the suites (`tests/_postgres.ts`): what its
 * clients leave behind once a test ended them.
 */
import assert from "node:assert/strict";
import { connect, postgresAvailable, postgresUrl } from "./_postgres.ts";

const ignore = !postgresAvailable;

// The server is a process of the run, started on first use: here, not in a
// test that ends its own client.
Deno.test({
  name: "connect(): the server is up",
  ignore,
  fn: async () => void await postgresUrl(),
});

// postgres.js 3.4.9's sql.end() waits for the socket of an idle connection
// to close, but only for the Terminate of a busy one (a query running, or
// the connection still opening): that socket closes after end() answered,
// and so after the test, if the test ended then. Whatever the connection
// holds until its close then outlives the test, and the op sanitizer
// (deno.json) fails it, or the test after it. Under load a store's write
// often meets this: it reserves a connection, the pool starts opening one
// for it, another is handed back first and served it, and the one opening
// is still opening when the test ends the client.

Deno.test({
  name:
    "connect()'s client, ended while a connection of its own is still opening, leaves no timer behind",
  ignore,
  async fn() {
    const sql = await connect(2);
    try {
      await sql`SELECT 1`;
      const held = await sql.reserve();
      // No connection is free: the pool opens its second for this one.
      const waiting = sql.reserve();
      // The first, handed back at once, serves it; the second still opens.
      held.release();
      (await waiting).release();
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name:
    "connect()'s client, ended while a query runs, answers the query and leaves no timer behind",
  ignore,
  async fn() {
    const sql = await connect(2);
    try {
      await sql`SELECT 1`;
      // Handed to the open connection before the end, which waits for it.
      const running = sql`SELECT pg_sleep(0.1)::text AS slept`.execute();
      const ended = sql.end();
      const [row] = await running;
      assert.equal(row?.slept, "");
      await ended;
    } finally {
      await sql.end();
    }
  },
});
