/**
 * The move from Deno KV to PostgreSQL on a database whose settings it did
 * not choose (`ALTER DATABASE … SET`, as `ALTER ROLE … SET`): a short
 * `statement_timeout`, a `default_transaction_isolation` above read
 * committed, `session_replication_role = replica`, an
 * `idle_in_transaction_session_timeout` of 1ms. Each database is set
 * before the move's client connects (a setting reaches only sessions
 * opened after it); the KV file is a real one, opened by `Deno.openKv`.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { ConflictError } from "../../store/conflict_error.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshDatabase,
  heldAfterBegin,
  postgresAvailable,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const ignore = !postgresAvailable;
const T0 = 1_800_000_000_000;

/**
 * A KV file holding one authorized intent (`pi_0001`, its hold pending),
 * and a fresh database, migrated (schema `relayer`), then given
 * `settings`, with an `admin` client opened before them and `move`, a
 * client opened after, which takes them.
 */
async function onDatabase(
  settings: Record<string, string>,
  test: (db: {
    kv: Deno.Kv;
    admin: postgres.Sql;
    move: postgres.Sql;
  }) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_settings_" });
  const kv = await Deno.openKv(`${dir}/relayer.kv`);
  const database = await freshDatabase();
  const admin = postgres(database.url, { max: 2, onnotice: () => {} });
  let move: postgres.Sql | undefined;
  try {
    await new KvStore(kv).createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    await new PostgresStore(admin, { schema: "relayer" }).migrate();
    const name = new URL(database.url).pathname.slice(1);
    for (const [setting, value] of Object.entries(settings)) {
      await admin.unsafe(
        `ALTER DATABASE "${name}" SET ${setting} = '${value}'`,
      );
    }
    move = postgres(database.url, { max: 1, onnotice: () => {} });
    await test({ kv, admin, move });
  } finally {
    await move?.end({ timeout: 1 });
    await admin.end({ timeout: 1 });
    await database.drop();
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const counts = async (sql: postgres.Sql) =>
  (await sql`
    SELECT (SELECT count(*) FROM relayer.intents)::int AS intents,
      (SELECT count(*) FROM relayer.holds)::int AS holds,
      (SELECT count(*) FROM relayer.counters)::int AS counts`)[0];

Deno.test({
  name:
    "moveKvToPostgres() waits for the store's tables as long as it bounds that wait, though the database's statement_timeout is shorter, and keeps that setting for the session",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        { statement_timeout: "300ms" },
        async ({ kv, admin, move }) => {
          const [shown] = await move`SHOW statement_timeout`;
          assert.equal(shown?.statement_timeout, "300ms");
          // A session that writes the tables (a report's, a job's by hand),
          // its transaction open for 800 ms: the move's lock waits for it.
          const other = await admin.reserve();
          try {
            await other.unsafe(
              "BEGIN; SELECT 1 FROM relayer.counters FOR UPDATE",
            );
            const ended = new Promise((resolve) => setTimeout(resolve, 800))
              .then(() => other.unsafe("COMMIT"));
            const started = performance.now();
            // Before: "canceling statement due to statement timeout" (57014)
            // at 300 ms, while the other session held the tables.
            const report = await moveKvToPostgres(kv, move, { now: () => T0 })
              .catch((error) => `${error.name}: ${error.message}`);
            await ended;
            assert.equal(
              typeof report === "string" ? report : report.moved.intents,
              1,
            );
            assert.ok(performance.now() - started >= 700);
          } finally {
            other.release();
          }
          assert.deepEqual(await counts(admin), {
            intents: 1,
            holds: 1,
            counts: 0,
          });
          // Raised for the move's transaction only.
          const [after] = await move`SHOW statement_timeout`;
          assert.equal(after?.statement_timeout, "300ms");
        },
      ),
  ),
});

