/**
 * `PostgresStore.migrate()` called by a library caller whose client has no
 * free connection (its pool held by the caller's own `reserve()`): it
 * fails after its `waitMs` with what to do, not waits for ever, and a
 * `migrate()` once the connection is free migrates.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";
import { inTime, timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;

serverUpFirst();

Deno.test({
  name:
    "PostgresStore.migrate() with no free connection fails after its waitMs, saying what to do, and migrates once one is free",
  ignore,
  fn: timeout(20_000, async () => {
    const sql = await connect(1);
    const schema = freshSchema();
    const store = new PostgresStore(sql, { schema });
    let held: Awaited<ReturnType<typeof sql.reserve>> | undefined = await sql
      .reserve();
    try {
      const started = Date.now();
      // Before: the option unread, no answer until the connection was
      // handed back ("the migration: no answer within 3000ms").
      await inTime(
        assert.rejects(store.migrate({ waitMs: 300 }), (error: Error) => {
          assert.equal(
            error.message,
            `Cannot migrate the PostgreSQL schema "${schema}" as nothing answered within 300ms: the client's connections may all be busy (a query or a reserve() of the caller's holds them), the server may not answer (is it a PostgreSQL server this process can reach?), or the migration waits on another session's lock; call migrate() again once that is over (its waitMs option sets this bound, 20000 by default)`,
          );
          return true;
        }),
        3_000,
        "the migration",
      );
      assert.ok(Date.now() - started < 2_000);
      held.release();
      held = undefined;
      // The connection free: the migration runs (the first's too, left to
      // run when the connection came).
      await inTime(store.migrate({ waitMs: 5_000 }), 6_000, "the migration");
      await store.createIntent({ id: "pi_1", hold: "pending" });
      assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
    } finally {
      held?.release();
      store.close();
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() without waitMs bounds its wait at 20000ms, as its error says, not at none or another",
  ignore,
  fn: timeout(20_000, async () => {
    const sql = await connect(1);
    const schema = freshSchema();
    const store = new PostgresStore(sql, { schema });
    let held: Awaited<ReturnType<typeof sql.reserve>> | undefined = await sql
      .reserve();
    // The runtime's own timers, each delay given them seen on its way:
    // waiting out the 20 s bound itself would cost the run 20 s.
    const real = globalThis.setTimeout;
    const delays: unknown[] = [];
    globalThis.setTimeout = ((...args: Parameters<typeof real>) => {
      delays.push(args[1]);
      return real(...args);
    }) as typeof real;
    let migrating: Promise<void>;
    try {
      migrating = store.migrate();
    } finally {
      globalThis.setTimeout = real;
    }
    let settled = false;
    migrating.then(() => settled = true, () => settled = true);
    try {
      // Its bound armed as the call began, the connection still held.
      assert.ok(delays.includes(20_000), `delays: ${delays.join(", ")}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(settled, false);
      held.release();
      held = undefined;
      await inTime(migrating, 6_000, "the migration");
      await store.createIntent({ id: "pi_1", hold: "pending" });
    } finally {
      held?.release();
      store.close();
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }
  }),
});

Deno.test("PostgresStore.migrate() refuses a waitMs that is not a whole number of milliseconds from 1 to 2147483647, sending nothing", async () => {
  // Never connects: the refusal comes first.
  const sql = (await import("postgres")).default(
    "postgres://relayer:relayer@127.0.0.1:1/relayer",
    { max: 1, connect_timeout: 1 },
  );
  const store = new PostgresStore(sql);
  try {
    for (const waitMs of [0, -1, 1.5, Infinity, NaN, 2 ** 31]) {
      await assert.rejects(
        store.migrate({ waitMs }),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          assert.equal(
            error.message,
            `Cannot migrate as 'waitMs' must be a whole number of milliseconds from 1 to 2147483647: current value is ${waitMs}`,
          );
          return true;
        },
      );
    }
  } finally {
    store.close();
    await sql.end();
  }
});

Deno.test("PostgresStore.migrate() refuses options that are no object, or name one it does not read (a misspelt waitMs would wait its default in silence), sending nothing", async () => {
  // Never connects: the refusal comes first.
  const sql = (await import("postgres")).default(
    "postgres://relayer:relayer@127.0.0.1:1/relayer",
    { max: 1, connect_timeout: 1 },
  );
  const store = new PostgresStore(sql);
  try {
    for (
      const [options, message] of [
        [
          { waitMS: 60_000 },
          `Cannot migrate as "waitMS" is not one of its options (waitMs): check its spelling`,
        ],
        [
          null,
          "Cannot migrate as its options must be an object such as { waitMs: 20000 }: current value is null",
        ],
        [
          60_000,
          "Cannot migrate as its options must be an object such as { waitMs: 20000 }: current value is number",
        ],
      ] as const
    ) {
      await assert.rejects(
        store.migrate(options as never),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          assert.equal(error.message, message);
          return true;
        },
      );
    }
  } finally {
    store.close();
    await sql.end();
  }
});
