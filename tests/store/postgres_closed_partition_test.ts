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
import net from "node:net";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { relayUrl } from "../_relay_url.ts";

/** The store's bound here (`connectionWaitMs`, and the socket's). */
const BOUND_MS = 1_000;

/**
 * A relay to `target` that, once `armed`, forwards the server's answers up
 * to the ReadyForQuery after its first ErrorResponse, then stops
 * forwarding and reading both ways on every connection, its sockets open;
 * connections made after are accepted and never forwarded. `replace()`
 * forwards new connections again (the held ones stay silent).
 */
async function blackHole(target: string) {
  const held = new Set<net.Socket>();
  let holding = false;
  let armed = false;
  const hold = (socket: net.Socket) => {
    socket.pause();
    held.add(socket);
  };
  const relay = net.createServer((client) => {
    client.on("error", () => {});
    if (holding) return hold(client);
    const { hostname, port } = new URL(target);
    const server = net.connect(Number(port), hostname);
    server.on("error", () => {});
    server.on("close", () => client.destroy());
    client.on("close", () => server.destroy());
    client.on("data", (bytes: Uint8Array) => {
      if (!held.has(client)) server.write(bytes);
    });
    let pending = new Uint8Array(0);
    let failed = false;
    server.on("data", (bytes: Uint8Array) => {
      if (held.has(server)) return;
      if (!armed) return void client.write(bytes);
      const all = new Uint8Array(pending.length + bytes.length);
      all.set(pending);
      all.set(bytes, pending.length);
      let at = 0;
      while (at + 5 <= all.length) {
        const end = at + 1 + new DataView(all.buffer, at + 1, 4).getUint32(0);
        if (end > all.length) break;
        failed ||= all[at] === 0x45; // 'E'
        if (all[at] === 0x5a && failed) { // 'Z'
          client.write(all.subarray(pending.length, end));
          armed = false;
          holding = true;
          for (const socket of [client, server]) hold(socket);
          return;
        }
        at = end;
      }
      client.write(bytes);
      pending = all.subarray(at);
    });
  });
  return {
    url: await relayUrl(relay, target),
    arm: () => void (armed = true),
    replace: () => void (holding = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of held) socket.destroy();
        relay.close(() => resolve());
      }),
  };
}

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
