/**
 * A connection the store closes behind a partition: a write whose own
 * statement failed, whose statements behind it then went unanswered (the
 * network dropped everything after the failure's answer, the relay's
 * sockets left open and unread both ways). The store answers the write
 * within its bound, and closes the connection (postgres.js's
 * `terminate()`: a goodbye, then the socket ended), whose place in the
 * pool is freed only when the socket closes. Through the service's socket
 * (`answeredSocket`) that close must come within the bound of the write's
 * answer, not a bound later, and the pool serves again once the network
 * to the server is back.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { blackHole } from "../_black_hole.ts";

/** The store's bound here (`connectionWaitMs`, and the socket's). */
const BOUND_MS = 1_000;

Deno.test({
  name:
    "a connection the store closes behind a partition leaves the pool within the bound, and the pool serves again",
  ignore: !postgresAvailable,
  async fn() {
    const admin = await connect(1);
    const schema = freshSchema();
    await new PostgresStore(admin, { schema }).migrate();
    // A write that fails on its own statement, inside its flight.
    await admin.unsafe(
      `CREATE FUNCTION "${schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.id = 'refused' THEN RAISE EXCEPTION 'refused here'; END IF; RETURN NEW; END $$`,
    );
    await admin.unsafe(
      `CREATE TRIGGER refuse BEFORE INSERT ON "${schema}".intents FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse()`,
    );
    const relay = await blackHole(await postgresUrl());
    const socket = answeredSocket(BOUND_MS);
    const closes: number[] = [];
    const sql = postgres(relay.url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      socket,
      onclose: () => void closes.push(performance.now()),
    } as postgres.Options<Record<string, never>>);
    const store = new PostgresStore(sql, {
      schema,
      connectionWaitMs: BOUND_MS,
    });
    try {
      await store.createIntent({ id: "pi_1", state: "authorized" });
      relay.arm();
      const start = performance.now();
      await assert.rejects(
        store.createIntent({ id: "refused", state: "authorized" }),
        /refused here/,
      );
      const answered = performance.now() - start;
      assert.ok(answered < BOUND_MS * 1.5, `answered in ${answered}ms`);
      // The connection's close, as the store closed it.
      for (let waited = 0; closes.length === 0 && waited < 3 * BOUND_MS;) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        waited += 50;
      }
      const closed = closes[0] === undefined ? Infinity : closes[0] - start;
      assert.ok(
        closed < BOUND_MS * 1.5,
        `the connection left the pool ${
          Math.round(closed)
        }ms after the write began`,
      );
      relay.replace();
      let read: unknown = undefined;
      for (let tries = 0; tries < 5 && read === undefined; tries++) {
        read = await store.getIntent("pi_1").catch(() => undefined);
      }
      assert.equal(
        (read as { state?: string } | undefined)?.state,
        "authorized",
      );
    } finally {
      store.close();
      await sql.end({ timeout: 0 });
      await relay.close();
      await socket.closed(3 * BOUND_MS);
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  },
});
