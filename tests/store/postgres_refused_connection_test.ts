/**
 * PostgresStore while the server refuses it new connections, its cause
 * arising under a live pool: the role's password expired (`VALID UNTIL`),
 * the database renamed. Each call says what to do, and that nothing was
 * read or written (a write's refusal is marked so); once the cause goes,
 * the store works again, with nothing written twice.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { isNotWritten } from "../../store/_not_written.ts";
import { describeError } from "../../policy/_walk.ts";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import {
  freshDatabase,
  postgresAvailable,
  sharedClient,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { relayed } from "./_cut.ts";

const ignore = !postgresAvailable;

/** The first of up to 6 failures of `call` that is not a lost connection's (the pool's, ended under it). */
async function refusal(call: () => Promise<unknown>): Promise<Error> {
  let last: unknown;
  for (let i = 0; i < 6; i++) {
    // Spaced, as a queue's redeliveries are: tried at once, the pool's
    // connections just ended answer with their loss.
    await new Promise((resolve) => setTimeout(resolve, 300));
    try {
      await call();
    } catch (error) {
      last = error;
      if (!/lost the connection/.test((error as Error).message)) {
        return error as Error;
      }
      continue;
    }
    assert.fail("the call answered");
  }
  throw last;
}

/**
 * A fresh database owned by a new login role, a store of that role on it
 * (migrated, intent `pi_1` created), `admin` (the run's superuser) and
 * `endSessions()`, which ends the role's sessions.
 */
async function onLiveStore(
  test: (db: {
    admin: postgres.Sql;
    role: string;
    name: string;
    store: PostgresStore;
    endSessions: () => Promise<void>;
  }) => Promise<void>,
  fetchTypes = true,
  hold?: (text: string) => Promise<void>,
): Promise<void> {
  const admin = await sharedClient();
  const role = `r${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin.unsafe(`CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw'`);
  const database = await freshDatabase();
  const name = new URL(database.url).pathname.slice(1);
  await admin.unsafe(`ALTER DATABASE "${name}" OWNER TO "${role}"`);
  const login = new URL(database.url);
  login.username = role;
  login.password = `${role}-pw`;
  // Through a relay that holds each chunk the client sends for `hold`.
  const relay = new AbortController();
  const url = hold === undefined
    ? login.href
    : relayed(login.href, hold, relay.signal);
  const sql = postgres(url, {
    max: 2,
    onnotice: () => {},
    max_lifetime: null,
    backoff: reconnectBackoffS,
    fetch_types: fetchTypes,
  });
  const store = new PostgresStore(sql, { connectionWaitMs: 2_000 });
  try {
    await store.migrate();
    await store.createIntent({ id: "pi_1", hold: "pending" });
    await test({
      admin,
      role,
      name,
      store,
      async endSessions() {
        await admin`
          SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE usename = ${role}`;
      },
    });
  } finally {
    store.close();
    await sql.end({ timeout: 1 });
    relay.abort();
    await admin`
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE usename = ${role}`;
    await database.drop();
    await admin.unsafe(`DROP ROLE IF EXISTS "${role}"`);
  }
}