for (const isolation of ["repeatable read", "serializable"]) {
  Deno.test({
    name:
      `moveKvToPostgres() under default_transaction_isolation = '${isolation}' sees a row another session committed while the move waited for the tables, and refuses the schema as holding it`,
    ignore,
    fn: timeout(
      20_000,
      () =>
        onDatabase(
          { default_transaction_isolation: isolation },
          async ({ kv, admin, move }) => {
            // A service started on the schema: its readiness probe writes a
            // count, in a transaction still open when the move begins.
            const other = await admin.reserve();
            try {
              await other.unsafe(
                `BEGIN ISOLATION LEVEL READ COMMITTED;
                INSERT INTO relayer.counters (job_id, deliveries, expires_at)
                  VALUES ('ready/probe', 1, ${T0 + 60_000})`,
              );
              const ended = new Promise((resolve) => setTimeout(resolve, 500))
                .then(() => other.unsafe("COMMIT"));
              // Before: the move's snapshot, taken before its lock, did not
              // see the count, and it moved into a schema that held one.
              const outcome = await moveKvToPostgres(kv, move, {
                now: () => T0,
              }).then(
                (report) => `moved ${report.moved.intents}`,
                (error) => error,
              );
              await ended;
              assert.ok(outcome instanceof ConflictError, String(outcome));
              assert.match(
                outcome.message,
                /^Cannot move into schema relayer as it already holds 1 count: a move goes into an empty schema only\./,
              );
            } finally {
              other.release();
            }
            assert.deepEqual(await counts(admin), {
              intents: 0,
              holds: 0,
              counts: 1,
            });
          },
        ),
    ),
  });
}

Deno.test({
  name:
    "moveKvToPostgres() under session_replication_role = replica (no foreign key enforced) refuses a hold whose intent Deno KV does not hold, and writes nothing",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        { session_replication_role: "replica" },
        async ({ kv, admin, move }) => {
          const [shown] = await move`SHOW session_replication_role`;
          assert.equal(shown?.session_replication_role, "replica");
          await kv.set(["relayer", "hold", "pi_ghost"], "pending");
          // Before: moved, 1 intent and 2 holds, one of them of no intent.
          const outcome = await moveKvToPostgres(kv, move, { now: () => T0 })
            .then(
              (report) => `moved ${report.moved.holds} holds`,
              (error) => error,
            );
          assert.ok(outcome instanceof TypeError, String(outcome));
          assert.match(
            outcome.message,
            /^Cannot move from Deno KV as it holds the hold of an intent it does not hold \(.*pi_ghost.*\): no read of either store finds that hold; delete it, then run the move again\. Nothing was moved\.$/,
          );
          assert.deepEqual(await counts(admin), {
            intents: 0,
            holds: 0,
            counts: 0,
          });
          // Deleted, the store moves.
          await kv.delete(["relayer", "hold", "pi_ghost"]);
          const report = await moveKvToPostgres(kv, move, { now: () => T0 });
          assert.deepEqual([report.moved.intents, report.moved.holds], [1, 1]);
        },
      ),
  ),
});

Deno.test({
  name:
    "moveKvToPostgres() keeps its transaction through a read of Deno KV longer than the database's idle_in_transaction_session_timeout (a store read over KV Connect)",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        { idle_in_transaction_session_timeout: "300ms" },
        async ({ kv, admin, move }) => {
          // Each read of the whole store answers after 500 ms, as a page of
          // a store read over KV Connect may: the transaction sends no
          // statement meanwhile.
          const slow = {
            getMany: kv.getMany.bind(kv),
            atomic: kv.atomic.bind(kv),
            list: (
              selector: { prefix: Deno.KvKey },
              options?: { limit?: number },
            ) => {
              const entries = kv.list(selector, options);
              if (selector.prefix.length !== 1 || options?.limit) {
                return entries;
              }
              return (async function* () {
                await new Promise((resolve) => setTimeout(resolve, 500));
                yield* entries;
              })();
            },
          };
          // Before: "Cannot move into schema relayer as PostgreSQL lost the
          // connection during the move (… idle-in-transaction timeout …)",
          // and so on every run again.
          const outcome = await moveKvToPostgres(slow, move, { now: () => T0 })
            .then(
              (report) => report.moved.intents,
              (error) => `${error.name}: ${error.message}`,
            );
          assert.equal(outcome, 1);
          assert.deepEqual(await counts(admin), {
            intents: 1,
            holds: 1,
            counts: 0,
          });
        },
      ),
  ),
});

