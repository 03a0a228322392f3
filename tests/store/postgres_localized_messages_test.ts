/**
 * PostgresStore on a server whose words are German: `lc_messages` follows
 * the system's locale when the cluster is made (Debian's `pg_createcluster`
 * on a German system writes `lc_messages = 'de_DE.UTF-8'`), and PostgreSQL
 * then words its errors and their context in that language; only the
 * SQLSTATE and the severity stay English. A write's cancel (`57014`) is
 * statement_timeout's or a `pg_cancel_backend`'s alike, and a wait for
 * another session's row is named only in the error's context. The store
 * must not then say that nothing held a row, nor blame statement_timeout
 * for an operator's cancel, nor lose the prepared transaction that holds
 * the row.
 *
 * Here the server runs with `LANGUAGE=de` and `lc_messages = 'C.UTF-8'`
 * (gettext reads `LANGUAGE` under any locale but C), as no German locale
 * need be installed.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { BusyError } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import {
  postgresAvailable,
  rollbackPrepared,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

serverUpFirst();

/** Moves intent `a` from authorized to settling on `store`: its error. */
function settling(store: PostgresStore): Promise<Error> {
  return store.transition("a", {
    from: "authorized",
    to: "settling",
    version: "1",
    at: 1,
  }).then(() => assert.fail("the write went on"), (error: Error) => error);
}

