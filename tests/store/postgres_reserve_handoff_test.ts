/**
 * PostgresStore's writes on a real server, through a relay that repeats
 * the ReadyForQuery which hands a connection to the first waiting write:
 * the ordering under which postgres.js 3.4.9 handed one connection to two
 * `reserve()`s waiting at once (the answer of a query sent ahead on it
 * read before the first `reserve()` resumed and marked it reserved); also
 * after a close of the pool's connection that left the first write's
 * `reserve()` queued.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  betweenReadAndFlight,
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { counting } from "./_counted_reserves.ts";
import { readyAgainRelay } from "./_ready_again_relay.ts";

/** Asserts each intent of `ids` is on record in `state`, read directly. */
async function assertStates(
  direct: postgres.Sql,
  schema: string,
  ids: readonly string[],
  state: string,
): Promise<void> {
  for (const id of ids) {
    const [row] = await direct.unsafe(
      `SELECT state FROM "${schema}".intents WHERE id = $1`,
      [id],
    );
    assert.equal(row?.state, state, id);
  }
}

/** What {@linkcode throughRelay} hands its body. */
interface Relayed {
  /** A client straight to the server, for set-up and reads. */
  readonly direct: postgres.Sql;
  /** A fresh schema, migrated. */
  readonly schema: string;
  /** The relay between `sql` and the server. */
  readonly relay: Awaited<ReturnType<typeof readyAgainRelay>>;
  /** A client of one connection through the relay. */
  readonly sql: postgres.Sql;
}

/**
 * Runs `body` with a fresh migrated schema and a client of one connection
 * through a relay that repeats a ReadyForQuery when armed; ends the
 * clients, closes the relay and drops the schema after.
 */
async function throughRelay(
  slot: number,
  body: (relayed: Relayed) => Promise<void>,
): Promise<void> {
  const direct = await connect(slot);
  const schema = freshSchema();
  const relay = await readyAgainRelay(await postgresUrl());
  const sql = postgres(relay.url, {
    max: 1,
    onnotice: () => {},
    max_lifetime: null,
  });
  try {
    await new PostgresStore(direct, { schema }).migrate();
    await body({ direct, schema, relay, sql });
  } finally {
    await sql.end({ timeout: 1 });
    relay.close();
    await direct.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await direct.end();
  }
}

Deno.test({
  name:
    "PostgresStore: two writes waiting for the pool's one connection, handed on as a pipelined answer is read before the first resumed, each get a session of their own and land",
  ignore: !postgresAvailable,
  fn: timeout(
    30_000,
    () =>
      throughRelay(1, async ({ direct, schema, relay, sql }) => {
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 2_000,
        });
        await sql`SELECT 1`;
        // The pool's one connection busy: both writes wait in its queue.
        const busy = sql`SELECT pg_sleep(0.3)`.execute();
        await new Promise((resolve) => setTimeout(resolve, 50));
        relay.arm();
        const writes = ["pi_a", "pi_b"].map((id) =>
          store.createIntent({ id }).then(
            (intent) => intent.state,
            (e: Error) => e.message,
          )
        );
        await busy;
        assert.deepEqual(await Promise.all(writes), ["created", "created"]);
        assert.equal(relay.repeated, 1);
        await assertStates(direct, schema, ["pi_a", "pi_b"], "created");
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore: a write whose reserve() a close of the pool's connection left queued (a query ahead of it) keeps its turn until it is handed the connection opened again: the next write's reserve() does not wait beside it, and both land when that hand-off is read twice",
  ignore: !postgresAvailable,
  fn: timeout(
    30_000,
    () =>
      throughRelay(2, async ({ direct, schema, relay, sql }) => {
        const { client, seen } = counting(sql);
        // Each write stops between its read and its reserve(): the second's
        // until `go`, the first's while a caller reserves the pool's one
        // connection and queues a query, which a close hands that
        // connection to (the first write's reserve() behind it).
        let reads = 0;
        let go = () => {};
        const gate = new Promise<void>((resolve) => go = resolve);
        let held: postgres.ReservedSql | undefined;
        let ahead: Promise<unknown> | undefined;
        const store = new PostgresStore(
          betweenReadAndFlight(client, async () => {
            if (++reads === 1) return await gate;
            if (reads > 2) return;
            held = await sql.reserve();
            ahead = sql`SELECT 'ahead of the write' AS ahead`.then((rows) =>
              rows[0]
            );
          }),
          { schema, connectionWaitMs: 4_000 },
        );
        const pi1 = await store.createIntent({ id: "pi_1", hold: "pending" });
        const pi2 = await store.createIntent({ id: "pi_2", hold: "pending" });
        const authorize = (id: string, version: string) =>
          store.transition(id, {
            from: "created",
            to: "authorized",
            version,
            at: 1,
          }).then(() => "written", (e: Error) => e.message);
        seen.most = 0;
        const second = authorize("pi_2", pi2.version);
        while (reads < 1) await new Promise((r) => setTimeout(r, 5));
        const first = authorize("pi_1", pi1.version);
        while (held === undefined) await new Promise((r) => setTimeout(r, 5));
        await new Promise((resolve) => setTimeout(resolve, 50));
        go();
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.equal(seen.waiting, 1);
        const [row] = await held`SELECT pg_backend_pid() AS pid`;
        // The query ahead's answer, on the connection opened again, hands
        // that connection to the first write's reserve(): read twice.
        relay.arm("ahead of the write");
        await direct`SELECT pg_terminate_backend(${row!.pid as number})`;
        assert.deepEqual(await Promise.all([first, second]), [
          "written",
          "written",
        ]);
        assert.deepEqual(await ahead, { ahead: "ahead of the write" });
        assert.equal(relay.repeated, 1);
        assert.equal(seen.most, 1, `${seen.most} reserve()s waited at once`);
        await assertStates(direct, schema, ["pi_1", "pi_2"], "authorized");
      }),
  ),
});