Deno.test({
  name:
    "moveKvToPostgres() runs its transaction under a statement_timeout above its 10 s wait for the tables, and an idle_in_transaction_session_timeout above a long read of Deno KV, though the database's are 300 ms",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        {
          statement_timeout: "300ms",
          idle_in_transaction_session_timeout: "300ms",
        },
        async ({ kv, move }) => {
          // What the move's transaction runs under, asked in it as it ends.
          let inside: Record<string, number> = {};
          const client = new Proxy(move, {
            get(target, key) {
              if (key !== "begin") return Reflect.get(target, key);
              return (isolation: string, body: (tx: unknown) => unknown) =>
                target.begin(isolation, async (tx) => {
                  const done = await body(tx);
                  inside = Object.fromEntries(
                    (await tx`
                      SELECT name, setting::int AS ms FROM pg_catalog.pg_settings
                      WHERE name IN ('statement_timeout', 'idle_in_transaction_session_timeout')`)
                      .map((row) => [row.name, row.ms]),
                  );
                  return done;
                });
            },
          });
          const report = await moveKvToPostgres(kv, client, { now: () => T0 });
          assert.equal(report.moved.intents, 1);
          // The lock_timeout (10 s) ends the wait for the tables, not the
          // statement_timeout; a read of Deno KV may take minutes.
          assert.ok(inside.statement_timeout! > 10_000, JSON.stringify(inside));
          assert.ok(
            inside.idle_in_transaction_session_timeout! >= 60_000,
            JSON.stringify(inside),
          );
        },
      ),
  ),
});

Deno.test({
  name:
    "moveKvToPostgres() on a database whose idle_in_transaction_session_timeout of 1ms ends its transaction either moves or names that setting and to raise it, not 'run the move again once the database answers' alone",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        { idle_in_transaction_session_timeout: "1ms" },
        async ({ kv, admin, move }) => {
          // Before: "Cannot move into schema relayer as PostgreSQL lost the
          // connection during the move (Error: write CONNECTION_CLOSED …):
          // run the move again once the database answers. …", its three
          // settings sent one by one, each a round trip idle in the
          // transaction.
          for (let i = 0; i < 3; i++) {
            const report = await moveKvToPostgres(kv, move, { now: () => T0 })
              .catch((error: Error) => error);
            if (!(report instanceof Error)) {
              assert.equal(report.moved.intents, 1);
              break;
            }
            assert.match(
              report.message,
              /^Cannot move into schema relayer as PostgreSQL lost the connection during the move \(.*\), and the role's or database's idle_in_transaction_session_timeout is 1ms, shorter than a round trip between a transaction's messages: raise it to 1s or more \(SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'\), then run the move again\. Cut before its commit, the transaction rolled back and nothing was moved; /,
            );
            assert.deepEqual(await counts(admin), {
              intents: 0,
              holds: 0,
              counts: 0,
            });
          }
        },
      ),
  ),
});

Deno.test({
  name:
    "moveKvToPostgres() whose session a short idle_in_transaction_session_timeout ended right after its BEGIN names that setting and to raise it, and moves nothing",
  ignore,
  fn: timeout(
    20_000,
    () =>
      onDatabase(
        { idle_in_transaction_session_timeout: "20ms" },
        async ({ kv, admin, move }) => {
          // Its transaction held 200 ms between its BEGIN and its first
          // message: the server ends the session at 20 ms, every time.
          const { sql, held } = heldAfterBegin(move, 200);
          try {
            await assert.rejects(
              moveKvToPostgres(kv, sql, { now: () => T0 }),
              (error: Error) => {
                assert.match(
                  error.message,
                  /^Cannot move into schema relayer as PostgreSQL lost the connection during the move \(.*\), and the role's or database's idle_in_transaction_session_timeout is 20ms, shorter than a round trip between a transaction's messages: raise it to 1s or more \(SHOW idle_in_transaction_session_timeout; ALTER ROLE … SET idle_in_transaction_session_timeout = '1s'\), then run the move again\. Cut before its commit, the transaction rolled back and nothing was moved; /,
                );
                return true;
              },
            );
          } finally {
            await held();
          }
          assert.deepEqual(await counts(admin), {
            intents: 0,
            holds: 0,
            counts: 0,
          });
        },
      ),
  ),
});
