/**
 * PostgresStore on a client made with `fetch_types: false` writes through
 * `sql.begin()`: when postgres.js's own `ROLLBACK` of a failed write, or
 * its own `COMMIT` after the store's `COMMIT AND CHAIN`, does not run (a
 * cancel cuts it), the session stays inside the transaction, and postgres.js 3.4.9 keeps the connection as that
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
import { cancelOnceRunning, relayed } from "./_cut.ts";

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

/**
 * The chunk `text` (latin1, whole messages) with the text of its Parse
 * ('P') of `from` made `to`, or `undefined` if it has none.
 */
function parseRewritten(
  text: string,
  from: string,
  to: string,
): Uint8Array | undefined {
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  for (let at = 0; at + 5 <= bytes.length;) {
    const end = at + 1 + view.getUint32(at + 1);
    if (end > bytes.length) return;
    const name = text.indexOf("\u0000", at + 5);
    if (text[at] === "P" && text.startsWith(from + "\u0000", name + 1)) {
      const body = text.slice(at + 5, name + 1) + to +
        text.slice(name + 1 + from.length, end);
      const out = new Uint8Array(bytes.length - (end - at) + 5 + body.length);
      out.set(bytes.subarray(0, at));
      out[at] = 0x50;
      new DataView(out.buffer).setUint32(at + 1, 4 + body.length);
      out.set(Uint8Array.from(body, (c) => c.charCodeAt(0)), at + 5);
      out.set(bytes.subarray(end), at + 5 + body.length);
      return out;
    }
    at = end;
  }
}

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false answers a write landed when a cancel cuts postgres.js's own COMMIT after the store's COMMIT AND CHAIN, and closes its connection rather than leave it kept from the pool: the next calls answer",
  ignore: !postgresAvailable,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(60_000, async () => {
    const NAME = `begin_commit_cut_${Deno.pid}`;
    const SLEEP = "SELECT pg_sleep(5)";
    const stop = new AbortController();
    const admin = await connect(2);
    const schema = freshSchema();
    let armed = false;
    let cancel: Promise<boolean> = Promise.resolve(false);
    // postgres.js's COMMIT (prepared on the connection's first write) put
    // behind a sleep, which a cancel cuts: its transaction, empty since
    // the store's COMMIT AND CHAIN, stays open, failed.
    const url = relayed(await postgresUrl(), (text) => {
      if (!armed) return Promise.resolve();
      const bytes = parseRewritten(text, "commit", SLEEP);
      if (bytes === undefined) return Promise.resolve();
      armed = false;
      cancel = cancelOnceRunning(admin, NAME, SLEEP);
      return Promise.resolve(bytes);
    }, stop.signal);
    const sql = postgres(url, {
      max: 1,
      fetch_types: false,
      onnotice: () => {},
      max_lifetime: null,
      connection: { application_name: NAME },
    });
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const other = new PostgresStore(admin, { schema });
      const store = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      armed = true;
      const intent = await store.createIntent({
        id: "pi_1",
        state: "authorized",
      });
      assert.ok(await cancel, "the cancel cut postgres.js's COMMIT");
      assert.equal(intent.state, "authorized");
      assert.equal((await other.getIntent("pi_1"))?.state, "authorized");
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

Deno.test({
  name:
    "PostgresStore on a client made with fetch_types: false keeps a write's connection whose ROLLBACK of postgres.js's own ran: postgres.js handed it back, and it is not closed under the call it serves next",
  ignore: !postgresAvailable,
  // The relay runs in this process, its sockets closing after the test.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: timeout(60_000, async () => {
    const stop = new AbortController();
    const admin = await connect(1);
    const schema = freshSchema();
    let armed = false;
    // A statement of the write is sent misspelt, so that the write fails
    // inside its transaction; postgres.js's ROLLBACK runs.
    const url = relayed(await postgresUrl(), (text) => {
      if (!armed) return Promise.resolve();
      const at = text.indexOf("ALL IMMEDIATE");
      if (at < 0) return Promise.resolve();
      armed = false;
      const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
      bytes.set(new TextEncoder().encode("ALL IMMEDIATX"), at);
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
      const [before] = await sql`SELECT pg_backend_pid() AS pid`;
      armed = true;
      const answer = await store.createIntent({
        id: "pi_3",
        state: "authorized",
      }).then(() => null, (error: Error) => error);
      assert.ok(answer instanceof Error, "the write failed");
      assert.equal(armed, false, "the write's statement was sent misspelt");
      assert.equal(await other.getIntent("pi_3"), null);
      // The same session serves the next calls: nothing closed it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const [after] = await sql`SELECT pg_backend_pid() AS pid`;
      assert.equal(after?.pid, before?.pid);
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
