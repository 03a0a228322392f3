/**
 * PostgresStore's cancel of a read past `connectionWaitMs`, on a real
 * server, when the server's address refuses new connections (a failover,
 * a restart) while the read's own connection stands: the cancel opens a
 * connection of its own, which is refused. postgres.js 3.4.9 drops the
 * promise of that cancel (`query.cancel()` returns `null`), so its refusal
 * was an unhandled rejection, which ends a Deno or Node process; the store
 * now holds that promise itself, in a process of any kind, not only under
 * `main.ts`'s socket.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "PostgresStore: a read cancelled at connectionWaitMs while the server's address refuses new connections fails, and leaves no unhandled rejection",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    await new PostgresStore(admin, { schema }).migrate();
    const target = new URL(await postgresUrl());
    // A relay whose listener closes (its port then refuses) while the
    // connections open through it go on.
    const sockets: net.Socket[] = [];
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      sockets.push(client, upstream);
      client.on("error", () => {});
      upstream.on("error", () => {});
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) =>
      relay.listen(0, "127.0.0.1", () => resolve())
    );
    const via = new URL(target.href);
    via.port = String((relay.address() as net.AddressInfo).port);
    const sql = postgres(via.href, { max: 2, onnotice: () => {} });
    const store = new PostgresStore(sql, { schema, connectionWaitMs: 500 });
    const unhandled: string[] = [];
    const onUnhandled = (event: PromiseRejectionEvent) => {
      unhandled.push(String(event.reason));
      event.preventDefault();
    };
    globalThis.addEventListener("unhandledrejection", onUnhandled);
    try {
      await store.createIntent({ id: "a", state: "authorized" });
      let locked!: () => void;
      const held = new Promise<void>((resolve) => locked = resolve);
      const lock = admin.begin(async (tx) => {
        await tx.unsafe(
          `LOCK TABLE "${schema}".intents IN ACCESS EXCLUSIVE MODE`,
        );
        locked();
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      });
      await held;
      relay.close(); // new connections refused from here on
      await assert.rejects(
        store.getIntent("a"),
        /did not answer the store's read within 500ms/,
      );
      await lock;
      // The cancel's refusal comes once its connection is tried.
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(
        unhandled,
        [],
        "an unhandled rejection would end the process",
      );
    } finally {
      globalThis.removeEventListener("unhandledrejection", onUnhandled);
      store.close();
      for (const socket of sockets) socket.destroy();
      await sql.end({ timeout: 1 });
      await admin.end();
    }
  }),
});