Deno.test({
  name:
    "PostgresStore, its role's password expired under a live pool, says what to do at each call, nothing read or written, and works once it is renewed",
  ignore,
  fn: timeout(
    30_000,
    () =>
      onLiveStore(async ({ admin, role, store, endSessions }) => {
        await admin.unsafe(`ALTER ROLE "${role}" VALID UNTIL '2000-01-01'`);
        await endSessions();
        // Before: the server's words alone, 'password authentication failed
        // for user "r…"'.
        const read = await refusal(() => store.getIntent("pi_1"));
        assert.equal(
          read.message,
          `The store's read failed as PostgreSQL refused a connection (PostgresError: password authentication failed for user "${role}"): check the client's user and password, and pg_roles.rolvaliduntil (an expired password: ALTER ROLE … VALID UNTIL); nothing was read, so try again then`,
        );
        const write = await refusal(() =>
          store.createIntent({ id: "pi_2", hold: "pending" })
        );
        assert.match(
          write.message,
          /^Cannot create intent pi_2 as PostgreSQL refused a connection \(PostgresError: password authentication failed for user "r[0-9a-f]+"\): .*; nothing was written, so try again then$/,
        );
        // Whole in the log line (cut at 300 characters): what to do too.
        assert.ok(describeError(write).endsWith("so try again then"));
        assert.ok(isNotWritten(write));

        await admin.unsafe(`ALTER ROLE "${role}" VALID UNTIL 'infinity'`);
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        assert.equal(await store.getIntent("pi_2"), null);
        await store.createIntent({ id: "pi_2", hold: "pending" });
        assert.equal(await store.admit({ count: "pi_2/settle", now: 1 }), 1);
      }),
  ),
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `PostgresStore, its role's password expired under a live pool, fails each write tried at once with what to do, one that sent nothing marked so, never in the engine's bare words (fetch_types: ${fetchTypes})`,
    ignore,
    fn: timeout(
      30_000,
      () =>
        onLiveStore(async ({ admin, role, store, endSessions }) => {
          await admin.unsafe(`ALTER ROLE "${role}" VALID UNTIL '2000-01-01'`);
          await endSessions();
          // Tried at once, as the deliveries that were waiting are: some of
          // the connections opened for them are reset before the server's
          // refusal is read. Before: a write whose connection was so reset
          // before the pool handed it over failed with 'read ECONNRESET'
          // alone, not marked as not written, which an ops route answered
          // as a write that may have landed.
          await store.getIntent("pi_1").catch(() => {});
          for (let i = 0; i < 3; i++) {
            await assert.rejects(
              store.admit({ count: "pi_1/settle", now: 1 }),
              (error: Error) => {
                assert.doesNotMatch(error.message, /^(?:read|write) [A-Z_]+/);
                // One whose connection was handed over before its reset
                // errs on the safe side: it may have landed.
                assert.match(
                  error.message,
                  /nothing was written, so try again|it may have landed or not/,
                );
                if (/before any of it was sent/.test(error.message)) {
                  assert.ok(isNotWritten(error));
                }
                return true;
              },
            );
          }
          // Renewed, the store works again (and postgres.js's reconnect
          // timers end with the connections it opens).
          await admin.unsafe(`ALTER ROLE "${role}" VALID UNTIL 'infinity'`);
          // A connect begun before the renewal may still answer its
          // refusal: spaced, as a queue's redeliveries are.
          for (let i = 0;; i++) {
            await new Promise((resolve) => setTimeout(resolve, 300));
            const read = await store.getIntent("pi_1").catch((error) => {
              if (i >= 5) throw error;
              return undefined;
            });
            if (read !== undefined) break;
          }
          assert.equal(
            await store.admit({ count: "pi_1/settle", now: 1 }),
            1,
          );
        }, fetchTypes),
    ),
  });
}

for (const fetchTypes of [true, false]) {
  let renew: (() => Promise<void>) | undefined;
  Deno.test({
    name:
      `PostgresStore reads once more after a login its role's password was refused at (28P01), so a connect begun before the password's renewal and refused after it fails no read (fetch_types: ${fetchTypes})`,
    ignore,
    fn: timeout(
      30_000,
      () =>
        onLiveStore(
          async ({ admin, role, store, endSessions }) => {
            await admin.unsafe(
              `ALTER ROLE "${role}" VALID UNTIL '2000-01-01'`,
            );
            await endSessions();
            // The server read the role's expiry as the login began, and
            // refuses it at the login's end: the client's password
            // message is held until the renewal has landed.
            renew = async () => {
              renew = undefined;
              await admin.unsafe(
                `ALTER ROLE "${role}" VALID UNTIL 'infinity'`,
              );
            };
            // Spaced, as a queue's redelivery is: tried at once, the
            // pool's connection just ended may answer with its loss.
            await new Promise((resolve) => setTimeout(resolve, 300));
            // Before: "The store's read failed as PostgreSQL refused a
            // connection (PostgresError: password authentication failed
            // …)", its password renewed.
            assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
            assert.equal(renew, undefined, "no login was held");
          },
          fetchTypes,
          async (text) => {
            // A password message ('p'), before it goes on.
            if (text.startsWith("p")) await renew?.();
          },
        ),
    ),
  });
}

