/**
 * PostgresStore on a client made with `fetch_types: false` writes through
 * `sql.begin()`: when postgres.js's own `ROLLBACK` of a failed write does
 * not run (a cancel cuts it), the session stays inside the failed
 * transaction, and postgres.js 3.4.9 keeps the connection as that
 * transaction's for good. The store closes it, and postgres.js opens it
 * again: the next calls on a pool of one answer.
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
    "PostgresStore on a client made with fetch_types: false closes a write's connection whose ROLLBACK of postgres.js's own failed, rather than leave it kept from the pool: the next calls answer",
  ignore: !postgresAvailable,
  // The relay runs in this process, its sockets closing after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(60_000, async () => {
    const stop = new AbortController();
    const admin = await connect(1);
    const schema = freshSchema();
    let armed = false;
    let rollbacks = 0;
    // postgres.js's ROLLBACK (prepared, "rollback" its text) is sent
    // misspelt: refused before it ran, it leaves the session inside the
    // failed transaction, as a cancel that cut it does.
    // Before it, a statement of the write is sent misspelt too, so that
    // the write fails inside its transaction.
    const misspelt = (text: string, word: string, as: string) => {
      const at = text.indexOf(word);
      if (at < 0) return undefined;
      const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
      bytes.set(new TextEncoder().encode(as), at);
      return bytes;
    };
    let failed = false;
    const url = relayed(await postgresUrl(), (text) => {
      if (!armed) return Promise.resolve();
      if (!failed) {
        const bytes = misspelt(text, "ALL IMMEDIATE", "ALL IMMEDIATX");
        if (bytes !== undefined) failed = true;
        return Promise.resolve(bytes);
      }
      const bytes = misspelt(text, "rollback\u0000", "rollbakk");
      if (bytes === undefined) return Promise.resolve();
      armed = false;
      rollbacks++;
      return Promise.resolve(bytes);
    }, stop.signal);
    const sql = postgres(url, {
      max: 1,
      fetch_types: false,
      onnotice: () => {},
      max_lifetime: null,
    });
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      await store.createIntent({ id: "pi_1", state: "authorized" });
      armed = true;
      const answer = await store.createIntent({
        id: "pi_3",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.equal(rollbacks, 1, "postgres.js's ROLLBACK was sent misspelt");
      assert.ok(answer instanceof Error, "the write failed");
      assert.doesNotMatch(answer.message, /landed|written(?!;)/);
      assert.equal(await other.getIntent("pi_3"), null);
      // The pool's one connection serves the next calls.
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
      await store.createIntent({ id: "pi_2", state: "authorized" });
      assert.equal((await other.getIntent("pi_2"))?.state, "authorized");
    } finally {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      stop.abort();
    }
  }),
});
