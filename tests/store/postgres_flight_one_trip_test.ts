/**
 * PostgresStore's write is one flight: its `BEGIN`, its statements (once
 * prepared on the connection) and its `COMMIT` are all sent before the
 * server answers any of them. The option the store passes on the flight's
 * first query to learn its connection (postgres.js 3.4.9's `onexecute`)
 * must leave that so: answered falsy, postgres.js holds the statements
 * behind it until the `BEGIN` is answered, a round trip more for every
 * write.
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
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { relayed } from "./_cut.ts";

Deno.test({
  name:
    "PostgresStore sends a write's BEGIN, statements and COMMIT before the server answers any of them",
  ignore: !postgresAvailable,
  // The relay runs in this process, its sockets closing after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(60_000, async () => {
    const stop = new AbortController();
    const admin = await connect(1);
    const schema = freshSchema();
    // What the client builds (postgres.js's `debug`, as it sends each
    // query) and what reaches the server through the relay, in order.
    const events: string[] = [];
    const url = relayed(await postgresUrl(), () => {
      events.push("relayed");
      return Promise.resolve();
    }, stop.signal);
    const sql = postgres(url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      debug: (_connection: number, query: string) => {
        events.push(`sent ${query.trim().split(/\s+/)[0]}`);
      },
    });
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const store = new PostgresStore(sql, { schema });
      // The first write prepares its statements on the connection.
      await store.createIntent({ id: "pi_1", state: "authorized" });
      events.length = 0;
      await store.createIntent({ id: "pi_2", state: "authorized" });
      const begin = events.findIndex((event) => event === "sent BEGIN");
      const commit = events.findIndex((event) => event === "sent COMMIT");
      assert.ok(begin >= 0 && commit > begin, events.join(", "));
      assert.deepEqual(
        events.slice(begin, commit + 1).filter((event) => event === "relayed"),
        [],
        `the flight waited for an answer: ${events.join(", ")}`,
      );
      assert.equal(
        (await new PostgresStore(admin, { schema }).getIntent("pi_2"))?.state,
        "authorized",
      );
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      stop.abort();
    }
  }),
});