Deno.test({
  name:
    "PostgresStore on a server whose words are German: a write whose wait for another session's row a cancel ended says it waited for that row, names a prepared transaction that holds it, and blames neither statement_timeout nor a cancel alone",
  ignore: !postgresAvailable,
  fn: timeout(90_000, async () => {
    const server = await startPostgres({
      settings: { lc_messages: "C.UTF-8", max_prepared_transactions: "4" },
      env: { LANGUAGE: "de" },
    });
    const admin = postgres(server.url, { max: 2, onnotice: () => {} });
    // The role's statement_timeout below the write's lock_timeout (half of
    // connectionWaitMs): it ends a wait for a row first.
    const timed = postgres(server.url, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
      connection: { statement_timeout: 300 },
    });
    const plain = postgres(server.url, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const options = { schema: "relayer", connectionWaitMs: 2_000 };
    const short = new PostgresStore(timed, options);
    const store = new PostgresStore(plain, options);
    try {
      await store.migrate();
      await store.createIntent({
        id: "a",
        state: "authorized",
        hold: "pending",
      });
      // The server's words are German indeed.
      await assert.rejects(admin`SELECT 1/0`, /^PostgresError: Division/);

      // Another session holds the row; pg_cancel_backend ends the wait.
      // Before: "… as statement_timeout cancelled its statement, which
      // waited for no row another session held (storniere Anfrage wegen
      // Benutzeraufforderung): the role's statement_timeout is too short
      // for the store's writes …": no timeout was set, and a row was held.
      const cancelled = await admin.begin(async (tx) => {
        await tx`SELECT id FROM relayer.intents WHERE id = 'a' FOR UPDATE`;
        const written = settling(store);
        for (let waited = 0;; waited += 20) {
          const [row] = await admin`
            SELECT pg_catalog.pg_cancel_backend(pid) AS done
            FROM pg_catalog.pg_stat_activity
            WHERE wait_event_type = 'Lock' AND datname = current_database()`;
          if (row?.done === true) break;
          assert.ok(waited < 10_000, "the write never waited for the row");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return await written;
      });
      assert.ok(cancelled instanceof BusyError, String(cancelled));
      assert.match(
        cancelled.message,
        /^Cannot move a from authorized to settling as a cancel ended its wait for a row another session held \(storniere Anfrage wegen Benutzeraufforderung beim Sperren von Tupel \(0,\d+\) in Relation »intents«; see pg_locks and pg_stat_activity\): the role's statement_timeout or a cancel \(another session's pg_cancel_backend\), which the server's words in another language than English \(lc_messages\) do not tell apart \(SHOW statement_timeout: 0 is off, so a cancel; a superuser's ALTER ROLE … SET lc_messages = 'C' gives the store's role English words\): nothing was written; retry$/,
      );

      // A prepared transaction holds it; the role's statement_timeout ends
      // the wait. Before: "… as statement_timeout cancelled its
      // statement, which waited for no row another session held (…)",
      // naming no gid: pg_stat_activity shows no session holding it.
      const other = await admin.reserve();
      try {
        await other.unsafe(
          `BEGIN; UPDATE relayer.intents SET last_error = last_error WHERE id = 'a'`,
        );
        await other.unsafe(`PREPARE TRANSACTION 'tm-4711'`);
      } finally {
        other.release();
      }
      const held = await settling(short);
      assert.ok(held instanceof BusyError, String(held));
      assert.match(
        held.message,
        /^Cannot move a from authorized to settling as a prepared transaction held a row it needed until its wait was cancelled \(storniere Anfrage wegen Zeitüberschreitung der Anfrage beim Sperren von Tupel \(0,\d+\) in Relation »intents«\), by the role's statement_timeout or a cancel \(another session's pg_cancel_backend\), which .+: 'tm-4711', prepared at .+ by .+\. No session holds it, so pg_stat_activity shows none: once the application that prepared it has given up on it, end it with COMMIT PREPARED 'tm-4711' or ROLLBACK PREPARED 'tm-4711' \(see pg_prepared_xacts\)\. Nothing was written; retry$/,
      );
      await admin.unsafe(`ROLLBACK PREPARED 'tm-4711'`);
      const moved = await store.transition("a", {
        from: "authorized",
        to: "settling",
        version: "1",
        at: 1,
      });
      assert.equal(moved.state, "settling");
    } finally {
      short.close();
      store.close();
      await rollbackPrepared(admin);
      await timed.end({ timeout: 0 }).catch(() => {});
      await plain.end({ timeout: 0 }).catch(() => {});
      await admin.end({ timeout: 0 }).catch(() => {});
      await server.stop();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() on a server whose words are German names a role's missing USAGE on the schema and what to grant, a cancel of its check as statement_timeout's or a pg_cancel_backend's, with what to raise, and a setting of the URL the server does not know, where the server's words came alone",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const server = await startPostgres({
      settings: { lc_messages: "C.UTF-8" },
      env: { LANGUAGE: "de" },
    });
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    const url = new URL(server.url);
    url.username = "svc";
    url.password = "svc";
    /** A store of the role svc on a client of its own: its migrate()'s error. */
    const migrated = async () => {
      const sql = postgres(url.href, {
        max: 2,
        onnotice: () => {},
        max_lifetime: null,
      });
      const store = new PostgresStore(sql, { schema: "relayer" });
      try {
        return await store.migrate().then(() => null, (error: Error) => error);
      } finally {
        store.close();
        await sql.end({ timeout: 0 });
      }
    };
    try {
      await new PostgresStore(admin, { schema: "relayer" }).migrate();
      await admin.unsafe(`CREATE ROLE svc LOGIN PASSWORD 'svc'`);
      // Before: "keine Berechtigung für Schema relayer", alone.
      assert.equal(
        (await migrated())?.message,
        `Cannot use the PostgreSQL schema "relayer" as this role lacks USAGE on it (keine Berechtigung für Schema relayer): grant it (GRANT USAGE ON SCHEMA "relayer" TO "svc") with the grants docs/postgres.md lists for a service role, or run as the schema's owner`,
      );
      await admin.unsafe(`GRANT USAGE ON SCHEMA relayer TO svc`);
      await admin.unsafe(`ALTER ROLE svc SET statement_timeout = '1ms'`);
      // Before: "storniere Anfrage wegen Zeitüberschreitung der Anfrage",
      // alone.
      assert.equal(
        (await migrated())?.message,
        `Cannot migrate the PostgreSQL schema "relayer" as a cancel cut its statement (storniere Anfrage wegen Zeitüberschreitung der Anfrage): the role's statement_timeout or a cancel (another session's pg_cancel_backend), which the server's words in another language than English (lc_messages) do not tell apart (SHOW statement_timeout: 0 is off, so a cancel; a superuser's ALTER ROLE … SET lc_messages = 'C' gives the store's role English words); where the role's or database's statement_timeout is too short for the migration's check of the schema, raise it to 1s or more with ALTER ROLE … SET statement_timeout, then run migrate() again`,
      );
      // A libpq parameter of the URL, which postgres.js sends the server
      // as a setting. Before: "unbekannter Konfigurationsparameter
      // »sslrootcert«", alone, read as the server's fault.
      const query = postgres(`${server.url}?sslrootcert=%2Fsecret%2Fca.pem`, {
        max: 2,
        onnotice: () => {},
      });
      try {
        const refused = await new PostgresStore(query).migrate().then(
          () => assert.fail("migrated"),
          (error: Error) => error.message,
        );
        assert.match(
          refused,
          /^Cannot migrate the PostgreSQL schema "relayer" as the server refused the setting "sslrootcert" the client sends at each connect \(unbekannter Konfigurationsparameter »sslrootcert«\): postgres\.js sends each parameter of the URL's query it does not read itself /,
        );
        assert.doesNotMatch(refused, /secret/);
      } finally {
        await query.end({ timeout: 0 });
      }
      // The cure the words name: English words for the role.
      await admin.unsafe(`ALTER ROLE svc SET lc_messages = 'C'`);
      assert.match(
        (await migrated())?.message ?? "",
        /^Cannot migrate the PostgreSQL schema "relayer" as statement_timeout cancelled its statement \(canceling statement due to statement timeout\): /,
      );
    } finally {
      await admin.end({ timeout: 0 }).catch(() => {});
      await server.stop();
    }
  }),
});
