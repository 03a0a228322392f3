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
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { refusingRelay } from "../_refusing_relay.ts";
import { timeout } from "../_timeout.ts";

Deno.test({
  name:
    "PostgresStore: a read cancelled at connectionWaitMs while the server's address refuses new connections fails, and leaves no unhandled rejection",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const admin = await connect(2);
    const schema = freshSchema();
    await new PostgresStore(admin, { schema }).migrate();
    const relay = await refusingRelay(await postgresUrl());
    const sql = postgres(relay.url, { max: 2, onnotice: () => {} });
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
      relay.refuse(); // new connections refused from here on
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
      relay.close();
      await sql.end({ timeout: 1 });
      await admin.end();
    }
  }),
});