Deno.test({
  name:
    "PostgresStore, its database renamed under a live pool, says what to do at each call, and works once the name is back",
  ignore,
  fn: timeout(
    30_000,
    () =>
      onLiveStore(async ({ admin, name, store, endSessions }) => {
        await endSessions();
        await admin.unsafe(`ALTER DATABASE "${name}" RENAME TO "${name}_x"`);
        try {
          const read = await refusal(() => store.getIntent("pi_1"));
          assert.equal(
            read.message,
            `The store's read failed as PostgreSQL refused a connection (PostgresError: database "${name}" does not exist): its database was renamed or dropped; restore it, or point the client at the service's database; nothing was read, so try again then`,
          );
          const write = await refusal(() =>
            store.admit({ count: "pi_1/settle", now: 1 })
          );
          assert.match(
            write.message,
            /^Cannot admit a delivery as PostgreSQL refused a connection \(PostgresError: database "\w+" does not exist\): .*; nothing was written, so try again then$/,
          );
          assert.ok(describeError(write).endsWith("so try again then"));
          assert.ok(isNotWritten(write));
        } finally {
          await admin.unsafe(`ALTER DATABASE "${name}_x" RENAME TO "${name}"`);
        }
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        assert.equal(await store.admit({ count: "pi_1/settle", now: 2 }), 1);
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore, its role's CONNECTION LIMIT reached under a live pool (53300), says what to do at each call, nothing read or written, and works once a slot is free",
  ignore,
  fn: timeout(
    30_000,
    () =>
      onLiveStore(async ({ admin, role, store, endSessions }) => {
        // No slot for the role at all: each new connection of the store
        // is refused, as when other clients of the role hold every slot.
        await admin.unsafe(`ALTER ROLE "${role}" CONNECTION LIMIT 0`);
        await endSessions();
        // Before: the server's words alone, 'too many connections for role
        // "r…"', with nothing on what to do.
        const read = await refusal(() => store.getIntent("pi_1"));
        assert.equal(
          read.message,
          `The store's read failed as PostgreSQL has no connection slot left for it (PostgresError: too many connections for role "${role}"): end idle sessions (see pg_stat_activity), raise that limit, or lower the pool's max; nothing was read, so try again`,
        );
        const write = await refusal(() =>
          store.createIntent({ id: "pi_2", hold: "pending" })
        );
        assert.match(
          write.message,
          /^Cannot create intent pi_2 as PostgreSQL has no connection slot left for it \(PostgresError: too many connections for role "r[0-9a-f]+"\): end idle sessions \(see pg_stat_activity\), raise that limit, or lower the pool's max; nothing was written, so try again$/,
        );
        assert.ok(isNotWritten(write));

        await admin.unsafe(`ALTER ROLE "${role}" CONNECTION LIMIT -1`);
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        assert.equal(await store.getIntent("pi_2"), null);
        await store.createIntent({ id: "pi_2", hold: "pending" });
        assert.equal(await store.admit({ count: "pi_2/settle", now: 1 }), 1);
      }),
  ),
});

Deno.test({
  name:
    "PostgresStore.migrate() on a client whose URL carries a libpq parameter postgres.js sends the server as a setting (sslrootcert, channel_binding) names it and says to remove it, never its value",
  ignore,
  fn: timeout(20_000, async () => {
    const database = await freshDatabase();
    const { url } = database;
    try {
      for (
        const [query, name, more] of [
          [
            "?sslrootcert=%2Fsecret%2Fca.pem",
            "sslrootcert",
            /DENO_CERT=<file>/,
          ],
          ["?channel_binding=require", "channel_binding", /option$/],
        ] as const
      ) {
        const sql = postgres(url + query, { max: 2, onnotice: () => {} });
        try {
          // Before: the server's words alone, 'unrecognized configuration
          // parameter "channel_binding"', read as the server's fault.
          await assert.rejects(
            new PostgresStore(sql).migrate(),
            (error: Error) => {
              assert.match(
                error.message,
                new RegExp(
                  `^Cannot migrate the PostgreSQL schema "relayer" as the server refused the setting "${name}" the client sends at each connect \\(unrecognized configuration parameter "${name}"\\): postgres\\.js sends each parameter of the URL's query it does not read itself \\(libpq's sslrootcert and channel_binding among them\\) as a server setting; remove it from the URL`,
                ),
              );
              assert.match(error.message, more);
              assert.doesNotMatch(error.message, /secret|require/);
              return true;
            },
          );
        } finally {
          await sql.end();
        }
      }
    } finally {
      await database.drop();
    }
  }),
});
